"""Requests a hostile or buggy client can send to ``/_dash-update-component``, through the real
Flask app (``app.server.test_client()``), shaped exactly as the browser's renderer shapes them
(``tests/callbacks.py`` reads ``/_dash-dependencies``).

The promise (issue 9, "Never trust the browser"): every callback validates what the client sends
on the server; an invalid scenario store is an inline error, a malformed request a 400 with one
log line; nothing loops, nothing reads a file outside the repository, nothing exhausts memory,
and the export renders only figures the server builds. One test per finding of the probe (its
docstring says which); findings 3 (the export), 4 (the memory budget) and 8 (hypothesis
throwing hostile stores and values at every callback) are in tests/test_hostile_export.py,
test_hostile_budget.py and test_hostile_fuzz.py, which share this module's app and helpers.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import math
import os
import re
import shutil
import signal
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

_TMP_CACHE = tempfile.mkdtemp(prefix="perf-hostile-test-")
atexit.register(shutil.rmtree, _TMP_CACHE, ignore_errors=True)
if "dashboard.settings" not in sys.modules:  # never the repository's cache/
    os.environ["PERF_CACHE_DIR"] = _TMP_CACHE

import pytest  # noqa: E402
from callbacks import Callbacks  # noqa: E402 - tests/ is on sys.path
from hypothesis import HealthCheck, settings  # noqa: E402

import app as dash_app  # noqa: E402
from dashboard.controls import scenario as S  # noqa: E402
from dashboard.controls.panel import CONTROL_KEYS  # noqa: E402
from dashboard.jobs import compute  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
FEW = settings(max_examples=40, deadline=None,
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                      HealthCheck.data_too_large])
ANSWER_S = 15.0  # every request here answers within this (a normal one: well under a second)
OUTSIDE = Path(tempfile.mkdtemp(prefix="perf-outside-"))  # files an attacker would target
atexit.register(shutil.rmtree, OUTSIDE, ignore_errors=True)
LEAK = "LEAKED-VALUE-42"
(OUTSIDE / "leak.json").write_text(json.dumps({LEAK: LEAK, "layers": LEAK}))
shutil.copy(ROOT / "model" / "data" / "workloads" / "gpt3-1t.json", OUTSIDE / "model.json")
shutil.copy(ROOT / "model" / "data" / "systems" / "h200.json", OUTSIDE / "system.json")
PATHS = [str(OUTSIDE / "leak.json"), str(OUTSIDE / "model.json"), str(OUTSIDE / "system.json"),
         str(OUTSIDE / "leak"), str(OUTSIDE / "no-such-file.json"), "../../etc/passwd",
         "/etc/passwd", "/tmp/x.json", "../" * 12 + str(OUTSIDE / "leak")[1:],
         "../../../../../../" + str(OUTSIDE / "model")[1:], "gpt3-1t.json", "./gpt3-1t",
         "workloads/gpt3-1t", "~/x", "C:\\x.json", "file:///etc/passwd", "\x00", ""]


# --------------------------------------------------------------------------- guards


class Reads:
    """Files opened outside the repository, the interpreter and the test's cache while
    ``watching`` (a ``sys.addaudithook`` hook: it sees every ``open()``, Python's and C's)."""

    def __init__(self) -> None:
        self.watching = False
        self.outside: list[str] = []
        from model.validation import reference_dir

        allowed = {ROOT, Path(sys.prefix), Path(sys.base_prefix), Path(sys.exec_prefix),
                   Path(_TMP_CACHE), Path(compute.CACHE_DIR), Path("/dev"), Path("/proc"),
                   Path("/sys"), Path("/usr"), Path("/etc/ssl"),
                   # the published runs the Validation page reads: a folder the server chose
                   # (beside the repository until it moves into it), never one a request names
                   reference_dir()}
        self.allowed = tuple({str(p.resolve()) for p in allowed} | {str(p) for p in allowed})
        sys.addaudithook(self.hook)

    def hook(self, event: str, args: tuple) -> None:
        if not self.watching or event != "open" or not args or isinstance(args[0], int):
            return
        path = os.fsdecode(args[0]) if isinstance(args[0], (str, bytes)) else str(args[0])
        full = os.path.abspath(path)
        if not any(full == a or full.startswith(a + os.sep) for a in self.allowed):
            self.outside.append(full)

    @contextlib.contextmanager
    def watch(self) -> Iterator[list[str]]:
        self.outside, self.watching = [], True
        try:
            yield self.outside
        finally:
            self.watching = False


READS = Reads()


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """TimeoutError in this (main) thread once ``seconds`` have passed: a request that loops
    fails the test instead of hanging it."""
    def expire(*_: Any) -> None:
        raise TimeoutError(f"no answer within {seconds:g} s")
    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture(scope="module")
def cbs() -> Callbacks:
    return Callbacks.of_client(dash_app.server.test_client())


def defaults(scn: dict[str, Any] | None = None) -> dict[str, Any]:
    """A plausible value for every component id a callback reads (as a page would send)."""
    scn = scn or S.default_scenario()
    values: dict[str, Any] = {f"ctl-{k}": scn[k] for k in CONTROL_KEYS}
    values.update({
        "scenario": scn, "ctl-presentation": [], "hydrated": True,
        "applied-presets": {"model": scn["model"], "system": scn["system"]},
        "url": "", "reset-model": 1, "reset-system": 1, "scenario-upload": None,
        "scenario-download-btn": 1, "design-top": [], "validation-load": True,
        "validation-presentation": None, "hbm-run": 1, "hbm-cancel": None, "hbm-cap-min": 40,
        "hbm-cap-max": 400, "hbm-bw-min": 1, "hbm-bw-max": 16, "hbm-steps": 2,
        "export": [1, None, None], "graph": {"data": [], "layout": {}},
        "_pages_location": "/", "scaling-threshold": 50, "scaling-breakdown-scale": "log",
        "systems-pick": ["a100", "h100", "edited"], "systems-domains": [0],
        "validation-cv-presentation": None,
    })
    values["applied-presets"] = {"model": scn["model"], "system": scn["system"],
                                 "stack": scn["stack"]}
    return values


KALEIDO_TMP = re.compile(re.escape(tempfile.gettempdir()) + r"/tmp[a-z0-9_]{8}(/index\.html)?$")


def send(cbs: Callbacks, dep: dict, values: dict[str, Any], **kw: Any) -> tuple[int, str]:
    """Post one request under the time limit and the read audit; (status, text). (kaleido
    writes its page to a new temporary directory, ``tempfile.mkdtemp()``, and reads it.)"""
    match = {"name": "scaling-time"} if "MATCH" in dep["output"] else None
    every = {"fmt": ["png", "html", "csv"]}
    body = cbs.body(dep, values, match=match, every=every, **kw)
    with READS.watch() as outside, time_limit(ANSWER_S):
        status, text = cbs.post(body, timeout_s=ANSWER_S)
    outside = [p for p in outside if not KALEIDO_TMP.match(p)]
    assert outside == [], f"read outside the repository: {outside[:3]}"
    assert LEAK not in text
    assert "no such file" not in text.lower()
    return status, text


def scenario_callbacks(cbs: Callbacks, background: bool | None = None) -> list[dict]:
    deps = cbs.taking("scenario")
    if background is not None:
        deps = [d for d in deps if bool(d.get("background")) == background]
    return deps


def ids(deps: list[dict]) -> list[str]:
    return [d["output"][:60] for d in deps]


# --------------------------------------------------------------------------- finding 1


@pytest.mark.parametrize("over", [{"nvs": -1}, {"gpus_min": math.inf, "gpus_max": math.inf},
                                  {"nvs": 0}, {"nvs": math.nan}, {"gpus_max": -math.inf}],
                         ids=["nvs-1", "gpus-inf", "nvs0", "nvs-nan", "gpus-max-minus-inf"])
def test_finding1_a_looping_scenario_is_an_inline_error_at_once(cbs, over):
    """Finding 1 (critical): ``"nvs": -1`` or infinite GPU counts made ``gpu_counts`` loop
    forever in the scaling callback (a worker pinned per request). Now: an inline error, at
    once, naming the key."""
    dep = cbs.find("scaling-summary.children")
    status, text = send(cbs, dep, defaults({**S.default_scenario(), **over}))
    assert status == 200, text[:500]
    shown = json.loads(text)["response"]["scaling-infeasible"]["children"]
    assert "scenario" in shown.lower() and any(k in shown for k in over), shown


@pytest.mark.parametrize("nvs,lo,hi", [(-1, 4, 16), (0, 4, 16), (3, 1, math.inf),
                                       (8, math.inf, math.inf), (math.nan, 1, 8),
                                       (-7, -math.inf, math.inf), ("8", 1, 8), (8, 1, 10**30)])
def test_gpu_counts_ends_for_any_input(nvs, lo, hi):
    """``gpu_counts`` itself returns for anything (a bounded loop), not only for valid input."""
    with time_limit(2):
        try:
            counts = S.gpu_counts({"nvs": nvs, "gpus_min": lo, "gpus_max": hi})
        except S.ModelError:
            return
    assert len(counts) <= 24 and all(isinstance(n, int) and n >= 1 for n in counts)


# --------------------------------------------------------------------------- finding 2


@pytest.mark.parametrize("key", ["model", "system"])
@pytest.mark.parametrize("path", PATHS)
def test_finding2_scenario_paths_are_never_read(cbs, key, path):
    """Finding 2 (high): ``scenario.model``/``system`` went to ``load_model``/``load_system`` as
    given: an absolute path or ``../`` was read and its values echoed ("got 'LEAKED-VALUE-42'"),
    and "no such file" told which paths exist. Now only preset names are loaded; anything else
    is an inline error that says nothing about the file system."""
    for output in ("scaling-summary.children", "design-heatmap", "validation-summary"):
        status, text = send(cbs, cbs.find(output), defaults({**S.default_scenario(),
                                                             key: path}))
        assert status in (200, 204), text[:300]
        if status == 200:
            assert "scenario" in text.lower() and "preset" in text.lower(), text[:300]


@pytest.mark.parametrize("key", ["model", "system"])
def test_finding2_existing_and_missing_paths_answer_alike(cbs, key):
    """The message for a path that exists equals the one for a path that does not."""
    dep = cbs.find("scaling-summary.children")

    def shown(path: str) -> str:
        status, text = send(cbs, dep, defaults({**S.default_scenario(), key: path}))
        assert status == 200
        return json.loads(text)["response"]["scaling-infeasible"]["children"].replace(path, "P")
    assert shown(str(OUTSIDE / f"{key}.json")) == shown(str(OUTSIDE / "none" / f"{key}.json"))


@pytest.mark.parametrize("control", ["ctl-model", "ctl-system"])
@pytest.mark.parametrize("path", PATHS[:6])
def test_finding2_preset_controls_load_presets_only(cbs, control, path):
    """The preset dropdowns' values (``apply_preset``) reach the loader too: only a preset name
    loads anything."""
    (dep,) = [d for d in cbs.taking("reset-model")]  # apply_preset
    trigger = [i["id"] for i in dep["inputs"]].index(control)
    values = {**defaults(), control: path}
    status, text = send(cbs, dep, values, changed=trigger)
    assert status in (200, 204), text[:300]
    if status == 200:
        assert "preset" in text.lower() and '"layers"' not in text


# --------------------------------------------------------------------------- finding 6


def test_finding6_nothing_fits_up_to_ten_million_gpus_is_explained(cbs):
    """Finding 6 (medium): ``hbm_gb=1, gpus_max=10000000`` (valid) made the "nothing fits"
    explanation search 16,777,216 GPUs, over the estimator's limit: a ModelError escaped, 500,
    and the page kept stale views. Now: 200 and an explanation."""
    scn = {**S.default_scenario(), "hbm_gb": 1, "gpus_max": 10_000_000}
    assert S.validate_scenario(scn)[1] == {}
    status, text = send(cbs, cbs.find("scaling-summary.children"), defaults(scn))
    assert status == 200, text[:500]
    shown = json.loads(text)["response"]["scaling-infeasible"]["children"]
    assert shown and "fits" in shown, shown


# --------------------------------------------------------------------------- finding 7


MALFORMED = [b"not json", b"{}", b"[]", b"null", b'{"output": 1}', b'{"output": "x.y"}',
             b'{"output": "root.className"}',
             b'{"output": "root.className", "outputs": 5, "inputs": 5}',
             b'{"output": "root.className", "outputs": {"id": "root", "property": "className"},'
             b' "inputs": [5], "changedPropIds": []}',
             b'{"output": "root.className", "outputs": {"id": "root", "property": "className"},'
             b' "inputs": [{"id": "scenario", "property": "data", "value": 1}, 2],'
             b' "changedPropIds": []}',
             b'{"output": "root.className", "outputs": [], "inputs": [], "state": {},'
             b' "changedPropIds": 7}']


@pytest.mark.parametrize("body", MALFORMED, ids=range(len(MALFORMED)))
def test_finding7_malformed_callback_bodies_are_400_with_one_log_line(cbs, body, caplog):
    """Finding 7: malformed bodies gave 500 and a full traceback in the log per request."""
    caplog.set_level(logging.INFO)
    with READS.watch(), time_limit(ANSWER_S):
        status, text = cbs.post(body)
    assert status == 400, text[:300]
    loud = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(loud) <= 1 and all(r.exc_info is None for r in loud), loud
    assert "Traceback" not in caplog.text


def test_finding7_component_suite_traversal_is_404():
    """Finding 7: ``/_dash-component-suites/dash/../../../../etc/passwd`` gave 500."""
    client = dash_app.server.test_client()
    for path in ("/_dash-component-suites/dash/../../../../etc/passwd",
                 "/_dash-component-suites/dash/%2e%2e/%2e%2e/etc/passwd",
                 "/_dash-component-suites/no-such-package/x.js",
                 "/_dash-component-suites/dash/no-such-file.js"):
        res = client.get(path)
        assert res.status_code == 404, (path, res.status_code)
        assert res.headers["X-Content-Type-Options"] == "nosniff"


def test_finding7_csv_cells_are_escaped_against_formulas():
    """Finding 7: CSV cells starting with ``=`` were written as they were (a spreadsheet runs
    them). Now every text cell starting with = + - @ tab or CR is quoted with a leading '."""
    import csv
    import io

    from dashboard.server import export

    names = ["=HYPERLINK(\"http://x\")", "+1+1", "-2+3", "@SUM(A1)", "\tx", "\rx", "plain"]
    fig = {"data": [{"type": "scatter", "x": [1, -2.5], "y": [3, 4], "name": n} for n in names]}
    text, _ = export.render(fig, "csv")
    rows = list(csv.DictReader(io.StringIO(text)))
    traces = [r["trace"] for r in rows]
    for n in names[:-1]:
        assert "'" + n in traces, (n, set(traces))
    assert "plain" in traces
    assert {float(r["x"]) for r in rows} == {1.0, -2.5}  # numbers stay numbers


