"""Serving on the training op tables: one inference step's ops per GPU, their counts and the KV
cache (docs/serving.md, "Physics").

An inference step is the forward pass of :mod:`model.physics.ops` on the tokens of the step:
a prefill chunk (T prompt tokens, causal attention over the prompt: compute-bound) or a decode
step (one token — K + 1 with MTP — per sequence in flight, attention reading each sequence's
KV cache: memory-bound). Every function takes the layout as numpy arrays over candidates
(:class:`Layout`) and returns arrays, so one call prices a million layouts.

Layout of one instance (TensorRT-LLM's mapping, ``tensorrt_llm/mapping.py``): ``tp`` GPUs shard
attention heads and MLP features (Megatron TP: an all-reduce after the attention output and
after the MLP); ``ep`` of them hold a share of the routed experts each, the rest (etp = tp/ep)
splitting each expert's features; with attention data parallelism (``adp``, MoE models) each
of the tp GPUs runs attention on its own requests with the full attention weights and the
MoE layer gathers every rank's tokens and scatters the results back over the ep = tp GPUs
(TensorRT-LLM's ``enable_attention_dp`` with its CUTLASS fused MoE:
:func:`model.physics.serving_step.layer_comm_s`); ``pp`` stages hold layers/pp layers each.

Symbols: T_i tokens of the step on the instance, T_a = T_i / (tp if adp else 1) the tokens of
one GPU's attention, g = 1 if adp else tp the attention's shard count, s_w / s_kv bytes per
weight / KV element, s = 2 bytes per activation element (BF16).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from model.physics import ops, routing
from model.physics.optable import Kind, OpSpec
from model.specs import params
from model.specs.serving import ServingWorkload
from model.specs.transformer import Transformer

ACT_BYTES = 2.0  # activations between kernels stay in BF16 under every weight precision
LOGIT_BYTES = 4.0  # FP32 logits of the sampled positions


@dataclass(frozen=True)
class Layout:
    """The layout of one instance as float arrays over candidates (see the module docstring)."""

    tp: np.ndarray
    pp: np.ndarray
    ep: np.ndarray
    adp: np.ndarray  # bool

    @property
    def attention_shards(self) -> np.ndarray:
        """g: GPUs one request's attention is split over (1 with attention DP)."""
        return np.where(self.adp, 1.0, self.tp)

    @property
    def attention_groups(self) -> np.ndarray:
        """Attention replicas inside one instance's stage: tp with attention DP, else 1."""
        return np.where(self.adp, self.tp, 1.0)

    @property
    def gpus(self) -> np.ndarray:
        return self.tp * self.pp

    def take(self, idx: np.ndarray) -> Layout:
        return Layout(self.tp[idx], self.pp[idx], self.ep[idx], self.adp[idx])

    @property
    def key(self) -> np.ndarray:
        """One exact float per layout (tp, pp, ep < 2048): equal keys, equal layouts."""
        return ((self.tp * 2048.0 + self.pp) * 2048.0 + self.ep) * 2.0 + self.adp


def layout(tp, pp, ep, adp) -> Layout:
    """A :class:`Layout` from scalars or arrays (broadcast to one length)."""
    tp, pp, ep, adp = np.broadcast_arrays(np.asarray(tp, float), np.asarray(pp, float),
                                          np.asarray(ep, float), np.asarray(adp, bool))
    return Layout(tp.ravel(), pp.ravel(), ep.ravel(), adp.ravel())


# --- KV cache ----------------------------------------------------------------------------------
def kv_elements_per_token_layer(m: Transformer, g: np.ndarray | float) -> np.ndarray:
    """KV-cache elements one GPU stores per token per layer, with the attention split over g.

    MHA/GQA: K and V of the local KV heads, max(k/g, 1)·(q_k + q_v) (a KV head is replicated
    when g exceeds k: Megatron/TensorRT-LLM GQA under TP); MLA: the compressed latent and the
    decoupled rotary key, d_c + d_r per token whatever g (DeepSeek-V2 §2.1.2, eq. 9-10: the
    latent is not split over heads, so every TP GPU keeps it whole)."""
    g = np.asarray(g, dtype=float)
    if m.mla:
        return np.full(g.shape, float(m.kv_lora_rank + m.qk_rope_head_dim))
    kv_local = np.maximum(m.kv_heads / g, 1.0)
    return kv_local * (m.qk_head_dim + m.value_head_dim)


