"""Faults of the dashboard's caches: size limit, deletion, corruption, estimator version.

The results cache (:mod:`dashboard.jobs.compute`, diskcache under ``$PERF_CACHE_DIR/results``) must
stay within its size limit by evicting the least recently used entries; a deleted or corrupted cache
directory, database or entry must cost only a recomputation (never an exception, never a wrong
result) and the cache must work again afterwards; results are keyed by the estimator's version.
The background-callback cache (``$PERF_CACHE_DIR/background``) deleted while the app runs: pages
and what-if callbacks are still served, and a background sweep still completes (checked in a
subprocess, so this session's app keeps its own directory).

Every test uses its own temporary cache directory (never the repository's ``cache/``) and cheap
stand-in computations that count their calls: a call counted is a cache miss.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

_TMP_CACHE = tempfile.mkdtemp(prefix="perf-cache-faults-")
atexit.register(shutil.rmtree, _TMP_CACHE, ignore_errors=True)
if "dashboard.jobs.compute" not in sys.modules:  # never the repository's cache/
    os.environ["PERF_CACHE_DIR"] = _TMP_CACHE

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import plotly.graph_objects as go  # noqa: E402
import pytest  # noqa: E402

from dashboard.controls import scenario as S  # noqa: E402
from dashboard.jobs import compute  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
LARGE = 2_000  # rows: about 28 kB of JSON, stored by diskcache in a file of its own
SMALL = 150  # rows: about 2 kB, stored inside the sqlite database


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch) -> Path:
    """A fresh, private results cache for every test (created on first use)."""
    monkeypatch.setattr(compute, "CACHE_DIR", tmp_path / "cache")
    monkeypatch.setattr(compute, "_cache", None)
    monkeypatch.setattr(compute, "_down_until", 0.0, raising=False)  # no back-off left over
    yield tmp_path / "cache"
    if compute._cache is not None:
        compute._cache.close()


def frame_of(i: int, rows: int = SMALL) -> pd.DataFrame:
    return pd.DataFrame({"i": np.full(rows, i), "x": np.arange(rows) * 0.25 + i,
                         "name": [f"row-{i}-{r}" for r in range(rows)]})


class Counter:
    """Stand-ins for the estimator: ``frame(i)``/``outputs(i)`` compute functions that count."""

    def __init__(self) -> None:
        self.calls: list[Any] = []
        self.lock = threading.Lock()

    def frame(self, i: int, rows: int = SMALL):
        def compute_frame() -> pd.DataFrame:
            with self.lock:
                self.calls.append(i)
            return frame_of(i, rows)
        return compute_frame

    def outputs(self, i: int):
        def compute_outputs() -> tuple:
            with self.lock:
                self.calls.append(("outputs", i))
            return (f"summary {i}", go.Figure(go.Scatter(x=[1, 2, 3], y=[i, i + 1, i + 2])))
        return compute_outputs


def get_frame(counter: Counter, i: int, rows: int = SMALL, kind: str = "fault") -> pd.DataFrame:
    return compute.cached_frame(kind, {"i": i, "rows": rows}, counter.frame(i, rows))


def get_outputs(counter: Counter, i: int) -> list:
    return compute.cached_outputs("fault-page", {"i": i}, counter.outputs(i))


def assert_frame(frame: pd.DataFrame, i: int, rows: int = SMALL) -> None:
    pd.testing.assert_frame_equal(frame, frame_of(i, rows), check_dtype=False)


def assert_outputs(outputs: list, i: int) -> None:
    assert outputs[0] == f"summary {i}"
    assert outputs[1]["data"][0]["y"] == [i, i + 1, i + 2]


def key_of(i: int, rows: int = SMALL, kind: str = "fault") -> str:
    return compute.cache_key(kind, {"i": i, "rows": rows})


def database(store) -> Path:
    return Path(store.directory) / "cache.db"


# --------------------------------------------------------------------------- size limit


@pytest.mark.parametrize("rows", [SMALL, LARGE], ids=["in-database", "in-files"])
def test_size_limit_bounds_the_volume_and_evicts_old_entries(rows, monkeypatch):
    limit = 256 * 1024
    monkeypatch.setattr(compute, "CACHE_SIZE_BYTES", limit)
    counter = Counter()
    store = compute.cache()
    assert store.size_limit == limit
    assert store.eviction_policy == "least-recently-used"
    entry = len(compute.frame_to_text(frame_of(0, rows)))
    n = max(40, 3 * limit // entry)  # three times what fits
    volumes = []
    for i in range(n):
        assert_frame(get_frame(counter, i, rows), i, rows)
        volumes.append(store.volume())
    assert counter.calls == list(range(n))
    # bounded: the limit, plus at most the entry that crossed it and sqlite's page slack
    assert max(volumes) <= limit + entry + 64 * 1024, (max(volumes), limit, entry)
    assert len(store) < n
    assert key_of(0, rows) not in store and key_of(1, rows) not in store  # oldest went first
    # the newest entries are kept (diskcache evicts up to ten at once, so with fewer than ten
    # entries under the limit the one just written may go too: which survive depends on size)
    kept = [i for i in range(n) if key_of(i, rows) in store]
    assert kept and min(kept) > 1 and max(kept) >= n - 10, kept
    # results stay right: an evicted entry is recomputed, a kept one is served
    assert_frame(get_frame(counter, 0, rows), 0, rows)
    assert counter.calls[-1] == 0 and len(counter.calls) == n + 1
    assert_frame(get_frame(counter, max(kept), rows), max(kept), rows)
    assert len(counter.calls) == n + 1


def test_eviction_is_least_recently_used(monkeypatch):
    """An entry read after every write survives the eviction of everything written with it.
    (diskcache evicts up to ten entries at a time: the limit holds a few dozen here.)"""
    limit = 2 * 1024 * 1024
    monkeypatch.setattr(compute, "CACHE_SIZE_BYTES", limit)
    counter = Counter()
    entry = len(compute.frame_to_text(frame_of(0, LARGE)))
    n = 3 * limit // entry
    get_frame(counter, 0, LARGE)
    for i in range(1, n):
        get_frame(counter, i, LARGE)
        assert_frame(get_frame(counter, 0, LARGE), 0, LARGE)  # a hit keeps it fresh
    assert counter.calls.count(0) == 1
    store = compute.cache()
    assert key_of(0, LARGE) in store and key_of(1, LARGE) not in store
    assert store.volume() <= limit + entry + 64 * 1024


def test_outputs_and_frames_share_the_limit(monkeypatch):
    monkeypatch.setattr(compute, "CACHE_SIZE_BYTES", 128 * 1024)
    counter = Counter()
    store = compute.cache()
    for i in range(60):
        assert_outputs(get_outputs(counter, i), i)
        assert_frame(get_frame(counter, i, LARGE // 4), i, LARGE // 4)
    assert store.volume() <= 128 * 1024 + 64 * 1024
    assert_outputs(get_outputs(counter, 0), 0)  # evicted long ago: recomputed, still right
    assert counter.calls[-1] == ("outputs", 0)


def test_size_limit_from_the_environment(tmp_path):
    """``PERF_CACHE_SIZE_BYTES`` (any number, e.g. 5e8) sets the limit of a new process."""
    code = ("from dashboard.jobs import compute; s = compute.cache(); "
            "print(compute.CACHE_SIZE_BYTES, s.size_limit, s.eviction_policy)")
    env = {**os.environ, "PERF_CACHE_DIR": str(tmp_path), "PERF_CACHE_SIZE_BYTES": "5e5"}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["500000", "500000", "least-recently-used"]


# --------------------------------------------------------------------------- deletion


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
    for _ in range(20):
        time.sleep(0.03)
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
    print("RESULT " + json.dumps({"requests": len(latencies), "errors": errors[:5],
                                  "wrong": wrong[:5], "stuck": stuck,
                                  "max_s": max(latencies, default=0.0), "misses_after": after}))
    sys.stdout.flush()
    os._exit(0)  # never wait for a stuck thread
''')
STALL_S = 10.0  # a request may wait on the cache this long at most (the pages answer in < 1 s)


def test_directory_deleted_repeatedly_under_concurrent_requests(tmp_path):
    """Eight threads (as gunicorn's gthread workers) keep reading and computing while the cache
    directory is deleted twenty times: no exception, every result right, no request stuck, and
    the cache works afterwards. In a subprocess, so a stuck thread cannot outlive the test.

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
    assert out["requests"] > 50
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


# --------------------------------------------------------------------------- corruption


def corrupt_database(store) -> None:
    with open(database(store), "r+b") as f:
        f.write(b"this is not a sqlite database" * 200)


def test_corrupt_database_still_gives_right_results(cache_dir):
    """The sqlite file overwritten while the app runs, then read by this process and by a new
    one (a restart, or another gunicorn worker): no exception, right results."""
    counter = Counter()
    assert_frame(get_frame(counter, 4), 4)
    assert_outputs(get_outputs(counter, 4), 4)
    corrupt_database(compute.cache())
    assert_frame(get_frame(counter, 4), 4)
    assert_outputs(get_outputs(counter, 4), 4)
    compute._cache.close()
    compute._cache = None  # a new process opens the same directory
    for _ in range(2):
        assert_frame(get_frame(counter, 4), 4)
        assert_outputs(get_outputs(counter, 4), 4)
        assert_frame(get_frame(counter, 5), 5)


def test_corrupt_database_is_replaced(cache_dir):
    """After the corruption the cache works again: a repeated call is served from it.

    Found: ``compute.cache()`` returns None for good ("file is not a database"): every request of
    every worker recomputes until someone deletes the directory by hand.
    """
    counter = Counter()
    get_frame(counter, 6)
    corrupt_database(compute.cache())
    compute._cache.close()
    compute._cache = None  # a restart
    for _ in range(3):
        assert_frame(get_frame(counter, 6), 6)
    assert len(counter.calls) <= 2, f"{len(counter.calls)} computations for 4 identical calls"


def value_files(store) -> list[Path]:
    return sorted(Path(store.directory).rglob("*.val"))


@pytest.mark.parametrize("damage", ["garbage", "truncated", "empty", "deleted"])
def test_corrupt_entry_file_recomputes(damage):
    counter = Counter()
    assert_frame(get_frame(counter, 7, LARGE), 7, LARGE)
    files = value_files(compute.cache())
    assert len(files) == 1
    if damage == "garbage":
        files[0].write_bytes(b"\xff\xfe\x00 not json" * 100)
    elif damage == "truncated":
        files[0].write_bytes(files[0].read_bytes()[:1000])
    elif damage == "empty":
        files[0].write_bytes(b"")
    else:
        files[0].unlink()
    assert_frame(get_frame(counter, 7, LARGE), 7, LARGE)
    assert counter.calls == [7, 7]
    assert_frame(get_frame(counter, 7, LARGE), 7, LARGE)
    assert counter.calls == [7, 7]  # the recomputed value replaced the damaged one


@pytest.mark.parametrize("garbage", ["{", "not json", '{"columns": 1}', b"\x00\x01", 12345,
                                     None, ["a"]])
def test_corrupt_entry_value_recomputes(garbage):
    counter = Counter()
    get_frame(counter, 8)
    get_outputs(counter, 8)
    store = compute.cache()
    for key in list(store.iterkeys()):
        store.set(key, garbage)
    assert_frame(get_frame(counter, 8), 8)
    if not (isinstance(garbage, str) and garbage.startswith("{") and len(garbage) > 1):
        assert_outputs(get_outputs(counter, 8), 8)
    assert 8 in counter.calls[2:]


def test_restart_keeps_the_cache(cache_dir):
    """A new process (server restart) serves what the previous one computed."""
    counter = Counter()
    get_frame(counter, 9, LARGE)
    get_outputs(counter, 9)
    compute._cache.close()
    compute._cache = None
    assert_frame(get_frame(counter, 9, LARGE), 9, LARGE)
    assert_outputs(get_outputs(counter, 9), 9)
    assert len(counter.calls) == 2


# --------------------------------------------------------------------------- version


def test_results_are_keyed_by_the_estimator_version(monkeypatch):
    counter = Counter()
    version = compute.ESTIMATOR_VERSION
    assert "+" in version  # package version + digest of the estimator's and dashboard's sources
    get_frame(counter, 10)
    get_outputs(counter, 10)
    get_frame(counter, 10)
    assert len(counter.calls) == 2
    monkeypatch.setattr(compute, "ESTIMATOR_VERSION", version + "-changed")
    assert_frame(get_frame(counter, 10), 10)
    assert_outputs(get_outputs(counter, 10), 10)
    assert len(counter.calls) == 4  # a changed estimator never serves old results
    monkeypatch.setattr(compute, "ESTIMATOR_VERSION", version)
    get_frame(counter, 10)
    get_outputs(counter, 10)
    assert len(counter.calls) == 4  # the old version's entries are still there (until evicted)


def test_real_scaling_frame_survives_a_corrupt_cache(monkeypatch):
    """The estimator's own scaling frame, through the same faults, equals an uncached one."""
    scn, errors = S.validate_scenario({**S.default_scenario(), "strategy": "1d",
                                       "gpus_min": 64, "gpus_max": 1024})
    assert errors == {}
    fresh = compute.scaling(scn)
    assert not fresh.empty
    corrupt_database(compute.cache())
    compute._cache.close()
    compute._cache = None
    pd.testing.assert_frame_equal(compute.scaling(scn), fresh, check_dtype=False)
    shutil.rmtree(compute.CACHE_DIR)
    pd.testing.assert_frame_equal(compute.scaling(scn), fresh, check_dtype=False)
    pd.testing.assert_frame_equal(compute.scaling(scn), fresh, check_dtype=False)


# --------------------------------------------------------------------------- the running app

APP_SCRIPT = textwrap.dedent('''
    """Start the app, delete its whole cache directory, then use it like a browser."""
    import json, os, re, shutil, sys, time
    from pathlib import Path
    sys.path.insert(0, sys.argv[1])
    import app
    from dashboard.controls.scenario import default_scenario

    client = app.server.test_client()
    html = client.get("/").get_data(as_text=True)
    config = re.search(r'<script id="_dash-config" type="application/json">(.*?)</script>',
                       html, re.S)
    end_id = json.loads(config.group(1)).get("end_id") if config else None
    deps = client.get("/_dash-dependencies").get_json()

    def outputs_of(spec):
        parts = spec[2:-2].split("...") if spec.startswith("..") else [spec]
        out = []
        for part in parts:
            cid, prop = part.rsplit(".", 1)
            out.append({"id": json.loads(cid) if cid.startswith("{") else cid,
                        "property": prop})
        return out

    def body(match, inputs, state):
        dep = next(d for d in deps if match in d["output"])
        return {"output": dep["output"], "outputs": outputs_of(dep["output"]),
                "inputs": [{**i, "value": inputs[i["id"]]} for i in dep["inputs"]],
                "state": [{**s, "value": state[s["id"]]} for s in dep["state"]],
                "changedPropIds": [f"{i['id']}.{i['property']}" for i in dep["inputs"]]}

    def update(data, query=""):
        q = f"?endId={end_id}" if end_id else ""
        return client.post("/_dash-update-component" + q + query, json=data)

    def sweep(clicks):
        """The HBM page's background sweep (2 x 2 systems), polled like the renderer does."""
        scn = dict(default_scenario(), strategy="1d", gpus=512)
        data = body("hbm-contour", {"hbm-run": clicks},
                    {"hbm-cap-min": 40, "hbm-cap-max": 400, "hbm-bw-min": 1,
                     "hbm-bw-max": 16, "hbm-steps": 2, "scenario": scn})
        first = update(data)
        if first.status_code != 200:
            return f"start: HTTP {first.status_code}"
        handle = first.get_json()
        if "response" in handle:
            return "done"
        for _ in range(120):
            time.sleep(0.25)
            res = update(data, f"&cacheKey={handle['cacheKey']}&job={handle['job']}")
            text = res.get_data(as_text=True)
            if res.status_code != 200:
                return f"poll: HTTP {res.status_code}"
            if '"response"' in text:
                return "done" if "hbm-contour" in text else "response without the figure"
        return "timeout"

    def scaling(hbm_gb):
        scn = dict(default_scenario(), strategy="1d", gpus_min=64, gpus_max=1024,
                   hbm_gb=hbm_gb)
        res = update(body("scaling-summary", {"scenario": scn, "scaling-threshold": 50,
                                              "scaling-breakdown-scale": "log"}, {}))
        return res.status_code, "Fastest" in res.get_data(as_text=True)

    out = {"before_sweep": sweep(1)}
    shutil.rmtree(os.environ["PERF_CACHE_DIR"])
    out["index"] = client.get("/").status_code
    out["layout"] = client.get("/_dash-layout").status_code
    out["scaling"] = [scaling(141.0), scaling(141.0), scaling(120.5)]
    out["results_dir"] = (Path(os.environ["PERF_CACHE_DIR"]) / "results").is_dir()
    out["after_sweep"] = [sweep(2), sweep(3)]
    print("RESULT " + json.dumps(out))
''')


@pytest.fixture(scope="module")
def app_after_deletion(tmp_path_factory) -> dict[str, Any]:
    """The app in a subprocess, its cache directory deleted after one background sweep."""
    work = tmp_path_factory.mktemp("app")
    script = work / "app_faults.py"
    script.write_text(APP_SCRIPT)
    env = {**os.environ, "PERF_CACHE_DIR": str(work / "cache")}
    env.pop("REDIS_URL", None)  # the default, one-host background manager
    proc = subprocess.run([sys.executable, str(script), str(ROOT)], cwd=work, env=env,
                          capture_output=True, text=True, timeout=300)
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
    assert line, f"exit {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    return json.loads(line.removeprefix("RESULT "))


def test_app_serves_after_its_cache_directory_is_deleted(app_after_deletion):
    out = app_after_deletion
    assert out["before_sweep"] == "done"
    assert out["index"] == 200 and out["layout"] == 200
    assert out["scaling"] == [[200, True]] * 3
    assert out["results_dir"]  # the results cache was re-created


def test_background_sweep_works_after_its_directory_is_deleted(app_after_deletion):
    """The background manager re-creates its diskcache directory: later sweeps complete. (A
    manager that kept the deleted directory — "unable to open database file" — reported every
    later sweep lost, and its poll answered HTTP 500, until the server restarted.)"""
    assert app_after_deletion["after_sweep"] == ["done", "done"]
