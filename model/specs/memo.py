"""Per-process memos of pure functions of frozen specs (models, systems, executions).

A spec is frozen, so a function of specs can be remembered with :func:`functools.lru_cache`;
but a user's spec may hold an unhashable value (a list where a number belongs), which the
validation refuses with its own message. :func:`remembered` calls the memo and, when an
argument cannot be hashed, the function itself, so that message is the one the user sees.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def remembered(cached: Callable[..., T], *args: Any) -> T:
    """``cached(*args)`` from its ``lru_cache``, or computed without remembering when an
    argument cannot be hashed."""
    try:
        return cached(*args)
    except TypeError:  # an unhashable argument: computed, not remembered
        return cached.__wrapped__(*args)  # type: ignore[attr-defined]
