"""Random and malformed inputs thrown at every entry point (hypothesis).

The promise (issue 5, "Inputs"): the only failure a user can provoke is the project's own
:class:`model.errors.ModelError` with a message naming the problem (for the dashboard's
validators: a ``(None, {key: message})`` result); never another exception, and a valid input
never yields NaN, inf or a negative time or size. Covered here:

* the model and system JSON specs (``transformer_from_dict``, ``system_from_dict``): random values
  for every field, unknown keys (rejected by name), non-object documents; random *valid* specs
  then run a search whose numbers must be finite;
* the Python API (``search``, ``evaluate``, ``design_space``, ``sweep``) with random GPU counts,
  batches, strategies, pins, compat modes, execution options and budgets — kept cheap: a
  gpt3-175b shrunk to 8 layers, at most 256 GPUs;
* the command line (``model.cli.commands``): random argument lists built from the parser's own flags
  with random values and garbage tokens — exit 0, or 2 with one ``error:`` line; never 1;
* the dashboard: ``validate_scenario`` (random dicts), ``from_query`` (URL fragments, percent-
  encoded, long, unicode), ``from_json`` (random bytes and text up to 20 KB) and the ``upload``,
  ``hydrate`` and ``collect`` callbacks. Valid scenarios build and survive the URL and JSON
  round trips.

Inputs that broke an entry point when this file was written have their own small tests (their
docstrings say "found: …"), so that each failure points at one bug and the random tests stay
useful for the rest.
"""

from __future__ import annotations

import argparse
import atexit
import base64
import contextvars
import dataclasses
import json
import math
import os
import shutil
import sys
import tempfile
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import quote

_TMP_CACHE = tempfile.mkdtemp(prefix="perf-fuzz-test-")
atexit.register(shutil.rmtree, _TMP_CACHE, ignore_errors=True)
if "dashboard.jobs.compute" not in sys.modules:  # never the repository's cache/
    os.environ["PERF_CACHE_DIR"] = _TMP_CACHE

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from dash import no_update  # noqa: E402
from dash._callback_context import context_value  # noqa: E402
from dash._utils import AttributeDict  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import event as _event  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.errors import InvalidArgument  # noqa: E402

from dashboard import state  # noqa: E402
from dashboard.controls import scenario as S  # noqa: E402
from dashboard.controls.panel import CONTROL_KEYS  # noqa: E402
from model import (  # noqa: E402
    ModelError,
    design_space,
    evaluate,
    list_models,
    list_systems,
    load_model,
    load_system,
    search,
    sweep,
    system_from_dict,
    transformer_from_dict,
)
from model.cli.commands import build_parser, main  # noqa: E402
from model.engine.economics import power_and_prices  # noqa: E402
from model.engine.space import PIN_NAMES  # noqa: E402
from model.specs import hardware, transformer  # noqa: E402
from model.specs.execution import Execution  # noqa: E402
from model.specs.schema import Field  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
FUZZ = settings(max_examples=80, deadline=None, derandomize=False,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                       HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])
FEW = settings(FUZZ, max_examples=25)
MANY = settings(FUZZ, max_examples=100)

# --------------------------------------------------------------------------- value strategies


def event(label: str) -> None:
    """Count an outcome in hypothesis' statistics (``--hypothesis-show-statistics``)."""
    try:
        _event(label)
    except InvalidArgument:  # called from a plain test
        pass


def pick(values: list[Any]) -> st.SearchStrategy:
    """``sampled_from`` that does not print the (long) values in hypothesis' reports."""
    return st.integers(0, len(values) - 1).map(values.__getitem__)


EDGE_NUMBERS = pick([0, -1, 1, 2**31, 2**63, -(2**63), 10**20, 10**400, 0.5, -0.0, 1e-300,
                     5e-324, 1e300, 1.7976931348623157e308, math.nan, math.inf, -math.inf])
EDGE_TEXT = pick(["", " ", "0", "1", "-1", "1e3", "nan", "NaN", "inf", "-Infinity", "true",
                  "None", "null", "1,2", "x" * 3000, "\x00", "é∂√", "'; DROP TABLE",
                  "../../etc/passwd", "%00", "8 "])
JUNK = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70), EDGE_NUMBERS,
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=20), EDGE_TEXT,
    st.lists(st.integers(-3, 3), max_size=3),
    st.dictionaries(st.text(max_size=4), st.integers(-3, 3), max_size=2),
    st.binary(max_size=8),
)
# the same without integers that would make a costly search (more GPUs than the budget allows
# is refused up front: > 10 000 000)
CHEAP_JUNK = JUNK.filter(lambda v: not (isinstance(v, int) and 256 < v <= 10**7))


def _kinds(field: Field) -> tuple[type, ...]:
    return field.kind if isinstance(field.kind, tuple) else (field.kind,)


def plausible_values(field: Field) -> st.SearchStrategy:
    """Values a spec field accepts on its own: its choices, or anywhere in its range."""
    kinds = _kinds(field)
    if field.choices:
        return st.sampled_from(field.choices)
    if bool in kinds:
        return st.booleans()
    if (int in kinds or float in kinds) and field.lo is not None and field.hi is not None:
        lo, hi = field.lo, field.hi
        ints = st.integers(int(math.ceil(lo)), int(min(hi, 2**62)))
        if float in kinds:
            return st.one_of(st.sampled_from([lo, hi]), st.floats(lo, hi), ints)
        return st.one_of(st.sampled_from([int(lo), int(hi)]), ints)
    return st.text(max_size=40)


def junk_values(field: Field) -> st.SearchStrategy:
    """Values just outside a field's range, of the wrong type, hostile."""
    kinds = _kinds(field)
    near: list[st.SearchStrategy] = [JUNK]
    if (int in kinds or float in kinds) and field.lo is not None and field.hi is not None:
        lo, hi = field.lo, field.hi
        near.append(st.sampled_from([lo - 1, hi + 1, lo * 0.999 - 1e-9, hi * 1.001, lo + 0.5]))
        near.append(st.integers(int(lo) - 2, int(min(hi, 2**62)) + 2))
    if field.choices:
        near.append(st.sampled_from([c.upper() for c in field.choices] + [" " + field.choices[0]]))
    return st.one_of(*near)


