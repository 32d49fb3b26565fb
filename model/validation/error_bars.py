"""The error bar of a prediction: what leave-one-source-out cross-validation measured on the
population the prediction belongs to — or "not validated" when no published run of it was ever
scored.

``scripts/calibrate --write`` stores, for every published run the calibration uses, the
iteration time predicted with efficiencies fitted *without* that run's source
(``model/data/reference/cross_validation.json``): the dense runs under ``runs``, the
mixture-of-experts runs under ``moe.runs``, each with its ``stack`` and ``system``. The relative
error of those predictions is the honest spread of a prediction for a run the model has not
seen. Runs flagged ``uncertain`` (layout or execution not published) are left out.

A population is a key (workload, stack, system): workload ``dense`` or ``moe`` (a run's own
``workload`` field, else its section: any other top-level section with ``runs`` and a
``workload`` plugs in as data — another stack's sources, or splits by precision), the stack
preset that ran it, and the system preset (the GPU and its network). A prediction's bar:

1. **not validated** when no firm run of its workload was scored on its system (e.g. MI300X,
   H200), or none of its stack or of the releases whose calibration it inherits
   (:func:`model.specs.stack.lineage`; e.g. megatron-lm-2021, whose runs are all uncertain);
2. else the runs of the first population with at least :data:`MIN_RUNS` of them, from the
   narrowest: (workload, stack, system), (workload, system) over every stack, (workload, stack)
   over every system, then the workload over every stack and system — the stack being the
   nearest release of its lineage with runs of that workload. The bar says which it is.

Stacks come in families (``Stack.family``: the Megatron family, or the PyTorch-native one): a
PyTorch stack's errors say nothing of a Megatron release's, and the other way round, so every
population above is taken within the stack's family (every family only where its own has no
run of the workload: the PyTorch family has no MoE runs).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from model.errors import ModelError
from model.specs import memo
from model.specs.schema import DATA_DIR
from model.specs.stack import lineage, list_stacks, load_stack

CROSS_VALIDATION = DATA_DIR / "reference" / "cross_validation.json"
ALL = "all stacks"
MIN_RUNS = 5  # fewer firm runs in a population than this: the next wider population applies
WORKLOADS = ("dense", "moe")


@dataclass(frozen=True)
class Run:
    """One firm cross-validated run: its population key and |predicted/measured − 1| in %."""

    workload: str  # dense or moe
    stack: str
    system: str
    error_pct: float
    family: str = "megatron"  # the stack's family (runs written before families: Megatron's)


@dataclass(frozen=True)
class ErrorBar:
    """Relative error of a predicted iteration time, from cross-validation (percent), or why
    there is none (``validated`` False: ``reason`` says what was never scored)."""

    mean_pct: float  # mean |predicted/measured − 1| of the held-out predictions (nan: none)
    max_pct: float  # the largest of them
    runs: int  # how many firm runs the figures come from
    scope: str  # the stack they come from, or ALL
    kind: str = ""  # "MoE " for the mixture-of-experts runs, else empty
    system: str = ""  # the system they come from ('' : every system)
    reason: str = ""  # not validated: why
    asked: str = ""  # the stack the prediction was made with, when it inherits the scope's

    @property
    def validated(self) -> bool:
        return not self.reason

    @property
    def text(self) -> str:
        """E.g. "±4.1 % (max 10 %) from leave-one-source-out cross-validation on 10 runs of
        every stack on gb200-nvl72", or "not validated: …"."""
        if not self.validated:
            return f"not validated: {self.reason}"
        where = " of every stack" if self.scope == ALL else f" of {self.scope}"
        if self.asked and self.scope not in (ALL, self.asked):
            where += f" (whose calibration {self.asked} inherits)"
        where += f" on {self.system}" if self.system else " on every system"
        return (f"±{self.mean_pct:.1f} % (max {self.max_pct:.0f} %) from leave-one-source-out "
                f"cross-validation on {self.runs} {self.kind}runs{where}")

    def time_range(self, seconds: float) -> tuple[float, float]:
        """The range of a predicted duration (iteration time, days): ± the mean error
        (nan, nan when not validated)."""
        return seconds * (1 - self.mean_pct / 100), seconds * (1 + self.mean_pct / 100)

    def rate_range(self, per_s: float) -> tuple[float, float]:
        """The range of a predicted rate (samples/s, tokens/s): the inverse of the time's."""
        low, high = self.time_range(1.0)
        return per_s / high, per_s / low

    def to_dict(self) -> dict[str, Any]:
        if not self.validated:
            return {"validated": False, "mean_pct": None, "max_pct": None, "runs": 0,
                    "scope": None, "system": None, "moe": bool(self.kind),
                    "reason": self.reason, "text": self.text}
        return {"validated": True, "mean_pct": self.mean_pct, "max_pct": self.max_pct,
                "runs": self.runs, "scope": self.scope, "system": self.system or None,
                "moe": bool(self.kind), "text": self.text}


