"""The error bar of a prediction: a split-conformal interval (:mod:`model.specs.conformal`)
at a stated coverage, from the leave-one-source-out residuals of the population the prediction
belongs to — or "not validated" when no published run of it was ever scored.

``scripts/calibrate --write`` stores, for every published run the calibration uses, the
iteration time predicted with efficiencies fitted *without* that run's source
(``model/data/reference/cross_validation.json``): the dense runs under ``runs``, the
mixture-of-experts runs under ``moe.runs``, each with its ``stack``, ``family``, ``system`` and
GPU ``generation``. Runs flagged ``uncertain`` (layout or execution not published) are left out.

A population is a key (stack lineage, workload, GPU generation, metric): the stack's family
(``Stack.family``: the Megatron lineage — Megatron-LM, NeMo, Megatron-Bridge — or the
PyTorch-native one), ``dense`` or ``moe`` (a run's own ``workload`` field, else its section: any
other top-level section with ``runs`` and a ``workload`` plugs in as data), the generation of
the system's GPU (ampere, hopper, blackwell, blackwell-ultra), and the metric — training
throughput (every scored run is a training run). A prediction's bar:

1. **not validated** (the first reason that holds, in this order) when its family has runs of
   the workload but none on its GPU generation (e.g. MI300X; TorchTitan on Blackwell), or
   when there is no firm run of its stack or of the releases whose calibration it inherits
   (:func:`model.specs.stack.lineage`; e.g. megatron-lm-2021), or when no scored run of the
   workload (of its family's stacks, where the family has runs of it) used its parallel
   strategy — each run records the one it was predicted with, ``1d`` or ``context``: no
   published run used the idealised 2D SUMMA (``Traits.implemented_by`` empty; the Design
   page's default), and only dense runs (Megatron's and TorchTitan's) used context
   parallelism; such a prediction never borrows the 1D runs' interval;
2. else the interval of the narrowest population with the runs its coverage needs
   (:func:`model.specs.conformal.runs_needed`: 4 for 80 %, 19 for 95 %): (family,
   workload, generation), (family, workload, every generation), (every family, workload,
   generation), (every family, workload, every generation); a wider one than the first says
   "borrowed from …"; where even the widest has too few, the bounds are null and the text says
   so. A family with no run of the workload at all (the PyTorch family has no MoE run) borrows
   every family's.

The strategies that pass the check share their population's interval (the scored ``context``
runs are among the Megatron and PyTorch families' dense ones). The paper mode takes no stack
and so has no error bar at all (the callers return none): the mode needs no check here.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from model.errors import ModelError
from model.physics.strategies import TRAITS, canonical_strategy
from model.specs import conformal, memo
from model.specs.conformal import COVERAGE
from model.specs.hardware import list_systems, load_system
from model.specs.schema import DATA_DIR
from model.specs.stack import lineage, list_stacks, load_stack

CROSS_VALIDATION = DATA_DIR / "reference" / "cross_validation.json"
ALL = "every family"
EVERY_GENERATION = "every GPU generation"
MIN_RUNS = conformal.runs_needed(COVERAGE)  # the runs an interval at the default coverage needs
WORKLOADS = ("dense", "moe")
METRIC = "training"  # the metric every scored run measures (training throughput)


@dataclass(frozen=True)
class Run:
    """One firm cross-validated run: its population key, |predicted/measured − 1| in % and its
    conformity score |ln(predicted/measured)| of the iteration time."""

    workload: str  # dense or moe
    stack: str
    system: str
    error_pct: float
    family: str = "megatron"  # the stack's family (runs written before families: Megatron's)
    generation: str = ""  # the GPU generation of the system
    score: float = math.nan  # |ln(cross-validated / measured)|
    source: str = ""  # the source held out to predict it
    run_id: str = ""
    strategy: str = "1d"  # the parallel strategy it was predicted with (older files: 1D)


def population_label(family: str, moe: bool, generation: str | None) -> str:
    """E.g. 'megatron-family dense training on hopper GPUs'."""
    fam = "every family's" if family == ALL else f"{family}-family"
    gen = EVERY_GENERATION if generation is None else f"{generation} GPUs"
    return f"{fam} {'MoE' if moe else 'dense'} {METRIC} on {gen}"


@dataclass(frozen=True)
class ErrorBar:
    """A prediction's interval: signed bounds on throughput in percent at ``coverage``, from
    ``runs`` leave-one-source-out residuals of ``population`` (bounds None when too few), or why
    there is none (``validated`` False: ``reason`` says what was never scored). ``mean_pct`` and
    ``max_pct``: the mean and max |error| of those runs, for reference only."""

    mean_pct: float
    max_pct: float
    runs: int
    scope: str  # the family the runs come from, or ALL
    kind: str = ""  # "MoE " for the mixture-of-experts runs, else empty
    system: str = ""  # the system asked for ('' : any)
    reason: str = ""  # not validated: why
    asked: str = ""  # the stack the prediction was made with
    coverage: float = COVERAGE
    low_pct: float | None = None  # signed bound on throughput (%), None: cannot be stated
    high_pct: float | None = None
    population: str = ""  # the label of the prediction's own population
    borrowed: str = ""  # the wider population the interval is borrowed from ('' : its own)
    own_runs: int = 0  # the runs of its own population (when borrowed: too few)
    method: str = "leave-one-source-out"  # how the residuals were held out
    sources: int = 0  # the sources the runs come from (1: coverage across sources untested)

    @property
    def validated(self) -> bool:
        return not self.reason

    @property
    def stated(self) -> bool:
        """Whether the interval has bounds (validated, and enough runs for the coverage)."""
        return self.validated and self.low_pct is not None and self.high_pct is not None

    @property
    def text(self) -> str:
        """E.g. "80 % interval −6.9 % to +7.4 % on throughput (split-conformal over 14
        leave-one-source-out runs of megatron-family dense training on blackwell GPUs)"."""
        if not self.validated:
            return f"not validated: {self.reason}"
        if self.borrowed:
            of = (f"borrowed from the {self.runs} leave-one-source-out runs of {self.borrowed}: "
                  f"{self.own_runs} runs of {self.population} are too few ("
                  f"{conformal.too_few(self.own_runs, self.coverage).split(': ', 1)[1]}); "
                  "never narrower than their largest residual")
        else:
            of = f"split-conformal over {self.runs} {self.method} runs of {self.population}"
            if self.sources == 1:  # model.validation.coverage: nothing to test it against
                of += "; all from one source, so its coverage across sources is untested"
        if not self.stated:
            return (f"{100 * self.coverage:.0f} % interval not stated: "
                    f"{conformal.too_few(self.runs, self.coverage)} ({of})")
        return (f"{100 * self.coverage:.0f} % interval {self.low_pct:+.1f} % to "
                f"{self.high_pct:+.1f} % on throughput ({of})")

    def _factors(self) -> tuple[float, float]:
        if not self.stated:
            return math.nan, math.nan
        return 1 + self.low_pct / 100, 1 + self.high_pct / 100  # type: ignore[operator]

    def time_range(self, seconds: float) -> tuple[float, float]:
        """The range of a predicted duration (iteration time, days): t·e^−r … t·e^r (nan, nan
        when not stated)."""
        low, high = self._factors()
        return seconds * low, seconds * high

    def rate_range(self, per_s: float) -> tuple[float, float]:
        """The range of a predicted rate (samples/s, tokens/s): x·e^−r … x·e^r."""
        low, high = self._factors()
        return per_s * low, per_s * high

    def to_dict(self) -> dict[str, Any]:
        """The contract's ``error_bar`` object (plus the older keys for old readers)."""
        stated = self.stated
        finite = self.validated and math.isfinite(self.mean_pct)
        return {"validated": self.validated, "coverage": self.coverage,
                "n": self.runs if self.validated else 0,
                "low_pct": self.low_pct if stated else None,
                "high_pct": self.high_pct if stated else None,
                "population": self.borrowed or self.population or None,
                "own_population": self.population or None, "own_n": self.own_runs,
                "sources": self.sources,
                "borrowed": bool(self.borrowed),
                "text": self.text,
                "mean_pct": self.mean_pct if finite else None,
                "max_pct": self.max_pct if finite else None,
                "runs": self.runs if self.validated else 0,
                "scope": self.scope if self.validated else None,
                "system": self.system or None, "moe": bool(self.kind),
                **({} if self.validated else {"reason": self.reason})}


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
                     run.get("family", _family(run["stack"])),
                     run.get("generation") or _generation(run["system"]) or "",
                     conformal.score(run["cross_validated_s"], run["measured_s"]),
                     run.get("source", ""), run.get("id", ""), run.get("strategy", "1d"))
                 for workload, runs in sections for run in runs if not run["uncertain"])


