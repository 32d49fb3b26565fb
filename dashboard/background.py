"""Where the dashboard's background callbacks (the HBM sweep) run, chosen when the app starts.

* ``REDIS_URL`` unset (default): Dash's ``DiskcacheManager``. Each job runs in a child process of
  the web worker that received it; jobs, progress and results go through ``diskcache`` in
  ``$PERF_CACHE_DIR/background``, which every gunicorn worker of the host shares. One host.
* ``REDIS_URL=redis://HOST:6379/0``: Dash's ``CeleryManager`` on :data:`celery_app` (broker and
  result backend both that Redis). Jobs run on Celery workers on this host or others, started
  from the repository's root with the same environment::

      celery -A dashboard.background:celery_app worker      # or: celery -A app:celery_app worker

  A worker imports ``app`` (Celery's ``include``) so that it registers the same callbacks as the
  web server; both must run the same code.

Either way a job whose process died (worker killed, crashed, out of memory) is reported as a
failed background callback (``BackgroundCallbackError``, message :data:`LOST`), which the
callback's ``on_error`` handler can show, instead of the page waiting forever (Celery) or ending
silently (diskcache).

Serialization: the Celery path is JSON only (task arguments, progress, results). The diskcache
path stores Dash's own job records (callback inputs, progress, outputs) with diskcache's default
pickle serializer, on the server's own disk; user uploads are never unpickled there, and the
results cache (:mod:`dashboard.compute`) stores JSON text.
"""

from __future__ import annotations

import functools
import os
import threading
from typing import Any

import diskcache
from dash import CeleryManager, DiskcacheManager

from . import compute

REDIS_URL = os.environ.get("REDIS_URL", "").strip() or None
HEARTBEAT_S = 2.0  # a running Celery job refreshes its heartbeat key this often …
LOST_AFTER_S = 10  # … and counts as lost once the key has expired (several missed beats)
LOST = "the background worker running this job stopped (killed or crashed) before it finished"


def _failure(reason: str) -> dict[str, Any]:
    """A result in Dash's own shape for a failed job: Dash raises ``BackgroundCallbackError``."""
    return {"background_callback_error": {"msg": reason, "tb": ""}}


class DiskcacheJobs(DiskcacheManager):
    """``DiskcacheManager`` that reports a job whose process ended without a result."""

    def get_result(self, key, job):
        result = super().get_result(key, job)
        if result is self.UNDEFINED and job and not self.job_running(job):
            # the process may have stored its result just before it exited: look once more
            result = super().get_result(key, job)
            if result is self.UNDEFINED:
                return _failure(LOST)
        return result


def _started_key(job: str) -> str:
    return f"perf-job-started-{job}"


def _alive_key(job: str) -> str:
    return f"perf-job-alive-{job}"


class _Heartbeat:
    """While a job runs on a Celery worker, a thread keeps ``alive-<task id>`` fresh in Redis."""

    def __init__(self, client, job: str):
        self.client, self.job, self.stop = client, job, threading.Event()
        self.thread = threading.Thread(target=self._run, name=f"heartbeat-{job}", daemon=True)

    def _beat(self) -> None:
        self.client.set(_alive_key(self.job), "1", ex=LOST_AFTER_S)

    def _run(self) -> None:
        while not self.stop.wait(HEARTBEAT_S):
            try:
                self._beat()
            except Exception:  # noqa: BLE001 - Redis hiccup: the next beat tries again
                pass

    def __enter__(self) -> _Heartbeat:
        self._beat()  # alive before started: a reader never sees started without alive
        self.client.set(_started_key(self.job), "1", ex=86400)
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

    def lost(self, job: str) -> str | None:
        """Why the job ``job`` (a Celery task id) can no longer finish, or None."""
        started, alive = self.handle.backend.client.mget(_started_key(job), _alive_key(job))
        if started is not None and alive is None:
            return LOST
        task = self.get_task(job)
        if task is not None and task.state == "FAILURE":
            return f"{LOST}: {task.result!r}"
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
        broker_connection_retry_on_startup=True, worker_hijack_root_logger=False,
    )
    return celery


# ``celery -A dashboard.background:celery_app worker`` (None without REDIS_URL)
celery_app = make_celery(REDIS_URL) if REDIS_URL else None


def background_manager() -> DiskcacheJobs | CeleryJobs:
    """Celery workers through Redis if ``REDIS_URL`` is set, else processes of this host."""
    if celery_app is not None:
        return CeleryJobs(celery_app)
    path = compute.CACHE_DIR / "background"
    path.mkdir(parents=True, exist_ok=True)
    return DiskcacheJobs(diskcache.Cache(str(path)))
