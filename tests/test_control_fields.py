"""Every field declared once (issue 33): a dashboard control and a command-line flag that feed
an estimator field take its range, choices, unit and help from the field's declaration
(:class:`model.specs.schema.Field`), and the record that validates the values
(:class:`~model.specs.execution.Execution`) refuses what the field refuses. Before, 43 controls
retyped their field's range (two differently: the NVLink domain's cap, the HBM bandwidth's
floor), each execution option had three help texts and the MTP depth four ranges."""

from __future__ import annotations

import argparse

import pytest

from dashboard.controls.control_record import SPEC_FIELDS, Control, tooltip
from dashboard.controls.control_table import CONTROLS
from dashboard.jobs import codesign
from dashboard.views import post_training_view as post_view
from dashboard.views import serve_view
from model import ModelError
from model.cli import costs
from model.cli.commands import build_parser, main
from model.cli.options import flag
from model.specs import execution as ex
from model.specs import execution_fields as ef
from model.specs.cost import FIELDS as COST_FIELDS
from model.specs.execution_fields import BY_NAME, EXECUTION_FIELDS
from model.specs.hardware import FIELDS as SYSTEM_FIELDS
from model.specs.serving import MTP_DEPTH
from model.specs.workload import MAX_GLOBAL_BATCH
from model.studies.rl import RL_FIELD, RL_STEPS, RlStep

SPEC_CONTROLS = [c for c in CONTROLS if c.spec]
# a control may narrow its field's range, never widen it; the one that does and why: the
# dashboard evaluates one interleaving (0 searches every count the stages allow)
NARROWED = {"interleave": {"lo"}}


def _subparser(name: str) -> argparse.ArgumentParser:
    [sub] = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return sub.choices[name]


def _actions(command: str) -> dict[str, argparse.Action]:
    return {o: a for a in _subparser(command)._actions for o in a.option_strings}


def test_every_spec_control_has_its_field():
    assert len(SPEC_CONTROLS) >= 70
    assert [c.key for c in SPEC_CONTROLS if c.spec_field is None] == []


@pytest.mark.parametrize("c", SPEC_CONTROLS, ids=lambda c: c.key)
def test_a_control_declares_only_its_display(c: Control):
    """Nothing of the field retyped: only the ranges listed in NARROWED, and the unit of a
    scaled value (the control's TB/s of the field's GB/s)."""
    allowed = NARROWED.get(c.key, set()) | ({"unit"} if c.scale != 1 else set())
    assert set(c.declared) <= allowed, sorted(c.declared)


@pytest.mark.parametrize("c", SPEC_CONTROLS, ids=lambda c: c.key)
def test_a_control_matches_its_field(c: Control):
    f = c.spec_field
    kinds = f.kind if isinstance(f.kind, tuple) else (f.kind,)
    assert c.kind in kinds
    assert c.tip == tooltip(f.doc) and len(c.tip) > 10
    assert c.choices == tuple(f.choices or ((True, False) if bool in kinds else ()))
    if c.scale == 1:
        assert c.unit == f.unit
    lo = None if c.lo is None else c.lo * c.scale
    hi = None if c.hi is None else c.hi * c.scale
    if c.key in NARROWED:
        assert f.lo <= lo <= hi <= f.hi
    else:
        assert (lo, hi) == pytest.approx((f.lo, f.hi)) if f.lo is not None else (lo, hi) == (
            f.lo, f.hi)


def test_the_two_ranges_that_differed_follow_the_spec():
    by_key = {c.key: c for c in CONTROLS}
    assert by_key["nvs"].hi == 1_000_000  # was 100,000 on the control, 1,000,000 in the spec
    assert by_key["hbm_tb_per_s"].lo * 1000 == 1  # was 0.01 TB/s; the spec's floor is 1 GB/s


def test_the_derivation_sees_a_retyped_range():
    retyped = Control("layers", "Layers", "model", "number", lo=1, hi=10_000, spec="layers")
    assert retyped.declared == {"lo", "hi"}
    plain = Control("layers", "Layers", "model", "number", spec="layers")
    assert plain.declared == frozenset() and (plain.lo, plain.hi) == (1, 10_000)


@pytest.mark.parametrize("f", EXECUTION_FIELDS, ids=lambda f: f.name)
def test_an_execution_flag_matches_its_field(f):
    action = _actions("search")[flag(f.name)]
    assert action.help == f.doc
    if f.choices and f.kind is not bool:
        values = action.type(",".join(str(c) for c in f.choices))
        assert values == list(f.choices)


@pytest.mark.parametrize("f", [f for f in EXECUTION_FIELDS if f.lo is not None],
                         ids=lambda f: f.name)
def test_execution_refuses_what_its_field_refuses(f):
    """The record's own checks agree with the field: its bounds pass, one step beyond fails."""
    step = 1 if f.kind is int else 1e-3
    base = {"lora_rank": 16} if f.name != "lora_rank" else {}
    for value in (f.lo, f.hi):
        ex.Execution(**{**base, f.name: f.kind(value)})
    for value in (f.lo - step, f.hi + step):
        with pytest.raises(ModelError):
            ex.Execution(**{**base, f.name: f.kind(value)})


