"""One look for every dashboard figure: colours, labels, fonts and the dcc.Graph config.

Colours are fixed per *meaning* (a strategy, a time component, a memory component, a parallel
dimension), never per trace position, so the same strategy has the same colour in every view.
All colours come from colour-blind-friendly palettes (Okabe & Ito; Paul Tol's "muted").
:func:`base_layout` gives the layout of the report look as a plain dict (the report template,
registered once with plotly.io, title, margins, legend outside the plot) and, with
``presentation=True``, fonts 1.5× larger for slides; :func:`apply_layout` applies it to an
existing figure.
"""

from __future__ import annotations

import plotly.graph_objects as go
import plotly.io as pio

from model.engine.report import TIME_COLUMNS
from model.physics.strategies import SHORT_LABELS, STRATEGIES

# Okabe & Ito (2008), safe for the common colour-vision deficiencies.
PALETTE: tuple[str, ...] = (
    "#0072B2",  # blue
    "#D55E00",  # vermillion
    "#009E73",  # bluish green
    "#E69F00",  # orange
    "#CC79A7",  # reddish purple
    "#56B4E9",  # sky blue
    "#F0E442",  # yellow
    "#000000",  # black
)
# Paul Tol's "muted" scheme, for the stacked components (distinct from the strategy colours).
MUTED: tuple[str, ...] = ("#332288", "#88CCEE", "#44AA99", "#117733", "#999933", "#DDCC77",
                          "#CC6677", "#882255", "#AA4499", "#DDDDDD")
GREY = "#9E9E9E"
LIGHT_GREY = "#D9D9D9"
GRID = "#E6E6E6"
AXIS_LINE = "#444444"
TEXT = "#222222"
WARNING = "#B54708"  # dark amber: a figure's "not validated" mark

# the model's strategies (model.physics.strategies), in its order, each with its own colour
STRATEGY_ORDER: tuple[str, ...] = STRATEGIES
STRATEGY_COLORS: dict[str, str] = {s: PALETTE[i] for i, s in enumerate(STRATEGIES)}
STRATEGY_LABELS: dict[str, str] = dict(SHORT_LABELS)

# Time components of one iteration, in stacking order (the model's result columns).
COMPONENT_ORDER: tuple[str, ...] = TIME_COLUMNS
COMPONENT_COLORS: dict[str, str] = {
    "t_compute_s": "#0072B2",
    "t_memory_s": "#56B4E9",
    "t_tp_comm_s": "#E69F00",
    "t_ep_comm_s": "#8C564B",
    "t_pp_comm_s": "#CC79A7",
    "t_dp_comm_s": "#D55E00",
    "t_bubble_s": GREY,
    "t_optimizer_s": "#009E73",
    "t_offload_s": "#F0E442",
}
COMPONENT_LABELS: dict[str, str] = {
    "t_compute_s": "compute",
    "t_memory_s": "exposed memory",
    "t_tp_comm_s": "TP comm",
    "t_ep_comm_s": "EP all-to-all",
    "t_pp_comm_s": "PP comm",
    "t_dp_comm_s": "DP comm",
    "t_bubble_s": "bubble",
    "t_optimizer_s": "optimizer step",
    "t_offload_s": "offload transfers",
}

# Per-op components (model.engine.report.op_table) and what bounds an op: same colours as above.
# per op: t_comm_s is split into the expert-parallel all-to-all (t_ep_comm_s: the dispatch and
# combine ops' collectives, dashboard.figures.ops.op_components) and the other collectives
OP_COMPONENT_ORDER: tuple[str, ...] = ("t_compute_s", "t_memory_exposed_s", "t_comm_s",
                                       "t_ep_comm_s")
