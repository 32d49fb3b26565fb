"""Mixture of experts and multi-latent attention: the per-op formulas and the op-table rows.

A MoE layer under Megatron-Core (``MoELayer`` with the all-to-all token dispatcher; DeepSeek-V3
report §2.1.2, §3.2.2; Megatron-Core's MoE guide): per GPU, its T local tokens (the sequence
shard b·l/(tp1·tp2): Megatron requires sequence parallelism with MoE and tensor parallelism)

1. ``moe/router``: logits [T, E], scores and top-k (:func:`router`);
2. ``moe/dispatch``: permute the T·k routed copies into expert order (memory-bound,
   :func:`permute`) and all-to-all them over the ``ep`` group (V = s·T·k·e per GPU);
3. with ``etp`` > 1, all-gather them over the expert-tensor-parallel group;
4. ``moe/fc1`` → ``moe/act`` → ``moe/fc2``: the local experts' grouped GEMMs
   (:func:`grouped_linear`) on the GPU's routed tokens, T·k·etp × the load factor (the
   busiest GPU's share: ``Execution.moe_load``), hidden f_e/etp, with a kernel launch per
   local expert (:func:`expert_launches`);
5. reduce-scatter over ``etp``, all-to-all back (``moe/combine``), unpermute and weight by the
   routing probabilities;
6. the shared experts (``shared/*``): a dense tensor-parallel MLP of f_s on every token.

The backward pass runs the same collectives on the gradients. Expert weights are sharded over
ep·etp; the expert layers regroup the tp1·tp2·dp GPUs of a stage as etp × ep × edp (Megatron-Core
MoE parallel folding, arXiv 2504.14960), so expert gradients are reduced over edp.

MLA (DeepSeek-V2, arXiv 2405.04434 §2.1; Megatron-Core ``MLASelfAttention``): one down-projection
of the (gathered) input to the query and key/value latents and the rotary key (replicated over
tp1), their RMSNorms, column-parallel up-projections to the heads (whose replicated latent input
all-reduces its gradient over tp1), attention with query/key dim d_n + d_r and value dim d_v,
and the row-parallel output projection.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from model.physics import gemm, routing, token_kernels
from model.physics.kernels import moe_training
from model.physics.ops import OpCounts, bias, linear, quantisation, wave_efficiency
from model.physics.optable import EP, ETP, NONE, TP1, Axes, CommSpec, Kind, OpSpec, a2a, ag, ar, rs
from model.specs.precision import PRECISIONS
from model.specs.transformer import Transformer

if TYPE_CHECKING:
    from model.physics.context import Ctx
    from model.physics.optable import Shards

Array = np.ndarray
ELEMENT_BYTES = 2.0  # bf16 activations and weights
FP32 = 4.0  # bytes of the router's logits and scores (Megatron keeps them in fp32)
DISPATCH_BYTES = 2.0  # dispatched tokens in bf16 (FP8 dispatch is an opt-in of some stacks)
# precisions whose per-expert inputs Transformer Engine quantises in one fused kernel
# (nvte_multi_cast_transpose: delayed-scaling FP8 only; see expert_launches)
FUSED_MULTI_QUANTISE = frozenset({"fp8-delayed"})


def router(b: Array, rows: Array, e: Array, experts: float, s: float,
           fused: bool = True) -> OpCounts:
    """Router of T = b·r tokens: logits X[T, e]·W_r[e, E] (a BF16 GEMM; Megatron keeps the
    router out of the FP8 recipes) writing fp32 logits, then the score function, top-k and
    load-balancing loss (≈ 8 FLOP per logit forward, 5 backward, on the vector units) as
    separate memory-bound kernels (:mod:`model.physics.token_kernels`, ``fused`` or not).
    fwd: F_mat = T·E·(2e − 1), F_vec = 8·T·E; bwd: F_mat = T·e·(2E − 1) + e·E·(2T − 1),
    F_vec = 5·T·E; GEMM bytes M_fwd = s(T·e + e·E) + 4·T·E, M_bwd = s(T·e + 2e·E) + 4·T·E;
    the token kernels' bytes and launches on top; kept: the fp32 scores 4·T·E (its input is
    the norm's output, kept there); W = s·e·E."""
    t = b * rows
    extra_fwd, extra_bwd, n_fwd, n_bwd = token_kernels.token_kernels(
        "router", fused, t, e, 1.0, experts, s)
    return OpCounts(
        flop_mat_fwd=t * experts * (2 * e - 1), flop_vec_fwd=8 * t * experts,
        flop_mat_bwd=t * e * (2 * experts - 1) + e * experts * (2 * t - 1),
        flop_vec_bwd=5 * t * experts,
        bytes_fwd=s * (t * e + e * experts) + FP32 * t * experts,
        bytes_bwd=s * (t * e + 2 * e * experts) + FP32 * t * experts,
        extra_bytes_fwd=extra_fwd, extra_bytes_bwd=extra_bwd,
        launches_fwd=1.0 + n_fwd, launches_bwd=1.0 + n_bwd,
        act_bytes=FP32 * t * experts, weight_bytes=s * e * experts)


