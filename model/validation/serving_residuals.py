"""Held-out residuals of the serving fit, and the coverage a split-conformal serving interval
would keep (issue 32, item 5).

The serving fit data is one source (TensorRT-LLM's perf overview: offline output tokens/s), so
its runs cannot be held out by source; the unit held out is the *model* — the fit
(:func:`model.validation.serving.fit`) is redone without a model's runs, from the stored fit's
values, and predicts them — the refits of ``bench/serve_fit.py``'s leave-one-model-out summary,
which writes these scores too — and each run's score is |ln(predicted / measured)| of its
throughput. ``python -m model.validation.serving_residuals --write`` stores the scores (one
fit per model) in ``model/data/reference/serving_residuals.json``.

:func:`serving_coverage` then treats a population (dense or MoE × GPU generation, the serving
error bar's key: :mod:`model.serving.validity`) as training's coverage table does: the interval
of a run is the conformal radius of the scores of every *other model's* runs of its
population, and the share of runs inside is the empirical coverage (left out by model), beside
the run-left-out one. The serving answers' throughput bar is that interval
(:func:`model.serving.validity.error_bars`), so these figures are the coverage it keeps.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

import pandas as pd

from model.specs import memo
from model.specs.conformal import COVERAGE, check_coverage, radius
from model.specs.schema import DATA_DIR

STORED = DATA_DIR / "reference" / "serving_residuals.json"
COLUMNS = ("population", "n", "models", "coverage", "tested", "empirical_coverage",
           "loo_coverage", "width_pct")


def compute_scores() -> list[dict[str, Any]]:
    """Every serving run's leave-one-model-out score, with its population key: the refits of
    :func:`model.validation.serving.leave_one_out_fits` from the stored trtllm-1.0 fit."""
    from model.specs.serving_stack import load_serving_stack
    from model.validation import serving as sv
    return scores_of(sv.leave_one_out_fits(load_serving_stack("trtllm-1.0"), "model"))


def scores_of(fits: dict) -> list[dict[str, Any]]:
    """The scores of leave-one-model-out ``fits`` ({model: (its runs, the fit without it)})."""
    from model.serving.validity import population
    from model.validation import serving as sv
    out = []
    for model in sorted(fits):
        held, fitted = fits[model]
        for r, e in zip(held, sv.log_errors(held, fitted), strict=True):
            key = population(sv._model(r.model).moe, sv._system(r.system).generation)
            out.append({"model": r.model, "system": r.system, "population": key,
                        "input_tokens": r.input_tokens, "output_tokens": r.output_tokens,
                        "score": round(abs(float(e)), 9)})
    return out


def write(scores: list[dict[str, Any]], path: Path = STORED) -> None:
    """Store ``scores`` (:func:`scores_of`) with the method and the fit data's name."""
    from model.specs.serving_stack import load_serving_stack
    data = (load_serving_stack("trtllm-1.0").fit or {}).get("data")
    path.write_text(json.dumps({"method": __doc__.split("\n\n")[1], "data": data,
                                "runs": scores}, indent=1) + "\n")
    stored_scores.clear()  # type: ignore[attr-defined]


@memo.lru("serving residuals", 2)
def stored_scores(path: Path = STORED) -> tuple[dict[str, Any], ...]:
    return tuple(json.loads(path.read_text())["runs"]) if path.exists() else ()


def _covered(run: dict[str, Any], pool: list[dict[str, Any]], q: float) -> bool | None:
    r = radius([x["score"] for x in pool], q)
    return None if r is None else run["score"] <= r + 1e-12


def serving_coverage(coverage: float = COVERAGE,
                     scores: tuple[dict[str, Any], ...] | None = None) -> pd.DataFrame:
    """Per serving population: runs, models, the stated coverage, the empirical coverage with
    the run's model left out of the calibration set (``tested``: runs whose interval could be
    stated), with the run alone left out, and the interval's width (%, on throughput)."""
    q = check_coverage(coverage)
    scores = stored_scores() if scores is None else scores
    rows = []
    for key in sorted({s["population"] for s in scores}):
        mine = [s for s in scores if s["population"] == key]
        by_model = [_covered(s, [o for o in mine if o["model"] != s["model"]], q) for s in mine]
        by_run = [_covered(s, [o for o in mine if o is not s], q) for s in mine]
        tested, loo = [h for h in by_model if h is not None], [h for h in by_run if h is not None]
        r = radius([s["score"] for s in mine], q)
        rows.append({"population": key, "n": len(mine),
                     "models": len({s["model"] for s in mine}), "coverage": q,
                     "tested": len(tested),
                     "empirical_coverage": sum(tested) / len(tested) if tested else None,
                     "loo_coverage": sum(loo) / len(loo) if loo else None,
                     "width_pct": None if r is None else 100 * (math.exp(r) - math.exp(-r))})
    return pd.DataFrame(rows, columns=list(COLUMNS))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"refit and write {STORED.name}")
    args = parser.parse_args(argv)
    if args.write:
        write(compute_scores())
    print(serving_coverage(scores=stored_scores(STORED)).to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
