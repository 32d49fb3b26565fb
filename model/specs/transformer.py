"""The transformer being trained: a GPT-style LLM or a long-sequence ViT (``vocab = 0``).

A workload spec is a JSON object (presets in ``model/data/workloads/*.json``), or the
``config.json`` a Hugging Face model is published with (:mod:`model.hf_config`). Only the
dimensions are required; every default is listed in docs/model.md, "Inputs". Symbols used across
the model (the glossary of docs/model.md): l = seq_len, e = hidden, h = heads, k = kv_heads,
q = head_dim (default e // h), f = ffn, depth = layers, V = vocab.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ModelError
from .hf_config import is_hf_config, name_hf_key, spec_from_hf_config
from .schema import DATA_DIR, Field, preset_names, preset_path, read_json, validate

WORKLOADS_DIR = DATA_DIR / "workloads"

FIELDS = (
    Field("name", str, "model name (default: the file name)"),
    Field("source", str, "where the dimensions come from", default=""),
    Field("layers", int, "transformer blocks (depth)", 1, 10_000, required=True),
    Field("hidden", int, "embedding / hidden size e", 8, 1_000_000, required=True),
    Field("heads", int, "attention heads h", 1, 100_000, required=True),
    Field("kv_heads", int, "key/value heads (GQA/MQA; default = heads)", 1, 100_000),
    Field("head_dim", int, "dimension q of one attention head (default hidden // heads)", 1,
          100_000),
    Field("ffn", int, "MLP hidden size f (default 4*hidden)", 1, 10_000_000),
    Field("mlp", str, "MLP type", default="gelu", choices=("gelu", "swiglu")),
    Field("seq_len", int, "tokens (or patches) per sample l", 1, 100_000_000, required=True),
    Field(
        "vocab", int, "vocabulary size; 0 = no embedding/LM head (ViT)", 0, 100_000_000, default=0
    ),
    Field("bias", bool, "linear layers have biases", default=True),
    Field("dropout", bool, "dropout after attention/MLP", default=True),
    Field("causal", bool, "causal (decoder) attention; false for a ViT", default=True),
    Field("tied_embeddings", bool, "LM head shares the embedding matrix", default=False),
    Field("tokens", float, "training budget in tokens (none: days per 1T tokens only)", 1, 1e18),
    Field("samples", float, "training budget in samples (sequences)", 1, 1e18),
    Field("global_batch", int, "the published global batch, samples (sequences) per optimizer "
          "step (none: not published)", 1, 100_000_000),
    Field("global_batch_source", str, "where the published global batch comes from",
          default=""),
)


@dataclass(frozen=True)
class Transformer:
    """A validated transformer spec (see the module docstring for the symbols)."""

    name: str
    source: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    mlp: str
    seq_len: int
    vocab: int
    bias: bool
    dropout: bool
    causal: bool
    tied_embeddings: bool
    tokens: float | None
    samples: float | None
    global_batch: int | None = None
    global_batch_source: str = ""

    @property
    def training_samples(self) -> float | None:
        """Samples (sequences) in the training budget: ``samples`` or ``tokens / seq_len``;
        None without a budget."""
        if self.samples is not None:
            return self.samples
        if self.tokens is not None:
            return self.tokens / self.seq_len
        return None

    @property
    def params_per_block(self) -> int:
        """Parameters of one block: qkv e·(h+2k)·q, proj h·q·e, MLP (2|3)·e·f, biases, norms
        4e (docs/model.md, "Parameters")."""
        e, f, q = self.hidden, self.ffn, self.head_dim
        qkv = e * (self.heads + 2 * self.kv_heads) * q
        proj = self.heads * q * e
        mlp = (3 if self.mlp == "swiglu" else 2) * e * f
        biases = (f * (2 if self.mlp == "swiglu" else 1) + 2 * e) if self.bias else 0
        return qkv + proj + mlp + biases + 4 * e

    @property
    def params_embedding(self) -> int:
        """Embedding (V·e) plus an untied LM head (V·e) plus the final norm (2e); 0 for a ViT."""
        if self.vocab == 0:
            return 0
        return self.vocab * self.hidden * (1 if self.tied_embeddings else 2) + 2 * self.hidden

    @property
    def params(self) -> int:
        return self.layers * self.params_per_block + self.params_embedding

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in FIELDS}

    def with_overrides(self, **changes: Any) -> Transformer:
        """A copy with some fields changed, re-validated.

        Sizes that were defaults follow the change: ``ffn`` stays 4·hidden, ``kv_heads`` stays
        ``heads`` and ``head_dim`` stays hidden // heads unless given; a budget given as tokens
        replaces one given as samples.
        """
        data = self.to_dict()
        if "hidden" in changes and "ffn" not in changes and self.ffn == 4 * self.hidden:
            data["ffn"] = None
        if "heads" in changes and "kv_heads" not in changes and self.kv_heads == self.heads:
            data["kv_heads"] = None
        if (("hidden" in changes or "heads" in changes) and "head_dim" not in changes
                and self.head_dim == self.hidden // self.heads):
            data["head_dim"] = None
        if changes.get("tokens") is not None:
            data["samples"] = None
        if changes.get("samples") is not None:
            data["tokens"] = None
        return transformer_from_dict({**data, **changes})


def transformer_from_dict(data: Any, default_name: str = "model") -> Transformer:
    """Validate a workload spec into a :class:`Transformer`.

    Defaults: name ``default_name``, kv_heads = heads, head_dim = hidden // heads (then heads
    must divide hidden), ffn = 4·hidden; no budget is allowed (throughput only). A Hugging Face
    config.json is refused here with a pointer to :func:`load_model`, which reads it.
    """
    if isinstance(data, dict) and is_hf_config(data):
        raise ModelError("model: this is a Hugging Face config.json (it has 'model_type' or "
                         "'architectures'); load it with load_model(path, seq_len=...) or "
                         "model.hf_config.spec_from_hf_config")
    c = validate("model", data, FIELDS)
    c["name"] = c["name"] or default_name
    c["kv_heads"] = c["kv_heads"] or c["heads"]
    c["ffn"] = c["ffn"] or 4 * c["hidden"]
    if c["head_dim"] is None:
        if c["hidden"] % c["heads"]:
            raise ModelError(f"model: 'heads' = {c['heads']} must divide 'hidden' = "
                             f"{c['hidden']} (or give 'head_dim')")
        c["head_dim"] = c["hidden"] // c["heads"]
    if c["kv_heads"] > c["heads"] or c["heads"] % c["kv_heads"]:
        raise ModelError(
            f"model: 'kv_heads' = {c['kv_heads']} must divide 'heads' = {c['heads']} (GQA groups)"
        )
    if c["tokens"] is not None and c["samples"] is not None:
        raise ModelError("model: give only one of 'tokens' and 'samples'")
    if c["tied_embeddings"] and c["vocab"] == 0:
        raise ModelError("model: 'tied_embeddings' needs 'vocab' > 0")
    return Transformer(**c)


def list_models() -> list[str]:
    """Names of the workload presets in ``model/data/workloads/``."""
    return preset_names(WORKLOADS_DIR)


def default_name(path: Path) -> str:
    """A model's name from its file: the stem, or the folder of a ``config.json``."""
    if path.stem == "config" and path.resolve().parent.name:
        return path.resolve().parent.name
    return path.stem


