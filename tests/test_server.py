"""The server as deployed: security headers, the request size limit, defaults that keep the app
private, and a results cache that survives a restart (its gunicorn settings:
tests/test_gunicorn_conf.py; the background job store: tests/test_background_store.py).

Servers run as subprocesses on free loopback ports (gunicorn with ``gunicorn.conf.py``, and
``python app.py``), each with its own temporary ``PERF_CACHE_DIR`` and without ``REDIS_URL`` (the
one-host background manager). The in-process app of this module uses a temporary cache too
(``PERF_CACHE_DIR`` is set before it is imported). The content security policy is checked in
headless Chromium: every page renders without a single console error.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

_TMP_CACHE = tempfile.mkdtemp(prefix="perf-server-test-")
atexit.register(shutil.rmtree, _TMP_CACHE, ignore_errors=True)
if "dashboard.settings" not in sys.modules:  # read once (app.py creates CACHE_DIR/background)
    os.environ["PERF_CACHE_DIR"] = _TMP_CACHE

import diskcache  # noqa: E402
import pytest  # noqa: E402
from ports import free_port  # noqa: E402

import app as dash_app  # noqa: E402
from dashboard.controls.scenario import default_scenario  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
START_TIMEOUT = 30.0
HEADERS = {"X-Content-Type-Options": "nosniff", "X-Frame-Options": "SAMEORIGIN",
           "Referrer-Policy": "same-origin"}
ENV_KEYS = ("HOST", "PORT", "GUNICORN_BIND", "WEB_CONCURRENCY", "GUNICORN_THREADS")


# --------------------------------------------------------------------------- helpers


def until(check: Callable[[], Any], what: str, timeout: float = START_TIMEOUT) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.1)


def http(url: str, data: bytes | None = None, timeout: float = 60) -> tuple[int, dict, bytes]:
    """(status, headers, body) of a GET, or of a JSON POST when ``data`` is given."""
    req = urllib.request.Request(url, data=data, method="POST" if data is not None else "GET",
                                 headers={"Content-Type": "application/json"} if data else {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as res:
            return res.status, dict(res.headers), res.read()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), err.read()


class Server:
    """A server subprocess on a free loopback port, stopped with SIGTERM (then SIGKILL)."""

    def __init__(self, args: list[str], cache_dir: Path, log: Path, wait_http: bool = True,
                 env: dict[str, str] | None = None, ready: str = "/", port: int | None = None):
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.ready = ready
        extra = env or {}
        env = {k: v for k, v in os.environ.items() if k not in ENV_KEYS and k != "REDIS_URL"}
        env.update(PERF_CACHE_DIR=str(cache_dir), PYTHONUNBUFFERED="1", **extra)
        args = [a.replace("{port}", str(self.port)) for a in args]
        self.log = log
        with open(log, "ab") as out:
            self.proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=out,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        try:
            until(self._listening if not wait_http else self._serving,
                  f"{' '.join(args)} to serve on port {self.port}")
        except AssertionError:
            self.stop()
            raise AssertionError(f"server did not start:\n{log.read_text()[-3000:]}") from None

    def _alive(self) -> None:
        if self.proc.poll() is not None:
            raise AssertionError(f"server exited ({self.proc.returncode}):\n"
                                 f"{self.log.read_text()[-3000:]}")

    def _listening(self) -> bool:
        self._alive()
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
            return True
        except OSError:
            return False

    def _serving(self) -> bool:
        try:  # a worker still importing the app on a loaded machine: not yet, not a failure
            return self._listening() and http(self.url + self.ready, timeout=10)[0] == 200
        except (TimeoutError, ConnectionError):
            return False

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)


def gunicorn(cache_dir: Path, log: Path, *extra: str, wait_http: bool = True,
             env: dict[str, str] | None = None, app: str = "app:server",
             ready: str = "/", runner: list[str] | tuple = ()) -> Server:
    """gunicorn with gunicorn.conf.py; ``runner``: a command prefix (e.g. setpriv)."""
    return Server([*runner, sys.executable, "-m", "gunicorn", "-c", "gunicorn.conf.py",
                   "--bind", "127.0.0.1:{port}", *extra, app], cache_dir, log,
                  wait_http, env, ready)


def callback_body(deps: list[dict], output_of: str, inputs: dict[str, Any]) -> dict[str, Any]:
    """The request the renderer sends for the callback whose output names ``output_of``."""
    dep = next(d for d in deps if output_of in d["output"])
    spec = dep["output"]
    outputs = []
    for part in (spec[2:-2].split("...") if spec.startswith("..") else [spec]):
        cid, prop = part.rsplit(".", 1)
        outputs.append({"id": json.loads(cid) if cid.startswith("{") else cid,
                        "property": prop})
    return {"output": spec, "outputs": outputs if spec.startswith("..") else outputs[0],
            "inputs": [{**i, "value": inputs[i["id"]]} for i in dep["inputs"]],
            "state": [], "changedPropIds": [f"{i['id']}.{i['property']}" for i in dep["inputs"]]}


# the scaling callback's other inputs, as the page loads them (dashboard/pages/scaling.py)
PAGE_INPUTS = {"scaling-threshold": 50, "scaling-breakdown-scale": "log"}


def scenario_body(deps: list[dict], output_of: str, scn: dict[str, Any]) -> bytes:
    return json.dumps(callback_body(deps, output_of, {**PAGE_INPUTS, "scenario": scn})).encode()


def test_request_limit_fits_every_real_request():
    """1 MiB: far above what the app sends (an export carries a figure of about 50 kB), far
    below what would let one request tie up a worker."""
    assert dash_app.server.config["MAX_CONTENT_LENGTH"] == 1 << 20


# --------------------------------------------------------------------------- headers, limits


def test_security_headers_on_pages_callbacks_and_errors():
    client = dash_app.server.test_client()
    deps = client.get("/_dash-dependencies").get_json()
    responses = {
        "page": client.get("/"),
        "callback": client.post("/_dash-update-component", data=scenario_body(
            deps, "root.className", default_scenario()), content_type="application/json"),
        "asset": client.get("/assets/style.css"),
        "not found": client.get("/no-such-file.js"),
    }
    assert responses["callback"].status_code == 200
    assert "root" in responses["callback"].get_json()["response"]
    for what, res in responses.items():
        for name, value in HEADERS.items():
            assert res.headers.get(name) == value, (what, name, dict(res.headers))
        csp = dict(d.strip().split(" ", 1) for d in res.headers["Content-Security-Policy"]
                   .split(";"))
        assert csp["frame-ancestors"] == "'self'" and csp["object-src"] == "'none'"
        assert csp["default-src"] == "'self'"
        script = csp["script-src"].split()
        assert script[0] == "'self'" and "'unsafe-eval'" not in script
        assert "'unsafe-inline'" not in script
        # Dash's inline scripts are allowed by hash, and only those
        assert set(script[1:]) == set(dash_app.app.csp_hashes())


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Iterator[Server]:
    """``gunicorn -c gunicorn.conf.py app:server`` (2 workers), reached only by TCP before the
    first test, so its workers are still fresh."""
    work = tmp_path_factory.mktemp("gunicorn")
    server = gunicorn(work / "cache", work / "gunicorn.log", wait_http=False)
    yield server
    server.stop()


def test_fresh_workers_serve_concurrent_first_requests(served):
    """The first requests of a fresh worker arrive together (a browser fetching its scripts):
    all succeed (Dash's first-request setup is done in ``post_worker_init``)."""
    path = "/_dash-component-suites/dash/dash-renderer/build/dash_renderer.min.js"
    with concurrent.futures.ThreadPoolExecutor(24) as pool:
        statuses = list(pool.map(lambda _: http(served.url + path)[0], range(48)))
    assert statuses == [200] * 48
    assert http(served.url + "/")[0] == 200


def test_gunicorn_serves_with_headers(served):
    status, headers, body = http(served.url + "/")
    assert status == 200 and b"_dash-renderer" in body
    assert headers["Server"] == "gunicorn"
    for name, value in HEADERS.items():
        assert headers[name] == value
    assert "frame-ancestors 'self'" in headers["Content-Security-Policy"]
    until(lambda: re.search(r'"GET /" 200 \d+ \d+ms', served.log.read_text()),
          "the access log's line for GET /", timeout=10)


def test_oversized_request_is_refused_and_the_server_keeps_serving(served):
    deps = json.loads(http(served.url + "/_dash-dependencies")[2])
    scn = default_scenario()
    # under the limit (900 kB, beside the callback's fields: each store the browser sends back
    # has a bound of its own, dashboard/server/guard.py: BOUNDS): served
    big = json.dumps({**json.loads(scenario_body(deps, "root.className", scn)),
                      "padding": "x" * 900_000}).encode()
    assert len(big) < 1 << 20
    assert http(served.url + "/_dash-update-component", big)[0] == 200
    # over it (2 MB): refused before the app reads it
    huge = scenario_body(deps, "root.className", {**scn, "padding": "x" * 2_000_000})
    status, headers, _ = http(served.url + "/_dash-update-component", huge)
    assert status == 413
    assert headers["X-Content-Type-Options"] == "nosniff"
    # and the server keeps serving: a page and a real callback
    assert http(served.url + "/")[0] == 200
    status, _, body = http(served.url + "/_dash-update-component",
                           scenario_body(deps, "root.className", scn))
    assert status == 200 and json.loads(body)["response"]["root"]["className"] == "root"


# --------------------------------------------------------------------------- defaults


def test_the_host_env_var_never_changes_the_interface(monkeypatch):
    """Issue 26: HOST (set by many shells to the machine's name) made ``python app.py`` listen
    on that interface without a word."""
    calls: list[dict] = []
    monkeypatch.setattr(dash_app.app, "run", lambda **kw: calls.append(kw))
    monkeypatch.setenv("HOST", "0.0.0.0")
    dash_app.main([])
    assert calls[-1]["host"] == "127.0.0.1"


@pytest.mark.parametrize("path", ["/", "/plan", "/no-such-page"])
def test_the_host_header_is_never_reflected(path):
    """Issue 26: Dash Pages wrote the request's Host into its og:url/twitter:url meta tags."""
    client = dash_app.server.test_client()
    res = client.get(path, headers={"Host": "attacker.example",
                                    "X-Forwarded-Host": "other.example"})
    assert res.status_code == 200
    body = res.get_data(as_text=True)
    assert "attacker" not in body and "other.example" not in body
    assert 'content="http://localhost' in body  # the deployment's own name instead


def test_python_app_py_listens_on_loopback_without_debug(tmp_path):
    """``python app.py`` with no arguments and no HOST: 127.0.0.1 only, Dash debug off (no dev
    tools UI, no hot reload, no Werkzeug debugger)."""
    import psutil

    server = Server([sys.executable, "app.py", "--port", "{port}"], tmp_path / "cache",
                    tmp_path / "app.log")
    try:
        addresses = {c.laddr.ip for p in [psutil.Process(server.proc.pid)]
                     for c in p.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN}
        assert addresses == {"127.0.0.1"}
        status, headers, body = http(server.url + "/")
        config = json.loads(re.search(rb'<script id="_dash-config" type="application/json">'
                                      rb"(.*?)</script>", body, re.S).group(1))
        assert config["ui"] is False and "hot_reload" not in config
        assert headers["X-Frame-Options"] == "SAMEORIGIN"
        assert "Debugger is active" not in server.log.read_text()
    finally:
        server.stop()


# --------------------------------------------------------------------------- restart


def test_restart_serves_the_cached_results(tmp_path):
    """Results computed before a restart are served from the cache after it, not recomputed:
    the cached summary is replaced with a marker while the server is down, and the restarted
    server answers with the marker."""
    cache_dir, log = tmp_path / "cache", tmp_path / "gunicorn.log"
    scn = {**default_scenario(), "strategy": "1d", "gpus_min": 256, "gpus_max": 1024}
    first = gunicorn(cache_dir, log, "-w", "1")
    try:
        deps = json.loads(http(first.url + "/_dash-dependencies")[2])
        body = scenario_body(deps, "scaling-summary.children", scn)
        status, _, raw = http(first.url + "/_dash-update-component", body)
        assert status == 200, raw[:2000]
        summary = json.loads(raw)["response"]["scaling-summary"]["children"]
        assert summary.startswith("Fastest")
    finally:
        first.stop()

    marker = f"from the cache {uuid.uuid4()}"
    with diskcache.Cache(str(cache_dir / "results")) as store:
        hits = []
        for key in list(store.iterkeys()):
            value = store.get(key)
            outputs = json.loads(value) if isinstance(value, str) else None
            if isinstance(outputs, list) and outputs and outputs[0] == summary:
                store.set(key, json.dumps([marker, *outputs[1:]]))
                hits.append(key)
        assert len(hits) == 1, f"{len(hits)} cached outputs hold the summary"

    second = gunicorn(cache_dir, log, "-w", "1")
    try:
        status, _, raw = http(second.url + "/_dash-update-component", body)
        assert status == 200
        assert json.loads(raw)["response"]["scaling-summary"]["children"] == marker
    finally:
        second.stop()


# --------------------------------------------------------------------------- browser


PAGES = {"/": "scaling-time", "/design": "design-heatmap", "/systems": "systems-compare",
         "/validation": "validation-time", "/hbm": None, "/serving": "serve-pareto",
         "/post-training": "post-memory"}


@pytest.mark.browser
def test_pages_run_under_the_content_security_policy(dash_duo):
    """Every page loads and runs its callbacks in Chromium with the policy enforced: no console
    error at all (a blocked script, style, image or eval is reported there). With a policy
    that forbids inline styles, the same check does catch the violations."""
    dash_duo.start_server(dash_app.app, port=free_port())  # ports.py: not a shared sequence
    driver = dash_duo.driver
    status, headers, _ = http(dash_duo.server_url + "/")
    assert status == 200 and "script-src 'self' 'sha256-" in headers["Content-Security-Policy"]

    def idle() -> bool:
        return driver.execute_script(
            "return document.readyState === 'complete' && !!document.querySelector('#root')"
            " && document.querySelector('._dash-loading-callback') === null;")

    def drawn(card: str) -> bool:
        return driver.execute_script(
            "const gd = document.querySelector(arguments[0]);"
            "return !!(gd && gd._fullData && gd._fullData.length);",
            f"#card-{card} .js-plotly-plot")

    for path, card in PAGES.items():
        driver.get(dash_duo.server_url + path)
        until(idle, f"{path} to settle")
        if card:
            until(lambda c=card: drawn(c), f"{path}: the {card} figure")
        until(idle, f"{path} to settle")
        assert dash_duo.get_logs() == [], path

    strict = dash_app.content_security_policy().replace(" 'unsafe-inline'", "")
    original = dash_app.content_security_policy
    dash_app.content_security_policy = lambda: strict
    try:
        driver.get(dash_duo.server_url + "/")
        seen: list[dict] = []
        until(lambda: seen.extend(dash_duo.get_logs()) or any(
            "Content Security Policy" in e["message"] for e in seen),
            "CSP violations to be reported")
    finally:
        dash_app.content_security_policy = original


