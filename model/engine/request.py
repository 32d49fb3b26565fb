"""One request: a frozen, validated description of a question to the estimator — the model,
the system (NVLink domain and cost inputs applied), the software stack, the workload
(:class:`~model.specs.workload.Training` now; serving's record plugs into the same field), the
strategy, the execution choices (values, or lists to search), the pins, how many rows to keep
and the candidate budget.

The command line, the Python API and the dashboard build one with :meth:`Request.build` and
pass it to :func:`model.search`, :func:`model.evaluate`, :func:`model.plan` and
:func:`model.sweep`; the keyword forms of those functions are thin adapters that build it.
Errors are :class:`~model.errors.ModelError` in the words of the keyword it came from.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

import numpy as np

from model.engine.layouts import stack_layouts
from model.engine.pruning import DEFAULT_PRUNING, Pruning
from model.engine.resolved import Resolved, training_of, with_stack
from model.engine.space import PIN_NAMES
from model.errors import ModelError
from model.physics.strategies import canonical_strategy
from model.specs.cost import Costs
from model.specs.execution import Execution
from model.specs.execution_variants import execution_variants
from model.specs.hardware import System
from model.specs.modes import DEFAULT as DEFAULT_MODE
from model.specs.modes import Mode, resolve_mode
from model.specs.stack import Stack
from model.specs.transformer import Transformer
from model.specs.workload import Training, Workload, positive_int

DEFAULT_BUDGET = 20_000_000  # candidates per search; about 20 s of evaluation
EMPTY: Mapping[str, Any] = MappingProxyType({})


def _frozen_execution(execution: object) -> Execution | Mapping[str, Any] | None:
    """The execution as given (None, a record, or a dict of values or lists), read-only and
    checked: every combination it names must be a valid :class:`Execution`."""
    if execution is None or isinstance(execution, Execution):
        return execution
    if not isinstance(execution, Mapping):
        raise ModelError(f"execution must be a dict of options, got {type(execution).__name__}")
    frozen = {k: tuple(v) if isinstance(v, (list, tuple)) else v for k, v in execution.items()}
    execution_variants(frozen)  # validates every field and combination
    return MappingProxyType(frozen)


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
    """A question to the estimator (see the module docstring); validated when built."""

    model: Transformer
    system: System
    workload: Workload  # Training, or another kind's record (serving's)
    # a strategy name (canonical); "all" or several names where a study takes several
    strategy: str | tuple[str, ...] = "1d"
    mode: Mode = field(default_factory=lambda: resolve_mode(None))
    stack: str | Stack | None = None  # a stack name or record; None: the newest
    execution: Execution | Mapping[str, Any] | None = None  # over the stack's defaults
    # the pins; with the dimensions the stack does not run pinned to 1 (model.engine.layouts)
    pins: Mapping[str, int | None] = field(default_factory=lambda: EMPTY)
    top_k: int = 10
    budget: int = DEFAULT_BUDGET  # candidates
    pruning: Pruning = DEFAULT_PRUNING  # when a search prunes (the same rows either way)

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
        object.__setattr__(self, "strategy", _strategies(self.strategy))
        object.__setattr__(self, "mode", resolve_mode(self.mode))
        object.__setattr__(self, "execution", _frozen_execution(self.execution))
        object.__setattr__(self, "pins", frozen_pins(self.pins))
        if self.mode == DEFAULT_MODE:  # the paper mode takes no stack
            # the layouts the stack runs, once for every search, sweep, plan and evaluation
            strategy, pins = stack_layouts(self.stack, self.strategy, self.pins)
            object.__setattr__(self, "strategy", strategy)
            object.__setattr__(self, "pins", frozen_pins(pins))
        positive_int("top_k", self.top_k)
        positive_int("budget", self.budget)
        if not isinstance(self.pruning, Pruning):
            raise ModelError(f"pruning must be a Pruning, got {type(self.pruning).__name__}")

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
        workload = Training(global_batch, counts, max_gpus, gpu_step)
        return cls(model, system.with_costs(costs), workload, strategy, _mode_of(mode, compat),
                   stack, execution, pins, top_k, budget, pruning)

    def resolve(self) -> Resolved:
        """The question as the engine runs it: the stack applied to the system and the
        execution, once (:class:`~model.engine.resolved.Resolved`)."""
        system, execution = with_stack(self.system, self.execution_given(), self.stack,
                                       self.mode)
        return Resolved(self.model, system, self.workload, self.strategy, self.mode,
                        execution, self.pins, self.top_k, self.budget, self.pruning)

    def replace(self, **changes: Any) -> Request:
        """A copy with other fields (validated again)."""
        return replace(self, **changes)

    def with_workload(self, **changes: Any) -> Request:
        """A copy whose workload has other fields (``gpus=(64,)``, ``max_gpus=…``)."""
        return replace(self, workload=replace(self.workload, **changes))

    def training(self) -> Training:
        """The workload, which the search engine's entry points need to be training."""
        return training_of(self.workload)

    @property
    def global_batch(self) -> int:
        return self.training().global_batch

    def execution_given(self) -> Execution | dict[str, Any] | None:
        """The execution as the search takes it: a record, or a plain dict whose lists are
        searched (None: the stack's defaults)."""
        if self.execution is None or isinstance(self.execution, Execution):
            return self.execution
        return {k: list(v) if isinstance(v, tuple) else v for k, v in self.execution.items()}


def _mode_of(mode: object, compat: object) -> object:
    """The mode asked for, under its name or its deprecated old one (``compat``)."""
    if compat is None:
        return mode
    warnings.warn("compat= is deprecated: use mode=", DeprecationWarning, stacklevel=3)
    if mode is not None and resolve_mode(mode) != resolve_mode(compat):
        raise ModelError(f"mode={mode!r} and compat={compat!r} (its deprecated old name) "
                         "disagree: give mode= alone")
    return compat
