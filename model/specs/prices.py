"""Co-design inputs: the system fields varied and the price table that prices each design.

A price table is a small JSON object — never executed or unpickled, read with a size limit and
validated key by key::

    {"base_usd": 20000,
     "hbm_capacity_gb": {"20": 2250, "40": 5000, "80": 10000, "120": 20000},
     "host_memory_gb": {"0": 0, "256": 2500, "512": 10000, "1024": 20000}}

A design's price per GPU is ``base_usd`` plus, for each varied field, the price its value adds
(Calculon's Study 5 prices, Isaev et al. SC23: a non-linear price of memory). Every varied
field needs a price for each of its values; a price for a field that is not varied is an error
(a typo must not pass silently).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from model.errors import ModelError
from model.specs.hardware import FIELDS as SYSTEM_FIELDS
from model.specs.schema import check_field, read_json

MAX_PRICE_BYTES = 16 * 1024  # a price table is a few hundred bytes
MAX_VALUES = 64  # values of one varied field
MAX_DESIGNS = 1024  # combinations of the varied fields
MAX_USD = 1e9  # per GPU
NOT_VARIED = ("name", "source", "gpu", "generation", "cost_source", "usd_per_gpu_hour",
              "purchase_usd_per_gpu")  # text, or prices themselves
VARIABLE = {f.name: f for f in SYSTEM_FIELDS if f.name not in NOT_VARIED}


@dataclass(frozen=True)
class PriceTable:
    """``base_usd`` per GPU and, per varied field, the USD each value adds."""

    base_usd: float
    adders: Mapping[str, Mapping[float, float]]

    def price(self, design: Mapping[str, float]) -> float:
        """USD per GPU of a design (a value for each priced field)."""
        return self.base_usd + sum(self.adders[k][float(v)] for k, v in design.items())


def _usd(where: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
            math.isfinite(value) and 0 <= value <= MAX_USD):
        raise ModelError(f"prices: {where} must be a price in [0, {MAX_USD:g}] USD, got "
                         f"{value!r:.40}")
    return float(value)


def _value(field: str, text: Any) -> float:
    try:
        value = float(text) if isinstance(text, str) and len(text) <= 40 else math.nan
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise ModelError(f"prices: '{field}' has a key {text!r:.40} that is not a number")
    return value


def price_table(data: Any) -> PriceTable:
    """A validated :class:`PriceTable` from a parsed JSON object."""
    if not isinstance(data, dict):
        raise ModelError(f"prices: expected a JSON object, got {type(data).__name__}")
    if "base_usd" not in data:
        raise ModelError("prices: missing 'base_usd' (the price of a GPU before the varied "
                         "fields, USD)")
    adders: dict[str, dict[float, float]] = {}
    for key, table in data.items():
        if key == "base_usd":
            continue
        if not isinstance(key, str) or key not in VARIABLE:
            raise ModelError(f"prices: unknown key {str(key)[:40]!r}; allowed: base_usd and "
                             "numeric system fields (e.g. hbm_capacity_gb, host_memory_gb)")
        if not isinstance(table, dict) or not 0 < len(table) <= MAX_VALUES:
            raise ModelError(f"prices: '{key}' must be an object of value → USD with 1 to "
                             f"{MAX_VALUES} entries")
        adders[key] = {_value(key, v): _usd(f"'{key}' {v!r:.20}", usd)
                       for v, usd in table.items()}
    return PriceTable(_usd("'base_usd'", data["base_usd"]), adders)


def load_prices(source: str | Path | dict | Any) -> PriceTable:
    """A price table from a JSON file (at most ``MAX_PRICE_BYTES``) or a dict."""
    if not isinstance(source, (str, Path)):
        return price_table(source)  # parsed JSON: validated as such
    path = Path(source)
    if path.is_file() and path.stat().st_size > MAX_PRICE_BYTES:
        raise ModelError(f"prices: file '{path}' is larger than {MAX_PRICE_BYTES} bytes")
    return price_table(read_json(path, "prices"))


def check_vary(vary: Mapping[str, Sequence[float]], prices: PriceTable) -> dict[str, list]:
    """The varied fields and values, validated against the system schema and the prices."""
    if not isinstance(vary, Mapping) or not vary:
        raise ModelError("vary at least one system field (e.g. hbm_capacity_gb=20,40,80)")
    out: dict[str, list] = {}
    count = 1
    for key, values in vary.items():
        field = VARIABLE.get(key) if isinstance(key, str) else None
        if field is None:
            raise ModelError(f"vary: {str(key)[:40]!r} is not a numeric system field")
        if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or not (
                0 < len(values) <= MAX_VALUES):
            raise ModelError(f"vary: '{key}' needs 1 to {MAX_VALUES} values")
        out[key] = [_checked(field, v) for v in values]
        count *= len(values)
        if key not in prices.adders:
            raise ModelError(f"prices: no prices for the varied field '{key}'")
        missing = [v for v in out[key] if float(v) not in prices.adders[key]]
        if missing:
            raise ModelError(f"prices: no price for {key} = {missing[0]:g}")
    extra = sorted(set(prices.adders) - set(out))
    if extra:
        raise ModelError(f"prices: '{extra[0]}' is priced but not varied")
    if count > MAX_DESIGNS:
        raise ModelError(f"vary: {count} designs, more than {MAX_DESIGNS}")
    return out


def _checked(field: Any, value: Any) -> float | int:
    return check_field("vary", field, value)


# Calculon's Study 5 (Isaev et al., SC23, §VI-E and Table 3): the defaults of the dashboard's
# co-design form, the same inputs as bench/study5/ (which the README's table is made from).
STUDY5_BUDGET_USD = 125e6
STUDY5_PRICES: dict[str, Any] = {
    "base_usd": 20000,
    "hbm_capacity_gb": {"20": 2250, "40": 5000, "80": 10000, "120": 20000},
    "host_memory_gb": {"0": 0, "256": 2500, "512": 10000, "1024": 20000},
}
# (workload preset, global batch in samples): Narayanan et al. 2021's runs of these models
STUDY5_MODELS = (("gpt3-175b", 1536), ("turing-530b", 2520), ("megatron-1t", 3072))
STUDY5_SYSTEM = "h100"
# DDR5 offload memory at 100 GB/s per GPU, GPU-host link and host memory alike (Study 5
# publishes none; Calculon's Study 4 offload memory is "512 GB @ 100 GB/s")
STUDY5_HOST_GB_PER_S = 100.0
