"""One request: a frozen, validated description of a question to the estimator — the model,
the system (NVLink domain and cost inputs applied), the software stack and the workload. Each
workload carries what its kind asks and nothing else: :class:`~model.specs.workload.Training`
its global batch, GPU counts, mode, execution choices (values, or lists to search) and its
:class:`~model.specs.workload.Search` (strategy, pins, rows kept, candidate budget, pruning);
:class:`~model.specs.serving.Serving` what is served, its GPUs and its layout.

The command line, the Python API and the dashboard build one with :meth:`Request.build` and
pass it to :func:`model.search`, :func:`model.evaluate`, :func:`model.plan` and
:func:`model.sweep`; the keyword forms of those functions are thin adapters that build it.
Errors are :class:`~model.errors.ModelError` in the words of the keyword it came from.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from types import MappingProxyType
from typing import Any

import numpy as np

from model.engine.layouts import stack_layouts
from model.engine.resolved import Resolved, training_of, with_stack
from model.engine.space import PIN_NAMES
from model.errors import ModelError
from model.physics.strategies import canonical_strategy
from model.specs.cost import Costs
from model.specs.execution import Execution
from model.specs.hardware import System
from model.specs.modes import DEFAULT as DEFAULT_MODE
from model.specs.modes import Mode, resolve_mode
from model.specs.stack import Stack
from model.specs.transformer import Transformer
from model.specs.workload import (
    DEFAULT_BUDGET,
    DEFAULT_PRUNING,
    EMPTY,
    Pruning,
    Search,
    Training,
    Workload,
)

SEARCH_FIELDS = tuple(f.name for f in fields(Search))  # a training workload's search part
TRAINING_FIELDS = ("mode", "execution")  # a training workload's other parts a request reads


def _strategies(strategy: object) -> str | tuple[str, ...]:
    """A canonical name, "all", or a tuple of canonical names."""
    if isinstance(strategy, (list, tuple)) and strategy:
        return tuple(canonical_strategy(s) for s in strategy)
    if not isinstance(strategy, str):
        raise ModelError(f"strategy must be a name, got {strategy!r:.80}")
    return strategy if strategy == "all" else canonical_strategy(strategy)


def frozen_pins(pins: object) -> Mapping[str, int | None]:
    """The pins, read-only and checked: dimension names of the space, positive integers or
    None (free)."""
    if pins is None:
        return EMPTY
    if not isinstance(pins, Mapping):
        raise ModelError(f"pins must be a dict of dimension → value, got {type(pins).__name__}")
    for key, value in pins.items():
        if key not in PIN_NAMES:
            raise ModelError(f"unknown pin '{key}'; allowed: {', '.join(PIN_NAMES)}")
        integer = isinstance(value, (int, np.integer)) and not isinstance(value, bool)
        if value is not None and (not integer or value < 1):
            raise ModelError(f"pin '{key}' must be a positive integer, got {value!r:.80}")
    return MappingProxyType(dict(pins))


@dataclass(frozen=True)
class Request:
    """A question to the estimator (see the module docstring); validated when built. A
    training request's search part, mode and execution read as its own (``request.strategy``,
    ``.pins``, ``.top_k``, ``.budget``, ``.pruning``, ``.mode``, ``.execution``); a serving
    request has none of them (each is a ModelError naming its workload)."""

    model: Transformer
    system: System
    workload: Workload  # Training, or another kind's record (serving's)
    stack: str | Stack | None = None  # a stack name or record; None: the newest

    def __post_init__(self) -> None:
        if not isinstance(self.model, Transformer):
            raise ModelError(f"model must be a Transformer (load_model), got "
                             f"{type(self.model).__name__}")
        if not isinstance(self.system, System):
            raise ModelError(f"system must be a System (load_system), got "
                             f"{type(self.system).__name__}")
        if not hasattr(self.workload, "kind"):
            raise ModelError(f"workload must be a workload record such as Training(...), got "
                             f"{type(self.workload).__name__}")
        if isinstance(self.workload, Training):
            object.__setattr__(self, "workload", _searched(self.workload, self.stack))

    @classmethod
    def build(cls, model: Transformer, system: System, *, global_batch: int,
              gpus: int | list[int] | tuple[int, ...] | None = None, max_gpus: int | None = None,
              gpu_step: int | None = None, strategy: str | tuple[str, ...] = "1d",
              mode: object = None, compat: object = None,
              nvs: int | None = None, pins: dict | None = None, top_k: int = 10,
              budget: int = DEFAULT_BUDGET, execution: object = None,
              stack: str | Stack | None = None, costs: Costs | dict | None = None,
              pruning: Pruning = DEFAULT_PRUNING) -> Request:
        """A training request from the keywords the entry points have always taken: ``nvs``
        and ``costs`` are applied to the system here, once. ``compat`` is ``mode``'s old
        name, deprecated: still read, with a DeprecationWarning."""
        if not isinstance(system, System):
            raise ModelError(f"system must be a System (load_system), got "
                             f"{type(system).__name__}")
        if nvs is not None:
            system = system.with_overrides(nvlink_domain_size=nvs)
        counts = () if gpus is None else (gpus,) if not hasattr(gpus, "__iter__") or isinstance(
            gpus, (str, bytes)) else tuple(gpus)
        search = Search(_strategies(strategy), frozen_pins(pins), top_k, budget, pruning)
        workload = Training(global_batch, counts, max_gpus, gpu_step, _mode_of(mode, compat),
                            execution, search)
        return cls(model, system.with_costs(costs), workload, stack)

    def resolve(self) -> Resolved:
        """The question as the engine runs it: the stack applied to the system and the
        execution, once (:class:`~model.engine.resolved.Resolved`)."""
        work = self.training()
        system, execution = with_stack(self.system, self.execution_given(), self.stack,
                                       work.mode)
        s = work.search
        return Resolved(self.model, system, work, s.strategy, work.mode, execution, s.pins,
                        s.top_k, s.budget, s.pruning)

    def replace(self, **changes: Any) -> Request:
        """A copy with other fields (validated again): the request's own (model, system,
        workload, stack), or a training workload's search part, mode and execution
        (``strategy=``, ``pins=``, ``top_k=``, ``budget=``, ``pruning=``, ``mode=``,
        ``execution=``)."""
        own = {k: v for k, v in changes.items() if k not in SEARCH_FIELDS + TRAINING_FIELDS}
        searched = {k: v for k, v in changes.items() if k in SEARCH_FIELDS}
        trained = {k: v for k, v in changes.items() if k in TRAINING_FIELDS}
        if not (searched or trained):
            return replace(self, **own)
        work = training_of(own.pop("workload", self.workload))
        if "strategy" in searched:
            searched["strategy"] = _strategies(searched["strategy"])
        if "pins" in searched:
            searched["pins"] = frozen_pins(searched["pins"])
        search = replace(work.search, **searched)
        return replace(self, **own, workload=replace(work, **trained, search=search))

    def with_workload(self, **changes: Any) -> Request:
        """A copy whose workload has other fields (``gpus=(64,)``, ``max_gpus=…``)."""
        return replace(self, workload=replace(self.workload, **changes))

    def training(self) -> Training:
        """The workload, which the search engine's entry points need to be training."""
        return training_of(self.workload)

    @property
    def global_batch(self) -> int:
        return self.training().global_batch

    @property
    def strategy(self) -> str | tuple[str, ...]:
        """A canonical name; "all" or several names where a study takes several."""
        return self.training().search.strategy

    @property
    def pins(self) -> Mapping[str, int | None]:
        """The pins (read-only); the dimensions the stack does not run pinned to 1."""
        return self.training().search.pins

    @property
    def top_k(self) -> int:
        """Rows a search keeps."""
        return self.training().search.top_k

    @property
    def budget(self) -> int:
        """Candidates a search may build."""
        return self.training().search.budget

    @property
    def pruning(self) -> Pruning:
        return self.training().search.pruning

    @property
    def mode(self) -> Mode:
        return self.training().mode

    @property
    def execution(self) -> Execution | Mapping[str, Any] | None:
        """The execution as given (read-only), over the stack's defaults."""
        return self.training().execution

    def execution_given(self) -> Execution | dict[str, Any] | None:
        """The execution as the search takes it: a record, or a plain dict whose lists are
        searched (None: the stack's defaults)."""
        execution = self.execution
        if execution is None or isinstance(execution, Execution):
            return execution
        return {k: list(v) if isinstance(v, tuple) else v for k, v in execution.items()}


def _searched(work: Training, stack: str | Stack | None) -> Training:
    """A training workload whose search names what the engine knows: canonical strategy names,
    pins of the space's dimensions and, but in the paper mode (it takes no stack), the layouts
    the stack runs — once for every search, sweep, plan and evaluation."""
    given = work.search
    strategy, pins = _strategies(given.strategy), frozen_pins(given.pins)
    if work.mode == DEFAULT_MODE:
        strategy, pins = stack_layouts(stack, strategy, pins)
        pins = frozen_pins(pins)
    if strategy == given.strategy and isinstance(given.pins, MappingProxyType) and \
            pins == given.pins:  # as given (Request.build's): not validated again
        return work
    return replace(work, search=replace(given, strategy=strategy, pins=pins))


def _mode_of(mode: object, compat: object) -> object:
    """The mode asked for, under its name or its deprecated old one (``compat``)."""
    if compat is None:
        return mode
    warnings.warn("compat= is deprecated: use mode=", DeprecationWarning, stacklevel=3)
    if mode is not None and resolve_mode(mode) != resolve_mode(compat):
        raise ModelError(f"mode={mode!r} and compat={compat!r} (its deprecated old name) "
                         "disagree: give mode= alone")
    return compat
