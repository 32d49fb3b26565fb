"""A tiny Flask app that misbehaves on purpose, served by gunicorn with the project's
``gunicorn.conf.py`` in ``tests/test_deployment.py``: it checks that the deployment kills a
request that never ends and keeps a worker within its memory limit, whatever the request."""

from __future__ import annotations

import os
import time

from flask import Flask, request

server = Flask(__name__)


@server.get("/ok")
def ok() -> dict:
    return {"pid": os.getpid()}


@server.get("/spin")
def spin() -> str:
    """Python that never returns (a loop the GIL switches out of, as in finding 1)."""
    n = 0
    while True:
        n += 1


@server.get("/sleep")
def sleep() -> str:
    time.sleep(float(request.args.get("s", "1")))
    return "slept"


@server.get("/hog")
def hog() -> dict:
    """Allocate and touch ``mb`` MB (numpy, as the estimator's arrays)."""
    import numpy as np

    block = np.ones(int(request.args["mb"]) * 2**20 // 8)
    return {"pid": os.getpid(), "sum": float(block.sum())}


@server.get("/busy")
def busy() -> dict:
    """Hold the worker's thread computing for ``s`` seconds (as the largest accepted design
    request does), then answer."""
    end = time.monotonic() + float(request.args.get("s", "1"))
    n = 0
    while time.monotonic() < end:
        n += 1
    return {"pid": os.getpid(), "n": n}


# the app's job store (dashboard.jobs.background) in this worker, on the deployment's cache
# directory: tests/test_deployment.py deletes the directory under two workers (probe 6)
_JOBS: list = []


def _jobs():
    if not _JOBS:
        from dashboard.jobs.background import DiskcacheJobs
        from dashboard.settings import SETTINGS

        _JOBS.append(DiskcacheJobs(SETTINGS.cache_dir / "background"))
    return _JOBS[0]


@server.get("/store/set")
def store_set() -> dict:
    _jobs().handle.set(request.args["key"], os.getpid())
    return {"pid": os.getpid()}


@server.get("/store/get")
def store_get() -> dict:
    return {"pid": os.getpid(), "value": _jobs().handle.get(request.args["key"])}
