"""The transformer being trained: a GPT-style LLM or a long-sequence ViT (``vocab = 0``),
dense or a mixture of experts, with standard (MHA/GQA), multi-latent (MLA) or sliding-window
attention.

A workload spec is a JSON object (presets in ``model/data/workloads/*.json``), or the
``config.json`` a Hugging Face model is published with (read by :mod:`model.specs.models`). Only the
dimensions are required; every default is listed in docs/model.md, "Inputs". Symbols used across
the model (the glossary of docs/model.md): l = seq_len, e = hidden, h = heads, k = kv_heads,
q = head_dim (default e // h), f = ffn, depth = layers, V = vocab.
Mixture of experts: E = experts (routed), top_k experts per token, f_e = expert_ffn,
f_s = shared_ffn; every MoE/MLA field defaults to the dense model, so a dense spec means what it
always meant. Parameter counts and model FLOPs per token: :mod:`model.specs.params`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from model.errors import ModelError
from model.specs import params
from model.specs.hf_config import is_hf_config
from model.specs.schema import DATA_DIR, Field, preset_names, validate

WORKLOADS_DIR = DATA_DIR / "workloads"

FIELDS = (
    Field("name", str, "model name (default: the file name)"),
    Field("source", str, "where the dimensions come from", default=""),
    Field("layers", int, "transformer blocks (depth)", 1, 10_000, required=True),
    Field("hidden", int, "embedding / hidden size e", 8, 1_000_000, required=True),
    Field("heads", int, "attention heads h; they divide the hidden size", 1, 100_000,
          required=True),
    Field("kv_heads", int, "key/value heads of grouped-query attention; they divide the heads "
          "(1: multi-query; default = heads)", 1, 100_000),
    Field("head_dim", int, "dimension q of one attention head (default hidden // heads)", 1,
          100_000),
    Field("ffn", int, "hidden size f of the dense MLP (default 4·hidden, GPT's; SwiGLU models "
          "use about 8/3·hidden); in a mixture of experts, that of its dense layers", 1,
          10_000_000),
    Field("mlp", str, "MLP activation: gelu (two matrices) or swiglu (three matrices)",
          default="gelu", choices=("gelu", "swiglu")),
    Field("seq_len", int, "tokens per sequence l (or patches per image for a ViT)", 1,
          100_000_000, required=True, unit="tokens"),
    Field(
        "vocab", int, "vocabulary size; 0: no embedding, LM head or loss (a ViT)", 0, 100_000_000,
        default=0, unit="tokens"
    ),
    Field("bias", bool, "linear layers have biases", default=True),
    Field("dropout", bool, "dropout after attention/MLP", default=True),
    Field("causal", bool, "causal (decoder) attention; false for a ViT", default=True),
    Field("tied_embeddings", bool, "LM head shares the embedding matrix", default=False),
    Field("tokens", float, "training budget in tokens (none: days per 1T tokens only)", 1, 1e18),
    Field("samples", float, "training budget in samples (sequences)", 1, 1e18),
    Field("attention_bias", bool, "attention projections have biases (default: 'bias')"),
    Field("mlp_bias", bool, "MLP and expert matmuls have biases (default: 'bias')"),
    Field("experts", int, "routed experts per MoE layer E (0: a dense model)", 0, 100_000,
          default=0),
    Field("top_k", int, "routed experts each token is sent to: k copies of each token cross "
          "the expert-parallel all-to-all and k expert MLPs run per token (default 1 with "
          "experts, 0 without)", 0, 100_000),
    Field("expert_ffn", int, "hidden size f_e of one routed expert (default 'ffn' with "
          "experts, 0 without)", 0, 10_000_000),
    Field("shared_experts", int, "experts every token passes through besides its routed ones "
          "(no all-to-all)", 0, 1_000,
          default=0),
    Field("shared_ffn", int, "hidden size of the shared experts together (default "
          "shared_experts·expert_ffn)", 0, 100_000_000),
    Field("dense_layers", int, "layers with a dense MLP of size 'ffn' in a MoE model (the "
          "others are MoE layers; DeepSeek-V3's first 3)", 0, 10_000, default=0, unit="layers"),
    Field("q_lora_rank", int, "MLA query compression rank (0: queries projected directly)", 0,
          1_000_000, default=0),
    Field("kv_lora_rank", int, "MLA key/value compression rank, what the KV cache keeps per "
          "token (512 in DeepSeek-V3; 0: standard attention)", 0,
          1_000_000, default=0),
    Field("qk_nope_head_dim", int, "MLA query/key head dimension without rotary part", 0,
          100_000, default=0),
    Field("qk_rope_head_dim", int, "MLA query/key rotary head dimension", 0, 100_000,
          default=0),
    Field("v_head_dim", int, "MLA value head dimension", 0, 100_000, default=0),
    Field("mtp_layers", int, "multi-token-prediction layers (DeepSeek-V3 MTP modules)", 0, 100,
          default=0),
    Field("max_context_tokens", int, "the longest sequence (prompt + output) the released model "
          "serves, tokens (0: not stated)", 0, 1_000_000_000, default=0),
    Field("sliding_window", int, "attention window in tokens (0: full attention)", 0,
          100_000_000, default=0),
    Field("window_layers", int, "layers that use the window (default: all)", 0, 10_000),
    Field("window_kind", str, "sliding (each query sees the last W tokens) or chunked (the "
          "sequence is cut in W-token chunks, Llama 4)", default="sliding",
          choices=("sliding", "chunked")),
    Field("attention_sinks", bool, "a learnable sink logit per head in the softmax "
          "(GPT-OSS); kernels without it fall back to unfused attention", default=False),
    Field("norm", str, "layernorm (γ and β) or rmsnorm (γ only; Llama); how an eager stack "
          "runs it: model.physics.elementwise", default="layernorm",
          choices=("layernorm", "rmsnorm")),
    Field("position_embedding", str, "position information: rope (rotary, no parameters), "
          "learned (a seq_len × hidden table added to the token embedding, GPT-2/MPT) or alibi "
          "(a per-head bias on the attention scores, Press et al. 2022)", default="rope",
          choices=("rope", "learned", "alibi")),
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
    attention_bias: bool
    mlp_bias: bool
    experts: int
    top_k: int
    expert_ffn: int
    shared_experts: int
    shared_ffn: int
    dense_layers: int
    q_lora_rank: int
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int
    mtp_layers: int
    sliding_window: int
    window_layers: int
    window_kind: str

    global_batch: int | None = None
    global_batch_source: str = ""
    position_embedding: str = "rope"
    norm: str = "layernorm"
    attention_sinks: bool = False
    max_context_tokens: int = 0

    @property
    def moe(self) -> bool:
        """Whether the MLPs of (some) layers are mixtures of experts."""
        return self.experts > 0

    @property
    def mla(self) -> bool:
        """Whether attention is multi-latent (DeepSeek-V2/V3): low-rank K/V (and Q)."""
        return self.kv_lora_rank > 0

    @property
    def moe_layers(self) -> int:
        """Layers whose MLP is a mixture of experts (0 for a dense model)."""
        return self.layers - self.dense_layers if self.moe else 0

    @property
    def pipeline_layers(self) -> int:
        """Transformer layers the pipeline stages hold: the layers plus the MTP layers (each
        MTP module holds one layer, on the last stage, as Megatron-Core's pipeline layouts
        place it)."""
        return self.layers + self.mtp_layers

    @property
    def moe_share(self) -> float:
        """Share of the pipeline's layers that are MoE layers (an MTP layer takes the type of
        the last layer, as in Megatron-Core). A stage's blocks are priced as this mix."""
        if not self.moe:
            return 0.0
        # dense layers come first (first_k_dense_replace) or interleave with MoE layers ending
        # on a MoE layer (Llama 4): the last layer, and so each MTP layer, is a MoE layer
        return (self.moe_layers + self.mtp_layers) / self.pipeline_layers

    @property
    def qk_head_dim(self) -> int:
        """Query/key dimension per head: nope + rope with MLA, else q."""
        return self.qk_nope_head_dim + self.qk_rope_head_dim if self.mla else self.head_dim

    @property
    def value_head_dim(self) -> int:
        """Value (and attention output) dimension per head."""
        return self.v_head_dim if self.mla else self.head_dim

    @property
    def params_mtp(self) -> int:
        """Parameters of the MTP modules (beyond the shared embedding and head)."""
        return params.mtp_params(self)

    @property
    def active_params(self) -> int:
        """Parameters one token uses: attention, dense MLPs, top_k routed and the shared
        experts of each MoE layer, router, embedding and head (MTP excluded, as published)."""
        return params.active_params(self)

    @property
    def model_flops_per_token(self) -> float:
        """Model FLOPs per token of one training step (forward + backward), the usual
        convention: 6 × the active matmul parameters + attention (:mod:`model.specs.params`)."""
        return params.flops_per_token(self)

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
        """Parameters of one block on average over the layers (a dense model: qkv e·(h+2k)·q,
        proj h·q·e, MLP (2|3)·e·f, biases, norms 4e; :mod:`model.specs.params`; docs/model.md,
        "Parameters")."""
        return params.block_params(self)

    @property
    def params_embedding(self) -> int:
        """Embedding (V·e) plus an untied LM head (V·e) plus the final norm (2e), plus a
        learned position table (l·e); 0 for a ViT."""
        return params.embedding_params(self)

    @property
    def params(self) -> int:
        """Total parameters (MTP modules excluded, as the DeepSeek-V3 report counts 671B)."""
        return params.total_params(self)

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
        for key, follows in (("head_dim", ("hidden", "heads")), ("expert_ffn", ("ffn",)),
                             ("shared_ffn", ("expert_ffn", "shared_experts", "ffn")),
                             ("top_k", ("experts",)), ("window_layers", ("layers",)),
                             ("attention_bias", ("bias",)), ("mlp_bias", ("bias",))):
            if key not in changes and any(k in changes for k in follows) and (
                    data[key] == _defaults(self.to_dict(), key)):
                data[key] = None  # a default follows what it derives from
        if changes.get("tokens") is not None:
            data["samples"] = None
        if changes.get("samples") is not None:
            data["tokens"] = None
        return transformer_from_dict({**data, **changes})


