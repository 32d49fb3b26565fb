"""Headless-browser tests of the dashboard (dash.testing's ``dash_duo``).

The results cache of the whole test session lives in a temporary directory: ``PERF_CACHE_DIR`` is
set before the app is imported, so the tests never touch the repository's ``cache/`` and start
uncached. The ``ui`` fixture starts the app in dash_duo's threaded server, opens it, waits for the
first computed view, and offers small helpers that read what the figures *show* (the plotted
arrays of ``gd._fullData``, where plotly.js has decoded the typed arrays) and wait explicitly
(polling with a timeout) for it to change.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

_TMP_CACHE = tempfile.mkdtemp(prefix="perf-dashboard-browser-")
atexit.register(shutil.rmtree, _TMP_CACHE, ignore_errors=True)
if "dashboard.settings" not in sys.modules:  # read once (app.py creates CACHE_DIR/background)
    os.environ["PERF_CACHE_DIR"] = _TMP_CACHE

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "artifacts" / "screenshots"
from polling import TIMEOUT, until  # noqa: E402 - tests/ is on sys.path (pytest rootdir)
from ports import free_port  # noqa: E402


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test under tests/browser gets the ``browser`` marker (``-m "not browser"``)."""
    here = Path(__file__).resolve().parent
    for item in items:
        if here in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.browser)


@pytest.fixture(scope="session")
def dash_app():
    """The app object of app.py, imported once with the session's private results cache."""
    import app as module
    from dashboard.jobs import compute

    assert compute.CACHE_DIR.resolve() != (ROOT / "cache").resolve(), \
        "the browser tests must not use the repository's cache/"
    return module.app


# The figure as plotted: every trace's name, type and data arrays (typed arrays as lists).
_FIGURE_JS = """
const gd = document.querySelector(arguments[0]);
if (!gd || !gd._fullData) { return null; }
// a graph not drawn yet (a placeholder, hidden) has data but no full layout
const L = gd._fullLayout || {};
const arr = (a) => (a === undefined || a === null) ? null
    : (typeof a === 'string' ? a : Array.from(a, (v) => (v !== null && typeof v === 'object'
        && typeof v.length === 'number') ? Array.from(v) : v));
return {
  traces: gd._fullData.map((t) => ({name: t.name, type: t.type, mode: t.mode || null,
    visible: t.visible, x: arr(t.x), y: arr(t.y), z: arr(t.z),
    symbol: (t.marker && t.marker.symbol) || null})),
  font: L.font ? L.font.size : null,
  title: (L.title && L.title.font) ? L.title.font.size : null,
  xtitle: (L.xaxis && L.xaxis.title && L.xaxis.title.font) ? L.xaxis.title.font.size : null,
  annotations: (L.annotations || []).map((a) => a.text),
};
"""


