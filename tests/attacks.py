"""Hostile clients for the connection attack tests (``tests/test_connections.py``): each runs
in a thread on loopback until told to stop or until the server drops it, and records when that
happened. Normal clients are timed beside them."""

from __future__ import annotations

import socket
import threading
import time
import urllib.request
from dataclasses import dataclass, field

# the 4.8 MB plotly.js bundle the app serves: the size of the HTML export (about 5 MB)
BIG = "/_dash-component-suites/plotly/package_data/plotly.min.js"


@dataclass
class Hostile:
    """One hostile connection's record: bytes sent or read, and when the server dropped it
    (seconds after it began; None while it is still open)."""

    moved: int = 0
    dropped_after_s: float | None = None
    error: str = ""
    started: float = field(default_factory=time.monotonic)

    def dropped(self) -> None:
        if self.dropped_after_s is None:
            self.dropped_after_s = time.monotonic() - self.started


def _connect(port: int, source: str, rcvbuf: int | None = None) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf:  # a small window, as a slow client's: the server's writes meet back-pressure
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.bind((source, 0))
    sock.settimeout(5)
    sock.connect(("127.0.0.1", port))
    return sock


def pipeliner(port: int, stop: threading.Event, rec: Hostile, source: str = "127.0.0.1") -> None:
    """A complete request and the first byte of a second in one packet, then the rest of the
    second trickled one byte every 0.5 s (issue 26, finding 2a)."""
    follow = b"ET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 400 + b"\r\n\r\n"
    try:
        with _connect(port, source) as sock:
            sock.sendall(b"GET /_dash-layout HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\nG")
            for byte in follow:
                if stop.wait(0.5):
                    return
                sock.sendall(bytes([byte]))
                rec.moved += 1
                if _closed(sock):
                    break
    except OSError as exc:
        rec.error = str(exc)
    rec.dropped()


def drain(sock: socket.socket) -> tuple[bool, bytes]:
    """Whether the server closed the connection, and the bytes it sent meanwhile (read
    without blocking)."""
    received = b""
    sock.setblocking(False)
    try:
        while data := sock.recv(65536):
            received += data
        return True, received
    except (BlockingIOError, InterruptedError):
        return False, received
    except OSError:
        return True, received
    finally:
        sock.setblocking(True)


def _closed(sock: socket.socket) -> bool:
    """Whether the server closed the connection (what it sent meanwhile is dropped)."""
    return drain(sock)[0]


def slow_reader(port: int, stop: threading.Event, rec: Hostile, source: str = "127.0.0.1",
                path: str = BIG) -> None:
    """Request a ~5 MB response, then read 2 kB every 2 s (issue 26, finding 2b). When told
    to stop, it looks whether the server has dropped the connection meanwhile (a reset is
    seen only after the few kB already received are read)."""
    try:
        with _connect(port, source, rcvbuf=4096) as sock:
            sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
            while not stop.wait(2.0):
                data = sock.recv(2048)
                if not data:
                    break
                rec.moved += len(data)
            else:
                if not _closed(sock):
                    return
    except OSError as exc:
        rec.error = str(exc)
    rec.dropped()


def start(target, count: int, *args) -> tuple[threading.Event, list[Hostile],
                                                list[threading.Thread]]:
    """``count`` hostile clients ``target(port, stop, record, *rest)`` in threads."""
    stop, records = threading.Event(), [Hostile() for _ in range(count)]
    threads = [threading.Thread(target=target, args=(args[0], stop, rec, *args[1:]),
                                daemon=True) for rec in records]
    for t in threads:
        t.start()
    return stop, records, threads


def finish(stop: threading.Event, threads: list[threading.Thread]) -> None:
    stop.set()
    for t in threads:
        t.join(10)


def timed_get(url: str, timeout: float = 10.0, source: str | None = None) -> float:
    """Seconds a normal GET took (AssertionError unless it answered 200)."""
    start_s = time.monotonic()
    if source is None:
        with urllib.request.urlopen(url, timeout=timeout) as res:
            res.read()
            assert res.status == 200, res.status
        return time.monotonic() - start_s
    host, port = url.split("//", 1)[1].split("/", 1)[0].split(":")
    path = "/" + url.split("//", 1)[1].split("/", 1)[1] if url.count("/") > 2 else "/"
    with _connect(int(port), source) as sock:
        sock.settimeout(timeout)
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
                     .encode())
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
    assert reply.startswith(b"HTTP/1.1 200"), reply[:200]
    return time.monotonic() - start_s


def normal_latencies(url: str, seconds: float) -> list[float]:
    """A normal client's GET / latencies, one request every 0.5 s for ``seconds``."""
    out, end = [], time.monotonic() + seconds
    while time.monotonic() < end:
        out.append(timed_get(url + "/", timeout=8))
        time.sleep(0.5)
    return out
