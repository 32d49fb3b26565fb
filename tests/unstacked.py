"""The estimator's entry points without a software stack: the systems' own efficiencies and the
Execution defaults, for tests of the model's formulas, which the stacks' calibration must not
move (tests/test_stacks.py covers the stacks).

Each function is the :mod:`model` one with ``stack="none"`` passed in where the call names no
stack (a :class:`~model.engine.request.Request` without one gets it by ``replace``): the
default is an argument, never a module setting a fixture patches. A call that names a stack
keeps it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import model
from model.engine.request import Request
from model.specs.stack import NONE


def unstacked(entry: Callable[..., Any]) -> Callable[..., Any]:
    """``entry`` with ``stack="none"`` where its call names no stack."""

    @functools.wraps(entry)
    def call(first: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(first, Request):
            return entry(first if first.stack is not None else first.replace(stack=NONE),
                         *args, **kwargs)
        if kwargs.get("stack") is None:
            kwargs["stack"] = NONE
        return entry(first, *args, **kwargs)

    return call


search = unstacked(model.search)
evaluate = unstacked(model.evaluate)
sweep = unstacked(model.sweep)
design_space = unstacked(model.design_space)