class UI:
    """What a user sees and does, with explicit waits."""

    def __init__(self, duo: Any):
        self.duo = duo
        self.driver = duo.driver

    # --- waiting -------------------------------------------------------------------------
    def until(self, check: Callable[[], Any], what: str, timeout: float = TIMEOUT) -> Any:
        """Poll ``check()`` until it returns something truthy; fail with ``what`` on timeout."""
        return until(check, what, timeout)

    def steady(self, read: Callable[[], Any], expected: Any, seconds: float = 1.5) -> None:
        """``read()`` keeps returning ``expected`` for ``seconds`` (nothing re-renders it)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            assert read() == expected
            time.sleep(0.1)

    def disabled(self, selector: str) -> bool:
        return self.duo.find_element(selector).get_attribute("disabled") is not None

    def cancel_job(self, prefix: str, progress: Callable[[], Any], total: int) -> Any:
        """Click ``#{prefix}-cancel`` on a running background job: the run button comes back,
        cancel is disabled, the progress stopped short of ``total`` and stays where it is (the
        job is gone: no more reports). Returns that progress."""
        self.duo.find_element(f"#{prefix}-cancel").click()
        self.until(lambda: not self.disabled(f"#{prefix}-run"),
                   "the run button re-enabled by cancel")
        assert self.disabled(f"#{prefix}-cancel")
        stopped = progress()
        assert stopped[0] < total
        self.steady(progress, stopped, seconds=2.5)
        return stopped

    def idle(self, timeout: float = TIMEOUT) -> None:
        """No callback is pending: the renderer shows ``._dash-loading-callback`` meanwhile."""
        self.until(lambda: self.driver.execute_script(
            "return document.querySelector('._dash-loading-callback') === null;"),
            "callbacks to settle", timeout)

    # --- figures -------------------------------------------------------------------------
    @staticmethod
    def graph(card: str) -> str:
        """CSS selector of the plotly graph div inside the card ``card-<name>``."""
        return f"#card-{card} .js-plotly-plot"

    def figure(self, card: str) -> dict | None:
        return self.driver.execute_script(_FIGURE_JS, self.graph(card))

    def traces(self, card: str) -> list[dict]:
        fig = self.figure(card)
        return fig["traces"] if fig else []

    @staticmethod
    def ys(traces: list[dict]) -> dict[str, list]:
        """Trace name → plotted y values (the comparable content of a line plot)."""
        return {t["name"]: t["y"] for t in traces if t["y"]}

    def wait_figure(self, card: str, check: Callable[[list[dict]], Any], what: str,
                    timeout: float = TIMEOUT) -> list[dict]:
        """Wait until the plotted traces of ``card`` satisfy ``check``; return them."""
        found: list[list[dict]] = []

        def ok() -> bool:
            traces = self.traces(card)
            if traces and check(traces):
                found.append(traces)
                return True
            return False
        self.until(ok, f"{card}: {what}", timeout)
        return found[-1]

    def grid_rows(self, selector: str) -> list[dict[str, str]]:
        """An AG Grid's rendered rows (``selector`` matches its row elements) as {column id:
        text}, in row-index order."""
        return self.driver.execute_script("""
            return Array.from(document.querySelectorAll(arguments[0]))
              .sort((a, b) => (+a.getAttribute('row-index')) - (+b.getAttribute('row-index')))
              .map((row) => Object.fromEntries(Array.from(row.querySelectorAll('.ag-cell'))
                .map((c) => [c.getAttribute('col-id'), c.textContent.trim()])));
        """, selector)

    def wait_data(self, card: str, timeout: float = TIMEOUT) -> list[dict]:
        """Wait until ``card``'s figure plots at least one trace with numbers (in z, y or x:
        horizontal bars carry theirs in x)."""
        def has_numbers(traces: list[dict]) -> bool:
            for t in traces:
                for arr in (t["z"], t["y"], t["x"]):
                    flat = [v for row in (arr or []) for v in (row if isinstance(row, list)
                                                                  else [row])]
                    if any(isinstance(v, (int, float)) for v in flat):
                        return True
            return False
        return self.wait_figure(card, has_numbers, "a figure with data", timeout)

    def wait_changed(self, card: str, before: dict[str, list], what: str,
                     timeout: float = TIMEOUT) -> dict[str, list]:
        """Wait until the plotted y arrays of ``card`` differ from ``before``."""
        traces = self.wait_figure(card, lambda t: self.ys(t) and self.ys(t) != before,
                                  f"the plot to change after {what}", timeout)
        return self.ys(traces)

    # --- controls ------------------------------------------------------------------------
    def text(self, selector: str) -> str:
        return self.driver.find_element("css selector", selector).text

    def wait_text(self, selector: str, check: Callable[[str], Any], what: str,
                  timeout: float = TIMEOUT) -> str:
        """Wait until the text of ``selector`` satisfies ``check``; return the text."""
        seen: list[str] = []

        def ok() -> bool:
            seen.append(self.text(selector))
            return bool(check(seen[-1]))
        try:
            self.until(ok, f"{selector}: {what}", timeout)
        except AssertionError as exc:
            raise AssertionError(f"{exc} (its text: {seen[-1:]})") from None
        return seen[-1]

    def set_input(self, key: str, value: Any) -> None:
        """Type ``value`` into the numeric control ``ctl-<key>`` and commit it (Tab blurs the
        debounced input, which sends the value)."""
        from selenium.webdriver.common.keys import Keys

        box = self.duo.find_element(f"#ctl-{key}")
        box.send_keys(Keys.CONTROL, "a")
        box.send_keys(Keys.BACKSPACE)
        box.send_keys(str(value), Keys.TAB)
        self.until(lambda: box.get_attribute("value") == str(value), f"ctl-{key} = {value}")

    def choose(self, key: str, value: str) -> None:
        """Pick ``value`` in the Dash 4 dropdown ``ctl-<key>``: open it, filter the options by
        typing, click the option (retried while the popover is still moving into place)."""
        self.duo.find_element(f"#ctl-{key}").click()
        search = self.duo.find_element(".dash-dropdown-search")
        search.send_keys(value)

        def click() -> bool:
            for option in self.driver.find_elements("css selector", ".dash-dropdown-option"):
                if option.text.strip() == value:
                    # the popover (Dash 4) keeps a scroll offset after filtering: the first
                    # match can sit under its sticky search box
                    self.driver.execute_script(
                        "arguments[0].closest('.dash-dropdown-content').scrollTop = 0;", option)
                    option.click()
                    return True
            return False
        self.until(click, f"the option {value!r} of ctl-{key}")
        self.until(lambda: self.text(f"#ctl-{key}").strip() == value, f"ctl-{key} = {value}")

    def fragment(self) -> dict[str, str]:
        """The scenario in the page's URL fragment (#key=value&...)."""
        from urllib.parse import parse_qsl, urlsplit

        return dict(parse_qsl(urlsplit(self.driver.current_url).fragment))

    def go(self, page: str) -> None:
        """Navigate with the header's link (``nav-<module>``), as a user does."""
        self.duo.find_element(f"#nav-{page}").click()

    def screenshot(self, name: str) -> Path:
        """Full-page PNG in artifacts/screenshots/ (the window grows to the page's height)."""
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        path = SCREENSHOTS / f"{name}.png"
        size = self.driver.get_window_size()
        height = self.driver.execute_script(
            "return Math.max(document.body.scrollHeight, document.documentElement.scrollHeight)")
        self.driver.set_window_size(size["width"], max(size["height"], int(height) + 150))
        try:
            self.idle()
            assert self.driver.save_screenshot(str(path)), f"screenshot {path} failed"
        finally:
            self.driver.set_window_size(size["width"], size["height"])
        return path

    def severe_logs(self) -> list[dict]:
        """The browser console's errors (dash.testing asks Chrome for SEVERE entries only)."""
        return self.duo.get_logs()

    def dump(self, card: str) -> str:  # for assertion messages
        return json.dumps(self.figure(card))[:2000]


