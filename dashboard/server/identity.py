"""Who a request comes from, for the per-client limits (issue 29, item 2, finding 8).

Keyed on the address alone, every user behind a TLS proxy on the same host was 127.0.0.1 (75 %
of a 50-client load got 429, and the fair queue lumped them into one client). Each browser is
given a signed cookie instead: ``perf_client=<id>.<mac>``, ``id`` 128 random bits and ``mac`` the
HMAC-SHA256 of ``id`` under this deployment's secret (RFC 2104), so a client cannot name an
identity the server did not issue. The secret is 32 random bytes in a file of mode 0600
(:func:`secret_file`: ``$PERF_CLIENT_SECRET_FILE``, else ``client-secret`` in the cache
directory), created at first start (``gunicorn.conf.py``'s ``on_starting``, before any worker
forks, or by whichever process needs it first) and refused if another user owns it or others
can read it. A request without a valid cookie is keyed on its address (the peer's; behind nginx
on the private unix socket, the ``X-Real-IP`` nginx sets). No address is exempt from anything.

A client can ask for as many cookies as it likes (each page load without one issues one): the
cookie separates honest users behind one address; the address-wide ceilings in nginx
(:mod:`dashboard.server.proxy`) bound one that sheds its cookie.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import re
import secrets
import stat
import tempfile
from http.cookies import CookieError, SimpleCookie
from pathlib import Path

from flask import Flask, Response, request

from dashboard.settings import SETTINGS
from model.specs import memo

log = logging.getLogger(__name__)
COOKIE = "perf_client"
MAX_AGE_S = 365 * 24 * 3600
_VALUE = re.compile(r"^[0-9a-f]{32}\.[0-9a-f]{64}$")
_COOKIE_LINE = re.compile(rb"\r\ncookie:([^\r\n]{0,8190})", re.I)


class SecretError(RuntimeError):
    """The secret file exists but cannot be trusted (owner or mode)."""


def secret_file() -> Path:
    return SETTINGS.client_secret_file


def create_secret(path: Path) -> bytes:
    """The secret in ``path``, created (mode 0600, atomically: written to a private temporary
    file, then linked into place, so two processes starting at once agree) if it is absent."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".client-secret-")  # mode 0600
        try:
            os.write(fd, secrets.token_hex(32).encode())
            os.close(fd)
            try:
                os.link(tmp, path)
            except FileExistsError:
                pass  # another process won the race: its secret is the one
        finally:
            os.unlink(tmp)
    return read_secret(path)


def read_secret(path: Path) -> bytes:
    st = path.lstat()
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
        raise SecretError(f"{path} is not a file of this user: remove it (a new one is made)")
    if st.st_mode & 0o077:
        raise SecretError(f"{path} can be read by others (mode {stat.S_IMODE(st.st_mode):o}): "
                          f"remove it (a new one is made) or chmod 600 it")
    value = path.read_bytes().strip()
    if len(value) < 32:
        raise SecretError(f"{path} holds no usable secret: remove it (a new one is made)")
    return value


@memo.lru("client secret", 1)
def secret() -> bytes:
    """This deployment's secret (created at first use, then kept by this process). If the cache
    directory cannot be written, a secret of this process only (logged): cookies then hold
    within one worker."""
    try:
        return create_secret(secret_file())
    except OSError as exc:
        log.warning("client identity: cannot keep a secret file (%s); this process uses "
                    "its own secret", exc)
        return secrets.token_hex(32).encode()


def sign(client_id: str, key: bytes | None = None) -> str:
    mac = hmac.new(key or secret(), client_id.encode(), hashlib.sha256).hexdigest()
    return f"{client_id}.{mac}"


def verified(value: str | None, key: bytes | None = None) -> str | None:
    """The id in a cookie value when its signature is this deployment's, else None."""
    if not value or not _VALUE.match(value):
        return None
    client_id = value.split(".", 1)[0]
    return client_id if hmac.compare_digest(sign(client_id, key), value) else None


def identity(cookie_value: str | None, address: str, key: bytes | None = None) -> str:
    """The key of the per-client limits: the signed cookie's id, else the address."""
    client_id = verified(cookie_value, key)
    return f"cookie:{client_id}" if client_id else address


def cookie_in_head(head: bytes) -> str | None:
    """The ``perf_client`` cookie of a raw request head (gunicorn's worker, before parsing)."""
    for line in _COOKIE_LINE.findall(bytes(head[:65536])):
        try:
            jar = SimpleCookie(line.decode("latin-1"))
        except CookieError:
            continue
        if COOKIE in jar:
            return jar[COOKIE].value
    return None


ENVIRON_KEY = "perf.client"  # where the request's client key is left for the job cap


def _address() -> str:
    """The peer's address, or behind nginx on gunicorn's unix socket the ``X-Real-IP`` nginx
    sets (trusted only there), else "unknown"."""
    peer = request.environ.get("REMOTE_ADDR") or ""
    if peer and not peer.startswith("/") and peer != "unix":
        return peer
    return (request.headers.get("X-Real-IP") or "unknown")[:45]


def install(server: Flask) -> None:
    """Give every browser without a valid cookie one (HttpOnly, SameSite=Lax; Secure when the
    deployment says it is served over https, ``PERF_PUBLIC_SCHEME``)."""
    secure = SETTINGS.public_scheme == "https"

    @server.before_request
    def mark_client() -> None:
        """The request's client key, for the job cap (dashboard.jobs.background reads it from
        the WSGI environ: the jobs layer sits below this one and does not import it)."""
        request.environ[ENVIRON_KEY] = identity(request.cookies.get(COOKIE), _address())

    @server.after_request
    def issue_cookie(response: Response) -> Response:
        if verified(request.cookies.get(COOKIE)) is None:
            response.set_cookie(COOKIE, sign(secrets.token_hex(16)), max_age=MAX_AGE_S,
                                path="/", httponly=True, samesite="Lax", secure=secure)
        return response
