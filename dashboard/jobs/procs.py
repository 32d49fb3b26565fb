"""How a web worker starts, watches and reaps its background jobs' processes (the diskcache
manager's jobs; issue 29, item 1).

* Never ``fork()`` the server. A web worker is multithreaded (werkzeug's request threads under
  ``python app.py`` and the browser tests, gunicorn's gthread workers, diskcache's and Dash's own
  threads): ``fork()`` copies only the calling thread, and a lock another thread held at that
  instant stays held for ever in the child (POSIX fork(2), "async-signal-safe functions only";
  CPython's ``os.fork`` docs warn against it). A plan job forked from a request thread sat 24 min
  in ``pthread_mutex_lock ← sqlite3Malloc ← pysqlite_connection_init``. Jobs therefore start from
  a ``forkserver`` (multiprocessing's: a single-threaded server process started with
  fork + exec, which forks each job from its own main thread), or with ``spawn`` where there is
  none. The server preloads :data:`PRELOAD` (the estimator and the app's callbacks), so a job
  starts in a few milliseconds instead of re-importing them; the job opens its own store
  connections after it starts (:class:`dashboard.jobs.stores.LazyStore` pickles as its path).
* A watchdog outside the job: a thread of the worker that started it sends SIGTERM once the job
  runs past its wall-clock deadline and SIGKILL :data:`KILL_GRACE_S` later — a job blocked in C
  (where its own SIGALRM handler cannot run) still ends.
* A reaper: the same thread collects every finished job (its exit status, its pipe) at once, so
  none is left a zombie until the next job starts. A job of the forkserver is its child and is
  reaped there on SIGCHLD; a spawned job is this worker's child and is reaped here.
* :func:`end_all` kills every job this process started (the test session's last fixture).
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# what the forkserver imports once, before it forks any job (each import guarded there)
PRELOAD = ("dashboard.jobs.preload",)
KILL_GRACE_S = 5.0  # SIGTERM to SIGKILL
POLL_S = 0.2  # how often the watchdog looks (also the reaper's delay at worst)
log = logging.getLogger(__name__)


def start_method() -> str:
    """``forkserver`` where the platform has it (Linux, macOS), else ``spawn``; never fork."""
    return "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"


def context() -> multiprocessing.context.BaseContext:
    """The start method's context: the forkserver with :func:`_preload`; the interpreter run
    through ``/proc/self/exe`` when this user may not execute it by its path (a service user
    under an interpreter installed in a directory only its owner can search: exec(2) checks
    every directory of the path, the kernel's link to the running binary checks none)."""
    ctx = multiprocessing.get_context(start_method())
    if start_method() == "forkserver":
        ctx.set_forkserver_preload(list(_preload()))
    if not os.access(sys.executable, os.X_OK) and os.path.exists("/proc/self/exe"):
        ctx.set_executable("/proc/self/exe")
    return ctx


def _preload() -> tuple[str, ...]:
    """:data:`PRELOAD`, and the main module first when it is a script (``python app.py``): the
    forkserver imports it once, so a job does not run the script again."""
    main = sys.modules.get("__main__")
    script = getattr(main, "__file__", None) and getattr(main, "__spec__", None) is None
    return (("__main__",) if script else ()) + PRELOAD


@dataclass
class Job:
    """A started job's process and its deadline (``time.monotonic()`` seconds)."""

    process: Any
    deadline: float
    on_kill: Callable[[], None] | None = None
    terminated_at: float | None = None


class Watchdog:
    """One thread per process that ends late jobs and reaps finished ones (see the module)."""

    def __init__(self) -> None:
        self.jobs: dict[int, Job] = {}
        self.lock = threading.Lock()
        self.thread: threading.Thread | None = None
        self.owner = os.getpid()

    def watch(self, process: Any, limit_s: float, on_kill: Callable[[], None] | None) -> None:
        with self.lock:
            self.jobs[process.pid] = Job(process, time.monotonic() + limit_s, on_kill)
            if self.thread is None or not self.thread.is_alive() or self.owner != os.getpid():
                self.owner = os.getpid()
                self.thread = threading.Thread(target=self._run, name="job-watchdog",
                                               daemon=True)
                self.thread.start()

    def _run(self) -> None:
        while True:
            time.sleep(POLL_S)
            try:
                self.sweep()
            except Exception:  # noqa: BLE001 - the watchdog must outlive any one failure
                log.exception("job watchdog")

    def sweep(self, now: float | None = None) -> None:
        """Reap the finished jobs; SIGTERM the late ones, SIGKILL those late past the grace.
        The process objects are only touched under the lock (one reader of each pipe)."""
        now = time.monotonic() if now is None else now
        late = []
        with self.lock:
            for pid, job in list(self.jobs.items()):
                if job.process.exitcode is not None:  # polls: reaps a child of this process
                    self._forget(pid, job)
                elif job.terminated_at is None and now >= job.deadline:
                    job.terminated_at = now
                    late.append((pid, job))
                elif job.terminated_at is not None and now >= job.terminated_at + KILL_GRACE_S:
                    log.warning("job %d still running %g s after SIGTERM: SIGKILL", pid,
                                KILL_GRACE_S)
                    _signal(pid, signal.SIGKILL)
        for pid, job in late:  # outside the lock: on_kill writes to the job store
            log.warning("job %d ran past its deadline: SIGTERM", pid)
            if job.on_kill is not None:
                _quietly(job.on_kill)
            _signal(pid, signal.SIGTERM)

    def _forget(self, pid: int, job: Job) -> None:
        """Drop a finished job (the lock held): its status read, its pipe closed."""
        self.jobs.pop(pid, None)
        try:
            job.process.join(0)
            job.process.close()  # its pipe to the forkserver, and multiprocessing's record
        except (ValueError, OSError):
            pass

    def running(self) -> list[int]:
        with self.lock:
            return [pid for pid, job in self.jobs.items() if job.process.exitcode is None]

    def end_all(self, timeout_s: float = 5.0) -> list[int]:
        """SIGKILL every job still running, wait for them (at most ``timeout_s`` in all) and
        reap them; the process ids that were running."""
        deadline = time.monotonic() + timeout_s
        with self.lock:
            ended = [pid for pid, job in self.jobs.items() if job.process.exitcode is None]
            for pid in ended:
                _signal(pid, signal.SIGKILL)
            for pid, job in list(self.jobs.items()):
                job.process.join(max(0.0, deadline - time.monotonic()))
                if job.process.exitcode is not None:
                    self._forget(pid, job)
        return ended


WATCHDOG = Watchdog()


def start(target: Callable[..., Any], args: tuple, limit_s: float,
          on_kill: Callable[[], None] | None = None) -> int:
    """Start ``target(*args)`` (both picklable) in a new process of :func:`context` under the
    watchdog (SIGTERM ``limit_s`` from now, SIGKILL :data:`KILL_GRACE_S` later; ``on_kill()``
    runs here before the SIGTERM); its process id. The process is a daemon: one still running
    when this process exits is terminated, never waited for."""
    process = context().Process(target=target, args=args, daemon=True)
    process.start()
    WATCHDOG.watch(process, limit_s, on_kill)
    return process.pid


_warmed = threading.Event()


def warm() -> None:
    """Start the forkserver (and its preload) in a background thread, once per process, so the
    first job does not wait for it (a few seconds on a loaded host: bench/job_start.py)."""
    if _warmed.is_set() or start_method() != "forkserver":
        return
    _warmed.set()

    def run() -> None:
        from multiprocessing import forkserver

        context()
        try:
            forkserver.ensure_running()
        except OSError as exc:  # the first job says why, in words
            log.warning("job forkserver could not start: %s", exc)
    threading.Thread(target=run, name="job-forkserver-warm", daemon=True).start()


def warm_on_first_request(server: Any) -> None:
    """:func:`warm` when the Flask ``server`` answers its first request (not at import: a
    process that imports the app and serves nothing starts no forkserver)."""
    @server.before_request
    def _warm_jobs() -> None:
        if not _warmed.is_set():
            warm()


def end_all(timeout_s: float = 5.0) -> list[int]:
    """Kill and reap every job this process started that still runs (:meth:`Watchdog.end_all`)."""
    return WATCHDOG.end_all(timeout_s)


def kill(pid: int, wait_s: float = 1.0) -> bool:
    """Kill the job process ``pid`` and its children, if it is one (a process started by a
    forkserver or by ``spawn``: a pid reused by anything else is left alone); whether one was
    killed. A process that ends meanwhile is no error (the reaper may collect it first)."""
    import psutil

    try:
        process = psutil.Process(pid)
        if not any("multiprocessing.forkserver" in part or "multiprocessing.spawn" in part
                   for part in process.cmdline()):
            return False
        family = [*process.children(recursive=True), process]
    except psutil.Error:
        return False
    for proc in family:
        try:
            proc.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(family, timeout=wait_s)
    return True


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass


def _quietly(fn: Callable[[], None]) -> None:
    try:
        fn()
    except Exception:  # noqa: BLE001 - a note for the page; the kill goes ahead regardless
        log.exception("job watchdog: on_kill")
