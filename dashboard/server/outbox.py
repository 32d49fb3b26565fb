"""A response socket that never blocks its thread on a slow reader (used by
:class:`dashboard.server.worker.HardenedWorker`).

gunicorn writes a response with ``sock.sendall``: on a blocking socket the thread waits until
the client has read all but the kernel's send buffer (a few hundred kB on loopback), so a
client reading the ~5 MB HTML export 2 kB every 2 s held a thread for an hour, and two such
clients the whole default deployment. :class:`Outbox` stands in for the socket while a request
is served: ``sendall`` passes the kernel what it takes at once (``MSG_DONTWAIT``) and keeps the
rest, which the worker's event loop sends as the client reads, under a deadline for the whole
response. Kept bytes are counted against one budget per worker (:class:`Budget`); past it, a
thread sends the rest itself, waiting at most until the same deadline. (nginx does the same
with its ``proxy_buffers`` and temporary files: ngx_http_proxy_module, "proxy_buffering".)
"""

from __future__ import annotations

import errno
import selectors
import socket
import threading
import time

CHUNK_BYTES = 1 << 16


class Budget:
    """Bytes kept by every outbox of one worker, at most ``limit``."""

    def __init__(self, limit: int):
        self.limit, self.used, self._lock = limit, 0, threading.Lock()

    def take(self, size: int) -> bool:
        with self._lock:
            if self.used + size > self.limit:
                return False
            self.used += size
            return True

    def give(self, size: int) -> None:
        with self._lock:
            self.used -= size


class Outbox:
    """The socket as the response sees it: sends what the kernel takes now, keeps the rest."""

    def __init__(self, sock: socket.socket, budget: Budget, write_timeout_s: float):
        self.sock, self.budget, self.pending = sock, budget, bytearray()
        self.timeout_s, self.deadline = write_timeout_s, float("inf")

    def sendall(self, data: bytes) -> None:
        if self.deadline == float("inf"):  # the response's first bytes: its clock starts
            self.deadline = time.monotonic() + self.timeout_s
        view = memoryview(data).cast("B")
        if not self.pending:
            view = view[self._send_now(view):]
        if not len(view):
            return
        if self.budget.take(len(view)):
            self.pending += view
            return
        self.flush_blocking(view)  # over the worker's budget: this thread sends, bounded

    def send(self, data: bytes, flags: int = 0) -> int:  # gunicorn's "100 Continue"
        self.sendall(data)
        return len(data)

    def _send_now(self, view: memoryview) -> int:
        try:
            return self.sock.send(view, socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            return 0

    def flush_blocking(self, rest: memoryview | bytes = b"") -> None:
        """Send what is kept, then ``rest``, waiting for the client at most until the
        deadline (then the connection is given up: BrokenPipeError, which gunicorn ignores)."""
        data = bytes(self.pending) + bytes(rest)
        self.release()
        view, sel = memoryview(data), selectors.DefaultSelector()
        try:
            sel.register(self.sock, selectors.EVENT_WRITE)
            while len(view):
                left = self.deadline - time.monotonic()
                if left <= 0 or not sel.select(left):
                    raise BrokenPipeError(errno.EPIPE, "response not read within its deadline")
                view = view[self._send_now(view[:CHUNK_BYTES * 16]):]
        finally:
            sel.close()

    def send_some(self) -> bool:
        """One non-blocking send of the kept bytes (the event loop's); True once all are sent.
        OSError when the client has gone."""
        sent = self._send_now(memoryview(self.pending)[:CHUNK_BYTES * 16])
        del self.pending[:sent]
        self.budget.give(sent)
        return not self.pending

    def release(self) -> None:
        """Forget the kept bytes (sent another way, or the connection dropped)."""
        self.budget.give(len(self.pending))
        self.pending = bytearray()

    def __getattr__(self, name: str):
        return getattr(self.sock, name)
