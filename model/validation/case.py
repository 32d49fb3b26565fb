"""One measured quantity of a published run, and how to predict it (every validation set's
record: the dense sets of :mod:`model.validation`, the MoE set of :mod:`model.validation.moe`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from model.specs.hardware import System
from model.specs.transformer import Transformer


@dataclass
class Case:
    """One measured quantity of one run, and how to predict it."""

    id: str
    set: str
    metric: str  # iteration_time_s | params_grads_optimizer_gib | activations_gib
    measured: float
    model: Transformer | None = None
    system: System | None = None
    gpus: int = 0
    global_batch: int = 0
    strategy: str = "1d"
    config: dict[str, int] = field(default_factory=dict)
    execution: dict[str, Any] = field(default_factory=dict)
    uncertain: bool = False
    peer: float | None = None  # Calculon's prediction, where published
    stack: str = "none"  # the software stack of the run (its calibrated efficiencies)
    source: str = ""  # the paper or release it comes from (what cross-validation leaves out)
    skip: str = ""


# rows of a published run's search looked through for the fastest that fits: a search ranks
# the tight candidates (model.engine.tight) with those that fit, and a published run is
# predicted with what fits by the point estimate, as it was before tight rows were kept
FITTING_DEPTH = 32


def fastest_fitting(top: Any) -> Any:
    """The first row of a search's top frame that fits by the point estimate (None: none)."""
    fitting = top[top["fits"]]
    return None if fitting.empty else fitting.iloc[0]
