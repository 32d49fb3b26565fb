"""Waiting without fixed sleeps, shared by the browser and Celery tests."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

TIMEOUT = 30.0  # seconds: the slowest view (9 systems) computes in a few seconds on 2 cores


def until(check: Callable[[], Any], what: str, timeout: float = TIMEOUT) -> Any:
    """Poll ``check()`` until it returns something truthy; fail with ``what`` on timeout."""
    deadline, last_exc = time.monotonic() + timeout, None
    while True:
        try:
            value = check()
            if value:
                return value
        except Exception as exc:  # noqa: BLE001 - stale elements while React re-renders
            last_exc = exc
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}"
                                 + (f" (last error: {last_exc!r})" if last_exc else ""))
        time.sleep(0.1)
