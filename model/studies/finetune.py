"""Supervised fine-tuning: how long, on how much memory, at what cost — full, LoRA or QLoRA.

A fine-tuning run is training with two differences this study adds to the training search:

* **which weights train** (:mod:`model.physics.lora`, the execution's ``trainable``,
  ``lora_rank``, ``lora_targets``): full fine-tuning trains every weight as pre-training does;
  LoRA and QLoRA freeze the base weights, so the search prices no weight gradients for them,
  the adapters as their own kernels, and gradients and optimizer state for the adapters only —
  and then finds the fastest layout that fits, which is usually far smaller than pre-training's;
* **what the tokens are**: packed sequences fill every position with training tokens;
  padded sequences carry ``seq_len`` − (mean example length) padding positions that the GPUs
  compute and nobody learns from, so the useful tokens/s is the computed tokens/s ×
  mean example length / ``seq_len``. A loss mask on the prompt changes no compute (the
  prompt's tokens still run forward and backward) and is not a separate input.

Days = tokens / (useful tokens/s); cost = GPU-hours × the price per GPU-hour of the chosen
configuration's cost column (the system's, or the costs given).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from model.engine.api import search_request
from model.engine.economics import cost_columns
from model.engine.request import Request
from model.errors import ModelError
from model.physics.dims import model_dims
from model.physics.lora import adapter_params, frozen
from model.physics.optable import layer_share
from model.physics.strategies import build_strategy
from model.specs.execution_fields import LITERALS
from model.specs.modes import resolve_mode
from model.specs.params import total_params
from model.specs.schema import Field, check_field
from model.specs.transformer import Transformer

METHODS = ("full", "lora", "qlora")
PACKING = ("packed", "padded")
TRAINABLE = {"full": "all", "lora": "lora", "qlora": "qlora"}
# the training data, declared once: the record, the CLI's help and the page's form read it
TOKENS = Field("tokens", (int, float), "training tokens (the examples' tokens, epochs "
               "included)", 1, 1e16, required=True, unit="tokens")


@dataclass(frozen=True)
class FineTune:
    """What a fine-tuning run trains: ``method`` (full, lora, qlora), ``tokens`` of training
    data (the examples' tokens, epochs included), the adapters (rank, targets), and whether
    sequences are packed or padded (then ``mean_example_tokens``, the mean example length)."""

    method: str
    tokens: float
    lora_rank: int = 16
    lora_targets: str = "all"
    packing: str = "packed"
    mean_example_tokens: float | None = None

    kind = "finetune"

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ModelError(f"method must be one of {', '.join(METHODS)}, got {self.method!r}")
        check_field("fine-tuning", TOKENS, self.tokens)
        if self.lora_targets not in LITERALS["lora_targets"]:
            raise ModelError(f"LoRA targets must be attn, mlp, both (attn,mlp) or qkv, got "
                             f"{self.lora_targets!r:.40}")
        if self.packing not in PACKING:
            raise ModelError(f"packing must be packed or padded, got {self.packing!r:.40}")
        mean = self.mean_example_tokens
        if self.packing == "padded" and (mean is None or isinstance(mean, bool)
                                          or not isinstance(mean, (int, float)) or mean <= 0):
            raise ModelError("padded sequences need the mean example length in tokens "
                             "(--mean-example-tokens)")

    def useful_share(self, seq_len: int) -> float:
        """Trained tokens per computed position: 1 packed; mean example / seq_len padded."""
        if self.packing == "packed":
            return 1.0
        if self.mean_example_tokens > seq_len:
            raise ModelError(f"the mean example length {self.mean_example_tokens:g} exceeds the "
                             f"sequence length {seq_len}: raise --seq-len or pack")
        return float(self.mean_example_tokens) / seq_len

    def execution(self) -> dict:
        """The execution fields that say which weights train."""
        return {"trainable": TRAINABLE[self.method], "lora_rank": self.lora_rank,
                "lora_targets": self.lora_targets}


def trainable_params(model: Transformer, ft: FineTune) -> float:
    """Parameters that train: every one for full fine-tuning, else the adapters'
    (:func:`model.physics.lora.adapter_params` over the 1D op table's matmuls)."""
    if not frozen(TRAINABLE[ft.method]):
        return float(total_params(model))
    mode = resolve_mode(None)
    strategy = build_strategy("1d", model, mode)
    return adapter_params(strategy.block, model_dims(model, mode),
                          lambda spec: layer_share(model, spec), model.layers, model.experts,
                          ft.lora_rank, ft.lora_targets)


@dataclass
class FineTuneResult:
    """The fastest fitting configuration of a fine-tuning run and what it costs."""

    row: pd.Series  # the search's best row (every column of a search)
    finetune: FineTune
    trainable_params: float
    useful_share: float
    days: float
    cost_usd: float | None  # None: the system has no price
    gpus: int

    def summary(self) -> dict:
        """The contract's keys (docs/post_training.md): days, tokens/s per GPU, memory,
        trainable parameters, cost and the layout."""
        r = self.row
        layout = {k: int(r[k]) for k in ("tp1", "tp2", "pp", "dp", "ep", "microbatch")
                  if k in r.index}
        return {"method": self.finetune.method, "gpus": self.gpus, "days": self.days,
                "tokens_per_s_per_gpu": float(r["tokens_per_s"]) * self.useful_share / self.gpus,
                "computed_tokens_per_s_per_gpu": float(r["tokens_per_s"]) / self.gpus,
                "useful_token_share": self.useful_share,
                "memory_gb": float(r["memory_gb"]),
                "memory_breakdown_gb": {k[:-3]: float(r[k]) for k in
                                        ("weights_gb", "gradients_gb", "optimizer_gb",
                                         "activations_gb")},
                "trainable_params": self.trainable_params, "cost_usd": self.cost_usd,
                "iteration_time_s": float(r["iteration_time_s"]), "mfu": float(r["mfu"]),
                "layout": layout, "strategy": str(r["strategy"]),
                "recompute": str(r.get("recompute", "")), "zero": int(r.get("zero", 0))}


def finetune(request: Request, ft: FineTune) -> FineTuneResult:
    """The fastest configuration of ``request`` (a training request: model, system, GPUs,
    global batch, stack, execution over which the search runs) that fine-tunes ``ft``'s
    tokens by its method; a ModelError in words when nothing fits."""
    given = request.execution_given()
    if given is not None and not isinstance(given, dict):
        given = given.to_dict()
    clash = {k for k in ft.execution() if given and k in given}
    if clash:
        raise ModelError(f"give the fine-tuning method once: {', '.join(sorted(clash))} "
                         "come from the method")
    result = search_request(request.replace(execution={**(given or {}), **ft.execution()}))
    if result.top.empty:
        raise ModelError(f"no configuration of {request.model.name} fine-tuned by "
                         f"{ft.method} fits on {result.gpus} GPUs of {request.system.name}: "
                         "more GPUs, a smaller global batch, or LoRA/QLoRA")
    row = result.top.iloc[0]
    useful = ft.useful_share(request.model.seq_len)
    gpus = int(row["gpus"])
    useful_tokens_per_s = float(row["tokens_per_s"]) * useful
    seconds = ft.tokens / useful_tokens_per_s
    # one GPU-hour's price under the system's cost inputs (the row's own ratio is 0/0 for a
    # run too short to register GPU-hours); NaN when the system has no price
    per_gpu_hour = float(cost_columns(request.model, request.system, 1, 1.0 / 24.0)["cost_usd"])
    usd = per_gpu_hour * gpus * seconds / 3600.0
    return FineTuneResult(row, ft, trainable_params(request.model, ft), useful,
                          seconds / 86400.0, usd if math.isfinite(usd) else None, gpus)