OP_COMPONENT_COLORS: dict[str, str] = {
    "t_compute_s": COMPONENT_COLORS["t_compute_s"],
    "t_memory_exposed_s": COMPONENT_COLORS["t_memory_s"],
    "t_comm_s": COMPONENT_COLORS["t_tp_comm_s"],
    "t_ep_comm_s": COMPONENT_COLORS["t_ep_comm_s"],
}
OP_COMPONENT_LABELS: dict[str, str] = {
    "t_compute_s": "compute",
    "t_memory_exposed_s": "exposed memory",
    "t_comm_s": "communication",
    "t_ep_comm_s": COMPONENT_LABELS["t_ep_comm_s"],
}
BOUND_COLORS: dict[str, str] = {
    "compute": COMPONENT_COLORS["t_compute_s"],
    "memory": COMPONENT_COLORS["t_memory_s"],
    "communication": COMPONENT_COLORS["t_tp_comm_s"],
    "overhead": PALETTE[4],  # kernel launch overhead (model.engine.report._bound)
}

MEMORY_ORDER: tuple[str, ...] = ("weights_gb", "gradients_gb", "optimizer_gb", "activations_gb")
MEMORY_COLORS: dict[str, str] = {
    "weights_gb": MUTED[0],
    "gradients_gb": MUTED[1],
    "optimizer_gb": MUTED[2],
    "activations_gb": MUTED[5],
}
MEMORY_LABELS: dict[str, str] = {
    "weights_gb": "weights",
    "gradients_gb": "gradients",
    "optimizer_gb": "optimizer state",
    "activations_gb": "activations",
}

# Parallel dimensions of a configuration (optimal-configuration view; ep and etp, the expert
# parallel dimensions, only for a model whose experts are spread)
DIMENSION_ORDER: tuple[str, ...] = ("tp1", "tp2", "pp", "dp", "microbatch", "nb", "ep", "etp")
DIMENSION_COLORS: dict[str, str] = {
    "tp1": PALETTE[0], "tp2": PALETTE[5], "pp": PALETTE[4], "dp": PALETTE[1],
    "microbatch": PALETTE[2], "nb": PALETTE[3], "ep": COMPONENT_COLORS["t_ep_comm_s"],
    "etp": GREY,
}
DIMENSION_LABELS: dict[str, str] = {
    "tp1": "tp1", "tp2": "tp2", "pp": "pp", "dp": "dp", "microbatch": "microbatch", "nb": "nb",
    "ep": "ep", "etp": "etp",
}
DIMENSION_SYMBOLS: dict[str, str] = {
    "tp1": "circle", "tp2": "diamond", "pp": "square", "dp": "triangle-up",
    "microbatch": "cross", "nb": "x", "ep": "star", "etp": "hexagon",
}

# GPU generations (system comparison): colour by generation, dash by NVLink domain size.
GPU_COLORS: dict[str, str] = {
    "A100": PALETTE[5], "H100": PALETTE[3], "H200": PALETTE[1], "B200": PALETTE[0],
    "GB200": PALETTE[2], "MI300X": PALETTE[4],
}
DASHES: tuple[str, ...] = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")

SEQUENTIAL = "Viridis"  # colour-blind-safe sequential scale for heatmaps and contours
# ... as plotly expands it: [[0.0, '#440154'], …, [1.0, '#fde725']] (for unvalidated traces)
SEQUENTIAL_SCALE: list[list] = [list(step) for step in go.Heatmap(colorscale=SEQUENTIAL).colorscale]

FONT_FAMILY = "Inter, 'Helvetica Neue', Arial, sans-serif"
FONT_SIZE = 13
PRESENTATION_SCALE = 1.5

CONFIG: dict = {
    "displaylogo": False,
    "toImageButtonOptions": {"format": "png", "filename": "figure", "scale": 3},
    "modeBarButtonsToRemove": ["lasso2d", "select2d"],
}


def strategy_color(strategy: str) -> str:
    """The colour of a strategy; unknown strategies get a stable palette colour."""
    if strategy in STRATEGY_COLORS:
        return STRATEGY_COLORS[strategy]
    return PALETTE[3 + sum(map(ord, str(strategy))) % (len(PALETTE) - 3)]


def dimension_label(key: str, strategy: str) -> str:
    """A dimension's name in words for a strategy: the context strategy's second axis shards
    the sequence, context parallelism, so its tp2 reads 'cp' (as in the CLI)."""
    return "cp" if key == "tp2" and strategy == "context" else key


