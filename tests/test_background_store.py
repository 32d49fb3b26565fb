"""The one-host background job store (dashboard/jobs/background.py: ``DiskcacheJobs``, the
default without ``REDIS_URL``): a job whose process died is reported, a deleted store comes
back with the same signing secret, and at most ``PERF_MAX_JOBS`` jobs run per host. Split
from tests/test_server.py, whose app (with its temporary cache) these use."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from test_server import dash_app

from dashboard.jobs import background


def test_one_host_jobs_by_default():
    assert isinstance(dash_app.app._background_manager, background.DiskcacheJobs)
    assert dash_app.celery_app is None  # no REDIS_URL in the tests' environment


def dead_pid() -> str:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return str(proc.pid)


def test_a_job_whose_process_died_is_reported(tmp_path):
    jobs = background.DiskcacheJobs(tmp_path / "background")
    died, cancelled = dead_pid(), dead_pid()
    failure = jobs.get_result("result-key", died)
    assert failure == {"background_callback_error": {"msg": background.LOST, "tb": ""}}
    # a running job is not reported
    assert jobs.get_result("result-key", str(os.getpid())) is jobs.UNDEFINED
    # nor a cancelled one (Dash kills it, and the page may poll once more)
    jobs.terminate_job(cancelled)
    assert jobs.get_result("result-key", cancelled) is jobs.UNDEFINED
    # and a result stored before the process ended wins
    jobs.handle.set("result-key", [1, 2])
    assert jobs.get_result("result-key", died) == [1, 2]


def test_a_job_reaped_between_two_looks_is_reported_not_raised(tmp_path, monkeypatch):
    """The race a CI run met under load: the job's process exists when its pid is looked up
    and is reaped before its status is read. Dash's ``job_running`` raised NoSuchProcess and
    the page said "The sweep failed: process no longer exists"; now the job counts as ended
    (its result, or the lost-job message)."""
    import psutil

    def reaped(pid):
        raise psutil.NoSuchProcess(pid)
    monkeypatch.setattr(psutil, "pid_exists", lambda pid: True)
    monkeypatch.setattr(psutil, "Process", reaped)
    jobs = background.DiskcacheJobs(tmp_path / "background")
    assert jobs.job_running(12345) is False
    assert jobs.get_result("result-key", "12345") == {
        "background_callback_error": {"msg": background.LOST, "tb": ""}}
    jobs.handle.set("result-key", [1, 2])
    assert jobs.get_result("result-key", "12345") == [1, 2]


def test_a_deleted_job_store_is_recreated_with_the_same_secret(tmp_path):
    jobs = background.DiskcacheJobs(tmp_path / "background")
    secret = jobs.get_or_create_signing_secret(lambda: b"first")
    shutil.rmtree(tmp_path / "background")
    jobs.handle.set("key", "value")  # works again
    assert jobs.handle.get("key") == "value"
    assert (tmp_path / "background" / "cache.db").is_file()
    # handles signed before the deletion still verify, in this process and in a new one
    assert jobs.get_or_create_signing_secret(lambda: b"second") == secret == b"first"
    fresh = background.DiskcacheJobs(tmp_path / "background")
    assert fresh.get_or_create_signing_secret(lambda: b"third") == secret


def _sleeping_job(key, progress_key, args, context) -> None:
    import time as _time

    _time.sleep(30)


def test_background_jobs_are_capped_per_host(tmp_path, monkeypatch):
    """Finding 1: on the Compare systems page each hostile request left one spinning job
    process, with no limit on their number. Now at most ``PERF_MAX_JOBS`` run at once (counted
    across the host's web workers in the shared store); one more is refused at once and the
    page shows why."""
    import psutil

    monkeypatch.setattr(background, "MAX_JOBS", 2, raising=False)
    jobs = background.DiskcacheJobs(tmp_path / "background")
    other = background.DiskcacheJobs(tmp_path / "background")  # another web worker
    started = [jobs.call_job_fn("k1", _sleeping_job, [], {}),
               other.call_job_fn("k2", _sleeping_job, [], {})]
    try:
        assert all(pid > 0 and psutil.pid_exists(pid) for pid in started)
        refused = jobs.call_job_fn("k3", _sleeping_job, [], {})
        assert refused == 0 and not jobs.job_running(refused)
        failure = jobs.get_result("k3", refused)
        assert failure == {"background_callback_error": {"msg": background.BUSY, "tb": ""}}
        jobs.terminate_job(refused)  # nothing to end (never pid 0)
        other.terminate_job(started[1])  # one ends: there is room again
        again = other.call_job_fn("k4", _sleeping_job, [], {})
        assert again > 0
        started.append(again)
    finally:
        for pid in started:
            jobs.terminate_job(pid)
