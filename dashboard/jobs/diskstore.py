"""A diskcache.Cache that never stalls a request on a locked or re-created database.

Three defects of ``diskcache.Cache`` (5.6) under threads whose cache directory can be deleted:

* Transaction owner per object. ``Cache._transact`` records the thread inside a write
  transaction in one attribute of the object (``_txn_id``) and asserts it is still its own before
  COMMIT or ROLLBACK. That holds while every connection of the object uses one database file:
  SQLite then runs their write transactions one at a time. Once the directory is deleted and
  re-created, threads still holding the object open connections to the new file while others
  keep the deleted one, two transactions run at once, the attribute is overwritten, and the
  assertion fails *before* COMMIT: that thread's connection stays inside its transaction and
  holds the file's write lock for as long as the connection lives. Here the owner is kept per
  thread, and a connection still inside a transaction after one ended is closed (its lock goes
  with it).
* 60 s retries. ``Cache.__init__`` and ``reset`` retry "database is locked" for up to 60 s; a
  request re-creating the cache on a file locked as above waited that long (the once-flaky
  ``test_directory_deleted_repeatedly_under_concurrent_requests``: "1 of 8 requests still
  waiting 10.0 s after the deletions ended"). Here they give up after ``RETRY_S`` and the
  request recomputes.
* Per-connection pragmas are set up in the same retry loop (one connection per thread); they
  give up after ``RETRY_S`` too and keep SQLite's default (a per-connection speed setting).
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
import time
from typing import Any

import diskcache

RETRY_S = 1.0
log = logging.getLogger(__name__)


class BoundedCache(diskcache.Cache):
    """``diskcache.Cache`` with per-thread transaction owners and bounded lock retries."""

    @property
    def _txn_id(self) -> int | None:
        return getattr(self._owners(), "tid", None)

    @_txn_id.setter
    def _txn_id(self, tid: int | None) -> None:
        self._owners().tid = tid

    def _owners(self) -> threading.local:
        owners = self.__dict__.get("_txn_owners")
        if owners is None:  # the first call comes from diskcache's __init__
            owners = self.__dict__.setdefault("_txn_owners", threading.local())
        return owners

    @contextlib.contextmanager
    def _transact(self, retry: bool = False, filename: str | None = None):
        try:
            with super()._transact(retry, filename) as pair:
                yield pair
        finally:
            self._drop_leaked_transaction()

    def _drop_leaked_transaction(self) -> None:
        """Close this thread's connection if it is still inside a transaction although the
        thread is in none (its COMMIT or ROLLBACK failed): closing releases its locks."""
        con = getattr(self._local, "con", None)
        if con is None or self._txn_id is not None or not con.in_transaction:
            return
        log.info("cache: closed a connection left inside a failed transaction")
        self._local.con = None
        with contextlib.suppress(sqlite3.Error):
            con.close()

    @property
    def _sql_retry(self):
        sql = self._sql

        def execute(statement: str, *args: Any, **kwargs: Any):
            deadline = time.monotonic() + RETRY_S
            while True:
                try:
                    return sql(statement, *args, **kwargs)
                except sqlite3.OperationalError as exc:
                    if str(exc) != "database is locked" or time.monotonic() > deadline:
                        raise
                    time.sleep(0.001)

        return execute

    def reset(self, key: str, value: Any = diskcache.core.ENOVAL, update: bool = True) -> Any:
        if value is diskcache.core.ENOVAL or not key.startswith("sqlite_"):
            return super().reset(key, value, update)
        if update:
            self._sql_retry("UPDATE Settings SET value = ? WHERE key = ?", (value, key))
        pragma, deadline = key[len("sqlite_"):], time.monotonic() + RETRY_S
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