def _defaults(c: dict[str, Any], key: str) -> Any:
    """The value field ``key`` takes when it is not given (from the fields it follows)."""
    if key == "head_dim":
        return c["hidden"] // c["heads"]
    if key == "expert_ffn":
        return c["ffn"] if c["experts"] else 0
    if key == "shared_ffn":
        return c["shared_experts"] * c["expert_ffn"]
    if key == "top_k":
        return 1 if c["experts"] else 0
    if key == "window_layers":
        return c["layers"] if c["sliding_window"] else 0
    return c["bias"]  # attention_bias, mlp_bias


def _check_moe(c: dict[str, Any]) -> None:
    if not c["experts"]:
        for key in ("shared_experts", "dense_layers"):
            if c[key]:
                raise ModelError(f"model: '{key}' needs routed 'experts' > 0")
        return
    if c["top_k"] > c["experts"]:
        raise ModelError(f"model: 'top_k' = {c['top_k']} exceeds 'experts' = {c['experts']}")
    if c["dense_layers"] >= c["layers"]:
        raise ModelError(f"model: 'dense_layers' = {c['dense_layers']} leaves no MoE layer of "
                         f"'layers' = {c['layers']}")


def _check_attention(c: dict[str, Any]) -> None:
    if c["head_dim_given"] is None and c["hidden"] % c["heads"]:
        raise ModelError(f"model: 'heads' = {c['heads']} must divide 'hidden' = {c['hidden']} "
                         "(or give 'head_dim')")
    if c["kv_lora_rank"]:
        missing = [k for k in ("qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim") if not c[k]]
        if missing:
            raise ModelError(f"model: MLA ('kv_lora_rank' > 0) needs '{missing[0]}' > 0")
        if c["kv_heads"] != c["heads"]:
            raise ModelError("model: MLA attention has one key/value head per head; leave "
                             "'kv_heads' at 'heads'")
    elif c["q_lora_rank"]:
        raise ModelError("model: 'q_lora_rank' needs MLA ('kv_lora_rank' > 0)")
    if c["window_layers"] > c["layers"]:
        raise ModelError(f"model: 'window_layers' = {c['window_layers']} exceeds 'layers' = "
                         f"{c['layers']}")


