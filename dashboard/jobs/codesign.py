"""The Plan & cost page's co-design study: the form's inputs validated on the server, and the
study run (:func:`model.studies.codesign.codesign`) with progress, cached like every view.

The form gives the models, a global batch (one, or one per model), the base system and its
host-memory bandwidth, the budget, and up to :data:`MAX_FIELDS` varied system fields, each with
its values and the price each value adds over a base price. Everything is checked here with the
estimator's own validators (:func:`model.specs.prices.price_table` and
:func:`~model.specs.prices.check_vary`, the presets' loaders) and bounded: at most
:data:`MAX_MODELS` models, :data:`MAX_VALUES` values per field, :data:`MAX_ROWS` (model, design)
rows, :data:`MAX_GPUS` GPUs bought by the cheapest design, and a time budget
(:data:`dashboard.jobs.studies.SWEEP_TIME_BUDGET_S`).
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable
from typing import Any

import pandas as pd

from dashboard.controls.control_table import BY_KEY
from dashboard.controls.inputs import check_value
from dashboard.jobs import budget, compute, studies
from model import ModelError, list_models, list_systems, load_model, load_system
from model.api import codesign
from model.engine.counts import count_range
from model.engine.request import Request
from model.specs.hardware import FIELDS as SYSTEM_FIELDS
from model.specs.prices import (
    STUDY5_BUDGET_USD,
    STUDY5_HOST_GB_PER_S,
    STUDY5_MODELS,
    STUDY5_PRICES,
    STUDY5_SYSTEM,
    VARIABLE,
    check_vary,
    price_table,
)
from model.studies.codesign import EXECUTION

MAX_MODELS = 6
MAX_FIELDS = 3
MAX_VALUES = 6  # values of one varied field
MAX_ROWS = 216  # (model, design) rows of one study
MAX_GPUS = 32_768  # what the budget may buy of the cheapest design (4,096 counts of 8)
SYSTEM_FIELD = {f.name: f for f in SYSTEM_FIELDS}
MAX_BUDGET_USD = 1e10
# the form's host bandwidth sets the system's host link and host memory bandwidth: their field
HOST = SYSTEM_FIELD["host_memory_bandwidth_gb_per_s"]
MAX_TEXT = 200  # characters of one text box
STRATEGY = "1d"  # the co-design command's default strategy

FIELD_OPTIONS = sorted(VARIABLE)


def default_rows() -> list[dict[str, str]]:
    """The varied-field rows of the form: Study 5's (HBM and host memory), then one empty."""
    rows = [{"field": key, "values": ", ".join(table),
             "prices": ", ".join(f"{usd:g}" for usd in table.values())}
            for key, table in STUDY5_PRICES.items() if key != "base_usd"]
    return rows + [{"field": None, "values": "", "prices": ""}] * (MAX_FIELDS - len(rows))


DEFAULTS: dict[str, Any] = {
    "models": [m for m, _ in STUDY5_MODELS],
    "batches": ", ".join(str(b) for _, b in STUDY5_MODELS),
    "system": STUDY5_SYSTEM, "host_gb_per_s": STUDY5_HOST_GB_PER_S,
    "budget_usd": STUDY5_BUDGET_USD, "base_usd": float(STUDY5_PRICES["base_usd"]),
    "rows": default_rows(),
}


