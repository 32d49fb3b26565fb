"""The time of one serving step: the ops of :mod:`model.physics.serving_ops` priced by the
training roofline (:func:`model.physics.roofline.kernel_times`), their collectives on the two-tier
network (:func:`model.physics.collectives.collective_time_s`), the pipeline and the engine's
host overhead (docs/serving.md, "Step time").

Per GPU and per layer: t_op = n_k·overhead + max(F_mat/(η·P_mat) + F_vec/(η·P_vec) + N_exp/R_exp,
M/B_hbm) (the roofline of docs/model.md §4, forward only; a GEMM's FLOP time over its shape
efficiency, :func:`shape_efficiency`), plus per layer two all-reduces of the step's activations
over tp (Megatron TP: after the attention output and after the MLP) or, with attention DP, the
MoE layer's all-gather of the tokens and reduce-scatter of its outputs over ep. A pipeline of pp
stages runs pp microbatches of the step at once: each sequence advances by one step every
pp·(t_stage + t_p2p), t_stage the slowest (last) stage's ⌈layers/pp⌉ layers and the LM head.
The engine's host adds ``step_overhead_s`` per step and ``sequence_overhead_s`` per sequence a
rank handles in the step (:mod:`model.specs.serving_stack`), once per microbatch; with the
stack's ``overlap_scheduler`` the host prepares step n + 1 while the GPU runs step n, so only
the host time beyond the GPU's shows: engine/step = max(t_host − t_GPU, 0) (TensorRT-LLM's
PyExecutor overlap loop, docs/source/features/overlap-scheduler.md; NanoFlow, Zhu et al. 2024).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from model.physics import gemm, routing
from model.physics.collectives import Collective, collective_time_s
from model.physics.context import Ctx
from model.physics.kernels import pricing as kernel_pricing
from model.physics.moe import grouped_wave_efficiency
from model.physics.ops import wave_efficiency
from model.physics.optable import Kind
from model.physics.roofline import kernel_times
from model.physics.serving_ops import ACT_BYTES, Layout, StepOp, head_ops, layer_ops
from model.specs.execution import Execution
from model.specs.hardware import System
from model.specs.precision import PRECISIONS
from model.specs.serving import ServingWorkload
from model.specs.serving_stack import ServingStack
from model.specs.transformer import Transformer

if TYPE_CHECKING:
    from model.physics.kernels.moe_kernel import KernelFit


@dataclass
class Engine:
    """What a step is priced with: the model, the system with the stack applied, the pricing
    context (precision, efficiencies) and the stack's limits and step overhead."""

    model: Transformer
    system: System
    workload: ServingWorkload
    stack: ServingStack
    ctx: Ctx
    step_overhead_s: float
    sequence_overhead_s: float = 0.0
    # the measured fused-MoE kernel fit of this GPU × weight precision (None: the roofline);
    # model.physics.kernels.moe_kernel is imported only for a stack that asks for it
    moe_kernel: KernelFit | None = None
    # the measured decode-attention table's (GPU, KV dtype) where the stack prices decode
    # attention by it (None: the roofline)
    decode_attention: tuple[str, str] | None = None
    # a separate draft model's engine (speculative decoding without an MTP head), or None
    draft: Engine | None = None
    # seconds each kernel of a step adds on the GPU (a CUDA-graph node's launch gap, or an
    # eager launch without graphs): additive, not hidden under a memory-bound kernel's time
    node_s: float = 0.0

    @classmethod
    def make(cls, model: Transformer, system: System, workload: ServingWorkload,
             stack: ServingStack) -> Engine:
        applied = stack.apply(system)
        node_s = applied.kernel_overhead_s if stack.name != "none" else 0.0
        priced = applied.with_overrides(kernel_overhead_s=0.0) if node_s else applied
        ctx = Ctx.make(model, priced, None, Execution(precision=workload.weight_precision))
        fit = None
        if model.moe and stack.moe_kernel == "measured":
            from model.physics.kernels.moe_kernel import engine_serving_fit
            fit = engine_serving_fit(system.name, system.generation, workload.weight_precision,
                                     stack.kernels)
        table = None
        if stack.decode_attention == "kernel-tables":
            table = kernel_pricing.decode_attention_key(system.name, str(workload.kv_precision),
                                                        stack.kernels)
        draft = None
        if workload.draft_model is not None:  # priced alone: no MTP, no draft of its own
            from model.specs.models import load_model
            draft = cls.make(load_model(workload.draft_model), system, workload.with_overrides(
                draft_model=None, mtp_depth=0, mtp_acceptance=0.0), stack)
        return cls(model, applied, workload, stack, ctx, *stack.overheads_s(system), fit, table,
                   draft, node_s)


