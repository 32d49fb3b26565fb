"""Finding 3 of the probe (tests/test_hostile_requests.py): the export renders only figures the
server builds — a figure sent by the client is never rendered, and the PNG renderer
(Chromium) fetches nothing, from the network or from files. Shares test_hostile_requests'
app and helpers."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import test_hostile_requests
from test_hostile_requests import defaults, send

cbs = test_hostile_requests.cbs  # its fixture (the app's callbacks), found here by pytest

@pytest.fixture
def counting_server() -> Iterator[tuple[str, list[str]]]:
    """A loopback HTTP server that counts every request it gets (and serves a tiny PNG)."""
    import http.server
    import threading

    hits: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            hits.append(self.path)
            self.send_response(200)
            self.send_header("Content-Type", "image/png")
            self.end_headers()
            self.wfile.write(RED_PNG)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", hits
    server.shutdown()


def _png(width: int, height: int, rgb: tuple[int, int, int]) -> bytes:
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))
    raw = b"".join(b"\x00" + bytes(rgb) * width for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2,
                                                                 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


RED_PNG = _png(16, 16, (255, 0, 0))


def hostile_figure(url: str, file_url: str) -> dict[str, Any]:
    """A figure whose layout images point at a loopback URL and a local file."""
    image = {"xref": "paper", "yref": "paper", "x": 0, "y": 1, "sizex": 1, "sizey": 1,
             "sizing": "stretch", "layer": "above"}
    return {"data": [{"type": "scatter", "x": [1, 2], "y": [3, 4], "name": "=1+1"}],
            "layout": {"images": [{**image, "source": f"{url}/probe.png"},
                                  {**image, "source": file_url}]}}


def test_finding3_export_never_renders_a_client_figure(cbs, counting_server, tmp_path):
    """Finding 3 (high): the export callback rendered the figure the client sent with kaleido's
    Chromium: a ``layout.images`` URL on 127.0.0.1 was fetched by the server. Now the export
    rebuilds the figure on the server; a figure in the request is never rendered."""
    url, hits = counting_server
    red = tmp_path / "red.png"
    red.write_bytes(RED_PNG)
    dep = cbs.find('"type":"download"')
    values = {**defaults(), "graph": hostile_figure(url, red.as_uri())}
    status, text = send(cbs, dep, values)
    assert status in (200, 204, 400), text[:300]
    assert hits == [], f"the server fetched {hits}"
    if status == 200:
        assert "=1+1" not in text  # the client's trace never reaches the file


def test_finding3_chromium_fetches_nothing(counting_server, tmp_path):
    """Defence in depth: the PNG renderer's Chromium fetches no URL and reads no ``file://``
    image even when a figure names them (the PNG equals the one without images)."""
    from dashboard.server import export

    url, hits = counting_server
    red = tmp_path / "red.png"
    red.write_bytes(RED_PNG)
    fig = hostile_figure(url, red.as_uri())
    with_images, _ = export.render(fig, "png")
    without, _ = export.render({**fig, "layout": {}}, "png")
    assert hits == [], f"Chromium fetched {hits}"
    assert with_images == without
