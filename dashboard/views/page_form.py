"""A page's own form (Serving, Post-training): its fields read as whole numbers in a range, and
its values in the URL's query, so a copied link reproduces the page. Pure: no Dash."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any
from urllib.parse import parse_qsl, urlencode

from model import ModelError

MAX_QUERY_CHARS = 2000  # a longer query is not read at all
MAX_VALUE_CHARS = 40  # nor a longer value
MAX_FIELDS = 50


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
