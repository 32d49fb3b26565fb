"""What every on-disk store of the app does when its files are damaged or cannot be written:
the app always starts and serves (issue 26, finding 1).

* Corrupt (SQLite's "file is not a database", "database disk image is malformed", or a
  failed ``PRAGMA quick_check``): the store's directory is moved aside to
  ``<name>.corrupt-<UTC time>`` (kept for a look; only the latest such copy is kept, so a
  store corrupted again and again cannot fill the disk) and a new one is created; logged once
  per event.
* Read-only (the directory or database cannot be written: a read-only mount, wrong owner, a
  full disk): the app runs without it — the results cache computes every request, the job
  store moves to the host's temporary directory — logged once per process.

The stores hold only what can be recomputed (results, job records of the running jobs), so
setting a damaged one aside loses nothing a user asked to keep.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import shutil
import sqlite3
import time
from pathlib import Path

log = logging.getLogger(__name__)
_said: set[str] = set()  # what this process has logged once already

READ_ONLY_ERRNOS = (errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.EDQUOT)


def say_once(key: str, message: str, *args: object) -> None:
    """A warning this process logs the first time only (one line, no traceback)."""
    if key not in _said:
        _said.add(key)
        log.warning(message, *args)


def is_corrupt(exc: BaseException) -> bool:
    """SQLite's verdict on a damaged file (not a locked, busy or read-only one)."""
    return isinstance(exc, sqlite3.DatabaseError) and not isinstance(
        exc, sqlite3.OperationalError)


def is_read_only(exc: BaseException) -> bool:
    """A failure every later try would meet again: no permission, read-only, full."""
    if isinstance(exc, OSError):
        return exc.errno in READ_ONLY_ERRNOS
    text = str(exc).lower()
    return isinstance(exc, sqlite3.OperationalError) and (
        "readonly" in text or "read-only" in text or "is full" in text
        or "unable to open" in text)


def check_integrity(connection: sqlite3.Connection) -> None:
    """sqlite3.DatabaseError unless ``PRAGMA quick_check`` finds the file sound (it reads
    every page: a few random blocks overwritten open fine and fail only on some reads)."""
    rows = connection.execute("PRAGMA quick_check").fetchall()
    if rows != [("ok",)]:
        raise sqlite3.DatabaseError(f"quick_check: {str(rows[:3])[:200]}")


def writable(directory: Path) -> bool:
    """Whether a file can be created in ``directory`` (made if missing) and the database in
    it, if any, opened for writing."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        probe = directory / f".write-probe-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError:
        return False
    database = directory / "cache.db"
    return not database.exists() or os.access(database, os.W_OK)


def move_aside(directory: Path, why: BaseException) -> Path | None:
    """Move a corrupt store out of the way (see the module); the new name, or None when it
    could not be moved (then it is removed; failing that, it stays and the caller goes on
    without it)."""
    directory = Path(directory)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    target = directory.with_name(f"{directory.name}.corrupt-{stamp}-{os.getpid()}")
    for old in directory.parent.glob(f"{directory.name}.corrupt-*"):
        shutil.rmtree(old, ignore_errors=True)
    try:
        directory.rename(target)
    except FileNotFoundError:
        return None  # another process moved it first
    except OSError as exc:
        log.warning("store %s is corrupt (%s) and could not be moved aside (%s): removed",
                    directory, why, exc)
        shutil.rmtree(directory, ignore_errors=True)
        return None
    log.warning("store %s is corrupt (%s): moved aside to %s and re-created", directory, why,
                target.name)
    return target


def fallback_directory(directory: Path) -> Path:
    """Where a store whose directory cannot be written lives instead: the host's temporary
    directory, one name per user and configured path, so every worker of the host agrees."""
    import hashlib
    import tempfile

    tag = hashlib.sha256(str(Path(directory).resolve()).encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"perf-{Path(directory).name}-{os.getuid()}-{tag}"


def close_quietly(store: object) -> None:
    with contextlib.suppress(Exception):
        store.close()  # type: ignore[attr-defined]


class LazyStore:
    """A ``diskcache.Cache`` at ``home``, opened at its first use (never at import: a damaged
    store cannot stop a worker from booting), recovered as the module says, and re-created
    when its directory is deleted while the app runs (``on_new(cache)`` then restores what
    must survive, e.g. a signing secret). Every other attribute is the open cache's; a call
    that fails on a corrupt or read-only database recovers and is tried once more."""

    def __init__(self, home: Path, on_new=None):
        import threading

        self.home, self.on_new = Path(home), on_new
        self._cache = None
        self._lock = threading.Lock()
        self._unusable: set[Path] = set()

    @property
    def directory(self) -> str:
        return self.cache().directory

    def cache(self):
        """The open cache (opened, or re-created after a deletion, here)."""
        current = self._cache
        if current is not None and (Path(current.directory) / "cache.db").is_file():
            return current
        with self._lock:
            current = self._cache
            if current is not None and (Path(current.directory) / "cache.db").is_file():
                return current
            if current is not None:
                log.warning("store %s was deleted: re-created", current.directory)
            self._cache = self._open()
            if self.on_new is not None:
                self.on_new(self._cache)
            return self._cache

    def _candidates(self) -> list[Path]:
        places = [self.home, fallback_directory(self.home)]
        return [p for p in places if p not in self._unusable]

    def _open(self):
        import tempfile

        for directory in self._candidates():
            if not writable(directory):
                self._unusable.add(directory)
                say_once(f"read-only {directory}", "store %s cannot be written: running "
                         "without it", directory)
                continue
            try:
                return _open_checked(directory)
            except Exception as exc:  # noqa: BLE001 - any failure: set aside, try the next
                if is_corrupt(exc):
                    move_aside(directory, exc)
                    with contextlib.suppress(Exception):
                        return _open_checked(directory)
                self._unusable.add(directory)
                say_once(f"unusable {directory}", "store %s unusable (%s): running without "
                         "it", directory, exc)
        private = Path(tempfile.mkdtemp(prefix=f"perf-{self.home.name}-"))
        say_once(f"private {self.home}", "store %s: no shared place can be written; this "
                 "process uses %s", self.home, private)
        return _open_checked(private)

    def recover(self, exc: BaseException) -> bool:
        """Set the failing store aside after ``exc``; whether a retry may succeed."""
        if not (is_corrupt(exc) or is_read_only(exc)):
            return False
        with self._lock:
            current, self._cache = self._cache, None
            if current is None:
                return True
            close_quietly(current)
            where = Path(current.directory)
            if is_corrupt(exc):
                move_aside(where, exc)
            else:
                self._unusable.add(where)
                say_once(f"read-only {where}", "store %s cannot be written (%s): running "
                         "without it", where, exc)
        return True

    def __getattr__(self, name: str):
        attr = getattr(self.cache(), name)
        if not callable(attr) or name == "transact":
            return attr

        def call(*args, **kwargs):
            try:
                return attr(*args, **kwargs)
            except (sqlite3.DatabaseError, OSError) as exc:
                if not self.recover(exc):
                    raise
                return getattr(self.cache(), name)(*args, **kwargs)
        return call


def _open_checked(directory: Path):
    """A ``diskcache.Cache`` at ``directory`` whose database passed ``PRAGMA quick_check``."""
    import diskcache

    directory.mkdir(parents=True, exist_ok=True)
    cache = diskcache.Cache(str(directory))
    try:
        check_integrity(cache._con)
    except BaseException:
        close_quietly(cache)
        raise
    return cache