def test_help_is_written_once():
    assert ef.HELP == {f.name: f.doc for f in EXECUTION_FIELDS}
    assert set(BY_NAME) == set(ex.FIELDS)
    assert SPEC_FIELDS["execution"] == BY_NAME


@pytest.mark.parametrize("dest", [d for _, d, _ in costs.OPTIONS])
def test_a_cost_flag_matches_its_field(dest):
    [f] = [f for f in COST_FIELDS if f.name == dest]
    action = next(a for a in _subparser("plan")._actions if a.dest == dest)
    assert action.help.startswith(f.doc)
    assert (tuple(action.choices) if action.choices else None) == f.choices


def test_the_mtp_depth_has_one_range():
    """0..16 in the spec, 0..16 on the command line, 0..8 checked by the page and 0..4 offered
    by its dropdown before; now every one is the field's."""
    lo, hi = int(MTP_DEPTH.lo), int(MTP_DEPTH.hi)
    action = _actions("serve")["--mtp"]
    assert list(action.choices) == list(range(lo, hi + 1)) and action.help == MTP_DEPTH.doc
    form = {**serve_view.DEFAULT_FORM, "mtp": hi}
    assert serve_view.checked_form(form)[1].mtp_depth == hi
    with pytest.raises(ModelError):
        serve_view.checked_form({**form, "mtp": hi + 1})
    # the page's dropdown: tests/test_serve_page.py::test_the_mtp_dropdown_offers_the_fields_range


# The Serving page's numbers: (form key, field name, what the form must hold beside it). A
# page reads each range from its field and may narrow it, never widen it
# (dashboard/views/serve_view.py: NARROWED, each with its reason).
SERVING_NUMBERS = [
    ("input_tokens", "input_tokens", {}), ("output_tokens", "output_tokens", {}),
    ("load", "concurrency", {"mode": "concurrency"}),
    ("load", "request_rate_per_s", {"mode": "request-rate"}),
    ("mtp", "mtp_depth", {"mtp_acceptance": 0.8}),
    ("ttft_max_s", "ttft_max_s", {}), ("tpot_max_s", "tpot_max_s", {}),
    ("kv_offload_gb", "kv_offload_gb", {}),
    ("tp", "tp", {}), ("pp", "pp", {}), ("ep", "ep", {}), ("replicas", "replicas", {}),
    ("prefill_instances", "prefill_instances", {"decode_instances": 1}),
    ("decode_instances", "decode_instances", {"prefill_instances": 1}),
    ("max_batch", "max_batch", {}),
]


def test_the_serving_page_narrows_only_what_it_says():
    assert set(serve_view.NARROWED) == {"output_tokens", "tp", "pp", "ep"}
    for name in serve_view.NARROWED:
        f, (lo, hi) = serve_view.FIELDS[name], serve_view.page_range(name)
        assert f.lo <= lo <= hi <= f.hi and (lo, hi) != (None, None)


@pytest.mark.parametrize("key, name, beside", SERVING_NUMBERS, ids=lambda v: str(v))
def test_a_serving_form_number_takes_its_fields_range(key, name, beside):
    """The page's bounds are the field's (or its declared narrowing): both pass, one step
    beyond either is refused in the form's words."""
    f, (lo, hi) = serve_view.FIELDS[name], serve_view.page_range(name)
    narrowed = serve_view.NARROWED.get(name, {})
    assert (lo, hi) == (narrowed.get("lo", f.lo), narrowed.get("hi", f.hi))
    form = {**serve_view.DEFAULT_FORM, **beside}
    for value in (lo, hi):
        serve_view.checked_form({**form, key: f.kind(value)})
    below, above = (lo - 1, hi + 1) if f.kind is int else (lo / 2 if lo else -1e-3, hi * 1.001)
    for value in (below, above):
        with pytest.raises(ModelError):
            serve_view.checked_form({**form, key: f.kind(value)})


def test_the_codesign_form_takes_its_fields_ranges():
    """Co-design's page-local numbers: the host bandwidth is the system field's (above 0: a
    host link of 0 GB/s offloads nothing), a global batch the Global batch control's, and each
    varied value its system field's."""
    form = {**codesign.DEFAULTS, "budget_usd": 1e6}
    host = codesign.HOST
    assert codesign.study({**form, "host_gb_per_s": host.hi})["host_gb_per_s"] == host.hi
    with pytest.raises(ValueError, match="host memory bandwidth"):
        codesign.study({**form, "host_gb_per_s": host.hi * 1.001})
    batch = next(c for c in CONTROLS if c.key == "global_batch")
    assert batch.hi == MAX_GLOBAL_BATCH
    assert codesign.study({**form, "batches": str(batch.hi)})["batches"] == [batch.hi] * 3
    with pytest.raises(ValueError, match="Global batch"):
        codesign.study({**form, "batches": str(batch.hi + 1)})
    hbm = next(f for f in SYSTEM_FIELDS if f.name == "hbm_capacity_gb")
    row = {"field": "hbm_capacity_gb", "values": f"{hbm.hi:g}", "prices": "1"}
    codesign.study({**form, "rows": [row]})
    with pytest.raises(ValueError, match="hbm_capacity_gb"):
        codesign.study({**form, "rows": [{**row, "values": f"{hbm.hi * 1.001:g}"}]})


