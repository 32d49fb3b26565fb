"""Random and malformed inputs thrown at every entry point (hypothesis).

The promise (issue 5, "Inputs"): the only failure a user can provoke is the project's own
:class:`model.errors.ModelError` with a message naming the problem (for the dashboard's
validators: a ``(None, {key: message})`` result); never another exception, and a valid input
never yields NaN, inf or a negative time or size. Covered here:

* the model and system JSON specs (``transformer_from_dict``, ``system_from_dict``): random values
  for every field, unknown keys (rejected by name), non-object documents; random *valid* specs
  then run a search whose numbers must be finite;
* the Python API (``search``, ``evaluate``, ``design_space``, ``sweep``) with random GPU counts,
  batches, strategies, pins, modes, execution options and budgets — kept cheap: a
  gpt3-175b shrunk to 8 layers, at most 256 GPUs;
* the command line (``model.cli.commands``): random argument lists built from the parser's own flags
  with random values and garbage tokens — exit 0, or 2 with one ``error:`` line; never 1;
* the dashboard: ``validate_scenario`` (random dicts), ``from_query`` (URL fragments, percent-
  encoded, long, unicode), ``from_json`` (random bytes and text up to 20 KB) and the ``upload``,
  ``hydrate`` and ``collect`` callbacks. Valid scenarios build and survive the URL and JSON
  round trips.

This module holds the value strategies and the JSON specs' tests; the Python API's, the command
line's and the dashboard's are tests/test_api_fuzz.py, test_cli_fuzz.py and
test_scenario_fuzz.py.

Inputs that broke an entry point when this file was written have their own small tests (their
docstrings say "found: …"), so that each failure points at one bug and the random tests stay
useful for the rest.
"""

from __future__ import annotations

import atexit
import math
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

_TMP_CACHE = tempfile.mkdtemp(prefix="perf-fuzz-test-")
atexit.register(shutil.rmtree, _TMP_CACHE, ignore_errors=True)
if "dashboard.settings" not in sys.modules:  # never the repository's cache/
    os.environ["PERF_CACHE_DIR"] = _TMP_CACHE

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import event as _event  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.errors import InvalidArgument  # noqa: E402

from model import (  # noqa: E402
    ModelError,
    list_systems,
    load_model,
    load_system,
    search,
    system_from_dict,
    transformer_from_dict,
)
from model.engine.economics import power_and_prices  # noqa: E402
from model.specs import hardware, transformer  # noqa: E402
from model.specs.schema import Field  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
# examples per fuzz test: scripts/fuzz raises it (TPERF_FUZZ_EXAMPLES) to explore
FUZZ = settings(max_examples=int(os.environ.get("TPERF_FUZZ_EXAMPLES", "80")), deadline=None,
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


class Arg:
    """An argument's plausible values (mostly valid) and its junk (random, hostile)."""

    def __init__(self, plausible: st.SearchStrategy, junk: st.SearchStrategy) -> None:
        self.plausible, self.junk = plausible, junk


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
def test_valid_random_specs_give_finite_results(m, s, gpus, gbs, strategy, mode):
    """Any valid model on any valid system: finite, non-negative numbers (the case it found
    first has its own test, below)."""
    try:
        res = search(m, s, gpus, gbs, strategy, mode=mode, top_k=5, budget=200_000)
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