class StepTimes:
    """Seconds of one step per sequence advance (arrays over candidates) and its parts per op
    (per GPU, the whole stage's layers; ``comm/…`` the collectives). The parts are a stage's
    times times ``scale`` (the pipeline's pp microbatches) plus ``extra`` parts, scaled only
    when asked for (the search reads the totals)."""

    def __init__(self, total_s: np.ndarray, parts: dict[str, np.ndarray],
                 scale: np.ndarray | None = None,
                 extra: dict[str, np.ndarray] | None = None) -> None:
        self.total_s = total_s
        self.parts, self._scale, self._extra = parts, scale, extra or {}
        self._by_op: dict[str, np.ndarray] | None = None if scale is not None else parts

    @property
    def by_op_s(self) -> dict[str, np.ndarray]:
        if self._by_op is None:
            scale = self._scale
            self._by_op = {k: scale * v for k, v in self.parts.items()} | self._extra
        return self._by_op


def _priced(op: StepOp, engine: Engine, zero: np.ndarray) -> np.ndarray:
    """One op's seconds: the training roofline of its forward counts, times its share, a GEMM's
    FLOP time divided by its shape efficiency (:func:`shape_efficiency`). Where the GPU ×
    weight precision has a measured fused-MoE kernel fit, the routed experts are priced by it
    (:func:`model.physics.kernels.moe_kernel.grouped_moe_s`: the touched experts' weights, the
    tile-padded matmuls and the token permute and un-permute, ``moe_kernel.permute_s``, so
    ``moe/permute`` is in it)."""
    if engine.moe_kernel is not None:
        if op.routing is not None:
            from model.physics.kernels.moe_kernel import grouped_moe_s
            return op.share * grouped_moe_s(engine.moe_kernel, engine.model,
                                            *op.routing) + zero
        if op.spec.kind == Kind.PERMUTE:
            return zero
    if op.attention is not None and engine.decode_attention is not None:
        queries, seqs, keys, heads, kv_heads, head_dim = op.attention
        if np.all(np.asarray(queries) == 1.0):  # one query each: the tables' kernel
            return op.share * kernel_pricing.decode_attention_s(
                engine.decode_attention, engine.system.hbm_bandwidth_gb_per_s * 1e9, seqs,
                keys, heads, np.maximum(kv_heads, 1.0), head_dim) + zero
    if op.shape is not None and engine.system.sm_count > 0:
        op.counts.wave_fwd = gemms_efficiency(engine, op.shape)
    *_, t = kernel_times(op.spec, op.counts, "fwd", zero, engine.ctx)
    return t * op.share


def gemms_efficiency(engine: Engine, gemms: tuple) -> np.ndarray:
    """Shape efficiency of an op of one or more GEMMs run one after the other, each
    (rows, k, n, experts) (:func:`shape_efficiency`): their FLOPs (∝ rows·k·n) over the sum of
    each one's FLOPs / efficiency."""
    if len(gemms) == 1:
        return shape_efficiency(engine, *gemms[0])
    flops = [np.asarray(r * k * n, dtype=float) for r, k, n, *_ in gemms]
    tiles = None  # a grouped op's GEMMs share their row tiles: computed once
    if len(gemms[0]) == 5:
        tiles = expert_row_tiles(engine, gemms[0][4], gemms[0][3])
    slow = sum(f / shape_efficiency(engine, *g, row_tiles=tiles) for f, g in zip(flops, gemms))
    return np.where(slow > 0, sum(flops) / np.maximum(slow, 1e-300), 1.0)


