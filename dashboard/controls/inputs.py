"""One input value checked against its control, with the real reason in the control's own words.

"Layers must be at least 1", "NVLink bandwidth must be positive", "GPUs (to) must be at most
10,000,000": every message names the control by its label (never an internal key), says what is
wrong with the value that is there (a value present but invalid is never called empty), and a
value is never clamped or rounded: it is accepted as given or refused.
"""

from __future__ import annotations

import math
from typing import Any

from dashboard.controls.control_record import Control
from dashboard.controls.control_table import BY_KEY
from model.cli import numbers


def number_text(value: float) -> str:
    """A bound or a value for a message, written as every number meant for people
    (:mod:`model.cli.numbers`): 10,000,000 · 0.01 · 1,000,000,000,000,000,000 (never
    '1e+18')."""
    if isinstance(value, int) and not isinstance(value, bool):
        return numbers.integer(value)
    return numbers.number(value)


def _with_unit(c: Control, value: float) -> str:
    unit = c.unit if c.unit not in ("sequences", "tokens") or value != 1 else c.unit[:-1]
    return number_text(value) + (f" {unit}" if unit else "")


def expected(c: Control) -> str:
    """What the control takes, in words: "a whole number from 1 to 10,000"."""
    if c.choices:
        return "one of " + ", ".join(o["label"] for o in c.options())
    if c.kind is bool:
        return "on or off"
    if c.kind is str:
        return "a text"
    what = "a whole number" if c.kind is int else "a number"
    if c.lo is not None and c.hi is not None:
        return f"{what} from {_with_unit(c, c.lo)} to {_with_unit(c, c.hi)}"
    return what


def _choice(c: Control, value: Any) -> tuple[Any, str]:
    # 1 == True in Python: a bool is never an integer choice, nor an integer a bool choice
    if any(type(value) is type(choice) and value == choice for choice in c.choices):
        return value, ""
    return None, f"{c.label} must be {expected(c)}"


def _number(c: Control, value: Any) -> tuple[Any, str]:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None, f"{c.label} must be a number"
    if isinstance(value, float) and not math.isfinite(value):
        return None, f"{c.label} must be a finite number"
    if c.kind is int:
        if isinstance(value, float) and not value.is_integer():
            return None, f"{c.label} must be a whole number"
        value = int(value)
    if c.lo is not None and value < c.lo:
        if c.lo > 0 and value <= 0 and c.kind is float:
            return None, f"{c.label} must be positive"
        return None, f"{c.label} must be at least {_with_unit(c, c.lo)}"
    if c.hi is not None and value > c.hi:
        return None, f"{c.label} must be at most {_with_unit(c, c.hi)}"
    return (float(value) if c.kind is float else value), ""


def check_value(c: Control, value: Any) -> tuple[Any, str]:
    """(clean value, "") or (None, the reason, naming the control by its label)."""
    if value is None or (isinstance(value, str) and value.strip() == "" and c.kind is not str):
        return None, f"{c.label} needs a value: {expected(c)}"
    if c.choices:
        return _choice(c, value)
    if c.kind is bool:
        if isinstance(value, bool):
            return value, ""
        return None, f"{c.label} must be on or off"
    if c.kind is str:
        if isinstance(value, str) and len(value) <= 200:
            return value, ""
        return None, f"{c.label} must be {expected(c)}"
    return _number(c, value)


def batch_from_tokens(tokens: Any, seq_len: Any) -> tuple[int | None, str]:
    """The global batch in sequences for a batch given in tokens: (sequences, "") or (None, why).

    A batch in tokens must be a whole number of sequences: it is refused, never rounded."""
    batch = BY_KEY["global_batch"]
    if tokens is None or tokens == "":
        return None, "Global batch (tokens) needs a value: a multiple of the sequence length"
    if isinstance(tokens, bool) or not isinstance(tokens, (int, float)) or not math.isfinite(
            tokens):
        return None, "Global batch (tokens) must be a number"
    if tokens <= 0:
        return None, "Global batch (tokens) must be positive"
    length, message = check_value(BY_KEY["seq_len"], seq_len)
    if message:
        return None, "Global batch (tokens): set a valid sequence length first"
    if isinstance(tokens, float) and not tokens.is_integer():
        return None, "Global batch (tokens) must be a whole number"
    if int(tokens) % length:
        below = int(tokens) // length * length
        options = " or ".join(number_text(v) for v in (below, below + length) if v > 0)
        return None, (f"Global batch of {number_text(int(tokens))} tokens is not a whole "
                      f"number of {number_text(length)}-token sequences: use a multiple of "
                      f"{number_text(length)} (e.g. {options})")
    return check_value(batch, int(tokens) // length)
