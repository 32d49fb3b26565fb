"""The what-if dashboard: ``python app.py`` serves it on http://127.0.0.1:8050.

``server = app.server`` is the WSGI app for ``gunicorn app:server``. Long sweeps run as Dash
background callbacks through ``diskcache`` in ``cache/`` (``PERF_CACHE_DIR`` moves it).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import diskcache
from dash import Dash, DiskcacheManager

from dashboard import compute, export, state  # noqa: F401 - registers their callbacks
from dashboard.layout import shell

HERE = Path(__file__).resolve().parent


def background_manager() -> DiskcacheManager:
    """Background callbacks run in processes that share this on-disk queue (one host)."""
    path = compute.CACHE_DIR / "background"
    path.mkdir(parents=True, exist_ok=True)
    return DiskcacheManager(diskcache.Cache(str(path)))


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


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="Serve the transformer training what-if dashboard.")
    ap.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"),
                    help="interface to bind (default 127.0.0.1: this machine only)")
    ap.add_argument("--port", type=int, default=int(os.environ.get("PORT", 8050)))
    ap.add_argument("--debug", action="store_true", help="Dash debug mode (never in production)")
    args = ap.parse_args(argv)
    app.run(host=args.host, port=args.port, debug=args.debug)


if __name__ == "__main__":
    main()
