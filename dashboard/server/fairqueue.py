"""Requests waiting for a worker thread, served least-recently-busy client first (issue 26,
finding 5: two clients repeating the largest accepted design request pushed every other user
to p50 5.1 s, max 11.3 s, because gthread serves complete requests first come, first served).

Each client (address) is charged the thread-seconds its requests took, decaying with a
half-life of :data:`HALF_LIFE_S`; when a thread frees, the waiting request of the client with
the least charge goes next (less :data:`AGING` × the time it has waited, so none starves;
ties: first come). A user clicking now and then has next to no
charge and overtakes every queued request of a client that keeps the workers busy, so it waits
at most for the requests already running. This is start-time fair queueing by recent usage
(Goyal, Vin & Cheng, "Start-time Fair Queueing", SIGCOMM 1996, with usage in place of virtual
time); nginx in front caps how many requests one client has queued at all (``limit_conn``).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from typing import Any

HALF_LIFE_S = 10.0
# seconds of charge a waiting request is forgiven per second it waits: a request of the
# busiest client waits at most about (its charge - the others') / AGING
AGING = 0.5
MAX_CLIENTS = 10_000  # charges kept (the oldest forgotten first): memory stays bounded


class FairQueue:
    """Waiting items, each with its client's key; :meth:`pop` gives the least-charged
    client's oldest item."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self.waiting: list[tuple[int, float, str, Any]] = []  # (order, arrived, client, item)
        self.charges: dict[str, tuple[float, float]] = {}  # client → (seconds, as of when)
        self._seq = itertools.count()

    def __len__(self) -> int:
        return len(self.waiting)

    def push(self, item: Any, client: str) -> None:
        self.waiting.append((next(self._seq), self.clock(), client, item))

    def charge(self, client: str, seconds: float) -> None:
        """Add ``seconds`` of thread time to ``client``'s charge."""
        total = self.usage(client) + seconds
        self.charges.pop(client, None)  # re-inserted last: the dict stays oldest-first
        self.charges[client] = (total, self.clock())
        if len(self.charges) > MAX_CLIENTS:
            self.charges.pop(next(iter(self.charges)))

    def usage(self, client: str, now: float | None = None) -> float:
        """``client``'s charge at ``now`` (default: the clock's now; seconds, decayed)."""
        seconds, when = self.charges.get(client, (0.0, 0.0))
        now = self.clock() if now is None else now
        return seconds * 0.5 ** ((now - when) / HALF_LIFE_S)

    def pop(self) -> Any:
        """The next item (IndexError when none waits): the least charge, less
        :data:`AGING` × its wait, so that no request waits for ever behind lighter clients;
        then first come. Every charge is read at one instant (read one by one, a clock that
        moved between them turned ties into last come, first served)."""
        now = self.clock()
        charge = {c: self.usage(c, now) for c in {w[2] for w in self.waiting}}
        best = min(range(len(self.waiting)), key=lambda i: (
            charge[self.waiting[i][2]] - AGING * (now - self.waiting[i][1]), self.waiting[i][0]))
        return self.waiting.pop(best)[3]
