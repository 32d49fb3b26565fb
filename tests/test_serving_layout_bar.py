"""A serving answer's error bar covers only the layouts its stack's fit runs used (issue 32,
"every error bar earned", the serving side of the training strategy's gate): TensorRT-LLM's
perf overview runs are single aggregated instances with pp 1 and, for MoE, ep = tp with
attention DP, so a pp 4, a disaggregated 1P1D or a MoE ep ≠ tp answer says "not validated"
where it printed the tp-only interval before (model/serving/validity.py: unmeasured_layout)."""

from __future__ import annotations

import json

import pytest

from model.cli.commands import main
from model.serving.validity import fit_layouts, unmeasured_layout
from model.specs.serving_stack import load_serving_stack

DENSE = ["serve", "--model", "llama3-70b", "--system", "h100", "--gpus", "8", "--precision",
         "fp8", "--input-tokens", "1024", "--output-tokens", "1024", "--offline", "--json"]
MOE = [*DENSE[:2], "qwen3-30b-a3b", *DENSE[3:]]


def _bar(capsys, argv: list[str]) -> tuple[dict, str]:
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    best = out.get("best", out)
    return best, best["error_bars"]["output_tokens_per_s"]


def test_the_fit_runs_are_pp_1_and_tp_1_to_8():
    stack = load_serving_stack("trtllm-1.0")
    assert fit_layouts(stack.fit["data"]) == {(1, 1), (2, 1), (4, 1), (8, 1)}


@pytest.mark.parametrize(("argv", "words"), [
    ([*DENSE, "--tp", "2", "--pp", "4"], "pipeline parallelism (pp 4)"),
    ([*DENSE, "--tp", "4", "--pp", "1", "--prefill-instances", "1", "--decode-instances", "1"],
     "disaggregated prefill and decode instances"),
    ([*MOE, "--tp", "4", "--ep", "2"], "a MoE layout other than ep = tp with attention DP"),
])
def test_a_layout_no_fit_run_used_is_not_validated(capsys, argv, words):
    _, bar = _bar(capsys, argv)
    assert bar.startswith("not validated") and words in bar and "interval" not in bar


@pytest.mark.parametrize("argv", [[*DENSE, "--tp", "8", "--pp", "1"], MOE])
def test_a_layout_of_the_fit_runs_keeps_its_interval(capsys, argv):
    best, bar = _bar(capsys, argv)
    assert best["pp"] == 1 and "80 % interval" in bar
    assert unmeasured_layout(load_serving_stack("trtllm-1.0"), "qwen" in argv[2], best) == []


def test_a_stack_never_fitted_has_no_layout_words():
    row = {"tp": 2, "pp": 4, "ep": 1, "attention_dp": False, "prefill_instances": 0}
    assert unmeasured_layout(load_serving_stack("vllm-0.x"), False, row) == []
    assert unmeasured_layout(load_serving_stack("trtllm-1.0"), False, row) == [
        "pipeline parallelism (pp 4)"]