def permute(b: Array, rows: Array, e: Array, top_k: float, s: float,
            unpermute: bool = False, experts: float = 1.0, fused: bool = True,
            chunk_sort: Array | float = 0.0) -> OpCounts:
    """Token permutation of T = b·r tokens into the T·k routed copies in expert order
    (Megatron-Core ``permute``) or, with ``unpermute``, their weighted sum back (``unpermute``:
    each copy times its routing probability, F = 2·T·k·e each way; it keeps the copies for the
    probabilities' gradient: act = s·T·k·e). Memory-bound kernels, each a separate pass
    (:func:`model.physics.token_kernels.token_kernels`, ``fused`` or not, over ``experts``
    experts) — for the permutation M = s·T·e·(1 + k) + the routing map's and probabilities'
    passes each way, about 9 kernels unfused and 4 + 1 fused; plus, where ``chunk_sort`` is 1
    (the all-to-all dispatcher with several local experts; an array over configurations), the
    received chunks' sort by local expert: 2·s·T·k·e more each way."""
    t = b * rows
    op = "unpermute" if unpermute else "permute"
    fwd, bwd, n_fwd, n_bwd = token_kernels.token_kernels(op, fused, t, e, top_k, experts, s)
    sort_fwd, sort_bwd, m_fwd, m_bwd = token_kernels.token_kernels(
        "sort_chunks", fused, t, e, top_k, experts, s)
    c = OpCounts(extra_bytes_fwd=fwd + chunk_sort * sort_fwd,
                 extra_bytes_bwd=bwd + chunk_sort * sort_bwd,
                 launches_fwd=n_fwd + chunk_sort * m_fwd,
                 launches_bwd=n_bwd + chunk_sort * m_bwd)
    if unpermute:
        c.flop_vec_fwd = c.flop_vec_bwd = 2 * t * top_k * e
        c.act_bytes = s * t * top_k * e
    return c


def grouped_linear(b: Array, rows: Array, k: Array, n: Array, experts: Array,
                   s: float) -> OpCounts:
    """The local experts' matmuls on their b·r routed tokens as one grouped GEMM: the FLOPs of
    one matmul of b·r rows (:func:`model.physics.ops.linear`), the bytes reading all E_l
    experts' weights: M_fwd = s(b·r·k + b·r·n + E_l·k·n), M_bwd = s(2E_l·k·n + 2b·r·k + 2b·r·n),
    W = s·E_l·k·n. With few tokens per expert the weights' bytes make it memory-bound."""
    c = linear(b, rows, k, n, s)
    extra = s * (experts - 1) * k * n
    c.bytes_fwd = c.bytes_fwd + extra
    c.bytes_bwd = c.bytes_bwd + 2 * extra
    c.weight_bytes = s * experts * k * n
    return c


