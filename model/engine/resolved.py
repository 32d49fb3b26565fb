"""The resolved question: what the engine runs, made once from a
:class:`~model.engine.request.Request` by :meth:`Request.resolve
<model.engine.request.Request.resolve>` (as vLLM turns ``EngineArgs`` into ``VllmConfig``).

A request says what the user asked: a stack *name*, an execution with lists to search, a mode.
:class:`Resolved` says what that means, decided once: the system with the stack's calibrated
values applied (:func:`with_stack`), the execution over the stack's defaults and its variants
(the choices a search tries), the mode, the pins, the budget and the pruning. The engine's
functions (:mod:`model.engine.search`, :mod:`model.engine.counts`, :mod:`model.engine.variant`,
:mod:`model.engine.design`) take it, or the part they need; none resolves a name again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

from model.errors import ModelError
from model.specs.execution import Execution, resolve_execution
from model.specs.execution_variants import DEFAULT_SEARCH, execution_variants
from model.specs.hardware import System
from model.specs.modes import DEFAULT as DEFAULT_MODE
from model.specs.modes import Mode
from model.specs.stack import NO_STACK, Stack, load_stack
from model.specs.transformer import Transformer
from model.specs.workload import Pruning, Training, Workload


def with_stack(system: System, execution: object, stack: str | Stack | None, mode: Mode
               ) -> tuple[System, object]:
    """The system with the stack's calibrated values for its generation, and the execution over
    the stack's defaults and the default search (:data:`DEFAULT_SEARCH`: every interleaving,
    the fewest recomputed layers that fit); explicit options win, an :class:`Execution` record
    is kept as it is. No stack ("none") applies none of it; the paper mode, which models one
    execution with the paper's constants, takes no stack. Called once per request, by
    :meth:`~model.engine.request.Request.resolve`."""
    if mode != DEFAULT_MODE:
        return system, execution
    found = load_stack(stack)
    if found.name == NO_STACK.name:
        return system, execution
    if execution is None or isinstance(execution, dict):
        execution = {**DEFAULT_SEARCH, **(execution or {})}
    return found.apply(system), found.execution_for(execution)


def training_of(workload: object) -> Training:
    """``workload`` if it is training, else a ModelError naming the workload it is."""
    if not isinstance(workload, Training):
        raise ModelError(f"this estimate is for training; the request's workload is "
                         f"{getattr(workload, 'kind', type(workload).__name__)}")
    return workload


@dataclass(frozen=True)
class Resolved:
    """A request resolved: every field as the engine uses it (see the module docstring). The
    training workload's mode and search part (strategy, pins, rows, budget, pruning) are laid
    out flat here, as the engine reads them; a study's own (:meth:`replace`) change them here,
    not in ``workload``, whose GPU counts and global batch the engine reads."""

    model: Transformer
    system: System  # the request's system (NVLink domain, costs) with the stack applied
    workload: Workload
    strategy: str | tuple[str, ...]  # canonical name, "all", or several names
    mode: Mode
    execution: Execution | dict[str, Any] | None  # over the stack's defaults; lists searched
    pins: Mapping[str, int | None]
    top_k: int
    budget: int  # candidates
    pruning: Pruning

    @cached_property
    def variants(self) -> tuple[Execution, ...]:
        """Every execution choice a search tries (one when nothing is a list)."""
        return tuple(execution_variants(self.execution))

    @cached_property
    def one_execution(self) -> Execution:
        """The one execution an evaluation or a design map runs (lists not expanded)."""
        return resolve_execution(self.execution)

    def training(self) -> Training:
        """The workload, which the search engine needs to be training."""
        return training_of(self.workload)

    @property
    def global_batch(self) -> int:
        return self.training().global_batch

    def replace(self, **changes: Any) -> Resolved:
        """A copy with other fields (a study's own pins, strategy or budget): the stack is not
        applied again."""
        return replace(self, **changes)
