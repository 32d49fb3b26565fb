"""A page's own form (Serving, Post-training): each input declared once as a :class:`FormInput`
record (its key in the form and the URL, label, default, the estimator field it feeds — whose
range, unit and help it takes — and its widget), its fields read as whole numbers in a range,
and its values in the URL's query, so a copied link reproduces the page. Pure: no Dash (the
widgets are made from the records by :func:`dashboard.form_link.form_widgets`)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode

from model import ModelError
from model.specs.schema import Field

MAX_QUERY_CHARS = 2000  # a longer query is not read at all
MAX_VALUE_CHARS = 40  # nor a longer value
MAX_FIELDS = 50


@dataclass(frozen=True)
class FormInput:
    """One input of a page's form: ``key`` (its control is ``{prefix}-{key}`` and its URL key
    ``key``), ``label``, ``default``, the name of the estimator ``field`` it feeds (None: a
    page setting such as the GPU count), ``widget`` "number" or "choice", a number's ``step``
    and a choice's ``options`` ((label, value) pairs)."""

    key: str
    label: str
    default: Any = None
    field: str | None = None
    widget: str = "number"
    step: str = "any"
    options: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True)
class FormFields:
    """The estimator fields a page's numbers feed (by field name) and where the page narrows
    a field's range ({"lo": …, "hi": …}; the page says why beside it), never widening it."""

    fields: Mapping[str, Field]
    narrowed: Mapping[str, Mapping[str, float]]

    def range(self, name: str) -> tuple[float, float]:
        """[lo, hi] of the form's number for field ``name``: the field's, narrowed where
        :attr:`narrowed` says."""
        f, narrowed = self.fields[name], self.narrowed.get(name, {})
        return narrowed.get("lo", f.lo), narrowed.get("hi", f.hi)

    def whole(self, form: dict, key: str, what: str, name: str | None = None) -> int:
        """The form's ``key`` as a whole number in the range of field ``name`` (default
        ``key``), or a ModelError naming ``what``."""
        lo, hi = self.range(name or key)
        return whole(form, key, int(lo), int(hi), what)


def default_form(inputs: Iterable[FormInput]) -> dict[str, Any]:
    """The form as it opens: each input's default, in the inputs' order."""
    return {i.key: i.default for i in inputs}


def tip(field: Field | None, lo: float | None = None, hi: float | None = None) -> str | None:
    """An input's tooltip: its field's help, with the range the page allows and its unit."""
    if field is None:
        return None
    lo = field.lo if lo is None else lo
    hi = field.hi if hi is None else hi
    if lo is None or hi is None or field.choices:
        return field.doc
    unit = f" {field.unit}" if field.unit else ""
    return f"{field.doc} ({lo:,g} to {hi:,g}{unit})"


def whole(form: dict, key: str, lo: int, hi: int, what: str) -> int:
    """The form's ``key`` as a whole number in [lo, hi], or a ModelError naming ``what``."""
    value = form.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(
            value) or value != int(value) or not lo <= value <= hi:
        raise ModelError(f"{what} must be a whole number in [{lo}, {hi}]")
    return int(value)


def query_of(form: dict[str, Any], keys: Iterable[str]) -> str:
    """The form's ``keys`` as a URL query (``?gpus=8&mode=offline…``; empty fields left out)."""
    items = {k: form.get(k) for k in keys if form.get(k) not in (None, "")}
    return "?" + urlencode({k: str(v)[:MAX_VALUE_CHARS] for k, v in items.items()})


def typed(text: str) -> Any:
    """A query value as the control holds it: an integer, a number, or the text."""
    try:
        number = float(text)
    except ValueError:
        return text
    if not math.isfinite(number):
        return text
    return int(number) if number.is_integer() and "." not in text and "e" not in text.lower() \
        else number


def fields_of(search: Any, keys: Iterable[str]) -> dict[str, Any]:
    """The form's fields a URL query gives (unknown keys and overlong values ignored; the page
    checks the values as it checks typed ones)."""
    if not isinstance(search, str) or len(search) > MAX_QUERY_CHARS:
        return {}
    allowed = set(keys)
    return {k: typed(v) for k, v in parse_qsl(search.lstrip("?"))[:MAX_FIELDS]
            if k in allowed and len(v) <= MAX_VALUE_CHARS}