def cached_tokens_per_layer(m: Transformer, context: np.ndarray | float) -> np.ndarray:
    """Tokens the KV cache keeps per layer on average over the layers for a sequence of
    ``context`` tokens: all of them in full-attention layers, at most W in window layers
    (sliding windows keep the last W; chunked attention the current chunk, at most W)."""
    c = np.asarray(context, dtype=float)
    if not m.sliding_window:
        return c
    share = (m.window_layers if m.window_layers is not None else m.layers) / m.layers
    return (1.0 - share) * c + share * np.minimum(c, m.sliding_window)


def kv_bytes_per_token(m: Transformer, wl: ServingWorkload, g: np.ndarray | float = 1.0,
                       context: float | None = None) -> np.ndarray:
    """KV-cache bytes per token of context summed over the layers (one GPU's share with the
    attention split over g), at ``context`` tokens for windowed models (None: no window cut)."""
    per_layer = kv_elements_per_token_layer(m, g) * wl.kv_bytes * m.layers
    if context is None or not m.sliding_window:
        return per_layer
    return per_layer * cached_tokens_per_layer(m, context) / context


def kv_bytes_per_sequence(m: Transformer, wl: ServingWorkload, lay: Layout,
                          context: float) -> np.ndarray:
    """Bytes one GPU keeps for one sequence of ``context`` tokens: its share of the heads
    (or all of them with attention DP) in its stage's layers/pp layers."""
    per_layer = kv_elements_per_token_layer(m, lay.attention_shards) * wl.kv_bytes
    return per_layer * cached_tokens_per_layer(m, context) * np.ceil(m.layers / lay.pp)


# --- weights -------------------------------------------------------------------------------------
def _gates(m: Transformer) -> int:
    return 3 if m.mlp == "swiglu" else 2


def attention_in_params(m: Transformer, g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(replicated, sharded over g) input-projection weights of one layer's attention per GPU.

    MHA/GQA: Q of the local heads plus K, V of max(k/g, 1) heads; MLA: the down-projections
    W_DQ, W_DKV (with the rotary key) replicated, the up-projections W_UQ, W_UK, W_UV sharded
    by heads (absorbed into the attention for decode, DeepSeek-V2 §2.1.2: same weights read)."""
    e, h = m.hidden, m.heads
    if m.mla:
        down = e * (m.q_lora_rank + m.kv_lora_rank + m.qk_rope_head_dim)
        q_up = m.q_lora_rank * h * m.qk_head_dim if m.q_lora_rank else e * h * m.qk_head_dim
        up = q_up + m.kv_lora_rank * h * (m.qk_nope_head_dim + m.v_head_dim)
        return np.full(g.shape, float(down)), up / g
    kv = np.maximum(m.kv_heads / g, 1.0) * 2 * m.head_dim * e
    return np.zeros(g.shape), e * h * m.head_dim / g + kv


def weight_bytes_per_gpu(m: Transformer, wl: ServingWorkload, lay: Layout) -> np.ndarray:
    """Weights one GPU holds, bytes: its stage's layers (attention and dense MLPs split over g,
    routed experts over ep·etp = tp, shared experts as the dense MLP), the embedding and the LM
    head split over g (vocabulary-parallel), the MTP modules on the last stage. Norms and the
    router in BF16; the rest at the weight precision (scales included)."""
    g = lay.attention_shards
    rep, shard = attention_in_params(m, g)
    attn = rep + shard + m.heads * m.value_head_dim * m.hidden / g
    dense_mlp = _gates(m) * m.hidden * m.ffn / g
    moe = 0.0
    if m.moe:
        moe = m.experts * _gates(m) * m.hidden * m.expert_ffn / lay.tp + (
            _gates(m) * m.hidden * m.shared_ffn / g)
    dense_layers = m.layers - m.moe_layers
    per_stage = (m.layers * attn + dense_layers * dense_mlp + m.moe_layers * moe) / lay.pp
    head = m.vocab * m.hidden * (1 if m.tied_embeddings else 2) / g
    mtp = m.mtp_layers * (attn + (moe if m.moe else dense_mlp) + 2 * m.hidden * m.hidden)
    bf16 = (m.layers / lay.pp) * (params.norm_params(m) + (m.hidden * m.experts if m.moe else 0))
    return (per_stage + head + mtp) * wl.weight_bytes + ACT_BYTES * bf16


def experts_touched(m: Transformer, tokens: np.ndarray) -> np.ndarray:
    """Expected share of a layer's routed experts at least one of ``tokens`` tokens picks, each
    token choosing top_k of E (uniform routing): 1 − (1 − k/E)^T
    (:func:`model.physics.routing.touched_share`). A decode step at small batch reads only these
    experts' weights and computes only their tiles."""
    return routing.touched_share(tokens, m.top_k, m.experts)


