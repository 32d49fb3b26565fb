"""An error bar covers only the parallel strategies scored runs used (issue 32, "every error
bar earned"): the idealised 2D SUMMA strategy — the Design page's default — was never run by a
published stack, so its predictions say "not validated" instead of borrowing the 1D runs'
interval (model/validation/error_bars.py: unscored_strategy)."""

from __future__ import annotations

import collections
import json

import pytest

from model.cli import main
from model.errors import ModelError
from model.validation.error_bars import error_bar, scored_runs
from model.validation.published import time_cases

STACK = "megatron-bridge-26.08"
SUMMA_WORDS = "with the 2D SUMMA tensor parallel strategy (summa) was ever scored"
EVALUATE = ["evaluate", "--model", "llama3-8b", "--system", "h100", "--gpus", "8",
            "--global-batch", "64", "--pp", "1", "--dp", "4", "--microbatch", "1"]


def test_every_scored_run_records_the_strategy_it_was_predicted_with():
    """The shipped cross-validation file's strategies are those of the published cases (what
    scripts/calibrate --write records): 1D and context parallelism, never SUMMA."""
    cases = {c.id: c.strategy for c in (*time_cases(), *time_cases(sets=("moe",)))}
    runs = scored_runs()
    assert runs and all(r.strategy == cases[r.run_id] for r in runs)
    used = collections.Counter((r.workload, r.strategy) for r in runs)
    assert used[("dense", "context")] > 0 and used[("dense", "1d")] > 0
    assert {s for _, s in used} == {"1d", "context"}


@pytest.mark.parametrize("strategy", ["summa", "2d"])
@pytest.mark.parametrize("moe", [False, True])
def test_a_summa_prediction_is_not_validated(strategy, moe):
    bar = error_bar(STACK, moe, "h200", strategy=strategy)
    assert not bar.validated and bar.text.startswith("not validated: ")
    assert SUMMA_WORDS in bar.text and "idealised" in bar.text
    out = bar.to_dict()
    assert out["validated"] is False and out["low_pct"] is None and out["n"] == 0


def test_a_scored_strategy_keeps_its_populations_interval():
    """1D and context runs were scored (dense): their predictions keep the population's
    interval, the same as a prediction that names no strategy (a stack's listing)."""
    plain = error_bar(STACK, False, "h200")
    for strategy in ("1d", "context", "2d-seqp"):
        bar = error_bar(STACK, False, "h200", strategy=strategy)
        assert bar.stated and bar.to_dict() == plain.to_dict()
    torchtitan = error_bar("torchtitan-2025", False, "h100", strategy="context")
    assert torchtitan.stated  # TorchTitan's context-parallel runs (cp 2, 4, 8) were scored


def test_a_strategy_scored_only_for_dense_runs_is_not_validated_for_moe():
    assert error_bar(STACK, True, "gb200-nvl72", strategy="1d").stated
    bar = error_bar(STACK, True, "gb200-nvl72", strategy="context")
    assert not bar.validated and ("no published MoE run of a megatron-family stack with the "
                                  "2D context/sequence parallel strategy") in bar.text


def test_an_unknown_strategy_is_a_model_error():
    with pytest.raises(ModelError, match="unknown strategy 'ring'"):
        error_bar(STACK, False, "h100", strategy="ring")


def test_evaluate_with_2d_says_not_validated(capsys):
    argv = [*EVALUATE, "--strategy", "2d", "--tp1", "2", "--tp2", "1"]
    assert main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["error_bar"]["validated"] is False and out["range"] is None
    assert SUMMA_WORDS in out["error_bar"]["text"]
    assert main(argv) == 0
    assert f"range: none, not validated: no published dense run of a megatron-family stack " \
           f"{SUMMA_WORDS}" in capsys.readouterr().out
    assert main([*EVALUATE, "--strategy", "1d", "--tp", "2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["error_bar"]["validated"] is True


def test_search_gives_each_strategy_its_own_error_bar(capsys):
    argv = ["search", "--model", "llama3-8b", "--system", "h100", "--gpus", "8",
            "--global-batch", "64", "--json"]
    assert main([*argv, "--strategy", "all"]) == 0
    out = json.loads(capsys.readouterr().out)
    bars = {r["strategy"]: r["error_bar"] for r in out["results"]}
    assert bars["1d"]["validated"] and bars["context"]["validated"]
    assert not bars["summa"]["validated"] and SUMMA_WORDS in bars["summa"]["text"]
    summa = next(r for r in out["results"] if r["strategy"] == "summa")
    assert summa["best"] is not None and summa["best_range"] is None
    assert out["error_bar"]["validated"] is False  # the strategies' bars differ
    assert "each result carries its own error_bar" in out["error_bar"]["text"]
    assert main([*argv, "--strategy", "2d"]) == 0
    assert json.loads(capsys.readouterr().out)["error_bar"]["validated"] is False
    assert main([*argv, "--strategy", "1d"]) == 0
    one = json.loads(capsys.readouterr().out)
    assert one["error_bar"]["validated"] and one["results"][0]["best_range"] is not None


def test_plan_with_summa_says_not_validated(capsys):
    argv = ["plan", "--model", "llama3-8b", "--system", "h100", "--global-batch", "64",
            "--days", "300", "--strategy", "2d", "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["configuration"]["strategy"] == "summa"
    assert out["error_bar"]["validated"] is False and SUMMA_WORDS in out["error_bar"]["text"]
