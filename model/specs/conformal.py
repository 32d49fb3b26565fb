"""Split-conformal intervals (Vovk, Gammerman & Shafer 2005, "Algorithmic Learning in a Random
World"; Angelopoulos & Bates 2021, "A Gentle Introduction to Conformal Prediction", §1–2).

The conformity score of a published run is the absolute log-ratio of its predicted to its
measured iteration time, ``|ln(t_pred / t_meas)|`` — the predictions being leave-one-source-out
(made with efficiencies fitted without the run's source). With n such scores from runs
exchangeable with a new one, the ``k = ⌈(n+1)·q⌉``-th smallest score ``r`` bounds the new run's
score with probability ≥ q (and < q + 1/(n+1)), so the interval of a predicted throughput ``x``
is ``[x·e^−r, x·e^r]`` (of a predicted time ``t``: ``[t·e^−r, t·e^r]``). The interval is
symmetric in the log, not in percent: the signed bounds on throughput are ``100·(e^−r − 1)``
and ``100·(e^r − 1)``. When ``k > n`` no finite score has the coverage asked and the interval is
not stated (null bounds, and the words say how many runs it needs) — never a tighter number.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from model.errors import ModelError

COVERAGE = 0.8  # the coverage a range is stated at unless asked otherwise
COVERAGE_MIN, COVERAGE_MAX = 0.5, 0.95  # the coverages one may ask for


class CoverageError(ModelError):
    """A coverage outside [COVERAGE_MIN, COVERAGE_MAX]."""


def check_coverage(coverage: float) -> float:
    """``coverage`` as a fraction, or a CoverageError in words (a percent 50–95 is read as
    such: 80 → 0.8)."""
    try:
        q = float(coverage)
    except (TypeError, ValueError):
        raise CoverageError(f"coverage must be a number from {COVERAGE_MIN:g} to "
                            f"{COVERAGE_MAX:g}, got {coverage!r}") from None
    if q > 1:
        q /= 100.0
    if not (math.isfinite(q) and COVERAGE_MIN - 1e-9 <= q <= COVERAGE_MAX + 1e-9):
        raise CoverageError(f"coverage must be from {COVERAGE_MIN:g} to {COVERAGE_MAX:g} "
                            f"({100 * COVERAGE_MIN:.0f}–{100 * COVERAGE_MAX:.0f} %), "
                            f"got {coverage!r}")
    return round(q, 4)


def rank(n: int, coverage: float) -> int:
    """⌈(n+1)·q⌉: which smallest score of n bounds a new one with probability ≥ q."""
    return math.ceil((n + 1) * coverage - 1e-9)


def runs_needed(coverage: float) -> int:
    """The fewest scores an interval at ``coverage`` can be stated from (⌈(n+1)q⌉ ≤ n):
    4 for 80 %, 19 for 95 %."""
    return math.ceil(coverage / (1.0 - coverage) - 1e-9)


def radius(scores: Sequence[float], coverage: float) -> float | None:
    """The ⌈(n+1)q⌉-th smallest of ``scores`` (|log-ratios|), or None when n is too small."""
    k = rank(len(scores), coverage)
    return sorted(scores)[k - 1] if 1 <= k <= len(scores) else None


def score(predicted_s: float, measured_s: float) -> float:
    """The conformity score of one run: |ln(predicted / measured)| of its iteration time."""
    return abs(math.log(predicted_s / measured_s))


def bounds_pct(r: float) -> tuple[float, float]:
    """The signed bounds on throughput, in percent, of radius ``r``: (100(e^−r − 1),
    100(e^r − 1))."""
    return 100.0 * (math.exp(-r) - 1.0), 100.0 * (math.exp(r) - 1.0)


def too_few(n: int, coverage: float) -> str:
    """Why an interval at ``coverage`` cannot be stated from n runs, in words: '12 runs: a
    95 % interval needs ≥ 19'."""
    pct = f"{100 * coverage:.0f}"
    article = "an" if pct.startswith("8") else "a"
    return (f"{n} run{'s' if n != 1 else ''}: {article} {pct} % interval needs "
            f"≥ {runs_needed(coverage)}, so it cannot be stated")
