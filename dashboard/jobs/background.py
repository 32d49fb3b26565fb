"""Where the dashboard's background callbacks (the HBM sweep) run, chosen when the app starts.

* ``REDIS_URL`` unset (default): Dash's ``DiskcacheManager``. Each job runs in a process of its
  own, started from the web worker's forkserver (never a fork of the multithreaded worker:
  :mod:`dashboard.jobs.procs`), under a watchdog and reaped when it ends; jobs, progress and
  results go through ``diskcache`` in ``$PERF_CACHE_DIR/background``, which every gunicorn
  worker of the host shares. One host.
* ``REDIS_URL=redis://HOST:6379/0``: Dash's ``CeleryManager`` on :data:`celery_app` (broker and
  result backend both that Redis). Jobs run on Celery workers on this host or others, started
  from the repository's root with the same environment::

      celery -A dashboard.jobs.background:celery_app worker      # or: celery -A app:celery_app
      worker

  A worker imports ``app`` (Celery's ``include``) so that it registers the same callbacks as the
  web server; both must run the same code.

At most ``PERF_MAX_JOBS`` jobs (default: the host's CPU count) run at once on one host with the
diskcache manager — counted across the host's web workers in the shared store; one more is
refused at once with a message (:data:`BUSY`); one client may run at most
``PERF_MAX_JOBS_PER_CLIENT`` of them (default half, at least one: :data:`BUSY_CLIENT`), this
host's 127.0.0.1 included. With
Celery, the workers' ``--concurrency`` bounds them (further jobs wait in the queue).

Either way a job whose process died (worker killed, crashed, out of memory) is reported as a
failed background callback (``BackgroundCallbackError``, message :data:`LOST`), which the
callback's ``on_error`` handler can show, instead of the page waiting forever (Celery) or ending
silently (diskcache).

Serialization: the Celery path is JSON only (task arguments, progress, results). The diskcache
path stores Dash's own job records (callback inputs, progress, outputs) with diskcache's default
pickle serializer, on the server's own disk; user uploads are never unpickled there, and the
results cache (:mod:`dashboard.jobs.compute`) stores JSON text. A job is handed to its process
pickled as names and plain values (:mod:`dashboard.jobs.jobfn`), built by the server.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

import diskcache
from dash import CeleryManager, DiskcacheManager, Input, Output
from dash.background_callback.managers import BaseBackgroundCallbackManager

from dashboard.jobs import compute, joblimits, procs
from dashboard.jobs.jobfn import CallbackJob
from dashboard.jobs.stores import LazyStore
from dashboard.settings import SETTINGS

REDIS_URL = SETTINGS.redis_url
HEARTBEAT_S = 2.0  # a running Celery job refreshes its heartbeat key this often …
LOST_AFTER_S = 10  # … and counts as lost once the key has expired (several missed beats)
MARKER_TTL_S = 86400  # how long a job's markers (started, cancelled) are kept: longer than a job
LOST = "the worker running this job stopped (killed or crashed) before it finished: run it again"
NO_START = "the server could not start a process for this job: try again, or tell its operator"
MAX_JOBS = SETTINGS.max_jobs
BUSY = (f"the server is running its limit of {MAX_JOBS} background jobs: try again when one "
        "has finished")
RUNNING = "perf-running-jobs"  # the store's list of the host's job process ids
# jobs one client address may run at once: half the host's (at least one), so that one client
# cannot take every slot (issue 26: two jobs of one client held a 2-core host's both slots)
MAX_JOBS_PER_CLIENT = SETTINGS.max_jobs_per_client
BUSY_CLIENT = (f"you are running {MAX_JOBS_PER_CLIENT} background job(s) already, the most one "
               "address may: wait for one to finish, or cancel it")
log = logging.getLogger(__name__)


def _failure(reason: str) -> dict[str, Any]:
    """A result in Dash's own shape for a failed job: Dash raises ``BackgroundCallbackError``."""
    return {"background_callback_error": {"msg": reason, "tb": ""}}


