"""Random and malformed input thrown at the dashboard (hypothesis): ``validate_scenario``
(random dicts), ``from_query`` (URL fragments, percent-encoded, long, unicode), ``from_json``
(random bytes and text up to 20 KB) and the ``upload``, ``hydrate`` and ``collect`` callbacks —
a ``(None, {key: message})`` result or a valid scenario that survives the URL and JSON round
trips, never an exception. Split from tests/test_inputs_fuzz.py (the promise, and the value
strategies these share)."""

from __future__ import annotations

import base64
import contextvars
import json
from typing import Any
from urllib.parse import quote

import pytest
from dash import no_update
from dash._callback_context import context_value
from dash._utils import AttributeDict
from hypothesis import given
from hypothesis import strategies as st
from test_inputs_fuzz import (
    EDGE_TEXT,
    FUZZ,
    JUNK,
    MANY,
    event,
    few_changes,
    field_values,
    unknown_keys,
)

from dashboard import state
from dashboard.controls import presets as PR
from dashboard.controls import scenario as S
from dashboard.controls import scenario_link as L
from dashboard.controls.panel import CONTROL_KEYS
from model import list_models, list_systems
from model.specs.schema import Field


def scenario_values(field: Field) -> st.SearchStrategy:
    return st.one_of(field_values(field), st.just(""))


SCENARIO_CHANGES = st.one_of(
    few_changes(S.FIELDS, 3),
    st.fixed_dictionaries({}, optional={f.name: scenario_values(f) for f in S.FIELDS}))
PRESETS = st.one_of(
    st.just({}), st.sampled_from(list_models()).map(PR.model_values),
    st.sampled_from(list_systems()).map(PR.system_values))


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
    assert S.validate_scenario({**S.default_scenario(), **L.from_query(L.to_query(scn))}) == (
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
    raw = L.from_query(text)
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
