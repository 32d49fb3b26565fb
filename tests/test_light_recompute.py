"""DeepSeek-V3's memory savers in closed form (model.physics.light_recompute): the RMSNorms and
MLA up-projections recomputed (§3.2.3), the MoE SwiGLU input cached in FP8 (§3.3.3); DualPipe's
end GPUs (embedding and head chunks) and its hidden pipeline messages (§3.2.1)."""

from __future__ import annotations

import pytest

from model import evaluate, load_model, load_system
from model.physics.light_recompute import FP8_BYTES, qkv_bytes

DS = "deepseek-v3"
BASE = {"precision": "fp8-blockwise", "ep_dispatcher": "flex", "recompute": "selective"}


@pytest.fixture(scope="module")
def small_ds():
    """DeepSeek-V3's shapes (MLA, shared expert, 256 routed experts) with 8 layers."""
    return load_model(DS).with_overrides(layers=8, vocab=0, tied_embeddings=False)


def _ops(model, **execution):
    ev = evaluate(model, load_system("h800"), 64, 64, "1d", tp1=1, pp=2, dp=32, ep=32,
                  microbatch=1, execution={**BASE, **execution})
    return ev.ops.set_index("op"), ev.row


def test_qkv_bytes_closed_form():
    # one DeepSeek-V3 microbatch: 128 heads, q = k = 192, v = 128, 4,096 rows, BF16
    assert qkv_bytes(1, 128, 128, 4096, 192.0, 128.0, 2.0) == 2 * 128 * 4096 * (192 + 320)
    assert qkv_bytes(2, 8, 1, 10, 4.0, 4.0, 1.0) == 2 * 8 * 10 * 4 + 2 * 10 * 8


def test_norms_and_up_projections_recomputed(small_ds):
    off, _ = _ops(small_ds)
    on, _ = _ops(small_ds, recompute_norm_up_proj=True)
    m = small_ds
    saved = qkv_bytes(1, m.heads, m.kv_heads, m.seq_len, m.qk_head_dim, m.value_head_dim, 2.0)
    act = "activation_bytes"
    assert off.loc["attn/flash", act] - on.loc["attn/flash", act] == pytest.approx(saved)
    for consumer in ("attn/down", "attn/q_up", "attn/kv_up", "shared/fc1"):
        assert off.loc[consumer, act] > 0 and on.loc[consumer, act] == 0
    for rerun in ("attn/norm", "mlp/norm", "attn/latent_norm", "attn/q_up", "attn/kv_up"):
        assert on.loc[rerun, "flop_bwd"] == pytest.approx(
            off.loc[rerun, "flop_bwd"] + off.loc[rerun, "flop_fwd"])
        assert on.loc[rerun, "t_bwd_s"] > off.loc[rerun, "t_bwd_s"]
    untouched = ("moe/fc1", "attn/proj", "moe/combine")
    assert all(on.loc[o, act] == off.loc[o, act] for o in untouched)


def test_swiglu_input_cached_in_fp8(small_ds):
    off, _ = _ops(small_ds)
    on, _ = _ops(small_ds, swiglu_fp8_cache=True)
    act = "activation_bytes"
    assert on.loc["moe/act", act] == pytest.approx(off.loc["moe/act", act] * FP8_BYTES / 2)
    assert off.loc["moe/fc2", act] > 0 and on.loc["moe/fc2", act] == 0
    assert on.loc["moe/act", "flop_bwd"] == pytest.approx(
        off.loc["moe/act", "flop_bwd"] + off.loc["moe/act", "flop_fwd"])
    assert on.loc["shared/act", act] == off.loc["shared/act", act]  # routed experts only


def test_dualpipe_end_gpus_and_hidden_messages(small_ds):
    """An end GPU holds the embedding chunk (stage 0: pp microbatches) and the head chunk
    (stage pp − 1: one), its blocks pp + 1; the pipeline messages hide behind compute at the
    system's overlap slowdown γ."""
    plain = _ops(small_ds, interleave=1)[1]
    dual = _ops(small_ds, pipeline_schedule="dualpipe")[1]
    gamma = load_system("h800").overlap_slowdown
    assert dual["t_pp_comm_s"] == pytest.approx(gamma * plain["t_pp_comm_s"])
    assert dual["weights_gb"] == pytest.approx(2 * plain["weights_gb"], rel=0.02)


def test_rerun_all_to_alls_paired_under_dualpipe():
    """A recomputed layer's forward all-to-alls A_r join its backward chunk's (paired with
    another microbatch's forward): h(A + A_r, C + C_r) − h(A, C), h(T, C) = max(T − C, 0) +
    γ·min(T, C). A block of one dispatch (1 s each way), one combine (1 s each way) and 1 s of
    forward and 2 s of backward compute: A = 4, C = 3, A_r = 2, C_r = 1; with γ = 0.2,
    h(6, 4) − h(4, 3) = 2.8 − 1.6 = 1.2 s instead of 2 s."""
    from types import SimpleNamespace as NS

    from model.engine.evaluate import _paired_rerun_a2a
    from model.physics.collectives import overlapped_s
    from model.physics.optable import Kind

    def op(kind, fwd, bwd, comm):
        return NS(spec=NS(kind=kind), fwd=NS(t=fwd, t_comm=comm), bwd=NS(t=bwd, t_comm=comm))

    results = [op(Kind.PERMUTE, 1.0, 1.0, 1.0), op(Kind.LINEAR, 1.0, 2.0, 0.0),
               op(Kind.UNPERMUTE, 1.0, 1.0, 1.0)]
    ctx = NS(pricing=NS(hidden=lambda t, c: overlapped_s(t, c, 0.2)))
    again, exposed = _paired_rerun_a2a(results, ctx)
    assert again == 2.0 and exposed == pytest.approx(1.2)
    assert _paired_rerun_a2a(results[1:2], ctx) is None


def test_dualpipe_end_gpu_holds_the_head_for_one_microbatch():
    """An end GPU under DualPipe: its blocks for pp + 1 microbatches, the embedding chunk's
    ops for pp (stage 0 of one direction), the head chunk's (logits, loss, MTP) for one (stage
    pp − 1 of the other): pp = 2, 8 microbatches."""
    m = load_model(DS).with_overrides(layers=8)
    ev = evaluate(m, load_system("h800"), 64, 256, "1d", tp1=1, pp=2, dp=32, ep=32,
                  microbatch=1, execution={"precision": "fp8-blockwise", "interleave": 1,
                                           "pipeline_schedule": "dualpipe",
                                           "recompute_layers": 0})
    o, row = ev.ops, ev.row
    kept = {w: o[o["where"] == w]["activation_bytes"].sum() for w in ("pre", "block", "post")}
    assert kept["post"] > 1e9  # the head's logits and loss: what pp + 1 copies would overcount
    expected = row["layers_per_stage"] * kept["block"] * 3 + kept["pre"] * 2 + kept["post"]
    assert row["activations_gb"] == pytest.approx(expected / 1e9)


def test_deepseek_stack_runs_its_memory_savers():
    from model.specs.stack import load_stack

    ex = load_stack("deepseek-v3-2024").execution
    assert ex["recompute_norm_up_proj"] and ex["swiglu_fp8_cache"]
