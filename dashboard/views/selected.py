"""The Design page's selected configuration up close: the timeline of one iteration and where
its HBM goes, from the same rows as the page's table (:func:`dashboard.jobs.compute.top`) and its
per-op table (:func:`dashboard.jobs.compute.ops`)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from dashboard import figures
from dashboard.figures.timeline import memory_parts_figure, timeline_figure
from dashboard.jobs import compute
from dashboard.jobs import scenarios as jobs
from dashboard.views import notes
from model import ModelError
from model.cli.numbers import count, number
from model.engine.space import COLUMNS as CONFIG_KEYS
from model.studies.memory_parts import memory_frame
from model.studies.timeline import bubble_s, forward_share, timeline_frame
from model.validation.memory_error import fit_status

GRAPHS = ("design-timeline", "design-memory")


def selected_row(scn: dict[str, Any], config: dict[str, Any]) -> pd.Series:
    """The table's row of the checked configuration ``config`` (the fastest of its shape and
    placement, as the table lists it)."""
    top = compute.top(scn)
    match = top["strategy"] == config["strategy"]
    for key in ("gpus", *CONFIG_KEYS):
        match &= top[key] == config[key]
    if not match.any():
        raise ModelError("the selected configuration is not among the top configurations of "
                         "this scenario any more: select a row again")
    return top[match].iloc[0]


def frames(scn: dict[str, Any], config: dict[str, Any]) -> tuple[pd.DataFrame, pd.DataFrame,
                                                                  pd.Series]:
    """(timeline, memory parts, the row) of the selected configuration."""
    row = selected_row(scn, config)
    share = forward_share(compute.ops(scn, config), int(row["pp"]))
    return (timeline_frame(row, share), memory_frame(row, jobs.reserve_gb(scn)), row)


def summary(timeline: pd.DataFrame, row: pd.Series) -> str:
    """The timeline in one line: stages, microbatches, the bubble against the formula."""
    pp, n_mb, v = int(row["pp"]), int(row["n_microbatches"]), int(row["interleave"])
    bubble = float(bubble_s(timeline).max())
    total = float(row["iteration_time_s"])
    if pp == 1:
        return (f"One stage (no pipeline parallelism), {count(n_mb, 'microbatch')}: no "
                f"bubble; iteration {number(total)} s.")
    return (f"{count(pp, 'stage')} × {count(n_mb, 'microbatch')}"
            + (f" × {v} virtual stages" if v > 1 else "")
            + f": iteration {number(total)} s, of it the bubble {number(bubble)} s "
            f"({100 * bubble / total:.1f} %; (pp − 1)/(n_mb·V) = {pp - 1}/{n_mb * v} of the "
            "pipeline's busy time), every stage at the binding stage's pace.")


def build(scn: dict[str, Any], rows: list[dict[str, Any]]) -> tuple:
    """(timeline figure, memory figure, summary text) of the selected row (checked rows)."""
    pres = bool(scn.get("presentation"))
    if not rows:
        empty = figures.empty_figure("Select a configuration in the table.", pres)
        return empty, empty, ""
    timeline, parts, row = frames(scn, rows[0])
    why = notes.not_validated(scn, strategy=str(rows[0]["strategy"]))
    return (figures.mark_not_validated(timeline_figure(timeline, presentation=pres), why, pres),
            figures.mark_not_validated(memory_parts_figure(parts, presentation=pres), why,
                                       pres),
            f"{summary(timeline, row)} {memory_fit(scn, row)}")


def memory_fit(scn: dict[str, Any], row: pd.Series) -> str:
    """'Memory: tight — may not fit: X ± Y GB of Z.' (fits / tight / no with the memory model's
    interval: :func:`model.validation.memory_error.fit_status`)."""
    state, words = fit_state(scn, row)
    return f"Memory: {state} — {words}."


def fit_state(scn: dict[str, Any], row: Any) -> tuple[str, str]:
    """("fits" | "tight" | "no", the words) of a result row in the scenario's usable HBM
    (:func:`model.validation.memory_error.fit_status`; the host tier too small: "no")."""
    usable = float(row["hbm_capacity_gb"]) - jobs.reserve_gb(scn)
    state, words = fit_status(float(row["memory_gb"]), usable)
    if state == "fits" and not bool(row["fits"]):  # the host tier (offload) is too small
        state, words = "no", "the host memory tier is too small"
    return state, words


def exported(scn: dict[str, Any], context: Any, checked) -> dict[str, Any]:
    """The two figures for the export of either card (``checked``: the page's row check)."""
    rows = checked(context)
    if not rows:
        raise ModelError("select a configuration in the table first")
    timeline, memory, _ = build(scn, rows)
    return dict(zip(GRAPHS, (timeline, memory)))