class DiskcacheJobs(DiskcacheManager):
    """``DiskcacheManager`` on ``directory`` that reports a job whose process ended without a
    result. Its store is opened at first use, not here (a damaged store cannot stop a worker
    from booting), and recovered (:class:`dashboard.jobs.stores.LazyStore`): re-opened when its
    database file is deleted or replaced while the app runs, moved aside if corrupt, moved to a
    private directory of the process if it cannot be written or its disk is full."""

    def __init__(self, directory: Path):
        self.directory, self._secret = Path(directory), None
        self._store = LazyStore(self.directory, on_new=self._restore_secret)
        self.expire = None
        # DiskcacheManager.__init__ only checks and keeps an open cache: skipped (lazy)
        BaseBackgroundCallbackManager.__init__(self, None)

    def _restore_secret(self, cache: diskcache.Cache) -> None:
        if self._secret is not None:  # handles already signed stay valid
            cache.add(self.SIGNING_SECRET_KEY, self._secret)

    def store(self) -> LazyStore:
        """The store (see the class)."""
        return self._store

    @property
    def handle(self) -> LazyStore:  # what Dash's manager uses for everything
        return self._store

    @handle.setter
    def handle(self, cache: diskcache.Cache) -> None:
        raise AttributeError("the job store is opened lazily by DiskcacheJobs")

    def call_job_fn(self, key, job_fn, args, context):
        """Start the job unless MAX_JOBS run already, or its client runs its share (then its
        result is :data:`BUSY` or :data:`BUSY_CLIENT` and its id 0, a process that is never
        running). The slot is reserved in one transaction and the process started after it;
        a transaction that fails on the store (disk full) runs again on the store's fallback
        (:meth:`~dashboard.jobs.stores.LazyStore.atomically`)."""
        store = self.store()
        client = request_client()
        slot = [f"reserved-{os.getpid()}-{time.monotonic_ns()}", time.time(), client]

        def reserve() -> str | None:  # one web worker of the host at a time
            running = [j for j in store.get(RUNNING, []) if _alive(j)]
            mine = sum(self._client_of(store, j) == client for j in running)
            refusal = BUSY if len(running) >= MAX_JOBS else BUSY_CLIENT if (
                client is not None and mine >= MAX_JOBS_PER_CLIENT) else None
            store.set(RUNNING, running if refusal else [*running, slot])
            if refusal:
                store.set(key, _failure(refusal))
                log.warning("background job refused: %d running, %d of them %s's",
                            len(running), mine, client)
            return refusal

        if store.atomically(reserve):
            return 0
        job = None
        try:
            job = self._start(key, job_fn, args, context)
        finally:  # the reservation becomes the job's process id (or is freed)
            def settle() -> None:
                others = [j for j in store.get(RUNNING, []) if j != slot and _alive(j)]
                store.set(RUNNING, others + ([job] if job is not None else []))
                if job is not None:
                    store.set(_key("client", job), client, expire=MARKER_TTL_S)
            store.atomically(settle)
        self.handle.delete(_key("cancelled", job))  # a pid reused from a cancelled job
        return job

    def _start(self, key: str, job_fn: Any, args: Any, context: Any) -> int:
        """The job's process (never a fork of this multithreaded worker: dashboard.jobs.procs),
        ending on its own deadline, on the watchdog's, or with this worker
        (dashboard.jobs.joblimits); its process id."""
        bounded = joblimits.bounded(job_fn, memory_bytes=getattr(job_fn, "memory_bytes", None)
                                    or None)

        def late() -> None:  # the watchdog's kill, in words for the page
            self.handle.add(key, _failure(joblimits.late_message(bounded.timeout_s)))
        try:
            return procs.start(bounded, (key, self._make_progress_key(key), args, context),
                               bounded.timeout_s + procs.KILL_GRACE_S, on_kill=late)
        except OSError as exc:  # no process could be started: said, not a 500
            log.error("background job could not start: %s", exc)
            self.handle.set(key, _failure(f"{NO_START} ({exc.strerror or exc})"))
            return 0

    def make_job_fn(self, fn, progress, key=None):
        """A picklable job (dashboard.jobs.jobfn): the job's process opens its own store."""
        return CallbackJob(fn, key, self._store, progress)

    @staticmethod
    def _client_of(store, job: Any) -> str | None:
        """The client address that started ``job`` (a process id or a reservation)."""
        if isinstance(job, list):
            return job[2] if len(job) > 2 else None
        return store.get(_key("client", job))

    def terminate_job(self, job):
        if job is not None and int(job) <= 0:  # a refused job: no process
            return
        if job is not None:  # cancelled (or done): a poll that finds it gone is not a failure
            self.handle.set(_key("cancelled", job), 1, expire=MARKER_TTL_S)
            procs.kill(int(job))  # Dash's own raised when the job ended between two looks

    def get_or_create_signing_secret(self, generate):
        self._secret = super().get_or_create_signing_secret(generate)
        return self._secret

    def job_running(self, job):
        """Whether the job's process runs. Dash's own looks twice (the pid exists, then its
        status) and raised NoSuchProcess when the reaper collected the process between the two
        looks — under load the page then showed "process no longer exists"."""
        try:
            return _alive(int(job))
        except (TypeError, ValueError):
            return False

    def get_result(self, key, job):
        result = super().get_result(key, job)
        if result is self.UNDEFINED and job and not self.job_running(job):
            # the process may have stored its result just before it exited: look once more
            result = super().get_result(key, job)
            if result is self.UNDEFINED and self.handle.get(_key("cancelled", job)) is None:
                return _failure(LOST)
        return result


