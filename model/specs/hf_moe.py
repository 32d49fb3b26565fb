"""Mixture-of-experts, MLA and sliding-window fields from a Hugging Face ``config.json``.

:func:`moe_fields` maps the keys of the published configs of the MoE model types to the fields
of :class:`~model.specs.transformer.Transformer`; :func:`model_from_hf` builds a whole spec for
those types (the dense types are parsed elsewhere). Keys, as the ``transformers`` model classes
read them:

* ``deepseek_v3`` (DeepSeek-V3, and Kimi-K2 which uses its architecture): ``n_routed_experts``,
  ``num_experts_per_tok``, ``moe_intermediate_size``, ``n_shared_experts`` (each of
  ``moe_intermediate_size``), layer i ≥ ``first_k_dense_replace`` with i %
  ``moe_layer_freq`` == 0 is MoE; MLA ``q_lora_rank`` (null: no query compression),
  ``kv_lora_rank``, ``qk_nope_head_dim``, ``qk_rope_head_dim``, ``v_head_dim``; MTP
  ``num_nextn_predict_layers``;
* ``qwen3_moe``: ``num_experts``, ``moe_intermediate_size``; layer i is MoE unless it is in
  ``mlp_only_layers`` or (i + 1) % ``decoder_sparse_step`` ≠ 0; ``head_dim``;
* ``mixtral``: ``num_local_experts`` of ``intermediate_size``; ``sliding_window`` (all layers);
* ``gpt_oss``: ``num_local_experts`` (``experts_per_token``), experts with biases,
  ``attention_bias``; ``layer_types`` names the ``sliding_window`` layers;
* ``llama4`` (its ``text_config``): ``num_local_experts`` of ``intermediate_size`` plus one
  shared expert of the same size, dense layers of ``intermediate_size_mlp``; MoE layers
  ``moe_layers`` or every ``interleave_moe_layer_step``-th; chunked attention of
  ``attention_chunk_size`` on the layers with RoPE (``no_rope_layers`` 1; by default three of
  four).
"""

from __future__ import annotations

from typing import Any

from model.errors import ModelError
from model.specs.transformer import Transformer, transformer_from_dict

MOE_TYPES = ("deepseek_v3", "kimi_k2", "qwen3_moe", "mixtral", "gpt_oss", "llama4")


def model_type(config: dict[str, Any]) -> str:
    """The config's model type (``kimi_k2`` and DeepSeek-V3 architectures map to
    ``deepseek_v3``); ModelError for a type this module does not parse."""
    if not isinstance(config, dict):
        raise ModelError(f"config.json: expected a JSON object, got {type(config).__name__}")
    kind = str(config.get("model_type", ""))
    if "DeepseekV3ForCausalLM" in (config.get("architectures") or []) or kind == "kimi_k2":
        return "deepseek_v3"
    if kind not in MOE_TYPES:
        raise ModelError(f"config.json: model_type '{kind[:40]}' is not a mixture-of-experts "
                         f"type this parser knows ({', '.join(MOE_TYPES)})")
    return kind


def _text(config: dict[str, Any]) -> dict[str, Any]:
    """The language model's keys (Llama 4 nests them in ``text_config``)."""
    inner = config.get("text_config")
    return {**config, **inner} if isinstance(inner, dict) else config


def _int(c: dict[str, Any], key: str, default: Any = None) -> int:
    value = c.get(key, default)
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)) or (
            value != int(value) or value < 0):
        if default is None and value is None:
            raise ModelError(f"config.json: missing '{key}'")
        raise ModelError(f"config.json: '{key}' must be a non-negative integer, got "
                         f"{str(value)[:40]}")
    return int(value)


def _count_moe(layers: int, is_moe) -> int:
    return sum(1 for i in range(layers) if is_moe(i))


def _deepseek(c: dict[str, Any], layers: int) -> dict[str, Any]:
    first, freq = _int(c, "first_k_dense_replace", 0), max(_int(c, "moe_layer_freq", 1), 1)
    expert = _int(c, "moe_intermediate_size")
    shared = _int(c, "n_shared_experts", 0)
    return {"experts": _int(c, "n_routed_experts"), "top_k": _int(c, "num_experts_per_tok"),
            "expert_ffn": expert, "shared_experts": shared, "shared_ffn": shared * expert or None,
            "dense_layers": layers - _count_moe(layers, lambda i: i >= first and i % freq == 0),
            "q_lora_rank": _int(c, "q_lora_rank", 0) if c.get("q_lora_rank") else 0,
            "kv_lora_rank": _int(c, "kv_lora_rank"),
            "qk_nope_head_dim": _int(c, "qk_nope_head_dim"),
            "qk_rope_head_dim": _int(c, "qk_rope_head_dim"), "v_head_dim": _int(c, "v_head_dim"),
            "mtp_layers": _int(c, "num_nextn_predict_layers", 0)}


