"""Parameter counts and model FLOPs per token of a :class:`~model.specs.transformer.Transformer`.

Per layer (e hidden, h heads, k KV heads, q head dim, f dense MLP size, g = 3 for SwiGLU else 2):

* attention, standard: Q e·h·q, K and V 2·e·k·q, output h·q·e (+ h·q + 2k·q + e biases);
  MLA (DeepSeek-V2/V3, arXiv 2405.04434 §2.1): queries e·r_q + r_q·h·(d_n + d_r) (or
  e·h·(d_n + d_r) without query compression), keys/values e·(r_kv + d_r) + r_kv·h·(d_n + d_v),
  output h·d_v·e, with r_q / r_kv the ranks, d_n / d_r / d_v the head dims;
* dense MLP g·e·f (+ f·(g − 1) + e biases); MoE MLP: E routed experts g·e·f_e each (+ biases),
  the shared experts g·e·f_s, the router e·E;
* norms 4e (two LayerNorms, γ and β), plus the MLA norms of the low-rank latents.

The model keeps the existing dense count exactly (its output-projection and MLP biases; the
QKV bias is not modelled, as the op tables have none). MTP modules (DeepSeek-V3 §2.2): one
layer, the projection of [h; embedding] 2e·e and two norms each; they share the embedding and
the head. ``total_params`` leaves them out, as the DeepSeek-V3 report's 671B does.

Model FLOPs per token (Narayanan et al. 2021, appendix; Megatron-LM's
``num_floating_point_operations``, which Megatron-Bridge's published model TFLOP/s use):
6 × the matmul parameters a token passes through (attention projections, dense MLPs, top_k
routed and the shared experts, router, LM head once per prediction: 1 + MTP layers) plus the
attention scores, 6·n̄·h·(d_qk + d_v) per layer and token with n̄ the keys per query: l/2 for
causal attention (half the matrix), min-window averages for sliding and chunked layers.
"""

from __future__ import annotations

from typing import Protocol


class Transformer(Protocol):
    """The model fields these counts read (:class:`model.specs.transformer.Transformer` has
    them; declared here so that the spec module imports this one and not the reverse)."""

    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    mlp: str
    seq_len: int
    vocab: int
    causal: bool
    tied_embeddings: bool
    attention_bias: bool
    mlp_bias: bool
    experts: int
    top_k: int
    expert_ffn: int
    q_lora_rank: int
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int
    mtp_layers: int
    sliding_window: int
    window_layers: int
    shared_ffn: int
    window_kind: str

    @property
    def moe(self) -> bool: ...
    @property
    def mla(self) -> bool: ...
    @property
    def moe_layers(self) -> int: ...
    @property
    def qk_head_dim(self) -> int: ...
    @property
    def value_head_dim(self) -> int: ...


def _gates(m: Transformer) -> int:
    return 3 if m.mlp == "swiglu" else 2


def attention_params(m: Transformer) -> int:
    """Attention weights (and biases) of one layer."""
    e, h = m.hidden, m.heads
    if m.mla:
        d_qk, d_v, rope = m.qk_head_dim, m.v_head_dim, m.qk_rope_head_dim
        q = (e * m.q_lora_rank + m.q_lora_rank * h * d_qk) if m.q_lora_rank else e * h * d_qk
        kv = e * (m.kv_lora_rank + rope) + m.kv_lora_rank * h * (m.qk_nope_head_dim + d_v)
        return q + kv + h * d_v * e + (e if m.attention_bias else 0)
    width = h * m.head_dim
    qkv = e * (h + 2 * m.kv_heads) * m.head_dim
    return qkv + width * e + (e if m.attention_bias else 0)


def mlp_params(m: Transformer, ffn: int) -> int:
    """One gated (SwiGLU) or plain MLP of hidden size ``ffn`` with its biases."""
    biases = (ffn * (_gates(m) - 1) + m.hidden) if m.mlp_bias else 0
    return _gates(m) * m.hidden * ffn + biases


def norm_params(m: Transformer) -> int:
    """Norm weights of one layer: two LayerNorms (γ, β) or RMSNorms (γ), plus MLA's latent
    norms."""
    latent = 2 * (m.q_lora_rank + m.kv_lora_rank) if m.mla else 0
    per_norm = m.hidden if m.norm == "rmsnorm" else 2 * m.hidden
    return 2 * per_norm + latent


def router_params(m: Transformer) -> int:
    return m.hidden * m.experts