def grouped_wave_efficiency(tokens: Array, experts: Array, cols: Array, tile: float,
                            units: float) -> Array:
    """Busy fraction of a grouped GEMM of E_l experts, m = tokens/E_l rows each, over ``cols``
    output columns: each expert's rows are padded to whole tiles (the M-grouped layout aligns
    every expert's segment to the block size: DeepGEMM README) and the E_l·⌈m/tile⌉·⌈cols/tile⌉
    tiles run in waves of ``units`` SMs (:func:`model.physics.ops.wave_efficiency`):
    (m / (⌈m/tile⌉·tile)) · t / (⌈t/units⌉·units). With few tokens per expert the padding,
    the last wave and the weights' bytes (:func:`grouped_linear`) slow it; DeepGEMM's FP8
    grouped GEMMs on H800 fall from 1233 TFLOP/s at 1024 rows per group to 932 at 256 (README,
    2025-03), more than these two effects predict (about 1330 at 256 rows, η = 0.68)."""
    if units <= 0:
        return 1.0
    m = np.asarray(tokens, dtype=float) / np.maximum(experts, 1.0)
    padded = np.maximum(np.ceil(m / tile), 1.0)
    tiles = experts * padded * np.ceil(np.asarray(cols, dtype=float) / tile)
    fill = np.where(m > 0, m / (padded * tile), 1.0)
    waves = np.maximum(np.ceil(tiles / units) * units, 1.0)
    return fill * np.where(tiles > 0, tiles / waves, 1.0)


def expert_launches(experts: Array, per_expert_quantise: bool) -> tuple[Array, Array]:
    """Kernels one expert matmul op (fc1 or fc2) launches per microbatch, (forward, backward),
    with E_l local experts: n_fwd = E_l·(1 + q), n_bwd = E_l·(2 + q), q = 1 where each
    expert's input is quantised by its own kernel, else 0. Each pays the system's fixed
    ``kernel_overhead_s`` (:func:`model.physics.roofline.kernel_times`), so the layer's fixed
    cost grows with the experts per GPU, E/ep, not with their tokens.

    Megatron-Core's ``TEGroupedMLP`` (megatron/core/transformer/moe/experts.py) runs fc1 and
    fc2 as Transformer Engine ``GroupedLinear`` modules with ``num_gemms`` = E_l; their
    ``general_grouped_gemm`` (forward; dgrad and wgrad in the backward) reaches
    ``multi_stream_cublas_gemm`` (transformer_engine/common/gemm/cublaslt_gemm.cu), which
    launches one cuBLASLt GEMM per expert, round-robin over 4 compute streams
    (transformer_engine/common/util/multi_stream.cpp): the streams let small GEMMs share the
    GPU, but every GEMM is launched and set up on its own. The inputs are split per expert
    (``torch.split(inp, m_splits)``) and quantised by ``tex.fused_multi_quantize``
    (transformer_engine/pytorch/csrc/extensions/transpose.cpp), which fuses the list into one
    kernel only for delayed-scaling FP8; current-scaling FP8, MXFP8 and NVFP4 quantise expert
    by expert: one kernel for X in the forward, one for dY in the backward (both usages, the
    rowwise copy and the columnwise one the weight gradient needs, written in one pass). The
    quantisation bytes are counted once for all experts (:func:`model.physics.ops.
    quantisation`); only their launches multiply."""
    q = 1.0 if per_expert_quantise else 0.0
    e = np.asarray(experts, dtype=float)
    return e * (1.0 + q), e * (2.0 + q)


