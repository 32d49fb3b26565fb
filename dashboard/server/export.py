"""A graph card: a figure with export buttons (high-resolution PNG via kaleido, standalone
offline HTML with plotly.js inline, CSV of the data behind it), and the one callback that serves
them for every card. File names are fixed by the card, never taken from user input.

The export never renders a figure the browser sends: it builds the card's figure again on the
server, from the validated scenario, with the same builder as the page (each page registers its
cards' builders with :func:`register_exports`); a card whose figure depends on more than the
scenario (the selected configuration, the sweep's grid, the systems picked) gets that from its
``export-context`` store, validated by its builder. PNGs are rendered by :mod:`dashboard.server.png`
(Chromium with the network closed and a page that loads no image or file). CSV text cells that
a spreadsheet would run as a formula are quoted.

Every PNG and HTML export carries a caption under its title saying what it shows: the model,
the system, the training budget and batch, and the date of the export (:func:`caption`); a
slide made from it says where it came from.
"""

from __future__ import annotations

import csv
import datetime
import logging
from collections.abc import Callable, Iterable
from typing import Any

import pandas as pd
import plotly.graph_objects as go
from dash import ALL, MATCH, Input, Output, State, callback, ctx, dcc, html, no_update

from dashboard.controls.presets import model_values, system_values
from dashboard.figures import figure_table
from dashboard.figures.common import empty_figure
from dashboard.figures.maker import plain
from dashboard.figures.theme import CONFIG, FONT_SIZE
from dashboard.server import png
from dashboard.server.guard import bad_request, page_callback
from model import ModelError, __version__
from model.cli.numbers import count

log = logging.getLogger(__name__)
FORMATS = (("png", "PNG"), ("html", "HTML"), ("csv", "CSV"))
_SI = ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K"))
# cards whose figure is drawn at the design-space GPU count (the left panel's "GPUs")
AT_DESIGN_COUNT = ("design-", "hbm-")
# card name → the figures of its page for (validated scenario, the card's export context)
Builder = Callable[[dict[str, Any], Any], dict[str, Any]]
EXPORTS: dict[str, Builder] = {}
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
MAX_PNG_HEIGHT = 2000  # px before the 3× scale: a PNG at most 6,000 px tall


def register_exports(names: Iterable[str], builder: Builder) -> None:
    """``builder(scenario, context)`` gives the figures of the cards ``names`` (by name)."""
    for name in names:
        EXPORTS[name] = builder


def graph_card(name: str, title: str, height: int = 430, note: str = "",
               grow: bool = False, extra: Any = None, placeholder: str = "") -> html.Div:
    """A titled figure with export buttons; the graph's id is {"type": "graph", "name": name}.

    ``grow``: the figure sets its own height (at least ``height`` px), e.g. one bar per op.
    ``extra``: a component shown between the title and the figure (e.g. a view switch).
    ``placeholder``: a message shown in place of empty axes until the first figure arrives.
    """
    style = {"minHeight": f"{height}px"} if grow else {"height": f"{height}px"}
    graph = dict(id={"type": "graph", "name": name}, config=CONFIG, style=style)
    if placeholder:
        graph["figure"] = empty_figure(placeholder)
    return html.Div(className="card", id=f"card-{name}", children=[
        html.Div(className="card-head", children=[
            html.H3(title),
            html.Div(className="export", children=[
                html.Button(label, id={"type": "export", "name": name, "fmt": fmt},
                            title=f"Download this figure as {label}", className="btn-small")
                for fmt, label in FORMATS]),
        ]),
        extra,
        dcc.Loading(dcc.Graph(**graph), type="dot"),
        html.Div(note, className="card-note") if note else None,
        html.Div(id={"type": "export-msg", "name": name}, className="ctl-error"),
        dcc.Download(id={"type": "download", "name": name}),
        dcc.Store(id={"type": "export-context", "name": name}),
    ])


def si(value: float) -> str:
    """A large count in words of SI prefixes: 1e12 → '1T', 1.5e10 → '15B', 4096 → '4.1K'."""
    for size, prefix in _SI:
        if abs(value) >= size:
            return f"{value / size:.3g}{prefix}"
    return f"{value:.3g}"


def _edited(scn: dict[str, Any], preset: dict[str, Any]) -> str:
    return "" if all(scn.get(k) == v for k, v in preset.items()) else " (edited)"