def load_model(name_or_path: str | Path, *, seq_len: int | None = None,
               tokens: float | None = None, samples: float | None = None) -> Transformer:
    """Load a preset by name (``gpt3-1t``), a workload spec file, or a Hugging Face
    ``config.json`` (which does not say the training sequence length: give ``seq_len``).

    ``seq_len``, ``tokens`` and ``samples`` replace the file's values (a budget given as tokens
    replaces one given as samples). Without a budget the results give throughput and days per
    1T tokens, not days to train.
    """
    path = preset_path(name_or_path, WORKLOADS_DIR, "model")
    data = read_json(path, "model")
    given = {k: v for k, v in (("seq_len", seq_len), ("tokens", tokens), ("samples", samples))
             if v is not None}
    if isinstance(data, dict) and is_hf_config(data):
        return hf_model(data, default_name(path), **given)
    if isinstance(data, dict) and given:
        data = {**data, **given}
        if "tokens" in given and "samples" not in given:
            data.pop("samples", None)
        if "samples" in given and "tokens" not in given:
            data.pop("tokens", None)
    return transformer_from_dict(data, default_name(path))


def hf_model(config: dict[str, Any], name: str, **given: Any) -> Transformer:
    """A :class:`Transformer` from a Hugging Face config (``given``: seq_len, tokens, samples).

    Errors name the config's own key where the value came from one."""
    if given.get("seq_len") is None:
        raise ModelError("model: a Hugging Face config.json does not say the training sequence "
                         "length (max_position_embeddings is the longest it supports); give it: "
                         "--seq-len N (command line) or load_model(path, seq_len=N)")
    spec, keys = spec_from_hf_config(config, name)
    try:
        return transformer_from_dict({**spec, **given}, name)
    except ModelError as exc:
        raise ModelError(name_hf_key(str(exc), keys)) from None
