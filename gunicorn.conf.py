"""gunicorn settings for ``gunicorn app:server`` (gunicorn reads ./gunicorn.conf.py by itself when
started from the repository's root; ``-c gunicorn.conf.py`` names it explicitly).

Environment: ``PORT`` (8050, on 127.0.0.1: this machine only; ``scripts/serve`` puts nginx in
front for others), or ``GUNICORN_BIND`` for a full bind address (``HOST`` is not read);
``WEB_CONCURRENCY`` worker processes (2); ``GUNICORN_THREADS`` threads per worker (1);
``GUNICORN_REQUEST_TIMEOUT`` seconds a request may compute (60); ``GUNICORN_READ_TIMEOUT``
seconds a client has to send its request (10); ``GUNICORN_WRITE_TIMEOUT`` seconds a client has
to read its response (30); ``GUNICORN_WORKER_MEMORY_MB`` address space per worker (4096).
Command-line options win.
"""

from __future__ import annotations

import os
import resource as _resource

# HOST is not read: many shells and container runtimes set it to the machine's name, which
# silently made gunicorn listen on a public interface (issue 26)
bind = os.environ.get("GUNICORN_BIND") or f"127.0.0.1:{os.environ.get('PORT', '8050')}"
workers = int(os.environ.get("WEB_CONCURRENCY", "2"))
# the gthread worker, also with one thread: keep-alive connections, and a slow client's socket
# waits in the worker's event loop instead of holding the process. One thread per worker by
# default: the callbacks are CPU-bound Python holding the GIL, so more threads only contend
# (bench/load.py, 10 % new NIC what-ifs: 4 threads 61 req/s, p95 1.5 s; 2 threads 95 req/s,
# p95 0.84 s; 1 thread see the README); serve more at once with more processes
# (WEB_CONCURRENCY), not threads.
# (dashboard.server.worker: gthread that reads each request in its event loop, so a slow client
# holds no thread; a watchdog ends the worker when a request runs over GUNICORN_REQUEST_TIMEOUT;
# gunicorn's own error answers carry the security headers)
worker_class = "dashboard.server.worker.HardenedWorker"
# responses are written through the worker's outbox (a slow reader holds no thread), which
# sendfile(2) would bypass: static files are sent as ordinary writes
sendfile = False
threads = int(os.environ.get("GUNICORN_THREADS", "1"))
worker_connections = 200  # open connections per worker (each buffers at most ~1 MiB)
# a worker whose main thread is silent this long (a C call holding the GIL) is killed
timeout = 120
graceful_timeout = 30  # on restart or stop, requests in flight get this long to finish
keepalive = 5
# recycle each worker after about this many requests (jitter: not all at once), so a slow leak
# never grows without bound
max_requests = 2000
max_requests_jitter = 200
# the app, its figures and the estimator load in each worker after the fork (no shared state)
preload_app = False
accesslog = "-"
errorlog = "-"
loglevel = os.environ.get("GUNICORN_LOGLEVEL", "info")
# client, request line, status, response bytes, duration in ms (no query strings: %(U)s)
access_log_format = '%(h)s "%(m)s %(U)s" %(s)s %(B)s %(M)sms'
# headers and request lines of a sane size only (the body limit is Flask's MAX_CONTENT_LENGTH)
limit_request_line = 8190
limit_request_fields = 100
limit_request_field_size = 8190
proc_name = "transformer-what-if"
# no gunicornc control socket (gunicorn >= 25 opens one at a fixed path per user by default, which
# a second instance on the host, e.g. the tests', would take over)
control_socket_disable = True


# soft limit of each worker's address space (its job processes and Chromium inherit it): a
# request allocating past it gets a MemoryError (an inline message) and the worker lives on
_WORKER_MEMORY_MB = int(os.environ.get("GUNICORN_WORKER_MEMORY_MB", "4096"))


def post_fork(server, worker) -> None:
    """Limit the new worker's memory (soft limit only: the PNG export's Chromium, a child that
    reserves much address space without using it, raises its own)."""
    _, hard = _resource.getrlimit(_resource.RLIMIT_AS)
    limit = _WORKER_MEMORY_MB << 20
    if hard != _resource.RLIM_INFINITY:
        limit = min(limit, hard)
    _resource.setrlimit(_resource.RLIMIT_AS, (limit, hard))


def post_worker_init(worker) -> None:
    """Let Dash finish its first-request setup before the worker takes connections.

    Dash runs it on a worker's first request and flags it done before doing it, so concurrent
    first requests to a fresh threaded worker (a browser fetching its scripts from the second
    worker, or a burst of callbacks) found no registered scripts (500) or callbacks. One request
    through the app here does it once, before any thread serves.
    """
    worker.wsgi.test_client().get("/_dash-dependencies")


def on_starting(server) -> None:
    """Create the deployment's client-cookie secret (dashboard.server.identity) once, before
    any worker forks, so that every worker signs and checks with the same one."""
    from dashboard.server import identity

    try:
        identity.create_secret(identity.secret_file())
    except OSError as exc:  # an unwritable cache: each worker falls back (and logs it)
        server.log.warning("client identity: no secret file (%s)", exc)
    except identity.SecretError as exc:  # someone else's, or readable by others: refuse
        raise SystemExit(f"client identity: {exc}") from None
