"""Issue 26, finding 3: a co-design job that never ends. A global batch of ``1e300`` passed the
form's checks; the job listed the batch's divisors one by one for ever, its 300 s budget was
checked only between rows, and killing its web worker did not stop it (two such jobs held two
cores for 336 s while every other job was refused). Now the batch is refused in the control's
words, divisor lists are sized before they run, and a job process ends on its own deadline
(inside its loops) or with its worker, whichever comes first."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import psutil
import pytest
from jobfns import napping_job, sleeping_job, spinning_job
from test_server import ROOT, until

from dashboard.jobs import background, budget, codesign, joblimits
from model import ModelError, load_model, load_system
from model.api import codesign as run_codesign
from model.engine import rules, space


@pytest.mark.parametrize("batches", ["1e300", "1e18", "100000001", "8, 1e300"])
def test_finding3_an_absurd_global_batch_is_refused_in_the_controls_words(batches):
    form = {**codesign.DEFAULTS, "batches": batches}
    start = time.perf_counter()
    with pytest.raises(ValueError, match="^Global batch must be at most 100,000,000 sequences$"):
        codesign.study(form)
    assert time.perf_counter() - start < 0.5
    assert codesign.study({**codesign.DEFAULTS, "batches": "100000000"})["batches"][0] == \
        100_000_000  # the bound itself is accepted


@pytest.mark.parametrize("divisors", [rules.divisors, space.divisors.__wrapped__])
def test_divisor_lists_are_sized_before_they_run(divisors):
    start = time.perf_counter()
    with pytest.raises(ModelError, match="too large to search its divisors"):
        divisors(10**300)
    assert time.perf_counter() - start < 0.1
    assert list(divisors(rules.MAX_DIVISIBLE))[-1] == rules.MAX_DIVISIBLE  # the bound runs
    assert list(divisors(12)) == [1, 2, 3, 4, 6, 12]


def test_the_estimators_codesign_refuses_an_unsearchable_batch_at_once():
    """The API path (``python -m model codesign`` too): a clear ModelError, not a hang (the
    request each model's search is built from refuses the batch when built)."""
    start = time.perf_counter()
    with pytest.raises(ModelError, match="'global_batch' = .* is out of range"):
        run_codesign([load_model("gpt3-175b")], load_system("h100"), 1e8,
                     {"hbm_capacity_gb": [80.0]}, {"base_usd": 30000,
                                                   "hbm_capacity_gb": {"80": 0}},
                     10**300)
    assert time.perf_counter() - start < 5


def test_finding3_a_job_ends_on_its_deadline_inside_its_loop(tmp_path, monkeypatch):
    monkeypatch.setattr(joblimits, "JOB_TIMEOUT_S", 1.0)
    jobs = background.DiskcacheJobs(tmp_path / "background")
    pid = jobs.call_job_fn("spin", spinning_job, jobs.handle, {})
    try:
        message, ended = until(lambda: jobs.handle.get("spin"), "the job's deadline", timeout=60)
        assert message == joblimits.late_message(1.0)
        assert ended - jobs.handle.get("spin-start") < 10  # the alarm was set just before
        until(lambda: not _running(pid), "the job process to end", timeout=10)
    finally:
        jobs.terminate_job(pid)


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


WORKER = textwrap.dedent("""
    import sys, time
    sys.path[:0] = [sys.argv[1], sys.argv[1] + "/tests"]
    from dashboard.jobs import background
    from jobfns import sleeping_job
    jobs = background.DiskcacheJobs(sys.argv[2])
    print(jobs.call_job_fn("k", sleeping_job, None, {}), flush=True)
    time.sleep(120)
""")


def test_finding3_a_job_ends_with_its_worker(tmp_path):
    """A web worker (here a plain process using the same manager) killed with SIGKILL, as
    gunicorn's arbiter or the OOM killer does: its job process ends too."""
    proc = subprocess.Popen([sys.executable, "-c", WORKER, str(ROOT), str(tmp_path / "bg")],
                            stdout=subprocess.PIPE, text=True, cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        job = int(proc.stdout.readline())
        assert _running(job)
        time.sleep(0.5)  # the job has set its limits
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        until(lambda: not _running(job), "the orphaned job to end", timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
        if _running(job):
            os.kill(job, signal.SIGKILL)


def test_a_job_outlives_the_request_thread_that_started_it(tmp_path):
    """A threaded server (werkzeug's: ``python app.py``, the browser tests) forks each job from
    a request thread that ends with the request. The kernel's death signal fires when the
    forking thread exits (prctl(2)), so it used to kill every such job as soon as its request
    returned (the page then read "the worker ... stopped"): the job must run to its end."""
    import threading

    jobs = background.DiskcacheJobs(tmp_path / "background")
    started: list[int] = []

    def request() -> None:  # starts the job, lingers past its limits being set, then ends
        started.append(jobs.call_job_fn("nap", napping_job, jobs.handle, {}))
        time.sleep(0.5)

    thread = threading.Thread(target=request)
    thread.start()
    thread.join()
    try:
        assert until(lambda: jobs.handle.get("nap"), "the job's result", timeout=15) == \
            "finished"
    finally:
        jobs.terminate_job(started[0])


def test_one_client_cannot_take_every_job_slot(tmp_path, monkeypatch):
    """Issue 26: two jobs of one client held both slots of a 2-core host and every other
    user's sweep was refused. Now one address runs at most PERF_MAX_JOBS_PER_CLIENT at once;
    another address still gets a slot."""
    from flask import Flask

    monkeypatch.setattr(background, "MAX_JOBS", 3)
    monkeypatch.setattr(background, "MAX_JOBS_PER_CLIENT", 1)
    jobs = background.DiskcacheJobs(tmp_path / "background")
    web = Flask(__name__)
    started = []

    def start(address: str, key: str) -> int:
        with web.test_request_context(environ_base={"REMOTE_ADDR": address}):
            return jobs.call_job_fn(key, sleeping_job, None, {})
    try:
        started.append(start("10.0.0.1", "a1"))
        assert started[0] > 0
        assert start("10.0.0.1", "a2") == 0  # the same address: refused, with the reason
        assert jobs.get_result("a2", 0)["background_callback_error"]["msg"] == \
            background.BUSY_CLIENT
        started.append(start("10.0.0.2", "b1"))  # another address: a slot
        assert started[1] > 0
        with web.test_request_context(environ_base={"REMOTE_ADDR": ""},
                                      headers={"X-Real-IP": "10.0.0.1"}):
            assert background.request_client() == "10.0.0.1"  # behind nginx (unix socket)
    finally:
        for pid in started:
            jobs.terminate_job(pid)


@pytest.mark.parametrize("method, expected", [("spawn", [False, True]),
                                              ("forkserver", [True, True])])
def test_a_job_started_by_a_request_thread_is_not_killed_when_the_thread_ends(
        monkeypatch, method, expected):
    """PR_SET_PDEATHSIG fires when the forking thread exits (prctl(2)): a job spawned by a
    threaded server's request thread must not ask for it (it died as the request returned and
    the Plan page showed 'the worker ... stopped'); one spawned by the main thread does, and so
    does every job of a forkserver (forked by that server's only thread)."""
    from dashboard.jobs import procs

    asked = []
    monkeypatch.setattr(procs, "start_method", lambda: method)
    monkeypatch.setattr(joblimits, "_die_with", lambda parent, death_signal=True, worker=None:
                        asked.append(death_signal))
    monkeypatch.setattr(joblimits, "_deadline", lambda limit_s: None)
    monkeypatch.setattr(joblimits, "_memory_limit", lambda extra_bytes: None)
    wrapped = []
    thread = threading.Thread(target=lambda: wrapped.append(joblimits.bounded(lambda: 1)))
    thread.start()
    thread.join()
    assert wrapped[0]() == 1 and joblimits.bounded(lambda: 2)() == 2
    assert asked == expected


ABSURD = {**codesign.DEFAULTS, "batches": "73513440"}  # finding 7: 3 models (Study 5's)


def test_finding7_the_absurd_codesign_is_refused_before_it_runs(tmp_cache, monkeypatch):
    """Issue 29, finding 7: a co-design with a global batch of 73,513,440 on 3 models was
    accepted, grew to 3.85 GB and died of memory after 57 s. Its size is counted from the
    request before any array is built, and it is refused naming the Global batch."""
    spec = codesign.study(ABSURD)
    assert len(spec["models"]) == 3
    monkeypatch.setattr(codesign, "codesign", lambda *a, **k: pytest.fail("search started"))
    start = time.perf_counter()
    with pytest.raises(budget.OverBudget, match=r"^Global batch 73,513,440 for gpt3-175b: the "
                       r"co-design would evaluate more than [\d,]+ configurations .* over this "
                       r"server's memory budget of 1\.0 GB per request; use a smaller global "
                       r"batch"):
        codesign.run(spec)
    assert time.perf_counter() - start < 30
    codesign.check_memory(codesign.study(codesign.DEFAULTS))  # the default study fits


def test_finding7_a_job_process_is_capped_by_rlimit_as(tmp_path, monkeypatch):
    """Whatever the estimate misses: the job's process cannot map more than the headroom
    over what it mapped at its start (RLIMIT_AS), and a MemoryError is said in words."""
    from jobfns import allocator

    from dashboard.jobs import jobfn

    monkeypatch.setattr(joblimits, "MEMORY_HEADROOM_BYTES", 256 * 2**20)
    jobs = background.DiskcacheJobs(tmp_path / "background")
    pid = jobs.call_job_fn("big", allocator, jobs.handle, {})
    try:
        assert until(lambda: jobs.handle.get("big"), "the job's result", timeout=30) == \
            "MemoryError"
    finally:
        jobs.terminate_job(pid)

    def greedy() -> None:
        raise MemoryError
    with pytest.raises(ModelError, match="^the job needed more than its memory limit of 0.2 GB"):
        jobfn._out_of_memory_in_words(greedy, 256 * 2**20)()


@pytest.mark.parametrize("address", ["127.0.0.1", "::1"])
def test_finding8_this_hosts_address_is_capped_like_any_client(tmp_path, monkeypatch, address):
    """Issue 29, finding 8: behind a TLS proxy on the same host every user is 127.0.0.1, and
    127.0.0.1 was exempt from the per-client job cap: one such client took every slot."""
    from flask import Flask

    monkeypatch.setattr(background, "MAX_JOBS", 3)
    monkeypatch.setattr(background, "MAX_JOBS_PER_CLIENT", 1)
    jobs = background.DiskcacheJobs(tmp_path / "background")
    web = Flask(__name__)
    started = []

    def start(key: str) -> int:
        with web.test_request_context(environ_base={"REMOTE_ADDR": address}):
            return jobs.call_job_fn(key, sleeping_job, None, {})
    try:
        started.append(start("first"))
        assert started[0] > 0
        assert start("second") == 0
        assert jobs.get_result("second", 0)["background_callback_error"]["msg"] == \
            background.BUSY_CLIENT
    finally:
        for pid in started:
            jobs.terminate_job(pid)
