"""The deployment's gunicorn settings (``gunicorn.conf.py``): loopback by default, the hardened
worker, time and request limits, access log without query strings, every name a gunicorn
setting, and what the environment may change. Split from tests/test_server.py."""

from __future__ import annotations

import runpy
from typing import Any

from test_server import ENV_KEYS, ROOT


def load_conf(monkeypatch, **env: str) -> dict[str, Any]:
    for key in ENV_KEYS:
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return runpy.run_path(str(ROOT / "gunicorn.conf.py"))


def test_gunicorn_settings(monkeypatch):
    conf = load_conf(monkeypatch)
    assert conf["bind"] == "127.0.0.1:8050"  # this machine only
    assert conf["workers"] == 2 and conf["threads"] == 1  # CPU-bound callbacks: processes
    # gthread that buffers requests in its event loop (slow clients hold no thread) and ends a
    # worker whose request runs over its time limit (dashboard/server/worker.py)
    assert conf["worker_class"] == "dashboard.server.worker.HardenedWorker"
    assert callable(conf["post_fork"]) and conf["_WORKER_MEMORY_MB"] > 0
    assert conf["timeout"] == 120 and 0 < conf["graceful_timeout"] <= conf["timeout"]
    assert conf["max_requests"] > 0 and 0 < conf["max_requests_jitter"] < conf["max_requests"]
    assert conf["accesslog"] == "-" and "%(s)s" in conf["access_log_format"]
    assert "%(q)s" not in conf["access_log_format"]  # signed job handles stay out of the logs
    assert conf["preload_app"] is False and callable(conf["post_worker_init"])

    # every name is a gunicorn setting (a typo would be ignored silently by gunicorn)
    from gunicorn.config import KNOWN_SETTINGS

    known = {s.name for s in KNOWN_SETTINGS}
    names = {k for k, v in conf.items() if not k.startswith("_") and k not in ("os",)
             and not type(v).__name__ == "_Feature"}
    assert names <= known, names - known


def test_gunicorn_settings_from_the_environment(monkeypatch):
    conf = load_conf(monkeypatch, PORT="9000", WEB_CONCURRENCY="5", GUNICORN_THREADS="8")
    assert (conf["bind"], conf["workers"], conf["threads"]) == ("127.0.0.1:9000", 5, 8)
    # HOST (set by many shells to the machine's name) never changes the interface (issue 26)
    assert load_conf(monkeypatch, HOST="0.0.0.0")["bind"] == "127.0.0.1:8050"
    assert load_conf(monkeypatch, GUNICORN_BIND="0.0.0.0:9000")["bind"] == "0.0.0.0:9000"
    assert load_conf(monkeypatch, GUNICORN_BIND="unix:/run/whatif.sock")["bind"] == \
        "unix:/run/whatif.sock"