def _numbers(text: Any, what: str, integer: bool = False) -> list[float]:
    """Comma-separated numbers of a text box, or ValueError naming the box."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"{what}: give comma-separated numbers")
    if len(text) > MAX_TEXT:
        raise ValueError(f"{what}: at most {MAX_TEXT} characters")
    parts = [p.strip() for p in text.split(",")]
    try:
        values = [float(p) for p in parts]
    except ValueError:
        raise ValueError(f"{what}: {text.strip()!r:.60} is not a list of numbers") from None
    if not all(math.isfinite(v) for v in values):
        raise ValueError(f"{what}: numbers must be finite")
    if len(values) > MAX_VALUES:
        raise ValueError(f"{what}: at most {MAX_VALUES} values")
    if integer and not all(v == int(v) and v > 0 for v in values):
        raise ValueError(f"{what}: whole numbers above 0")
    return [int(v) for v in values] if integer else values


def _number(value: Any, what: str, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
            math.isfinite(value) and low < value <= high):
        raise ValueError(f"{what} must be a number above {low:g} and at most {high:g}")
    return float(value)


def _models(models: Any, batches: Any) -> tuple[list[str], list[int]]:
    if not isinstance(models, list) or not 0 < len(models) <= MAX_MODELS:
        raise ValueError(f"models: choose 1 to {MAX_MODELS}")
    known = set(list_models())
    bad = [m for m in models if not isinstance(m, str) or m not in known]
    if bad:
        raise ValueError(f"models: {str(bad[0])[:40]!r} is not a workload preset")
    if len(set(models)) != len(models):
        raise ValueError("models: each model once")
    sizes = _numbers(batches, "global batch", integer=True)
    for size in sizes:  # what is physical: the main form's Global batch control's range
        _, message = check_value(BY_KEY["global_batch"], size)
        if message:
            raise ValueError(message)
    if len(sizes) not in (1, len(models)):
        raise ValueError(f"global batch: give one for every model, or one per model "
                         f"({len(models)}), not {len(sizes)}")
    return models, [int(b) for b in sizes] * (len(models) if len(sizes) == 1 else 1)


def _prices(rows: Any, base_usd: Any) -> tuple[dict[str, list[float]], dict[str, Any]]:
    """The varied fields and the price table (as JSON) of the form's rows."""
    if not isinstance(rows, list) or len(rows) > MAX_FIELDS:
        raise ValueError(f"vary at most {MAX_FIELDS} fields")
    vary: dict[str, list[float]] = {}
    table: dict[str, Any] = {"base_usd": base_usd}
    for row in rows:
        field = row.get("field") if isinstance(row, dict) else None
        if not field:
            continue
        if field not in VARIABLE:
            raise ValueError(f"{str(field)[:40]!r} is not a numeric system field")
        if field in vary:
            raise ValueError(f"{field} is varied twice")
        values = _numbers(row.get("values"), f"{field} values")
        usd = _numbers(row.get("prices"), f"{field} prices")
        if len(usd) != len(values):
            raise ValueError(f"{field}: {len(values)} values but {len(usd)} prices")
        if len(set(values)) != len(values):
            raise ValueError(f"{field}: a value is given twice")
        vary[field] = values
        table[field] = {f"{v:g}": p for v, p in zip(values, usd)}
    if not vary:
        raise ValueError("vary at least one system field")
    return vary, table


def study(form: dict[str, Any]) -> dict[str, Any]:
    """The validated study of the form's values (JSON: the cache key and the job's input), or
    ValueError with a message for the page."""
    models, batches = _models(form.get("models"), form.get("batches"))
    system = form.get("system")
    if system not in list_systems():
        raise ValueError(f"system: {str(system)[:40]!r} is not a system preset")
    host = _number(form.get("host_gb_per_s"), "host memory bandwidth (GB/s)", HOST.lo, HOST.hi)
    budget = _number(form.get("budget_usd"), "budget (USD)", 0, MAX_BUDGET_USD)
    vary, table = _prices(form.get("rows"), form.get("base_usd"))  # checked by price_table
    try:
        prices = price_table(table)
        vary = check_vary(vary, prices)
        sysd = load_system(system).with_overrides(host_bandwidth_gb_per_s=host,
                                                  host_memory_bandwidth_gb_per_s=host)
        designs = [dict(zip(vary, combo)) for combo in itertools.product(*vary.values())]
        for design in designs:
            sysd.with_overrides(**design)  # every design is a valid system
    except ModelError as exc:
        raise ValueError(str(exc)) from None
    if len(designs) * len(models) > MAX_ROWS:
        raise ValueError(f"{len(designs)} designs × {len(models)} models is more than "
                         f"{MAX_ROWS} rows: vary fewer values")
    cheapest = min(prices.price(d) for d in designs)
    if cheapest <= 0 or budget / cheapest > MAX_GPUS:
        raise ValueError(f"the budget buys more than {MAX_GPUS:,} GPUs of the cheapest design "
                         f"(${cheapest:,.0f}): lower it here, or use `python -m model codesign`")
    return {"models": models, "batches": batches, "system": system, "host_gb_per_s": host,
            "budget_usd": budget, "vary": vary, "prices": table}