def field_values(field: Field) -> st.SearchStrategy:
    return st.one_of(plausible_values(field), junk_values(field))


def few_changes(fields: tuple[Field, ...], max_size: int = 2) -> st.SearchStrategy:
    """A few fields set to values they accept on their own."""
    return st.sets(st.sampled_from([f.name for f in fields]), max_size=max_size).flatmap(
        lambda names: st.fixed_dictionaries(
            {f.name: plausible_values(f) for f in fields if f.name in names}))


def unknown_keys(fields: tuple[Field, ...]) -> st.SearchStrategy:
    names = {f.name for f in fields}
    return st.dictionaries(st.text(min_size=1, max_size=12).filter(lambda k: k not in names),
                           JUNK, min_size=1, max_size=2)


@st.composite
def spec_documents(draw, fields: tuple[Field, ...], base: dict[str, Any]):
    """(document, unknown keys): a preset's dict with random changes, deletions, unknown keys —
    or, now and then, no object at all."""
    if draw(st.integers(0, 19)) == 0:
        return draw(JUNK), set()
    doc = dict(base)
    if draw(st.booleans()):  # a plausible edit: a few fields, each in its range
        doc.update(draw(few_changes(fields)))
        return doc, set()
    for name in draw(st.sets(st.sampled_from([f.name for f in fields]), max_size=3)):
        doc.pop(name, None)
    doc.update(draw(st.fixed_dictionaries(
        {}, optional={f.name: field_values(f) for f in fields})))
    extra = draw(unknown_keys(fields)) if draw(st.integers(0, 3)) == 0 else {}
    doc.update(extra)
    return doc, set(extra)


def assert_clear(exc: ModelError) -> str:
    message = str(exc)
    event("refused (ModelError)")
    assert type(exc) is ModelError, type(exc)
    assert message.strip() and "Traceback" not in message
    return message


def assert_valid_spec(obj: Any, fields: tuple[Field, ...]) -> None:
    """Every field of a built spec lies in its declared range and type."""
    for f in fields:
        value = getattr(obj, f.name)
        if value is None:
            continue
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            assert math.isfinite(value), (f.name, value)
            assert f.lo is None or value >= f.lo, (f.name, value)
            assert f.hi is None or value <= f.hi, (f.name, value)
        kinds = f.kind if isinstance(f.kind, tuple) else (f.kind,)
        if float in kinds and int not in kinds:
            assert type(value) is float, (f.name, value)
        elif int in kinds:
            assert type(value) is int, (f.name, value)
        else:
            assert isinstance(value, kinds), (f.name, value)


# --------------------------------------------------------------------------- JSON specs

MODEL_BASE = load_model("gpt3-175b").to_dict()
SYSTEM_BASE = load_system("h200").to_dict()


@MANY
@given(spec_documents(transformer.FIELDS, MODEL_BASE))
def test_model_spec_random_documents(case):
    doc, extra = case
    try:
        m = transformer_from_dict(doc)
    except ModelError as exc:
        message = assert_clear(exc)
        if extra:
            assert "unknown key" in message
            assert any(f"'{k}'" in message for k in extra), message
        return
    assert not extra
    assert_valid_spec(m, transformer.FIELDS)
    # heads divide hidden unless the head dimension is given apart from it
    assert (m.hidden % m.heads == 0 or doc.get("head_dim") is not None)
    assert m.heads % m.kv_heads == 0 and m.head_dim >= 1
    assert m.tokens is None or m.samples is None  # at most one budget (none: throughput only)
    assert m.params > 0


@MANY
@given(spec_documents(hardware.FIELDS, SYSTEM_BASE))
def test_system_spec_random_documents(case):
    doc, extra = case
    try:
        s = system_from_dict(doc)
    except ModelError as exc:
        message = assert_clear(exc)
        if extra:
            assert "unknown key" in message
            assert any(f"'{k}'" in message for k in extra), message
        return
    assert not extra
    assert_valid_spec(s, hardware.FIELDS)
    for prop in ("matrix_flop_per_s", "hbm_bytes_per_s", "fast_bytes_per_s", "slow_bytes_per_s"):
        value = getattr(s, prop)
        assert math.isfinite(value) and value > 0, (prop, value)


NON_STRING_KEYS = [1, None, 2.5, True, (1,), b"layers"]


@pytest.mark.parametrize("which", ["model", "system"])
def test_spec_non_string_keys_are_errors(which):
    """A Python dict may have keys of any type, next to a misspelt string key: still a clear
    ModelError naming an unknown key (found: TypeError from sorting mixed-type keys)."""
    build, base = ((transformer_from_dict, MODEL_BASE) if which == "model"
                   else (system_from_dict, SYSTEM_BASE))
    for key in NON_STRING_KEYS:
        with pytest.raises(ModelError, match="unknown key") as info:
            build({**base, key: 1, "lyers": 4})
        assert_clear(info.value)


@pytest.mark.parametrize("which", ["model", "system"])
def test_spec_giant_integers_are_errors(which):
    """An integer too long to print (Python refuses str() of > 4300 digits) is out of range,
    with a message (found: ValueError while formatting the message)."""
    build, base, number = ((transformer_from_dict, MODEL_BASE, "layers") if which == "model"
                           else (system_from_dict, SYSTEM_BASE, "hbm_capacity_gb"))
    for giant in (10**4400, -(10**4400), 10**10_000):
        with pytest.raises(ModelError, match=number) as info:
            build({**base, number: giant})
        assert_clear(info.value)


