"""Finding 8 of the probe (tests/test_hostile_requests.py): hypothesis throws hostile scenario
stores and type-fuzzed values at every callback, foreground and background — each answers
with an inline error or a 400, within its time, never a 500; and every background
callback's error handler answers every output. Shares test_hostile_requests' app, guards
and helpers."""

from __future__ import annotations

import logging
import math
import time
from typing import Any

import pytest
import test_hostile_requests
from callbacks import parse_id
from hypothesis import given
from hypothesis import strategies as st
from test_hostile_budget import FINDING4
from test_hostile_requests import FEW, OUTSIDE, PATHS, defaults, ids, scenario_callbacks, send

from dashboard.controls import scenario as S

cbs = test_hostile_requests.cbs  # its fixture (the app's callbacks), found here by pytest

def hostile_values() -> st.SearchStrategy:
    return st.one_of(
        st.sampled_from([math.nan, math.inf, -math.inf, -1, 0, -(10**30), 10**30, 1e308, 2**63,
                         "", "x", "8", [], {}, [1], {"a": 1}, True, False, None, 0.5, -0.0]),
        st.sampled_from(PATHS), st.integers(), st.floats(), st.text(max_size=12))


def hostile_stores() -> st.SearchStrategy:
    """A scenario store with a few hostile values — or no scenario at all."""
    keyed = st.dictionaries(st.sampled_from(S.KEYS), hostile_values(), min_size=1, max_size=3)
    return st.one_of(
        keyed.map(lambda bad: {**S.default_scenario(), **bad}),
        st.dictionaries(st.text(max_size=6), hostile_values(), max_size=3).map(
            lambda extra: {**S.default_scenario(), **extra}),
        hostile_values())


def check_page_answer(status: int, text: str, store: Any) -> None:
    assert status in (200, 204, 400), (status, text[:500])
    if status == 200 and S.validate_scenario(store)[0] is None:
        assert "Fastest:" not in text  # nothing computed from the invalid store


SCENARIO_CALLBACKS = 30  # callbacks reading the store the test below reaches (indexes)


@pytest.mark.parametrize("index", range(SCENARIO_CALLBACKS))
@FEW
@given(store=hostile_stores())
def test_hostile_scenario_stores_to_every_callback(cbs, index, store):
    """Finding 8: hostile ``scenario`` stores (NaN, ±Infinity, negative, huge, wrong types,
    path strings) to every callback that reads the store — each answers quickly with 200 (an
    inline error where it shows one) or 400: never a 500, a loop or a read outside."""
    deps = scenario_callbacks(cbs, background=False)
    assert 8 <= len(deps) <= SCENARIO_CALLBACKS, ids(deps)
    if index >= len(deps):
        return
    status, text = send(cbs, deps[index], {**defaults(), "scenario": store})
    check_page_answer(status, text, store)


@pytest.mark.parametrize("store", [{**S.default_scenario(), "nvs": -1},
                                   {**S.default_scenario(), "gpus_max": math.inf},
                                   {**S.default_scenario(), "model": str(OUTSIDE / "leak.json")},
                                   {**S.default_scenario(), **FINDING4}, [1, 2], "x", None],
                         ids=["nvs-1", "gpus-inf", "path", "finding4", "list", "text", "none"])
def test_hostile_scenario_stores_to_background_jobs(cbs, store):
    """The background callbacks (Compare systems, HBM sweep, Plan & cost) with hostile stores:
    the job answers at once with an inline error (finding 1: a Compare systems job spun forever
    per request); no job process is left running."""
    import psutil

    before = {p.pid for p in psutil.Process().children(recursive=True)}
    deps = scenario_callbacks(cbs, background=True)
    assert len(deps) == 2, ids(deps)  # Compare systems, HBM sweep
    # the Plan & cost job takes the scenario the page hands it in ``plan-job``
    plan = [d for d in cbs.deps if d.get("background")
            and any(i["id"] == "plan-job" for i in d["inputs"])]
    assert len(plan) == 1, ids(plan)
    # (a valid store there is an ordinary plan, tested on its own: only refusals are timed)
    invalid = S.validate_scenario(store)[0] is None
    for dep, key in [(d, "scenario") for d in deps] + [(plan[0], "plan-job")] * invalid:
        status, text = send(cbs, dep, {**defaults(), key: store})
        assert status in (200, 204), text[:500]
        if status == 200 and store is not None:  # refused, or (finding 4's model, swept in
            # parts of GPU counts that fit the memory budget) the answer that nothing fits
            assert "scenario" in text.lower() or "configurations" in text \
                or "No system fits" in text, text[:500]
    time.sleep(0.5)
    alive = [p for p in psutil.Process().children(recursive=True)
             if p.pid not in before and p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert alive == [], alive


def junk() -> st.SearchStrategy:
    leaves = st.one_of(hostile_values(), st.binary(max_size=4).map(lambda b: b.hex()))
    return st.recursive(leaves, lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)),
        max_leaves=6)


FUZZED = 54  # callbacks the fuzz test below reaches (indexes); the app has fewer


def test_the_fuzz_test_reaches_every_callback(cbs):
    assert len([d for d in cbs.deps if not d.get("background")]) <= FUZZED


@pytest.mark.parametrize("index", range(FUZZED))
@FEW
@given(data=st.data())
def test_type_fuzzed_requests_to_every_callback(cbs, index, data, caplog):
    """Finding 7/8: every input and state of every callback set to random JSON (the probe's
    type fuzzing: 922 of 1,134 requests gave 500 with a traceback each). Now 200, 204 or 400,
    at most one log line, never a traceback."""
    deps = [d for d in cbs.deps if not d.get("background")]
    if index >= len(deps):
        return
    dep = deps[index]
    values = defaults()
    for item in dep["inputs"] + dep["state"]:
        if data.draw(st.booleans()):
            cid = parse_id(item["id"])
            values[cid["type"] if isinstance(cid, dict) else cid] = data.draw(junk())
    caplog.clear()
    status, text = send(cbs, dep, values)
    assert status in (200, 204, 400), (dep["output"][:80], status, text[:800])
    loud = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(loud) <= 1 and all(r.exc_info is None for r in loud), [r.getMessage()
                                                                        for r in loud]


def test_background_error_handlers_answer_every_output(cbs):
    """A job that raised or whose process died is reported by the callback's ``on_error``
    handler, which must give a value for each output (one short: Dash drops the report and the
    page shows nothing — the lost Celery job of tests/test_celery.py)."""
    from dashboard.pages import hbm, systems

    for handler, output in ((hbm.sweep_failed, "hbm-error.children"),
                            (systems.failed, "systems-error.children")):
        spec = next(d["output"] for d in cbs.deps if output in d["output"])
        assert len(handler(Exception("boom"))) == len(spec[2:-2].split("...")), spec