def issued_ahead_s(work_s: Array, launches_s: Array, one_launch_s: Array) -> Array:
    """Time of the local experts' GEMMs when the host issues their n kernels in one loop
    without waiting: max(n·τ, τ + t_work) — the first launch is exposed, the later ones are
    issued while the GPU runs the earlier GEMMs, so the op is launch-bound only when its
    kernels are shorter than their launches (small experts, few tokens), else GPU-bound.
    Transformer Engine's ``multi_stream_cublas_gemm`` (transformer_engine/common/gemm/
    cublaslt_gemm.cu at d0067d0da6cb01811b8072a7d304f0e00344ce2b) is that loop: an event on the
    main stream, then ``for i < num_gemms: nvte_cublas_gemm_v2(..., compute_stream(i %
    num_streams))`` with no synchronisation inside; the per-expert quantisations before it
    are issued the same way, one after another (:func:`expert_launches`). The other ops keep
    n·τ + t_work: one kernel each, its launch in sequence with its work
    (roofline.kernel_times)."""
    return np.maximum(launches_s, one_launch_s + work_s)


# --- counts on a configuration's local shapes (model.physics.block: op_counts) -------------
def routed_rows(rows, sh: Shards, ctx: Ctx):
    """Rows of the tokens routed to a GPU's experts, per sample: its sequence rows × top_k
    × etp (gathered over the expert-tensor-parallel group) × the load of the busiest GPU."""
    return rows * ctx.model.top_k * ctx.execution.moe_load * np.asarray(sh.etp, dtype=float)


def local_experts(ctx: Ctx, sh: Shards) -> np.ndarray:
    """Routed experts per GPU, E/ep."""
    return np.asarray(ctx.model.experts / np.asarray(sh.ep, dtype=float), dtype=float)


def token_permutation(sh: Shards, ctx: Ctx, b, rows, k, unpermute: bool = False) -> OpCounts:
    """The dispatch's permutation (or the combine's unpermutation) on this GPU's b·rows
    tokens (:func:`permute`) on the stack's path (``moe_permute_fusion``), with the chunk
    sort of Megatron-Core's all-to-all dispatcher where a GPU holds more than one expert."""
    ex = ctx.execution
    sort = 0.0
    if ex.ep_dispatcher == "alltoall":
        sort = np.where(local_experts(ctx, sh) > 1.0, 1.0, 0.0)
    return permute(b, rows, k, float(ctx.model.top_k), ELEMENT_BYTES, unpermute=unpermute,
                   experts=float(ctx.model.experts), fused=ex.moe_permute_fusion,
                   chunk_sort=sort)


