"""Make the repository root importable (``import model``) however pytest is started."""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

import pytest
from hypothesis import settings

ROOT = str(Path(__file__).resolve().parent.parent)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

# The suite draws the same examples every run (a landing is never a lottery); new examples are
# explored on purpose with scripts/fuzz, which loads "explore" (docs/testing.md). A failure
# found there becomes a fix and, where it teaches something, an example of its own.
settings.register_profile("suite", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("TPERF_HYPOTHESIS", "suite"))


def pytest_setup_options():
    """Chrome options for dash.testing's browser fixtures (``dash_duo``): headless Chromium
    without a sandbox (root), no network chatter, a fresh profile and a large window for
    full-page screenshots. Imported lazily: the non-browser tests never load selenium."""
    import atexit
    import shutil
    import tempfile

    from selenium.webdriver.chrome.options import Options

    profile = tempfile.mkdtemp(prefix="dash-chrome-")
    atexit.register(shutil.rmtree, profile, ignore_errors=True)
    options = Options()
    for arg in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--no-first-run", "--window-size=1600,1300",
                f"--user-data-dir={profile}"):
        options.add_argument(arg)
    return options


@pytest.fixture(scope="session", autouse=True)
def _no_process_outlives_the_session():
    """Set up first, torn down last: every background job this session started is killed and
    reaped (dashboard.jobs.procs), then any other process the session left behind (a server,
    a job of a server) is ended — SIGTERM, SIGKILL 3 s later — so pytest never waits on a
    child (issue 29: a deadlocked job kept ``./scripts/test`` from ever exiting)."""
    yield
    import psutil

    procs = sys.modules.get("dashboard.jobs.procs")
    if procs is not None:
        procs.end_all()
    left = [p for p in psutil.Process().children(recursive=True) if not _is_resource_tracker(p)]
    for proc in left:
        with contextlib.suppress(psutil.Error):
            proc.terminate()
    _, alive = psutil.wait_procs(left, timeout=3)
    for proc in alive:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    psutil.wait_procs(alive, timeout=3)


def _is_resource_tracker(proc) -> bool:
    """multiprocessing's resource tracker: it ignores SIGTERM and ends with this process."""
    try:
        return any("multiprocessing.resource_tracker" in part for part in proc.cmdline())
    except Exception:  # noqa: BLE001 - gone already
        return True


@pytest.fixture
def tmp_cache(tmp_path, monkeypatch):
    """A fresh, private results cache (dashboard.jobs.compute) for one test; its directory."""
    from dashboard.jobs import compute  # imported lazily: the model tests never load the dashboard

    monkeypatch.setattr(compute, "CACHE_DIR", tmp_path / "cache")
    monkeypatch.setattr(compute.HANDLE, "store", None)
    monkeypatch.setattr(compute.HANDLE, "down_until", 0.0)  # no back-off left over
    yield tmp_path / "cache"
    if compute.HANDLE.store is not None:
        compute.HANDLE.store.close()


@pytest.fixture
def without_gemm_depth(monkeypatch):
    """The GEMMs' depth efficiency switched off (k0 = 0, model/physics/gemm.py), for tests of
    other terms; the search caches are emptied before and after, so no result priced without
    it outlives the test."""
    from model.engine.frontier import CACHE
    from model.engine.variant import clear_shape_spaces
    from model.physics import gemm

    CACHE.clear()
    clear_shape_spaces()
    monkeypatch.setattr(gemm, "DEPTH_OVERHEAD_FP8", 0.0)
    yield
    CACHE.clear()
    clear_shape_spaces()


@pytest.fixture(scope="session")
def _calibration_curves() -> dict[str, list]:
    """The calibration's curves (model/validation/calibrate.py ``Curve.of``) of every dense and
    every MoE run, in the order of ``time_cases``: each run's iteration time at every grid value
    of its efficiency, computed from the code as it is now (nothing stored is read). The runs are
    independent, so they are spread over the machine's cores (up to 4) in fresh processes
    ("spawn": none inherits this session's patches or caches); the same numbers as a loop here
    (tests/test_calibration.py checks a few)."""
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    from model.validation import time_cases
    from model.validation.calibrate import Curve

    cases = {"dense": time_cases(), "moe": time_cases(sets=("moe",))}
    every = cases["dense"] + cases["moe"]
    workers = min(4, os.cpu_count() or 1)
    if workers < 2:
        curves = [Curve.of(c) for c in every]
    else:
        with ProcessPoolExecutor(workers, mp_context=get_context("spawn")) as pool:
            curves = list(pool.map(Curve.of, every, chunksize=4))
    return {"dense": curves[:len(cases["dense"])], "moe": curves[len(cases["dense"]):]}


@pytest.fixture(scope="session")
def calibration_curves(_calibration_curves) -> list:
    """The dense runs' calibration curves (``time_cases()``), computed once per session for
    every test that re-fits the stacks (half a minute on one core, with the MoE runs')."""
    return _calibration_curves["dense"]


@pytest.fixture(scope="session")
def moe_calibration_curves(_calibration_curves) -> list:
    """The MoE runs' calibration curves (``time_cases(sets=("moe",))``), once per session."""
    return _calibration_curves["moe"]
