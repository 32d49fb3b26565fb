"""Every per-process cache of the estimator, in one place.

A cache is declared here — :func:`lru` for a pure function of frozen specs, :class:`Table` for
a bounded table of results keyed by text, :func:`register` for a cache with its own policy (the
search cache, :data:`model.engine.frontier.CACHE`) — and listed in :data:`REGISTRY` with its
kind: ``results`` (searches, shape spaces, space sizes: what a benchmark of searches from
scratch empties, :func:`clear`) or ``tables`` (small tables any search reuses, which depend on
no result: divisors and placements, strategy tables, system copies, text columns).

A spec is frozen, so a function of specs can be remembered; but a user's spec may hold an
unhashable value (a list where a number belongs), which the validation refuses with its own
message: :func:`lru`'s memo then computes without remembering, so that message is the one the
user sees.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, Protocol, TypeVar

T = TypeVar("T")
RESULTS, TABLES = "results", "tables"


class Memo(Protocol):
    def clear(self) -> None: ...
    def __len__(self) -> int: ...


REGISTRY: dict[str, tuple[str, Memo]] = {}  # name → (kind, cache)


def register(name: str, kind: str, memo: Memo) -> Memo:
    """List ``memo`` under ``name`` (one name, one cache) and return it."""
    if kind not in (RESULTS, TABLES):
        raise ValueError(f"memo kind must be {RESULTS!r} or {TABLES!r}, got {kind!r}")
    if name in REGISTRY and REGISTRY[name][1] is not memo:
        raise ValueError(f"a cache named {name!r} is registered already")
    REGISTRY[name] = (kind, memo)
    return memo


class _Lru:
    """A function's ``functools.lru_cache``, registered, with the unhashable fallback."""

    def __init__(self, fn: Callable[..., T], maxsize: int) -> None:
        self.cached = functools.lru_cache(maxsize=maxsize)(fn)
        self.__wrapped__ = fn
        functools.update_wrapper(self, fn)

    def __call__(self, *args: Any) -> Any:
        try:
            return self.cached(*args)
        except TypeError:  # an unhashable argument: computed, not remembered
            return self.__wrapped__(*args)

    def clear(self) -> None:
        self.cached.cache_clear()

    def __len__(self) -> int:
        return self.cached.cache_info().currsize


def lru(name: str, maxsize: int, kind: str = TABLES) -> Callable[[Callable[..., T]],
                                                                   Callable[..., T]]:
    """A decorator: remember the function's last ``maxsize`` results (positional, hashable
    arguments; an unhashable one is computed, not remembered), registered as ``name``."""
    def wrap(fn: Callable[..., T]) -> Callable[..., T]:
        memo = _Lru(fn, maxsize)
        register(name, kind, memo)
        return memo  # type: ignore[return-value]
    return wrap


class Table:
    """A bounded, thread-safe table, least recently used out first, registered as ``name``: at
    most ``limit`` entries and, with ``weigh`` (an entry's bytes), at most ``max_bytes``."""

    def __init__(self, name: str, limit: int, kind: str = RESULTS,
                 weigh: Callable[[Any], int] | None = None, max_bytes: int = 0) -> None:
        self.limit, self.weigh, self.max_bytes = limit, weigh, max_bytes
        self._rows: OrderedDict[Hashable, Any] = OrderedDict()
        self._bytes: dict[Hashable, int] = {}
        self._total_bytes = 0
        self._lock = threading.Lock()
        register(name, kind, self)

    def get(self, key: Hashable) -> Any | None:
        with self._lock:
            found = self._rows.get(key)
            if found is not None:
                self._rows.move_to_end(key)
            return found

    def put(self, key: Hashable, value: Any) -> None:
        with self._lock:
            self._rows[key] = value
            self._rows.move_to_end(key)
            if self.weigh is not None:
                self._total_bytes += self.weigh(value) - self._bytes.get(key, 0)
                self._bytes[key] = self.weigh(value)
            while len(self._rows) > self.limit or self._total_bytes > self.max_bytes > 0:
                old, _ = self._rows.popitem(last=False)
                self._total_bytes -= self._bytes.pop(old, 0)

    def clear(self) -> None:
        with self._lock:
            self._rows.clear()
            self._bytes.clear()
            self._total_bytes = 0

    def __len__(self) -> int:
        return len(self._rows)


def clear(kind: str | None = None) -> None:
    """Empty every registered cache of ``kind`` (None: all)."""
    for memo_kind, memo in list(REGISTRY.values()):
        if kind is None or memo_kind == kind:
            memo.clear()


def sizes() -> dict[str, int]:
    """Entries held by each registered cache, by name."""
    return {name: len(memo) for name, (_, memo) in sorted(REGISTRY.items())}
