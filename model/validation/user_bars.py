"""The interval of a prediction made with a stack the user fitted (``calibrate --out my.json``,
used as ``--stack my.json``): the split-conformal interval (:mod:`model.specs.conformal`)
of the fit's own leave-one-out residuals on the system predicted, never a preset's.

``calibrate`` writes, in the stack's ``calibration`` object, ``leave_one_out_scores``: per system
the scores |ln(predicted/measured)| of each run predicted with η fitted on the other runs of
that system. A system with no such score has no interval ("not validated"); too few scores for
the coverage give null bounds and say so.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from model.physics.strategies import TRAITS, canonical_strategy
from model.specs import conformal
from model.specs.stack import list_stacks
from model.validation.error_bars import ErrorBar

SCORES = "leave_one_out_scores"  # the key of the calibration object calibrate writes


def calibration_of(stack: Any) -> dict[str, Any] | None:
    """The ``calibration`` object of a fitted stack's JSON file (None: a preset, no file, or a
    stack ``calibrate`` did not write)."""
    if not isinstance(stack, (str, Path)) or str(stack) in list_stacks():
        return None
    path = Path(stack)
    try:
        data = json.loads(path.read_text()) if path.is_file() else None
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    cal = data.get("calibration") if isinstance(data, dict) else None
    return cal if isinstance(cal, dict) and isinstance(cal.get(SCORES), dict) else None


def scores_bar(name: str, scores: list[float] | None, system: str,
               coverage: float) -> ErrorBar:
    """The interval of a fitted stack ``name`` on ``system`` from its leave-one-out
    ``scores``."""
    coverage = conformal.check_coverage(coverage)
    population = f"your runs on {system} (fitted stack '{name}')"
    if not scores:
        return ErrorBar(math.nan, math.nan, 0, name, system=system, coverage=coverage,
                        reason=(f"your fitted stack '{name}' has no leave-one-out run on "
                                f"{system} (leave-one-out needs two runs there)"))
    clean = [float(s) for s in scores if isinstance(s, (int, float)) and math.isfinite(s)]
    errors = [100 * abs(math.exp(s) - 1) for s in clean]
    r = conformal.radius(clean, coverage)
    low, high = (None, None) if r is None else conformal.bounds_pct(r)
    return ErrorBar(sum(errors) / len(errors), max(errors), len(clean), name, system=system,
                    coverage=coverage, low_pct=low, high_pct=high, population=population,
                    own_runs=len(clean), method="leave-one-out")


def idealised_reason(name: str, strategy: str | None) -> str:
    """Why a fitted stack ``name``'s interval does not cover a prediction with ``strategy``
    (a name or alias; None: any): the strategy is idealised, so none of the user's runs, each
    made with a shipped stack, can have used it ('' otherwise)."""
    if strategy is None:
        return ""
    traits = TRAITS[canonical_strategy(strategy)]
    if traits.production:
        return ""
    return (f"your fitted stack '{name}' was fitted on runs of shipped stacks, and none ships "
            f"the idealised {traits.label} strategy")


def fitted_bar(args: argparse.Namespace, system: str, coverage: float,
               strategy: str | None = None) -> ErrorBar | None:
    """The interval of the command's predictions (with ``strategy``; None: any) when its
    ``--stack`` is a fitted stack's file written by ``calibrate`` (None otherwise)."""
    stack = getattr(args, "stack", None)
    cal = calibration_of(stack)
    if cal is None:
        return None
    name = str(cal.get("name") or Path(str(stack)).stem)
    why = idealised_reason(name, strategy)
    if why:
        return ErrorBar(math.nan, math.nan, 0, name, system=system, coverage=coverage,
                        reason=why)
    return scores_bar(name, cal[SCORES].get(system), system, coverage)
