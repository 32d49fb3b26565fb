"""What ``search`` prints is complete and honest: every choice that tells two rows apart, what was
searched, the ``evaluate`` command that reproduces its best row, MFU against the peak of the
precision used; and the command line answers as the Python API does.
"""

from __future__ import annotations

import json
import shlex

import pytest

from model import load_model, load_system, search
from model.cli import main
from model.specs.execution_variants import CHOICES as EXECUTION_COLUMNS

LLAMA70 = ["--model", "llama3-70b", "--system", "h100", "--gpus", "1024", "--global-batch",
           "1024", "--strategy", "1d", "--tp", "8"]


def run(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def reproduce_line(text: str) -> str:
    [line] = [ln.strip() for ln in text.splitlines() if ln.strip().startswith("reproduce: ")]
    return line.removeprefix("reproduce: ")


SEARCHES = [
    pytest.param([*LLAMA70, "--recompute", "all", "--interleave", "1,2"], id="1d-executions"),
    pytest.param(["--model", "gpt3-1t", "--system", "h200", "--nvs", "8", "--gpus", "512",
                  "--strategy", "summa", "--pp", "16", "--zero", "0", "--no-sequence-parallel",
                  "--fp32-gradients"], id="summa-panels"),
    pytest.param(["--model", "llama3-8b", "--system", "gb200-nvl72", "--gpus", "128",
                  "--global-batch", "256", "--strategy", "context", "--tp2", "2",
                  "--context-attention", "ring", "--precision", "fp8", "--tp-overlap"],
                 id="context-ring-fp8"),
    pytest.param(["--model", "gpt3-1t", "--system", "paper-h200", "--nvs", "8", "--gpus", "512",
                  "--strategy", "1d", "--mode", "paper"], id="paper"),
    pytest.param(["--model", "vit-era5", "--system", "a100", "--gpus", "256", "--strategy",
                  "context", "--offload", "optimizer", "--recompute", "full"], id="offload"),
    # an older stack: its defaults (no flash attention, replicated optimizer) are not evaluate's
    pytest.param(["--model", "gpt3-175b", "--system", "a100", "--gpus", "512", "--strategy", "1d",
                  "--stack", "megatron-lm-2021", "--global-batch", "1536"], id="stack-2021"),
    pytest.param([*LLAMA70, "--stack", "none", "--precision", "fp8-delayed"], id="no-stack"),
]


@pytest.mark.parametrize("argv", SEARCHES)
def test_the_printed_evaluate_command_reproduces_the_best_row(argv, capsys):
    text = run(capsys, ["search", *argv, "--top", "3"])
    best = json.loads(run(capsys, ["search", *argv, "--top", "3", "--json"]))["results"][0]
    command = shlex.split(reproduce_line(text))
    assert command[:3] == ["python", "-m", "model"] and command[3] == "evaluate"
    ev = json.loads(run(capsys, [*command[3:], "--json"]))
    want = best["best"]
    assert ev["iteration_time_s"] == pytest.approx(want["iteration_time_s"], rel=1e-12)
    for key in ("tp1", "tp2", "cp", "pp", "dp", "microbatch", "nb", "nv_tp1", "nv_tp2",
                "nv_cp", "nv_dp", "nv_pp", *EXECUTION_COLUMNS):
        assert ev[key] == want[key], key
    assert ev["fits_bool"] is True and ev["fits"] in ("fits", "tight")


def test_rows_differing_only_in_execution_show_the_difference(capsys):
    argv = ["search", *LLAMA70, "--recompute", "all", "--interleave", "1,2", "--top", "8"]
    top = json.loads(run(capsys, [*argv, "--json"]))["results"][0]["top"]
    text = run(capsys, argv)
    header, *rows = text[text.index("top 8:"):].splitlines()[1:10]
    assert len(rows) == len(top) == 8
    assert " V " in header  # interleaving tells these rows apart: it has a column
    config = ("dp", "tp1", "tp2", "pp", "microbatch", "nb", "nv_tp1", "nv_tp2", "nv_dp", "nv_pp")
    assert len({tuple(r[k] for k in config) for r in top}) < len(top)  # some share a config
    printed = [line.split()[3:] for line in rows]  # from dp on: configuration and choices
    assert len({tuple(p[:-2]) for p in printed}) == len(printed)  # every printed row distinct


def test_search_says_what_it_searched(capsys):
    one = run(capsys, ["search", *LLAMA70, "--top", "1"])
    # the default search: every interleaving, the fewest recomputed layers that fit
    assert "searched one execution: interleave every, recompute_layers auto, recompute " \
           "selective" in one
    many = run(capsys, ["search", *LLAMA70, "--recompute", "all", "--interleave", "1,2",
                        "--top", "1"])
    assert ("searched 8 executions: interleave 1|2 × recompute none|selective|op-sac|full"
            in many)
    out = json.loads(run(capsys, ["search", *LLAMA70, "--interleave", "1,2", "--json"]))
    assert len(out["executions"]) == 2 and out["searched"].startswith("2 executions")
    res = search(load_model("llama3-70b"), load_system("h100"), 1024, 1024, "1d",
                 pins={"tp1": 8}, execution={"interleave": [1, 2]})
    assert res.searched == out["searched"]


def test_the_command_line_and_the_api_answer_alike(capsys):
    """The same default execution: the README's search gives the same best row both ways."""
    out = json.loads(run(capsys, ["search", "--model", "llama3-70b", "--system", "h100",
                                  "--gpus", "1024", "--global-batch", "1024", "--strategy",
                                  "1d", "--tp", "8", "--json"]))
    res = search(load_model("llama3-70b"), load_system("h100"), 1024, 1024, "1d",
                 pins={"tp1": 8})
    cli_best, api_best = out["results"][0]["best"], res.best
    assert cli_best["iteration_time_s"] == api_best["iteration_time_s"]
    assert (cli_best["recompute"], cli_best["interleave"]) == (api_best["recompute"],
                                                              api_best["interleave"])
    assert out["searched"] == res.searched


def test_mfu_is_against_the_peak_of_the_precision_used(capsys):
    base = ["evaluate", "--model", "llama3-8b", "--system", "mi300x", "--gpus", "8",
            "--global-batch", "64", "--strategy", "1d", "--tp", "1", "--pp", "1", "--dp", "8",
            "--microbatch", "1", "--json"]
    bf16 = json.loads(run(capsys, base))
    fp8 = json.loads(run(capsys, [*base, "--precision", "fp8"]))
    system = load_system("mi300x")
    assert bf16["mfu_peak_tflops"] == system.matrix_tflops_fp16
    assert fp8["mfu_peak_tflops"] == system.matrix_tflops_fp8
    for row in (bf16, fp8):
        assert row["mfu"] == pytest.approx(row["model_tflops_per_gpu"] / row["mfu_peak_tflops"])
        assert 0 < row["mfu"] < row["hfu"] < 1
    assert fp8["model_tflops_per_gpu"] > bf16["model_tflops_per_gpu"]
    text = run(capsys, base[:-1] + ["--precision", "fp8"])
    assert f"of the fp8 peak {system.matrix_tflops_fp8:g} TFLOP/s" in text


def test_console_name_appears_in_usage_and_commands(capsys):
    assert main(["search", *LLAMA70, "--top", "1"], prog="tperf") == 0
    assert reproduce_line(capsys.readouterr().out).startswith("tperf evaluate --model llama3-70b")
    assert main(["--help"], prog="tperf") == 0
    assert capsys.readouterr().out.startswith("usage: tperf")
