"""Numbers written for people, one way everywhere: the command line's text and every table,
headline and caption of the dashboard (which imports this module; it imports nothing of the
project).

Rules: thousands separators ('1,024'); a sensible number of significant digits and never
scientific notation ('15,000 TFLOP/s', not '1.5e+04'); units named, in the singular for
exactly one ('1 node', '2 nodes'); money in dollars ('$18.99M', '$125,000'); a duration below
a day in hours or minutes ('4.8 hours', not '0.2 days'), from a day up with one decimal.
Missing or non-finite values read '–'.
"""

from __future__ import annotations

import math

DASH = "–"
MAX_DECIMALS = 6  # below 1e-6 a value reads as 0 at this precision: shown with '<'


def _finite(value: object) -> float | None:
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def number(value: object, digits: int = 3) -> str:
    """``value`` to ``digits`` significant digits, whole numbers of ``digits`` digits or more
    with every digit and thousands separators, never in scientific notation:
    15000 → '15,000', 1.8993e7 → '18,993,000', 21.24 → '21.2', 0.01234 → '0.0123',
    1e-9 → '<0.000001'; NaN, ±inf, None → '–'."""
    v = _finite(value)
    if v is None:
        return DASH
    if v == 0:
        return "0"
    magnitude = math.floor(math.log10(abs(v)))
    if magnitude + 1 >= digits:
        return f"{round(v):,}"
    decimals = digits - 1 - magnitude
    if decimals > MAX_DECIMALS:
        return ("-" if v < 0 else "") + f"<{10.0 ** -MAX_DECIMALS:.{MAX_DECIMALS}f}"
    text = f"{v:,.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def integer(value: object) -> str:
    """A count with thousands separators: 73513440 → '73,513,440' ('–' when missing)."""
    v = _finite(value)
    return DASH if v is None else f"{round(v):,}"


def plural(noun: str, count: float) -> str:
    """``noun`` for ``count`` of it: 'node' for 1, 'nodes' otherwise ('microbatch' →
    'microbatches', 'replica' → 'replicas')."""
    if count == 1:
        return noun
    return noun + ("es" if noun.endswith(("ch", "sh", "s", "x")) else "s")


def count(value: object, noun: str) -> str:
    """A whole count and its noun: '1 node', '4 nodes', '1,024 GPUs', '1 microbatch'."""
    v = _finite(value)
    if v is None:
        return f"{DASH} {plural(noun, 2)}"
    return f"{round(v):,} {plural(noun, round(v))}"


def quantity(value: object, unit: str, digits: int = 3) -> str:
    """A measured value and its unit: '15,000 TFLOP/s', '21.2 ms', '0.5 GB'."""
    return f"{number(value, digits)} {unit}"


def money(usd: object) -> str:
    """Dollars: '$28.16M' from a million up, '$125,000' from a thousand, '$2.49' (cents)
    below."""
    v = _finite(usd)
    if v is None:
        return "unknown"
    if abs(v) >= 1e9:
        return f"${v / 1e9:,.2f}B"
    if abs(v) >= 1e6:
        return f"${v / 1e6:,.2f}M"
    if abs(v) >= 1e3:
        return f"${v:,.0f}"
    return f"${v:,.2f}"


def fixed(value: object, decimals: int = 1) -> str:
    """``decimals`` decimals with thousands separators from 1 up ('12.0', '1,234.5'); below 1
    the significant digits :func:`number` keeps ('0.0123', never '0.0')."""
    v = _finite(value)
    if v is None:
        return DASH
    return f"{v:,.{decimals}f}" if abs(v) >= 1 or v == 0 else number(v, decimals + 2)


def duration_days(days: object) -> str:
    """A duration given in days, in the unit that reads best: '25.3 days', '1,824.0 days'
    (one decimal from a day up), '4.8 hours', '12 minutes', '45 seconds' below."""
    v = _finite(days)
    if v is None:
        return f"{DASH} days"
    if abs(v) >= 1 or v == 0:
        shown = fixed(v, 1)
        return f"{shown} {'day' if shown == '1.0' else 'days'}"
    for size, unit in ((1 / 24, "hour"), (1 / 1440, "minute"), (1 / 86400, "second")):
        if abs(v) >= size or unit == "second":
            shown = number(v / size, 2 if v / size < 10 else 3)
            return f"{shown} {plural(unit, 1 if shown == '1' else 2)}"
    raise AssertionError("unreachable")


def share(value: object, each: str) -> str:
    """A mean amount per unit, fractions kept: '0.5 per replica', '32 per decode instance'
    (never 'batch 0' for one request shared by two replicas)."""
    return f"{number(value)} per {each}"