def expert_linear(spec: OpSpec, sh: Shards, ctx: Ctx, b, rows, k) -> OpCounts:
    """The local experts' grouped GEMM on this GPU's routed tokens (:mod:`model.physics.moe`),
    its grouped-GEMM wave quantisation (with the kernel layer, the measured grouped GEMM's
    forward, dX and dW times: :func:`_kernel_priced`), under FP8/FP4 its quantisation and kept
    input, and its kernel launches, one set per local expert (:func:`expert_launches`)."""
    s = ELEMENT_BYTES
    n = np.asarray(ctx.dims[spec.n] // sh.size(spec.n_shard), dtype=float)
    experts = local_experts(ctx, sh)
    counts = grouped_linear(b, rows, k, n, experts, s)
    precision = PRECISIONS[ctx.execution.precision]
    if ctx.expert_kernel is not None:  # the measured grouped GEMMs at their own shapes
        counts = _kernel_priced(counts, ctx, b * rows, experts, k, n)
    else:
        counts.wave_fwd, counts.wave_bwd = expert_shape_efficiency(
            b * rows, experts, k, n, ctx, precision.peak_field)
    counts.act_bytes = precision.kept_bytes_per_element * b * rows * k
    if precision.quantised:
        counts = quantisation(counts, b, rows, k, n, precision.quantise_bytes_per_element)
    # one grouped kernel (and one quantisation) for all local experts on the grouped path
    launched = experts if ctx.execution.expert_gemm == "multi-stream" else 1.0
    counts.launches_fwd, counts.launches_bwd = expert_launches(
        launched, precision.quantised and precision.name not in FUSED_MULTI_QUANTISE)
    if precision.quantised and not ctx.execution.moe_router_padding:
        # the layer's input padded before fc1, its output unpadded after fc2
        padded = fp8_padding(b, rows, k if spec.k == "e" else n, s)
        counts.extra_bytes_fwd = counts.extra_bytes_fwd + padded
        counts.extra_bytes_bwd = counts.extra_bytes_bwd + padded
    return counts


def _kernel_priced(counts: OpCounts, ctx: Ctx, routed, experts, k, n) -> OpCounts:
    """The grouped GEMM's forward and backward (dX + dW) times of the kernel layer
    (:func:`model.physics.kernels.moe_training.expert_gemm_times`) as the efficiencies they
    imply over the context's expert rate η·P, and the kernels' HBM bytes (touched experts'
    weights only)."""
    rate = ctx.expert_efficiency * ctx.matrix_flop_per_s
    model = ctx.model
    t_fwd, t_dx, t_dw, bytes_fwd, bytes_bwd = moe_training.expert_gemm_times(
        ctx.expert_kernel, rate, routed, experts, float(model.top_k), float(model.experts),
        k, n)
    counts.wave_fwd = moe_training.implied_efficiency(counts.flop_mat_fwd, t_fwd, rate)
    counts.wave_bwd = moe_training.implied_efficiency(counts.flop_mat_bwd, t_dx + t_dw, rate)
    counts.bytes_fwd, counts.bytes_bwd = bytes_fwd, bytes_bwd
    return counts


def fp8_padding(b: Array, rows: Array, feats: Array, s: float) -> Array:
    """HBM bytes of one explicit FP8 padding copy of the b·rows routed rows of ``feats``
    features: read and write, 2·s·b·rows·feats. Without ``moe_router_padding``
    (Megatron-Core ``moe_router_padding_for_fp8``, whose docstring says it "can remove the
    explicit padding in the GroupedMLP layer"), Megatron-Core's ``TEGroupedMLP`` under FP8
    copies its input into per-expert segments padded to the GEMM alignment (16 rows, 32 for
    MXFP8; Transformer Engine ``Fp8Padding``) before fc1 and its output back
    (``Fp8Unpadding``) after fc2; the backward copies the gradients the other way. Counted
    once each way for fc1 (its input, e features) and fc2 (its output, e features); the
    padding rows themselves (< 32 per expert) are not counted."""
    return 2.0 * s * b * rows * feats


def expert_shape_efficiency(tokens, experts, k, n, ctx: Ctx, peak_field: str):
    """(forward, backward) shape efficiency of the local experts' GEMMs on ``tokens`` routed
    rows, m = tokens/E_l per expert on average (model.physics.gemm): forward Y [m, n] per
    expert with reduction k, backward dX [m, k] (reduction n) and dW [k, n] (reduction m, the
    expert's tokens), each its depth efficiency times the wave quantisation of the tiles of the
    experts that run together on the stack's kernel path (``Execution.expert_gemm``:
    :func:`model.physics.gemm.concurrent_experts`). Each expert's rows are padded to whole
    tiles of their own, its count m ~ Binomial(N, k/E) under balanced top-k routing of the
    N = m·E/k tokens its EP group routes (:func:`model.physics.routing.row_tiles_per_expert`,
    as serving's grouped GEMM)."""
    e = np.maximum(np.asarray(experts, dtype=float), 1.0)
    m = np.asarray(tokens, dtype=float) / e
    k0 = gemm.depth_overhead(peak_field)
    fwd, dx, dw = (gemm.depth_efficiency(r, k0) for r in (k, n, m))
    sysm = ctx.system
    if sysm.sm_count > 0:
        tile, units = sysm.gemm_tile, sysm.sm_count
        c = gemm.concurrent_experts(e, ctx.execution.expert_gemm)
        model = ctx.model
        p = min(model.top_k / model.experts, 1.0) if model.experts else 1.0
        tiles = c * routing.row_tiles_per_expert(m / p, model.top_k, model.experts, tile)
        rows = m * c
        fwd = fwd * routing.padded_wave_efficiency(rows, tiles, n, tile, units)
        dx = dx * routing.padded_wave_efficiency(rows, tiles, k, tile, units)
        dw = dw * wave_efficiency(c * k, n, tile, units)
    return fwd, gemm.backward_efficiency(dx, dw)


def expert_bias(spec: OpSpec, sh: Shards, ctx: Ctx, b, rows, k) -> OpCounts:
    counts = bias(b, rows, k, ELEMENT_BYTES)
    counts.weight_bytes = counts.weight_bytes * local_experts(ctx, sh)
    return counts



# --- op-table rows ---------------------------------------------------------------------------
def _mlp(prefix: str, ffn_in: str, ffn: str, base: Axes, comms: dict, share: str,
         bias: bool) -> list[OpSpec]:
    """A tensor-parallel (column fc1, row fc2) MLP of the given dims with its SP collectives
    on the matmuls (``comms``: col_fwd, col_bwd, col_act, row_fwd, row_bwd)."""
    ops = [OpSpec(f"{prefix}/fc1", Kind.LINEAR, k="e", n=ffn_in, rows=base, n_shard=TP1,
                  fwd=comms["col_fwd"], bwd=comms["col_bwd"], act_rows=comms["col_act"],
                  share=share)]
    if bias:
        ops.append(OpSpec(f"{prefix}/fc1_bias", Kind.BIAS, k=ffn_in, rows=base, k_shard=TP1,
                          share=share))
    ops += [OpSpec(f"{prefix}/act", Kind.ACT, k=ffn, rows=base, k_shard=TP1, share=share),
            OpSpec(f"{prefix}/fc2", Kind.LINEAR, k=ffn, n="e", rows=base, k_shard=TP1,
                   fwd=comms["row_fwd"], bwd=comms["row_bwd"], share=share)]
    if bias:  # on the row-parallel output, before the reduce-scatter's rows are split
        ops.append(OpSpec(f"{prefix}/out_bias", Kind.BIAS, rows=base, share=share))
    return ops


def moe_rows(model: Transformer, base: Axes, comms: dict, dedup: bool = False
             ) -> list[OpSpec]:
    """The MoE layer's rows (share "moe"), routed part and shared experts (module docstring).
    Tokens stay on their sequence shard ``base`` + tp1. ``dedup``: the flex dispatcher
    (DeepEP / HybridEP) sends a token once per remote NVLink domain
    (:mod:`model.physics.collectives`), else NCCL's all-to-all sends every copy."""
    rows = base + TP1
    routed = dict(rows=rows, share="moe", routed=True)
    swap = (a2a("dispatch", EP, dedup),)
    ops = [OpSpec("moe/router", Kind.ROUTER, k="e", n="E", rows=rows, share="moe"),
           OpSpec("moe/dispatch", Kind.PERMUTE, k="e", rows=rows, share="moe", fwd=swap,
                  bwd=swap),
           OpSpec("moe/fc1", Kind.EXPERT_LINEAR, k="e", n="fe_in", n_shard=ETP,
                  fwd=(ag("etp", ETP),), bwd=(rs("etp", ETP),), **routed)]
    if model.mlp_bias:
        ops.append(OpSpec("moe/fc1_bias", Kind.BIAS, k="fe_in", k_shard=ETP, **routed))
    ops += [OpSpec("moe/act", Kind.ACT, k="fe", k_shard=ETP, **routed),
            OpSpec("moe/fc2", Kind.EXPERT_LINEAR, k="fe", n="e", k_shard=ETP,
                   fwd=(rs("etp", ETP),), bwd=(ag("etp", ETP),), **routed)]
    if model.mlp_bias:
        ops.append(OpSpec("moe/fc2_bias", Kind.BIAS, k="e", **routed))
    ops.append(OpSpec("moe/combine", Kind.UNPERMUTE, k="e", rows=rows, share="moe",
                      fwd=swap, bwd=swap))
    if model.shared_ffn:
        ops += _mlp("shared", "fs_in", "fs", base, comms, "moe", model.mlp_bias)
    return ops


def dense_mlp_rows(model: Transformer, base: Axes, comms: dict) -> list[OpSpec]:
    """The dense MLP of the dense layers of a MoE model (share "dense")."""
    return _mlp("mlp", "f_in", "f", base, comms, "dense", model.mlp_bias)


def mla_rows(model: Transformer, base: Axes, comms: dict, kv: tuple[CommSpec, ...],
             kv_bwd: tuple[CommSpec, ...], kv_panels: str | None) -> list[OpSpec]:
    """MLA attention up to the output projection (module docstring): ``attn/down`` (e → r_q +
    r_kv + d_r, replicated over tp1, its input gathered under SP), the latents' norm, the
    up-projections and the attention core."""
    up_bwd = (ar("in", TP1),)  # the latent is replicated over tp1: its gradient is summed
    ops = [OpSpec("attn/down", Kind.LINEAR, k="e", n="mla_down", rows=base,
                  fwd=comms["col_fwd"], bwd=comms["col_bwd"], act_rows=comms["col_act"]),
           OpSpec("attn/latent_norm", Kind.NORM, k="mla_latent", rows=base)]
    if model.q_lora_rank:
        ops.append(OpSpec("attn/q_up", Kind.LINEAR, k="q_lora", n="q_heads", rows=base,
                          n_shard=TP1, bwd=up_bwd))
    else:  # queries projected from the (gathered) input directly
        ops.append(OpSpec("attn/q", Kind.LINEAR, k="e", n="q_heads", rows=base, n_shard=TP1))
    return ops + [OpSpec("attn/kv_up", Kind.LINEAR, k="kv_lora", n="kv_up", rows=base,
                         n_shard=TP1, bwd=up_bwd),
                  OpSpec("attn/flash", Kind.ATTENTION, rows=base, heads_shard=TP1, fwd=kv,
                         bwd=kv_bwd, panels=kv_panels)]


def mtp_rows(model: Transformer, base: Axes, seq: Axes, comms: dict,
             loss: CommSpec) -> list[OpSpec]:
    """Per MTP module, on the last stage besides its transformer layer (a pipeline layer):
    the two norms of [h; embedding], the projection 2e → e, and a second pass through the
    shared LM head and the loss (DeepSeek-V3 §2.2)."""
    ops: list[OpSpec] = []
    for i in range(model.mtp_layers):
        ops += [OpSpec(f"mtp{i}/norms", Kind.NORM, k="e2", rows=seq),
                OpSpec(f"mtp{i}/proj", Kind.LINEAR, k="e2", n="e", rows=base, n_shard=TP1,
                       fwd=comms["col_fwd"], bwd=comms["col_bwd"], act_rows=comms["col_act"]),
                OpSpec(f"mtp{i}/logits", Kind.LINEAR, k="e", n="V", rows=base, n_shard=TP1,
                       fwd=comms["col_fwd"], bwd=comms["col_bwd"], act_rows=comms["col_act"],
                       tied=True),
                OpSpec(f"mtp{i}/loss", Kind.LOSS, k="V", rows=base, k_shard=TP1, fwd=(loss,))]
    return ops


__all__ = ["NONE", "dense_mlp_rows", "expert_launches", "fp8_padding", "grouped_linear",
           "grouped_wave_efficiency", "issued_ahead_s", "mla_rows", "moe_rows", "mtp_rows",
           "permute", "router", "token_permutation"]