@st.composite
def valid_models(draw):
    """A random valid transformer (small depth: the search stays cheap)."""
    heads = draw(st.sampled_from([1, 2, 3, 8, 12, 16, 64, 96, 128]))
    head_dim = draw(st.sampled_from([1, 8, 64, 128, 256, 1000]))
    kv = draw(st.sampled_from([d for d in range(1, heads + 1) if heads % d == 0]))
    hidden = max(heads * head_dim, 8 * heads)
    budget = draw(st.sampled_from(["tokens", "samples"]))
    vocab = draw(st.sampled_from([0, 1, 50257, 128256, 100_000_000]))
    doc = {"name": "fuzz", "layers": draw(st.integers(1, 8)), "hidden": hidden, "heads": heads,
           "kv_heads": kv, "ffn": draw(st.one_of(st.none(), st.integers(1, 10_000_000))),
           "mlp": draw(st.sampled_from(["gelu", "swiglu"])),
           "seq_len": draw(st.sampled_from([1, 127, 128, 2048, 32768, 1_000_000, 100_000_000])),
           "vocab": vocab, "bias": draw(st.booleans()), "dropout": draw(st.booleans()),
           "causal": draw(st.booleans()), "tied_embeddings": vocab > 0 and draw(st.booleans()),
           budget: draw(st.floats(1, 1e18))}
    return transformer_from_dict(doc)


@st.composite
def valid_systems(draw):
    """A random valid system: every numeric field anywhere in its range."""
    doc: dict[str, Any] = {"name": "fuzz", "source": "hypothesis"}
    for f in hardware.FIELDS:
        if f.lo is None or f.hi is None:
            continue
        kinds = f.kind if isinstance(f.kind, tuple) else (f.kind,)
        if f.name == "nvlink_domain_size":
            doc[f.name] = draw(st.sampled_from([1, 2, 4, 8, 72, int(f.hi)]))
        elif int in kinds:
            doc[f.name] = draw(st.one_of(st.sampled_from([int(f.lo), int(f.hi)]),
                                         st.integers(int(f.lo), int(f.hi))))
        elif f.required or draw(st.booleans()):
            doc[f.name] = draw(st.one_of(st.sampled_from([f.lo, f.hi]), st.floats(f.lo, f.hi)))
    return system_from_dict(doc)


def unpriced(system) -> tuple[str, ...]:
    """The cost columns a system gives no figure for (NaN by design: no power, no price)."""
    p = power_and_prices(system)
    no_power = not p["tdp_w"]
    price = p["usd_per_gpu_hour"] if system.costs.pricing == "rental" else p[
        "purchase_usd_per_gpu"]
    no_cost = not price or (system.costs.pricing == "purchase" and no_power)
    return (("energy_mwh",) if no_power else ()) + (("cost_usd",) if no_cost else ())


def assert_finite(frame: pd.DataFrame | pd.Series, unknown: tuple[str, ...] = ()) -> None:
    """Numeric results are finite (but the ``unknown`` columns, which must then be NaN); times,
    sizes and rates are not negative."""
    frame = frame.to_frame().T.infer_objects() if isinstance(frame, pd.Series) else frame
    for col in unknown:
        assert frame[col].isna().all(), col
    numbers = frame.select_dtypes("number").drop(columns=list(unknown))
    values = numbers.to_numpy(dtype=float)
    bad = [c for c, ok in zip(numbers.columns, np.isfinite(values).all(axis=0)) if not ok]
    assert not bad, f"NaN or inf in {bad}"
    for col in numbers.columns:
        if col.startswith("t_") or col.endswith(("_s", "_gb", "_per_s", "_days")):
            assert (numbers[col] >= 0).all(), (col, numbers[col].min())


def assert_search_result(res, top_k: int, system=None) -> None:
    event("searched: " + ("found" if len(res.top) else "nothing fits"))
    assert 0 <= res.feasible <= res.candidates
    assert len(res.top) <= min(top_k, res.feasible)
    assert_finite(res.top, unpriced(system) if system is not None else ())
    if len(res.top):
        assert (res.top["iteration_time_s"] > 0).all()
        assert res.top["samples_per_s"].is_monotonic_decreasing


@FUZZ
@given(valid_models(), valid_systems(), st.sampled_from([1, 8, 16, 64, 72, 256]),
       st.sampled_from([1, 16, 512, 4096, 100_000_000]),
       st.sampled_from(["1d", "summa", "context"]), st.sampled_from([None, "paper"]))
def test_valid_random_specs_give_finite_results(m, s, gpus, gbs, strategy, compat):
    """Any valid model on any valid system: finite, non-negative numbers (the case it found
    first has its own test, below)."""
    try:
        res = search(m, s, gpus, gbs, strategy, compat=compat, top_k=5, budget=200_000)
    except ModelError as exc:  # e.g. the budget: still a clear message
        assert_clear(exc)
        return
    assert_search_result(res, 5, s)


@pytest.mark.parametrize("vocab", [1, 3])
def test_tiny_vocabulary_gives_finite_numbers(vocab):
    """A valid model whose LM head has fewer columns than tensor-parallel ranks (vocab 1 on
    tp1 = 2: an empty GEMM) on every preset system. Found: NaN times from the wave-quantisation
    efficiency ``tiles / (ceil(tiles / units) · units)`` = 0/0 in ``model/physics/ops.py``."""
    m = transformer_from_dict({"name": "tiny", "layers": 4, "hidden": 128, "heads": 2,
                               "kv_heads": 1, "seq_len": 128, "vocab": vocab, "tokens": 1e9})
    for name in list_systems():
        for gpus in (2, 8):
            for strategy in ("1d", "summa", "context"):
                try:
                    res = search(m, load_system(name), gpus, 16, strategy, top_k=50)
                except ModelError as exc:
                    assert_clear(exc)
                    continue
                assert_search_result(res, 50, load_system(name))


# --------------------------------------------------------------------------- Python API


@cache
def small_model():
    return load_model("gpt3-175b").with_overrides(layers=8)


@cache
def h200():
    return load_system("h200")


def _valid_options() -> dict[str, list[Any]]:
    """The values each execution option accepts (probed, so new options are covered)."""
    words = ["none", "selective", "full", "bf16", "fp16", "fp8", "allgather", "ring",
             "optimizer", "activations", "weights", "all", "default", "auto", "on", "off"]
    out = {}
    for f in dataclasses.fields(Execution):
        if isinstance(f.default, bool):
            out[f.name] = [True, False]
            continue
        probe = words if isinstance(f.default, str) else list(range(0, 9))
        ok = []
        for value in probe:
            try:
                Execution(**{f.name: value})
            except ModelError:
                continue
            ok.append(value)
        out[f.name] = ok or [f.default]
    return out


