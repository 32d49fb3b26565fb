"""The what-if dashboard: ``python app.py`` serves it on http://127.0.0.1:8050 (Flask's server,
debug off, this machine only).

``server = app.server`` is the WSGI app for ``gunicorn app:server`` (settings in
``gunicorn.conf.py``). Long sweeps run as Dash background callbacks
(:mod:`dashboard.jobs.background`): in processes of this host through ``diskcache`` in ``cache/``
(``PERF_CACHE_DIR`` moves it), or on Celery workers when ``REDIS_URL`` is set (``celery -A
app:celery_app worker``).
"""

from __future__ import annotations

import argparse
import functools
from pathlib import Path

from dash import Dash
from dash.exceptions import DependencyException
from flask import Response

from dashboard import state  # noqa: F401 - registers their callbacks
from dashboard.jobs import (
    compute,  # noqa: F401 - registers their callbacks
    procs,
)
from dashboard.jobs.background import background_manager, celery_app  # noqa: F401 - celery -A app
from dashboard.layout import shell
from dashboard.server import export, guard, identity  # noqa: F401 - registers their callbacks
from dashboard.server.worker import fixed_host
from dashboard.settings import SETTINGS

HERE = Path(__file__).resolve().parent
# A request carries the callback's inputs; the largest is a figure sent back for export (about
# 50 kB for the default views) or a scenario upload (16 kB file, base64): 1 MiB leaves room.
MAX_REQUEST_BYTES = 1 << 20

app = Dash(
    __name__,
    use_pages=True,
    pages_folder=str(HERE / "dashboard" / "pages"),
    assets_folder=str(HERE / "assets"),
    background_callback_manager=background_manager(),
    suppress_callback_exceptions=True,
    title="Transformer training what-if",
    update_title=None,
)
app.layout = shell
server = app.server
# the page never shows the client's Host header (Dash's page meta tags carried it): every
# request is seen with the one host the deployment names (PERF_PUBLIC_HOST, default localhost)
PUBLIC_HOST = SETTINGS.public_host
# … and the one scheme (PERF_PUBLIC_SCHEME, http or https; a client's X-Forwarded-Proto is not read)
PUBLIC_SCHEME = SETTINGS.public_scheme
server.wsgi_app = fixed_host(server.wsgi_app, PUBLIC_HOST, PUBLIC_SCHEME)
server.config["MAX_CONTENT_LENGTH"] = MAX_REQUEST_BYTES
guard.install(app)  # every callback request checked before Dash reads it (400 otherwise)
identity.install(server)  # the signed cookie the per-client limits key on
if celery_app is None:  # one-host jobs: their forkserver started with the first request
    procs.warm_on_first_request(server)


@server.errorhandler(DependencyException)
def unknown_component_file(_exc: DependencyException) -> tuple[str, int]:
    """A path under /_dash-component-suites/ that no package registered (e.g. ../../etc/passwd):
    404, as for any other missing file (Dash raised, which Flask answered with 500)."""
    return "Not found\n", 404


@functools.cache
def content_security_policy() -> str:
    """Scripts only from this server plus Dash's own inline scripts (by hash), no eval; inline
    styles (Dash's components, plotly.js and the grid set them); images also as data:/blob: URLs
    (plotly's PNG download); no plugins, no framing by other sites. Checked in headless Chromium
    (no CSP errors on any page). Computed at the first response, once every callback exists."""
    scripts = " ".join(["'self'", *app.csp_hashes()])
    return "; ".join([
        "default-src 'self'", f"script-src {scripts}", "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data: blob:", "font-src 'self' data:", "connect-src 'self'",
        "worker-src 'self' blob:", "object-src 'none'", "base-uri 'self'",
        "form-action 'self'", "frame-ancestors 'self'",
    ])


@server.after_request
def security_headers(response: Response) -> Response:
    response.headers.setdefault("Content-Security-Policy", content_security_policy())
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    response.headers.setdefault("X-Frame-Options", "SAMEORIGIN")
    response.headers.setdefault("Referrer-Policy", "same-origin")
    return response


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="Serve the transformer training what-if dashboard.")
    ap.add_argument("--host", default="127.0.0.1",
                    help="interface to bind (default 127.0.0.1: this machine only; the HOST "
                         "environment variable, which many shells set, is not read)")
    ap.add_argument("--port", type=int, default=SETTINGS.port)
    ap.add_argument("--debug", action="store_true", help="Dash debug mode (never in production)")
    args = ap.parse_args(argv)
    app.run(host=args.host, port=args.port, debug=args.debug)


if __name__ == "__main__":
    main()
