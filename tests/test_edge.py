"""Issue 29, item 2: the guards at the edge hold with gunicorn alone (real gunicorn on loopback,
the app behind it, short deadlines so that each test is bounded). Each test is an attack of the
independent probe and failed on the code before it:

* finding 1: a trickled oversized body (``Content-Length: 2000000``, then a byte at a time) held
  a worker with no deadline (the app answered 413, then gunicorn drained the body);
* finding 5: a chunked body whose first chunk ends in ``0\\r\\n\\r\\n`` was taken as complete, and a
  thread read the rest blocking until the watchdog killed the worker;
* finding 8: every client of one address (all users behind a TLS proxy on this host) was one
  client to the fair queue;
* finding 12b: a client's ``X-Forwarded-Proto`` changed the page's ``twitter:url``/``og:url``.

The same deployment behind nginx: ``tests/test_edge_proxy.py``.
"""

from __future__ import annotations

import re
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import attacks
import pytest
from test_server import Server, gunicorn

from dashboard.server import identity

READ_S = 3  # the read deadline under test (default 10 s)
LATENCY_S = 4.0  # a normal request's bound beside the attacks (blocked: the whole test)


@pytest.fixture(scope="module")
def direct(tmp_path_factory) -> Iterator[Server]:
    work = tmp_path_factory.mktemp("edge")
    server = gunicorn(work / "cache", work / "gunicorn.log",
                      env={"GUNICORN_READ_TIMEOUT": str(READ_S),
                           "GUNICORN_REQUEST_TIMEOUT": "20"})
    yield server
    server.stop()


def port_of(server: Server) -> int:
    return int(server.url.rsplit(":", 1)[1])


class Trickler:
    """A connection that sends ``head`` and then ``drip``, a byte every 0.5 s (for at most
    ``seconds``), recording what the server answered, how many bytes it trickled and when
    the server closed the connection (seconds after the head; None: never)."""

    def __init__(self, port: int, head: bytes, drip: bytes = b"x" * 40, seconds: float = 12):
        self.reply, self.closed_after_s, self.sent = b"", None, 0
        self.thread = threading.Thread(target=self._run, args=(port, head, drip, seconds),
                                       daemon=True)
        self.thread.start()

    def _run(self, port: int, head: bytes, drip: bytes, seconds: float) -> None:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            sock.sendall(head)
            start = time.monotonic()
            for byte in drip:
                time.sleep(0.5)
                if self._ended(sock) or time.monotonic() - start > seconds:
                    break
                try:
                    sock.sendall(bytes([byte]))
                    self.sent += 1
                except OSError:
                    break
            if self._ended(sock):
                self.closed_after_s = time.monotonic() - start

    def _ended(self, sock: socket.socket) -> bool:
        """Whether the server closed (keeps what it answered meanwhile)."""
        closed, received = attacks.drain(sock)
        self.reply += received
        return closed


def _beside(direct: Server, tricklers: list[Trickler]) -> list[float]:
    time.sleep(1.0)
    latencies = attacks.normal_latencies(direct.url, 3)
    for t in tricklers:
        t.thread.join(15)
    return latencies


def test_finding1_a_trickled_oversized_body_is_refused_at_once_and_closed(direct):
    """Two connections announce 2 MB and trickle it: each is answered 413 and closed within
    a second or two, its body never read, and normal requests are served throughout (before:
    0 of 18 normal requests in 180 s)."""
    head = (b"POST /_dash-update-component HTTP/1.1\r\nHost: x\r\nContent-Type: "
            b"application/json\r\nContent-Length: 2000000\r\n\r\n{\"a\": \"")
    tricklers = [Trickler(port_of(direct), head) for _ in range(2)]
    latencies = _beside(direct, tricklers)
    assert max(latencies) < LATENCY_S, latencies
    for t in tricklers:
        assert t.reply.startswith(b"HTTP/1.1 413"), t.reply[:100]
        assert t.closed_after_s is not None and t.sent < 6, (t.closed_after_s, t.sent)


def test_finding5_a_chunked_body_is_refused_not_read_by_a_thread(direct):
    """A chunked request whose first packet ends in ``0\\r\\n\\r\\n`` inside a chunk, the rest
    trickled: answered 411 at once and closed (chunked bodies are refused outright: no page
    sends one, and nginx in front turns one into a sized body), never handed to a thread;
    normal requests served beside two of them."""
    head = (b"POST /_dash-update-component HTTP/1.1\r\nHost: x\r\nContent-Type: "
            b"application/json\r\nTransfer-Encoding: chunked\r\n\r\n40\r\n{\"a\": 0\r\n\r\n")
    tricklers = [Trickler(port_of(direct), head) for _ in range(2)]
    latencies = _beside(direct, tricklers)
    assert max(latencies) < LATENCY_S, latencies
    for t in tricklers:
        assert t.reply.startswith(b"HTTP/1.1 411"), t.reply[:100]
        assert t.closed_after_s is not None and t.sent < 6, (t.closed_after_s, t.sent)
    assert "exceeded its time limit" not in direct.log.read_text()


