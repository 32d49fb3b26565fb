"""JSON from users (spec files, runs files, uploads) with its numbers checked as they are parsed.

Python's ``json`` takes ``NaN``, ``Infinity`` and ``-Infinity`` (not JSON, RFC 8259 section 6),
turns ``1e400`` into ``inf`` and ``1e308`` into a float no quantity of this project comes near,
and parses a 5,000-digit integer only to raise ``ValueError`` past CPython's 4,300-digit limit
(a traceback): all were fitted or crashed (issue 29, finding 9). :func:`loads` refuses each in
words, through ``json``'s own ``parse_constant``/``parse_int``/``parse_float`` hooks, so nothing
absurd is ever built: integers of at most :data:`MAX_DIGITS` digits, numbers of at most
:data:`MAX_NUMBER_CHARS` characters, finite and within ±:data:`MAX_MAGNITUDE`.
"""

from __future__ import annotations

import json
import math
from typing import Any

from model.errors import ModelError

MAX_DIGITS = 20  # an integer: 10**20 exceeds every count here (tokens ~1e13, bytes ~1e13)
MAX_NUMBER_CHARS = 40  # a number as written (a float with all its 17 significant digits fits)
MAX_MAGNITUDE = 1e30  # |x|: FLOP/s ~1e15-1e18, FLOPs of a run ~1e26; 1e308 is nothing physical


class NumberError(ModelError):
    """A number in a JSON document that is not finite or is absurdly large or long."""


def _constant(name: str) -> Any:
    raise NumberError(f"{name} is not a number JSON allows: give a finite number")


def _int(text: str) -> int:
    digits = text.lstrip("-")
    if len(digits) > MAX_DIGITS:
        raise NumberError(f"an integer of {len(digits):,} digits (at most {MAX_DIGITS}): "
                          f"{text[:12]}…")
    return int(text)


def _float(text: str) -> float:
    if len(text) > MAX_NUMBER_CHARS:
        raise NumberError(f"a number written with {len(text):,} characters (at most "
                          f"{MAX_NUMBER_CHARS}): {text[:12]}…")
    value = float(text)
    if not math.isfinite(value) or abs(value) > MAX_MAGNITUDE:
        raise NumberError(f"the number {text} is out of range (at most {MAX_MAGNITUDE:g} in "
                          f"size)")
    return value


def loads(text: str | bytes, what: str) -> Any:
    """``json.loads`` with every number checked; ModelError (``what: …``) for anything that
    is not JSON of sane numbers: malformed text, bytes that are not UTF-8, deep nesting."""
    try:
        return json.loads(text, parse_constant=_constant, parse_int=_int, parse_float=_float)
    except NumberError as exc:
        raise NumberError(f"{what}: {exc}") from None
    except json.JSONDecodeError as exc:  # where it is, as an editor counts (from 1)
        raise ModelError(f"{what} is not valid JSON: {exc.msg} at line {exc.lineno}, "
                         f"column {exc.colno}") from None
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise ModelError(f"{what} is not valid JSON ({type(exc).__name__})") from None
