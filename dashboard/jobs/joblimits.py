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
  ends the job once its parent has changed (the parent died before the prctl). The death
  signal fires when the forking *thread* exits (prctl(2): "the parent thread"), not only its
  process: it is set only for a job forked by its worker's main thread (gunicorn's sync
  worker). A job forked by a request thread of a threaded server (werkzeug's, which
  ``python app.py`` and the browser tests run; its thread ends with the request) would be
  killed as soon as its request returned, so it relies on the parent watch alone.
"""

from __future__ import annotations

import ctypes
import functools
import os
import resource
import signal
import threading
from collections.abc import Callable
from typing import Any

from dashboard.jobs import studies
from model import ModelError

# the sweeps' own budget (checked between rows, with a friendlier message) plus a margin
JOB_TIMEOUT_S = float(os.environ.get("PERF_JOB_TIMEOUT_S", studies.SWEEP_TIME_BUDGET_S + 30))
HARD_GRACE_S = 30  # CPU seconds past the deadline before the kernel ends the process
PARENT_POLL_S = 1.0
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def late_message(seconds: float) -> str:
    return (f"the job ran past its time limit of {seconds:g} s and was stopped: ask for "
            "less (fewer values, models or GPUs)")


def bounded(job_fn: Callable[..., Any], timeout_s: float | None = None) -> Callable[..., Any]:
    """``job_fn`` run under this module's limits (wrap it in the thread that starts the job's
    process; it runs in that new process)."""
    # PR_SET_PDEATHSIG fires when the *thread* that forked the job exits (prctl(2)): a request
    # thread of a threaded server (werkzeug's, gunicorn's gthread) ends right after it starts
    # the job, which then died at once ("the worker ... stopped"); only a fork from the main
    # thread, whose exit is the worker's, may use it — the watch thread covers every case
    @functools.wraps(job_fn)
    def job(*args: Any, **kwargs: Any) -> Any:
        limit_s = JOB_TIMEOUT_S if timeout_s is None else timeout_s
        parent = os.getppid()
        _die_with(parent, death_signal=forked_by_main)
        _deadline(limit_s)
        return job_fn(*args, **kwargs)

    # read in the worker, in the thread that wraps the job and forks its process
    forked_by_main = threading.current_thread() is threading.main_thread()
    return job


def _die_with(parent: int, death_signal: bool = True) -> None:
    """End this process once ``parent`` is gone: the kernel's death signal (only if
    ``death_signal``: its forking thread lives as long as the worker) and a watch thread."""
    if death_signal:
        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):  # not Linux: the thread below still does it
            pass

    def watch() -> None:
        while True:
            if os.getppid() != parent:
                os._exit(75)  # the worker is gone: nobody will read the result
            threading.Event().wait(PARENT_POLL_S)
    threading.Thread(target=watch, name="job-parent-watch", daemon=True).start()


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