# The Post-training page's numbers: (form key, what the form must hold beside it). Each range is
# its field's (an RL step's, the fine-tuning tokens, the LoRA rank, the model's sequence and
# batch), narrowed only where dashboard/views/post_training_view.py: NARROWED says.
POST_NUMBERS = [
    ("prompts", {"question": "rl", "samples": 1}),
    ("samples", {"question": "rl", "prompts": 1}),
    ("input_tokens", {"question": "rl"}), ("output_tokens", {"question": "rl"}),
    ("max_output_tokens", {"question": "rl", "output_tokens": 1}),
    ("steps", {"question": "rl"}),
    ("tokens", {"question": "finetune"}), ("lora_rank", {"question": "finetune"}),
    ("seq_len", {"question": "finetune"}), ("global_batch", {"question": "finetune"}),
]


@pytest.mark.parametrize("key, beside", POST_NUMBERS, ids=lambda v: str(v))
def test_a_post_training_form_number_takes_its_fields_range(key, beside):
    f, (lo, hi) = post_view.FIELDS[key], post_view.page_range(key)
    narrowed = post_view.NARROWED.get(key, {})
    assert (lo, hi) == (narrowed.get("lo", f.lo), narrowed.get("hi", f.hi))
    assert f.lo <= lo <= hi <= f.hi
    form = {**post_view.DEFAULT_FORM, **beside}
    for value in (lo, hi):
        assert post_view.checked_form({**form, key: value})[key] == value
    for value in (lo - 1, hi + 1 if f.kind is int else hi * 1.001):
        with pytest.raises(ModelError):
            post_view.checked_form({**form, key: value})


def test_an_rl_step_refuses_what_its_fields_refuse_and_the_cli_names_the_flag(capsys):
    """The record checks every field (a 10⁸-token prompt was taken before); the command line
    says which flag, and its help is the field's."""
    top = RL_FIELD["input_tokens"].hi
    RlStep(1, 1, top, 1, 1)
    with pytest.raises(ModelError, match="input_tokens"):
        RlStep(1, 1, top + 1, 1, 1)
    with pytest.raises(ModelError, match="placement"):
        RlStep(1, 1, 1, 1, 1, placement="both")
    argv = ["rl", "--model", "llama3-8b", "--system", "h100", "--gpus", "8",
            "--prompts-per-step", "8", "--samples-per-prompt", "4", "--input-tokens",
            str(top + 1), "--output-tokens", "100", "--placement", "colocated"]
    assert main(argv) == 2
    assert "--input-tokens" in capsys.readouterr().err
    rl = build_parser()._subparsers._group_actions[0].choices["rl"]
    helps = {a.dest: a.help for a in rl._actions}
    assert helps["prompts_per_step"] == RL_FIELD["prompts"].doc
    assert helps["steps"].startswith(RL_STEPS.doc)


def _labels(component) -> list:
    """Every html.Label under a Dash component tree."""
    found = [component] if type(component).__name__ == "Label" else []
    children = getattr(component, "children", None)
    for child in children if isinstance(children, (list, tuple)) else [children]:
        if child is not None and hasattr(child, "to_plotly_json"):
            found += _labels(child)
    return found


@pytest.mark.parametrize("page, view, prefix", [
    ("dashboard.pages.serve_page", serve_view, "serve"),
    ("dashboard.pages.post_training", post_view, "post")])
def test_a_page_forms_widgets_are_made_from_its_input_records(page, view, prefix):
    """Each widget of a page's own form is one input record's: its id, its default, and a
    tooltip that is its field's help with the range the page allows (before, the widgets were
    typed one by one beside the form's defaults, and none said its range)."""
    import importlib

    import app  # noqa: F401 - registers the pages
    layout = importlib.import_module(page).layout
    widgets = {}
    for label in _labels(layout):
        box = label.children[1]
        widgets[box.id] = (box, label.title)
    assert set(widgets) == {f"{prefix}-{k}" for k in view.DEFAULT_FORM}
    for key, default in view.DEFAULT_FORM.items():
        box, title = widgets[f"{prefix}-{key}"]
        assert box.value == default
        record = next(i for i in _inputs(view) if i.key == key)
        if record.field is None:
            assert title is None
            continue
        field = view.FIELDS[record.field]
        assert title.startswith(field.doc)
        if record.widget == "number" and field.lo is not None and not field.choices:
            lo, hi = view.page_range(record.field)
            assert f"{lo:,g} to {hi:,g}" in title


def _inputs(view) -> tuple:
    return getattr(view, "INPUTS", None) or (
        *view.COMMON_INPUTS, *view.FINETUNE_INPUTS, *view.RL_INPUTS)
