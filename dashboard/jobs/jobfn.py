"""A background callback's job as a picklable object: what the web worker sends to the job's new
process (:mod:`dashboard.jobs.procs` starts jobs with ``forkserver``/``spawn``, never ``fork``,
so the job is pickled, not copied).

Dash's own job function (``dash.background_callback.managers.diskcache_manager._make_job_fn``)
is a closure over the callback and an open cache: neither pickles. :class:`CallbackJob` carries
names instead: the callback's registry key (Dash's ``hash_function`` of its source and id), its
module and qualified name, and the store (a :class:`~dashboard.jobs.stores.LazyStore`, pickled
as its directory and opened again in the job). In the job the callback is found in Dash's
registry (filled when the forkserver preloaded the app, :mod:`dashboard.jobs.preload`), or
by importing the app, or its module, and the job runs Dash's own job function on it.
"""

from __future__ import annotations

import functools
import importlib
import inspect
from collections.abc import Callable
from typing import Any

from model import ModelError

APP_MODULE = "app"  # the module whose import registers every page's callbacks


class CallbackJob:
    """Dash's job function of the callback ``fn`` (registered as ``key``), picklable."""

    def __init__(self, fn: Callable[..., Any], key: str | None, store: Any, progress: bool):
        self.key, self.module = key, getattr(fn, "__module__", None)
        self.qualname = getattr(fn, "__qualname__", None)
        self.store, self.progress = store, bool(progress)

    def __call__(self, result_key: str, progress_key: str, args: Any, context: Any) -> None:
        from dash.background_callback.managers.diskcache_manager import _make_job_fn

        fn = find_callback(self.key, self.module, self.qualname)
        run = _make_job_fn(_out_of_memory_in_words(fn), self.store, self.progress)
        run(result_key, progress_key, args, context)


def find_callback(key: str | None, module: str | None, qualname: str | None
                  ) -> Callable[..., Any]:
    """The callback registered as ``key`` in this process (after importing the app if it is
    not there yet), else ``module.qualname`` unwrapped from Dash's decorator."""
    found = _registered(key)
    if found is None and module != APP_MODULE:
        try:
            importlib.import_module(APP_MODULE)
        except ImportError:
            pass
        found = _registered(key)
    if found is not None:
        return found
    if not module or not qualname or "<locals>" in qualname:
        raise RuntimeError(f"background callback {qualname or key!r} cannot be found in the "
                           "job's process")
    obj: Any = importlib.import_module("__mp_main__" if module == "__main__" else module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return inspect.unwrap(obj)


def _registered(key: str | None) -> Callable[..., Any] | None:
    from dash.background_callback.managers import BaseBackgroundCallbackManager

    for known, fn, _progress in BaseBackgroundCallbackManager.functions:
        if known == key:
            return fn
    return None


def _out_of_memory_in_words(fn: Callable[..., Any], limit_bytes: int | None = None
                            ) -> Callable[..., Any]:
    """``fn`` whose MemoryError (the job's ``RLIMIT_AS``) is a ModelError the page shows, naming
    ``limit_bytes`` (default: the limit this job's process runs under)."""
    from dashboard.jobs import joblimits

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except MemoryError:
            limit = joblimits.JOB.memory_limit_bytes if limit_bytes is None else limit_bytes
            raise ModelError(joblimits.memory_message(limit)) from None
    return run