def caption(scn: dict[str, Any] | None, name: str, figure: dict[str, Any] | None = None,
            today: datetime.date | None = None) -> str:
    """What an exported figure shows: model, system, budget and batch, and the date.

    Validation figures do not depend on the scenario: they name the published runs and the
    estimator's version. A figure drawn from inputs of its own (the co-design map) carries its
    caption in ``layout.meta['caption']``. The system comparison names its systems (its traces)."""
    day = (today or datetime.date.today()).isoformat()
    if name.startswith("validation-"):
        return (f"published training runs (model/data/reference) vs transformer-perf "
                f"{__version__} · exported {day}")
    meta = ((figure or {}).get("layout") or {}).get("meta")
    if isinstance(meta, dict) and isinstance(meta.get("caption"), str):  # its own inputs
        return f"{meta['caption'][:300]} · transformer-perf {__version__} · {day}"
    if not scn:
        return f"transformer-perf {__version__} · exported {day}"
    model = f"{scn['model']}{_edited(scn, model_values(scn['model']))}"
    system = (f"{scn['system']}{_edited(scn, system_values(scn['system']))}, NVLink domain "
              f"{scn['nvs']}, {scn['hbm_gb']:g} GB HBM, {scn['precision']}")
    if name == "systems-compare" and figure:
        names = [t.get("name") for t in figure.get("data", []) if t.get("name")]
        system = "systems " + ", ".join(names) if names else system
    where = f" · {count(scn['gpus'], 'GPU')}" if name.startswith(AT_DESIGN_COUNT) else ""
    return (f"{model} · {system}{where} · budget {si(float(scn['budget']))} "
            f"{scn['budget_kind']}, global batch {scn['global_batch']} · {day}")


def _with_caption(fig: go.Figure, text: str) -> go.Figure:
    """The caption as the title's subtitle, with room made for it above the plot."""
    size = fig.layout.font.size or fig.layout.template.layout.font.size or FONT_SIZE
    top = fig.layout.margin.t if fig.layout.margin.t is not None else 70
    fig.update_layout(title_subtitle=dict(text=text, font=dict(size=size * 0.85)),
                      margin_t=top + round(size * 2.4))
    return fig


def png_height(fig: go.Figure) -> int:
    """The height (px, before the 3× scale) a PNG export is drawn at: the figure's own, at
    least 700 and at most :data:`MAX_PNG_HEIGHT` (the error per record grows 20 px a record:
    5,750 px, a 17,250-px image no slide can hold; plotly thins the labels of a shorter
    category axis itself)."""
    return min(max(700, int(fig.layout.height or 0)), MAX_PNG_HEIGHT)


def render(figure: dict[str, Any], fmt: str, caption_text: str = "") -> tuple[bytes | str, str]:
    """The figure as PNG bytes (3× scale), standalone HTML text, or CSV text of its data;
    ``caption_text`` goes under the title of the PNG and the HTML."""
    fig = go.Figure(figure)
    if caption_text and fmt in ("png", "html"):
        _with_caption(fig, caption_text)
    if fmt == "png":
        return png.render(fig.to_dict(), width=1200, height=png_height(fig), scale=3), "png"
    if fmt == "html":
        return fig.to_html(include_plotlyjs=True, full_html=True), "html"
    return safe_cells(figure_table(fig)).to_csv(index=False, lineterminator="\r\n",
                                                quoting=csv.QUOTE_MINIMAL), "csv"


def safe_cells(table):
    """Text cells starting with = + - @ tab or CR get a leading ' (a spreadsheet would run
    them as formulas); numbers are left as they are."""
    def safe(value: Any) -> Any:
        return "'" + value if isinstance(value, str) and value.startswith(FORMULA_START) \
            else value
    out = table.copy()
    for col in out.columns:
        if out[col].dtype.kind not in "biufc":  # values as they are (no dtype inference)
            out[col] = pd.Series([safe(v) for v in out[col]], index=out.index, dtype=object)
    return out


def card_figure(name: str, scn: dict[str, Any], context: Any) -> dict[str, Any]:
    """The card's figure, built on the server (ModelError when there is none to export)."""
    figure = EXPORTS[name](scn, context).get(name)
    if isinstance(figure, go.Figure):
        figure = plain(figure)
    if not isinstance(figure, dict) or not figure.get("data"):
        raise ModelError("nothing to export yet: this view has no data")
    return figure


@callback(
    Output({"type": "download", "name": MATCH}, "data"),
    Output({"type": "export-msg", "name": MATCH}, "children"),
    Input({"type": "export", "name": MATCH, "fmt": ALL}, "n_clicks"),
    State("scenario", "data"), State({"type": "export-context", "name": MATCH}, "data"),
    prevent_initial_call=True,
)
@page_callback(1, lambda message: (no_update, f"Export failed: {message}"))
def export(clicks: list, scn: dict[str, Any], context: Any) -> tuple:
    trigger = ctx.triggered_id
    if not clicks or not any(clicks) or trigger is None:
        return no_update, no_update
    name = ctx.outputs_list[0]["id"].get("name") if ctx.outputs_list else None
    if not isinstance(trigger, dict) or trigger.get("name") != name or name not in EXPORTS \
            or trigger.get("fmt") not in dict(FORMATS):
        raise bad_request("export: not a card's export button")
    fmt = trigger["fmt"]
    figure = card_figure(name, scn, context)
    try:
        content, ext = render(figure, fmt, caption(scn, name, figure))
    except Exception as exc:  # noqa: BLE001 - e.g. no browser for kaleido: say so, keep going
        log.warning("export of %s as %s failed: %s", name, fmt, exc)
        return no_update, f"Export as {fmt.upper()} failed: {exc}"
    filename = f"{name}.{ext}"
    if isinstance(content, bytes):
        return dcc.send_bytes(content, filename), ""
    return dcc.send_string(content, filename), ""