NARROW = "use a smaller global batch, a lower budget or fewer models"


def check_memory(spec: dict[str, Any]) -> None:
    """Refuse a validated :func:`study` whose search would not fit the server's memory budget
    per request (:data:`dashboard.jobs.budget.MEMORY_BUDGET_BYTES`), before any array is built
    (issue 29, finding 7: a global batch of 73,513,440 on 3 models grew to 3.85 GB and died of
    memory after 57 s). Sized from the request: each model's search runs every GPU count the
    budget buys of the cheapest design in one vectorized evaluation
    (:func:`model.engine.counts.best_per_count`, one execution at a time), counted with
    :func:`dashboard.jobs.budget.size` for one execution of the co-design's defaults (counting
    stops past the budget). A ModelError naming the Global batch control when it is over."""
    system = load_system(spec["system"])
    node = system.node_size
    prices = price_table(spec["prices"])
    cheapest = min(prices.price(dict(zip(spec["vary"], combo)))
                   for combo in itertools.product(*spec["vary"].values()))
    counts = count_range(int(spec["budget_usd"] // cheapest // node * node), node)
    if not len(counts):
        return
    one = {k: (v[0] if isinstance(v, list) else v) for k, v in EXECUTION.items()}
    for model, gbs in zip(spec["models"], spec["batches"], strict=True):
        request = Request.build(load_model(model), system, global_batch=gbs, strategy=STRATEGY,
                                gpus=list(counts), execution=one)
        sized = budget.size(request)
        budget.check(f"Global batch {gbs:,} for {model}: the co-design", sized.search_bytes(),
                     0.0, sized, NARROW)


def run(spec: dict[str, Any], progress: Callable[[int, int], None] | None = None,
        time_budget_s: float | None = None) -> pd.DataFrame:
    """The rows of :func:`model.studies.codesign.codesign` for a validated :func:`study`
    (cached); ``progress(done, total)`` after each (model, design) row. Raises ModelError once
    the study has run longer than ``time_budget_s`` (default the sweeps' time budget)."""
    budget_s = studies.SWEEP_TIME_BUDGET_S if time_budget_s is None else time_budget_s

    def compute_rows() -> pd.DataFrame:
        start = time.perf_counter()

        def report(done: int, total: int) -> None:
            if progress is not None:
                progress(done, total)
            if done < total and time.perf_counter() - start > budget_s:
                raise ModelError(f"the study ran out of its {budget_s:g} s time budget after "
                                 f"{done} of {total} rows; vary fewer values or models, or "
                                 "lower the budget")
        system = load_system(spec["system"]).with_overrides(
            host_bandwidth_gb_per_s=spec["host_gb_per_s"],
            host_memory_bandwidth_gb_per_s=spec["host_gb_per_s"])
        requests = [Request.build(load_model(m), system, global_batch=gbs, strategy=STRATEGY)
                    for m, gbs in zip(spec["models"], spec["batches"], strict=True)]
        check_memory(spec)
        res = codesign(requests, budget_usd=spec["budget_usd"], vary=spec["vary"],
                       prices=spec["prices"], progress=report)
        return res.rows
    return compute.cached_frame("codesign", spec, compute_rows)
