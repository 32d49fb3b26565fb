"""The full (unsharded) feature sizes an op table names (``e``, ``f``, ``qkv``, the MoE and MLA
sizes …), read by the op tables (:mod:`model.physics.strategies`, :mod:`model.physics.moe`)
and by the pricing context (:mod:`model.physics.context`)."""

from __future__ import annotations

from model.specs.modes import Mode
from model.specs.transformer import Transformer


def model_dims(model: Transformer, mode: Mode) -> dict[str, int]:
    """Full (unsharded) sizes by name: e, f (MLP hidden), f_in (fc1 output: f or 2f for SwiGLU),
    qkv ((h + 2k)·q), hq (h·q, the attention output the projection reads: e unless the head
    dimension is set apart from e // h), l, V. In paper mode the LayerNorm2D feature dim is
    ``ln2d`` = l (bug 1)."""
    e, q = model.hidden, model.head_dim
    return {
        "e": e,
        "f": model.ffn,
        "f_in": model.ffn * (2 if model.mlp == "swiglu" else 1),
        "qkv": (model.heads + 2 * model.kv_heads) * q,
        "attn_out": model.heads * model.value_head_dim,
        "l": model.seq_len,
        "V": model.vocab,
        "ln2d": model.seq_len if mode.layernorm2d_uses_seq_len else e,
        **moe_dims(model),
    }


def moe_dims(model: Transformer) -> dict[str, int]:
    """The MoE and MLA feature sizes the rows name (see :func:`model_dims`)."""
    gated = 2 if model.mlp == "swiglu" else 1
    return {"E": model.experts, "fe": model.expert_ffn, "fe_in": gated * model.expert_ffn,
            "fs": model.shared_ffn, "fs_in": gated * model.shared_ffn, "e2": 2 * model.hidden,
            "q_lora": model.q_lora_rank, "kv_lora": model.kv_lora_rank,
            "mla_down": model.q_lora_rank + model.kv_lora_rank + model.qk_rope_head_dim,
            "mla_latent": model.q_lora_rank + model.kv_lora_rank,
            "q_heads": model.heads * model.qk_head_dim,
            "kv_up": model.heads * (model.qk_nope_head_dim + model.value_head_dim)}
