"""Comparison of systems: the best training time of each system at each GPU count.

Each system (the label's part before '·') has its own colour, distinct from every other shown,
whatever its GPU generation (an edited H200 is not the H200 preset); the NVLink domain size sets
the dash and the marker."""

from __future__ import annotations

import re
from collections.abc import Mapping

import pandas as pd
import plotly.graph_objects as go

from dashboard.figures.axes import gpu_ticks, log_ticks
from dashboard.figures.common import (
    best_rows,
    check_frame,
    empty_figure,
    finite_rows,
    mark_not_validated,
    strategy_name,
)
from dashboard.figures.hover import Columns, Hover
from dashboard.figures.maker import make_figure
from dashboard.figures.theme import (
    DASHES,
    base_layout,
    line_width,
    marker_size,
)

SYMBOLS = ("circle", "square", "diamond", "triangle-up", "triangle-down", "star")
_NVS = re.compile(r"NVS\s*(\d+)", re.IGNORECASE)
_GEN = re.compile(r"(GB\d+|MI\d+[A-Z]*|[A-Z]\d{2,4}[A-Z]?)", re.IGNORECASE)
# Distinct colours, one per system in the order shown: Okabe & Ito without its yellow (too pale
# for lines) and with its sky blue late (beside its blue it reads as the same hue), then Paul
# Tol's darker "muted" hues.
SYSTEM_COLORS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#000000", "#882255",
                 "#999933", "#56B4E9", "#332288", "#117733", "#AA4499")


def parse_system_label(label: str) -> tuple[str, int | None]:
    """(GPU generation, NVLink domain size) from a label like 'H200 · NVS 8'.

    The generation is the first GPU-like token of the part before '·' ('H200', 'GB200',
    'MI300X'), else that whole part; the domain size is None when the label has no 'NVS n'.
    """
    text = str(label)
    head = text.split("·")[0].strip()
    gen = _GEN.search(head)
    nvs = _NVS.search(text)
    return (gen.group(1).upper() if gen else head or text), (int(nvs.group(1)) if nvs else None)


def system_head(label: str) -> str:
    """The system part of a label ('H200' of 'H200 · NVS 8')."""
    return str(label).split("·")[0].strip()


NOT_VALIDATED = " (not validated)"


def systems_figure(frame: pd.DataFrame, presentation: bool = False,
                   unvalidated: Mapping[str, str] | None = None, plain: bool = False) -> go.Figure:
    """Training time (days) vs GPU count, log-log, one line per system (``system`` column).

    Each point is the best configuration over all strategies for that system and GPU count.
    Colour = the system (the label before '·'; distinct for every system shown, in the frame's
    order), dash and marker = NVLink domain size ('… · NVS n'). Rows without a training time
    (a ``skipped`` system) are left out.
    Hover: system, strategy, days, samples/s, MFU (with its peak) and the configuration.
    ``unvalidated``: system (the label's part before '·') → why its predictions are not
    validated; those systems are named so in the legend and the figure says why.
    """
    unvalidated = dict(unvalidated or {})
    msg = check_frame(frame, ("system", "gpus", "train_days"), "system comparison")
    if msg:
        return empty_figure(msg, presentation)
    rows = finite_rows(frame, ("gpus", "train_days"), positive=True)
    rows = best_rows(rows.assign(system=rows["system"].astype(str)), ("system", "gpus"))
    if rows.empty:
        return empty_figure("No feasible configuration for any system.", presentation)
    systems = list(pd.unique(rows["system"]))
    parsed = {s: parse_system_label(s) for s in systems}
    # systems in the order the frame lists them (the caller's order)
    heads = list(dict.fromkeys(system_head(s) for s in frame["system"].astype(str)))
    sizes = sorted({n for _, n in parsed.values() if n is not None})
    systems.sort(key=lambda s: (heads.index(system_head(s)), parsed[s][1] or 0, s))
    lw, ms = line_width(presentation), marker_size(presentation)
    groups = rows.groupby("system", sort=False)
    data: list[dict] = []
    for system in systems:
        part = groups.get_group(system).sort_values("gpus")
        nvs = parsed[system][1]
        k = sizes.index(nvs) if nvs is not None else 0
        dash, symbol = DASHES[k % len(DASHES)], SYMBOLS[k % len(SYMBOLS)]
        view = part
        if "strategy" in part.columns:
            view = Columns(part, strategy_name=[strategy_name(s) for s in part["strategy"]])
        hover = (Hover(view, f"<b>{system}</b><br>GPUs %{{x}}")
                 .add("strategy_name", "strategy")
                 .add("train_days", "training time", ".4g", " days")
                 .add("samples_per_s", "samples/s", ".4g")
                 .add("mfu", "MFU", ".1%")
                 .add("mfu_peak_tflops", "of the peak", ".4g", " TFLOP/s").config())
        color = SYSTEM_COLORS[heads.index(system_head(system)) % len(SYSTEM_COLORS)]
        name = system + (NOT_VALIDATED if system_head(system) in unvalidated else "")
        data.append(dict(
            type="scatter", x=part["gpus"].to_numpy(), y=part["train_days"].to_numpy(),
            name=name, mode="lines+markers", line=dict(color=color, width=lw, dash=dash),
            marker=dict(color=color, size=ms, symbol=symbol),
            **hover.trace_kwargs(group=system)))
    layout = base_layout("Systems: best training time vs GPU count", presentation)
    layout.update(
        xaxis=dict(type="log", title=dict(text="GPUs"), **gpu_ticks(rows["gpus"])),
        yaxis=dict(type="log", title=dict(text="training time (days)"),
                   **log_ticks(rows["train_days"])))
    shown = [head for head in heads if head in unvalidated]
    why = "; ".join(f"{head} — {unvalidated[head].removeprefix('not validated: ')}"
                    for head in shown)
    return mark_not_validated(make_figure(data, layout, plain=plain),
                              f"not validated: {why}" if why else "", presentation)