EX_OPTIONS = _valid_options()
EX_FIELDS = tuple(EX_OPTIONS)
EX_WORDS = sorted({v for vs in EX_OPTIONS.values() for v in vs if isinstance(v, str)})


@st.composite
def plausible_execution(draw):
    """None, or a few options with valid values — a list of them is searched as variants."""
    if draw(st.booleans()):
        return None
    out = {}
    for name in draw(st.sets(st.sampled_from(EX_FIELDS), max_size=3)):
        choices = st.sampled_from(EX_OPTIONS[name])
        out[name] = draw(st.one_of(choices, st.lists(choices, min_size=1, max_size=2,
                                                     unique=True)))
    return out


class Arg:
    """An argument's plausible values (mostly valid) and its junk (random, hostile)."""

    def __init__(self, plausible: st.SearchStrategy, junk: st.SearchStrategy) -> None:
        self.plausible, self.junk = plausible, junk


EX_VALUE = st.one_of(st.sampled_from(EX_WORDS), st.booleans(), st.integers(-1, 65), JUNK)
PIN_VALUE = st.one_of(st.none(), st.sampled_from([1, 2, 4, 8]), st.integers(-2, 64), JUNK)
REQUIRED_VALUE = st.one_of(  # not None: see test_evaluate_missing_dimension_is_an_error
    st.sampled_from([1, 2, 4, 8]), st.integers(-2, 64), JUNK.filter(lambda v: v is not None))
ARGS = {
    "gpus": Arg(st.one_of(st.sampled_from([1, 2, 4, 8, 16, 32, 64, 128, 256, 6, 12, 24, 72]),
                          st.integers(1, 256).map(np.int64)),
                st.one_of(st.integers(-3, 256), CHEAP_JUNK)),
    "global_batch": Arg(st.sampled_from([1, 8, 64, 512, 1536, 4096]),
                        st.one_of(st.integers(-3, 10**9), st.just(100_000_000), CHEAP_JUNK)),
    "strategy": Arg(st.sampled_from(["1d", "summa", "context", "2d", "2d-seqp", "seqp", "SUMMA"]),
                    JUNK),
    "compat": Arg(st.sampled_from([None, "default", "paper", True, False]), JUNK),
    "pins": Arg(st.one_of(st.none(), st.dictionaries(
        st.sampled_from(PIN_NAMES), st.sampled_from([None, 1, 2, 4, 8]), max_size=2)),
        st.dictionaries(st.one_of(st.sampled_from(PIN_NAMES), st.text(max_size=6)), PIN_VALUE,
                        max_size=3)),
    "execution": Arg(plausible_execution(), st.dictionaries(
        st.one_of(st.sampled_from(EX_FIELDS), st.text(max_size=6)),
        st.one_of(EX_VALUE, st.lists(EX_VALUE, max_size=3)), max_size=3)),
    "top_k": Arg(st.integers(1, 20), st.one_of(st.integers(-1, 0), st.just(2**70), CHEAP_JUNK)),
    "budget": Arg(st.sampled_from([1_000, 100_000, 20_000_000]),
                  st.one_of(st.sampled_from([0, 1, 10]), st.integers(-5, 10**6))),
    "nvs": Arg(st.sampled_from([None, 1, 4, 8, 64, 72]),
               st.one_of(st.integers(-1, 128), CHEAP_JUNK)),
    "dim": Arg(st.sampled_from([1, 2, 4, 8]), REQUIRED_VALUE),
    "optional_dim": Arg(st.sampled_from([None, None, 1, 2, 4, 8]), PIN_VALUE),
}


@st.composite
def api_args(draw, **names: str):
    """Keyword arguments ``{kwarg: value}`` for ``names`` (kwarg → ARGS key): half the time all
    plausible (so the evaluation really runs), else each one possibly junk."""
    clean = draw(st.booleans())
    out = {}
    for kwarg, key in names.items():
        arg = ARGS[key]
        out[kwarg] = draw(arg.plausible if clean else st.one_of(arg.plausible, arg.junk))
    return out


@FUZZ
@given(api_args(gpus="gpus", global_batch="global_batch", strategy="strategy", compat="compat",
                pins="pins", execution="execution", top_k="top_k", budget="budget", nvs="nvs"))
def test_search_random_arguments(kw):
    try:
        res = search(small_model(), h200(), **kw)
    except ModelError as exc:
        assert_clear(exc)
        return
    assert_search_result(res, kw["top_k"])


@FUZZ
@given(api_args(global_batch="global_batch", strategy="strategy", compat="compat",
                execution="execution", nvs="nvs", tp1="dim", pp="dim", dp="dim",
                microbatch="optional_dim", tp2="dim", nb="optional_dim", nv_tp1="optional_dim",
                nv_tp2="optional_dim", nv_dp="optional_dim", nv_pp="optional_dim"),
       st.data())
def test_evaluate_random_arguments(kw, data):
    dims = (kw["tp1"], kw["tp2"], kw["pp"], kw["dp"])
    consistent = all(isinstance(v, int) and not isinstance(v, bool) and 0 < v for v in dims)
    if consistent and kw["strategy"] in ("1d", "1D"):
        kw["tp2"] = 1
    gpus = (data.draw(st.one_of(st.just(math.prod(dims)), ARGS["gpus"].plausible), label="gpus")
            if consistent else data.draw(ARGS["gpus"].junk, label="gpus"))
    try:
        ev = evaluate(small_model(), h200(), gpus, **kw)
    except ModelError as exc:
        assert_clear(exc)
        return
    event("evaluated")
    assert_finite(ev.row)
    assert_finite(ev.ops)
    assert isinstance(ev.fits, bool)
    assert ev.row["iteration_time_s"] > 0


def test_evaluate_missing_dimension_is_an_error():
    """``evaluate(..., dp=None)``: the configuration is incomplete — a ModelError naming the
    dimension (found: TypeError from ``tp1 * tp2 * pp * dp``)."""
    for dim in ("tp1", "tp2", "pp", "dp"):
        dims = {"tp1": 8, "tp2": 1, "pp": 8, "dp": 1, "microbatch": 1, dim: None}
        with pytest.raises(ModelError, match=dim) as info:
            evaluate(small_model(), h200(), 64, 512, "1d", **dims)
        assert_clear(info.value)


