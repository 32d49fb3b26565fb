"""Issue 26, finding 1: a corrupt or read-only cache must not take the site down. The background
job store was opened when ``app`` was imported, with no recovery: a few random blocks of
``cache/background/cache.db`` overwritten, or the cache directory made read-only, and the next
worker failed to boot (gunicorn's master exited), again at every restart.

Unit tests of :class:`dashboard.jobs.stores.LazyStore`, then real gunicorn on loopback started on a
damaged cache: it serves pages, runs a background sweep (the job store at work: its records
written by the job's process, read by the polls), and logs the recovery once.
"""

from __future__ import annotations

import json
import logging
import os
import random
import sqlite3
import stat
import time
from pathlib import Path

import diskcache
import pytest
from test_server import callback_body, gunicorn, http

from dashboard.controls.scenario import default_scenario
from dashboard.jobs import background, stores


def damage(database: Path, blocks: int = 6, seed: int = 26) -> None:
    """Overwrite ``blocks`` random 4 kB blocks after the header with random bytes."""
    rng = random.Random(seed)
    size = database.stat().st_size
    with open(database, "r+b") as f:
        for _ in range(blocks):
            f.seek(rng.randrange(4096, max(size - 4096, 4097)))
            f.write(rng.randbytes(4096))


def filled_store(directory: Path, entries: int = 400) -> Path:
    """A job store with some records (several pages of SQLite), closed."""
    with diskcache.Cache(str(directory)) as cache:
        for i in range(entries):
            cache.set(f"job-{i}", {"progress": i, "pad": "x" * 300})
    return directory / "cache.db"


@pytest.fixture(autouse=True)
def fresh_once():
    stores._said.clear()
    yield
    stores._said.clear()


def test_a_corrupt_store_is_moved_aside_and_recreated_logged_once(tmp_path, caplog):
    home = tmp_path / "background"
    damage(filled_store(home))
    with pytest.raises(sqlite3.DatabaseError):  # what killed every worker's boot
        stores.check_integrity(sqlite3.connect(home / "cache.db"))
    store = stores.LazyStore(home)
    assert not list(tmp_path.glob("background.corrupt-*"))  # nothing opened yet (lazy)
    with caplog.at_level(logging.WARNING, logger="dashboard.jobs.stores"):
        store.set("k", "v")
        assert store.get("k") == "v"
        assert store.get("job-3") is None  # a new store
    assert len(list(tmp_path.glob("background.corrupt-*"))) == 1
    lines = [r for r in caplog.records if "moved aside" in r.getMessage()]
    assert len(lines) == 1 and lines[0].exc_info is None


def test_corruption_found_while_running_recovers_on_the_failing_call(tmp_path, caplog):
    home = tmp_path / "background"
    store = stores.LazyStore(home)
    store.set("before", 1)
    stores.close_quietly(store._cache)
    (home / "cache.db").write_bytes(b"this is not a sqlite database" * 200)
    with caplog.at_level(logging.WARNING, logger="dashboard.jobs.stores"):
        assert store.get("before") is None  # recovered inside the call, no exception
        store.set("after", 2)
    assert store.get("after") == 2
    assert sum("moved aside" in r.getMessage() for r in caplog.records) == 1


def test_only_the_latest_corrupt_copy_is_kept(tmp_path):
    home = tmp_path / "results"
    for _ in range(3):
        home.mkdir()
        (home / "cache.db").write_bytes(b"junk")
        stores.move_aside(home, sqlite3.DatabaseError("file is not a database"))
        time.sleep(0.01)
    assert len(list(tmp_path.glob("results.corrupt-*"))) == 1


def test_a_store_that_cannot_be_written_is_run_without_logged_once(tmp_path, caplog,
                                                                   monkeypatch):
    """A path that cannot be a directory (a file is in its way: refused to root as well):
    the store moves to the host's temporary directory, one line logged."""
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    (tmp_path / "cache").write_text("a file, not a directory")
    store = stores.LazyStore(tmp_path / "cache" / "background")
    with caplog.at_level(logging.WARNING, logger="dashboard.jobs.stores"):
        for i in range(3):
            store.set(f"k{i}", i)
        assert store.get("k2") == 2
    assert Path(store.directory).parent == tmp_path / "tmp"
    assert sum("cannot be written" in r.getMessage() for r in caplog.records) == 1


