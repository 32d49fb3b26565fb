"""Every number true (issue 21), precisions: MFU divides by the dense peak of the precision that
runs, and a GPU refuses, in one message, a format its tensor cores lack — the CLI, the API and
the dashboard's scenario validation alike (model/specs/precision.py: the format × generation
table)."""

from __future__ import annotations

import json

import pytest

from model import ModelError, evaluate, load_model, load_system
from model.cli import main
from model.specs.precision import PRECISIONS

EVAL = ["evaluate", "--model", "llama3-8b", "--gpus", "8", "--global-batch", "64",
        "--strategy", "1d", "--tp", "1", "--pp", "1", "--dp", "8", "--microbatch", "1"]


def _row(capsys: pytest.CaptureFixture[str], system: str, precision: str) -> dict:
    assert main([*EVAL, "--system", system, "--precision", precision, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("precision", ["fp8", "fp8-delayed", "fp8-blockwise", "mxfp8",
                                       "nvfp4"])
def test_mfu_is_against_the_dense_peak_of_the_format_that_runs(capsys, precision):
    """B200: FP8 recipes and MXFP8 against the 4,500 TFLOP/s FP8 peak, NVFP4 against the 9,000
    FP4 one (the BF16 2,250 gave 'MFU 92 %' for NVFP4 before); MFU stays a fraction < 1."""
    system = load_system("b200")
    row = _row(capsys, "b200", precision)
    field = PRECISIONS[precision].peak_field
    assert row["mfu_peak_tflops"] == getattr(system, field)
    assert row["mfu_peak_tflops"] == (9000 if precision == "nvfp4" else 4500)
    assert row["mfu"] == pytest.approx(row["model_tflops_per_gpu"] / row["mfu_peak_tflops"])
    assert 0 < row["mfu"] < row["hfu"] < 1


def test_mxfp8_and_fp8_share_their_peak_so_their_mfu_compares(capsys):
    """Same peak: MFU follows the speed (MXFP8 once showed 60 % against FP8's 29.7 %)."""
    fp8, mx = _row(capsys, "b200", "fp8"), _row(capsys, "b200", "mxfp8")
    assert fp8["mfu_peak_tflops"] == mx["mfu_peak_tflops"]
    assert mx["mfu"] / fp8["mfu"] == pytest.approx(
        mx["model_tflops_per_gpu"] / fp8["model_tflops_per_gpu"])


SUPPORT = {  # the datasheets' table, written out again: (system, precision) → runs?
    ("a100", "bf16"): True, ("a100", "fp8"): False, ("a100", "fp8-delayed"): False,
    ("a100", "mxfp8"): False, ("a100", "nvfp4"): False,
    ("h100", "fp8"): True, ("h100", "fp8-blockwise"): True, ("h100", "mxfp8"): False,
    ("h100", "nvfp4"): False, ("h800", "mxfp8"): False, ("h200", "nvfp4"): False,
    ("mi300x", "fp8"): True, ("mi300x", "fp8-delayed"): True, ("mi300x", "mxfp8"): False,
    ("mi300x", "nvfp4"): False,
    ("b200", "mxfp8"): True, ("b200", "nvfp4"): True, ("gb300-nvl72", "nvfp4"): True,
    ("b300", "mxfp8"): True,
}


@pytest.mark.parametrize(("system", "precision"), sorted(SUPPORT))
def test_the_api_refuses_what_the_tensor_cores_lack(system, precision):
    model, spec = load_model("llama3-8b"), load_system(system)
    config = {"tp1": 1, "pp": 1, "dp": 8, "microbatch": 1}
    if SUPPORT[(system, precision)]:
        row = evaluate(model, spec, 8, 64, "1d", **config, execution={"precision": precision})
        assert row.row["iteration_time_s"] > 0
        return
    with pytest.raises(ModelError, match=f"has no .* tensor cores: {precision} runs on"):
        evaluate(model, spec, 8, 64, "1d", **config, execution={"precision": precision})


def test_the_cli_refuses_in_one_line_with_exit_2(capsys):
    """H100 + MXFP8 was accepted and even beat H100 + FP8."""
    code = main([*EVAL, "--system", "h100", "--precision", "mxfp8"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert "(hopper) has no MXFP8" in err and "blackwell, blackwell-ultra GPUs only" in err


def test_the_dashboard_shows_the_same_message_inline():
    from dashboard.controls import presets as PR
    from dashboard.controls import scenario as S
    scn = {**S.default_scenario(), **PR.system_values("h100"), "system": "h100",
           "precision": "nvfp4"}
    valid, errors = S.validate_scenario(scn)
    assert valid is None
    assert errors["precision"] == load_system("h100").precision_problem("nvfp4")


@pytest.mark.parametrize("name", ["a100", "h100", "h200", "h800", "mi300x", "b200", "b300",
                                  "gb200-nvl72", "gb300-nvl72"])
def test_every_peak_a_format_runs_at_is_set_and_cited(name):
    """Each format the generation runs has its dense peak in the preset, and the preset's
    source names the format the peak comes from (the datasheet figure)."""
    system = load_system(name)
    for precision in PRECISIONS:
        if system.precision_problem(precision):
            continue
        peak = system.matrix_peak_flop_per_s(precision) / 1e12
        assert peak > 0
        cited = {"matrix_tflops_fp8": "FP8", "matrix_tflops_fp4": "FP4"}.get(
            PRECISIONS[precision].peak_field, "BF16")
        assert cited in system.source, (name, precision)
        text = system.source.replace(",", "")
        assert f"{peak:g}" in text or f"{peak / 1000:g} P" in text, (name, precision, peak)
