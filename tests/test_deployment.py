"""The documented one-host deployment (``gunicorn app:server`` with ``gunicorn.conf.py``) under
the probe's attacks, on loopback, each bounded in time:

* finding 1: the two requests that pinned both workers forever, then normal requests;
* a request that never ends is killed at the per-request time limit and the worker replaced
  (a deliberately spinning request of ``tests/servers/probe_app.py``);
* a request allocating past the per-worker memory limit fails, and the worker lives on;
* finding 5: twenty clients sending one header byte per second while normal requests are
  served;
* finding 7: gunicorn's own error responses (400, 414, 431) carry the security headers;
* PNG export still works inside the worker's memory limit (Chromium is its child process).
"""

from __future__ import annotations

import concurrent.futures
import json
import math
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_server import HEADERS, ROOT, Server, gunicorn, http, scenario_body, until

from dashboard.controls.scenario import default_scenario

PROBE = {"app": "probe_app:server", "ready": "/ok"}


def probe(tmp_path: Path, *extra: str, **env: str) -> Server:
    return gunicorn(tmp_path / "cache", tmp_path / "gunicorn.log", "--pythonpath",
                    str(ROOT / "tests" / "servers"), *extra, env=env, **PROBE)


@pytest.fixture(scope="module")
def app_server(tmp_path_factory) -> Iterator[Server]:
    """The app as documented: ``gunicorn app:server`` with gunicorn.conf.py (2 workers)."""
    work = tmp_path_factory.mktemp("deployment")
    server = gunicorn(work / "cache", work / "gunicorn.log")
    yield server
    server.stop()


def timed(fn, *args, **kw) -> tuple[float, object]:
    start = time.monotonic()
    try:
        out = fn(*args, **kw)
    except OSError as exc:  # connection closed by a killed worker, or a client timeout
        out = exc
    return time.monotonic() - start, out


def test_finding1_two_looping_requests_then_normal_requests_are_served(app_server):
    """Finding 1 (critical): ``nvs: -1`` and infinite GPU counts each pinned a worker at 100 %
    CPU forever; with both workers stuck, ``GET /`` timed out. Now both answer at once with an
    inline error and the server goes on serving."""
    deps = json.loads(http(app_server.url + "/_dash-dependencies")[2])
    url = app_server.url + "/_dash-update-component"
    hostile = [{**default_scenario(), "nvs": -1},
               {**default_scenario(), "gpus_min": math.inf, "gpus_max": math.inf}]
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        answers = list(pool.map(lambda scn: timed(http, url, scenario_body(
            deps, "scaling-summary.children", scn), timeout=20), hostile))
    for seconds, answer in answers:
        assert not isinstance(answer, Exception), answer
        status, _, body = answer
        assert status == 200 and seconds < 10, (status, seconds)
        assert "scenario is invalid" in json.loads(body)["response"]["scaling-infeasible"][
            "children"]
    normal = scenario_body(deps, "scaling-summary.children",
                           {**default_scenario(), "strategy": "1d"})
    for _ in range(3):
        seconds, answer = timed(http, app_server.url + "/", timeout=10)
        assert answer[0] == 200 and seconds < 10
        seconds, answer = timed(http, url, normal, timeout=10)
        assert answer[0] == 200 and b"Fastest" in answer[2]


def test_a_spinning_request_is_killed_at_the_time_limit(tmp_path):
    """A request whose Python never returns (finding 1's kind of bug, anywhere): gunicorn's
    worker timeout never fired (the gthread worker heartbeats from its main thread while the
    request thread spins). Now the worker is ended at the per-request limit and replaced."""
    server = probe(tmp_path, "-w", "1", GUNICORN_REQUEST_TIMEOUT="3")
    try:
        first = json.loads(http(server.url + "/ok")[2])["pid"]
        seconds, answer = timed(http, server.url + "/spin", timeout=30)
        assert seconds < 15, f"the spinning request ran {seconds:.0f} s"
        assert isinstance(answer, Exception) or answer[0] >= 500, answer
        pid = until(lambda: _pid(server), "a worker serving again", timeout=30)
        assert pid != first  # replaced
        assert "exceeded its time limit" in server.log.read_text()
        seconds, answer = timed(http, server.url + "/sleep?s=1", timeout=10)
        assert answer[0] == 200  # a request under the limit is not touched
    finally:
        server.stop()


def _pid(server: Server) -> int | None:
    try:
        status, _, body = http(server.url + "/ok", timeout=5)
    except OSError:
        return None
    return json.loads(body)["pid"] if status == 200 else None


def test_a_memory_heavy_request_fails_and_the_worker_lives_on(tmp_path):
    """The per-worker memory limit: a request allocating past it gets an error (MemoryError,
    500) at once, and the same worker serves the next request."""
    server = probe(tmp_path, "-w", "1", GUNICORN_WORKER_MEMORY_MB="1536")
    try:
        status, _, body = http(server.url + "/hog?mb=200")
        assert status == 200
        pid = json.loads(body)["pid"]
        seconds, answer = timed(http, server.url + "/hog?mb=4000", timeout=60)
        assert not isinstance(answer, Exception) and answer[0] == 500, answer
        assert seconds < 30
        assert _pid(server) == pid  # the same worker, alive
        assert json.loads(http(server.url + "/hog?mb=200")[2])["pid"] == pid
    finally:
        server.stop()


