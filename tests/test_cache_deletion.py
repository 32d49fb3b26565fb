"""The results cache (:mod:`dashboard.jobs.compute`) deleted under it: a deleted directory,
database or entry — before, during and repeatedly under concurrent requests — costs only a
recomputation, never an exception, a wrong result or a stuck lock. Split from
tests/test_cache_faults.py, whose stand-in computations and private cache these use."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import test_cache_faults
from test_cache_faults import (
    LARGE,
    ROOT,
    SMALL,
    Counter,
    assert_frame,
    assert_outputs,
    database,
    get_frame,
    get_outputs,
)

from dashboard.jobs import compute

cache_dir = test_cache_faults.cache_dir  # its autouse fixture: a private cache per test


@pytest.mark.parametrize("what", ["cache directory", "results directory"])
def test_deleted_directory_recovers_and_recomputes(what, cache_dir):
    counter = Counter()
    assert_frame(get_frame(counter, 1), 1)
    assert_outputs(get_outputs(counter, 1), 1)
    assert_frame(get_frame(counter, 1), 1)
    assert_outputs(get_outputs(counter, 1), 1)
    assert len(counter.calls) == 2  # both served from the cache
    shutil.rmtree(cache_dir if what == "cache directory" else cache_dir / "results")
    assert_frame(get_frame(counter, 1), 1)
    assert_outputs(get_outputs(counter, 1), 1)
    assert len(counter.calls) == 4  # recomputed …
    assert (cache_dir / "results").is_dir()
    assert_frame(get_frame(counter, 1), 1)
    assert_outputs(get_outputs(counter, 1), 1)
    assert len(counter.calls) == 4  # … and cached again in the re-created directory


@pytest.mark.parametrize("rows", [SMALL, LARGE], ids=["in-database", "in-files"])
def test_directory_deleted_during_a_computation(rows, cache_dir):
    """Deleted between the cache read and the write: the result is still returned, later calls
    are right, and the cache works again — also on other threads (gunicorn's gthread workers).

    Found (in-files): writing the value file re-creates the directory but not the database, so
    ``compute.cache()`` keeps the old connection to the deleted database; any other thread opens
    an empty one ("no such table: Cache") and recomputes every request until a restart.
    """
    counter = Counter()
    inner = counter.frame(2, rows)

    def deleting() -> pd.DataFrame:
        shutil.rmtree(cache_dir)
        return inner()
    assert_frame(compute.cached_frame("fault", {"i": 2, "rows": rows}, deleting), 2, rows)
    for _ in range(2):
        assert_frame(get_frame(counter, 2, rows), 2, rows)
    assert 1 <= len(counter.calls) <= 2
    before = len(counter.calls)

    def other_thread() -> None:
        for _ in range(3):
            assert_frame(get_frame(counter, 2, rows), 2, rows)
    t = threading.Thread(target=other_thread)
    t.start()
    t.join()
    misses = len(counter.calls) - before
    assert misses <= 1, f"{misses} computations for 3 identical calls on another thread"


STRESS_SCRIPT = textwrap.dedent('''
    """Eight threads use the results cache while its directory is deleted 20 times."""
    import json, logging, os, shutil, sys, threading, time
    sys.path.insert(0, sys.argv[1])
    import numpy as np, pandas as pd
    from dashboard.jobs import compute
    logging.disable(logging.WARNING)  # the cache's own warnings: expected here

    def frame_of(i, rows):
        return pd.DataFrame({"i": np.full(rows, i), "x": np.arange(rows) * 0.25 + i,
                             "name": [f"row-{i}-{r}" for r in range(rows)]})

    def rows_of(i):
        return 150 if i % 2 else 2000

    lock = threading.Lock()
    stop = threading.Event()
    latencies, errors, wrong, calls = [], [], [], []

    def get(i):
        def compute_frame():
            with lock:
                calls.append(i)
            return frame_of(i, rows_of(i))
        got = compute.cached_frame("fault", {"i": i}, compute_frame)
        if not got.equals(frame_of(i, rows_of(i))):
            wrong.append(i)

    def client(t):
        k = 0
        while not stop.is_set():
            t0 = time.perf_counter()
            try:
                get((7 * t + k) % 12)
            except Exception as exc:
                errors.append(repr(exc))
            k += 1
            with lock:
                latencies.append(time.perf_counter() - t0)

    threads = [threading.Thread(target=client, args=(t,), daemon=True) for t in range(8)]
    for t in threads:
        t.start()
    # each deletion waits for 3 more finished requests (at most 30 s), so every deletion lands
    # among running requests however loaded the machine is (a fixed 30 ms pace did not)
    busy_deletions = 0
    for _ in range(20):
        with lock:
            before = len(latencies)
        wait_until = time.time() + 30.0
        while time.time() < wait_until:
            with lock:
                if len(latencies) >= before + 3:
                    busy_deletions += 1
                    break
            time.sleep(0.005)
        shutil.rmtree(compute.CACHE_DIR, ignore_errors=True)
    time.sleep(0.2)
    stop.set()
    deadline = time.time() + float(sys.argv[2])
    for t in threads:
        t.join(timeout=max(0.0, deadline - time.time()))
    stuck = sum(t.is_alive() for t in threads)
    after = None
    if not stuck:  # the cache works again: after one pass, a second pass is all hits
        for i in range(12):
            get(i)
        n = len(calls)
        for i in range(12):
            get(i)
        after = len(calls) - n
    print("RESULT " + json.dumps({"requests": len(latencies), "busy_deletions": busy_deletions,
                                  "errors": errors[:5],
                                  "wrong": wrong[:5], "stuck": stuck,
                                  "max_s": max(latencies, default=0.0), "misses_after": after}))
    sys.stdout.flush()
    os._exit(0)  # never wait for a stuck thread
''')
STALL_S = 10.0  # a request may wait on the cache this long at most (the pages answer in < 1 s)


def test_directory_deleted_repeatedly_under_concurrent_requests(tmp_path):
    """Eight threads (as gunicorn's gthread workers) keep reading and computing while the cache
    directory is deleted twenty times, each time after three more requests finished: no
    exception, every result right, no request stuck, and the cache works afterwards. In a
    subprocess, so a stuck thread cannot outlive the test.

    Found: requests stall for 60 s (diskcache's sqlite busy timeout), often twice (read, then
    write: 120 s, gunicorn's worker timeout), on a lock left by connections to the deleted and
    re-created database while several threads re-create the cache at once.
    """
    script = tmp_path / "stress.py"
    script.write_text(STRESS_SCRIPT)
    env = {**os.environ, "PERF_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, str(script), str(ROOT), str(STALL_S)], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=300)
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
    assert line, f"exit {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    out = json.loads(line.removeprefix("RESULT "))
    assert out["errors"] == [] and out["wrong"] == []
    assert out["stuck"] == 0, (f"{out['stuck']} of 8 requests still waiting {STALL_S} s after "
                               f"the deletions ended ({out['requests']} requests done)")
    assert out["max_s"] < STALL_S
    assert out["busy_deletions"] == 20, out  # requests kept finishing between deletions
    assert out["requests"] >= 60
    assert out["misses_after"] == 0


def within(seconds: float, fn) -> Any:
    """``fn()`` on a daemon thread; AssertionError if it has not returned after ``seconds``
    (the thread is left behind: a stalled cache must fail the test, not hang it)."""
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - reported to the test below
            out["error"] = exc
    t = threading.Thread(target=run, daemon=True)
    start = time.monotonic()
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"still running after {seconds:g} s"
    if "error" in out:
        raise out["error"]
    return out["value"], time.monotonic() - start


def bounded_cache(directory: Path | str):
    """A cache object as :func:`dashboard.jobs.compute.cache` opens it (rollback journal)."""
    from dashboard.jobs.diskstore import BoundedCache

    return BoundedCache(str(directory), timeout=1, sqlite_journal_mode="delete",
                        sqlite_mmap_size=0, sqlite_synchronous=0)


def test_one_cache_object_on_two_database_files_leaves_no_lock(tmp_path):
    """The cause of the once-flaky deletion test, step by step. A cache object used by several
    threads while its directory is deleted and re-created ends up with connections to two
    database files (the deleted one and the new one), so two write transactions run at once.
    diskcache kept *one* transaction owner per object: the second overwrote the first's, whose
    check before COMMIT then failed (AssertionError) and left its connection inside the
    transaction, holding the new file's write lock; re-creating the cache on that file then
    retried "database is locked" for 60 s. Failed before the fix (AssertionError in thread A,
    re-creation still running after 10 s); owners are per thread now."""
    directory = str(tmp_path / "results")
    store = bounded_cache(directory)
    store.set("warm", "x")  # this thread's connection: the first file
    events = {name: threading.Event() for name in ("a_in", "b_in", "a_go", "b_go")}
    errors: dict[str, BaseException] = {}

    def transaction(inside: str, leave: str) -> None:
        try:
            with store.transact():  # BEGIN IMMEDIATE: this file's write lock
                events[inside].set()
                assert events[leave].wait(10)
                if inside == "a_in":  # (both began before any journal existed)
                    store.set("a", "value")
        except BaseException as exc:  # noqa: BLE001
            errors[inside] = exc
            events[inside].set()

    old_file_connected = threading.Event()

    def thread_b() -> None:  # connects now (the first file), begins after A
        store.get("warm")
        old_file_connected.set()
        assert events["a_in"].wait(10)
        transaction("b_in", "b_go")
    old_file = threading.Thread(target=thread_b, daemon=True)
    old_file.start()
    assert old_file_connected.wait(10)
    shutil.rmtree(directory)
    bounded_cache(directory).close()  # re-created: the second file
    new_file = threading.Thread(target=transaction, args=("a_in", "a_go"), daemon=True)
    new_file.start()  # A's first connection: the second file
    assert events["a_in"].wait(10) and events["b_in"].wait(10)
    events["a_go"].set()
    new_file.join(10)
    events["b_go"].set()
    old_file.join(10)
    # the new file's transaction committed; the deleted file's may fail (its directory is gone)
    assert "a_in" not in errors, errors
    assert not isinstance(errors.get("b_in"), AssertionError), errors
    fresh, seconds = within(10, lambda: bounded_cache(directory))
    assert seconds < 3
    within(5, lambda: fresh.set("after", "value"))
    assert fresh.get("after") == "value" and fresh.get("a") == "value"


def test_a_failed_commit_releases_the_write_lock(tmp_path):
    """A COMMIT refused with "database is locked" (a reader kept its shared lock beyond the
    busy timeout) left diskcache's connection inside its transaction for good: every later
    write and re-creation of the cache waited on its lock. Failed before the fix (the
    re-creation still running after 10 s); the connection is closed now."""
    directory = tmp_path / "results"
    store = bounded_cache(directory)
    store.set("k", "v0")
    reader = sqlite3.connect(str(directory / "cache.db"), timeout=1, isolation_level=None,
                             check_same_thread=False)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM Cache").fetchall()  # holds a shared lock
    with pytest.raises(Exception):  # noqa: B017 - diskcache's Timeout or sqlite's error
        store.set("k", "v1")  # COMMIT needs the exclusive lock: refused after 1 s
    reader.execute("COMMIT")
    reader.close()
    fresh, seconds = within(10, lambda: bounded_cache(directory))
    assert seconds < 3
    within(5, lambda: fresh.set("k", "v2"))
    assert fresh.get("k") == "v2" and store.get("k") == "v2"


def test_deleted_database_file_recovers_in_every_thread(cache_dir):
    """Only ``cache.db`` deleted (the directory stays, e.g. a clean-up of files): requests on
    other threads — gunicorn's gthread workers — must get a working cache again.

    Found: a thread's new sqlite connection opens an empty database ("no such table: Cache");
    every read and write then fails, so that thread recomputes every request until a restart.
    """
    counter = Counter()
    get_frame(counter, 3)
    database(compute.cache()).unlink()

    def other_thread() -> None:
        for _ in range(3):
            assert_frame(get_frame(counter, 3), 3)
    t = threading.Thread(target=other_thread)
    t.start()
    t.join()
    assert len(counter.calls) <= 2, f"{len(counter.calls)} computations for 4 identical calls"