@FUZZ
@given(api_args(gpus="gpus", global_batch="global_batch", strategy="strategy", compat="compat",
                pins="pins", budget="budget", nvs="nvs"),
       st.one_of(st.none(), st.dictionaries(st.sampled_from(EX_FIELDS),
                                            st.sampled_from(EX_WORDS + [True, False, 0, 1, 2]),
                                            max_size=2)))
def test_design_space_random_arguments(kw, execution):
    try:
        frame = design_space(small_model(), h200(), execution=execution, **kw)
    except ModelError as exc:
        assert_clear(exc)
        return
    event("design space: " + ("rows" if len(frame) else "empty"))
    assert_finite(frame)
    assert frame["fits"].dtype == bool


@FUZZ
@given(api_args(global_batch="global_batch", compat="compat", pins="pins",
                execution="execution", budget="budget", nvs="nvs"),
       st.one_of(st.lists(ARGS["gpus"].plausible, min_size=1, max_size=4),
                 st.lists(st.one_of(ARGS["gpus"].plausible, ARGS["gpus"].junk), max_size=4)),
       st.one_of(st.lists(ARGS["strategy"].plausible, max_size=3),
                 st.lists(st.one_of(ARGS["strategy"].plausible, JUNK), max_size=3),
                 st.sampled_from(["1d", "all", ""])))
def test_sweep_random_arguments(kw, counts, strategies):
    try:
        results = sweep(small_model(), h200(), counts, strategies=strategies, **kw)
    except ModelError as exc:
        assert_clear(exc)
        return
    for res in results:
        assert_search_result(res, 1)


@FUZZ
@given(api=st.sampled_from(["search", "design_space", "sweep", "evaluate"]),
       budget=st.one_of(st.none(), st.text(max_size=4), st.floats(), st.booleans(),
                        st.lists(st.integers(), max_size=2)),
       pins=st.one_of(st.text(max_size=4), st.integers(), st.lists(st.integers(), max_size=2)),
       counts=st.one_of(st.integers(1, 64), st.none(), st.floats()))
def test_api_wrong_argument_types_are_errors(api, budget, pins, counts):
    """Arguments of the wrong type (a budget that is not an integer, pins that are not a dict,
    GPU counts that are not a list) get a ModelError too (found: TypeError / ValueError)."""
    m, s = small_model(), h200()
    calls = {
        "search": [lambda: search(m, s, 64, 512, budget=budget),
                   lambda: search(m, s, 64, 512, pins=pins)],
        "design_space": [lambda: design_space(m, s, 64, 512, budget=budget),
                         lambda: design_space(m, s, 64, 512, pins=pins)],
        "sweep": [lambda: sweep(m, s, [64], 512, budget=budget),
                  lambda: sweep(m, s, counts, 512)],
        "evaluate": [lambda: evaluate(m, s, 64, 512, tp1=8, pp=8, dp=1, microbatch=1,
                                      execution=pins)],
    }[api]
    for call in calls:
        try:
            call()
        except ModelError as exc:
            assert_clear(exc)


BOOL_OPTIONS = tuple(f.name for f in dataclasses.fields(Execution) if isinstance(f.default, bool))
INT_OPTIONS = tuple(f.name for f in dataclasses.fields(Execution)
                    if isinstance(f.default, int) and not isinstance(f.default, bool))


BAD_OPTION_VALUES = st.one_of(
    st.sampled_from(BOOL_OPTIONS).flatmap(lambda name: st.tuples(
        st.just(name), st.sampled_from(["no", "false", "off", "0", "yes", 0.5, {"a": 1}, b"x"]))),
    st.sampled_from(INT_OPTIONS).flatmap(lambda name: st.tuples(
        st.just(name), st.sampled_from([True, False, "1", "x", 0.5, {"a": 1}, b"x"]))))


@FUZZ
@given(bad=BAD_OPTION_VALUES, api=st.sampled_from(["search", "evaluate"]))
def test_execution_option_types_are_errors(bad, api):
    """An execution option of the wrong type (a string for an on/off option, a bool for a
    ZeRO stage) is refused as a spec field of that type would be — not run as if it were
    truthy (found: ``sequence_parallel='no'`` searched with sequence parallelism on,
    ``zero=True`` ran as ZeRO-1)."""
    option, value = bad
    m, s = small_model(), h200()
    with pytest.raises(ModelError, match=option):
        if api == "search":
            search(m, s, 64, 512, execution={option: value})
        else:
            evaluate(m, s, 64, 512, tp1=8, pp=8, dp=1, microbatch=1, execution={option: value})


# --------------------------------------------------------------------------- command line

CLI_GPUS = st.lists(st.sampled_from([1, 2, 4, 8, 12, 16, 32, 64, 72]), min_size=1,
                    max_size=3).map(lambda ns: ",".join(map(str, ns)))
CLI_BAD_GPUS = st.sampled_from(["0", "-8", "8,", ",8", "8,,16", "1e3", "8.0", " 8", "８",
                                "99999999999999999", "10000001", "abc", ""])
SAFE_ALPHABET = st.characters(blacklist_characters="/\\~", blacklist_categories=("Cs",))
GARBAGE = st.one_of(st.text(SAFE_ALPHABET, max_size=12), st.sampled_from(
    ["--", "-", "-x", "--nope", "--gpus=", "--model=", "--json=1", "-h2", "--tp=-1", "--=", "''",
     "\x00", "--Model", "search", "evaluate"]))