def _slow_client(port: int, stop: threading.Event, sent: list[int]) -> None:
    """Open a connection and send a request head one byte per second until ``stop``."""
    head = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 200
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        for byte in head:
            if stop.is_set():
                return
            try:
                sock.sendall(bytes([byte]))
            except OSError:  # closed by the server (its read deadline): that is fine too
                return
            sent.append(1)
            stop.wait(1.0)


def test_finding5_slow_clients_do_not_block_other_requests(app_server):
    """Finding 5 (medium): 20 connections sending one header byte per second held every
    worker thread; 5 of 6 normal requests timed out. Now a request is read in the worker's
    event loop and reaches a thread only once complete: normal requests are served meanwhile.
    (Loopback only; 20 slow clients for about 12 s.)"""
    stop, sent = threading.Event(), []
    port = int(app_server.url.rsplit(":", 1)[1])
    clients = [threading.Thread(target=_slow_client, args=(port, stop, sent), daemon=True)
               for _ in range(20)]
    for c in clients:
        c.start()
    time.sleep(2.0)  # every slow client has begun its request
    deps = json.loads(http(app_server.url + "/_dash-dependencies", timeout=10)[2])
    body = scenario_body(deps, "root.className", default_scenario())
    latencies = []
    try:
        for i in range(6):
            path, data = ("/", None) if i % 2 == 0 else ("/_dash-update-component", body)
            seconds, answer = timed(http, app_server.url + path, data, timeout=5)
            assert not isinstance(answer, Exception), (i, answer)
            assert answer[0] == 200
            latencies.append(seconds)
            time.sleep(1.0)
    finally:
        stop.set()
        for c in clients:
            c.join(5)
    assert max(latencies) < 5, latencies
    assert len(sent) >= 20 * 5  # the slow clients really were sending meanwhile


def _raw(port: int, data: bytes) -> tuple[int, dict[str, str]]:
    """Send raw bytes; (status, headers) of gunicorn's answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(data)
        reply = b""
        while b"\r\n\r\n" not in reply:
            chunk = sock.recv(65536)
            if not chunk:
                break
            reply += chunk
    lines = reply.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:] if ": " in line)
    return int(lines[0].split()[1]), headers


@pytest.mark.parametrize("data,status", [
    (b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", 414),
    (b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 9000 + b"\r\n\r\n", 431),
    (b"NOT A REQUEST\r\n\r\n", 400),
    (b"GET / HTTP/1.1\r\n" + b"".join(b"X-%d: 1\r\n" % i for i in range(120)) + b"\r\n", 431),
], ids=["414-uri", "431-field", "400-line", "431-count"])
def test_finding7_gunicorns_own_errors_carry_the_security_headers(app_server, data, status):
    """Finding 7: gunicorn's own 400/414/431 answers (written before the app sees the request)
    had none of the app's security headers."""
    port = int(app_server.url.rsplit(":", 1)[1])
    got, headers = _raw(port, data)
    assert got == status
    for name, value in HEADERS.items():
        assert headers.get(name) == value, (name, headers)
    assert headers.get("Content-Security-Policy", "").startswith("default-src 'none'")


def test_png_export_works_inside_the_worker_memory_limit(app_server):
    """The export's Chromium is a child of the worker and inherits its limits: it still
    renders (it raises its own soft address-space limit)."""
    deps = json.loads(http(app_server.url + "/_dash-dependencies")[2])
    (dep,) = [d for d in deps if '"type":"download"' in d["output"]]
    from callbacks import Callbacks

    cbs = Callbacks(deps, lambda data, query: (0, ""))
    body = cbs.body(dep, {"export": [1, None, None], "scenario": default_scenario()},
                    match={"name": "scaling-time"}, every={"fmt": ["png", "html", "csv"]})
    status, _, raw = http(app_server.url + "/_dash-update-component", json.dumps(body).encode(),
                          timeout=120)
    assert status == 200, raw[:500]
    sent = json.loads(raw)["response"]
    assert sent[next(k for k in sent if "download" in k)]["data"]["filename"] == \
        "scaling-time.png"


def _store(server: Server, verb: str, key: str) -> dict:
    status, _, body = http(f"{server.url}/store/{verb}?key={key}", timeout=10)
    assert status == 200, body
    return json.loads(body)


def _from_each_worker(server: Server, verb: str, key: str, pids: int = 2) -> dict[int, dict]:
    """The answers of ``verb`` until each of the ``pids`` workers has answered once (bounded)."""
    seen: dict[int, dict] = {}
    for _ in range(200):
        answer = _store(server, verb, key)
        seen.setdefault(answer["pid"], answer)
        if len(seen) == pids:
            return seen
    raise AssertionError(f"only workers {sorted(seen)} answered 200 requests")


def test_probe6_two_gunicorn_workers_share_one_job_store_after_its_directory_is_deleted(
        tmp_path):
    """Probe 6 with real processes: two gunicorn workers each open the job store (the per-host
    job cap is counted in it); the cache directory is deleted under them; whichever worker
    writes first re-creates it, and the other reads what it wrote (before, it went on with the
    deleted database: two stores, and one address ran jobs past its cap)."""
    server = probe(tmp_path, "-w", "2")
    try:
        _from_each_worker(server, "get", "warm-up")  # both workers hold the store open
        shutil.rmtree(tmp_path / "cache")
        writer = _store(server, "set", "after")["pid"]
        readers = _from_each_worker(server, "get", "after")
        assert {pid: a["value"] for pid, a in readers.items()} == {
            pid: writer for pid in readers}, readers
        assert (tmp_path / "cache" / "background").is_dir()
    finally:
        server.stop()