def test_the_job_manager_opens_nothing_until_used(tmp_path):
    """Importing the app creates the manager: it must not touch the disk then."""
    home = tmp_path / "background"
    jobs = background.DiskcacheJobs(home)
    assert not home.exists()
    assert jobs.get_or_create_signing_secret(lambda: b"s") == b"s"
    assert (home / "cache.db").is_file()


# --------------------------------------------------------------------------- real gunicorn


def hbm_sweep(url: str, clicks: int = 1) -> str:
    """The HBM page's background sweep (2 × 2 systems) over HTTP, polled as the renderer
    does: "done", or what went wrong."""
    deps = json.loads(http(url + "/_dash-dependencies")[2])
    scn = dict(default_scenario(), strategy="1d", gpus=512)
    dep = next(d for d in deps if "hbm-contour" in d["output"])
    body = callback_body(deps, "hbm-contour", {"hbm-run": clicks})
    body["state"] = [{**s, "value": {"hbm-cap-min": 40, "hbm-cap-max": 400, "hbm-bw-min": 1,
                                     "hbm-bw-max": 16, "hbm-steps": 2, "scenario": scn}[s["id"]]}
                     for s in dep["state"]]
    data = json.dumps(body).encode()
    status, _, raw = http(url + "/_dash-update-component", data)
    if status != 200:
        return f"start: HTTP {status}"
    job = last = json.loads(raw)
    deadline = time.monotonic() + 60
    while "response" not in last and time.monotonic() < deadline:
        time.sleep(0.25)
        status, _, raw = http(url + f"/_dash-update-component?cacheKey={job['cacheKey']}"
                                    f"&job={job['job']}", data)
        if status != 200:
            return f"poll: HTTP {status}"
        last = json.loads(raw) if raw.strip() else {}  # empty or progress while it runs
    text = json.dumps(last)
    return "done" if "hbm-contour" in text else f"no figure: {text[:300]}"


def test_finding1_gunicorn_boots_and_serves_on_a_corrupt_cache(tmp_path):
    cache = tmp_path / "cache"
    damage(filled_store(cache / "background"))
    damage(filled_store(cache / "results"))
    server = gunicorn(cache, tmp_path / "gunicorn.log", "-w", "1")
    try:
        assert http(server.url + "/")[0] == 200
        assert hbm_sweep(server.url) == "done"
        log = server.log.read_text()
    finally:
        server.stop()
    assert "Worker failed to boot" not in log
    assert log.count("background is corrupt") == 1, log[-3000:]
    assert list(cache.glob("background.corrupt-*"))
    assert "Traceback" not in log


def test_finding1_gunicorn_boots_and_serves_on_a_read_only_cache(tmp_path):
    """The cache directory read-only (its files too). Permission bits do not bind root, so
    as root the server runs as user nobody (setpriv), as a service would."""
    cache = tmp_path / "cache"
    filled_store(cache / "background")
    filled_store(cache / "results")
    for path in [*cache.rglob("*"), cache]:
        path.chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH | (
            stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH if path.is_dir() else 0))
    tmp_path.chmod(0o755)
    log_path = tmp_path / "logs" / "gunicorn.log"
    log_path.parent.mkdir(mode=0o777)
    prefix = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] \
        if os.getuid() == 0 else []
    server = gunicorn(cache, log_path, "-w", "1", runner=prefix)
    try:
        assert http(server.url + "/")[0] == 200
        assert hbm_sweep(server.url) == "done"
        log = server.log.read_text()
    finally:
        server.stop()
        for path in [cache, *cache.rglob("*")]:
            path.chmod(0o755)
    assert "Worker failed to boot" not in log
    assert log.count("background cannot be written") == 1, log[-3000:]
    assert "Traceback" not in log