def interval(members: list[Run], coverage: float,
             floor: float = 0.0) -> tuple[float | None, float | None]:
    """The signed throughput bounds (%) of the runs' split-conformal interval, never narrower
    than radius ``floor``; None, None when the runs are too few."""
    r = conformal.radius([m.score for m in members], coverage)
    return (None, None) if r is None else conformal.bounds_pct(max(r, floor))


def _unvalidated(moe: bool, system: str | None, reason: str, coverage: float) -> ErrorBar:
    return ErrorBar(math.nan, math.nan, 0, "", "MoE " if moe else "", system or "", reason,
                    coverage=coverage)


def unscored_strategy(strategy: str | None, moe: bool, runs: tuple[Run, ...] | None = None,
                      family: str = ALL) -> str:
    """Why a prediction made with ``strategy`` (a name or alias: 1d, summa/2d,
    context/2d-seqp) is not validated: no scored run of its workload (``moe``) of ``family``'s
    stacks (:data:`ALL`: any stack's) used it; '' when one did or no strategy is given (a
    stack's listing). ``runs``: the scored runs (default :func:`scored_runs`)."""
    if strategy is None:
        return ""
    name = canonical_strategy(strategy)
    workload = "moe" if moe else "dense"
    if any(r.strategy == name and r.workload == workload and family in (ALL, r.family)
           for r in (scored_runs() if runs is None else runs)):
        return ""
    traits = TRAITS[name]
    whose = "" if family == ALL else f" of a {family}-family stack"
    why = (f"no published {'MoE' if moe else 'dense'} run{whose} with the {traits.label} "
           f"strategy ({name}) was ever scored")
    return why + ("; it is idealised: no production stack ships it" if not traits.production
                  else "")


