"""Serving questions the model and system cannot answer, refused in words before anything is
priced (docs/serving.md, "Inputs"): MTP on a model without an MTP head (no separate draft model
is modelled), and a host KV pool larger than the system's host memory per GPU or on a system
without a host link."""

from __future__ import annotations

from model.errors import ModelError
from model.specs.hardware import System
from model.specs.serving import ServingWorkload
from model.specs.transformer import Transformer


def check_inputs(model: Transformer, system: System, wl: ServingWorkload) -> None:
    """Raise :class:`ModelError` for a workload ``model`` on ``system`` cannot serve as asked."""
    if wl.mtp_depth and not model.mtp_layers:
        raise ModelError(f"mtp_depth {wl.mtp_depth}: {model.name} has no MTP head (mtp_layers "
                         "0), and speculative decoding with a separate draft model is not "
                         "modelled; use mtp_depth 0")
    if wl.kv_offload_gb > 0:
        if system.host_bandwidth_gb_per_s <= 0:
            raise ModelError(f"kv_offload_gb {wl.kv_offload_gb:g}: {system.name} has no "
                             "GPU-host link in its spec (host_bandwidth_gb_per_s 0)")
        if wl.kv_offload_gb > system.host_memory_gb:
            raise ModelError(f"kv_offload_gb {wl.kv_offload_gb:g} is more than {system.name}'s "
                             f"host memory per GPU ({system.host_memory_gb:g} GB)")