# --- one step's ops ------------------------------------------------------------------------------
@dataclass
class StepOp:
    """One op of a step per GPU: its row (kind, name), counts and the share of the stage's
    layers it runs in (1 for every layer; dense/MoE shares of a MoE model)."""

    spec: OpSpec
    counts: ops.OpCounts
    share: float
    # the op's GEMMs as (rows m, reduction k, columns n, local experts[, tokens routed]) each,
    # priced by their shape (model.physics.serving_step.shape_efficiency: the DeepGEMM-fitted
    # depth and wave efficiencies; an op of several GEMMs takes their FLOP-weighted time; a
    # grouped GEMM's T tokens routed top-k over the model's experts set its touched experts'
    # row tiles, model.physics.routing); None: no GEMM
    shape: tuple | None = None
    # a routed-experts op: (T tokens entering the layer, local experts, etp), priced by the
    # measured-kernel model where one is fitted (model.physics.kernels.moe_kernel)
    routing: tuple | None = None
    # an MHA/GQA decode attention op: (new tokens per sequence, sequences on the GPU, cached
    # keys, local query heads, local KV heads, head dim), priced by the measured decode kernel
    # where the stack asks and every sequence has one new token
    # (checked only when priced by it: model.physics.serving_step._priced)
    attention: tuple | None = None


def _linear(name: str, rows, k, n, wl: ServingWorkload, kind: Kind = Kind.LINEAR,
            weight_rows=None) -> StepOp:
    """Y[rows, n] = X[rows, k]·W[k, n], the forward of :func:`model.physics.ops.linear`
    (F = r·n·(2k − 1)) with BF16 activations and weights at the workload's precision:
    M = 2(r·k + r·n) + s_w·k·n; the weights read are ``weight_rows``·n when only some of them
    are touched. Only the forward fields are computed: inference has no backward."""
    read = k * n if weight_rows is None else weight_rows * n
    c = ops.OpCounts(flop_mat_fwd=rows * n * (2 * k - 1),
                     bytes_fwd=ACT_BYTES * rows * (k + n) + wl.weight_bytes * read,
                     weight_bytes=wl.weight_bytes * k * n)
    return StepOp(OpSpec(name, kind), c, 1.0, ((rows, k, n, 0.0),))


def _attention_decode(m: Transformer, seqs, queries: float, keys, g, wl) -> StepOp:
    """Decode attention of ``seqs`` sequences on one GPU, each ``queries`` new tokens over
    ``keys`` cached ones (paged, split-K flash decoding: the KV cache read once per step).

    FLOPs per query per local head: 2·keys·(q_k + q_v) (QKᵀ and PV, as
    :func:`model.physics.ops.flash_attention`'s forward) — MLA with absorbed up-projections
    attends in the latent space, 2·keys·(2·d_c + d_r); softmax 3 vector FLOP and one exp per
    score. Bytes: the cached elements of every sequence at s_kv plus Q and O in BF16."""
    heads = m.heads / g
    if m.mla:
        width = 2.0 * m.kv_lora_rank + m.qk_rope_head_dim
    else:
        width = float(m.qk_head_dim + m.value_head_dim)
    scores = seqs * queries * heads * keys
    cached = seqs * keys * kv_elements_per_token_layer(m, g) * wl.kv_bytes
    qo = ACT_BYTES * seqs * queries * heads * (m.qk_head_dim + m.value_head_dim)
    c = ops.OpCounts(flop_mat_fwd=2.0 * scores * width, flop_vec_fwd=3.0 * scores,
                     bytes_fwd=cached + qo, exp_fwd=scores)
    op = StepOp(OpSpec("attn/core", Kind.ATTENTION), c, 1.0)
    if not m.mla:  # the tables' kernel where one query each (checked when a stack asks)
        op.attention = (queries, seqs, keys, heads, m.kv_heads / g, float(m.qk_head_dim))
    return op