def shape_efficiency(engine: Engine, rows, k, n, experts: float | np.ndarray,
                     tokens: np.ndarray | None = None,
                     row_tiles: np.ndarray | None = None) -> np.ndarray:
    """Forward shape efficiency of a GEMM Y[rows, n] = X[rows, k]·W[k, n] (``experts`` > 0: a
    grouped GEMM of that many local experts sharing ``rows``), the training model's
    (:mod:`model.physics.gemm`): the depth efficiency k/(k + k₀) (k₀ fitted on DeepGEMM's
    published FP8 kernels, scaled by the precision's MMA rate) times the wave quantisation of
    the 128×128 output tiles over the SMs. A grouped kernel (TensorRT-LLM's fused MoE runs one
    CUTLASS grouped GEMM over the local experts) with the step's ``tokens`` routed top-k over
    the model's experts runs only the touched experts, each its rows padded to whole tiles
    (:func:`expert_row_tiles`, or ``row_tiles`` where computed already); without ``tokens``
    every local expert gets rows/experts rows
    (:func:`model.physics.moe.grouped_wave_efficiency`). Decode GEMMs have few rows: the
    tiles' padding, not the FLOPs, sets their compute time. A stack whose ``gemm_shapes`` is
    ``kernel-tables`` prices a dense GEMM's shape by the measured kernel's fitted terms instead
    (:func:`model.physics.kernels.pricing.gemm_shape_efficiency`: split-K waves, fitted depth,
    padded rows) of the stack's engine (its ``kernels``: TensorRT-LLM, vLLM or SGLang), where
    that engine's tables cover the system and precision."""
    sysm, field = engine.system, PRECISIONS[engine.ctx.execution.precision].peak_field
    rows = np.maximum(np.asarray(rows, dtype=float), 1e-9)
    e = np.asarray(experts, dtype=float)
    if not np.any(e > 0) and engine.stack.gemm_shapes == "kernel-tables":
        key = kernel_pricing.table_key(sysm.name, field, engine.stack.kernels)
        if key is not None:  # the measured kernel's shape terms (model.physics.kernels)
            return kernel_pricing.gemm_shape_efficiency(key, rows, k, n, engine.stack.kernels)
    depth = gemm.depth_efficiency(k, gemm.depth_overhead(field))
    if not np.any(e > 0):
        return depth * wave_efficiency(rows, n, sysm.gemm_tile, sysm.sm_count)
    if tokens is not None:
        tiles = expert_row_tiles(engine, tokens, e) if row_tiles is None else row_tiles
        return depth * routing.padded_wave_efficiency(rows, tiles, n, sysm.gemm_tile,
                                                      sysm.sm_count)
    e = np.maximum(e, 1.0)
    return depth * grouped_wave_efficiency(rows, e, n, sysm.gemm_tile, sysm.sm_count)


def expert_row_tiles(engine: Engine, tokens, local_experts) -> np.ndarray:
    """Row tiles of one GPU's ``local_experts`` when the step's ``tokens`` tokens are routed
    top-k over the model's E experts (balanced routing, :mod:`model.physics.routing`):
    local·E[⌈m/B⌉], m ~ Binomial(T, k/E), B the system's tile edge."""
    m = engine.model
    return np.asarray(local_experts, dtype=float) * routing.row_tiles_per_expert(
        tokens, m.top_k, m.experts, engine.system.gemm_tile)


def _tau(group: np.ndarray, inner: np.ndarray | float, domain: int) -> np.ndarray:
    """Members of a group inside one NVLink domain when the instance is packed tp first:
    a group of ``group`` GPUs strided by ``inner`` has min(group, max(domain // inner, 1))."""
    return np.minimum(group, np.maximum(np.floor(domain / np.asarray(inner, float)), 1.0))


def layer_comm_s(engine: Engine, lay: Layout, tokens: np.ndarray) -> np.ndarray:
    """Collectives of one average layer for a step of ``tokens`` tokens on the stage: two
    all-reduces of s·T·e bytes over tp without attention DP; with it, the MoE layers gather
    every rank's tokens and scatter the results back over the ep = tp group, as TensorRT-LLM's
    fused MoE does with attention DP (CutlassFusedMoE, tensorrt_llm/_torch/modules/fused_moe/
    fused_moe_cutlass.py @ 000a01de: "routing [+ dynamic quant] [+ allgather] + FusedMoe Op +
    reducescatter, with AttentionDP on"): an all-gather of the T_i tokens quantised to the
    weights' format (s_w bytes per value: FP8 per tensor, NVFP4 with its scales) and a
    reduce-scatter of the T_i·e BF16 outputs, each GPU computing its experts' share of every
    token. It moves T_i·e·(s_w + 2)·(tp − 1)/tp per GPU whatever top_k, not the k routed copies
    of an all-to-all."""
    m, sysm = engine.model, engine.system
    domain = sysm.nvlink_domain_size
    tau_tp = _tau(lay.tp, 1.0, domain)
    ar = collective_time_s(Collective.ALLREDUCE, ACT_BYTES * tokens * m.hidden, lay.tp,
                           tau_tp, sysm)
    out = np.where(lay.adp, 0.0, 2.0 * ar)
    if m.moe:
        moe_share = m.moe_layers / m.layers
        tau_ep = _tau(lay.ep, 1.0, domain)
        gather = collective_time_s(Collective.ALLGATHER,
                                   engine.workload.weight_bytes * tokens * m.hidden, lay.ep,
                                   tau_ep, sysm)
        scatter = collective_time_s(Collective.REDUCESCATTER, ACT_BYTES * tokens * m.hidden,
                                    lay.ep, tau_ep, sysm)
        out = out + np.where(lay.adp, moe_share * (gather + scatter), 0.0)
    return out


