"""Turning a figure's plain dicts into what a view needs: a plotly Figure, or the dicts.

Figures are built as plain dicts (traces and layout) and turned into a plotly Figure once, by
:func:`make_figure`: plotly validates every property on each ``add_trace``/``update_layout``
call, which made building a figure incrementally 5-10 times slower. Asked for ``plain=True``
(every builder takes it and passes it here), no plotly Figure is made at all: callbacks that
only serialise their figures get the plain dicts.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio

from model.specs import memo


@memo.lru("figure templates", 8)
def _template_dict(name: str, ident: int) -> dict:
    """The registered template ``name`` (object id ``ident``) as the dict a Figure holds; shared
    by the plain figures, which are serialised, never changed."""
    return pio.templates[name].to_plotly_json()


def make_figure(data: list[dict], layout: dict, plain: bool = False) -> go.Figure:
    """The figure of plain trace dicts ``data`` and layout dict ``layout``, created at once.

    Without plotly's property validation (4× faster): the builders pass only plain Python
    values and numpy arrays, and tests/test_figures.py checks that validating every figure
    gives the same JSON. The layout's template, a registered name, is resolved here. With
    ``plain`` the result is the figure's plain ``{"data", "layout"}`` dict instead: the same
    JSON as :func:`plain` of the Figure (up to the order of keys), without plotly's deep copies
    of every trace and of the template — for callbacks whose figures are only serialised.
    """
    layout = {k: v for k, v in layout.items() if not (k in ("annotations", "shapes") and not v)}
    template = layout.get("template")
    if plain:
        if isinstance(template, str):
            layout["template"] = _template_dict(template, id(pio.templates[template]))
        return {"data": _listed_objects(data), "layout": layout}  # type: ignore[return-value]
    if isinstance(template, str):
        layout["template"] = pio.templates[template]
    try:
        return go.Figure(data=data, layout=layout, _validate=False)
    except TypeError:  # a plotly without the (private) switch: validate
        return go.Figure(data=data, layout=layout)


def _listed_objects(data: list[dict]) -> list[dict]:
    """The traces with their object arrays (customdata) as nested lists: the same JSON, but
    orjson encodes them at once, where an object array sends plotly's ``to_json_plotly``
    through its per-element clean-up of the whole output (~5 ms a page). Traces sharing an
    array share its list."""
    listed: dict[int, tuple[np.ndarray, list]] = {}  # the array is kept: its id stays its own
    for trace in data:
        for key, value in trace.items():
            if isinstance(value, np.ndarray) and value.dtype == object:
                if id(value) not in listed:
                    listed[id(value)] = (value, value.tolist())
                trace[key] = listed[id(value)][1]
    return data


def plain(fig: go.Figure) -> dict:
    """The figure as the plain ``{"data", "layout"}`` dicts it holds, without plotly's deep
    copy (``to_dict`` costs ~3 ms a figure): for serialising figures built by
    :func:`make_figure`. Falls back to ``to_dict`` for any other figure."""
    data, layout = getattr(fig, "_data", None), getattr(fig, "_layout", None)
    if isinstance(data, list) and isinstance(layout, dict):
        return {"data": data, "layout": layout}
    return fig.to_dict()
