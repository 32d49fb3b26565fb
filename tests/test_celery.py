"""Scale-out: with ``REDIS_URL`` set, background callbacks run on Celery workers.

A real ``redis-server`` (Debian's package; ``scripts/setup-services`` installs it) runs on a free
loopback port without persistence, one worker runs ``celery -A dashboard.jobs.background:celery_app
worker`` (solo pool: the job runs in the worker's own process), and the app runs under gunicorn,
both with that ``REDIS_URL`` and a temporary ``PERF_CACHE_DIR``. Headless Chromium drives the HBM
page: a sweep runs on the worker and is drawn; a worker killed mid-sweep is reported in the page
(``dashboard.jobs.background`` notices the job's heartbeat has stopped), and the app keeps working
with a new worker. The manager's own rules (lost, queued, cancelled, failed jobs; the shared
signing secret) are checked first against the same Redis. Without redis-server these tests fail:
they are never skipped.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

_TMP_CACHE = tempfile.mkdtemp(prefix="perf-celery-test-")
atexit.register(shutil.rmtree, _TMP_CACHE, ignore_errors=True)
if "dashboard.settings" not in sys.modules:  # never the repository's cache/
    os.environ["PERF_CACHE_DIR"] = _TMP_CACHE

import pytest  # noqa: E402

from dashboard.jobs import background  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
from polling import until  # noqa: E402 - tests/ is on sys.path (pytest rootdir)
from ports import free_port  # noqa: E402

LOST_WITHIN = background.LOST_AFTER_S + 15.0  # the heartbeat expires, then the next poll sees it


def tail(path: Path) -> str:
    return path.read_text(errors="replace")[-3000:] if path.exists() else ""


class Process:
    """A subprocess in its own session with its output in a log file."""

    def __init__(self, args: list[str], env: dict[str, str], log: Path):
        self.args, self.log = args, log
        with open(log, "ab") as out:
            self.proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=out,
                                         stderr=subprocess.STDOUT, start_new_session=True)

    def check(self) -> None:
        if self.proc.poll() is not None:
            raise AssertionError(f"{self.args[:4]} exited ({self.proc.returncode}):\n"
                                 f"{tail(self.log)}")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)


class RedisServer:
    """``redis-server`` on a free loopback port, no persistence, its files in ``work``."""

    def __init__(self, work: Path):
        exe = shutil.which("redis-server")
        if exe is None:
            pytest.fail("redis-server is not installed: these tests need Debian's redis-server "
                        "(scripts/setup-services installs it; ./scripts/test sources that)",
                        pytrace=False)
        port = free_port()
        self.url = f"redis://127.0.0.1:{port}/0"
        self.proc = Process([exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no", "--dir", str(work)], dict(os.environ),
                            work / "redis.log")
        import redis

        self.client = redis.Redis.from_url(self.url)

        def pong() -> bool:
            self.proc.check()
            try:
                return bool(self.client.ping())
            except redis.ConnectionError:
                return False
        until(pong, "redis-server to answer")


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    try:
        yield server
    finally:
        server.proc.stop()


class Stack:
    """A Celery worker and the app under gunicorn, sharing the REDIS_URL of ``redis``."""

    def __init__(self, redis: RedisServer, work: Path):
        self.work, self.redis_url, self.client = work, redis.url, redis.client
        self.env = {k: v for k, v in os.environ.items()
                    if k not in ("HOST", "PORT", "GUNICORN_BIND", "WEB_CONCURRENCY")}
        self.env.update(REDIS_URL=self.redis_url, PERF_CACHE_DIR=str(work / "cache"),
                        PYTHONUNBUFFERED="1")
        self.workers = 0
        self.worker: Process | None = None
        self.web: Process | None = None
        self.url = ""

    def start_worker(self) -> None:
        """One more worker (solo pool), ready when it answers a ping through Redis."""
        from celery import Celery

        self.workers += 1
        name = f"test{self.workers}@%h"
        self.worker = Process([sys.executable, "-m", "celery", "-A",
                               "dashboard.jobs.background:celery_app", "worker", "--pool", "solo",
                               "--concurrency", "1", "-l", "warning", "-n", name,
                               "--without-mingle", "--without-gossip"],
                              self.env, self.work / f"worker{self.workers}.log")
        probe = Celery(broker=self.redis_url, backend=self.redis_url)
        wanted = name.replace("%h", socket.gethostname())

        def ready() -> bool:
            self.worker.check()
            return any(wanted in reply for reply in probe.control.ping(timeout=0.5))
        until(ready, f"the Celery worker {wanted}")

    def start_web(self) -> str:
        port = free_port()
        self.web = Process([sys.executable, "-m", "gunicorn", "-c", "gunicorn.conf.py", "-w", "1",
                            "--bind", f"127.0.0.1:{port}", "app:server"], self.env,
                           self.work / "gunicorn.log")
        url = f"http://127.0.0.1:{port}"
        import urllib.request

        def up() -> bool:
            self.web.check()
            try:
                with urllib.request.urlopen(url + "/hbm", timeout=5) as res:
                    return res.status == 200
            except OSError:
                return False
        until(up, "gunicorn to serve the app")
        return url

    def stop(self) -> None:
        for proc in (self.web, self.worker):
            if proc is not None:
                proc.stop()

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{tail(p)}" for p in sorted(self.work.glob("*.log")))


@pytest.fixture(scope="module")
def stack(redis_server, tmp_path_factory) -> Iterator[Stack]:
    stack = Stack(redis_server, tmp_path_factory.mktemp("celery"))
    try:
        stack.start_worker()
        stack.url = stack.start_web()
        yield stack
    finally:
        stack.stop()


# --------------------------------------------------------------------------- the manager


@pytest.fixture
def jobs(redis_server) -> Iterator[background.CeleryJobs]:
    """A manager on database 1 of the test Redis (the app's stack uses database 0), emptied."""
    url = redis_server.url.removesuffix("/0") + "/1"
    manager = background.CeleryJobs(background.make_celery(url))
    manager.handle.backend.client.flushdb()
    yield manager
    manager.handle.backend.client.flushdb()


def test_a_job_is_lost_only_once_it_started_and_its_heartbeat_stopped(jobs):
    client = jobs.handle.backend.client
    assert jobs.lost("queued") is None  # no worker has taken it yet: it waits
    with background._Heartbeat(client, "running"):
        assert jobs.lost("running") is None
        assert 0 < client.ttl("perf-job-alive-running") <= background.LOST_AFTER_S
    assert jobs.lost("running") is None  # finished: the heartbeat expires on its own
    client.delete("perf-job-alive-running")  # as if it had expired with no result
    assert jobs.lost("running") == background.LOST
    failure = jobs.get_result("result-key", "running")
    assert failure == {"background_callback_error": {"msg": background.LOST, "tb": ""}}
    # a result stored meanwhile wins over the verdict
    client.set("result-key", json.dumps([1, 2]))
    assert jobs.get_result("result-key", "running") == [1, 2]


def test_a_cancelled_job_is_not_reported(jobs):
    client = jobs.handle.backend.client
    with background._Heartbeat(client, "cancelled"):
        pass
    client.delete("perf-job-alive-cancelled")
    jobs.terminate_job("cancelled")  # what Dash calls on cancel
    assert jobs.lost("cancelled") is None
    assert jobs.get_result("result-key", "cancelled") is jobs.UNDEFINED


def test_a_failed_task_is_reported_with_its_error(jobs):
    jobs.handle.backend.mark_as_failure("failed", RuntimeError("worker lost"))
    assert jobs.lost("failed") == \
        "the worker running this job failed with RuntimeError('worker lost'): run it again"


def test_the_signing_secret_is_shared_and_kept(jobs):
    """Every web process (and one started hours later) signs job handles with one secret."""
    first = jobs.get_or_create_signing_secret(lambda: b"first")
    other = background.CeleryJobs(jobs.handle)
    assert other.get_or_create_signing_secret(lambda: b"second") == first == b"first"
    assert jobs.handle.backend.client.ttl(jobs.SIGNING_SECRET_KEY) == -1  # no expiry


# --------------------------------------------------------------------------- the HBM page


class Page:
    def __init__(self, duo, url: str):
        self.duo, self.driver = duo, duo.driver
        self.driver.get(url + "/hbm")
        until(lambda: self.driver.find_element("css selector", "#hbm-run").is_enabled()
              and self.text("#hbm-progress-text") == "", "the HBM page")

    def text(self, selector: str) -> str:
        return self.driver.find_element("css selector", selector).text

    def run(self, steps: int) -> None:
        from selenium.webdriver.common.keys import Keys

        box = self.driver.find_element("css selector", "#hbm-steps")
        box.send_keys(Keys.CONTROL, "a")
        box.send_keys(str(steps), Keys.TAB)
        until(lambda: box.get_attribute("value") == str(steps), f"points per axis = {steps}")
        self.driver.find_element("css selector", "#hbm-run").click()

    def progress(self) -> tuple[float, float, str]:
        bar = self.driver.find_element("css selector", "#hbm-progress")
        return (float(bar.get_attribute("value") or 0), float(bar.get_attribute("max") or 0),
                self.text("#hbm-progress-text"))

    def running(self) -> bool:
        return not self.driver.find_element("css selector", "#hbm-run").is_enabled()

    def contour(self) -> list[list] | None:
        """The plotted z grid of the contour map (None until drawn)."""
        return self.driver.execute_script(
            "const gd = document.querySelector('#card-hbm-contour .js-plotly-plot');"
            "if (!gd || !gd._fullData) { return null; }"
            "const t = gd._fullData.find((t) => t.type === 'contour' || t.type === 'heatmap');"
            "return t ? Array.from(t.z, (row) => Array.from(row)) : null;")

    def sweep(self, steps: int) -> list[list]:
        """Run a sweep to its end; the plotted grid."""
        total = steps * steps
        self.run(steps)
        until(lambda: self.progress()[2] == f"{total} / {total} systems",
              f"the sweep to finish ({total} / {total} systems)", timeout=60)
        until(lambda: not self.running(), "the run button re-enabled")
        return until(lambda: (z := self.contour()) and len(z) == steps and z, "the contour map")


def started_jobs(stack: Stack) -> set[str]:
    prefix = "perf-job-started-"
    return {k.decode().removeprefix(prefix) for k in stack.client.scan_iter(prefix + "*")}


@pytest.mark.browser
def test_sweep_runs_on_the_celery_worker(stack, dash_duo):
    page = Page(dash_duo, stack.url)
    before = started_jobs(stack)
    z = page.sweep(2)
    assert page.progress()[:2] == (4, 4)
    values = [v for row in z for v in row]
    assert len(values) == 4 and all(isinstance(v, (int, float)) and v > 0 for v in values)
    assert page.text("#hbm-error") == ""
    # the job ran on the worker: its heartbeat marker and Celery's record are in Redis
    new = started_jobs(stack) - before
    assert len(new) == 1, stack.logs()
    meta = json.loads(stack.client.get(f"celery-task-meta-{new.pop()}"))
    assert meta["status"] == "SUCCESS"
    assert dash_duo.get_logs() == []


@pytest.mark.browser
def test_killed_worker_is_reported_and_the_app_keeps_working(stack, dash_duo):
    page = Page(dash_duo, stack.url)
    page.run(20)  # 400 systems: far longer than the test waits
    until(lambda: page.progress()[0] > 0, "the first progress report")
    assert page.running()

    stack.worker.stop(signal.SIGKILL)
    error = until(lambda: not page.running() and page.text("#hbm-error"),
                  "the page to report the lost job in #hbm-error", timeout=LOST_WITHIN)
    assert error == f"The sweep failed: {background.LOST}", error
    stopped = page.progress()
    assert 0 < stopped[0] < 400 and stopped[1] == 400
    assert dash_duo.get_logs() == []  # reported as the callback's output, not an HTTP error

    # a new worker: the same page runs the next sweep, and the report is cleared
    stack.start_worker()
    z = page.sweep(2)
    assert len(z) == 2 and page.text("#hbm-error") == ""
    assert dash_duo.get_logs() == []
