"""A diskcache.Cache that never stalls a request on a locked database while setting up.

diskcache runs each connection's SQLite pragmas (one connection per thread) in a loop that retries
"database is locked" for up to 60 s. With several gunicorn threads writing, a thread opening its
connection to a freshly re-created cache could wait that long (found by
tests/test_cache_faults.py). Here the per-connection set-up gives up after ``PRAGMA_WAIT_S``: the
connection keeps SQLite's default for that pragma (a per-connection speed setting), and its reads
and writes still wait at most the cache's busy timeout.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from typing import Any

import diskcache

PRAGMA_WAIT_S = 1.0
log = logging.getLogger(__name__)


class BoundedCache(diskcache.Cache):
    """``diskcache.Cache`` whose per-connection pragma set-up is bounded in time."""

    def reset(self, key: str, value: Any = diskcache.core.ENOVAL, update: bool = True) -> Any:
        if update or not key.startswith("sqlite_"):
            return super().reset(key, value, update)
        pragma, deadline = key[len("sqlite_"):], time.monotonic() + PRAGMA_WAIT_S
        while True:
            try:
                rows = self._sql(f"PRAGMA {pragma}").fetchall()
                if not rows or rows[0][0] != value:
                    self._sql(f"PRAGMA {pragma} = {value}").fetchall()
                break
            except sqlite3.OperationalError as exc:
                if str(exc) != "database is locked":
                    raise
                if time.monotonic() > deadline:
                    log.info("cache: left pragma %s at its default (database busy)", pragma)
                    break
                time.sleep(0.001)
        setattr(self, key, value)
        return value