def write_specs(folder: Path) -> dict[str, list[str]]:
    """Spec files for --model/--system: valid (shrunk), malformed and hostile, in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    docs = {"good": None, "not-json": "{", "array": "[1, 2]", "null": "null", "empty": "",
            "nested": "[" * 20_000 + "]" * 20_000, "long-number": '{"layers": ' + "7" * 5000 + "}",
            "unknown-key": None, "bad-utf8": b"\xff\xfe\xfa{", "huge": " " * (70 * 1024) + "{}",
            "nan": None}
    out: dict[str, list[str]] = {"model": [], "system": []}
    for kind, base in (("model", {**MODEL_BASE, "layers": 4}), ("system", SYSTEM_BASE)):
        for name, text in docs.items():
            if name == "good":
                text = json.dumps(base)
            elif name == "unknown-key":
                text = json.dumps({**base, "lyers": 4})
            elif name == "nan":
                text = json.dumps({**base, "layers" if kind == "model" else "hbm_capacity_gb":
                                   math.nan})
            path = folder / f"{kind}-{name}.json"
            path.write_bytes(text if isinstance(text, bytes) else text.encode())
            out[kind].append(str(path))
        out[kind].append(str(folder / "missing.json"))
        out[kind].append(str(folder))  # a directory
    return out


@cache
def cli_actions() -> dict[str, list[argparse.Action]]:
    """Each subcommand's options, straight from the parser (new flags are fuzzed too)."""
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {name: [a for a in p._actions if a.option_strings and a.dest != "help"]
            for name, p in sub.choices.items()}


def option_values(action: argparse.Action, specs: dict[str, list[str]],
                  tmp: Path) -> Arg:
    """Values for one option: plausible ones for its destination, and junk."""
    dest = action.dest
    small = st.sampled_from(["1", "2", "4", "8", "16", "64", "72"])
    numbers = st.sampled_from(["0", "-1", "1000000000000000", "1e3", "2.0", "0x10"])
    if dest in ("model", "system"):
        presets = list_models() if dest == "model" else list_systems()
        good = [p for p in specs[dest] if p.endswith("-good.json")]
        return Arg(st.sampled_from(presets + good),
                   st.sampled_from(specs[dest] + ["gpt3", "H200", "x.json", ""]))
    if dest == "gpus":
        many = getattr(action.type, "__name__", "") == "gpu_list"
        return Arg(CLI_GPUS if many else small, CLI_BAD_GPUS)
    if dest == "strategy":
        return Arg(st.sampled_from(["1d", "summa", "context", "2d", "2d-seqp"]
                                   + (["all"] * 3 if "or all" in (action.help or "") else [])),
                   st.sampled_from(["ALL", "3d", "", "1d,summa"]))
    if dest == "csv":
        return Arg(st.just(str(tmp / "out.csv")),
                   st.sampled_from([str(tmp / "nope" / "out.csv"), str(tmp), str(tmp / "specs")]))
    if dest == "reference":
        return Arg(st.nothing(), st.sampled_from([str(tmp), str(tmp / "missing"),
                                                  str(tmp / "specs"), ""]))
    if action.choices:
        return Arg(st.sampled_from([str(c) for c in action.choices]),
                   st.sampled_from([str(c).upper() for c in action.choices] + ["", "x"]))
    if dest == "interleave":
        return Arg(st.sampled_from(["1", "2", "1,2", "4"]),
                   st.sampled_from(["0", "65", "1,,2", "x", ",", "-1"]))
    if dest == "global_batch":
        return Arg(st.sampled_from(["1", "64", "512", "4096"]),
                   st.one_of(numbers, st.sampled_from(["100000000", "1000000000"])))
    if dest in ("budget", "top"):
        return Arg(st.sampled_from(["1000", "100000", "20000000", "5"]), numbers)
    return Arg(small, numbers)  # pins, --nvs and anything added later


def _option_pairs(draw, options: list, clean: bool, specs: dict[str, list[str]], tmp: Path
                  ) -> tuple[list[tuple[str, str | None]], dict[str, str]]:
    """(flag, value) pairs for some of a command's ``options`` (required ones mostly, when
    ``clean`` always), and the values by destination."""
    pairs: list[tuple[str, str | None]] = []
    values: dict[str, str] = {}
    for action in options:
        percent = (100 if clean else 90) if action.required else 15
        if draw(st.integers(0, 99)) >= percent:
            continue
        flag = draw(st.sampled_from(action.option_strings))
        if action.nargs == 0:
            pairs.append((flag, None))
            continue
        if clean and action.dest == "reference":
            continue
        arg = option_values(action, specs, tmp)
        value = draw(arg.plausible if clean else st.one_of(arg.plausible, arg.plausible,
                                                             arg.junk, GARBAGE))
        values[action.dest] = value
        pairs.append((flag, value))
    return pairs, values


def _matching_gpus(draw, pairs: list, values: dict[str, str]) -> list:
    """Most of the time, --gpus set to tp1·tp2·pp·dp (an evaluate that can run)."""
    dims = [values.get(d, "1") for d in ("tp1", "tp2", "pp", "dp")]
    if all(d.isdigit() for d in dims) and draw(st.integers(0, 3)):
        gpus = str(math.prod(int(d) for d in dims))
        return [(f, gpus if f == "--gpus" else v) for f, v in pairs]
    return pairs


def _argv(draw, command: str, pairs: list, clean: bool) -> list[str]:
    """The argument list: flags with their values (sometimes as --flag=value); unless
    ``clean``, garbage inserted and the order sometimes shuffled."""
    argv = [command]
    for flag, value in pairs:
        if value is None:
            argv.append(flag)
        elif draw(st.integers(0, 9)) == 0:
            argv.append(f"{flag}={value}")
        else:
            argv += [flag, value]
    if not clean:
        for _ in range(draw(st.integers(0, 2))):
            argv.insert(draw(st.integers(0, len(argv))), draw(GARBAGE))
        if draw(st.integers(0, 4)) == 0:
            argv = draw(st.permutations(argv))
    return argv


@st.composite
def cli_argvs(draw, specs: dict[str, list[str]], tmp: Path):
    """An argument list from the parser's own flags. Half the time a plausible command (a
    known subcommand, its required options, plausible values), else anything goes: garbage
    tokens, missing or repeated options, junk values, shuffled order."""
    actions = cli_actions()
    clean = draw(st.booleans())
    commands = st.sampled_from(sorted(actions))
    command = draw(commands if clean else st.one_of(commands, GARBAGE, st.just("--version")))
    pairs, values = _option_pairs(draw, actions.get(command, []), clean, specs, tmp)
    if clean and command == "evaluate":
        pairs = _matching_gpus(draw, pairs, values)
    return _argv(draw, command, pairs, clean)


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    event(f"exit {code}" + (f" ({argv[0]})" if code == 0 and argv else ""))
    return code, out, err


