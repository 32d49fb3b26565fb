"""The transformer being trained: a GPT-style LLM or a long-sequence ViT (``vocab = 0``).

A workload spec is a JSON object (presets in ``model/data/workloads/*.json``). Symbols used across
the model (the glossary, following spec/paper-model.md §1): l = seq_len, e = hidden, h = heads,
k = kv_heads, q = e // h (head dim), f = ffn, depth = layers, V = vocab.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import ModelError
from .schema import DATA_DIR, Field, preset_names, preset_path, read_json, validate

WORKLOADS_DIR = DATA_DIR / "workloads"

FIELDS = (
    Field("name", str, "model name", required=True),
    Field("source", str, "where the dimensions come from", default=""),
    Field("layers", int, "transformer blocks (depth)", 1, 10_000, required=True),
    Field("hidden", int, "embedding / hidden size e", 8, 1_000_000, required=True),
    Field("heads", int, "attention heads h", 1, 100_000, required=True),
    Field("kv_heads", int, "key/value heads (GQA/MQA; default = heads)", 1, 100_000),
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
    Field("tokens", float, "training budget in tokens", 1, 1e18),
    Field("samples", float, "training budget in samples (sequences)", 1, 1e18),
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

    @property
    def head_dim(self) -> int:
        """q = e // h."""
        return self.hidden // self.heads

    @property
    def training_samples(self) -> float:
        """Samples (sequences) in the training budget: ``samples`` or ``tokens / seq_len``."""
        if self.samples is not None:
            return self.samples
        return self.tokens / self.seq_len  # type: ignore[operator]

    @property
    def params_per_block(self) -> int:
        """Parameters of one block: qkv e·(h+2k)·q, proj e², MLP (2|3)·e·f, biases, norms 4e."""
        e, f, q = self.hidden, self.ffn, self.head_dim
        qkv = e * (self.heads + 2 * self.kv_heads) * q
        mlp = (3 if self.mlp == "swiglu" else 2) * e * f
        biases = (f * (2 if self.mlp == "swiglu" else 1) + 2 * e) if self.bias else 0
        return qkv + e * e + mlp + biases + 4 * e

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

        Sizes that were defaults follow the change: ``ffn`` stays 4·hidden and ``kv_heads``
        stays ``heads`` unless given; a budget given as tokens replaces one given as samples.
        """
        data = self.to_dict()
        if "hidden" in changes and "ffn" not in changes and self.ffn == 4 * self.hidden:
            data["ffn"] = None
        if "heads" in changes and "kv_heads" not in changes and self.kv_heads == self.heads:
            data["kv_heads"] = None
        if changes.get("tokens") is not None:
            data["samples"] = None
        if changes.get("samples") is not None:
            data["tokens"] = None
        return transformer_from_dict({**data, **changes})


def transformer_from_dict(data: Any) -> Transformer:
    """Validate a workload spec into a :class:`Transformer` (kv_heads = heads, ffn = 4e default)."""
    c = validate("model", data, FIELDS)
    c["kv_heads"] = c["kv_heads"] or c["heads"]
    c["ffn"] = c["ffn"] or 4 * c["hidden"]
    if c["hidden"] % c["heads"]:
        raise ModelError(f"model: 'heads' = {c['heads']} must divide 'hidden' = {c['hidden']}")
    if c["kv_heads"] > c["heads"] or c["heads"] % c["kv_heads"]:
        raise ModelError(
            f"model: 'kv_heads' = {c['kv_heads']} must divide 'heads' = {c['heads']} (GQA groups)"
        )
    if c["tokens"] is None and c["samples"] is None:
        raise ModelError("model: give a training budget, 'tokens' or 'samples'")
    if c["tokens"] is not None and c["samples"] is not None:
        raise ModelError("model: give only one of 'tokens' and 'samples'")
    if c["tied_embeddings"] and c["vocab"] == 0:
        raise ModelError("model: 'tied_embeddings' needs 'vocab' > 0")
    return Transformer(**c)


def list_models() -> list[str]:
    """Names of the workload presets in ``model/data/workloads/``."""
    return preset_names(WORKLOADS_DIR)


def load_model(name_or_path: str | Path) -> Transformer:
    """Load a preset by name (``gpt3-1t``) or a JSON file path."""
    path = preset_path(name_or_path, WORKLOADS_DIR, "model")
    return transformer_from_dict(read_json(path, "model"))