def strategy_label(strategy: str) -> str:
    """The display name of a strategy ('1d' → '1D TP'); unknown ones are shown as given."""
    return STRATEGY_LABELS.get(strategy, str(strategy))


def font_size(presentation: bool = False) -> float:
    """Base font size in px: 13, or 19.5 in presentation mode."""
    return FONT_SIZE * (PRESENTATION_SCALE if presentation else 1.0)


def line_width(presentation: bool = False) -> float:
    return 3.0 if presentation else 2.0


def marker_size(presentation: bool = False) -> float:
    return 10.0 if presentation else 7.0


def _template_layout(size: float) -> dict:
    """The report template's layout (a plain dict) for a base font of ``size`` px."""
    axis = dict(showgrid=True, gridcolor=GRID, zeroline=False, showline=True,
                linecolor=AXIS_LINE, linewidth=1, mirror=True, ticks="outside",
                tickcolor=AXIS_LINE, title=dict(standoff=8), automargin=True)
    return dict(
        font=dict(family=FONT_FAMILY, size=size, color=TEXT),
        paper_bgcolor="white", plot_bgcolor="white", colorway=list(PALETTE),
        xaxis=axis, yaxis=dict(axis), hovermode="closest",
        hoverlabel=dict(font=dict(family=FONT_FAMILY, size=size * 0.95)),
        colorscale=dict(sequential=SEQUENTIAL),
    )


# The two report templates, validated once and registered with plotly.io under these names.
TEMPLATE_NAMES: dict[bool, str] = {False: "perf", True: "perf_presentation"}
for _presentation, _name in TEMPLATE_NAMES.items():
    pio.templates[_name] = go.layout.Template(
        layout=_template_layout(font_size(_presentation)))
del _presentation, _name


def template(presentation: bool = False) -> go.layout.Template:
    """The registered report template (white background, light grid, framed axes)."""
    return pio.templates[TEMPLATE_NAMES[bool(presentation)]]


def scale(presentation: bool = False) -> float:
    """The factor applied to every font size: 1.5 in presentation mode, else 1."""
    return PRESENTATION_SCALE if presentation else 1.0


def base_layout(title: str | None = None, presentation: bool = False,
                legend: str = "right") -> dict:
    """The layout keys of the report look as a plain dict: template, title, margins, legend.

    ``legend='right'`` puts the legend outside the plot on the right, ``'top'`` above it
    (horizontal). The template is given by its registered name (plotly resolves it).
    """
    size = font_size(presentation)
    if legend == "top":
        leg = dict(orientation="h", x=0.0, xanchor="left", y=1.02, yanchor="bottom",
                   font=dict(size=size * 0.95))
    else:
        leg = dict(orientation="v", x=1.02, xanchor="left", y=1.0, yanchor="top",
                   font=dict(size=size * 0.95), tracegroupgap=4)
    head = dict(x=0.0, xanchor="left", xref="container", y=0.98, yanchor="top", pad=dict(l=12),
                font=dict(size=size * 1.25))
    if title:
        head["text"] = f"<b>{title}</b>"
    return dict(
        template=TEMPLATE_NAMES[bool(presentation)],
        title=head,
        margin=dict(l=70, r=30, t=90 if legend == "top" else 70, b=60),
        legend=leg,
    )


def apply_layout(fig: go.Figure, title: str | None = None, presentation: bool = False,
                 legend: str = "right") -> go.Figure:
    """Give ``fig`` the report look in place and return it.

    White background, light grid, framed axes, fonts 13 px (×1.5 with ``presentation``);
    ``legend='right'`` puts the legend outside the plot on the right, ``'top'`` above it
    (horizontal). Annotations (subplot titles, labels) are scaled with the base font.
    The figure builders of :mod:`dashboard.figures` do not call this: they put
    :func:`base_layout` in the layout they build, which is much faster.
    """
    fig.update_layout(base_layout(title, presentation, legend))
    for ann in fig.layout.annotations or ():
        ann.font.size = (ann.font.size or FONT_SIZE) * scale(presentation)
    return fig
