"""Limits of a background job's process on this host (the diskcache manager's jobs, each a
child process of the web worker that started it): it ends on its own deadline or with its
worker, whichever comes first (issue 26, finding 3: a co-design job with a global batch of
1e300 listed divisors for ever, its 300 s budget checked only between rows, and it outlived
its killed worker).

* Deadline inside its loops: ``setitimer(ITIMER_REAL)`` delivers SIGALRM after
  :data:`JOB_TIMEOUT_S`; the handler raises :class:`~model.errors.ModelError` in the job's
  main thread at the next bytecode, wherever it is (a divisor loop, a search chunk), which the
  callback shows as an inline message. Python runs signal handlers only between bytecodes
  (docs.python.org/3/library/signal.html, "Execution of Python signal handlers"), so a single
  C call runs to its end first: the kernel's CPU-time limit (``RLIMIT_CPU``, SIGXCPU kills the
  process by default: setrlimit(2)) :data:`HARD_GRACE_S` later ends even that.
* Ends with its worker: ``prctl(PR_SET_PDEATHSIG, SIGKILL)`` (prctl(2)), and a thread that
  ends the job once its parent has changed or its web worker is gone. The death signal fires
  when the forking *thread* exits (prctl(2): "the parent thread"), not only its process: a job
  of the forkserver (:mod:`dashboard.jobs.procs`) is forked by that server's only thread, which
  lives as long as the worker, so it always asks for it; a spawned job (no forkserver) asks only
  when its worker's main thread started it (a request thread of a threaded server ends with
  its request).
* Memory: ``RLIMIT_AS`` at what the job maps when it starts plus :data:`MEMORY_HEADROOM_BYTES`
  (setrlimit(2): an allocation past it fails; numpy raises MemoryError, which the job reports
  in words, :func:`memory_message`).
* From outside: the worker's watchdog (:mod:`dashboard.jobs.procs`) ends a job still running
  past its deadline with SIGTERM, then SIGKILL — where no handler of the job can run.

Every limit is read in the web worker when the job is built (:class:`Bounded` pickles them),
not in the job's process.
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dashboard.settings import SETTINGS
from model import ModelError

# the sweeps' own budget (checked between rows, with a friendlier message) plus a margin
JOB_TIMEOUT_S = SETTINGS.job_timeout_s
HARD_GRACE_S = 30  # CPU seconds past the deadline before the kernel ends the process
PARENT_POLL_S = 1.0
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def late_message(seconds: float) -> str:
    return (f"the job ran past its time limit of {seconds:g} s and was stopped: ask for "
            "less (fewer values, models or GPUs)")


# address space a job may add to what it maps when it starts (RLIMIT_AS): twice a request's
# memory budget (dashboard.jobs.budget, whose estimates are checked before a job's arrays are
# built), for what the estimates miss; PERF_JOB_MEMORY_MB sets it
MEMORY_HEADROOM_BYTES = SETTINGS.job_memory_bytes




@dataclass
class JobState:
    """What a job's process learns when it starts: the memory headroom it runs under."""

    memory_limit_bytes: int


JOB = JobState(memory_limit_bytes=MEMORY_HEADROOM_BYTES)  # set again in a job's process


def memory_message(limit_bytes: int) -> str:
    return (f"the job needed more than its memory limit of {limit_bytes / 2**30:.1f} GB and was "
            "stopped: ask for less (fewer values, models or GPUs, or a smaller global batch)")


class Bounded:
    """A job function run under this module's limits: built in the web worker, pickled to the
    job's new process and called there. Picklable: the limits are plain numbers read here, in
    the worker (a job process does not see the worker's settings changed after import)."""

    def __init__(self, job_fn: Callable[..., Any], timeout_s: float | None = None,
                 memory_bytes: int | None = None, death_signal: bool | None = None):
        self.job_fn = job_fn
        self.timeout_s = JOB_TIMEOUT_S if timeout_s is None else float(timeout_s)
        self.memory_bytes = MEMORY_HEADROOM_BYTES if memory_bytes is None else int(memory_bytes)
        # PR_SET_PDEATHSIG fires when the *thread* that forked the job exits (prctl(2)): a job
        # of the forkserver is forked by that server's one thread (it lives as long as the
        # worker); a spawned one by the calling thread, which may be a request's (werkzeug,
        # gthread) that ends right after: then only the parent watch ends it
        if death_signal is None:
            from dashboard.jobs import procs

            death_signal = procs.start_method() == "forkserver" or \
                threading.current_thread() is threading.main_thread()
        self.death_signal, self.worker = death_signal, os.getpid()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        worker = self.worker if self.worker != os.getppid() else None
        _die_with(os.getppid(), death_signal=self.death_signal, worker=worker)
        _deadline(self.timeout_s)
        _memory_limit(self.memory_bytes)
        return self.job_fn(*args, **kwargs)


def bounded(job_fn: Callable[..., Any], timeout_s: float | None = None,
            memory_bytes: int | None = None) -> Bounded:
    """``job_fn`` run under this module's limits (:class:`Bounded`)."""
    return Bounded(job_fn, timeout_s, memory_bytes)


def _memory_limit(extra_bytes: int) -> None:
    """Cap this process's address space (``RLIMIT_AS``, setrlimit(2): an allocation past it
    fails, numpy raises MemoryError) at what it maps now plus ``extra_bytes``."""
    if extra_bytes <= 0:
        return
    import psutil

    JOB.memory_limit_bytes = int(extra_bytes)
    limit = psutil.Process().memory_info().vms + int(extra_bytes)
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def _die_with(parent: int, death_signal: bool = True, worker: int | None = None) -> None:
    """End this process once ``parent`` (or the web ``worker`` that started it, when the
    parent is a forkserver) is gone: the kernel's death signal (only if ``death_signal``: its
    forking thread lives as long as the worker) and a watch thread."""
    if death_signal:
        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):  # not Linux: the thread below still does it
            pass
    _release_forkserver()

    def watch() -> None:
        while True:
            if os.getppid() != parent or (worker is not None and not _exists(worker)):
                os._exit(75)  # the worker is gone: nobody will read the result
            threading.Event().wait(PARENT_POLL_S)
    threading.Thread(target=watch, name="job-parent-watch", daemon=True).start()


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _release_forkserver() -> None:
    """Close the forkserver's liveness pipe this job inherited (multiprocessing hands every
    child of a forkserver the worker's end of it): the forkserver exits once its worker is
    gone only when no job keeps that pipe open, and its exit ends the job (death signal)."""
    from multiprocessing import forkserver

    server = getattr(forkserver, "_forkserver", None)
    fd = getattr(server, "_forkserver_alive_fd", None)
    if fd is not None and os.getpid() != getattr(server, "_forkserver_pid", None):
        try:
            os.close(fd)
        except OSError:
            pass
        server._forkserver_alive_fd = None


def _deadline(limit_s: float) -> None:
    def late(_signum: int, _frame: Any) -> None:
        raise ModelError(late_message(limit_s))

    signal.signal(signal.SIGALRM, late)
    signal.setitimer(signal.ITIMER_REAL, limit_s)
    used = resource.getrusage(resource.RUSAGE_SELF)
    cpu_s = int(used.ru_utime + used.ru_stime + limit_s + HARD_GRACE_S)
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    if hard != resource.RLIM_INFINITY:
        cpu_s = min(cpu_s, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, hard))
