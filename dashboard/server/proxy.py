"""The nginx configuration of the deployment (``scripts/serve``): Debian's nginx in front of
gunicorn, written into a run directory of its own — no system file is edited.

``python -m dashboard.server.proxy RUN_DIR [--listen 127.0.0.1:8050]`` writes
``RUN_DIR/nginx.conf``; gunicorn listens on the unix socket ``RUN_DIR/private/gunicorn.sock``
(mode 0700 in a directory of mode 0700: only the deploying user's processes, nginx's workers
among them, connect; no other local user reaches gunicorn behind nginx's back or sets the
``X-Real-IP`` it trusts), nginx on ``--listen`` (loopback by default: put TLS in front, or
listen on another interface, only on purpose).

What the proxy adds (each directive is nginx's own, http://nginx.org/en/docs/):

* request buffering (``proxy_request_buffering``): a request reaches gunicorn only once nginx
  has all of it; the head must arrive within ``client_header_timeout``, each body read within
  ``client_body_timeout``;
* response buffering (``proxy_buffering``, ``proxy_buffers`` and a temporary file up to
  ``proxy_max_temp_file_size``): gunicorn hands its response over at once and a slow reader
  costs nginx a connection and its buffers, never a gunicorn thread;
* per client: at most :data:`CONNECTIONS` connections (``limit_conn``), of them
  :data:`CALLBACKS` callbacks at once (a browser opens at most 6 connections per host), and
  callbacks at :data:`CALLBACK_RATE` per second with a burst (``limit_req``); past either, 429.
  A client is its ``perf_client`` cookie when it sends one of the right form
  (:mod:`dashboard.server.identity`; its signature is checked by the app, not here), else its
  address: users behind one TLS proxy on this host are told apart. Each address as a whole is
  held to :data:`ADDRESS_SHARE` times those limits, so a client shedding or inventing cookies
  gains that much at most (and gunicorn's fair queue, which checks the signature, counts such a
  client as its address);
* the request size limit (1 MiB, as the app's), the client's ``Host`` never passed on, and
  nginx's own error answers carry the app's security headers.
"""

from __future__ import annotations

import argparse
import grp
import os
import pwd
from pathlib import Path

CONNECTIONS = 32  # open connections per client address (keep-alive included)
CALLBACKS = 6  # callbacks in flight per client address (a browser's parallel connections)
CALLBACK_RATE = 20  # callbacks per second per client address, sustained …
CALLBACK_BURST = 60  # … after a burst (a page's first load sends about 20)
PAGE_RATE, PAGE_BURST = 50, 200  # pages and static files per second per client
ADDRESS_SHARE = 64  # clients one address may carry (a TLS proxy on this host) at full limits
HEADER_TIMEOUT_S, BODY_TIMEOUT_S, SEND_TIMEOUT_S = 10, 10, 30
# the app's per-request time limit (60 s) and the time to hand the response over
UPSTREAM_READ_TIMEOUT_S = 90
SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff", "X-Frame-Options": "SAMEORIGIN",
    "Referrer-Policy": "same-origin",
    "Content-Security-Policy": "default-src 'none'; frame-ancestors 'self'",
}
ERRORS = {  # nginx's own answers: status → text
    400: "Bad request", 408: "Request timeout: the request did not arrive in time",
    413: "Request too large", 429: "Too many requests from your address: try again shortly",
    502: "The application is not answering (starting or restarting): try again shortly",
    504: "The application did not answer in time",
}


def _error_pages() -> str:
    headers = "".join(f"        add_header {k} \"{v}\" always;\n"
                      for k, v in SECURITY_HEADERS.items())
    pages = "".join(f"    error_page {code} = @error{code};\n" for code in ERRORS)
    locations = "".join(
        f"    location @error{code} {{\n        default_type text/plain;\n{headers}"
        f"        return {code} \"{text}\\n\";\n    }}\n" for code, text in ERRORS.items())
    return pages + locations


def _worker_user() -> str:
    """nginx's ``user`` directive: its workers run as the user who deploys (what gunicorn
    runs as), so they can reach the private socket. It only matters when nginx starts as root
    (its workers would otherwise switch to ``nobody``); as any other user they are that user."""
    if os.geteuid() != 0:
        return ""
    name = pwd.getpwuid(os.geteuid()).pw_name
    group = grp.getgrgid(os.getegid()).gr_name
    return f"user {name} {group};\n"


