"""The gunicorn worker of the deployment (``worker_class`` in ``gunicorn.conf.py``): gunicorn's
gthread worker with the guards it lacks. In the documented deployment (``scripts/serve``) nginx
sits in front and already buffers requests and responses per client (docs/deployment.md); these
guards keep gunicorn safe on its own too (``gunicorn app:server`` without the proxy, or a client
that reaches its port), and cover what nginx does not: a request that computes too long.

* Slow senders. gthread hands a connection to a worker thread as soon as its first byte
  arrives; the thread then reads the rest of the request blocking, so a client sending one byte
  a second holds it (with one thread per worker, the whole worker). Here the worker's event
  loop reads the request itself, without blocking — head and body up to ``BUFFER_BYTES`` — and
  hands it to a thread only once it is complete; a request not complete within
  ``READ_TIMEOUT_S`` is dropped. A slow client costs a socket and its buffer, not a thread.
  The same holds for a request pipelined behind another (its first bytes arrived with the
  previous request): it goes back to the event loop with those bytes, under a fresh deadline,
  instead of to a thread that would read the rest blocking (gthread's own path for it).
  The deadline covers the whole request, head and body, however the bytes trickle in; no
  thread ever reads from the socket, so nothing reads past it.
* Bodies over the limit and chunked bodies never reach the app. A ``Content-Length`` over
  ``MAX_BODY_BYTES`` (the app's 1 MiB) is answered 413 by the event loop at once and the
  connection closed, its body never passed on: what the client sends meanwhile is discarded for
  at most ``LINGER_S`` in all (so that a client sending its body at full speed reads the 413
  instead of a reset; nginx's lingering close, bounded as a whole), then closed. (gunicorn
  drained it, 1 kB at a time with no deadline for the whole, after the app's 413: a body
  trickled a byte every 4 s held a worker for ever, issue 29 finding 1). A request with
  ``Transfer-Encoding`` (chunked) is answered 411 and closed: no page sends one (browsers send a
  length; nginx, in front, buffers a chunked body and passes it on with a length), and
  gunicorn's lenient chunk parser took a first chunk ending in ``0\\r\\n\\r\\n`` for the end, so a
  thread then read the rest blocking (finding 5).
* Slow readers. A response is written without blocking: what the kernel's socket buffer does
  not take at once is kept (``dashboard.server.outbox``) and sent by the event loop as the client
  reads, so a client reading 2 kB every 2 s holds no thread; a response not fully sent within
  ``WRITE_TIMEOUT_S`` is dropped. The bytes so kept are capped per worker
  (``OUTBOX_BYTES``); past the cap a thread writes the rest itself, still within the deadline.
* Stuck requests. gunicorn's ``timeout`` never fires for a request thread that loops: the main
  thread keeps heart-beating. Here a watchdog thread ends the worker process (``os._exit``,
  logged) when a request has run longer than ``REQUEST_TIMEOUT_S``; the arbiter starts a new one.
  (Python code is preempted every few milliseconds, so the watchdog runs while a request spins;
  a C call that never releases the GIL stops the heartbeat instead, and gunicorn's own
  ``timeout`` kills the worker.)
* gunicorn's own error answers (400, 414, 431, written before the app sees the request) carry
  the same security headers as the app's.
"""

from __future__ import annotations

import contextlib
import os
import re
import selectors
import socket
import struct
import threading
import time
from collections import deque
from functools import partial

from gunicorn import util
from gunicorn.workers.gthread import ThreadWorker

from dashboard.server import identity
from dashboard.server.fairqueue import FairQueue
from dashboard.server.outbox import Budget, Outbox
from dashboard.settings import SETTINGS

READ_TIMEOUT_S = SETTINGS.read_timeout_s
REQUEST_TIMEOUT_S = SETTINGS.request_timeout_s
# the whole response, from the app's return to its last byte: the ~5 MB HTML export reaches a
# client on a 2 Mbit/s link in 20 s
WRITE_TIMEOUT_S = SETTINGS.write_timeout_s
MAX_BODY_BYTES = 1 << 20  # the app's request limit (app.MAX_REQUEST_BYTES)
BUFFER_BYTES = MAX_BODY_BYTES + (64 << 10)  # the body plus a head
LINGER_S = 1.0  # after a refusal, what the client still sends is discarded this long at most
# responses kept for slow readers, per worker: 12 HTML exports (within the worker's 4 GiB)
OUTBOX_BYTES = SETTINGS.outbox_bytes
ERROR_HEADERS = ("X-Content-Type-Options: nosniff\r\nX-Frame-Options: SAMEORIGIN\r\n"
                 "Referrer-Policy: same-origin\r\n"
                 "Content-Security-Policy: default-src 'none'; frame-ancestors 'self'\r\n")
