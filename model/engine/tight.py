"""How far over the usable HBM a search keeps a candidate: the memory model's interval.

A configuration predicted to need M bytes of a usable U is "tight" when the memory model's
split-conformal interval ``[M·e^−r, M·e^r]`` holds U (:mod:`model.validation.memory_error`):
it may fit. A search keeps every candidate with M·e^−r ≤ U, i.e. M ≤ U·e^r (:func:`keep_bytes`),
ranked with the others by throughput; the outputs label it "may not fit: X ± Y GB of Z". The
radius r is the conformal quantile, at the default coverage, of the memory residuals that
``python -m model.validation.memory_error --write`` stores (no interval stated: r = 0, the
point estimate alone). The paper mode (``mode="paper"``) reproduces the paper's model, which
drops what is over the limit: it keeps nothing tight (:func:`kept_bytes`).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from model.specs import memo
from model.specs.conformal import COVERAGE, check_coverage, radius
from model.specs.hardware import System
from model.specs.modes import DEFAULT, Mode
from model.specs.schema import DATA_DIR

MEMORY_RESIDUALS = DATA_DIR / "reference" / "memory_validation.json"


@memo.lru("memory residual scores", 2)
def memory_scores(path: Path = MEMORY_RESIDUALS) -> tuple[float, ...]:
    """The memory model's scores |ln(predicted/measured)| (none when the file is absent)."""
    if not path.exists():
        return ()
    return tuple(float(r["score"]) for r in json.loads(path.read_text())["rows"])


def memory_radius(coverage: float = COVERAGE) -> float | None:
    """The split-conformal radius of the memory model's scores at ``coverage`` (None: too few
    figures for it)."""
    return radius(memory_scores(), check_coverage(coverage))


def keep_bytes(usable_bytes: float, coverage: float = COVERAGE) -> float:
    """The largest predicted memory (bytes) that may still fit ``usable_bytes``: U·e^r."""
    r = memory_radius(coverage)
    return usable_bytes * math.exp(r) if r is not None and usable_bytes > 0 else usable_bytes


def kept_bytes(system: System, mode: Mode) -> float:
    """What a search in ``mode`` keeps on ``system``: :func:`keep_bytes` of its usable HBM in
    the default model, the usable HBM itself in the paper mode."""
    usable = system.usable_hbm_bytes
    return keep_bytes(usable) if mode == DEFAULT else usable