def moe_mlp_params(m: Transformer) -> int:
    """Every expert of one MoE layer, the shared experts and the router."""
    shared = mlp_params(m, m.shared_ffn) if m.shared_ffn else 0
    return m.experts * mlp_params(m, m.expert_ffn) + shared + router_params(m)


def moe_active_params(m: Transformer) -> int:
    """What one token uses of a MoE layer: top_k experts, the shared experts, the router."""
    shared = mlp_params(m, m.shared_ffn) if m.shared_ffn else 0
    return m.top_k * mlp_params(m, m.expert_ffn) + shared + router_params(m)


def embedding_params(m: Transformer) -> int:
    """Embedding (V·e) plus an untied LM head (V·e) plus the final norm (2e), plus learned
    position embeddings l·e (GPT-2, MPT: one row per position up to seq_len); 0 for a ViT.
    RoPE and ALiBi have no parameters."""
    if m.vocab == 0:
        return 0
    positions = m.seq_len * m.hidden if m.position_embedding == "learned" else 0
    return m.vocab * m.hidden * (1 if m.tied_embeddings else 2) + 2 * m.hidden + positions


def _layers_params(m: Transformer, moe_part) -> int:
    per_layer = attention_params(m) + norm_params(m)
    dense = m.layers - m.moe_layers
    return m.layers * per_layer + dense * mlp_params(m, m.ffn) + m.moe_layers * moe_part(m)


def block_params(m: Transformer) -> int:
    """Parameters of one transformer block, on average over the layers (exact for a dense
    model: qkv e·(h+2k)·q + h·q·e + MLP + biases + 4e)."""
    return round(_layers_params(m, moe_mlp_params) / m.layers)


def total_params(m: Transformer) -> int:
    """Every parameter of the main model (MTP modules excluded)."""
    return _layers_params(m, moe_mlp_params) + embedding_params(m)


def mtp_params(m: Transformer) -> int:
    """Each MTP module: one layer (a MoE layer in a MoE model), the 2e → e projection and its
    two input norms (2e each); embedding and head shared with the main model."""
    mlp = moe_mlp_params(m) if m.moe else mlp_params(m, m.ffn)
    layer = attention_params(m) + norm_params(m) + mlp
    return m.mtp_layers * (layer + 2 * m.hidden * m.hidden + 4 * m.hidden)


def active_params(m: Transformer) -> int:
    """Parameters one token uses in the main model, embedding and head included (the
    convention of the DeepSeek-V3, Qwen3 and Mixtral reports)."""
    return _layers_params(m, moe_active_params) + embedding_params(m)


def attention_keys(m: Transformer, seq: float) -> float:
    """Mean keys per query over the layers (model FLOPs convention: l/2 for causal full
    attention, l without a mask): window layers see at most W keys — sliding W − W²/(2l) for
    l > W (each query the last W), chunked min(l, W)/2 (each query its chunk so far)."""
    full = seq / 2 if m.causal else seq
    w = m.sliding_window
    if not w or not m.window_layers:
        return full
    if m.window_kind == "chunked":
        windowed = min(seq, w) / 2 if m.causal else min(seq, w)
    elif seq > w:
        windowed = w - w * w / (2 * seq) if m.causal else w
    else:
        windowed = full
    share = m.window_layers / m.layers
    return (1 - share) * full + share * windowed


def _matmul_params_per_token(m: Transformer) -> float:
    """Matmul weights one token multiplies in a training step's forward pass."""
    attention = attention_params(m) - (m.hidden if m.attention_bias else 0)
    dense_mlp = _gates(m) * m.hidden * m.ffn
    routed = m.top_k * _gates(m) * m.hidden * m.expert_ffn
    moe = routed + _gates(m) * m.hidden * m.shared_ffn + router_params(m)
    layers = m.layers * attention + (m.layers - m.moe_layers) * dense_mlp + m.moe_layers * moe
    mtp = m.mtp_layers * (attention + (moe if m.moe else dense_mlp) + 2 * m.hidden * m.hidden)
    head = m.vocab * m.hidden * (1 + m.mtp_layers)
    return float(layers + mtp + head)


def flops_per_token(m: Transformer) -> float:
    """Model FLOPs per token of one training step (see the module docstring)."""
    scores = 6.0 * attention_keys(m, m.seq_len) * m.heads * (m.qk_head_dim + m.value_head_dim)
    return 6.0 * _matmul_params_per_token(m) + (m.layers + m.mtp_layers) * scores
