"""A Hugging Face ``config.json`` as a model input: dense decoder LLMs of the Llama family.

Supported ``model_type`` values: llama, mistral, qwen2, qwen3, gemma, gemma2, gemma3_text (a
config without ``model_type`` is recognised by its ``architectures``). The mapping, and what a
config says that the estimator leaves out, is in docs/model.md ("A Hugging Face config.json"):

* hidden_size → hidden, num_hidden_layers → layers, num_attention_heads → heads,
  num_key_value_heads → kv_heads (default: heads), head_dim → head_dim (default hidden // heads),
  intermediate_size → ffn, vocab_size → vocab, tie_word_embeddings → tied_embeddings (default:
  the architecture's: true for Gemma, false otherwise);
* the MLP of every supported architecture is gated (gate, up and down matrices): ``swiglu``.
  Gemma's gated GELU (GeGLU) is counted as SwiGLU: the same three matrices; only the gate's
  elementwise cost (a vector op) is SiLU's instead of GELU's;
* attention_bias / mlp_bias → bias (the MLP and output-projection biases; QKV biases, fixed in
  Qwen2, are not counted: (h + 2k)·q parameters per layer);
* no dropout unless attention_dropout > 0; causal attention; RMSNorm counted as LayerNorm.

A config does not say the training sequence length (``max_position_embeddings`` is the longest
the model supports) nor a training budget: :func:`model.specs.models.load_model` takes them.
Mixture-of-experts configs of the types :mod:`model.specs.hf_moe` reads (DeepSeek-V3 / Kimi-K2,
Qwen3-MoE, Mixtral, GPT-OSS, Llama 4) are parsed there; other MoE types are refused by name.
"""

from __future__ import annotations

import re
from typing import Any

from model.errors import ModelError

SUPPORTED = ("gemma", "gemma2", "gemma3_text", "llama", "mistral", "qwen2", "qwen3")
ARCHITECTURES = {"LlamaForCausalLM": "llama", "MistralForCausalLM": "mistral",
                 "Qwen2ForCausalLM": "qwen2", "Qwen3ForCausalLM": "qwen3",
                 "GemmaForCausalLM": "gemma", "Gemma2ForCausalLM": "gemma2",
                 "Gemma3ForCausalLM": "gemma3_text"}
# the architecture's tie_word_embeddings when the config leaves it out (its config class default)
TIED_DEFAULT = {"gemma": True, "gemma2": True, "gemma3_text": True}
MOE_TYPES = ("mixtral", "qwen2_moe", "qwen3_moe", "deepseek_v2", "deepseek_v3", "dbrx", "olmoe",
             "jamba", "granitemoe", "phimoe", "gpt_oss", "llama4", "minimax", "arctic")
MOE_KEYS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_intermediate_size")
# the gated MLP's activation: SiLU (SwiGLU) or a GELU variant (GeGLU)
ACTIVATIONS = ("silu", "swish", "gelu", "gelu_new", "gelu_fast", "gelu_pytorch_tanh",
               "gelu_tanh")
REQUIRED = (("hidden", "hidden_size"), ("layers", "num_hidden_layers"),
            ("heads", "num_attention_heads"), ("ffn", "intermediate_size"),
            ("vocab", "vocab_size"))
OPTIONAL = (("kv_heads", "num_key_value_heads"), ("head_dim", "head_dim"))


def is_hf_config(data: dict[str, Any]) -> bool:
    """Whether a JSON object is a Hugging Face config (it has ``model_type`` or
    ``architectures``, keys no workload spec has)."""
    return "model_type" in data or "architectures" in data


def model_type(config: dict[str, Any]) -> str:
    """The config's ``model_type``, or the one its ``architectures`` name; a clear error for
    anything that is not a supported dense model."""
    kind = config.get("model_type")
    if kind is None:
        archs = config.get("architectures")
        known = [ARCHITECTURES[a] for a in archs if a in ARCHITECTURES] if isinstance(
            archs, list) else []
        if not known:
            raise ModelError(f"model: unsupported Hugging Face 'architectures' {archs!r:.80}; "
                             f"supported: {', '.join(sorted(ARCHITECTURES))}")
        kind = known[0]
    if not isinstance(kind, str):
        raise ModelError(f"model: 'model_type' must be a string, got {kind!r:.80}")
    if kind in MOE_TYPES or "moe" in kind:
        raise ModelError(f"model: 'model_type' {kind!r} is a mixture-of-experts type this "
                         "estimator does not read; mixture-of-experts types it reads: "
                         "deepseek_v3, kimi_k2, qwen3_moe, mixtral, gpt_oss, llama4")
    if kind == "gemma3":
        raise ModelError("model: 'model_type' 'gemma3' is a vision-language config; the "
                         "language model is its 'text_config' object: save that as its own "
                         "config.json (model_type gemma3_text)")
    if kind not in SUPPORTED:
        raise ModelError(f"model: unsupported Hugging Face 'model_type' {kind!r:.80}; "
                         f"supported: {', '.join(SUPPORTED)}")
    return kind


