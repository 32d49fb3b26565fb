"""What the Scenarios page computes: a scenario's headline configuration, two of them compared,
and the sensitivity of its training time to each hardware input; cached like every view
(:func:`dashboard.jobs.compute.cached_frame`) and sized against the request's budget first.

A scenario's headline is the fastest configuration at its Design GPUs count of its Run
strategies — the production ones when it has any, as the Scaling page's headline — with the
cost columns of its own Plan & cost inputs (pricing, failures)."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from dashboard.controls.fitted import stack_label
from dashboard.controls.scenario import (
    build_inputs,
    costs_of,
    estimator_inputs,
    request_of,
)
from dashboard.figures.scenarios import compare_figure, tornado_figure
from dashboard.jobs import budget, compute
from model import ModelError, search
from model.cli.numbers import duration_days
from model.engine.economics import cost_columns
from model.physics.strategies import PRODUCTION, STRATEGIES
from model.studies.compare import compare_frame, layout_text
from model.studies.sensitivity import searches, sensitivity_frame

NARROW = ("choose fewer Design GPUs or a count with fewer divisors (a power of two), one "
          "strategy, or a global batch with fewer divisors")


def strategies(scn: dict[str, Any]) -> tuple[str, ...]:
    """The Run strategies, the production ones only when there are any."""
    chosen = STRATEGIES if scn["strategy"] == "all" else (scn["strategy"],)
    production = tuple(s for s in chosen if s in PRODUCTION)
    return production or chosen


def best(scn: dict[str, Any]) -> pd.DataFrame:
    """The headline row (one row; none when nothing fits), with the scenario's cost inputs."""
    names = strategies(scn)
    payload = {**estimator_inputs(scn), "gpus": scn["gpus"], "strategies": names,
               "costs": costs_of(scn)}

    def run() -> pd.DataFrame:
        m, s = build_inputs(scn)
        budget.check_searches(f"The headline at {scn['gpus']:,} GPUs",
                              request_of(scn, gpus=(scn["gpus"],), strategy=names), NARROW)
        frames = []
        for name in names:
            try:
                found = search(m, s, scn["gpus"], scn["global_batch"], name, **compute._how(scn),
                               top_k=1).top
                if not found.empty:
                    frames.append(found)
            except ModelError:
                if len(names) == 1:
                    raise
        rows = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
        if rows.empty:
            return rows
        top = rows.sort_values("train_days", kind="stable").head(1).reset_index(drop=True)
        costs = cost_columns(m, s.with_costs(costs_of(scn)), top["gpus"].to_numpy(),
                             top["train_days"].to_numpy())
        for key, value in costs.items():
            top[key] = value
        return top
    return compute.cached_frame("scenario-best", payload, run)


def headline(scn: dict[str, Any]) -> dict[str, Any]:
    """The headline row as a dict (ModelError when nothing fits)."""
    rows = best(scn)
    if rows.empty:
        raise ModelError(f"nothing fits on {scn['gpus']:,} GPUs in scenario "
                         f"'{scn['model']} on {scn['system']}'")
    return rows.iloc[0].to_dict()


def compare(a: dict[str, Any], b: dict[str, Any], names: tuple[str, str],
            presentation: bool = False) -> tuple[list[dict[str, Any]], Any, str]:
    """(table rows, Δ % figure, the two layouts in words) of scenarios ``a`` and ``b``."""
    ra, rb = headline(a), headline(b)
    frame = compare_frame(ra, rb)
    layouts = (f"Layout — {names[0]}: {layout_text(ra)} on {int(ra['gpus']):,} GPUs; "
               f"{names[1]}: {layout_text(rb)} on {int(rb['gpus']):,} GPUs.")
    caption = " vs ".join(f"{n}: {_described(scn)}" for n, scn in zip(names, (a, b)))
    return (frame.to_dict("records"), compare_figure(frame, names, presentation, caption),
            layouts)


def _described(scn: dict[str, Any]) -> str:
    """A scenario in a few words (an exported comparison's caption)."""
    return (f"{scn['model']} on {scn['gpus']:,} {scn['system']} ({scn['hbm_gb']:g} GB, "
            f"{scn['precision']}, {stack_label(scn)}), batch {scn['global_batch']}")


def sensitivity(scn: dict[str, Any], fraction: float) -> pd.DataFrame:
    """The sensitivity rows of the headline's strategy at the Design GPUs (sized first)."""
    strategy = str(headline(scn)["strategy"])
    payload = {**estimator_inputs(scn), "gpus": scn["gpus"],
               "strategy": strategy, "fraction": fraction}

    def run() -> pd.DataFrame:
        m, s = build_inputs(scn)
        budget.check_searches(f"The sensitivity at {scn['gpus']:,} GPUs",
                              request_of(scn, gpus=(scn["gpus"],), strategy=strategy), NARROW,
                              repeat=searches(s))
        return sensitivity_frame(m, s, scn["gpus"], scn["global_batch"], strategy, fraction,
                                 **compute._how(scn))
    return compute.cached_frame("sensitivity", payload, run)


def _change(pct: float) -> str:
    """A change of the training time in words (infinite: nothing fits any more)."""
    return f"{pct:+.2f} %" if math.isfinite(pct) else "nothing fits"


def sensitivity_outputs(scn: dict[str, Any], fraction: float) -> tuple[Any, str]:
    """(tornado figure, the input that moves the time most in words)."""
    frame = sensitivity(scn, fraction)
    top = frame.iloc[0]
    pct = 100 * fraction
    text = (f"{top['label'][0].upper() + top['label'][1:]} moves the training time most: "
            f"−{pct:g} % → {_change(top['low_change_pct'])}, +{pct:g} % → "
            f"{_change(top['high_change_pct'])} (baseline {duration_days(top['base_days'])}; "
            f"{len(frame)} inputs, each a new search).")
    return tornado_figure(frame, fraction, bool(scn.get("presentation"))), text
