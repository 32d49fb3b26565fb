"""Issue 32's closing note as one table: per population of the error bars, the runs n (and
their sources), the stated coverage against the empirical one (source left out, run left out),
the interval's width, and the memory model's error where the population has memory figures.

``python -m model.validation.closing_note [--coverage 0.8]`` prints it (Markdown). Every figure
comes from the code the bars use: :func:`model.validation.coverage.coverage_table` and the
stored memory residuals of :mod:`model.validation.memory_error` (Korthikanti et al. 2022's
Megatron-LM runs on A100 — the Megatron-family dense Ampere population — are the only
populations' runs with measured memory breakdowns; TorchTitan's Hopper runs publish the
allocator's peak *reserved* memory, shown beside the model's allocated figure, not as an
error: the two are different quantities).
"""

from __future__ import annotations

import argparse
import math

from model.specs.conformal import COVERAGE, check_coverage
from model.validation import memory_error
from model.validation.coverage import coverage_table

MEMORY_POPULATIONS = {  # population label → the memory figures of its runs
    "megatron-family dense training on ampere GPUs": "allocated",
    "pytorch-family dense training on hopper GPUs": "reserved",
}


def _pct(value: float | None) -> str:
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else (
        f"{100 * value:.1f} %")


def memory_text(population: str) -> str:
    """The memory model's error on the population's runs, in words ('–' where none)."""
    kind = MEMORY_POPULATIONS.get(population)
    if kind == "allocated":
        rows = memory_error.stored_rows()
        errs = [100 * abs(r["predicted_gib"] / r["measured_gib"] - 1) for r in rows]
        return (f"{len(errs)} figures: mean {sum(errs) / len(errs):.2f} %, max "
                f"{max(errs):.2f} % (nothing fitted: in sample = source left out)")
    if kind == "reserved":
        gaps = [r["gap_pct"] for r in memory_error.stored_reserved_rows()]
        return (f"allocated vs published peak reserved, {len(gaps)} runs: "
                f"{min(gaps):+.0f} … {max(gaps):+.0f} %")
    return "–"


def closing_table(coverage: float = COVERAGE) -> str:
    """The closing note's table at ``coverage`` (Markdown)."""
    q = check_coverage(coverage)
    lines = ["| population | n (sources) | stated | empirical, source left out (tested) | "
             "empirical, run left out | width | memory error |",
             "| --- | ---: | ---: | ---: | ---: | ---: | --- |"]
    for r in coverage_table(q).to_dict("records"):
        width = r["width_pct"]
        tested = f"{_pct(r['empirical_coverage'])} ({r['tested']})"
        lines.append(
            f"| {r['population']} | {r['n']} ({r['sources']}) | {100 * q:.0f} % | {tested} | "
            f"{_pct(r['loo_coverage'])} | "
            f"{'–' if width is None or math.isnan(width) else f'{width:.1f} %'} | "
            f"{memory_text(r['population'])} |")
    return "\n".join(lines)


def serving_table(coverage: float = COVERAGE) -> str:
    """The serving populations' coverage (throughput; left out by model: the fit data is one
    source, :mod:`model.validation.serving_residuals`), '' before the scores are stored."""
    from model.validation.serving_residuals import serving_coverage
    table = serving_coverage(check_coverage(coverage))
    if table.empty:
        return ""
    q = check_coverage(coverage)
    lines = ["| serving population (throughput) | n (models) | stated | empirical, model left out "
             "(tested) | empirical, run left out | width |",
             "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for r in table.to_dict("records"):
        width = r["width_pct"]
        lines.append(f"| {r['population']} | {r['n']} ({r['models']}) | {100 * q:.0f} % | "
                     f"{_pct(r['empirical_coverage'])} ({r['tested']}) | "
                     f"{_pct(r['loo_coverage'])} | "
                     f"{'–' if width is None or math.isnan(width) else f'{width:.1f} %'} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--coverage", type=float, default=COVERAGE,
                        help="the stated coverage, 0.5–0.95 (default 0.8)")
    args = parser.parse_args(argv)
    print(closing_table(args.coverage))
    serving = serving_table(args.coverage)
    if serving:
        print("\n" + serving)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