@pytest.mark.parametrize("encoding", [b"chunked", b"gzip, chunked", b"identity"])
def test_finding5_any_transfer_coding_is_refused(direct, encoding):
    with socket.create_connection(("127.0.0.1", port_of(direct)), timeout=5) as sock:
        sock.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-eNcoding: " + encoding +
                     b"\r\n\r\n0\r\n\r\n")
        assert sock.recv(100).startswith(b"HTTP/1.1 411")


def test_finding12b_forwarded_proto_never_reaches_the_page(direct):
    """``X-Forwarded-Proto: https`` (and the other forwarding headers) from a client: the
    page's URL meta tags stay the deployment's own ``http://localhost``."""
    with socket.create_connection(("127.0.0.1", port_of(direct)), timeout=10) as sock:
        sock.sendall(b"GET /plan HTTP/1.1\r\nHost: evil.example\r\nX-Forwarded-Proto: https\r\n"
                     b"X-Forwarded-Scheme: https\r\nX-Forwarded-Ssl: on\r\n"
                     b"Forwarded: proto=https;host=evil.example\r\nConnection: close\r\n\r\n")
        page = b""
        while chunk := sock.recv(65536):
            page += chunk
    assert page.startswith(b"HTTP/1.1 200"), page[:200]
    urls = re.findall(rb'property="(?:og|twitter):url" content="([^"]*)"', page) + \
        re.findall(rb'name="twitter:url" content="([^"]*)"', page)
    assert urls and all(u.startswith(b"http://localhost/") for u in urls), urls
    assert b"https://" not in b"".join(urls) and b"evil" not in page


def test_finding8_the_app_gives_each_browser_a_signed_cookie(direct):
    """The first answer sets ``perf_client`` (HttpOnly, SameSite=Lax) signed with the
    deployment's secret, kept in a file of mode 0600; a valid cookie is not replaced, a forged
    one is."""
    secret_path = Path(direct.log).parent / "cache" / "client-secret"
    assert secret_path.stat().st_mode & 0o777 == 0o600
    key = secret_path.read_bytes().strip()
    status, headers, _ = _get(direct, "/_dash-layout")
    cookie = headers["set-cookie"]
    assert status == 200 and "HttpOnly" in cookie and "SameSite=Lax" in cookie
    value = re.match(r"perf_client=([^;]+);", cookie).group(1)
    assert identity.verified(value, key) is not None
    assert "set-cookie" not in _get(direct, "/_dash-layout", f"perf_client={value}")[1]
    forged = value.split(".")[0] + "." + "0" * 64
    assert identity.verified(forged, key) is None
    assert "set-cookie" in _get(direct, "/_dash-layout", f"perf_client={forged}")[1]


def _get(server: Server, path: str, cookie: str = "") -> tuple[int, dict[str, str], bytes]:
    with socket.create_connection(("127.0.0.1", port_of(server)), timeout=10) as sock:
        extra = f"Cookie: {cookie}\r\n" if cookie else ""
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n{extra}Connection: close\r\n\r\n"
                     .encode())
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
    head, _, body = reply.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return int(lines[0].split()[1]), headers, body


def _heavy(url: str, cookie: str, stop: threading.Event, done: list[float]) -> None:
    """Requests of 1 s of computing each, back to back on one kept-alive connection."""
    import http.client

    host, port = url.split("//")[1].split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    while not stop.is_set():
        start = time.monotonic()
        conn.request("GET", "/busy?s=1", headers={"Cookie": f"perf_client={cookie}"})
        conn.getresponse().read()
        done.append(time.monotonic() - start)


def _timed(url: str, cookie: str) -> float:
    import urllib.request

    start = time.monotonic()
    request = urllib.request.Request(url, headers={"Cookie": f"perf_client={cookie}"})
    with urllib.request.urlopen(request, timeout=15) as res:
        res.read()
    return time.monotonic() - start


