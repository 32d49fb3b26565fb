"""A small declarative validator for the JSON specs (systems, workloads).

A spec is a flat JSON object. Each allowed key is described once by a :class:`Field` (type, range,
default, meaning); :func:`validate` checks a dict against such a table and returns a clean dict or
raises :class:`~model.errors.ModelError` naming the key and the allowed range. Unknown keys are
rejected by name, so a typo never passes silently.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from model.errors import ModelError
from model.specs import strict_json

MAX_SPEC_BYTES = 64 * 1024  # a spec file is a few hundred bytes; refuse anything absurd
# presets (systems/, workloads/) and published reference data (reference/), shipped inside the
# package so that an installed copy finds them as a checkout does
DATA_DIR = Path(__file__).resolve().parents[1] / "data"


@dataclass(frozen=True)
class Field:
    """One allowed key of a spec, declared once: its type, inclusive range, default, choices,
    unit and help (``doc``: what it means, read by validation messages, the command line's flag
    help and the dashboard's tooltips)."""

    name: str
    kind: type | tuple[type, ...]
    doc: str
    lo: float | None = None
    hi: float | None = None
    default: Any = None
    required: bool = False
    choices: tuple | None = None  # the allowed values (texts, or integers such as ZeRO stages)
    max_len: int = 2000  # characters of a text value
    unit: str = ""  # of a number ("GB", "GB/s"); names carry it too (hbm_capacity_gb)

    def describe(self) -> str:
        if self.choices:
            return "one of " + ", ".join(repr(c) for c in self.choices)
        if self.lo is not None or self.hi is not None:
            return f"a number in [{self.lo}, {self.hi}]"
        return f"a {getattr(self.kind, '__name__', 'value')}"


def _key(key: Any) -> str:
    """An unknown key as typed ('name'), or a short rendering of a non-text or huge key."""
    return f"'{key}'" if isinstance(key, str) and len(key) <= 80 else _show(key)


def _show(value: Any) -> str:
    """A short, always printable rendering of a user value for an error message."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value).bit_length() > 64:
        return f"an integer of about {int(abs(value).bit_length() * 0.30103)} digits"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def check_field(what: str, field: Field, value: Any) -> Any:
    """One value checked against its field: the clean value, or ModelError naming the field."""
    kinds = field.kind if isinstance(field.kind, tuple) else (field.kind,)
    numeric = any(k in (int, float) for k in kinds)
    if isinstance(value, bool) and bool not in kinds:
        raise ModelError(f"{what}: '{field.name}' must be {field.describe()}, got {_show(value)}")
    if numeric and isinstance(value, (int, float)) and not isinstance(value, bool):
        if int in kinds and float not in kinds:
            if isinstance(value, float) and not value.is_integer():
                raise ModelError(f"{what}: '{field.name}' must be an integer, got {_show(value)}")
            value = int(value)
        if isinstance(value, float) and not math.isfinite(value):
            raise ModelError(f"{what}: '{field.name}' must be finite, got {_show(value)}")
        if (field.lo is not None and value < field.lo) or (
            field.hi is not None and value > field.hi
        ):
            raise ModelError(
                f"{what}: '{field.name}' = {_show(value)} is out of range;"
                f" allowed [{field.lo}, {field.hi}] ({field.doc})"
            )
        return float(value) if float in kinds and int not in kinds else value
    if not isinstance(value, kinds):
        raise ModelError(f"{what}: '{field.name}' must be {field.describe()}, got {_show(value)}")
    if field.choices is not None and value not in field.choices:
        raise ModelError(f"{what}: '{field.name}' must be {field.describe()}, got {_show(value)}")
    if isinstance(value, str) and len(value) > field.max_len:
        raise ModelError(f"{what}: '{field.name}' is too long (max {field.max_len} characters)")
    return value


def validate(what: str, data: Any, fields: tuple[Field, ...]) -> dict[str, Any]:
    """Check ``data`` against ``fields``; return a dict with every field set (defaults filled).

    Raises ModelError for a non-object, an unknown key, a missing required key, a wrong type or an
    out-of-range value; the message names the key and what is allowed.
    """
    if not isinstance(data, dict):
        raise ModelError(f"{what}: expected a JSON object, got {type(data).__name__}")
    table = {f.name: f for f in fields}
    unknown = sorted(set(data) - set(table), key=str)  # keys of any type, never a TypeError
    if unknown:
        raise ModelError(
            f"{what}: unknown key {_key(unknown[0])}; allowed keys: {', '.join(sorted(table))}"
        )
    out: dict[str, Any] = {}
    for f in fields:
        if f.name in data and data[f.name] is not None:
            out[f.name] = check_field(what, f, data[f.name])
        elif f.required:
            raise ModelError(f"{what}: missing required key '{f.name}' ({f.doc}; {f.describe()})")
        else:
            out[f.name] = f.default
    return out


def read_json(path: str | Path, what: str) -> Any:
    """Read a small JSON file, with a clear error for a missing, huge or malformed file."""
    p = Path(path)
    if not p.is_file():
        raise ModelError(f"{what}: no such file '{p}'")
    if p.stat().st_size > MAX_SPEC_BYTES:
        raise ModelError(f"{what}: file '{p}' is larger than {MAX_SPEC_BYTES} bytes")
    # numbers checked as parsed (model.specs.strict_json): no NaN, Infinity, 1e308 or
    # 5,000-digit integers; malformed text, non-UTF-8 bytes and deep nesting refused in words
    return strict_json.loads(p.read_bytes(), f"{what}: '{p}'")


def preset_path(name_or_path: str | Path, folder: Path, what: str) -> Path:
    """A JSON file path as given, or the preset ``folder/<name>.json`` (error if unknown)."""
    text = str(name_or_path)
    if text.endswith(".json"):
        return Path(text)
    path = folder / f"{text}.json"
    if not path.is_file():
        raise ModelError(f"unknown {what} '{text}'; presets: {', '.join(preset_names(folder))}")
    return path


def preset_names(folder: Path) -> list[str]:
    """Names of the JSON presets in ``folder`` (file stems), sorted."""
    return sorted(p.stem for p in folder.glob("*.json"))