_LENGTH = re.compile(rb"\r\ncontent-length:[ \t]*(\d+)[ \t]*\r\n", re.I)
_ENCODED = re.compile(rb"\r\ntransfer-encoding[ \t]*:", re.I)
# the answers of the event loop itself: (status, reason, message)
TOO_LARGE = (413, "Request Entity Too Large", "The request is larger than 1 MiB.")
NO_LENGTH = (411, "Length Required",
             "Send the request body with a Content-Length (no chunked encoding).")


def write_error(sock, status_int: int, reason: str, mesg: str) -> None:
    """gunicorn's ``util.write_error`` with the security headers."""
    body = (f"<html><head><title>{reason}</title></head><body><h1>{reason}</h1>"
            f"{util.html.escape(mesg)}</body></html>")
    head = (f"HTTP/1.1 {status_int} {reason}\r\nConnection: close\r\n"
            f"Content-Type: text/html\r\n{ERROR_HEADERS}Content-Length: {len(body)}\r\n\r\n")
    util.write_nonblock(sock, (head + body).encode("latin1"))


def refused(data: bytes) -> tuple[int, str, str] | None:
    """The event loop's own answer to a request head it will not pass on (a body over the
    limit: 413; any transfer coding: 411), or None."""
    end = data.find(b"\r\n\r\n")
    if end < 0:
        return None
    head = data[:end + 2]
    if _ENCODED.search(head):
        return NO_LENGTH
    length = _LENGTH.search(head)
    return TOO_LARGE if length and _size(length.group(1)) > MAX_BODY_BYTES else None


def _size(digits: bytes) -> int:
    """A Content-Length's value (past 12 digits: more than any limit, never parsed)."""
    return int(digits) if len(digits) <= 12 else 1 << 62


def complete(data: bytes) -> bool:
    """Whether ``data`` holds a whole request (head and, when sized, body), or a head the
    parser refuses by itself (over ``BUFFER_BYTES`` without its end: 431/414)."""
    end = data.find(b"\r\n\r\n")
    if end < 0:
        return len(data) >= BUFFER_BYTES
    length = _LENGTH.search(data[:end + 2])
    return length is None or len(data) >= end + 4 + _size(length.group(1))


