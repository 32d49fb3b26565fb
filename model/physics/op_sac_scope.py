"""Which models TorchTitan's per-op selective activation checkpointing (``recompute: op-sac``,
:mod:`model.physics.op_sac`) is the policy of: Llama-style blocks — dense SwiGLU MLP, no MoE,
no MLA. Apart from :mod:`model.physics.op_sac` so that the pricing context can refuse a model
without importing what reads the context."""

from __future__ import annotations

from model.errors import ModelError
from model.specs.transformer import Transformer

MODE = "op-sac"


def applies(model: Transformer) -> bool:
    """Whether op-SAC is TorchTitan's policy for the model's blocks (dense SwiGLU, no MLA)."""
    return not (model.moe or model.mla or model.mlp != "swiglu")


def check_model(model: Transformer) -> None:
    """Refuse op-SAC for a block it is not TorchTitan's policy for."""
    if not applies(model):
        raise ModelError("recompute 'op-sac' is TorchTitan's per-op policy for Llama-style "
                         "blocks (SwiGLU MLP, no MoE, no MLA); choose selective or full for "
                         f"{model.name}")
