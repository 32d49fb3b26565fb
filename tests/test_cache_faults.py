"""Faults of the dashboard's caches: size limit, deletion, corruption, estimator version.

The results cache (:mod:`dashboard.jobs.compute`, diskcache under ``$PERF_CACHE_DIR/results``) must
stay within its size limit by evicting the least recently used entries; a deleted or corrupted cache
directory, database or entry must cost only a recomputation (never an exception, never a wrong
result) and the cache must work again afterwards; results are keyed by the estimator's version.
Deletion: tests/test_cache_deletion.py; the background-callback cache deleted while the app
runs: tests/test_cache_app.py (both use this module's stand-ins and private cache).

Every test uses its own temporary cache directory (never the repository's ``cache/``) and cheap
stand-in computations that count their calls: a call counted is a cache miss.
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

_TMP_CACHE = tempfile.mkdtemp(prefix="perf-cache-faults-")
atexit.register(shutil.rmtree, _TMP_CACHE, ignore_errors=True)
if "dashboard.settings" not in sys.modules:  # never the repository's cache/
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
    monkeypatch.setattr(compute.HANDLE, "store", None)
    monkeypatch.setattr(compute.HANDLE, "down_until", 0.0)  # no back-off left over
    yield tmp_path / "cache"
    if compute.HANDLE.store is not None:
        compute.HANDLE.store.close()


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
    compute.HANDLE.store.close()
    compute.HANDLE.store = None  # a new process opens the same directory
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
    compute.HANDLE.store.close()
    compute.HANDLE.store = None  # a restart
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
    compute.HANDLE.store.close()
    compute.HANDLE.store = None
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
    compute.HANDLE.store.close()
    compute.HANDLE.store = None
    pd.testing.assert_frame_equal(compute.scaling(scn), fresh, check_dtype=False)
    shutil.rmtree(compute.CACHE_DIR)
    pd.testing.assert_frame_equal(compute.scaling(scn), fresh, check_dtype=False)
    pd.testing.assert_frame_equal(compute.scaling(scn), fresh, check_dtype=False)