class HardenedWorker(ThreadWorker):
    """``gthread`` that buffers requests in its event loop and kills stuck requests."""

    def init_process(self) -> None:
        util.write_error = write_error  # gunicorn's error answers (base.handle_error)
        self.reading: deque = deque()  # connections whose request is being read
        self.lingering: dict = {}  # refused connections → when they are closed at the latest
        self.writing: deque = deque()  # connections whose response is being sent
        self.outbox_budget = Budget(OUTBOX_BYTES)
        self.fair, self.busy = FairQueue(), 0  # complete requests waiting; threads working
        self.secret = identity.secret()  # the key of the signed client cookie
        self.started: dict[int, float] = {}  # thread id → when its request started
        threading.Thread(target=self._watchdog, name="request-watchdog", daemon=True).start()
        super().init_process()

    # ---------------------------------------------------------------- buffering
    def enqueue_req(self, conn) -> None:
        if self.cfg.is_ssl or getattr(conn, "buffered", None) is not None:
            return self._queue(conn, b"")  # already read
        # a request pipelined behind the last one: its first bytes were read with it
        ahead = conn.parser.unreader.take_buffered() if conn.parser is not None else b""
        if ahead and refused(ahead):
            return self._refuse(conn, refused(ahead), registered=False)
        if ahead and complete(ahead):
            conn.parser.unreader.unread(ahead)
            return self._queue(conn, ahead)
        conn.buffered = bytearray(ahead)
        conn.deadline = time.monotonic() + READ_TIMEOUT_S
        conn.sock.setblocking(False)
        self.poller.register(conn.sock, selectors.EVENT_READ, partial(self._readable, conn))
        self.reading.append(conn)

    def _readable(self, conn, _sock) -> None:
        try:
            data = conn.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:  # the client went away
            self._drop(conn)
            return
        conn.buffered += data
        answer = refused(conn.buffered)
        if answer is not None:
            self._refuse(conn, answer)
        elif complete(conn.buffered):
            self._stop_reading(conn)
            conn.data_ready = True
            self._queue(conn, conn.buffered)

    # ---------------------------------------------------------------- fair dispatch
    def _queue(self, conn, head: bytes) -> None:
        """Wait for a thread in the fair queue (dashboard.server.fairqueue), keyed by the client."""
        conn.client_key = client_key(conn.client, head, self.secret)
        self.fair.push(conn, conn.client_key)
        self._dispatch()

    def _dispatch(self) -> None:
        while self.fair and self.busy < self.cfg.threads:
            conn = self.fair.pop()
            self.busy += 1
            conn.started_s = time.monotonic()
            super().enqueue_req(conn)

    def _refuse(self, conn, answer: tuple[int, str, str], registered: bool = True) -> None:
        """Answer ``answer`` from the event loop and stop sending; discard what the client
        still sends for at most ``LINGER_S`` (never passed on), then close."""
        self.log.info("refused a request: %s %s", answer[0], answer[1])
        if registered:
            self._stop_reading(conn)
        try:
            conn.sock.setblocking(False)
            write_error(conn.sock, *answer)
            conn.sock.shutdown(socket.SHUT_WR)
            self.poller.register(conn.sock, selectors.EVENT_READ, partial(self._discard, conn))
        except (OSError, ValueError):
            self.nr_conns -= 1
            conn.close()
            return
        self.lingering[conn] = time.monotonic() + LINGER_S

    def _discard(self, conn, _sock) -> None:
        try:
            data = conn.sock.recv(1 << 16)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._end_linger(conn)

    def _end_linger(self, conn) -> None:
        del self.lingering[conn]
        with contextlib.suppress(KeyError, ValueError, OSError):
            self.poller.unregister(conn.sock)
        self.nr_conns -= 1
        conn.close()

    def _stop_reading(self, conn) -> None:
        self.poller.unregister(conn.sock)
        self.reading.remove(conn)

    def _drop(self, conn) -> None:
        self._stop_reading(conn)
        self.nr_conns -= 1
        conn.close()

    def murder_pending(self) -> None:
        super().murder_pending()
        now = time.monotonic()
        for conn in [c for c, end in self.lingering.items() if end < now]:
            self._end_linger(conn)
        for conn in [c for c in self.reading if c.deadline < now]:
            self.log.info("dropped a request not received within %g s", READ_TIMEOUT_S)
            self._drop(conn)
        for conn in [w[0] for w in self.writing if w[1].deadline < now]:
            self.log.info("dropped a response not read within %g s", WRITE_TIMEOUT_S)
            self._drop_writer(conn)

    def handle(self, conn):
        data = getattr(conn, "buffered", None)
        if data is not None:
            conn.buffered = None
            conn.sock.setblocking(True)
            conn.init()
            conn.parser.unreader.unread(bytes(data))
            # nothing is read past the buffer (refused() keeps out what would be); a read that
            # still happened would wait this long at most
            conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO,
                                 _timeval(READ_TIMEOUT_S))
        return super().handle(conn)

    # ---------------------------------------------------------------- responses
    def handle_request(self, req, conn):
        """Serve one request with the response written to an :class:`Outbox`."""
        real = conn.sock
        conn.sock = out = Outbox(real, self.outbox_budget, WRITE_TIMEOUT_S)
        try:
            return super().handle_request(req, conn)
        finally:
            conn.sock, conn.outbox = real, out

    def finish_request(self, conn, fs) -> None:
        started = getattr(conn, "started_s", None)
        if started is not None:  # a thread is free again: charge its client, serve the next
            conn.started_s = None
            self.busy -= 1
            self.fair.charge(conn.client_key, time.monotonic() - started)
            self._dispatch()
        conn.buffered = None
        out, conn.outbox = getattr(conn, "outbox", None), None
        if out is None or not out.pending:
            return super().finish_request(conn, fs)
        if fs.cancelled() or fs.exception() is not None:
            out.release()
            return super().finish_request(conn, fs)
        # the rest of the response goes out from the event loop as the client reads it; then
        # the connection carries on as gunicorn decided (kept alive or closed)
        try:
            conn.sock.setblocking(False)
            self.poller.register(conn.sock, selectors.EVENT_WRITE,
                                 partial(self._writable, conn, out, fs))
        except (OSError, ValueError):  # closed meanwhile (gunicorn gave up on the request)
            out.release()
            self.nr_conns -= 1
            conn.close()
            return
        self.writing.append((conn, out, fs))

    def _writable(self, conn, out: Outbox, fs, _sock) -> None:
        try:
            done = out.send_some()
        except OSError:  # the client went away
            self._drop_writer(conn)
            return
        if done:
            self._stop_writing(conn)
            super().finish_request(conn, fs)

    def _stop_writing(self, conn) -> None:
        self.poller.unregister(conn.sock)
        entry = next(w for w in self.writing if w[0] is conn)
        self.writing.remove(entry)
        return entry[1]

    def _drop_writer(self, conn) -> None:
        """Give up a response: reset the connection (a plain close would leave the kernel
        delivering its send buffer to the slow reader for minutes)."""
        self._stop_writing(conn).release()
        self.nr_conns -= 1
        with contextlib.suppress(OSError):
            conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        conn.close()

    # ---------------------------------------------------------------- time limit
    def load_wsgi(self) -> None:
        super().load_wsgi()
        self.wsgi = Timed(self.wsgi, self.started)

    def _watchdog(self) -> None:
        while True:
            time.sleep(min(1.0, REQUEST_TIMEOUT_S / 4))
            now = time.monotonic()
            if any(now - t > REQUEST_TIMEOUT_S for t in list(self.started.values())):
                self.log.critical("a request exceeded its time limit of %g s: worker %s ends "
                                  "(the arbiter starts a new one)", REQUEST_TIMEOUT_S,
                                  os.getpid())
                os._exit(70)