@memo.lru("scored runs", 2)
def scored_runs(path: Path = CROSS_VALIDATION) -> tuple[Run, ...]:
    """Every firm cross-validated run of every section of the cross-validation file
    (``path``: the shipped one by default)."""
    data = json.loads(path.read_text())
    sections = [("dense", data["runs"])]
    for name, section in data.items():
        if isinstance(section, dict) and isinstance(section.get("runs"), list):
            sections.append((section.get("workload", "moe" if name == "moe" else name),
                             section["runs"]))
    return tuple(Run(run.get("workload", workload), run["stack"], run["system"],
                     100 * abs(run["cross_validated_s"] / run["measured_s"] - 1),
                     run.get("family", "megatron"))
                 for workload, runs in sections for run in runs if not run["uncertain"])


def _bar(runs: list[Run], stack: str, system: str, kind: str, asked: str) -> ErrorBar:
    errors = [r.error_pct for r in runs]
    return ErrorBar(sum(errors) / len(errors), max(errors), len(errors), stack, kind, system,
                    asked=asked)


def error_bar(stack: str | None = None, moe: bool = False,
              system: str | None = None, scored: tuple[Run, ...] | None = None) -> ErrorBar:
    """The error bar of a prediction made with ``stack`` (a preset name) for a dense or a
    mixture-of-experts (``moe``) model on ``system`` (a preset name; None: any system, as a
    stack's listing asks) — see the module docstring. ``scored``: the runs it is drawn from
    (default :func:`scored_runs` of the shipped cross-validation file)."""
    workload = "moe" if moe else "dense"
    kind = "MoE " if moe else ""
    runs = [r for r in (scored_runs() if scored is None else scored) if r.workload == workload]
    family = _family(stack)
    kin = [r for r in runs if r.family == family]
    # a system other families have runs on: say whose runs are missing
    scored_elsewhere = system is not None and any(r.system == system for r in runs)
    whose = f" of a {family}-family stack" if kin and scored_elsewhere else ""
    runs = kin or runs
    if system is not None and not any(r.system == system for r in runs):
        return ErrorBar(float("nan"), float("nan"), 0, "", kind, system or "", (
            f"no published {kind or 'dense '}run{whose} on {system} was ever scored"))
    chain = lineage(stack) if stack else ()
    own = next((name for name in chain if any(r.stack == name for r in runs)), None)
    if stack is not None and own is None:
        return ErrorBar(float("nan"), float("nan"), 0, "", kind, system or "", (
            f"no firm published {kind or 'dense '}run of {stack} was ever scored"))
    for scope, where in ((own, system), (ALL, system), (own, None), (ALL, None)):
        if scope is None:
            continue  # no stack named: every stack's populations
        members = [r for r in runs if (scope == ALL or r.stack == scope)
                   and (where is None or r.system == where)]
        if len(members) >= MIN_RUNS or (scope, where) == (ALL, None):
            return _bar(members, scope, where or "", kind, stack or "")
    raise AssertionError("unreachable: the widest population is always returned")


def _family(stack: str | None) -> str:
    """The family of a stack preset (Megatron for no stack, an unknown name or a file)."""
    if stack is None or stack not in list_stacks():
        return "megatron"
    try:
        return load_stack(stack).family
    except ModelError:
        return "megatron"
