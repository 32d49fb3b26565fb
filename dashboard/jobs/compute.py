"""What the views need from the estimator, cached on disk.

Every function takes a validated scenario (:mod:`dashboard.controls.scenario`) and returns tidy
DataFrames. Results are cached in ``diskcache`` under a key that hashes the inputs that matter plus
the estimator's version and a digest of its source, so a changed model never serves stale results.
Values are stored as JSON text, never pickled. A missing, deleted or corrupt cache only costs a
recomputation (a corrupt one is moved aside and re-created: :mod:`dashboard.jobs.stores`).
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import diskcache
import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.io.json import to_json_plotly

import model as estimator
from dashboard.controls.scenario import (
    estimator_inputs,
    execution_of,
    gpu_counts,
    request_of,
    stack_of,
)
from dashboard.figures.maker import plain
from dashboard.jobs import budget, stores, sweep_parts
from dashboard.jobs.diskstore import BoundedCache
from dashboard.settings import SETTINGS
from model import evaluate, search
from model.api import design_cells
from model.engine.space import COLUMNS as CONFIG_KEYS
from model.physics.strategies import STRATEGIES
from model.studies.sweep import best_frame
from model.validation import EXTRA_RUNS, PYTORCH_RUNS, SETS, reference_dir, run_validation
from model.validation.moe import MOE_RUNS

ROOT = Path(__file__).resolve().parents[2]
CACHE_DIR = SETTINGS.cache_dir
CACHE_SIZE_BYTES = SETTINGS.cache_size_bytes
TOP_K = 50
log = logging.getLogger(__name__)


def _source_digest() -> str:
    h = hashlib.sha256()
    # the estimator and the figure code: cached figures must follow either
    sources = [*(ROOT / "model").rglob("*.py"), *(ROOT / "dashboard").rglob("*.py")]
    for path in sorted(sources):
        h.update(path.read_bytes())
    for path in sorted(estimator.SYSTEMS_DIR.glob("*.json")) + sorted(
            estimator.WORKLOADS_DIR.glob("*.json")):
        h.update(path.read_bytes())
    return h.hexdigest()[:12]


ESTIMATOR_VERSION = f"{estimator.__version__}+{_source_digest()}"


@dataclass
class CacheHandle:
    """This process's results cache: its open handle (None until the first read or write, and
    after a failure) and the monotonic time until which a failing cache is left alone."""

    store: diskcache.Cache | None = None
    down_until: float = 0.0


HANDLE = CacheHandle()
# a cache that fails on the file it opened (read-only, disk full) or cannot be opened is left
# alone this long: requests compute without it, and it is logged once per interval
BACKOFF_S = SETTINGS.cache_backoff_s
_now = time.monotonic


_open_lock = threading.Lock()  # one thread at a time (re)creates the cache
OPEN_WAIT_S = 2.0  # a request waits this long for another thread's re-creation, then recomputes


def cache() -> diskcache.Cache | None:
    """The results cache (re-created if its directory was deleted); None if unusable.

    Only one thread re-creates it: several threads setting up the same new SQLite database at
    once contend for its lock, and diskcache retries its set-up for up to 60 s."""
    store = HANDLE.store
    if store is not None and (Path(store.directory) / "cache.db").is_file():
        return store
    if _now() < HANDLE.down_until:
        return None
    if not _open_lock.acquire(timeout=OPEN_WAIT_S):
        return None  # another thread is still re-creating it: this request recomputes
    try:
        return _open()
    finally:
        _open_lock.release()


def _open() -> diskcache.Cache | None:
    database = CACHE_DIR / "results" / "cache.db"
    before = _file_identity(database)
    try:
        if HANDLE.store is None or not (Path(HANDLE.store.directory) / "cache.db").is_file():
            _reset_cache()
            (CACHE_DIR / "results").mkdir(parents=True, exist_ok=True)
            # a short SQLite busy timeout: a contended or broken cache costs a recomputation,
            # never a stalled request
            HANDLE.store = BoundedCache(
                str(CACHE_DIR / "results"), size_limit=CACHE_SIZE_BYTES,
                eviction_policy="least-recently-used", timeout=1,
                # no WAL, no mmap: files deleted under a live process cost an error, never a
                # stall or a SIGBUS; no fsync
                sqlite_journal_mode="delete", sqlite_mmap_size=0, sqlite_synchronous=0,
                # evict at most two entries per write (diskcache's ten took the one just
                # written with it when few fit)
                cull_limit=2)
        return HANDLE.store
    except Exception as exc:  # noqa: BLE001 - a broken cache must never break a view
        _reset_cache(exc)
        # an OS refusal is for good; SQLite's "read-only" too if the file is still the one
        # tried (a database whose directory is deleted meanwhile fails as read-only as well)
        if (isinstance(exc, OSError) and _persistent(exc)) or (
                _persistent(exc) and before is not None
                and _file_identity(database) == before):
            _back_off("results cache unavailable", exc)
        else:
            log.info("results cache not opened (%s)", exc)
        return None


def _file_identity(path: Path) -> tuple | None:
    """(device, inode, change time) of a file, None if it is gone."""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_dev, st.st_ino, st.st_ctime_ns


PERSISTENT_ERRNOS = (errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.ENOTDIR,
                     errno.EDQUOT)


def _persistent(exc: Exception) -> bool:
    """A failure the next request would meet again: no permission, a read-only file or file
    system, a full disk, a file where the directory should be."""
    if isinstance(exc, OSError) and exc.errno in PERSISTENT_ERRNOS:
        return True
    text = str(exc).lower()
    return isinstance(exc, sqlite3.OperationalError) and (
        "readonly" in text or "read-only" in text or "is full" in text)


def _back_off(what: str, exc: Exception) -> None:
    """Stop using the cache for BACKOFF_S (one log line per interval)."""
    if _now() >= HANDLE.down_until:
        log.warning("%s (%s); computing without it for %g s", what, exc, BACKOFF_S)
    HANDLE.down_until = _now() + BACKOFF_S


def _failed(what: str, exc: Exception) -> None:
    """A read or write failed: drop the handle; the next request opens the cache again. That
    opening is what tells a deleted or replaced database (it works again) from a read-only or
    full one (it fails on the same file, and backs off: see :func:`_open`). A corrupt database
    is removed by :func:`_reset_cache`."""
    log.info("results cache %s failed (%s); recomputing", what, exc)
    _reset_cache(exc)


_inherited: list[Any] = []  # handles a forked job found open: kept, never closed or used


def forget_inherited_handle() -> None:
    """In a job's process forked from a server process: leave the results cache handle it
    inherited (its SQLite connection belongs to the parent's thread: SQLite's docs, "How To
    Corrupt An SQLite Database File" §2.6, carrying an open connection across fork()), so
    the job opens its own at its first read or write. Kept referenced, never closed (closing
    it here could disturb the parent's file locks)."""
    if HANDLE.store is not None:
        _inherited.append(HANDLE.store)
    HANDLE.store = None


def _reset_cache(exc: Exception | None = None) -> None:
    """Drop the cache handle; the next :func:`cache` opens a fresh one. A cache whose database
    file is corrupt is deleted: it only ever holds recomputable results."""
    directory = HANDLE.store.directory if HANDLE.store is not None else str(CACHE_DIR / "results")
    HANDLE.store = None  # not closed: other threads may be inside it (they fail and recompute)
    if directory and exc is not None and stores.is_corrupt(exc):  # "not a database" …
        stores.move_aside(Path(directory), exc)


def _read(key: str) -> str | None:
    """The cached text under ``key``, or None (missing, or the cache failed: it is reset)."""
    store = cache()
    if store is None:
        return None
    try:
        text = store.get(key)
        return text if isinstance(text, str) else None
    except Exception as exc:  # noqa: BLE001 - deleted or corrupt cache: recompute
        _failed("read", exc)
        return None


def _write(key: str, text: str) -> None:
    store = cache()
    if store is None:
        return
    try:
        store.set(key, text)
    except Exception as exc:  # noqa: BLE001
        _failed("write", exc)


def cache_key(kind: str, payload: dict[str, Any]) -> str:
    """sha256 of the canonical JSON of (kind, inputs, estimator version)."""
    text = json.dumps([kind, payload, ESTIMATOR_VERSION], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def cached_frame(kind: str, payload: dict[str, Any],
                 compute: Callable[[], pd.DataFrame]) -> pd.DataFrame:
    """``compute()`` unless a cached copy for (kind, payload) exists."""
    key = cache_key(kind, payload)
    text = _read(key)
    if text is not None:
        try:
            return frame_from_text(text)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:  # a corrupt entry
            log.warning("cached frame unreadable (%s); recomputing", exc)
    frame = compute()
    _write(key, frame_to_text(frame))
    return frame


def frame_to_text(frame: pd.DataFrame) -> str:
    """A frame as JSON text, losslessly: floats as Python writes them (shortest text that
    reads back to the same double), NaN/inf by name, each column's dtype kept."""
    plain = isinstance(frame.index, pd.RangeIndex) and frame.index.start == 0 and \
        frame.index.step == 1
    return json.dumps({
        "columns": [str(c) for c in frame.columns],
        "dtypes": [str(t) for t in frame.dtypes],
        "data": [frame[c].tolist() for c in frame.columns],
        "index": None if plain else frame.index.tolist()}, default=_scalar)


def _scalar(value: Any) -> Any:
    """numpy scalars left in object columns (a bool of the lost-node frame) as Python's."""
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON")


def frame_from_text(text: str) -> pd.DataFrame:
    """The frame :func:`frame_to_text` wrote."""
    doc = json.loads(text)
    columns, dtypes, data = doc["columns"], doc["dtypes"], doc["data"]
    if not (len(columns) == len(dtypes) == len(data)):
        raise ValueError("columns, dtypes and data differ in length")
    index = None if doc["index"] is None else pd.Index(doc["index"])
    frame = pd.DataFrame({c: pd.Series(v, dtype=t) for c, v, t in zip(columns, data, dtypes)},
                         columns=columns)
    return frame if index is None else frame.set_axis(index)


def cached_outputs(kind: str, payload: dict[str, Any], compute: Callable[[], tuple]) -> list:
    """A callback's outputs (figures, texts, rows) as JSON-ready values, cached like frames.

    Figures become their plain dicts, which Dash sends as they are; a cache hit costs a JSON
    decode instead of building plotly figures again.
    """
    key = cache_key(kind, payload)
    text = _read(key)
    if text is not None:
        try:
            return json.loads(text)
        except ValueError as exc:
            log.warning("cached outputs unreadable (%s); recomputing", exc)
    # figures → their plain dicts, numpy → lists
    text = to_json_plotly([plain(v) if isinstance(v, go.Figure) else v for v in compute()])
    _write(key, text)
    return json.loads(text)


def page_payload(scn: dict[str, Any], *extra: str) -> dict[str, Any]:
    """Inputs that decide a page's outputs: the model/system/run inputs, the GPU counts,
    the presentation flag and the named view keys."""
    return {**estimator_inputs(scn), "counts": gpu_counts(scn), "strategies": strategies_of(scn),
            "presentation": bool(scn.get("presentation")), **{k: scn[k] for k in extra}}


def _mode(scn: dict[str, Any]) -> str | None:
    return "paper" if scn["mode"] == "paper" else None


def how_of(scn: dict[str, Any]) -> dict[str, Any]:
    """The model mode, execution options and software stack of a scenario, as
    search/evaluate/sweep/design_space arguments."""
    return {"mode": _mode(scn), "execution": execution_of(scn), "stack": stack_of(scn)}


def strategies_of(scn: dict[str, Any]) -> tuple[str, ...]:
    """The strategies a scenario asks for: every one for ``all``, else its one."""
    return STRATEGIES if scn["strategy"] == "all" else (scn["strategy"],)


NARROW_SCALING = ("narrow the GPU range, choose one strategy, or a global batch with fewer "
                  "divisors")
NARROW_DESIGN = ("choose fewer GPUs or a GPU count with fewer divisors (a power of two), "
                 "another strategy, or a global batch with fewer divisors")


def scaling(scn: dict[str, Any]) -> pd.DataFrame:
    """Best configuration per (strategy, GPU count) that fits; infeasible points are absent.
    ModelError (before anything is built) when it is over the request's budget."""
    payload = {**estimator_inputs(scn), "strategies": strategies_of(scn), "counts": gpu_counts(scn)}

    def compute() -> pd.DataFrame:
        counts = gpu_counts(scn)
        if not counts:
            return pd.DataFrame()
        request = request_of(scn, gpus=tuple(counts), strategy=strategies_of(scn))
        sized = sweep_parts.check_sweep("The scaling views", request, NARROW_SCALING)
        return best_frame(sweep_parts.sweep_in_parts(request, sized.groups))
    return cached_frame("scaling", payload, compute)


def design(scn: dict[str, Any]) -> pd.DataFrame:
    """Best configuration per (x, y) cell of the design space at ``gpus`` GPUs (evaluated in
    chunks; ModelError when over the request's budget)."""
    keys = ("gpus", "design_strategy", "x_axis", "y_axis")
    payload = {**estimator_inputs(scn), **{k: scn[k] for k in keys}}

    def compute() -> pd.DataFrame:
        request = request_of(scn, gpus=(scn["gpus"],), strategy=scn["design_strategy"])
        budget.check_design(f"The design space at {scn['gpus']:,} GPUs", request,
                            NARROW_DESIGN)
        deadline = time.monotonic() + 2 * budget.TIME_BUDGET_S
        return design_cells(request, x=scn["x_axis"], y=scn["y_axis"], deadline=deadline)
    return cached_frame("design", payload, compute)


def top(scn: dict[str, Any]) -> pd.DataFrame:
    """The TOP_K fastest configurations that fit at ``gpus`` GPUs (design strategy)."""
    payload = {**estimator_inputs(scn), "gpus": scn["gpus"], "strategy": scn["design_strategy"]}

    def compute() -> pd.DataFrame:
        request = request_of(scn, gpus=(scn["gpus"],), strategy=scn["design_strategy"],
                             top_k=TOP_K)
        budget.check_searches(f"The top configurations at {scn['gpus']:,} GPUs", request,
                              NARROW_DESIGN)
        return search(request).top
    return cached_frame("top", payload, compute)


def ops(scn: dict[str, Any], config: dict[str, Any]) -> pd.DataFrame:
    """Per-op breakdown of one configuration (a row of :func:`top`)."""
    cfg = {k: int(config[k]) for k in CONFIG_KEYS}
    payload = {**estimator_inputs(scn), "gpus": int(config["gpus"]),
               "strategy": config["strategy"], **cfg}

    def compute() -> pd.DataFrame:
        return evaluate(request_of(scn, gpus=(int(config["gpus"]),),
                                   strategy=config["strategy"], pins=cfg)).ops
    return cached_frame("ops", payload, compute)


def validation() -> pd.DataFrame:
    """The estimator against the published runs (``model.validation.run_validation``): one row
    per measured quantity, with Calculon's predictions where published. The reference files'
    size and modification time are part of the key (the estimator's version already is)."""
    folder = reference_dir()
    stamp = {}
    for path in (folder / "korthikanti_validation.json", folder / "measurements.json",
                 EXTRA_RUNS, PYTORCH_RUNS, MOE_RUNS):  # the last three: always the package's
        stat = path.stat()
        stamp[path.name] = [stat.st_mtime_ns, stat.st_size]
    return cached_frame("validation", {"folder": str(folder), "reference": stamp},
                        lambda: run_validation(folder, sets=SETS))
