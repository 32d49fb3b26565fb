"""Serving questions the model and system cannot answer, refused in words before anything is
priced (docs/serving.md, "Inputs"): MTP on a model without an MTP head and no draft model, a
draft model that is not a preset or has another vocabulary, and a host KV pool larger than the
system's host memory per GPU or on a system without a host link."""

from __future__ import annotations

from model.errors import ModelError
from model.specs.hardware import System
from model.specs.models import load_model
from model.specs.serving import ServingWorkload
from model.specs.transformer import Transformer, list_models


def check_draft(model: Transformer, name: str) -> Transformer:
    """The draft model preset ``name`` for ``model``, or a ModelError: a preset name, and the
    same vocabulary (a draft proposes tokens of the target's tokenizer)."""
    if name not in list_models():
        raise ModelError(f"draft_model {name!r} is not a model preset (see tperf models)")
    draft = load_model(name)
    if draft.vocab != model.vocab:
        raise ModelError(f"draft_model {name}: its vocabulary ({draft.vocab:,} tokens) is not "
                         f"{model.name}'s ({model.vocab:,}); a draft must share the tokenizer")
    return draft


def check_inputs(model: Transformer, system: System, wl: ServingWorkload) -> None:
    """Raise :class:`ModelError` for a workload ``model`` on ``system`` cannot serve as asked."""
    if wl.mtp_depth and not model.mtp_layers and wl.draft_model is None:
        raise ModelError(f"mtp_depth {wl.mtp_depth}: {model.name} has no MTP head (mtp_layers "
                         "0); give a separate draft model (draft_model) or use mtp_depth 0")
    if wl.draft_model is not None:
        check_draft(model, wl.draft_model)
    check_host_pool(system, wl.kv_offload_gb)


def check_host_pool(system: System, kv_offload_gb: float, name: str = "kv_offload_gb") -> None:
    """A ModelError, naming the input ``name``, for a host KV pool of ``kv_offload_gb`` GB per
    GPU that ``system`` cannot give: no GPU-host link in its spec, or more than its host memory
    per GPU."""
    if kv_offload_gb <= 0:
        return
    if system.host_bandwidth_gb_per_s <= 0:
        raise ModelError(f"{name} {kv_offload_gb:g}: {system.name} has no GPU-host link in its "
                         "spec (host_bandwidth_gb_per_s 0)")
    if kv_offload_gb > system.host_memory_gb:
        raise ModelError(f"{name} {kv_offload_gb:g} is more than {system.name}'s host memory "
                         f"per GPU ({system.host_memory_gb:g} GB)")