RESERVED_S = 60.0  # a slot reserved by a worker that died before starting its job expires


def _alive(job: Any) -> bool:
    """A job process that is running (not ended, not a zombie), or a fresh reservation."""
    import psutil

    if isinstance(job, list) and len(job) >= 2 and isinstance(job[1], (int, float)):
        return time.time() - job[1] < RESERVED_S
    try:
        return isinstance(job, int) and job > 0 and psutil.Process(job).status() != \
            psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def request_client() -> str | None:
    """Who starts a job: None outside a request (the server's own calls: the host's cap only);
    in a request the key :mod:`dashboard.server.identity` marked (the signed cookie's id, else
    the address), or without one the peer's address, or behind nginx on gunicorn's unix socket
    (no peer address) the ``X-Real-IP`` nginx sets, else "unknown". Every client is capped,
    this host's 127.0.0.1 included (issue 29, finding 8: behind a TLS proxy on the same host
    every user is 127.0.0.1, and it was exempt)."""
    from flask import has_request_context, request

    if not has_request_context():
        return None
    marked = request.environ.get("perf.client")  # dashboard.server.identity: cookie or address
    if marked:
        return str(marked)[:80]
    peer = request.environ.get("REMOTE_ADDR") or ""
    if peer and not peer.startswith("/") and peer != "unix":
        return peer
    return (request.headers.get("X-Real-IP") or "unknown")[:45]


def _key(what: str, job: Any) -> str:
    """Name of a job's marker: ``started``, ``alive`` (heartbeat), ``cancelled`` or
    ``client`` (the address that started it)."""
    return f"perf-job-{what}-{job}"


class _Heartbeat:
    """While a job runs on a Celery worker, a thread keeps ``alive-<task id>`` fresh in Redis."""

    def __init__(self, client, job: str):
        self.client, self.job, self.stop = client, job, threading.Event()
        self.thread = threading.Thread(target=self._run, name=f"heartbeat-{job}", daemon=True)

    def _beat(self) -> None:
        self.client.set(_key("alive", self.job), "1", ex=LOST_AFTER_S)

    def _run(self) -> None:
        while not self.stop.wait(HEARTBEAT_S):
            try:
                self._beat()
            except Exception:  # noqa: BLE001 - Redis hiccup: the next beat tries again
                pass

    def __enter__(self) -> _Heartbeat:
        self._beat()  # alive before started: a reader never sees started without alive
        self.client.set(_key("started", self.job), "1", ex=MARKER_TTL_S)
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        # alive is left to expire on its own: Dash stores the result after this returns
        self.stop.set()
        self.thread.join(timeout=HEARTBEAT_S + 1)