def stage_times(engine: Engine, lay: Layout, tokens: np.ndarray, seqs: np.ndarray,
                keys: np.ndarray | float, decode: bool, prompt: float, head_rows: np.ndarray,
                ) -> StepTimes:
    """One pipeline stage's time for a microbatch of ``tokens`` tokens of ``seqs`` sequences:
    ⌈layers/pp⌉ layers (ops and collectives) and the LM head on ``head_rows`` positions."""
    zero = np.zeros(len(lay.tp))
    depth = np.ceil(engine.model.layers / lay.pp)
    by_op: dict[str, np.ndarray] = {}
    layer = layer_ops(engine.model, engine.workload, lay, tokens, seqs, keys, decode, prompt)
    for op in layer:
        by_op[op.spec.name] = by_op.get(op.spec.name, zero) + depth * _priced(op, engine, zero)
    by_op["comm/layers"] = depth * layer_comm_s(engine, lay, tokens)
    head = head_ops(engine.model, engine.workload, lay, head_rows)
    for op in head:
        by_op[op.spec.name] = _priced(op, engine, zero)
    total = sum(by_op.values(), zero)
    if engine.node_s:  # scalars folded first: one array op fewer per term on the hot path
        s = engine.node_s
        graph = depth * (s * layer_nodes(layer) + layer_comm_nodes(engine, lay, s)) + (
            s * layer_nodes(head))
        by_op["engine/graph"] = graph
        total = total + graph
    return StepTimes(total, by_op)


def layer_nodes(step_ops: list[StepOp]) -> float:
    """Kernels of ``step_ops`` run once: each op's launches times the share of layers it
    runs in (a MoE model's dense and MoE layers)."""
    return float(sum(op.counts.launches_fwd * op.share for op in step_ops))


def layer_comm_nodes(engine: Engine, lay: Layout, each: float = 1.0) -> np.ndarray:
    """Collective kernels of one average layer (:func:`layer_comm_s`), ``each`` apiece: two
    all-reduces over tp > 1 without attention DP; with it, a MoE layer's all-gather and
    reduce-scatter over ep > 1 (none in a dense model)."""
    m = engine.model
    tp_side = (2.0 * each) * (lay.tp > 1)
    if not m.moe:
        return np.where(lay.adp, 0.0, tp_side)
    return np.where(lay.adp, (2.0 * each * m.moe_layers / m.layers) * (lay.ep > 1), tp_side)


def p2p_s(engine: Engine, lay: Layout, tokens: np.ndarray) -> np.ndarray:
    """A stage boundary's message: the microbatch's s·T·e activations, each of the tp GPUs
    sending its share (one hop of :func:`collective_time_s` P2P over pp)."""
    v = ACT_BYTES * tokens * engine.model.hidden / lay.tp
    tau = _tau(lay.pp, lay.tp, engine.system.nvlink_domain_size)
    return collective_time_s(Collective.P2P, v, lay.pp, tau, engine.system)


def step_times(engine: Engine, lay: Layout, tokens: np.ndarray, seqs: np.ndarray,
               keys: np.ndarray | float, decode: bool, prompt: float = 1.0,
               head_rows: np.ndarray | None = None) -> StepTimes:
    """Seconds between two advances of the same sequence for a step of ``tokens`` tokens of
    ``seqs`` sequences on the instance: pp·(t_stage(T/pp) + t_p2p) + the step overhead, per
    op scaled alike (so the parts add up to the total)."""
    pp = lay.pp
    rows = tokens if head_rows is None else head_rows
    stage = stage_times(engine, lay, tokens / pp, seqs / pp, keys, decode, prompt, rows / pp)
    hop = np.where(pp > 1, p2p_s(engine, lay, tokens / pp), 0.0)
    per_rank = seqs / pp / lay.attention_groups  # sequences one rank's host handles per step
    host = pp * (engine.step_overhead_s + engine.sequence_overhead_s * per_rank)
    gpu = pp * (stage.total_s + hop)  # the stage's parts and the hop, summed before scaling
    if engine.stack.overlap_scheduler:  # host work hidden behind the GPU's: the excess shows
        host = np.maximum(host - gpu, 0.0)
    return StepTimes(gpu + host, stage.parts, pp,
                     {"comm/pipeline": pp * hop, "engine/step": host})
