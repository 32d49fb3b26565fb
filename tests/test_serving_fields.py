"""Every field of the serving workload is a ``tperf serve`` flag, a Serving-page control and a
key of the page's URL query, and a value given through each reaches the workload priced."""

from __future__ import annotations

import argparse

import pytest

from dashboard.views.serve_view import DEFAULT_FORM, checked_form, form_from_query, form_query
from model import ModelError
from model.cli.commands import build_parser
from model.cli.serve import _workload
from model.specs.serving import LAYOUT_FIELDS, WORKLOAD_FIELDS

# field → (its flag, its form key); the mode's inputs share the page's "load" control
FRONT_ENDS = {
    "input_tokens": ("--input-tokens", "input_tokens"),
    "output_tokens": ("--output-tokens", "output_tokens"),
    "mode": ("--offline", "mode"), "concurrency": ("--concurrency", "load"),
    "request_rate_per_s": ("--request-rate", "load"),
    "weight_precision": ("--precision", "precision"),
    "kv_precision": ("--kv-precision", "kv_precision"), "mtp_depth": ("--mtp", "mtp"),
    "mtp_acceptance": ("--mtp-acceptance", "mtp_acceptance"),
    "draft_model": ("--draft-model", "draft_model"),
    "prefix_hit": ("--prefix-hit", "prefix_hit"),
    "kv_offload_gb": ("--kv-offload-gb", "kv_offload_gb"),
    "ttft_max_s": ("--ttft-max", "ttft_max_s"), "tpot_max_s": ("--tpot-max", "tpot_max_s"),
}
# layout field → (its flag, its form key)
LAYOUT = {"tp": ("--tp", "tp"), "pp": ("--pp", "pp"), "ep": ("--ep", "ep"),
          "attention_dp": ("--attention-dp", "attention_dp"),
          "replicas": ("--replicas", "replicas"),
          "prefill_instances": ("--prefill-instances", "prefill_instances"),
          "decode_instances": ("--decode-instances", "decode_instances"),
          "max_batch": ("--batch", "max_batch")}
BASE = ["serve", "--model", "deepseek-v3", "--system", "h200", "--gpus", "8", "--precision",
        "fp8", "--input-tokens", "1000", "--output-tokens", "100", "--concurrency", "4"]
# a value of each newer field other than its default, through every front end
VALUES = {"prefix_hit": 0.4, "kv_offload_gb": 64.0, "mtp_acceptance": 0.6,
          "draft_model": "llama3-8b"}


def _serve_flags() -> set[str]:
    [sub] = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return {o for a in sub.choices["serve"]._actions for o in a.option_strings}


def test_the_table_covers_every_workload_and_layout_field():
    assert set(FRONT_ENDS) == {f.name for f in WORKLOAD_FIELDS}
    assert set(LAYOUT) == {f.name for f in LAYOUT_FIELDS}


@pytest.mark.parametrize("name", sorted(FRONT_ENDS) + sorted(LAYOUT))
def test_every_serving_field_is_a_flag_and_a_page_control(name):
    flag, key = {**FRONT_ENDS, **LAYOUT}[name]
    assert flag in _serve_flags()
    assert key in DEFAULT_FORM


@pytest.mark.parametrize("name", sorted(VALUES))
def test_a_value_reaches_the_workload_from_the_cli_and_the_page_link(name):
    flag, key = FRONT_ENDS[name]
    value = VALUES[name]
    extra = ["--mtp", "2"] if name in ("mtp_acceptance", "draft_model") else []
    args = build_parser().parse_args([*BASE, *extra, flag, str(value)])
    assert _workload(args)[name] == value
    form = {**DEFAULT_FORM, key: value, "mtp": 2}
    linked = {**DEFAULT_FORM, **form_from_query(form_query(form))}
    _, workload, _ = checked_form(linked)
    assert getattr(workload, name) == value


@pytest.mark.parametrize("change, words", [
    ({"prefix_hit": 1}, "prefix-cache hit share must be a number in [0, 1)"),
    ({"kv_offload_gb": -5}, "host KV pool must be a number in GB"),
    ({"mtp": 1, "mtp_acceptance": 1.5}, "MTP acceptance must be a number in (0, 1]"),
    ({"mtp": 1, "draft_model": "../etc/passwd"}, "draft model must be none or a model preset"),
])
def test_the_page_refuses_them_in_words(change, words):
    with pytest.raises(ModelError) as err:
        checked_form({**DEFAULT_FORM, **change})
    assert words in str(err.value)


@pytest.mark.parametrize("pins", [{"ep": 4}, {"replicas": 2}, {"max_batch": 64},
                                  {"prefill_instances": 1, "decode_instances": 3}])
def test_a_layout_pin_reaches_the_layout_from_the_page_link(pins):
    form = {**DEFAULT_FORM, **pins}
    _, _, layout = checked_form({**DEFAULT_FORM, **form_from_query(form_query(form))})
    assert {k: getattr(layout, k) for k in pins} == pins