def _attention_prefill(m: Transformer, tokens, prompt: float, g, cached: float = 0.0,
                       ) -> StepOp:
    """Causal flash attention of prompts whose last ``prompt`` tokens are computed after
    ``cached`` tokens already in the KV cache (prefix caching; 0 without), ``tokens`` computed
    tokens on this GPU: the forward of :func:`model.physics.ops.flash_attention` (H = sequences
    · local heads, r = prompt rows, L = cached + prompt keys, w = q_k + q_v: F_mat =
    H·r·L·(2q_k − 1) + H·r·q_v·(2L − 1), F_vec = 2·H·r·L + H·r·(L − 1), one exp per score,
    M = s(H·r·w + b·kv·L·w + H·r)) with the masked share skipped: the rows' mean keys are
    (L·k̄(L) − c·k̄(c))/r, k̄ the mean keys per query of :func:`model.specs.params.attention_keys`
    (causal halves, windows), so a cached prefix is read, not recomputed, and each computed
    token still attends to it (vLLM's and TensorRT-LLM's prefix-cache hit: the prefill runs on
    the uncached suffix against the cached blocks)."""
    seqs = tokens / prompt
    kv = np.maximum(m.kv_heads / g, 1.0)
    qk, v = float(m.qk_head_dim), float(m.value_head_dim)
    seq = cached + prompt
    hh, rows = seqs * (m.heads / g), prompt
    summed = seq * params.attention_keys(m, seq) - (
        cached * params.attention_keys(m, cached) if cached else 0.0)
    share = summed / prompt / seq  # the causal share of the r·L scores, windows
    c = ops.OpCounts(
        flop_mat_fwd=share * (hh * rows * seq * (2 * qk - 1) + hh * rows * v * (2 * seq - 1)),
        flop_vec_fwd=share * (2 * hh * rows * seq + hh * rows * (seq - 1)),
        bytes_fwd=ACT_BYTES * (hh * rows * (qk + v) + seqs * kv * seq * (qk + v) + hh * rows),
        exp_fwd=share * hh * rows * seq)
    return StepOp(OpSpec("attn/core", Kind.ATTENTION), c, 1.0)


def layer_ops(m: Transformer, wl: ServingWorkload, lay: Layout, tokens: np.ndarray,
              seqs: np.ndarray, keys: np.ndarray | float, decode: bool,
              prompt: float = 1.0) -> list[StepOp]:
    """The ops of one (average) layer on one GPU for a step of ``tokens`` tokens of ``seqs``
    sequences on the instance's stage: norms, attention projections, attention, output
    projection, then the dense MLP and the MoE layer each weighted by its share of layers.
    ``keys``: in decode the keys each query attends to; in prefill the prompt tokens already in
    the cache before the ``prompt`` computed ones (prefix caching, 0 without)."""
    g, groups = lay.attention_shards, lay.attention_groups
    t_a, s_a = tokens / groups, seqs / groups  # one GPU's attention tokens and sequences
    e, h = float(m.hidden), float(m.heads)
    rep, shard = attention_in_params(m, g)
    out = [StepOp(OpSpec("attn/norms", Kind.NORM), _norms(t_a, e), 1.0),
           _linear("attn/qkv", t_a, e, (rep + shard) / e, wl)]
    if decode:
        out.append(_attention_decode(m, s_a, tokens / np.maximum(seqs, 1e-9), keys, g, wl))
    else:
        out.append(_attention_prefill(m, t_a, prompt, g, float(keys)))
    out.append(_linear("attn/out", t_a, h * m.value_head_dim / g, e, wl))
    moe_share = m.moe_layers / m.layers
    if moe_share < 1.0:
        out += _mlp("mlp", m, t_a, m.ffn / g, wl, 1.0 - moe_share)
    if m.moe:
        out += _moe(m, wl, lay, tokens, t_a, g, moe_share)
    return out


def _norms(rows, e: float) -> ops.OpCounts:
    """The layer's two RMSNorms, each a LayerNorm's forward counts
    (:func:`model.physics.ops.layer_norm`: F = 9N, M = s(2N + 2r + 2e), N = r·e)."""
    return ops.OpCounts(flop_vec_fwd=2 * 9 * rows * e,
                        bytes_fwd=2 * ACT_BYTES * (2 * rows * e + 2 * rows + 2 * e),
                        launches_fwd=2.0)


