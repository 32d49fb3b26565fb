"""Issue 29, findings 4, 6 and 10: the job store (``DiskcacheJobs`` on
:class:`dashboard.jobs.stores.LazyStore`) when its directory cannot be written, is deleted while
the app runs, or its disk is full.

* 4: the fallback for an unwritable cache was ``$TMPDIR/perf-background-<uid>-<hash>``, used even
  when another user had created it first (a planted directory ran code as the app's user): now
  a private ``mkdtemp`` directory (0700) of the process.
* 6: deleting the cache directory while running left the web workers on different job
  databases (one kept the deleted file open): every process now re-opens on an inode change.
* 10: with the disk full every job failed ("database or disk is full"): the documented
  fallback was skipped inside ``transact``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import stat
import tempfile
from pathlib import Path

import diskcache
import pytest
from jobfns import quick_job
from test_server import until

from dashboard.jobs import background, procs, stores


@pytest.fixture(autouse=True)
def fresh_once():
    stores._said.clear()
    yield
    stores._said.clear()
    procs.end_all()


def _old_fallback(home: Path) -> Path:
    """Where the old code put the store of an unwritable ``home`` (finding 4's path)."""
    tag = hashlib.sha256(str(home.resolve()).encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"perf-{home.name}-{os.getuid()}-{tag}"


def test_finding4_a_planted_fallback_directory_is_never_used(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", None)
    (tmp_path / "cache").write_text("a file, not a directory")  # the cache cannot be written
    home = tmp_path / "cache" / "background"
    planted = _old_fallback(home)
    planted.mkdir(mode=0o777)
    os.chmod(planted, 0o777)  # as another user would leave it
    with diskcache.Cache(str(planted)) as trap:
        trap.set("planted", "a record the attacker wrote")
    store = stores.LazyStore(home)
    store.set("mine", 1)
    used = Path(store.directory)
    assert used != planted and used.parent == tmp_path / "tmp"
    assert stat.S_IMODE(used.stat().st_mode) == 0o700 and used.stat().st_uid == os.getuid()
    assert store.get("planted") is None
    with diskcache.Cache(str(planted)) as trap:
        assert trap.get("mine") is None  # nothing of ours went there either


def test_finding4_a_job_writes_where_its_worker_reads_in_the_private_directory(tmp_path,
                                                                               monkeypatch):
    """The private directory is the process's: its jobs are handed that place, not the
    unwritable one (where each would make its own)."""
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", None)
    (tmp_path / "cache").write_text("not a directory")
    jobs = background.DiskcacheJobs(tmp_path / "cache" / "background")
    pid = jobs.call_job_fn("k", quick_job, jobs.handle, {})
    assert pid > 0
    assert until(lambda: jobs.handle.get("k"), "the job's result", timeout=30)[0] == "done"


def test_finding6_two_workers_agree_after_the_directory_is_deleted(tmp_path):
    """Two web workers (two managers on one directory) both open; the directory deleted; one
    re-creates it. The other re-opens the new database instead of going on with the deleted
    file: each reads what the other writes, so the per-host job cap counts every job."""
    home = tmp_path / "cache" / "background"
    first, second = background.DiskcacheJobs(home), background.DiskcacheJobs(home)
    first.handle.set(background.RUNNING, [])
    assert second.handle.get(background.RUNNING) == []
    shutil.rmtree(tmp_path / "cache")
    first.handle.set("after", "from the first worker")  # re-created by the first
    assert second.handle.get("after") == "from the first worker"
    second.handle.set("back", "from the second worker")
    assert first.handle.get("back") == "from the second worker"
    # the signing secret survives (each worker restores its own into the new database)
    assert first.get_or_create_signing_secret(lambda: b"a") == \
        second.get_or_create_signing_secret(lambda: b"b")


def test_finding6_a_replaced_database_file_is_reopened(tmp_path):
    """Not deleted but replaced by another file at the same path (a restore, another
    process's re-creation): a new inode, re-opened."""
    home = tmp_path / "background"
    store = stores.LazyStore(home)
    store.set("old", 1)
    replacement = tmp_path / "other"
    with diskcache.Cache(str(replacement)) as other:
        other.set("new", 2)
    for name in os.listdir(home):
        os.unlink(home / name)
    for name in os.listdir(replacement):
        shutil.copy(replacement / name, home / name)
    assert store.get("new") == 2 and store.get("old") is None


def _full_at(directory: Path, monkeypatch) -> None:
    """Every write to the store in ``directory`` fails as SQLite does on a full disk."""
    real_set = diskcache.Cache.set

    def set_(self, key, value, *args, **kwargs):
        if Path(self.directory) == directory:
            raise sqlite3.OperationalError("database or disk is full")
        return real_set(self, key, value, *args, **kwargs)
    monkeypatch.setattr(diskcache.Cache, "set", set_)


def test_finding10_a_full_disk_inside_a_transaction_falls_back(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", None)
    home = tmp_path / "cache" / "background"
    jobs = background.DiskcacheJobs(home)
    jobs.handle.set("before", 1)  # the store was fine
    _full_at(home, monkeypatch)
    pid = jobs.call_job_fn("k", quick_job, jobs.handle, {})  # reserves in a transaction
    assert pid > 0, jobs.get_result("k", pid)
    assert Path(jobs.handle.directory).parent == tmp_path / "tmp"
    assert until(lambda: jobs.handle.get("k"), "the job's result", timeout=30)[0] == "done"
    assert jobs.handle.get(background.RUNNING) in ([pid], [])


def test_finding10_a_transaction_is_not_half_retried_elsewhere(tmp_path, monkeypatch):
    """Inside a transaction a failing write is not retried on the fallback store (it would
    land outside the transaction): the transaction rolls back and ``atomically`` runs the
    whole of it again there."""
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", None)
    home = tmp_path / "background"
    store = stores.LazyStore(home)
    store.set("x", 0)
    _full_at(home, monkeypatch)
    runs = []

    def both() -> str:
        runs.append(Path(store.directory))
        store.set("a", 1)
        store.set("b", 2)
        return "ok"
    assert store.atomically(both) == "ok"
    assert runs[0] == home and runs[1] != home and len(runs) == 2
    assert (store.get("a"), store.get("b")) == (1, 2)
