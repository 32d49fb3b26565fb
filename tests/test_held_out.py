"""Published runs that nothing was fitted to, checked against the targets of the accuracy work.

Llama 3 405B pre-training on 8,192 and 16,384 H100s (arXiv 2407.21783, Table 4: TP 8, PP 16,
DP 64 / 128, 2,048 sequences of 8,192 tokens, BF16, 430 / 400 TFLOP/s per GPU): the default
search, given only the published TP and PP, lands within 12 % (model/validation/llama3_405b.py).
The paper says 8K pre-training ran without activation checkpointing: the search must keep
selective recompute (not fall back to full) and use interleaving, as the published schedule does.
It still recomputes one or two whole layers per stage (of 8) to fit: the memory model is that
close to, and still slightly above, what the run needed.
"""

from __future__ import annotations

import pytest

from model.validation.llama3_405b import PUBLISHED, predict


@pytest.mark.parametrize(("gpus", "published_tflops"), PUBLISHED)
def test_llama3_405b_default_search_is_within_12_percent(gpus, published_tflops):
    best = predict(gpus)
    assert int(best["tp1"]) == 8 and int(best["pp"]) == 16 and int(best["dp"]) == gpus // 128
    assert abs(float(best["tflops_per_gpu"]) / published_tflops - 1) <= 0.12
    assert best["recompute"] == "selective" and best["precision"] == "bf16"
    assert int(best["interleave"]) > 1


# --- mixture of experts (model/validation/moe_held_out.py, reference/moe_held_out.json) -------
# Measured with the stack of each run's date (README, Accuracy), the MoE-specific fit charged
# per routed byte (the token kernels' efficiency, model.validation.calibrate), block-wise FP8
# as its own precision, and the TP-communication overlap and FP8 parameter gather each run's
# scripts set: the other models' runs within −5.0 … +14.5 % (mean 5.3 %; 5.5 % / 17.3 % with
# the stacks' TP overlap and no FP8 gather), DeepSeek-V3 on 2,048 H800s 27.9 % too slow. The
# bounds are those figures plus one point: they fail a regression.
from model.validation import moe_held_out as moe  # noqa: E402

MOE_RUNS = moe.records()
OTHER_MODELS = [r for r in MOE_RUNS if r["group"] == "other model"]


def test_moe_held_out_runs_are_never_fitted():
    """None of them is in the calibration set, and none names a source the calibration uses."""
    from model.validation.moe import moe_records
    fitted = {r["id"] for r in moe_records()}
    assert MOE_RUNS and not fitted & {r["id"] for r in MOE_RUNS}
    assert not any("Megatron-Bridge" in r["source"] for r in MOE_RUNS)
    assert len(OTHER_MODELS) == 5 and {r["model"] for r in OTHER_MODELS} == {
        "Mixtral-8x22B", "Mixtral-8x7B"}


def test_megatron_lm_flop_count_of_mixtral_8x7b():
    """12·l·e²·(1 + g/a + s/e + 1.5·k·f/e + V/(2·l·e)) for l 32, e 4096, g/a 8/32, s 4096,
    k 2, f 14336, V 32000: 12·32·4096²·(12.75 + 0.1220703125)."""
    r = next(r for r in MOE_RUNS if r["model"] == "Mixtral-8x7B")
    expected = 12 * 32 * 4096**2 * (1 + 0.25 + 1 + 1.5 * 2 * 3.5 + 32000 / (2 * 32 * 4096))
    assert moe.megatron_lm_flops_per_token(r) == pytest.approx(expected, rel=1e-12)
    # 468 TFLOP/s per GPU at that count is 5,643 tokens/s per GPU
    assert moe.published_tokens_per_s(r) == pytest.approx(468e12 / expected, rel=1e-12)


def test_deepseek_v3_report_throughput_is_its_gpu_hours_per_trillion_tokens():
    r = next(r for r in MOE_RUNS if r["model"] == "DeepSeek-V3")
    assert moe.published_tokens_per_s(r) == pytest.approx(1e12 / (180e3 * 3600), abs=0.1)


def test_moe_held_out_runs_keep_their_published_layout():
    for r in MOE_RUNS:
        row = moe.predict(r)
        assert (int(row["tp1"]), int(row["pp"]), int(row["ep"])) == (r["tp"], r["pp"], r["ep"])
        assert int(row["dp"]) == r["n_gpus"] // (r["tp"] * r["pp"])
        assert r["vp"] is None or int(row["interleave"]) == r["vp"]


def test_moe_held_out_error_does_not_regress():
    """Measured: other models mean |error| 5.3 %, max 14.5 % (Mixtral 8x22B in block-wise FP8,
    too fast); DeepSeek-V3 on H800 (DeepSeek's own software) 27.9 % too slow. Bounds one point
    above: they guard against regressions; the max stays inside the issue's 15 % target."""
    errors = {r["id"]: moe.error_pct(r, moe.predict(r)) for r in MOE_RUNS}
    other = [abs(errors[r["id"]]) for r in OTHER_MODELS]
    assert sum(other) / len(other) <= 6.3 and max(other) <= 15.0
    assert abs(errors["deepseek_v3_report_h800_fp8"]) <= 28.9


def test_moe_held_out_runs_use_the_execution_their_scripts_set():
    """Megatron-MoE-ModelZoo (since b09773a) adds --tp-comm-overlap for BF16 only and
    --fp8-param-gather with its block-wise FP8: the predicted rows carry both as published;
    runs whose sources say nothing keep their stack's defaults."""
    for r in MOE_RUNS:
        row = moe.predict(r)
        if r["tp_comm_overlap"] is not None:
            assert bool(row["tp_overlap"]) == r["tp_comm_overlap"]
            assert bool(row["fp8_param_gather"]) == r["fp8_param_gather"]
            assert r["fp8_param_gather"] == (r["precision"] == "FP8-blockwise")
        else:
            assert "tp_comm_overlap" in r and r["fp8_param_gather"] is None


def test_moe_held_out_without_the_moe_fit():
    """The diagnostic of the README: without the MoE token-kernel fit (the token kernels at the
    full HBM rate) the BF16 Mixtral runs land within 3.2 % and block-wise FP8 15.1 % too fast
    (measured; bounds one point above): the fit, charged per routed byte, barely touches these
    models of few large experts (2 of 8 experts per token, expert FFN 14,336–16,384). With the
    shape-aware GEMMs (model/physics/gemm.py, issue 24) the BF16 runs are within 4.3 % (the
    dropless 8x22B +4.26 %) and block-wise FP8 +14.1 %: the BF16 bound is 5.3."""
    errors = {r["id"]: moe.error_pct(r, moe.predict(r, without_moe_fit=True))
              for r in OTHER_MODELS}
    bf16 = [abs(e) for k, e in errors.items() if "bf16" in k]
    assert max(bf16) <= 5.3
    assert 0 < errors["modelzoo_mixtral8x22b_h100_fp8_forcebalanced"] <= 16.1


def test_deepseek_v3_with_its_own_stack_does_not_regress():
    """DeepSeek-V3 on its 2,048 H800 with ``deepseek-v3-2024`` (DualPipe with what it hides,
    the light recompute, the FP8 SwiGLU cache; docs/moe.md §5): measured 7.7 % too slow with 2
    of a stage's 4 layers fully recomputed (28.2 % before that round). Bound one point above."""
    r = next(r for r in MOE_RUNS if r["model"] == "DeepSeek-V3")
    row = moe.predict(r, "deepseek-v3-2024")
    assert abs(moe.error_pct(r, row)) <= 8.7
    assert int(row["recompute_layers"]) <= 2 and bool(row["fits"])
