"""The error bar of a prediction: what leave-one-source-out cross-validation measured.

``bench/calibrate.py --write`` stores, for every published run the calibration uses, the
iteration time predicted with efficiencies fitted *without* that run's source
(``model/data/reference/cross_validation.json``). The relative error of those predictions is the
honest spread of a prediction for a run the model has not seen; a prediction is shown with the
mean |error| of the firm runs (published layout and execution; runs flagged ``uncertain`` are
left out) of its software stack, or of every stack of its family (``Stack.family``: the
Megatron family, or the PyTorch-native one) when the stack has fewer than :data:`MIN_RUNS` of
them — a PyTorch stack's errors say nothing of a Megatron release's, and the other way round.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Any

from ..specs.schema import DATA_DIR

CROSS_VALIDATION = DATA_DIR / "reference" / "cross_validation.json"
ALL = "all stacks"
MIN_RUNS = 5  # fewer firm runs of a stack than this: the error over every stack applies


@dataclass(frozen=True)
class ErrorBar:
    """Relative error of a predicted iteration time, from cross-validation (percent)."""

    mean_pct: float  # mean |predicted/measured − 1| of the held-out predictions
    max_pct: float  # the largest of them
    runs: int  # how many firm runs the figures come from
    scope: str  # the stack they come from, or ALL
    kind: str = ""  # "MoE " for the mixture-of-experts runs, else empty

    @property
    def text(self) -> str:
        """E.g. "±4.1 % (max 10 %) from leave-one-source-out cross-validation on 37 runs of
        every stack"."""
        where = " of every stack" if self.scope == ALL else f" of {self.scope}"
        return (f"±{self.mean_pct:.1f} % (max {self.max_pct:.0f} %) from leave-one-source-out "
                f"cross-validation on {self.runs} {self.kind}runs{where}")

    def time_range(self, seconds: float) -> tuple[float, float]:
        """The range of a predicted duration (iteration time, days): ± the mean error."""
        return seconds * (1 - self.mean_pct / 100), seconds * (1 + self.mean_pct / 100)

    def rate_range(self, per_s: float) -> tuple[float, float]:
        """The range of a predicted rate (samples/s, tokens/s): the inverse of the time's."""
        low, high = self.time_range(1.0)
        return per_s / high, per_s / low

    def to_dict(self) -> dict[str, Any]:
        return {"mean_pct": self.mean_pct, "max_pct": self.max_pct, "runs": self.runs,
                "scope": self.scope, "moe": bool(self.kind), "text": self.text}


@functools.cache
def _firm_errors(moe: bool) -> tuple[tuple[str, str, float], ...]:
    """(stack, family, |relative error| in percent) of every firm cross-validated run (dense,
    or the mixture-of-experts runs); runs written before families existed are Megatron's."""
    data = json.loads(CROSS_VALIDATION.read_text())
    runs = data["moe"]["runs"] if moe else data["runs"]
    return tuple((run["stack"], run.get("family", "megatron"),
                  100 * abs(run["cross_validated_s"] / run["measured_s"] - 1))
                 for run in runs if not run["uncertain"])


def _family(stack: str | None) -> str:
    """The family of a stack preset (Megatron for no stack, an unknown name or a file)."""
    from ..errors import ModelError
    from ..specs.stack import list_stacks, load_stack
    if stack is None or stack not in list_stacks():
        return "megatron"
    try:
        return load_stack(stack).family
    except ModelError:
        return "megatron"


def error_bar(stack: str | None = None, moe: bool = False) -> ErrorBar:
    """The error bar of a prediction made with ``stack`` (a preset name; None or one without
    enough firm runs: every stack's runs of its family, or of every family where its own has
    none — the PyTorch family has no MoE runs) for a dense or a mixture-of-experts (``moe``)
    model."""
    runs = _firm_errors(moe)
    kind = "MoE " if moe else ""
    own = [err for name, _, err in runs if name == stack]
    if len(own) >= MIN_RUNS:
        return ErrorBar(sum(own) / len(own), max(own), len(own), str(stack), kind)
    family = _family(stack)
    every = [err for _, fam, err in runs if fam == family] or [err for *_, err in runs]
    return ErrorBar(sum(every) / len(every), max(every), len(every), ALL, kind)
