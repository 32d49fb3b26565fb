"""Whether the intervals keep their promise: the empirical leave-one-source-out coverage of the
split-conformal intervals (:mod:`model.validation.error_bars`) on the project's own fit data.

For every firm run of a population (stack family × dense/MoE × GPU generation, training), the
interval is built exactly as a prediction's is (:func:`~model.validation.error_bars.
population_interval`), but from the scored runs of every *other* source — the run's own source
held out of the calibration set as it was held out of the fit — and the run counts as covered
when its own score |ln(predicted/measured)| lies inside. The share covered is the empirical
coverage to compare with the stated one; split-conformal theory (Angelopoulos & Bates 2021,
§1) promises at least the stated coverage for exchangeable runs, and at most 1/(n+1) more.

Held out by source, a run's interval follows :func:`~model.validation.error_bars.error_bar`'s
rules: where no other source has a run of the run's family on its GPU generation, its
prediction would be *not validated* (rule 1), so the run cannot be tested across sources — a
population with one source (PyTorch dense Hopper: TorchTitan's 12 runs; Megatron dense Ampere:
Korthikanti's 8) has no source-left-out coverage, only the run-left-out one. (Before, such a
run was scored against an interval borrowed from another generation — one no prediction of
its population gets: PyTorch Hopper's 58 % measured the PyTorch *Ampere* interval.)

The tolerance a population is held to (:func:`below_p`): its covered count must not be
significantly below the stated coverage — a one-sided exact binomial test at the 1 % level
(:data:`ALPHA`) over the runs tested. Runs of one source share its conditions, so they are not
independent and the test is, if anything, lenient to a population with few sources.
"""

from __future__ import annotations

import math

import pandas as pd

from model.specs import conformal
from model.specs.conformal import COVERAGE
from model.validation.error_bars import (
    ALL,
    WORKLOADS,
    Run,
    population_interval,
    population_label,
    scored_runs,
)

COLUMNS = ("population", "family", "workload", "generation", "n", "sources", "coverage",
           "tested", "covered", "empirical_coverage", "loo_coverage", "width_pct", "low_pct",
           "high_pct", "mean_abs_error_pct", "p_below", "loo_p_below")
ALPHA = 0.01  # the level of the one-sided binomial test a population's coverage is held to


def below_p(covered: int, tested: int, coverage: float) -> float | None:
    """P(X ≤ covered) for X ~ Binomial(tested, coverage): how likely so few covered runs are
    if the intervals kept their promise (None: nothing tested)."""
    if tested == 0:
        return None
    return sum(math.comb(tested, k) * coverage**k * (1 - coverage)**(tested - k)
               for k in range(covered + 1))


def untestable_by_source(run: Run, others: list[Run]) -> bool:
    """Whether the run's prediction, its source held out, would be *not validated*
    (:func:`~model.validation.error_bars.error_bar`'s rule 1: its family — or, where the
    family has no run, any family — has no run on its GPU generation)."""
    kin = [r for r in others if r.family == run.family]
    return not any(r.generation == run.generation for r in (kin or others))


def _covered(run: Run, runs: list[Run], coverage: float, by_source: bool = True
             ) -> bool | None:
    """Whether the run's interval, built without its source (``by_source``; else without the
    run alone), covers it (None: not stated)."""
    if by_source and run.source:
        others = [r for r in runs if r.source != run.source]
        if untestable_by_source(run, others):
            return None
    else:
        others = [r for r in runs if r is not run]
    kin = any(r.family == run.family for r in others)
    own = (run.family if kin else ALL, run.generation)  # as error_bar picks it
    _, _, _, low, high = population_interval(others, own, coverage)
    if high is None or low is None:
        return None
    return -math.log1p(low / 100) >= run.score - 1e-12 and math.log1p(high / 100) >= (
        run.score - 1e-12)


def coverage_table(coverage: float = COVERAGE,
                   scored: tuple[Run, ...] | None = None) -> pd.DataFrame:
    """One row per population with runs: ``n`` runs from ``sources`` sources, the stated
    ``coverage``, ``tested`` (runs whose held-out interval could be stated), ``covered``,
    ``empirical_coverage`` (covered / tested), ``loo_coverage`` (the same with only the run
    itself held out of the calibration set: split-conformal's guarantee, ≥ the stated
    coverage), the interval a prediction of the population gets (``low_pct``, ``high_pct``,
    ``width_pct`` = high − low; borrowed as :func:`~model.validation.error_bars.error_bar`
    borrows) and the mean |error| of its runs.
    The last row, population 'all', pools every run."""
    coverage = conformal.check_coverage(coverage)
    scored = scored_runs() if scored is None else scored
    rows = []
    total_tested = total_covered = 0
    for workload in WORKLOADS:
        runs = [r for r in scored if r.workload == workload]
        keys = sorted({(r.family, r.generation) for r in runs})
        for family, generation in keys:
            members = [r for r in runs if (r.family, r.generation) == (family, generation)]
            hits = [_covered(r, runs, coverage) for r in members]
            tested = [h for h in hits if h is not None]
            loo = [h for h in (_covered(r, runs, coverage, False) for r in members)
                   if h is not None]
            *_, low, high = population_interval(runs, (family, generation), coverage)
            total_tested += len(tested)
            total_covered += sum(tested)
            rows.append({
                "population": population_label(family, workload == "moe", generation),
                "family": family, "workload": workload, "generation": generation,
                "n": len(members), "sources": len({m.source for m in members}),
                "coverage": coverage, "tested": len(tested), "covered": int(sum(tested)),
                "empirical_coverage": sum(tested) / len(tested) if tested else None,
                "loo_coverage": sum(loo) / len(loo) if loo else None,
                "width_pct": None if high is None else high - low,  # type: ignore[operator]
                "low_pct": low, "high_pct": high,
                "mean_abs_error_pct": sum(m.error_pct for m in members) / len(members),
                "p_below": below_p(int(sum(tested)), len(tested), coverage),
                "loo_p_below": below_p(int(sum(loo)), len(loo), coverage)})
    rows.append({"population": "all", "family": "", "workload": "", "generation": "",
                 "n": len(scored), "sources": len({m.source for m in scored}),
                 "coverage": coverage, "tested": total_tested, "covered": total_covered,
                 "empirical_coverage": total_covered / total_tested if total_tested else None,
                 "loo_coverage": None, "width_pct": None, "low_pct": None, "high_pct": None,
                 "mean_abs_error_pct": sum(m.error_pct for m in scored) / len(scored),
                 "p_below": below_p(total_covered, total_tested, coverage),
                 "loo_p_below": None})
    return pd.DataFrame(rows, columns=list(COLUMNS))
