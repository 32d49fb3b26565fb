"""The command line ``python -m model``: JSON schemas, paper numbers, listings, CSV, clean errors.

Runs ``main([...])`` in-process (fast); one subprocess checks the real ``python -m model`` entry.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from model.cli.commands import main
from model.specs.hardware import list_systems
from model.specs.transformer import list_models

ROOT = Path(__file__).resolve().parent.parent
PAPER_SEARCH = ["search", "--model", "gpt3-1t", "--system", "paper-h200", "--nvs", "8",
                "--gpus", "512", "--strategy", "1d", "--mode", "paper"]
PAPER_CONFIG = ["--tp", "4", "--pp", "64", "--dp", "2", "--microbatch", "1"]
PAPER_EVALUATE = ["evaluate", "--model", "gpt3-1t", "--system", "paper-h200", "--nvs", "8",
                  "--gpus", "512", "--strategy", "1d", "--mode", "paper", *PAPER_CONFIG]
PAPER_BEST = 28.62912724154006
H200 = ["--model", "gpt3-1t", "--system", "h200"]
CONFIG_KEYS = {"samples_per_s": float, "tokens_per_s": float, "iteration_time_s": float,
               "memory_gb": float, "train_days": float, "mfu": float, "strategy": str,
               "fits": bool, **{k: int for k in ("gpus", "dp", "tp1", "tp2", "cp", "pp",
                                                  "microbatch", "nb", "nv_tp1", "nv_tp2",
                                                  "nv_cp", "nv_dp", "nv_pp")}}


def run_json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> dict | list:
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def run_text(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 0 and err == "", err
    return out


def check_config(row: dict) -> None:
    for key, kind in CONFIG_KEYS.items():
        assert isinstance(row[key], kind) and not (kind is int and isinstance(row[key], bool)), key


# --- search -------------------------------------------------------------------------------------
def test_search_json_schema_and_paper_numbers(capsys: pytest.CaptureFixture[str]) -> None:
    out = run_json(capsys, [*PAPER_SEARCH, "--json", "--top", "5"])
    assert isinstance(out["candidates"], int) and isinstance(out["feasible"], int)
    assert isinstance(out["elapsed_s"], float)
    [res] = out["results"]
    assert (res["gpus"], res["strategy"], res["feasible"]) == (512, "1d", True)
    assert out["candidates"] == res["candidates"] and out["feasible"] == res["feasible_count"]
    assert 0 < len(res["top"]) <= 5 and res["best"] == res["top"][0]
    for row in res["top"]:
        check_config(row)
    best = res["best"]
    assert best["samples_per_s"] == pytest.approx(PAPER_BEST, rel=1e-9)
    expected = dict(dp=2, tp1=4, tp2=1, pp=64, microbatch=1, nv_tp1=4, nv_dp=1, nv_pp=2)
    assert {k: best[k] for k in expected} == expected
    speeds = [r["samples_per_s"] for r in res["top"]]
    assert speeds == sorted(speeds, reverse=True)


def test_search_all_strategies_per_gpu_count(capsys: pytest.CaptureFixture[str]) -> None:
    out = run_json(capsys, ["search", *H200, "--gpus", "512,4096", "--strategy", "all",
                            "--top", "2", "--json"])
    pairs = [(r["strategy"], r["gpus"]) for r in out["results"]]
    assert sorted(pairs) == sorted((s, n) for s in ("1d", "summa", "context")
                                   for n in (512, 4096))
    assert out["candidates"] == sum(r["candidates"] for r in out["results"])
    assert out["feasible"] == sum(r["feasible_count"] for r in out["results"])
    for res in out["results"]:
        assert res["feasible"] and res["best"] is not None
        check_config(res["best"])
        if res["strategy"] == "1d":
            assert all(r["tp2"] == 1 for r in res["top"])


def test_search_pins_respected(capsys: pytest.CaptureFixture[str]) -> None:
    out = run_json(capsys, ["search", *H200, "--gpus", "4096", "--strategy", "context",
                            "--tp", "8", "--tp2", "2", "--pp", "32", "--json"])
    [res] = out["results"]
    assert res["top"]
    # context parallelism is named cp in the output (issue 21), tp2 1
    assert all((r["tp1"], r["cp"], r["tp2"], r["pp"]) == (8, 2, 1, 32) for r in res["top"])


def test_search_infeasible_has_hint(capsys: pytest.CaptureFixture[str]) -> None:
    """Nothing fits: the report still prints, the reason goes to stderr, exit 3."""
    assert main(["search", *H200, "--gpus", "8", "--strategy", "1d", "--json"]) == 3
    captured = capsys.readouterr()
    [res] = json.loads(captured.out)["results"]
    assert res["feasible"] is False and res["best"] is None and res["top"] == []
    assert "more GPUs" in res["hint"] and captured.err.startswith("no answer: ")
    assert main(["search", *H200, "--gpus", "8", "--strategy", "1d"]) == 3
    text = capsys.readouterr().out
    assert "no configuration fits in HBM" in text and "try more GPUs" in text


def test_search_text_table(capsys: pytest.CaptureFixture[str]) -> None:
    text = run_text(capsys, [*PAPER_SEARCH, "--top", "3"])
    assert "1d on 512 GPUs" in text and "28.63 samples/s" in text
    for word in ("samples/s", "days", "placement", "memory GB", "MFU", "bubble", "4x1x1x2"):
        assert word in text


def test_search_csv(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "top.csv"
    text = run_text(capsys, ["search", *H200, "--gpus", "512,4096", "--strategy", "1d",
                             "--top", "3", "--csv", str(path)])
    assert str(path) in text and len(text.strip().splitlines()) == 1
    frame = pd.read_csv(path)
    assert len(frame) == 6 and set(frame["gpus"]) == {512, 4096}
    assert {"samples_per_s", "tp1", "nv_pp", "memory_gb"} <= set(frame.columns)


# --- evaluate -----------------------------------------------------------------------------------
def test_evaluate_json_matches_search_best(capsys: pytest.CaptureFixture[str]) -> None:
    out = run_json(capsys, [*PAPER_EVALUATE, "--json"])
    # issue 32: "fits" | "tight" | "no" with the memory interval; the old boolean: fits_bool
    assert out["fits"] in ("fits", "tight") and out["fits_bool"] is True
    assert out["samples_per_s"] == pytest.approx(PAPER_BEST, rel=1e-9)
    check_config({**out, "fits": out["fits_bool"]})
    for key in ("tokens_per_s", "iteration_time_s", "train_days", "memory_gb", "mfu"):
        assert isinstance(out[key], float)
    assert set(out["config"]) >= {"gpus", "strategy", "dp", "tp1", "tp2", "pp", "microbatch",
                                  "nb", "nv_tp1", "nv_tp2", "nv_dp", "nv_pp", "n_microbatches"}
    assert (out["config"]["nv_tp1"], out["config"]["nv_pp"]) == (4, 2)
    assert set(out["breakdown_s"]) == {"compute", "memory", "tp_comm", "ep_comm", "pp_comm",
                                       "dp_comm", "bubble", "optimizer", "offload"}
    assert out["breakdown_s"]["optimizer"] == 0.0  # the paper does not model the Adam step
    assert sum(out["breakdown_s"].values()) == pytest.approx(out["iteration_time_s"], rel=1e-9)
    assert set(out["memory_breakdown_gb"]) == {"weights", "gradients", "optimizer",
                                               "activations"}
    assert out["ops"] and {"op", "t_fwd_s", "t_iteration_s"} <= set(out["ops"][0])


def test_evaluate_text(capsys: pytest.CaptureFixture[str]) -> None:
    text = run_text(capsys, PAPER_EVALUATE)
    assert "fits in HBM" in text and "28.63 samples/s" in text and "attn/flash" in text


def test_evaluate_default_model_vit(capsys: pytest.CaptureFixture[str]) -> None:
    out = run_json(capsys, ["evaluate", "--model", "vit-era5", "--system", "h200", "--gpus",
                            "512", "--strategy", "summa", "--tp", "4", "--tp2", "4", "--pp", "1",
                            "--dp", "32", "--microbatch", "1", "--json"])
    assert out["config"]["tp2"] == 4 and isinstance(out["fits_bool"], bool)
    assert out["fits"] in ("fits", "tight", "no")


def test_evaluate_default_model_with_embedding(capsys: pytest.CaptureFixture[str]) -> None:
    out = run_json(capsys, ["evaluate", *H200, "--gpus", "512", "--strategy", "1d", "--tp",
                            "8", "--pp", "16", "--dp", "4", "--microbatch", "1", "--json"])
    assert any(op["op"] == "embed/lookup" for op in out["ops"])


# --- listings -----------------------------------------------------------------------------------
def test_systems_and_models(capsys: pytest.CaptureFixture[str]) -> None:
    systems = run_json(capsys, ["systems", "--json"])
    assert [s["name"] for s in systems] == list_systems()
    assert all(isinstance(s["nvlink_domain_size"], int) for s in systems)
    models = run_json(capsys, ["models", "--json"])
    assert [m["name"] for m in models] == list_models()
    gpt = next(m for m in models if m["name"] == "gpt3-1t")
    assert gpt["params_b"] == pytest.approx(1009, rel=1e-3)
    text = run_text(capsys, ["systems"])
    assert "paper-h200" in text and "HBM GB/s" in text
    text = run_text(capsys, ["models"])
    assert "llama3-70b" in text and "params (B)" in text


# --- errors -------------------------------------------------------------------------------------
def bad_model_file(tmp_path: Path) -> str:
    path = tmp_path / "broken.json"
    path.write_text('{"name": "broken", "layers": ', encoding="utf-8")
    return str(path)


EVAL = ["evaluate", *H200, "--strategy", "1d", "--microbatch", "1"]
BAD_INPUTS = {
    "unknown model": ["search", "--model", "nope", "--system", "h200", "--gpus", "512",
                      "--strategy", "1d"],
    "unknown system": ["search", "--model", "gpt3-1t", "--system", "nope", "--gpus", "512",
                       "--strategy", "1d"],
    "gpus abc": ["search", *H200, "--gpus", "abc", "--strategy", "1d"],
    "gpus 0": ["search", *H200, "--gpus", "0", "--strategy", "1d"],
    "gpus -4": ["search", *H200, "--gpus", "-4", "--strategy", "1d"],
    "tp 3": [*EVAL, "--gpus", "4096", "--tp", "3", "--pp", "16", "--dp", "4"],
    "product": [*EVAL, "--gpus", "4096", "--tp", "8", "--pp", "16", "--dp", "4"],
    "unknown strategy": ["search", *H200, "--gpus", "512", "--strategy", "3d"],
    "evaluate all": [*EVAL[:-4], "--strategy", "all", "--gpus", "512", *PAPER_CONFIG],
    "malformed json": ["search", "--model", "{bad}", "--system", "h200", "--gpus", "512",
                       "--strategy", "1d"],
    "missing file": ["search", "--model", "{missing}", "--system", "h200", "--gpus", "512",
                     "--strategy", "1d"],
    "budget": ["search", *H200, "--gpus", "4096", "--strategy", "summa", "--budget", "10"],
    "csv dir": ["search", *H200, "--gpus", "512", "--strategy", "1d", "--csv", "{nodir}"],
    "invalid pin": ["search", *H200, "--gpus", "512", "--strategy", "1d", "--tp", "3"],
    "tp2 on 1d": ["search", *H200, "--gpus", "512", "--strategy", "1d", "--tp2", "2"],
    "no command": [],
    "unknown option": ["search", *H200, "--gpus", "512", "--strategy", "1d", "--bogus"],
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_single_error_line(case: str, tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    subst = {"{bad}": bad_model_file(tmp_path), "{missing}": str(tmp_path / "missing.json"),
             "{nodir}": str(tmp_path / "no" / "such" / "dir.csv")}
    argv = [subst.get(a, a) for a in BAD_INPUTS[case]]
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 2, (case, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    assert out == ""


def test_internal_error_is_one_line(monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    def boom(*args: object, **kwargs: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr("model.cli.listings.list_systems", boom)
    assert main(["systems"]) == 1
    err = capsys.readouterr().err
    assert err.strip() == "error: internal error: RuntimeError: boom"


def test_help_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["search", "--help"]) == 0
    assert "default: 4096" in capsys.readouterr().out


# --- the real entry point -----------------------------------------------------------------------
def test_python_dash_m_model_search_json() -> None:
    proc = subprocess.run([sys.executable, "-m", "model", *PAPER_SEARCH, "--json", "--top", "1"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    best = json.loads(proc.stdout)["results"][0]["best"]
    assert best["samples_per_s"] == pytest.approx(PAPER_BEST, rel=1e-9)


def test_ablation_lists_every_switch_and_default(capsys: pytest.CaptureFixture[str]) -> None:
    rows = run_json(capsys, ["ablation", "--model", "gpt3-1t", "--system", "paper-h200", "--nvs",
                             "8", "--gpus", "512", "--strategy", "1d", "--json"])
    labels = [r["mode"] for r in rows]
    assert labels[0].startswith("paper") and labels[-1].startswith("default")
    from model.specs.modes import SWITCHES
    assert len(rows) == len(SWITCHES) + 2  # paper, each switch fixed alone, default
    assert rows[0]["samples_per_s"] == pytest.approx(28.62912724154006, rel=1e-12)
    assert rows[0]["change_vs_paper"] == 0.0
    # fixing the free cross-domain pipeline links can only slow the paper's best down
    free_links = next(r for r in rows if "free_slow_pipeline_links" in r["mode"])
    assert free_links["samples_per_s"] <= rows[0]["samples_per_s"]