def test_finding8_the_fair_queue_tells_users_of_one_address_apart(tmp_path):
    """Everyone on 127.0.0.1 (users behind a TLS proxy on this host), each with their own
    signed cookie: one user keeping 8 requests of 1 s queued on one worker, another user's
    requests overtake them (keyed on the address, they were one client: first come, first
    served, about 8 s each). A forged cookie counts as the address, not a new client."""
    from test_deployment import probe

    secret = tmp_path / "client-secret"  # the deployment's secret, given to it
    key = identity.create_secret(secret)
    server = probe(tmp_path, "-w", "1", PERF_CLIENT_SECRET_FILE=str(secret))
    heavy, light = identity.sign("a" * 32, key), identity.sign("b" * 32, key)
    stop, done = threading.Event(), []
    threads = [threading.Thread(target=_heavy, args=(server.url, heavy, stop, done),
                                daemon=True) for _ in range(8)]
    try:
        for t in threads:
            t.start()
        time.sleep(1.5)  # the queue has formed
        latencies = []
        for _ in range(4):
            latencies.append(_timed(server.url + "/ok", light))
            time.sleep(0.2)
    finally:
        stop.set()
        server.stop()
    assert len(done) >= 3  # the heavy user was served too
    assert max(latencies) < 3.5, latencies
    forged = identity.sign("c" * 32, b"not the deployment's secret" * 2)
    assert identity.identity(forged, "127.0.0.1", key) == "127.0.0.1"
    assert identity.identity(light, "127.0.0.1", key) == "cookie:" + "b" * 32


def test_finding3_a_huge_saved_list_is_refused_before_it_is_validated(direct):
    """17,500 copies of one saved scenario (about 960 kB, inside the 1 MiB limit) sent back
    as the saved-scenarios store: a 400 naming the bound, at once (each copy was validated:
    15–33 s of a worker per request)."""
    import json

    from test_server import http

    from dashboard.controls.scenario import default_scenario

    deps = json.loads(http(direct.url + "/_dash-dependencies")[2])
    dep = next(d for d in deps if any(i["id"] == "scenarios-saved" and i["property"] == "data"
                                      for i in d["inputs"] + d["state"]))
    item = {"name": "same", "scenario": {k: v for k, v in list(default_scenario().items())[:1]}}
    huge = [item] * 17_500

    def value(i: dict) -> object:
        return huge if i["id"] == "scenarios-saved" else None

    spec = dep["output"]
    outs = [dict(zip(("id", "property"), part.rsplit(".", 1)))
            for part in (spec[2:-2].split("...") if spec.startswith("..") else [spec])]
    body = {"output": spec, "outputs": outs if spec.startswith("..") else outs[0],
            "inputs": [{**i, "value": value(i)} for i in dep["inputs"]],
            "state": [{**s, "value": value(s)} for s in dep["state"]], "changedPropIds": []}
    data = json.dumps(body).encode()
    assert 900_000 < len(data) < 1 << 20
    status, _, answer = http(direct.url + "/_dash-update-component", data, timeout=60)
    assert status == 400 and b"scenarios-saved.data holds 17500 items" in answer, answer[:300]


def test_finding3_saved_entries_validates_at_most_max_saved(monkeypatch):
    from dashboard.controls import saved
    from dashboard.controls.scenario import default_scenario

    calls = []
    real = saved._checked
    monkeypatch.setattr(saved, "_checked", lambda raw: calls.append(1) or real(raw))
    scn = default_scenario()
    same = [{"name": "same", "scenario": scn}] * 5_000
    assert [e["name"] for e in saved.entries(same)] == ["same"] and len(calls) == 1
    calls.clear()
    many = [{"name": f"s{i}", "scenario": scn} for i in range(5_000)]
    assert len(saved.entries(many)) == saved.MAX_SAVED and len(calls) == saved.MAX_SAVED


def test_finding8_the_job_cap_keys_on_the_signed_cookie():
    """Two browsers behind one address (a TLS proxy on this host) are two clients for the
    job cap too: the request's key is the signed cookie's id that identity.install marks."""
    import app as dash_app
    from dashboard.jobs.background import request_client
    from dashboard.server import identity

    server = dash_app.server
    key = identity.secret()
    seen = []
    for cid in ("a" * 32, "b" * 32, None):
        headers = {"Cookie": f"{identity.COOKIE}={identity.sign(cid, key)}"} if cid else {}
        with server.test_request_context("/", headers=headers,
                                         environ_base={"REMOTE_ADDR": "127.0.0.1"}):
            server.preprocess_request()  # the before-request hooks, identity's among them
            seen.append(request_client())
    assert seen == [f"cookie:{'a' * 32}", f"cookie:{'b' * 32}", "127.0.0.1"]