def test_finding7_cached_frames_are_lossless(tmp_cache):
    """Finding 7: frames were cached with 15 significant digits (fresh and cached results
    differed by up to 9e-13 relative). Now a cached frame equals the fresh one exactly."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(7)
    fresh = pd.DataFrame({"x": rng.random(500) * 10.0 ** rng.integers(-300, 300, 500),
                          "y": rng.standard_normal(500) / 3, "n": rng.integers(0, 2**53, 500),
                          "s": [f"row {i}" for i in range(500)]})
    fresh.loc[3, "y"] = np.nan
    fresh.loc[4, "x"] = 5e-324
    first = compute.cached_frame("lossless", {"v": 1}, lambda: fresh)
    cached = compute.cached_frame("lossless", {"v": 1}, lambda: pytest.fail("recomputed"))
    pd.testing.assert_frame_equal(first, fresh, check_exact=True)
    pd.testing.assert_frame_equal(cached, fresh, check_exact=True)
    scn = S.validate_scenario({**S.default_scenario(), "strategy": "1d"})[0]
    real = compute.scaling(scn)
    again = compute.scaling(scn)  # from the cache
    pd.testing.assert_frame_equal(again, real, check_exact=True)


def test_finding7_a_read_only_cache_backs_off(tmp_cache, monkeypatch, caplog):
    """Finding 7: a read-only cache file made every request try it again, recompute and log
    (2,170 warnings in 15 s). Now the cache is left alone for a while (one log line per
    interval) and tried again after it. The database is opened read-only by SQLite itself
    (``mode=ro``): every write fails as on a read-only file (the tests run as root, for whom
    file permissions do not make one)."""
    import types

    import diskcache.core
    import pandas as pd

    frame = pd.DataFrame({"x": [1.5, 2.5]})
    compute.cached_frame("ro", {"i": -1}, lambda: frame)  # the cache exists and works
    compute.HANDLE.store.close()
    monkeypatch.setattr(compute.HANDLE, "store", None)
    real = diskcache.core.sqlite3
    shim = types.SimpleNamespace(**{k: getattr(real, k) for k in dir(real)
                                    if not k.startswith("__")})
    shim.connect = lambda path, **kw: real.connect(f"file:{path}?mode=ro", uri=True, **kw)
    monkeypatch.setattr(diskcache.core, "sqlite3", shim)
    opens: list[int] = []
    real_open = compute._open
    monkeypatch.setattr(compute, "_open", lambda: opens.append(1) or real_open())
    caplog.set_level(logging.INFO)
    for i in range(200):
        out = compute.cached_frame("ro", {"i": i % 7}, lambda: frame)
        pd.testing.assert_frame_equal(out, frame)
    loud = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(loud) == 1 and "30 s" in loud[0], loud
    assert len(opens) <= 2, f"the cache was opened {len(opens)} times for 200 requests"
    later = compute._now() + compute.BACKOFF_S + 1  # the interval has passed: one more try
    monkeypatch.setattr(compute, "_now", lambda: later)
    compute.cached_frame("ro", {"i": 0}, lambda: frame)
    compute.cached_frame("ro", {"i": 1}, lambda: frame)
    assert len(opens) <= 3
    assert len([r for r in caplog.records if r.levelno >= logging.WARNING]) == 2