def _qwen3(c: dict[str, Any], layers: int) -> dict[str, Any]:
    step = max(_int(c, "decoder_sparse_step", 1), 1)
    dense_only = set(c.get("mlp_only_layers") or [])
    moe = _count_moe(layers, lambda i: i not in dense_only and (i + 1) % step == 0)
    return {"experts": _int(c, "num_experts"), "top_k": _int(c, "num_experts_per_tok"),
            "expert_ffn": _int(c, "moe_intermediate_size"), "dense_layers": layers - moe}


def _windows(c: dict[str, Any], layers: int) -> dict[str, Any]:
    """Sliding-window layers: ``layer_types`` when given, else every layer."""
    window = c.get("sliding_window")
    if not window:
        return {}
    types = c.get("layer_types")
    count = (sum(1 for t in types if t == "sliding_attention") if isinstance(types, list)
             else layers)
    return {"sliding_window": _int(c, "sliding_window"), "window_layers": count}


def _mixtral(c: dict[str, Any], layers: int) -> dict[str, Any]:
    return {"experts": _int(c, "num_local_experts"), "top_k": _int(c, "num_experts_per_tok"),
            "expert_ffn": _int(c, "intermediate_size"), **_windows(c, layers)}


def _gpt_oss(c: dict[str, Any], layers: int) -> dict[str, Any]:
    top_k = c.get("num_experts_per_tok", c.get("experts_per_token"))
    return {"experts": _int(c, "num_local_experts"), "top_k": _int({"k": top_k}, "k"),
            "expert_ffn": _int(c, "intermediate_size"), "mlp_bias": True, **_windows(c, layers)}


def _llama4(c: dict[str, Any], layers: int) -> dict[str, Any]:
    step = max(_int(c, "interleave_moe_layer_step", 1), 1)
    listed = c.get("moe_layers")
    moe = (len(set(listed)) if isinstance(listed, list)
           else _count_moe(layers, lambda i: (i + 1) % step == 0))
    expert = _int(c, "intermediate_size")
    out = {"experts": _int(c, "num_local_experts"), "top_k": _int(c, "num_experts_per_tok"),
           "expert_ffn": expert, "shared_experts": 1, "shared_ffn": expert,
           "dense_layers": layers - moe}
    chunk = c.get("attention_chunk_size")
    if chunk:
        rope = c.get("no_rope_layers")
        count = (sum(1 for v in rope if v) if isinstance(rope, list)
                 else _count_moe(layers, lambda i: (i + 1) % 4 != 0))
        out.update(sliding_window=_int(c, "attention_chunk_size"), window_layers=count,
                   window_kind="chunked")
    return out


_PARSERS = {"deepseek_v3": _deepseek, "kimi_k2": _deepseek, "qwen3_moe": _qwen3,
            "mixtral": _mixtral, "gpt_oss": _gpt_oss, "llama4": _llama4}


def moe_fields(config: dict[str, Any]) -> dict[str, Any]:
    """The MoE, MLA, MTP, sliding-window and head-dim fields of our spec from a published
    ``config.json`` of a MoE type (see the module docstring); ModelError if it cannot."""
    kind = model_type(config)
    c = _text(config)
    layers = _int(c, "num_hidden_layers")
    out = _PARSERS[kind](c, layers)
    if c.get("head_dim") and kind != "deepseek_v3":
        out["head_dim"] = _int(c, "head_dim")
    if "attention_bias" in c and isinstance(c["attention_bias"], bool):
        out["attention_bias"] = c["attention_bias"]
    return {k: v for k, v in out.items() if v is not None}


def is_moe_config(config: dict[str, Any]) -> bool:
    """Whether a ``config.json`` is of a MoE type this module reads."""
    try:
        model_type(config)
    except ModelError:
        return False
    return True


def model_from_hf(config: dict[str, Any], seq_len: int, tokens: float | None = None,
                  name: str | None = None, samples: float | None = None) -> Transformer:
    """A whole spec from a MoE type's ``config.json``: the sizes it states plus
    :func:`moe_fields`, SwiGLU MLPs, no dropout, biases only where the config says, and the
    sequence length and budget the config does not hold (none: throughput and days per 1T
    tokens only)."""
    moe = moe_fields(config)
    c = _text(config)
    heads = _int(c, "num_attention_heads")
    spec = {
        "name": name or str(c.get("_name_or_path") or c.get("model_type")),
        "source": "Hugging Face config.json (model.specs.hf_moe)",
        "layers": _int(c, "num_hidden_layers"), "hidden": _int(c, "hidden_size"),
        "heads": heads, "kv_heads": _int(c, "num_key_value_heads", heads),
        "ffn": _int(c, "intermediate_size_mlp", _int(c, "intermediate_size")),
        "mlp": "swiglu", "vocab": _int(c, "vocab_size"), "seq_len": seq_len,
        "bias": False, "dropout": False,
        "tied_embeddings": bool(config.get("tie_word_embeddings", c.get(
            "tie_word_embeddings", False))),
        **({"tokens": tokens} if tokens is not None else {}),
        **({"samples": samples} if samples is not None and tokens is None else {}), **moe}
    return transformer_from_dict(spec)