def assert_cli_contract(argv: list[str], code: int, out: str, err: str) -> None:
    assert code in (0, 2), f"exit {code} for {argv}: {err.strip()}"
    assert "Traceback" not in out + err, argv
    if code == 2:
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), (argv, err)
        assert len(lines[0]) > len("error: ")
    elif "--json" in argv and not {"-h", "--help", "--version"} & set(argv):
        json.loads(out)  # the CLI refuses NaN in JSON (allow_nan=False): exit 1 if any


@FUZZ
@given(data=st.data())
def test_cli_random_argument_lists(data, tmp_path, capsys, monkeypatch):
    specs = write_specs(tmp_path / "specs")  # once per test (the fixture is not per example)
    monkeypatch.chdir(tmp_path)  # anything relative lands in the temporary directory
    argv = data.draw(cli_argvs(specs, tmp_path), label="argv")
    code, out, err = run_cli(argv, capsys)
    assert_cli_contract(argv, code, out, err)


@pytest.mark.parametrize("name", ["nested", "long-number"])
def test_cli_hostile_spec_files_are_errors(name, tmp_path, capsys, monkeypatch):
    """A spec file nested 20 000 deep or holding a 5000-digit number is bad input (exit 2), not
    an internal error (found: RecursionError / ValueError escape ``schema.read_json``)."""
    write_specs(tmp_path / "specs")
    monkeypatch.chdir(tmp_path)
    for kind in ("model", "system"):
        workload = {"model": "gpt3-175b", "system": "h200",
                    kind: str(tmp_path / "specs" / f"{kind}-{name}.json")}
        argv = ["search", "--model", workload["model"], "--system", workload["system"],
                "--gpus", "8", "--strategy", "1d"]
        code, out, err = run_cli(argv, capsys)
        assert_cli_contract(argv, code, out, err)
        assert code == 2


# --------------------------------------------------------------------------- dashboard


def scenario_values(field: Field) -> st.SearchStrategy:
    return st.one_of(field_values(field), st.just(""))


SCENARIO_CHANGES = st.one_of(
    few_changes(S.FIELDS, 3),
    st.fixed_dictionaries({}, optional={f.name: scenario_values(f) for f in S.FIELDS}))
PRESETS = st.one_of(
    st.just({}), st.sampled_from(list_models()).map(S.model_values),
    st.sampled_from(list_systems()).map(S.system_values))


def assert_validator_result(result: Any, raw: Any) -> dict[str, Any] | None:
    """The (scenario, errors) contract; a valid scenario builds and round-trips."""
    assert isinstance(result, tuple) and len(result) == 2
    scn, errors = result
    event("valid scenario" if scn is not None else "rejected")
    if scn is None:
        assert isinstance(errors, dict) and errors
        for key, message in errors.items():
            assert key in S.KEYS or key == "_", key
            assert isinstance(message, str) and message.strip(), (key, message)
            assert "Traceback" not in message
        return None
    assert errors == {}
    assert set(scn) == set(S.KEYS)
    if isinstance(raw, dict):
        assert not set(raw) - set(S.KEYS), "an unknown key was accepted"
    m, s = S.build_inputs(scn)
    assert m.params > 0 and s.usable_hbm_bytes == s.usable_hbm_bytes
    counts = S.gpu_counts(scn)
    assert len(counts) <= 24
    assert all(isinstance(n, int) and scn["gpus_min"] <= n <= scn["gpus_max"] for n in counts)
    assert S.validate_scenario(scn) == (scn, {})
    # a copied link and a downloaded file reproduce the scenario exactly
    assert S.validate_scenario({**S.default_scenario(), **S.from_query(S.to_query(scn))}) == (
        scn, {})
    assert S.from_json(S.to_json(scn)) == (scn, {})
    return scn


@MANY
@given(base=PRESETS, changes=SCENARIO_CHANGES,
       extra=st.one_of(st.just({}), unknown_keys(S.FIELDS)), whole=st.integers(0, 14),
       junk=JUNK)
def test_validate_scenario_random_dicts(base, changes, extra, whole, junk):
    raw = junk if whole == 0 else {**S.default_scenario(), **base, **changes, **extra}
    result = S.validate_scenario(raw)
    assert_validator_result(result, raw)
    if extra and whole != 0:  # an unknown key is refused, by name
        assert result[0] is None and "unknown key" in result[1]["_"]
        assert any(f"'{k}'" in result[1]["_"] for k in extra), result[1]["_"]


def _query_pairs(draw_key, draw_value) -> st.SearchStrategy:
    return st.lists(st.tuples(draw_key, draw_value), max_size=8)


QUERY_KEYS = st.one_of(st.sampled_from(S.KEYS), st.text(max_size=8))
QUERY_VALUES = st.one_of(st.text(max_size=30), EDGE_TEXT, st.integers().map(str),
                         st.floats().map(repr), st.sampled_from(["1", "0", "on", "true", "fp8",
                                                                 "paper", "x" * 201]))
QUERIES = st.one_of(
    st.text(max_size=300),
    st.binary(max_size=300).map(lambda b: b.decode("latin-1")),
    _query_pairs(QUERY_KEYS, QUERY_VALUES).map(
        lambda pairs: "#" + "&".join(f"{quote(k)}={quote(v)}" for k, v in pairs)),
    _query_pairs(QUERY_KEYS, QUERY_VALUES).map(lambda pairs: "?" + "&".join(
        f"{k}={v}" for k, v in pairs)),
    st.sampled_from(["%", "%%", "%zz", "%C3%28", "%ED%A0%80", "a=%FF%FE", "=&=&&", "#&", "?#?",
                     "layers=%00", "hbm_gb=1e999", "hbm_gb=-0", "gpus=NaN", "nvs=8&nvs=abc"]),
    st.integers(1_000, 200_000).map(lambda n: "layers=" + "9" * n),
    st.integers(1_000, 20_000).map(lambda n: "&".join(["hbm_gb=80"] * n)),
    st.integers(100, 5_000).map(lambda n: "model=" + "é" * n + "&x=" + "%E2%82%AC" * n),
)


@MANY
@given(QUERIES)
def test_from_query_random_strings(text):
    raw = S.from_query(text)
    assert isinstance(raw, dict) and set(raw) <= set(S.KEYS)
    assert_validator_result(S.validate_scenario({**S.default_scenario(), **raw}), raw)


