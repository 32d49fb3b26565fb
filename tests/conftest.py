"""Make the repository root importable (``import model``) however pytest is started."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = str(Path(__file__).resolve().parent.parent)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


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


@pytest.fixture
def tmp_cache(tmp_path, monkeypatch):
    """A fresh, private results cache (dashboard.jobs.compute) for one test; its directory."""
    from dashboard.jobs import compute  # imported lazily: the model tests never load the dashboard

    monkeypatch.setattr(compute, "CACHE_DIR", tmp_path / "cache")
    monkeypatch.setattr(compute, "_cache", None)
    monkeypatch.setattr(compute, "_down_until", 0.0, raising=False)  # no back-off left over
    yield tmp_path / "cache"
    if compute._cache is not None:
        compute._cache.close()


@pytest.fixture
def without_gemm_depth(monkeypatch):
    """The GEMMs' depth efficiency switched off (k0 = 0, model/physics/gemm.py), for tests of
    other terms; the search caches are emptied before and after, so no result priced without
    it outlives the test."""
    from model.engine.frontier import CACHE
    from model.engine.search import clear_shape_spaces
    from model.physics import gemm

    CACHE.clear()
    clear_shape_spaces()
    monkeypatch.setattr(gemm, "DEPTH_OVERHEAD_FP8", 0.0)
    yield
    CACHE.clear()
    clear_shape_spaces()