WINDOW = (1600, 1300)  # the window size of pytest_setup_options (tests/conftest.py)


class _Session:
    """One browser and one app server for the whole session (starting Chromium and the server
    took 3 to 8 s of every test); :meth:`fresh` gives each test what a new browser gave it."""

    def __init__(self, config: pytest.Config, app: Any, downloads: Path):
        from dash.testing.application_runners import ThreadedRunner

        self.config, self.downloads = config, downloads
        self.server = ThreadedRunner()
        self.server.start(app, port=free_port())  # ports.py: not dash.testing's shared sequence
        self.duo = self._browser()

    def _browser(self) -> Any:
        from dash.testing.composite import DashComposite

        get = self.config.getoption
        return DashComposite(server=self.server, browser=get("webdriver"), remote=get("remote"),
                             remote_url=get("remote_url"), headless=get("headless"),
                             options=self.config.hook.pytest_setup_options(),
                             download_path=str(self.downloads),
                             percy_assets_root=get("percy_assets"),
                             percy_finalize=get("nopercyfinalize"), pause=get("pause"))

    def fresh(self, downloads: Path, open_app: bool = True) -> Any:
        """The browser as a new one would be, on a new tab of the app's first page: the other
        tabs closed (their pages, callbacks and sessionStorage gone), the app origin's
        localStorage, cookies and other stored data cleared, the window at its start size,
        downloads into the test's own empty folder, console errors read from here on
        (``open_app`` False: the new tab stays blank). A browser that no longer answers
        (crashed) is replaced by a new one."""
        from selenium.common.exceptions import WebDriverException

        try:
            self._reset(downloads, open_app)
        except WebDriverException:
            self.close_browser()
            self.duo = self._browser()
            self._reset(downloads, open_app)
        return self.duo

    def _reset(self, downloads: Path, open_app: bool) -> None:
        driver = self.duo.driver
        old = driver.window_handles
        driver.switch_to.new_window("tab")
        tab = driver.current_window_handle
        for handle in old:
            driver.switch_to.window(handle)
            driver.close()
        driver.switch_to.window(tab)
        driver.execute_cdp_cmd("Storage.clearDataForOrigin",
                               {"origin": self.server.url.rstrip("/"), "storageTypes": "all"})
        driver.delete_all_cookies()
        driver.set_window_size(*WINDOW)
        driver.execute_cdp_cmd("Page.setDownloadBehavior",
                               {"behavior": "allow", "downloadPath": str(downloads)})
        self.duo._download_path = str(downloads)  # what ui.duo.download_path answers
        self.duo.get_logs()  # reads (and so empties) the log of the pages closed above
        if open_app:
            self.duo.server_url = self.server.url  # opens it, waits for Dash's entry point
        else:
            self.duo._url = self.server.url  # what ui.duo.server_url answers; nothing opened

    def close_browser(self) -> None:
        try:
            self.duo.driver.quit()
        except Exception:  # noqa: BLE001 - a crashed browser: nothing left to close
            pass

    def close(self) -> None:
        self.close_browser()
        self.server.stop()


@pytest.fixture(scope="session")
def browser_session(request, dash_app, tmp_path_factory):
    """The session's browser and app server (see :class:`_Session`)."""
    session = _Session(request.config, dash_app, tmp_path_factory.mktemp("downloads"))
    yield session
    session.close()


@pytest.fixture
def ui(browser_session, tmp_path, request) -> UI:
    """The app opened on the scaling page in a fresh state of the session's browser (a new tab,
    stored data cleared, an empty download folder), its training-time plot drawn. A test marked
    ``own_page`` opens its own first page (a link): its tab starts blank."""
    downloads = tmp_path / "download"
    downloads.mkdir()
    own_page = request.node.get_closest_marker("own_page") is not None
    page = UI(browser_session.fresh(downloads, open_app=not own_page))
    if not own_page:
        page.wait_data("scaling-time")
    yield page
    if getattr(request.node, "failed_call", False):  # as dash.testing's dash_duo did
        page.duo.take_snapshot(request.node.name)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """Marks a test whose call failed, for the ``ui`` fixture's snapshot."""
    report = yield
    if report.when == "call" and report.failed:
        item.failed_call = True
    return report
