"""The serving workload and the serving layout: two frozen, validated records (docs/serving.md).

:class:`ServingWorkload` is the question a serving estimate answers — request lengths, how the
requests arrive, the precisions of weights and KV cache, speculative decoding, the latency
targets. It is self-contained (no model, no system) so that a request object can carry it as its
``workload`` beside a training workload. :class:`ServingLayout` holds the parallel layout of a
serving instance; each field left ``None`` is searched (:mod:`model.serving.serve`).

Symbols (docs/serving.md): I input tokens, O output tokens, B requests in flight on one
instance, C concurrent users, λ requests per second, K MTP / draft depth, α acceptance rate of
each drafted token, h prefix-cache hit share.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from model.errors import ModelError
from model.specs.schema import Field, validate

MODES = ("offline", "concurrency", "request-rate")
WEIGHT_PRECISIONS = ("bf16", "fp16", "fp8", "mxfp8", "nvfp4")
KV_PRECISIONS = ("bf16", "fp16", "fp8", "nvfp4")
# Bytes per stored element: BF16/FP16 2; FP8 (E4M3 with one FP32 scale per tensor, TensorRT-LLM's
# FP8 KV cache) 1; NVFP4 0.5 + one E4M3 scale per 16 values (TensorRT-LLM's NVFP4 KV cache,
# Blackwell); MXFP8 1 + one E8M0 scale per 32 values (OCP Microscaling Formats spec v1.0, 2023).
ELEMENT_BYTES: dict[str, float] = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "mxfp8": 1.0 + 1 / 32,
                                   "nvfp4": 0.5 + 1 / 16}

WORKLOAD_FIELDS = (
    Field("input_tokens", int, "prompt tokens per request I", 1, 10_000_000, required=True),
    Field("output_tokens", int, "generated tokens per request O", 1, 10_000_000,
          required=True),
    Field("mode", str, "offline (all requests queued: the largest batch the KV cache holds), "
          "concurrency (C users each sending its next request when the last one ends) or "
          "request-rate (Poisson arrivals at λ requests/s)", default="offline", choices=MODES),
    Field("concurrency", int, "concurrent users C over all instances (mode concurrency)",
          1, 100_000_000),
    Field("request_rate_per_s", float, "mean Poisson arrival rate λ, requests/s (mode "
          "request-rate)", 1e-9, 1e9),
    Field("weight_precision", str, "precision of the weights and the matmuls",
          default="bf16", choices=WEIGHT_PRECISIONS),
    Field("kv_precision", str, "precision of the KV cache (default: fp8 with fp8/mxfp8/nvfp4 "
          "weights, as NVIDIA's ModelOpt checkpoints ship, else the weights')",
          choices=KV_PRECISIONS),
    Field("mtp_depth", int, "tokens drafted per step by MTP / speculative decoding K (0: none)",
          0, 16, default=0),
    Field("mtp_acceptance", float, "probability α that each drafted token is accepted",
          0, 1, default=0.0),
    Field("draft_model", str, "a separate draft model (a model preset) for speculative "
          "decoding: K passes of its whole forward per step (none: the model's own MTP head)",
          max_len=100),
    Field("prefix_hit", float, "share h of each prompt already in the KV cache (prefix "
          "caching: a prefix shared by the requests, its blocks held once per attention rank); "
          "in [0, 1)", 0, 1, default=0.0),
    Field("kv_offload_gb", float, "host memory per GPU given to the KV cache, GB (offload: "
          "sequences beyond the HBM pool are reloaded over the host link every step)", 0, 1e5,
          default=0.0),
    Field("ttft_max_s", float, "SLA: largest time to first token, s (none: no limit)", 1e-6,
          1e6),
    Field("tpot_max_s", float, "SLA: largest time per output token, s (none: no limit)", 1e-7,
          1e4),
)

WORKLOAD_FIELD: dict[str, Field] = {f.name: f for f in WORKLOAD_FIELDS}
MTP_DEPTH = WORKLOAD_FIELD["mtp_depth"]  # the CLI's --mtp and the Serving page's MTP depth

LAYOUT_FIELDS = (
    Field("tp", int, "tensor-parallel GPUs of one instance (attention heads and MLP features)",
          1, 1024),
    Field("pp", int, "pipeline stages of one instance", 1, 1024),
    Field("ep", int, "expert-parallel GPUs (MoE experts; divides tp, the rest of tp shards each "
          "expert's features)", 1, 1024),
    Field("attention_dp", bool, "attention data-parallel over the tp GPUs (each GPU its own "
          "requests, full attention weights; MoE models)"),
    Field("replicas", int, "aggregated instances (each prefills and decodes)", 1, 1_000_000),
    Field("prefill_instances", int, "disaggregated: prefill-only instances x of xPyD", 1,
          1_000_000),
    Field("decode_instances", int, "disaggregated: decode-only instances y of xPyD", 1,
          1_000_000),
    Field("max_batch", int, "largest batch of one instance (default: the stack's limit)", 1,
          1_000_000),
)


@dataclass(frozen=True)
class ServingWorkload:
    """What is served and how it is asked for (see the module docstring; units in names)."""

    input_tokens: int
    output_tokens: int
    mode: str = "offline"
    concurrency: int | None = None
    request_rate_per_s: float | None = None
    weight_precision: str = "bf16"
    kv_precision: str | None = None
    mtp_depth: int = 0
    mtp_acceptance: float = 0.0
    draft_model: str | None = None
    prefix_hit: float = 0.0
    kv_offload_gb: float = 0.0
    ttft_max_s: float | None = None
    tpot_max_s: float | None = None

    def __post_init__(self) -> None:
        clean = validate("serving workload", asdict(self), WORKLOAD_FIELDS)
        for name, value in clean.items():
            object.__setattr__(self, name, value)
        if self.kv_precision is None:
            quantised = self.weight_precision in ("fp8", "mxfp8", "nvfp4")
            object.__setattr__(self, "kv_precision",
                               "fp8" if quantised else self.weight_precision)
        _check_mode(self)
        if self.mtp_depth and self.mtp_acceptance <= 0:
            raise ModelError("serving workload: 'mtp_acceptance' must be above 0 with "
                             f"mtp_depth {self.mtp_depth} (the share of drafted tokens kept)")
        if self.draft_model is not None and not self.mtp_depth:
            raise ModelError(f"serving workload: 'draft_model' {self.draft_model!r} needs "
                             "mtp_depth K ≥ 1 (the tokens it drafts per step)")
        if self.prefix_hit >= 1.0:
            raise ModelError(f"serving workload: 'prefix_hit' {self.prefix_hit:g} must be below 1 "
                             "(a prompt wholly in the cache still computes its last token)")

    @property
    def cached_prompt_tokens(self) -> int:
        """Prompt tokens found in the prefix cache, ⌊h·I⌋ (whole tokens; the engines' block
        granularity is not modelled), at most I − 1: the last prompt token is always computed
        (its logits give the first output token)."""
        return min(int(self.prefix_hit * self.input_tokens), self.input_tokens - 1)

    @property
    def computed_prompt_tokens(self) -> int:
        """Prompt tokens a prefill computes, I − ⌊h·I⌋ (all of them without prefix caching)."""
        return self.input_tokens - self.cached_prompt_tokens

    @property
    def weight_bytes(self) -> float:
        """Bytes per stored weight (scales included)."""
        return ELEMENT_BYTES[self.weight_precision]

    @property
    def kv_bytes(self) -> float:
        """Bytes per stored KV-cache element (scales included)."""
        return ELEMENT_BYTES[str(self.kv_precision)]

    @property
    def tokens_per_step(self) -> float:
        """Expected tokens a sequence gains per decode step with K drafted tokens each
        accepted with probability α (stopping at the first rejection, the verified step
        adding one token of its own): (1 − α^(K+1)) / (1 − α) (Leviathan et al. 2023,
        "Fast Inference from Transformers via Speculative Decoding", eq. 1); 1 without."""
        k, a = self.mtp_depth, self.mtp_acceptance
        if k == 0:
            return 1.0
        return float(k + 1) if a >= 1.0 else (1.0 - a ** (k + 1)) / (1.0 - a)

    def with_overrides(self, **changes: Any) -> ServingWorkload:
        """A copy with some fields changed, validated again."""
        return replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _check_mode(w: ServingWorkload) -> None:
    """The mode's own input is given, and no other mode's."""
    if w.mode == "concurrency" and w.concurrency is None:
        raise ModelError("serving workload: mode 'concurrency' needs 'concurrency' (users)")
    if w.mode == "request-rate" and w.request_rate_per_s is None:
        raise ModelError("serving workload: mode 'request-rate' needs 'request_rate_per_s'")
    if w.mode != "concurrency" and w.concurrency is not None:
        raise ModelError(f"serving workload: 'concurrency' applies to mode 'concurrency', not "
                         f"'{w.mode}'")
    if w.mode != "request-rate" and w.request_rate_per_s is not None:
        raise ModelError(f"serving workload: 'request_rate_per_s' applies to mode "
                         f"'request-rate', not '{w.mode}'")


@dataclass(frozen=True)
class ServingLayout:
    """The parallel layout of serving; None fields are searched. Aggregated unless both
    ``prefill_instances`` and ``decode_instances`` are set (then ``replicas`` must not be)."""

    tp: int | None = None
    pp: int | None = None
    ep: int | None = None
    attention_dp: bool | None = None
    replicas: int | None = None
    prefill_instances: int | None = None
    decode_instances: int | None = None
    max_batch: int | None = None

    def __post_init__(self) -> None:
        clean = validate("serving layout", asdict(self), LAYOUT_FIELDS)
        for name, value in clean.items():
            object.__setattr__(self, name, value)
        split = (self.prefill_instances is None, self.decode_instances is None)
        if split[0] != split[1]:
            raise ModelError("serving layout: disaggregation needs both 'prefill_instances' "
                             "and 'decode_instances' (xPyD)")
        if not split[0] and self.replicas is not None:
            raise ModelError("serving layout: 'replicas' is for aggregated serving; a "
                             "disaggregated layout has prefill_instances and decode_instances")
        if self.tp is not None and self.ep is not None and self.tp % self.ep:
            raise ModelError(f"serving layout: ep {self.ep} must divide tp {self.tp} (the "
                             "experts are spread over the tp GPUs)")

    @property
    def disaggregated(self) -> bool:
        return self.prefill_instances is not None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def serving_workload(value: ServingWorkload | dict[str, Any]) -> ServingWorkload:
    """A :class:`ServingWorkload` from itself or a dict of its fields (unknown keys refused)."""
    if isinstance(value, ServingWorkload):
        return value
    if not isinstance(value, dict):
        raise ModelError(f"serving workload must be a dict of fields, got "
                         f"{type(value).__name__}")
    clean = validate("serving workload", value, WORKLOAD_FIELDS)
    return ServingWorkload(**clean)


def serving_layout(value: ServingLayout | dict[str, Any] | None) -> ServingLayout:
    """A :class:`ServingLayout` from itself, a dict of its fields or None (all searched)."""
    if value is None:
        return ServingLayout()
    if isinstance(value, ServingLayout):
        return value
    if not isinstance(value, dict):
        raise ModelError(f"serving layout must be a dict of fields, got {type(value).__name__}")
    return ServingLayout(**validate("serving layout", value, LAYOUT_FIELDS))


@dataclass(frozen=True)
class Serving:
    """The serving workload of a :class:`model.engine.request.Request` (its ``kind`` is
    "serving", as :class:`model.specs.workload.Training`'s is "training"): what is served
    (``workload``), on how many GPUs, and the layout's pinned fields (the rest searched)."""

    workload: ServingWorkload
    gpus: int
    layout: ServingLayout = ServingLayout()

    kind = "serving"

    def __post_init__(self) -> None:
        object.__setattr__(self, "workload", serving_workload(self.workload))
        object.__setattr__(self, "layout", serving_layout(self.layout))
        gpus = self.gpus
        if not isinstance(gpus, (int, np.integer)) or isinstance(gpus, bool) or not (
                1 <= gpus <= 1_000_000):
            raise ModelError(f"gpus must be an integer in [1, 1000000], got {gpus!r:.40}")
        object.__setattr__(self, "gpus", int(gpus))
