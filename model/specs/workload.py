"""What a request asks the estimator to run: the workload field of
:class:`model.engine.request.Request`.

:class:`Training` is the first workload: pre-training at a global batch on some GPU counts, in
a mode, with its execution choices, searched as its :class:`Search` part says (strategy, pins,
rows kept, candidate budget, :class:`Pruning`). Serving's record
(:class:`model.specs.serving.Serving`) plugs into the same field with its own parts; neither
carries the other's. A workload is a frozen record validated when it is built, so every front
end (CLI, API, dashboard) gets the same errors in the same words; the names a search knows
(strategies, pin dimensions, the layouts a stack runs) are checked by the request that holds it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol

import numpy as np

from model.errors import ModelError
from model.specs.execution import Execution
from model.specs.execution_variants import execution_variants
from model.specs.modes import Mode, resolve_mode

MAX_GPUS = 10_000_000  # a GPU count above this is out of range for every front end
MAX_GLOBAL_BATCH = 100_000_000  # sequences
DEFAULT_BUDGET = 20_000_000  # candidates per search; about 20 s of evaluation
EMPTY: Mapping[str, Any] = MappingProxyType({})


def positive_int(name: str, value: object, hi: int | None = None, hi_text: str = "") -> int:
    """``value`` as an int, or a ModelError naming ``name`` and the allowed range."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ModelError(f"'{name}' must be a positive integer, got {value!r:.80}")
    if hi is not None and value > hi:
        raise ModelError(f"'{name}' = {value} is out of range; allowed [1, {hi_text or hi}]")
    return int(value)


class Workload(Protocol):
    """What a request's workload is: a frozen record that says its kind ("training",
    "serving", …); each entry point takes the kinds it estimates."""

    kind: str


@dataclass(frozen=True)
class Pruning:
    """When a search prunes: from ``from_candidates`` fitting candidates up (fewer are priced at
    once, as fast as a bound); None: never, every candidate priced (the tests compare both: the
    same rows). Part of a training workload's :class:`Search`, never a module switch
    (:mod:`model.engine.pruning` prunes)."""

    from_candidates: int | None = 20_000

    def applies(self, fitting: int) -> bool:
        return self.from_candidates is not None and fitting >= self.from_candidates


DEFAULT_PRUNING = Pruning()
NEVER = Pruning(None)  # price every candidate
ALWAYS = Pruning(0)  # prune any search, however small


@dataclass(frozen=True)
class Search:
    """How a training question is searched: the ``strategy`` (a name; "all" or several names
    where a study takes several), the ``pins`` (dimension → value; None free), the ``top_k``
    rows kept, the candidate ``budget`` and the :class:`Pruning`. The request that holds it
    makes the names canonical, checks the pins' dimensions and pins what its stack does not run
    (:mod:`model.engine.layouts`)."""

    strategy: str | tuple[str, ...] = "1d"
    pins: Mapping[str, int | None] = field(default_factory=lambda: EMPTY)
    top_k: int = 10
    budget: int = DEFAULT_BUDGET  # candidates
    pruning: Pruning = DEFAULT_PRUNING  # when a search prunes (the same rows either way)

    def __post_init__(self) -> None:
        positive_int("top_k", self.top_k)
        positive_int("budget", self.budget)
        if not isinstance(self.pruning, Pruning):
            raise ModelError(f"pruning must be a Pruning, got {type(self.pruning).__name__}")


def frozen_execution(execution: object) -> Execution | Mapping[str, Any] | None:
    """The execution as given (None, a record, or a dict of values or lists), read-only and
    checked: every combination it names must be a valid :class:`Execution`."""
    if execution is None or isinstance(execution, Execution):
        return execution
    if not isinstance(execution, Mapping):
        raise ModelError(f"execution must be a dict of options, got {type(execution).__name__}")
    frozen = {k: tuple(v) if isinstance(v, (list, tuple)) else v for k, v in execution.items()}
    execution_variants(frozen)  # validates every field and combination
    return MappingProxyType(frozen)


@dataclass(frozen=True)
class Training:
    """Training at ``global_batch`` sequences per iteration on exactly ``gpus`` GPUs (one count
    or several: a strong-scaling sweep), or on at most ``max_gpus`` in steps of ``gpu_step``
    (the rest idle; None: 1, or the system's node size for a plan). ``gpus`` empty with
    ``max_gpus`` None: a study that chooses its own counts (a plan). The ``mode`` (the paper's
    or the default), the ``execution`` over the stack's defaults (values, or lists to search)
    and the :class:`Search` are training's alone."""

    global_batch: int
    gpus: tuple[int, ...] = ()
    max_gpus: int | None = None
    gpu_step: int | None = None
    mode: Mode = field(default_factory=lambda: resolve_mode(None))
    execution: Execution | Mapping[str, Any] | None = None  # over the stack's defaults
    search: Search = field(default_factory=Search)

    kind = "training"

    def __post_init__(self) -> None:
        positive_int("global_batch", self.global_batch, MAX_GLOBAL_BATCH, "1e8")
        if isinstance(self.gpus, (str, bytes)) or not hasattr(self.gpus, "__iter__"):
            raise ModelError(f"GPU counts must be a list of integers, got {self.gpus!r:.80}")
        counts = tuple(positive_int("gpus", n, MAX_GPUS) for n in self.gpus)
        object.__setattr__(self, "gpus", counts)
        object.__setattr__(self, "global_batch", int(self.global_batch))
        if self.max_gpus is not None:
            if counts:
                raise ModelError("give 'gpus' (use exactly that many) or 'max_gpus' (at most), "
                                 "not both")
            positive_int("max_gpus", self.max_gpus)  # its range: explore.counts.count_range
        if self.gpu_step is not None:
            positive_int("gpu_step", self.gpu_step)
        object.__setattr__(self, "mode", resolve_mode(self.mode))
        object.__setattr__(self, "execution", frozen_execution(self.execution))
        if not isinstance(self.search, Search):
            raise ModelError(f"search must be a Search, got {type(self.search).__name__}")