def _integer(config: dict[str, Any], key: str) -> int:
    value = config[key]
    if isinstance(value, bool) or not isinstance(value, int):
        raise ModelError(f"model: config.json key '{key}' must be an integer, got {value!r:.80}")
    return value


def _flag(config: dict[str, Any], key: str, default: bool) -> bool:
    value = config.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ModelError(f"model: config.json key '{key}' must be true or false, "
                         f"got {value!r:.80}")
    return value


def _number(config: dict[str, Any], key: str) -> float:
    value = config.get(key) or 0.0
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ModelError(f"model: config.json key '{key}' must be a number, got {value!r:.80}")
    return float(value)


def _activation(config: dict[str, Any]) -> str:
    """The gated MLP's activation (Gemma names it hidden_activation; default SiLU)."""
    for key in ("hidden_activation", "hidden_act"):
        value = config.get(key)
        if value is None:
            continue
        if value not in ACTIVATIONS:
            raise ModelError(f"model: unsupported activation in config.json key '{key}': "
                             f"{value!r:.80}; supported: {', '.join(ACTIVATIONS)}")
        return value
    return "silu"


def _notes(config: dict[str, Any], kind: str, activation: str) -> list[str]:
    """What the config says that the estimator counts differently (for the model's source)."""
    notes = []
    if activation.startswith("gelu"):
        notes.append("gated GELU counted as SwiGLU (the same three matrices)")
    if kind == "qwen2" or (config.get("attention_bias") and not config.get("mlp_bias")):
        notes.append("QKV biases not counted")
    window = config.get("sliding_window")
    if window and config.get("use_sliding_window") is not False:
        notes.append(f"sliding-window ({window}) layers counted as full attention")
    return notes


def spec_from_hf_config(config: dict[str, Any], name: str) -> tuple[dict[str, Any],
                                                                     dict[str, str]]:
    """(workload spec without seq_len or budget, {spec key: config.json key it came from}).

    Raises ModelError naming the config's key for a missing or wrong value, or the
    ``model_type`` of an unsupported model."""
    kind = model_type(config)
    for key in MOE_KEYS:
        if config.get(key) not in (None, 0, 1):
            raise ModelError(f"model: config.json key '{key}' = {config[key]!r:.40} describes "
                             "a mixture of experts; the estimator models dense transformers only")
    missing = [hf for _, hf in REQUIRED if config.get(hf) is None]
    if missing:
        raise ModelError(f"model: config.json lacks '{missing[0]}' (model_type {kind})")
    keys = dict(REQUIRED)
    spec: dict[str, Any] = {ours: _integer(config, hf) for ours, hf in REQUIRED}
    for ours, hf in OPTIONAL:
        if config.get(hf) is not None:
            spec[ours] = _integer(config, hf)
            keys[ours] = hf
    activation = _activation(config)
    arch = ", ".join(config["architectures"]) if isinstance(config.get("architectures"),
                                                            list) else ""
    notes = _notes(config, kind, activation)
    spec.update({
        "name": name, "mlp": "swiglu", "causal": True,
        "bias": _flag(config, "attention_bias", False) or _flag(config, "mlp_bias", False),
        "dropout": _number(config, "attention_dropout") > 0.0,
        "tied_embeddings": _flag(config, "tie_word_embeddings", TIED_DEFAULT.get(kind, False)),
        "source": f"Hugging Face config.json, model_type {kind}"
                  + (f" ({arch})" if arch else "") + "".join(f"; {n}" for n in notes),
    })
    keys["tied_embeddings"] = "tie_word_embeddings"
    return spec, keys


def name_hf_key(message: str, keys: dict[str, str]) -> str:
    """A validation message about a spec key, with the config.json key it came from."""
    match = re.match(r"model: '([a-z_]+)'", message)
    if match and match.group(1) in keys:
        hf = keys[match.group(1)]
        return message.replace(f"'{match.group(1)}'", f"'{match.group(1)}' (config.json "
                               f"'{hf}')", 1)
    return message