def _members(runs: list[Run], family: str, generation: str | None) -> list[Run]:
    return [r for r in runs if (family == ALL or r.family == family)
            and (generation is None or r.generation == generation)]


def population_interval(runs: list[Run], own: tuple[str, str | None], coverage: float
                        ) -> tuple[list[Run], tuple[str, str | None], list[Run],
                                   float | None, float | None]:
    """The runs an interval at ``coverage`` is drawn from for the population ``own`` (family,
    generation; within ``runs`` of one workload): its own runs when enough, else the first
    wider population with enough (same family every generation, every family this generation,
    every family every generation); then that population, the own runs and the signed
    throughput bounds (%) — a borrowed interval never narrower than the largest residual of
    the own runs."""
    own_members = _members(runs, *own)
    members, pop = own_members, own
    if len(own_members) < conformal.runs_needed(coverage):
        for fam, gen in ((own[0], None), (ALL, own[1]), (ALL, None)):
            wider = _members(runs, fam, gen)
            if len(wider) >= conformal.runs_needed(coverage):
                members, pop = wider, (fam, gen)
                break
    floor = max((r.score for r in own_members), default=0.0) if pop != own else 0.0
    low, high = interval(members, coverage, floor)
    return members, pop, own_members, low, high


def error_bar(stack: str | None = None, moe: bool = False, system: str | None = None,
              scored: tuple[Run, ...] | None = None,
              coverage: float = COVERAGE, strategy: str | None = None) -> ErrorBar:
    """The interval of a prediction made with ``stack`` (a preset name) for a dense or a
    mixture-of-experts (``moe``) model on ``system`` (a preset name; None: any system, as a
    stack's listing asks) with the parallel ``strategy`` (a name or alias; None: any, as a
    listing asks) at ``coverage`` (0.5–0.95) — see the module docstring. ``scored``: the runs
    it is drawn from (default :func:`scored_runs` of the shipped file)."""
    coverage = conformal.check_coverage(coverage)
    strategy = None if strategy is None else canonical_strategy(strategy)  # bad name: refused
    workload = "moe" if moe else "dense"
    kind = "MoE " if moe else "dense "
    every = scored_runs() if scored is None else scored
    runs = [r for r in every if r.workload == workload]
    family = _family(stack)
    generation = _generation(system) if system is not None else None
    kin = [r for r in runs if r.family == family]
    gen_text = f"a {generation} GPU ({system})" if generation else f"{system}"
    if system is not None and not any(r.generation == generation for r in (kin or runs)):
        whose = f" of a {family}-family stack" if kin and any(
            r.generation == generation for r in runs) else ""
        return _unvalidated(moe, system, f"no published {kind}run{whose} on {gen_text} "
                            "was ever scored", coverage)
    chain = lineage(stack) if stack else ()
    if stack is not None and not any(r.stack in chain for r in runs):
        return _unvalidated(moe, system, f"no firm published {kind}run of {stack} was ever "
                            "scored", coverage)
    unscored = unscored_strategy(strategy, moe, every, family if kin else ALL)
    if unscored:  # after the system's and the stack's reasons, which it leaves as they were
        return _unvalidated(moe, system, unscored, coverage)
    own = (family if kin else ALL, generation)
    members, pop, own_members, low, high = population_interval(runs, own, coverage)
    errors = [r.error_pct for r in members]
    return ErrorBar(sum(errors) / len(errors), max(errors), len(errors), pop[0],
                    "MoE " if moe else "", system or "", asked=stack or "", coverage=coverage,
                    low_pct=low, high_pct=high,
                    population=population_label(own[0], moe, own[1]),
                    borrowed=population_label(pop[0], moe, pop[1]) if pop != own else "",
                    own_runs=len(own_members), sources=len({r.source for r in members}))


def common_bar(bars: dict[str, ErrorBar] | None) -> ErrorBar | None:
    """The one error bar of every strategy searched; where they differ (a strategy no scored
    run used beside one that some did), "not validated" for the search as a whole, naming
    them — each result carries its own."""
    if not bars:
        return None
    first = next(iter(bars.values()))
    if all(b.to_dict() == first.to_dict() for b in bars.values()):
        return first
    which = "; ".join(f"{s}: {'validated' if b.validated else b.text}" for s, b in bars.items())
    return replace(first, mean_pct=math.nan, max_pct=math.nan, reason=(
        f"the strategies searched have different error bars ({which}); each result carries "
        "its own error_bar"))


def _family(stack: str | None) -> str:
    """The family of a stack preset (Megatron for no stack, an unknown name or a file)."""
    if stack is None or stack not in list_stacks():
        return "megatron"
    try:
        return load_stack(stack).family
    except ModelError:
        return "megatron"


@memo.lru("system generations", 64)
def _generation(system: str) -> str | None:
    """The GPU generation of a system preset (None for a name that is no preset)."""
    if system not in list_systems():
        return None
    try:
        return load_system(system).generation
    except (ModelError, AttributeError):
        return None
