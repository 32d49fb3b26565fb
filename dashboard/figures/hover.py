"""Hover data of the figures: each row's parallel configuration and NVLink placement as text,
and :class:`Hover`, the customdata columns and hovertemplate lines of a trace."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from dashboard.figures.axes import fmt_int

# Parallel configuration shown in every hover: (column, label).
CONFIG_FIELDS: tuple[tuple[str, str], ...] = (
    ("dp", "dp"), ("tp1", "tp1"), ("tp2", "tp2"), ("pp", "pp"), ("microbatch", "mb"),
    ("nb", "nb"), ("ep", "ep"), ("etp", "etp"),
)
EXPERT_FIELDS = ("ep", "etp")  # shown only where some row has experts spread (a MoE model)
PLACEMENT_COLUMNS = ("nv_tp1", "nv_tp2", "nv_dp", "nv_pp")
PLACEMENT_LABEL = "NVLink placement (tp1×tp2×dp×pp)"


def config_values(frame: Mapping) -> dict[str, list[str]]:
    """The parallel configuration of each row as text, by column ('dp': ['8', ...]), and the
    NVLink placement ('placement'); only the columns ``frame`` has. For :meth:`Hover.config`,
    computed once when several traces share the rows."""
    out = {column: _int_texts(frame[column]) for column in config_columns(frame)}
    if all(c in frame for c in PLACEMENT_COLUMNS):
        cols = [_int_texts(frame[c]) for c in PLACEMENT_COLUMNS]
        out["placement"] = ["×".join(row) for row in zip(*cols)]
    return out


def _int_texts(values: object) -> list[str]:
    """:func:`fmt_int` of each value; an integer array's values are their own text."""
    if isinstance(values, np.ndarray) and values.dtype.kind in "iu":
        return [str(v) for v in values.tolist()]
    return [fmt_int(v) for v in _as_list(values)]


def config_columns(frame: Mapping) -> list[str]:
    """The configuration columns ``frame`` has, in :data:`CONFIG_FIELDS` order; ep and etp
    only where some row is not 1 (a dense model's hovers stay as they were)."""
    def shown(column: str) -> bool:
        if column not in frame:
            return False
        if column not in EXPERT_FIELDS:
            return True
        values = floats(frame[column])
        return bool((values[~np.isnan(values)] != 1).any())
    return [column for column, _ in CONFIG_FIELDS if shown(column)]


def floats(values: object) -> np.ndarray:
    """A column (Series, array, list) as a float array, NaN where it is not a number."""
    if isinstance(values, np.ndarray) and values.dtype.kind in "biuf":
        return values.astype(float)
    if isinstance(values, pd.Series) and pd.api.types.is_numeric_dtype(values.dtype):
        return values.to_numpy(dtype=float, na_value=np.nan)
    return pd.to_numeric(pd.Series(values) if not isinstance(values, pd.Series) else values,
                         errors="coerce").to_numpy(dtype=float, na_value=np.nan)


def _as_list(values: object) -> list:
    """A Series, array or sequence as a plain list."""
    tolist = getattr(values, "tolist", None)
    return tolist() if tolist is not None else list(values)  # type: ignore[call-overload]


_SIGNIFICANT = re.compile(r"\.(\d+)g")


def for_people(fmt: str) -> str:
    """A d3 format as model.cli.numbers writes numbers: '.4g' (which writes 15,000 as
    '1.500e+4') becomes ',.4~r' (significant digits, thousands separators, never an
    exponent); any other format is kept."""
    found = _SIGNIFICANT.fullmatch(fmt)
    return f",.{found.group(1)}~r" if found else fmt


class Hover:
    """customdata columns of a trace and the hovertemplate lines that show them.

    ``frame`` is a DataFrame or a mapping of column name → values (list or array).
    ``add(column, label, fmt, unit)`` appends a column; ``config()`` appends the parallel
    configuration (dp/tp1/tp2/pp/mb/nb on one line) and its NVLink placement. The column names
    go to the trace's ``meta['customdata']`` so :func:`figure_table` can name them.
    """

    def __init__(self, frame: Mapping, header: str | None = None):
        self.frame = frame
        self.columns: list[str] = []
        self.values: list[list[object]] = []
        self.lines: list[str] = [header] if header else []
        self._customdata: np.ndarray | None = None  # built once, for every trace sharing it

    def _push(self, name: str, values: Sequence[object]) -> int:
        self.columns.append(name)
        self.values.append(_as_list(values))
        self._customdata = None
        return len(self.columns) - 1

    def add(self, column: str, label: str, fmt: str = "", unit: str = "") -> Hover:
        if column in self.frame:
            i = self._push(column, self.frame[column])
            spec = f":{for_people(fmt)}" if fmt else ""
            self.lines.append(f"{label} %{{customdata[{i}]{spec}}}{unit}")
        return self

    def ref(self, column: str, fmt: str = "") -> str:
        """Register ``column`` and return its hovertemplate placeholder ('%{customdata[i]}')."""
        i = self._push(column, self.frame[column])
        return f"%{{customdata[{i}]{':' + for_people(fmt) if fmt else ''}}}"

    def line(self, text: str) -> Hover:
        self.lines.append(text)
        return self

    def config(self, values: Mapping[str, Sequence[str]] | None = None) -> Hover:
        """Append the configuration; ``values`` from :func:`config_values` (of the same rows)
        saves recomputing it."""
        values = config_values(self.frame) if values is None else values
        parts = []
        for column, label in CONFIG_FIELDS:
            if column in values:
                i = self._push(column, values[column])
                parts.append(f"{label} %{{customdata[{i}]}}")
        if parts:
            self.lines.append(" · ".join(parts))
        if "placement" in values:
            i = self._push("placement", values["placement"])
            self.lines.append(f"{PLACEMENT_LABEL} %{{customdata[{i}]}}")
        return self

    @property
    def customdata(self) -> np.ndarray | None:
        if not self.values:
            return None
        if self._customdata is None:
            out = np.empty((len(self.values[0]), len(self.values)), dtype=object)
            for j, column in enumerate(self.values):
                out[:, j] = column
            self._customdata = out
        return self._customdata

    def template(self, extra: str = "", header: str | None = None) -> str:
        """The hovertemplate; ``header`` is a first line for this trace only."""
        lines = self.lines if header is None else [header, *self.lines]
        return "<br>".join(lines) + f"<extra>{extra}</extra>"

    def trace_kwargs(self, group: str | None = None, extra: str = "",
                     header: str | None = None) -> dict:
        """customdata, hovertemplate and meta for a trace built from this frame (traces of the
        same hover share its customdata array; ``header`` as in :meth:`template`)."""
        return dict(customdata=self.customdata, hovertemplate=self.template(extra, header),
                    meta={"group": group, "customdata": list(self.columns)})


class Columns(Mapping):
    """The columns of ``frame`` plus (or overridden by) ``extra`` arrays, without copying the
    frame: a cheap stand-in for ``frame.assign(**extra)`` as a :class:`Hover` source."""

    def __init__(self, frame: pd.DataFrame, **extra: object):
        self.frame, self.extra = frame, extra

    def __getitem__(self, key: str) -> object:
        return self.extra[key] if key in self.extra else self.frame[key]

    def __contains__(self, key: object) -> bool:
        return key in self.extra or key in self.frame.columns

    def __iter__(self):
        return iter([*self.frame.columns, *(k for k in self.extra if k not in self.frame)])

    def __len__(self) -> int:
        return sum(1 for _ in self)
