"""PNG rendering with kaleido's headless Chromium, closed to the network and to local files.

The dashboard only renders figures it built itself (:mod:`dashboard.server.export`); this is defence
in depth should one ever name a URL or a file (plotly's ``layout.images`` fetch their ``source``):

* the page kaleido renders in carries a content security policy that lets it load its own
  scripts (plotly.js and kaleido's, from files) and nothing else: images only as ``data:`` or
  ``blob:`` URLs, no fetch/XHR, no fonts or styles from anywhere (so no ``http://`` and no
  ``file://`` image is ever loaded); MathJax (loaded from a CDN by default) is left out;
* Chromium itself starts through ``chromium-offline`` (next to this module), which adds
  ``--host-resolver-rules="MAP * ~NOTFOUND"`` (no host name resolves) and a proxy on a closed
  loopback port for every URL, loopback included (so no IP address is reached either).

Checked by ``tests/test_hostile_requests.py``: a figure with a ``layout.images`` source on a
loopback HTTP server and one ``file://`` image renders to exactly the PNG of the same figure
without images, and the server counts no request.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import kaleido
from kaleido._page_generator import PageGenerator

from dashboard.settings import SETTINGS, export_to_children

WRAPPER = Path(__file__).resolve().parent / "chromium-offline"
POLICY = ("default-src 'none'; script-src file: 'unsafe-inline' 'unsafe-eval'; "
          "style-src 'unsafe-inline'; img-src data: blob:; font-src data:; connect-src 'none'; "
          "media-src 'none'; object-src 'none'; frame-src 'none'; form-action 'none'")


class OfflinePage(PageGenerator):
    """kaleido's page with the content security policy above, without MathJax."""

    header = PageGenerator.header.replace(
        "<head>", f'<head>\n        <meta http-equiv="Content-Security-Policy" content="{POLICY}">',
        1)

    def __init__(self) -> None:
        super().__init__(mathjax=False)


class _IgnoredDecodeError(logging.Filter):
    """choreographer (kaleido's Chromium driver) logs a message from Chromium it cannot decode
    as an error with a traceback, then ignores it ("JSONError decoding message. Ignoring",
    ``choreographer/channels/pipe.py``): the export goes on and succeeds or fails on its own,
    which the caller reports. So it is no server error: the first one is kept as a one-line
    warning (no traceback), the rest of the process's as debug records."""

    seen = False

    def filter(self, record: logging.LogRecord) -> bool:
        if record.getMessage().startswith("JSONError decoding message"):
            record.exc_info, record.exc_text = None, None
            record.levelno, record.levelname = ((logging.DEBUG, "DEBUG") if self.seen
                                                else (logging.WARNING, "WARNING"))
            type(self).seen = True
        return True


logging.getLogger("choreographer.channels.pipe").addFilter(_IgnoredDecodeError())


def browser() -> str:
    """The Chromium kaleido would use (``BROWSER_PATH``, else the first one found)."""
    from choreographer.browsers.chromium import Chromium

    found = SETTINGS.browser_path or Chromium.find_browser(skip_local=False)
    if not found:
        raise RuntimeError("no Chromium found for PNG export (set BROWSER_PATH)")
    return str(found)


def render(figure: dict[str, Any], width: int, height: int, scale: float) -> bytes:
    """The figure (a plotly figure dict) as PNG bytes."""
    export_to_children("PERF_CHROMIUM", browser())  # what chromium-offline runs
    opts = {"format": "png", "width": width, "height": height, "scale": scale}
    return kaleido.calc_fig_sync(figure, opts=opts,
                                 kopts={"page_generator": OfflinePage(), "path": str(WRAPPER)})
