"""Issue 29, item 1: jobs that cannot deadlock. A plan job forked from a request *thread* sat
24 min at 0 s CPU in ``pthread_mutex_lock ← sqlite3Malloc ← pysqlite_connection_init`` (a lock
another thread held at the fork), no guard ended it, and pytest then waited on it for ever. Now
jobs start from a forkserver (never a fork of the server), a watchdog outside the job ends a
late one (SIGTERM, then SIGKILL), finished jobs are reaped at once, and the test session kills
whatever it leaves behind."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import diskcache
import psutil
import pytest
from jobfns import masked_sleeper, quick_job
from test_server import ROOT, until

from dashboard.jobs import background, joblimits, procs


@pytest.fixture
def jobs(tmp_path, monkeypatch):
    monkeypatch.setattr(background, "MAX_JOBS", 1000)
    monkeypatch.setattr(background, "MAX_JOBS_PER_CLIENT", 1000)
    manager = background.DiskcacheJobs(tmp_path / "background")
    yield manager
    procs.end_all()


def _zombies() -> list[int]:
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            if child.status() == psutil.STATUS_ZOMBIE:
                found.append(child.pid)
        except psutil.Error:
            pass
    return found


def test_no_code_path_forks_the_server():
    """The issue's check: nothing under model/, dashboard/ or app.py forks."""
    pattern = re.compile(r"os\.fork\(|get_context\(.fork.\)|set_start_method\(.fork")
    hits = [f"{path}:{n}" for path in [ROOT / "app.py", *ROOT.glob("model/**/*.py"),
                                       *ROOT.glob("dashboard/**/*.py")]
            for n, line in enumerate(path.read_text().splitlines(), 1) if pattern.search(line)]
    assert hits == []
    assert procs.start_method() in ("forkserver", "spawn")


def test_a_job_runs_in_a_process_not_forked_from_this_one(jobs):
    """The job's parent is the forkserver (a fresh single-threaded process), not this
    multithreaded one; its result reaches the store this process reads."""
    pid = jobs.call_job_fn("k", quick_job, jobs.handle, {})
    done, job_pid, parent = until(lambda: jobs.handle.get("k"), "the job's result", timeout=30)
    assert done == "done" and job_pid == pid
    if procs.start_method() == "forkserver":
        assert parent != os.getpid()
        assert psutil.Process(parent).ppid() == os.getpid()  # the forkserver is ours


def test_a_finished_job_is_reaped_without_another_job_starting(jobs):
    """Finding 12: finished jobs stayed zombies until the next job started."""
    pid = jobs.call_job_fn("k", quick_job, jobs.handle, {})
    until(lambda: jobs.handle.get("k"), "the job's result", timeout=30)
    until(lambda: not psutil.pid_exists(pid) and not _zombies(), "the job to be reaped",
          timeout=10)
    until(lambda: not procs.WATCHDOG.jobs, "the watchdog to forget it", timeout=5)


def test_the_watchdog_ends_a_job_no_signal_handler_can_reach(jobs, monkeypatch):
    """A job whose own deadline (SIGALRM) cannot run and that ignores SIGTERM: the watchdog,
    outside it, sends SIGTERM at its deadline and SIGKILL after the grace period; the page
    reads why."""
    monkeypatch.setattr(joblimits, "JOB_TIMEOUT_S", 0.5)
    monkeypatch.setattr(procs, "KILL_GRACE_S", 0.5)
    start = time.monotonic()
    pid = jobs.call_job_fn("stuck", masked_sleeper, jobs.handle, {})
    until(lambda: jobs.handle.get("stuck-started"), "the job to block its signals", timeout=30)
    until(lambda: not psutil.pid_exists(pid) or psutil.Process(pid).status() ==
          psutil.STATUS_ZOMBIE, "the watchdog to end the job", timeout=15)
    assert time.monotonic() - start < 15
    assert jobs.get_result("stuck", pid)["background_callback_error"]["msg"] == \
        joblimits.late_message(0.5)


def _hold_connections(store: object, results: diskcache.Cache, stop: threading.Event) -> None:
    """What the server's other threads do meanwhile: transactions on the job store and
    reads and writes of the results cache, each opening its own SQLite connection."""
    n = 0
    while not stop.is_set():
        n += 1
        with store.transact():
            store.set(f"busy-{threading.get_ident()}", n)
        results.set(f"r-{threading.get_ident()}-{n % 16}", n)
        results.get(f"r-{threading.get_ident()}-{(n + 3) % 16}")


@pytest.mark.parametrize("threads, per_thread", [(8, 25)])
def test_jobs_started_from_many_request_threads_all_end(jobs, tmp_path, threads, per_thread):
    """The deadlock's recipe, hundreds of times: jobs started from many request threads while
    other threads hold job-store and results-cache connections (and SQLite's locks). Every
    job must end with its result, and no job process may remain."""
    results = diskcache.Cache(str(tmp_path / "results"))
    stop = threading.Event()
    holders = [threading.Thread(target=_hold_connections, args=(jobs.handle, results, stop))
               for _ in range(4)]
    for h in holders:
        h.start()
    started: list[tuple[str, int]] = []
    lock = threading.Lock()

    def request(t: int) -> None:
        for i in range(per_thread):
            key = f"job-{t}-{i}"
            pid = jobs.call_job_fn(key, quick_job, jobs.handle, {})
            with lock:
                started.append((key, pid))
    try:
        workers = [threading.Thread(target=request, args=(t,)) for t in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(240)
        assert not any(w.is_alive() for w in workers), "a request thread never returned"
        assert len(started) == threads * per_thread and all(pid > 0 for _, pid in started)
        deadline = time.monotonic() + 120
        missing = started
        while missing and time.monotonic() < deadline:
            missing = [(k, p) for k, p in missing if jobs.handle.get(k) is None]
            time.sleep(0.1)
        assert missing == [], f"{len(missing)} of {len(started)} jobs never ended"
        until(lambda: not any(psutil.pid_exists(p) for _, p in started) and not _zombies(),
              "every job process to be gone", timeout=30)
    finally:
        stop.set()
        for h in holders:
            h.join(10)
        results.close()


LEAKER = textwrap.dedent("""
    import os, signal, time
    from dashboard.jobs import background

    def stubborn(key, progress_key, path, context):
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
        open(path, "w").write(str(os.getpid()))
        time.sleep(300)

    def test_leaves_a_job_behind(tmp_path):
        jobs = background.DiskcacheJobs(tmp_path / "bg")
        jobs.call_job_fn("k", stubborn, os.environ["LEAK_FILE"], {})
        deadline = time.monotonic() + 30
        while not os.path.exists(os.environ["LEAK_FILE"]) and time.monotonic() < deadline:
            time.sleep(0.05)
""")


def test_the_test_session_never_waits_on_a_job_it_left(tmp_path):
    """A test that leaves a job running (one that ignores SIGTERM): the session still ends at
    once (the conftest's session fixture kills it), and the job is gone."""
    (tmp_path / "conftest.py").write_text((ROOT / "tests" / "conftest.py").read_text())
    (tmp_path / "test_leak.py").write_text(LEAKER)
    leak = tmp_path / "job.pid"
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{tmp_path}",
             "LEAK_FILE": str(leak)})
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert time.monotonic() - start < 60
    job = int(Path(leak).read_text())
    until(lambda: not psutil.pid_exists(job), "the left job to be gone", timeout=10)