class CeleryJobs(CeleryManager):
    """``CeleryManager`` whose jobs send heartbeats, so a job whose worker died is reported.

    A job is lost when it has started (``started-<task id>``) and its heartbeat has expired, or
    when Celery itself marks the task failed (e.g. a prefork child killed: ``WorkerLostError``).
    A job still queued (no worker free yet) simply waits.
    """

    def make_job_fn(self, fn, progress, key=None):
        return super().make_job_fn(_with_heartbeat(fn, self.handle), progress, key)

    def terminate_job(self, job):
        if job is not None:  # cancelled (or done): a poll that finds it gone is not a failure
            self.handle.backend.client.set(_key("cancelled", job), "1", ex=MARKER_TTL_S)
        super().terminate_job(job)

    def get_or_create_signing_secret(self, generate):
        """Dash's secret for job handles, shared by every web process through Redis. Stored
        without the results' expiry: a web process started later (a restart, a recycled
        worker) must still agree with the running ones."""
        client = self.handle.backend.client
        client.set(self.SIGNING_SECRET_KEY, generate(), nx=True)
        return client.get(self.SIGNING_SECRET_KEY)

    def lost(self, job: str) -> str | None:
        """Why the job ``job`` (a Celery task id) can no longer finish, or None."""
        started, alive, cancelled = self.handle.backend.client.mget(
            _key("started", job), _key("alive", job), _key("cancelled", job))
        if cancelled is not None:
            return None
        if started is not None and alive is None:
            return LOST
        task = self.get_task(job)
        if task is not None and task.state == "FAILURE":
            return f"the worker running this job failed with {task.result!r}: run it again"
        return None

    def get_result(self, key, job):
        result = super().get_result(key, job)
        if result is self.UNDEFINED and job:
            reason = self.lost(job)
            if reason:
                # look once more: the job may have finished between the two reads
                result = super().get_result(key, job)
                if result is self.UNDEFINED:
                    return _failure(reason)
        return result


def _with_heartbeat(fn, celery):
    """``fn`` (a callback) run inside a heartbeat for the Celery task that runs it."""

    @functools.wraps(fn)
    def job(*args, **kwargs):
        with _Heartbeat(celery.backend.client, celery.current_task.request.id):
            return fn(*args, **kwargs)

    return job


def make_celery(url: str):
    """The Celery app of the dashboard's jobs: Redis at ``url`` as broker and result backend,
    JSON only, one job at a time per worker process, and the dashboard's callbacks imported."""
    from celery import Celery

    celery = Celery("dashboard", broker=url, backend=url, include=["app"])
    celery.conf.update(
        task_serializer="json", result_serializer="json", accept_content=["json"],
        result_accept_content=["json"], worker_prefetch_multiplier=1, result_expires=3600,
        broker_connection_retry_on_startup=True,
        # a job's deadline inside its loops (SoftTimeLimitExceeded where it runs), then the
        # task's process is killed (Celery's time limits: the diskcache path's, joblimits)
        task_soft_time_limit=joblimits.JOB_TIMEOUT_S,
        task_time_limit=joblimits.JOB_TIMEOUT_S + joblimits.HARD_GRACE_S,
    )
    return celery


# ``celery -A dashboard.jobs.background:celery_app worker`` (None without REDIS_URL)
celery_app = make_celery(REDIS_URL) if REDIS_URL else None


def background_manager() -> DiskcacheJobs | CeleryJobs:
    """Celery workers through Redis if ``REDIS_URL`` is set, else processes of this host."""
    if celery_app is not None:
        return CeleryJobs(celery_app)
    return DiskcacheJobs(compute.CACHE_DIR / "background")


def job_callback(prefix: str, on_error: Any) -> dict[str, Any]:
    """The ``callback`` keywords of a page's background job whose controls are named
    ``<prefix>-run``, ``-cancel``, ``-progress`` and ``-progress-text``: run disabled and cancel
    enabled while it runs, progress as (value, max, text), ``on_error`` when it fails."""
    return dict(
        background=True, prevent_initial_call=True,
        running=[(Output(f"{prefix}-run", "disabled"), True, False),
                 (Output(f"{prefix}-cancel", "disabled"), False, True)],
        cancel=[Input(f"{prefix}-cancel", "n_clicks")],
        on_error=on_error,
        progress=[Output(f"{prefix}-progress", "value"), Output(f"{prefix}-progress", "max"),
                  Output(f"{prefix}-progress-text", "children")])