@MANY
@given(QUERIES)
def test_hydrate_callback_random_fragments(text):
    out = state.hydrate(text, False, S.default_scenario())
    assert isinstance(out, tuple) and len(out) == len(CONTROL_KEYS) + 6
    message = out[-1]
    assert message == "" or isinstance(message, str) or isinstance(message, type(no_update))


def _json_text(value: Any) -> str:
    return json.dumps(value, allow_nan=True, default=repr)


JSON_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=10)),
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=20)
UPLOADS = st.one_of(
    st.binary(max_size=20_000),
    st.text(max_size=2_000),
    st.text(max_size=2_000).map(lambda t: t.encode("utf-8", "surrogatepass")),
    JSON_VALUES.map(_json_text),
    st.tuples(PRESETS, SCENARIO_CHANGES).map(
        lambda t: _json_text({**S.default_scenario(), **t[0], **t[1]})),
    st.tuples(PRESETS, SCENARIO_CHANGES).map(
        lambda t: _json_text({**t[0], **t[1]}).encode("utf-16")),
    st.integers(16 * 1024 - 20, 20 * 1024).map(lambda n: " " * n + "{}"),
    st.sampled_from(["", "{", "}", "[]", "null", "NaN", '{"layers": NaN}', '{"hbm_gb": 1e999}',
                     '{"layers": 1.5}', '{"__proto__": {}}', "\ufeff{}", '{"a": 1, "a": 2}',
                     '{"layers": 96, "layers": "x"}']),
)


@MANY
@given(UPLOADS)
def test_from_json_random_bytes_and_text(data):
    raw = None
    try:
        raw = json.loads(data)
    except (ValueError, RecursionError):
        pass
    assert_validator_result(S.from_json(data), raw)


# deep nesting and long integers fit in 16 KB but break json.loads with other exceptions
HOSTILE_JSON = {
    "nested-arrays": ["[" * 16_000, "[" * 5_000 + "]" * 5_000],
    "nested-objects": ['{"a":' * 2_000 + "1" + "}" * 2_000],
    "long-integers": ['{"layers": ' + "1" * 5_000 + "}", "1" * 10_000, "-" + "9" * 4_301],
}


@pytest.mark.parametrize("name", sorted(HOSTILE_JSON))
def test_from_json_hostile_documents_are_errors(name):
    """Deeply nested arrays/objects and >4300-digit integers are rejected with a message
    (found: RecursionError and ValueError escaped ``from_json``)."""
    for text in HOSTILE_JSON[name]:
        for data in (text, text.encode()):
            scn, errors = S.from_json(data)
            assert scn is None and errors.get("_"), errors


def data_url(payload: bytes, mime: str = "application/json") -> str:
    return f"data:{mime};base64," + base64.b64encode(payload).decode()


UPLOAD_CONTENTS = st.one_of(
    UPLOADS.map(lambda d: data_url(d if isinstance(d, bytes) else d.encode("utf-8",
                                                                          "surrogatepass"))),
    st.tuples(st.binary(max_size=200), st.sampled_from(["text/plain", "", "a,b",
                                                        "application/octet-stream"])).map(
        lambda t: data_url(*t)),
    st.text(max_size=200),
    st.text(max_size=200).map(lambda t: "data:application/json;base64," + t),
    st.sampled_from(["data:", "data:,", "data:application/json;base64,", "data:;base64,====",
                     "data:;base64,eyJ9", "data:;base64,!!!!", "data:;base64,é", ",",
                     "data:;base64," + "A" * 30_000]),
)


def assert_upload_result(out: Any) -> None:
    assert isinstance(out, tuple) and len(out) == len(CONTROL_KEYS) + 5
    message = out[-1]
    if isinstance(message, type(no_update)):  # nothing uploaded: nothing changes
        assert all(isinstance(v, type(no_update)) for v in out)
        return
    assert isinstance(message, str), message
    if message:  # rejected: nothing else changes
        assert all(isinstance(v, type(no_update)) for v in out[:-1])
        assert "Traceback" not in message
    else:  # accepted: the controls get a valid scenario
        values = dict(zip(CONTROL_KEYS, out[:len(CONTROL_KEYS)]))
        presentation = out[len(CONTROL_KEYS)]
        raw = {**values, "presentation": "on" in presentation}
        assert S.validate_scenario(raw)[1] == {}


@MANY
@given(UPLOAD_CONTENTS)
def test_upload_callback_random_data_urls(contents):
    assert_upload_result(state.upload(contents))


@pytest.mark.parametrize("name", sorted(HOSTILE_JSON))
def test_upload_callback_hostile_documents_are_errors(name):
    """The upload callback says why a hostile file is refused (found: it raised)."""
    for text in HOSTILE_JSON[name]:
        out = state.upload(data_url(text.encode()))
        assert_upload_result(out)
        assert out[-1].startswith("Upload rejected")


@FUZZ
@given(changes=st.one_of(
           few_changes(tuple(S.BY_KEY[k] for k in CONTROL_KEYS), 3),
           st.fixed_dictionaries({}, optional={k: scenario_values(S.BY_KEY[k])
                                               for k in CONTROL_KEYS})),
       presentation=st.sampled_from([[], ["on"], None, ["off", "on"]]),
       hydrated=st.booleans())
def test_collect_callback_random_control_values(changes, presentation, hydrated):
    current = S.default_scenario()
    values = [changes.get(k, current[k]) for k in CONTROL_KEYS]
    def run() -> tuple:  # as Dash calls it: a control of the panel triggered it
        context_value.set(AttributeDict(triggered_inputs=[{"prop_id": "ctl-layers.value",
                                                           "value": None}]))
        return state.collect(*values, presentation, current, hydrated, state._applied(current),
                             None)  # no fitted stack
    out = contextvars.copy_context().run(run)
    assert len(out) == 2 + len(state.ERROR_KEYS)
    messages = out[2:]
    assert all(isinstance(m, str) for m in messages)
    if isinstance(out[0], dict):
        assert not any(messages)
        assert S.validate_scenario(out[0]) == (out[0], {})
    else:
        assert any(messages)
