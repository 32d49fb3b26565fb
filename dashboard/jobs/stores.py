"""What every on-disk store of the app does when its files are damaged or cannot be written:
the app always starts and serves (issue 26, finding 1).

* Corrupt (SQLite's "file is not a database", "database disk image is malformed", or a
  failed ``PRAGMA quick_check``): the store's directory is moved aside to
  ``<name>.corrupt-<UTC time>`` (kept for a look; only the latest such copy is kept, so a
  store corrupted again and again cannot fill the disk) and a new one is created; logged once
  per event.
* Read-only (the directory or database cannot be written: a read-only mount, wrong owner, a
  full disk, "database or disk is full" in a transaction too): the app runs without it — the
  results cache computes every request, the job store moves to a private directory of this
  process (``tempfile.mkdtemp``, 0700: never a shared path another user could create first)
  — logged once per process.
* Deleted or replaced (its directory removed while the app runs): every process re-opens the
  database when its file's inode changes, so the web workers and their jobs never go on
  writing to two different databases (issue 29, finding 6).

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


def private_directory(directory: Path) -> Path:
    """Where a store whose directory cannot be written lives instead: a new directory of this
    process, made by ``tempfile.mkdtemp`` (mode 0700, a name no other user can predict or plant;
    issue 29, finding 4: the old fallback, ``$TMPDIR/perf-<name>-<uid>-<hash>``, was used even
    when another user had created it first, and ran their code as the app's user)."""
    import tempfile

    private = Path(tempfile.mkdtemp(prefix=f"perf-{Path(directory).name}-"))
    info = private.lstat()
    if info.st_uid != os.getuid() or info.st_mode & 0o077:  # mkdtemp's promise, checked
        raise OSError(errno.EPERM, f"temporary directory {private} is not private")
    return private


def close_quietly(store: object) -> None:
    with contextlib.suppress(Exception):
        store.close()  # type: ignore[attr-defined]


class LazyStore:
    """A ``diskcache.Cache`` at ``home``, opened at its first use (never at import: a damaged
    store cannot stop a worker from booting), recovered as the module says, and re-opened when
    its database file is replaced (deleted, re-created by another process: a new inode) while
    the app runs (``on_new(cache)`` then restores what must survive, e.g. a signing secret).
    Every other attribute is the open cache's; a call that fails on a corrupt, read-only or
    full database recovers and is tried once more (outside a transaction: inside one the
    transaction is rolled back and :meth:`atomically` runs it again).

    Pickled (to a job's process) as the directory in use: the job opens its own connections
    there, after it starts, and writes where the web worker reads."""

    def __init__(self, home: Path, on_new=None, pinned: Path | None = None):
        self.home, self.on_new, self.pinned = Path(home), on_new, pinned
        self._setup()

    def _setup(self) -> None:
        import threading

        self._cache = None
        self._inode: tuple[int, int] | None = None
        self._lock = threading.Lock()
        self._local = threading.local()  # this thread's transaction depth
        self._unusable: set[Path] = set()
        self._trusted: Path | None = None

    def __getstate__(self) -> dict:
        # the place the worker has open (probed and checked there): the job opens it directly
        trusted = Path(self._cache.directory) if self._cache is not None else None
        return {"home": self.home, "pinned": self.pinned, "trusted": trusted}

    def __setstate__(self, state: dict) -> None:
        self.home, self.on_new, self.pinned = state["home"], None, state["pinned"]
        self._setup()
        self._trusted = state.get("trusted")

    @property
    def directory(self) -> str:
        return self.cache().directory

    def _current(self):
        """The open cache if its database file is still the one it opened, else None."""
        current = self._cache
        if current is None:
            return None
        try:
            info = os.stat(Path(current.directory) / "cache.db")
        except OSError:
            return None
        return current if (info.st_dev, info.st_ino) == self._inode else None

    def cache(self):
        """The open cache (opened, or re-opened after its file was replaced, here)."""
        current = self._current()
        if current is not None:
            return current
        with self._lock:
            current = self._current()
            if current is not None:
                return current
            if self._cache is not None:
                log.warning("store %s was deleted or replaced: re-opened", self._cache.directory)
                close_quietly(self._cache)
            self._cache = self._open()
            info = os.stat(Path(self._cache.directory) / "cache.db")
            self._inode = (info.st_dev, info.st_ino)
            if self.on_new is not None:
                self.on_new(self._cache)
            return self._cache

    def _candidates(self) -> list[Path]:
        places = [self.pinned] if self.pinned is not None else [self.home]
        return [p for p in places if p not in self._unusable]

    def _open(self):
        trusted, self._trusted = self._trusted, None
        if trusted is not None and (trusted / "cache.db").is_file():
            with contextlib.suppress(Exception):
                import diskcache

                return diskcache.Cache(str(trusted))
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
        private = private_directory(self.home)
        self.pinned = private  # this process's jobs write here too (pickled as this place)
        say_once(f"private {self.home}", "store %s cannot be used; this process uses the "
                 "private directory %s", self.home, private)
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
                if where == self.pinned:
                    self.pinned = None
                say_once(f"read-only {where}", "store %s cannot be written (%s): running "
                         "without it", where, exc)
        return True

    @contextlib.contextmanager
    def transact(self, retry: bool = True):
        """The open cache's transaction. A store failure inside it is not retried on another
        store (that would write outside the transaction): it rolls back and is raised, after
        the store is set aside (:meth:`recover`), for :meth:`atomically` to run again."""
        depth = getattr(self._local, "depth", 0)
        self._local.depth = depth + 1
        try:
            with self.cache().transact(retry):
                yield
        except (sqlite3.DatabaseError, OSError) as exc:
            if depth == 0:
                self.recover(exc)
            raise
        finally:
            self._local.depth = depth

    def atomically(self, fn):
        """``fn()`` inside :meth:`transact`, run once more on the recovered store (e.g. the
        private directory, when the disk is full: issue 29, finding 10) if the store failed."""
        try:
            with self.transact():
                return fn()
        except (sqlite3.DatabaseError, OSError) as exc:
            if not (is_corrupt(exc) or is_read_only(exc)):
                raise
        with self.transact():
            return fn()

    def __getattr__(self, name: str):
        if name.startswith("__") or name in ("home", "on_new", "pinned", "_cache", "_inode",
                                             "_lock", "_local", "_unusable", "_trusted"):
            raise AttributeError(name)  # not set up yet (unpickling): never the cache's
        attr = getattr(self.cache(), name)
        if not callable(attr):
            return attr

        def call(*args, **kwargs):
            try:
                return attr(*args, **kwargs)
            except (sqlite3.DatabaseError, OSError) as exc:
                if getattr(self._local, "depth", 0) or not self.recover(exc):
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
