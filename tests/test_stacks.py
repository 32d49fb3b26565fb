"""Software stacks (model/specs/stack.py): presets, their base chain, what they change on a system
and an execution, and how searches use them."""

from __future__ import annotations

import json

import pytest

from model import ModelError, evaluate, load_model, load_system, search
from model.specs.stack import (
    NO_STACK,
    default_stack_name,
    list_stacks,
    load_stack,
    stack_from_dict,
)


def test_presets_load_and_are_ordered_by_release():
    names = list_stacks()
    assert {"megatron-lm-2021", "megatron-lm-2022", "megatron-bridge-25.11"} <= set(names)
    released = [load_stack(n).released for n in names]
    assert released == sorted(released)
    assert default_stack_name() == names[-1]
    assert load_stack(None).name == names[-1]
    for name in names:
        s = load_stack(name)
        assert s.source and s.name == name


def test_a_release_inherits_what_it_does_not_set(tmp_path):
    base = load_stack("megatron-bridge-25.09")
    child = stack_from_dict({"name": "x", "released": "2030-01", "source": "test",
                             "gemm_efficiency": {"hopper": {"fp8": 0.5}},
                             "execution": {"tp_overlap": False}}, base)
    assert child.gemm_efficiency["hopper"]["fp8"] == 0.5
    assert child.gemm_efficiency["hopper"]["bf16"] == base.gemm_efficiency["hopper"]["bf16"]
    assert child.gemm_efficiency["blackwell"] == base.gemm_efficiency["blackwell"]
    assert child.execution["tp_overlap"] is False
    assert child.execution["sequence_parallel"] is True  # from the base


def test_apply_sets_the_generation_values_only():
    stack = stack_from_dict({"name": "x", "released": "2030-01", "source": "test",
                             "gemm_efficiency": {"hopper": {"bf16": 0.5, "fp8": 0.4,
                                                            "mxfp8": 0.3}},
                             "attention_efficiency": {"hopper": 0.6},
                             "memory_reserve_gb": {"hopper": 7.0}})
    h100 = stack.apply(load_system("h100"))
    assert (h100.flop_efficiency, h100.flop_efficiency_fp8, h100.flop_efficiency_mxfp8,
            h100.attention_efficiency, h100.memory_reserve_gb) == (0.5, 0.4, 0.3, 0.6, 7.0)
    a100 = load_system("a100")
    assert stack.apply(a100) == a100  # no ampere values: the system's own


def test_execution_defaults_under_explicit_options():
    stack = load_stack("megatron-lm-2021")
    assert stack.execution_for(None)["sequence_parallel"] is False
    merged = stack.execution_for({"sequence_parallel": True, "recompute": ["full"]})
    assert merged["sequence_parallel"] is True and merged["flash_attention"] is False
    assert NO_STACK.execution_for(None) is None


@pytest.mark.parametrize("data,message", [
    ({"name": "x", "released": "2025", "source": "s"}, "YYYY-MM"),
    ({"name": "x", "released": "2025-13", "source": "s"}, "YYYY-MM"),
    ({"name": "x", "released": "2025-01"}, "source"),
    ({"name": "x", "released": "2025-01", "source": "s", "speed": 1}, "unknown key 'speed'"),
    ({"name": "x", "released": "2025-01", "source": "s", "execution": {"warp": 1}},
     "unknown execution option 'warp'"),
    ({"name": "x", "released": "2025-01", "source": "s", "execution": {"zero": 7}}, "zero"),
    ({"name": "x", "released": "2025-01", "source": "s",
      "gemm_efficiency": {"volta": {"bf16": 0.5}}}, "unknown GPU generation or system .volta."),
    ({"name": "x", "released": "2025-01", "source": "s",
      "gemm_efficiency": {"hopper": {"bf16": 1.5}}}, "must be a number in"),
    ({"name": "x", "released": "2025-01", "source": "s",
      "gemm_efficiency": {"hopper": {"int8": 0.5}}}, "unknown key 'int8'"),
])
def test_bad_stacks_are_refused_by_name(data, message):
    with pytest.raises(ModelError, match=message):
        stack_from_dict(data)


def test_a_stack_file_names_its_base_by_preset_name_only(tmp_path):
    path = tmp_path / "mine.json"
    path.write_text(json.dumps({"name": "mine", "released": "2030-01", "source": "s",
                                "base": "/etc/passwd.json"}))
    with pytest.raises(ModelError, match="must name a stack preset"):
        load_stack(str(path))
    path.write_text(json.dumps({"name": "mine", "released": "2030-01", "source": "s",
                                "base": "megatron-lm-2022"}))
    assert load_stack(str(path)).execution["flash_attention"] is False


def test_searches_use_the_newest_stack_unless_told():
    m, s = load_model("llama3-8b"), load_system("h100")
    cfg = dict(tp1=1, pp=1, dp=8, microbatch=1)
    newest = evaluate(m, s, 8, 128, "1d", **cfg)
    named = evaluate(m, s, 8, 128, "1d", stack=default_stack_name(), **cfg)
    assert newest.row["iteration_time_s"] == named.row["iteration_time_s"]
    assert bool(newest.row["tp_overlap"]) is True  # the stack's default
    own = evaluate(m, s, 8, 128, "1d", stack="none", **cfg)
    assert bool(own.row["tp_overlap"]) is False  # the Execution default
    old = evaluate(m, load_system("a100"), 8, 128, "1d", stack="megatron-lm-2021", **cfg)
    assert bool(old.row["sequence_parallel"]) is False and int(old.row["zero"]) == 0
    # an explicit option wins over the stack's default
    mine = evaluate(m, s, 8, 128, "1d", execution={"tp_overlap": False}, **cfg)
    assert bool(mine.row["tp_overlap"]) is False


def test_the_paper_mode_takes_no_stack():
    m, s = load_model("gpt3-1t"), load_system("paper-h200")
    a = search(m, s, 512, 4096, "1d", compat="paper", nvs=8).best
    b = search(m, s, 512, 4096, "1d", compat="paper", nvs=8, stack="megatron-lm-2021").best
    assert a["iteration_time_s"] == b["iteration_time_s"]


def test_unknown_stack_is_a_clear_error():
    with pytest.raises(ModelError, match="unknown stack 'nemo-1999'"):
        search(load_model("llama3-8b"), load_system("h100"), 8, 128, stack="nemo-1999")
