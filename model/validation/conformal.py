"""Split-conformal intervals: defined in :mod:`model.specs.conformal` (the search's memory band
reads them below the validation layer); re-exported here for the validation's modules."""

from model.specs.conformal import (
    COVERAGE,
    COVERAGE_MAX,
    COVERAGE_MIN,
    CoverageError,
    bounds_pct,
    check_coverage,
    radius,
    rank,
    runs_needed,
    score,
    too_few,
)

__all__ = ["COVERAGE", "COVERAGE_MAX", "COVERAGE_MIN", "CoverageError", "bounds_pct",
           "check_coverage", "radius", "rank", "runs_needed", "score", "too_few"]
