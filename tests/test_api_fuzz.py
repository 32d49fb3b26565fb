"""Random arguments thrown at the Python API (hypothesis): ``search``, ``evaluate``,
``design_space`` and ``sweep`` with random GPU counts, batches, strategies, pins, modes,
execution options and budgets — kept cheap (a gpt3-175b shrunk to 8 layers, at most 256
GPUs): a clear ``ModelError`` or finite results. Split from tests/test_inputs_fuzz.py (the
promise, and the value strategies these share)."""

from __future__ import annotations

import dataclasses
import math
from functools import cache
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_inputs_fuzz import (
    CHEAP_JUNK,
    FUZZ,
    JUNK,
    Arg,
    assert_clear,
    assert_finite,
    assert_search_result,
    event,
)

from model import ModelError, design_space, evaluate, load_model, load_system, search, sweep
from model.engine.space import PIN_NAMES
from model.specs.execution import Execution


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
    "mode": Arg(st.sampled_from([None, "default", "paper", True, False]), JUNK),
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
@given(api_args(gpus="gpus", global_batch="global_batch", strategy="strategy", mode="mode",
                pins="pins", execution="execution", top_k="top_k", budget="budget", nvs="nvs"))
def test_search_random_arguments(kw):
    try:
        res = search(small_model(), h200(), **kw)
    except ModelError as exc:
        assert_clear(exc)
        return
    assert_search_result(res, kw["top_k"])


@FUZZ
@given(api_args(global_batch="global_batch", strategy="strategy", mode="mode",
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
@given(api_args(gpus="gpus", global_batch="global_batch", strategy="strategy", mode="mode",
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
@given(api_args(global_batch="global_batch", mode="mode", pins="pins",
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
