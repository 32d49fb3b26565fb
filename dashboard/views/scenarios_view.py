"""What the Scenarios page shows: a scenario's headline configuration (computed by
:mod:`dashboard.jobs.scenarios`), two of them compared, and the sensitivity of its training
time to each hardware input, in tables, figures and words."""

from __future__ import annotations

import math
from typing import Any

from dashboard.controls.fitted import stack_label
from dashboard.figures.scenarios import compare_figure, tornado_figure
from dashboard.jobs import scenarios as jobs
from model import ModelError
from model.cli.numbers import duration_days
from model.studies.compare import compare_frame, layout_text


def headline(scn: dict[str, Any]) -> dict[str, Any]:
    """The headline row as a dict (ModelError when nothing fits)."""
    rows = jobs.best(scn)
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


def _change(pct: float) -> str:
    """A change of the training time in words (infinite: nothing fits any more)."""
    return f"{pct:+.2f} %" if math.isfinite(pct) else "nothing fits"


def sensitivity_outputs(scn: dict[str, Any], fraction: float) -> tuple[Any, str]:
    """(tornado figure, the input that moves the time most in words)."""
    frame = jobs.sensitivity(scn, str(headline(scn)["strategy"]), fraction)
    top = frame.iloc[0]
    pct = 100 * fraction
    text = (f"{top['label'][0].upper() + top['label'][1:]} moves the training time most: "
            f"−{pct:g} % → {_change(top['low_change_pct'])}, +{pct:g} % → "
            f"{_change(top['high_change_pct'])} (baseline {duration_days(top['base_days'])}; "
            f"{len(frame)} inputs, each a new search).")
    return tornado_figure(frame, fraction, bool(scn.get("presentation"))), text
