"""Error bars by population (issue 21): a prediction shows the cross-validated error of the
population it belongs to — dense or MoE, its stack (or the releases it inherits), its system —
and "not validated" where no published run of that system or stack was ever scored, in the
dashboard's headline, the CLI text and the JSON (model/validation/error_bars.py)."""

from __future__ import annotations

import json
import math

import pytest

from model.cli import main
from model.validation import error_bars as eb
from model.validation.error_bars import MIN_RUNS, error_bar, scored_runs

STACK = "megatron-bridge-26.08"  # no dense run of its own: inherits 26.02's calibration


def _errors(workload: str, stack: str | None = None, system: str | None = None) -> list[float]:
    return [r.error_pct for r in scored_runs() if r.workload == workload
            and stack in (None, r.stack) and system in (None, r.system)]


def test_a_moe_prediction_carries_the_moe_bar_not_the_dense_one():
    """The MoE headline showed the dense ±4.1 % (37 runs) where the MoE runs say ±12.9 %."""
    dense, moe = error_bar(STACK, False, "b200"), error_bar(STACK, True, "b200")
    want = _errors("moe", system="b200")
    assert len(_errors("moe", STACK, "b200")) < MIN_RUNS <= len(want)  # widened: every stack
    assert (moe.runs, moe.system, moe.kind) == (len(want), "b200", "MoE ")
    assert moe.mean_pct == pytest.approx(sum(want) / len(want))
    assert moe.max_pct == pytest.approx(max(want)) and moe.mean_pct > 2 * dense.mean_pct


def test_the_narrowest_population_with_enough_runs_is_used():
    own = _errors("dense", "megatron-lm-2022", "a100")
    bar = error_bar("megatron-lm-2022", False, "a100")
    assert len(own) >= MIN_RUNS and (bar.scope, bar.system, bar.runs) == (
        "megatron-lm-2022", "a100", len(own))
    assert "runs of megatron-lm-2022 on a100" in bar.text


@pytest.mark.parametrize(("stack", "moe", "system", "why"), [
    (STACK, False, "mi300x", "no published dense run on mi300x"),  # never calibrated
    (STACK, False, "h200", "no published dense run on h200"),
    (STACK, True, "a100", "no published MoE run on a100"),
    ("megatron-lm-2021", False, "a100", "no firm published dense run of megatron-lm-2021"),
    ("megatron-lm-2022", True, "gb200-nvl72", "no firm published MoE run of megatron-lm-2022"),
])
def test_never_scored_is_not_validated(stack, moe, system, why):
    bar = error_bar(stack, moe, system)
    assert not bar.validated and why in bar.text and bar.text.startswith("not validated")
    assert math.isnan(bar.mean_pct) and bar.to_dict()["mean_pct"] is None


def test_not_validated_in_the_cli_text_and_json(capsys):
    argv = ["evaluate", "--model", "llama3-8b", "--system", "mi300x", "--gpus", "8",
            "--global-batch", "64", "--strategy", "1d", "--tp", "1", "--pp", "1", "--dp", "8",
            "--microbatch", "1"]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "range: none, not validated: no published dense run on mi300x" in text
    assert main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["error_bar"]["validated"] is False and out["range"] is None


def test_not_validated_in_the_dashboard_headline():
    from dashboard.controls import scenario as S
    from dashboard.views import notes
    scn = {**S.default_scenario(), **S.system_values("mi300x"), "system": "mi300x"}
    assert notes.days_text(scn, 30.0) == (
        "30.0 days (not validated: no published dense run on mi300x was ever scored)")
    assert notes.rate_text(scn, 12.0) == "12.0 samples/s (not validated)"
    moe = {**S.default_scenario(), **S.model_values("deepseek-v3"), "model": "deepseek-v3",
           **S.system_values("gb200-nvl72"), "system": "gb200-nvl72"}
    assert notes.error_bar_of(moe) == error_bar(moe["stack"], True, "gb200-nvl72")


def test_another_stacks_sources_plug_in_as_data(tmp_path):
    """A new section of runs (e.g. TorchTitan on H100) gives its population its own bar."""
    data = json.loads(eb.CROSS_VALIDATION.read_text())
    runs = [{"stack": "torchtitan", "system": "h100", "uncertain": False, "measured_s": 1.0,
             "cross_validated_s": 1.0 + k / 100} for k in range(1, 6)]
    data["fsdp"] = {"workload": "dense", "runs": runs}
    path = tmp_path / "cross_validation.json"
    path.write_text(json.dumps(data))
    scored = scored_runs(path)
    bar = error_bar("torchtitan", False, "h100", scored)
    assert (bar.scope, bar.system, bar.runs) == ("torchtitan", "h100", 5)
    assert bar.mean_pct == pytest.approx(3.0) and bar.max_pct == pytest.approx(5.0)
    assert not error_bar("torchtitan", True, "h100", scored).validated  # no MoE run of it
    assert len(scored_runs()) == len(scored) - 5  # the shipped file's runs are unchanged


def test_an_inheriting_release_says_whose_runs_its_bar_comes_from():
    """megatron-bridge-26.08 has no dense run of its own: its dense predictions use 26.02's
    calibration (its base chain), so their bar is 26.02's runs, and it says so."""
    bar = error_bar(STACK, False, None)
    own = _errors("dense", "megatron-bridge-26.02")
    assert (bar.scope, bar.runs) == ("megatron-bridge-26.02", len(own)) and len(own) >= MIN_RUNS
    assert f"of megatron-bridge-26.02 (whose calibration {STACK} inherits)" in bar.text