class Timed:
    """The WSGI app, with the start of each call recorded per thread for the watchdog (only
    the app's own time: sending the response to a slow reader is bounded by
    ``WRITE_TIMEOUT_S`` instead). Other attributes are the app's (``post_worker_init`` uses
    them)."""

    def __init__(self, app, started: dict[int, float]):
        self.app, self.started = app, started

    def __call__(self, environ, start_response):
        tid = threading.get_ident()
        self.started[tid] = time.monotonic()
        try:
            return self.app(environ, start_response)
        finally:
            self.started.pop(tid, None)

    def __getattr__(self, name: str):
        return getattr(self.app, name)


def _timeval(seconds: float) -> bytes:
    whole = int(seconds)
    return struct.pack("ll", whole, int((seconds - whole) * 1e6))


_REAL_IP = re.compile(rb"\r\nx-real-ip:[ \t]*([0-9a-f.:]{1,45})[ \t]*\r\n", re.I)


def client_key(client, head: bytes, key: bytes | None = None) -> str:
    """The fair queue's client (:func:`dashboard.server.identity.identity`): the signed
    cookie's id, else the address: the peer's over TCP (its ``X-Real-IP`` ignored); behind
    nginx on the unix socket (mode 0700: only nginx and the app's own user connect) the
    ``X-Real-IP`` nginx sets."""
    if isinstance(client, tuple) and client:
        address = str(client[0])
    else:
        found = _REAL_IP.search(bytes(head[:8192]))
        address = found.group(1).decode() if found else "local"
    return identity.identity(identity.cookie_in_head(head), address, key)


FORWARDED = ("HTTP_X_FORWARDED_HOST", "HTTP_X_FORWARDED_PROTO", "HTTP_X_FORWARDED_SCHEME",
             "HTTP_X_FORWARDED_SSL", "HTTP_X_FORWARDED_PORT", "HTTP_FORWARDED")


def fixed_host(wsgi_app, host: str, scheme: str = "http"):
    """``wsgi_app`` seeing every request addressed to ``scheme://host``: the client's ``Host``
    and ``X-Forwarded-*`` (``Proto`` included: gunicorn turns it into the URL scheme for a
    local peer) never reach the app, so no page can reflect them (Dash Pages wrote them into
    its ``og:url``/``twitter:url`` meta tags)."""
    def app(environ, start_response):
        environ["HTTP_HOST"] = environ["SERVER_NAME"] = host
        environ["wsgi.url_scheme"] = scheme
        for name in FORWARDED:
            environ.pop(name, None)
        return wsgi_app(environ, start_response)
    return app
