"""AG Grid column definitions, one helper for every table of the dashboard: sortable columns,
numbers right-aligned with a d3 format ('–' when missing), filters, header tooltips and an
optional red flag for errors beyond ±10 %."""

from __future__ import annotations

from typing import Any

_FORMAT = "params.value == null ? '–' : d3.format('{fmt}')(params.value)"
FLAG_PCT = 10  # |error| above this many percent is shown in red
# 4 significant digits with thousands separators and never an exponent (d3 'r': 18,990,000 and
# 0.01234, where ',.4g' wrote '1.899e+7'): what model.cli.numbers.number writes, in the browser
SIGNIFICANT = ",.4~r"


def number_column(field: str, header: str, fmt: str = ".1f", width: int = 110,
                  flag: bool = False, filter: bool = True, **extra: Any) -> dict[str, Any]:
    """A sortable number column formatted with ``fmt`` (a d3 format: '.2f', '.0%', '.3s');
    ``flag``: values beyond ±10 (percent) in red; ``filter``: a number filter."""
    col: dict[str, Any] = {"field": field, "headerName": header, "headerTooltip": header,
                           "width": width, "sortable": True, "type": "rightAligned",
                           "valueFormatter": {"function": _FORMAT.format(fmt=fmt)}, **extra}
    if filter:
        col["filter"] = "agNumberColumnFilter"
    if flag:
        col["cellStyle"] = {"styleConditions": [
            {"condition": f"params.value != null && Math.abs(params.value) > {FLAG_PCT}",
             "style": {"color": "#b42318", "fontWeight": "600"}}]}
    return col


def text_column(field: str, header: str, width: int = 140, filter: bool = True,
                **extra: Any) -> dict[str, Any]:
    """A sortable text column; ``filter``: a text filter; ``extra``: any other column option
    (``pinned``, ``tooltipField``…)."""
    col = {"field": field, "headerName": header, "headerTooltip": header, "width": width,
           "sortable": True, **extra}
    if filter:
        col["filter"] = "agTextColumnFilter"
    return col