def _mlp(name: str, m: Transformer, rows, f_local, wl, share: float) -> list[StepOp]:
    """A dense (or shared-expert) MLP of f_local local features: fc1 (gate and up), the
    activation, fc2."""
    gates = _gates(m) - 1
    fc1 = _linear(f"{name}/fc1", rows, float(m.hidden), gates * f_local, wl)
    act = StepOp(OpSpec(f"{name}/act", Kind.ACT),
                 (ops.swiglu if m.mlp == "swiglu" else ops.gelu)(rows * f_local, ACT_BYTES), 1.0)
    fc2 = _linear(f"{name}/fc2", rows, f_local, float(m.hidden), wl)
    for op in (fc1, act, fc2):
        op.share = share
    return [fc1, act, fc2]


def _moe(m: Transformer, wl, lay: Layout, tokens, t_a, g, share: float) -> list[StepOp]:
    """Router (BF16), the permutation of the tokens to their experts' rows and back, the
    routed experts' grouped GEMMs on the T_i·k/ep tokens routed to one GPU reading only the
    experts they touch, and the shared experts."""
    router = _linear("moe/router", t_a, float(m.hidden), float(m.experts), wl)
    router.counts.bytes_fwd = ACT_BYTES * (t_a * (m.hidden + m.experts) + m.hidden * m.experts)
    router.spec = OpSpec("moe/router", Kind.ROUTER)
    etp = lay.tp / lay.ep
    routed = tokens * m.top_k / lay.ep
    local_experts = m.experts / lay.ep
    width = _gates(m) * m.expert_ffn / etp  # fc1 (gate, up) outputs + fc2 inputs per expert
    # only the experts the step's T_i tokens touch run: their weights are read and their rows
    # padded to whole tiles, each its own (model.physics.routing: balanced top-k routing)
    touched = local_experts * experts_touched(m, tokens)
    experts = _linear("moe/experts", routed, float(m.hidden), width, wl, Kind.EXPERT_LINEAR,
                      weight_rows=touched * m.hidden)
    experts.counts.launches_fwd = 2.0  # a grouped GEMM each for fc1 and fc2
    # one grouped kernel each for fc1 and fc2 (TensorRT-LLM's fused MoE: a CUTLASS grouped
    # GEMM over the touched local experts; each expert's rows are padded to whole tiles, so few
    # tokens per expert waste them. fc1 (reduction e, (g − 1)·f outputs) and fc2 (reduction f:
    # a small expert FFN makes it shallow) priced apart
    f_local = m.expert_ffn / etp
    experts.routing = (tokens, local_experts, etp)
    experts.shape = ((routed, float(m.hidden), (_gates(m) - 1) * f_local, local_experts,
                      tokens),
                     (routed, f_local, float(m.hidden), local_experts, tokens))
    # permute each token into its k experts' rows and combine them back (TensorRT-LLM's fused
    # MoE: expandInputRows and finalizeMoeRouting): with attention DP every GPU runs it on all
    # T_i gathered tokens (model.physics.serving_step.layer_comm_s), so read T_i·e, write
    # T_i·k/ep·e, and back (without attention DP, T_a = T_i)
    permute = StepOp(OpSpec("moe/permute", Kind.PERMUTE), ops.OpCounts(
        bytes_fwd=2.0 * ACT_BYTES * (tokens + routed) * m.hidden, launches_fwd=2.0), 1.0)
    out = [router, permute, experts]
    if m.shared_ffn:
        out += _mlp("moe/shared", m, t_a, m.shared_ffn / g, wl, 1.0)
    for op in out:
        op.share = share
    return out


def head_ops(m: Transformer, wl: ServingWorkload, lay: Layout, rows: np.ndarray) -> list[StepOp]:
    """The final norm and the LM head on the ``rows`` positions sampled (every decode token;
    one per prompt), vocabulary-parallel over g, FP32 logits written."""
    g, groups = lay.attention_shards, lay.attention_groups
    r = rows / groups
    lm = _linear("head/lm", r, float(m.hidden), m.vocab / g, wl)
    lm.counts.bytes_fwd = lm.counts.bytes_fwd + (LOGIT_BYTES - ACT_BYTES) * r * m.vocab / g
    norm = ops.layer_norm(1.0, r, float(m.hidden), ACT_BYTES)
    return [StepOp(OpSpec("head/norm", Kind.NORM), norm, 1.0), lm]