def transformer_from_dict(data: Any, default_name: str = "model") -> Transformer:
    """Validate a workload spec into a :class:`Transformer`.

    Defaults: name ``default_name``, kv_heads = heads, head_dim = hidden // heads (then heads
    must divide hidden), ffn = 4·hidden, and the MoE / MLA / window fields of a dense model;
    no budget is allowed (throughput only). A Hugging Face
    config.json is refused here with a pointer to :func:`model.specs.models.load_model`.
    """
    if isinstance(data, dict) and is_hf_config(data):
        raise ModelError("model: this is a Hugging Face config.json (it has 'model_type' or "
                         "'architectures'); load it with load_model(path, seq_len=...) or "
                         "model.specs.hf_config.spec_from_hf_config")
    c = validate("model", data, FIELDS)
    c["name"] = c["name"] or default_name
    c["kv_heads"] = c["kv_heads"] or c["heads"]
    c["ffn"] = c["ffn"] or 4 * c["hidden"]
    c["head_dim_given"] = c["head_dim"]
    for key in ("head_dim", "expert_ffn", "shared_ffn", "top_k", "window_layers",
                "attention_bias", "mlp_bias"):
        if c[key] is None:
            c[key] = _defaults(c, key)
    _check_attention(c)
    del c["head_dim_given"]
    _check_moe(c)
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
