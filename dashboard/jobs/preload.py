"""What a job forkserver imports once, before it forks any job (:mod:`dashboard.jobs.procs`):
the estimator, then the app, whose import registers every page's background callbacks (a job
finds its callback there, :mod:`dashboard.jobs.jobfn`). Each import is guarded: multiprocessing
skips only an ImportError of a preloaded module, and any other failure would end the forkserver
(then no job could start); a job whose callback is not preloaded imports it itself."""

from __future__ import annotations

import contextlib
import importlib

MODULES = ("psutil", "diskcache", "numpy", "model", "model.studies.plan",
           "model.studies.codesign", "dashboard.jobs.joblimits", "dashboard.jobs.jobfn", "app")

for _name in MODULES:
    with contextlib.suppress(Exception):
        importlib.import_module(_name)