def nginx_conf(run_dir: Path, listen: str = "127.0.0.1:8050", public_host: str = "localhost"
               ) -> str:
    """The configuration text (see the module docstring)."""
    run = Path(run_dir).resolve()
    return f"""# written by python -m dashboard.server.proxy (docs/deployment.md);
# edit dashboard/server/proxy.py
worker_processes 1;
{_worker_user()}pid {run}/nginx.pid;
error_log stderr warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    server_tokens off;
    default_type application/octet-stream;
    client_body_temp_path {run}/tmp/body;
    proxy_temp_path {run}/tmp/proxy;
    fastcgi_temp_path {run}/tmp/fastcgi;
    uwsgi_temp_path {run}/tmp/uwsgi;
    scgi_temp_path {run}/tmp/scgi;

    # the client: its perf_client cookie when of the right form, else its address
    map $cookie_perf_client $client {{
        "~^[0-9a-f]{{32}}\\.[0-9a-f]{{64}}$" $cookie_perf_client;
        default $binary_remote_addr;
    }}
    limit_conn_zone $client zone=connections:10m;
    limit_conn_zone $client zone=callbacks_now:10m;
    limit_req_zone $client zone=callbacks:10m rate={CALLBACK_RATE}r/s;
    limit_req_zone $client zone=pages:10m rate={PAGE_RATE}r/s;
    limit_conn_zone $binary_remote_addr zone=address_connections:10m;
    limit_conn_zone $binary_remote_addr zone=address_callbacks_now:10m;
    limit_req_zone $binary_remote_addr zone=address_callbacks:10m
        rate={CALLBACK_RATE * ADDRESS_SHARE}r/s;
    limit_req_zone $binary_remote_addr zone=address_pages:10m rate={PAGE_RATE * ADDRESS_SHARE}r/s;
    limit_conn_status 429;
    limit_req_status 429;

    upstream app {{
        server unix:{run}/private/gunicorn.sock;
        keepalive 16;
        keepalive_timeout 4s;  # below gunicorn's keepalive (5 s): never reuse a closed one
    }}

    server {{
    listen {listen};
    client_header_timeout {HEADER_TIMEOUT_S}s;
    client_body_timeout {BODY_TIMEOUT_S}s;
    send_timeout {SEND_TIMEOUT_S}s;
    keepalive_timeout 5s;
    reset_timedout_connection on;
    client_max_body_size 1m;
    client_body_buffer_size 1m;
    large_client_header_buffers 4 8k;
    limit_conn connections {CONNECTIONS};
    limit_conn address_connections {CONNECTIONS * ADDRESS_SHARE};

    proxy_http_version 1.1;
    proxy_set_header Connection "";
    proxy_set_header Host "{public_host}";
    proxy_set_header X-Forwarded-Host "";
    proxy_set_header X-Real-IP $remote_addr;
    proxy_set_header X-Forwarded-For $remote_addr;
    proxy_set_header X-Forwarded-Proto "";  # the app's scheme is PERF_PUBLIC_SCHEME
    proxy_request_buffering on;
    proxy_buffering on;
    proxy_buffer_size 16k;
    proxy_buffers 64 16k;
    proxy_busy_buffers_size 64k;
    proxy_max_temp_file_size 64m;
    proxy_connect_timeout 5s;
    proxy_send_timeout {SEND_TIMEOUT_S}s;
    proxy_read_timeout {UPSTREAM_READ_TIMEOUT_S}s;
    proxy_intercept_errors off;

    location = /_dash-update-component {{
        limit_conn callbacks_now {CALLBACKS};
        limit_conn address_callbacks_now {CALLBACKS * ADDRESS_SHARE};
        limit_req zone=callbacks burst={CALLBACK_BURST} nodelay;
        limit_req zone=address_callbacks burst={CALLBACK_BURST * ADDRESS_SHARE} nodelay;
        proxy_pass http://app;
    }}
    location / {{
        limit_req zone=pages burst={PAGE_BURST} nodelay;
        limit_req zone=address_pages burst={PAGE_BURST * ADDRESS_SHARE} nodelay;
        proxy_pass http://app;
    }}
{_error_pages()}    }}
}}
"""


def write(run_dir: Path, listen: str, public_host: str = "localhost") -> Path:
    """Write ``run_dir/nginx.conf`` (and the temporary directories nginx needs)."""
    run = Path(run_dir)
    for sub in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
        (run / "tmp" / sub).mkdir(parents=True, exist_ok=True)
    path = run / "nginx.conf"
    path.write_text(nginx_conf(run, listen, public_host))
    return path


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="Write the deployment's nginx.conf.")
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--listen", default="127.0.0.1:8050",
                    help="address:port nginx listens on (default loopback only)")
    ap.add_argument("--public-host", default="localhost",
                    help="the Host the app is told (never the client's)")
    args = ap.parse_args(argv)
    print(write(args.run_dir, args.listen, args.public_host))


if __name__ == "__main__":
    main()
