"""Options are declared once: every field of the execution table
(:mod:`model.specs.execution`) is a command-line flag of every command that runs a search, a
dashboard control with a scenario key, and a key of the Python API's ``execution=``; a value
given through each front end reaches the :class:`Execution` the estimator prices."""

from __future__ import annotations

import argparse
from dataclasses import replace

import pytest

from dashboard.controls import scenario as S
from dashboard.controls.control_table import CONTROLS
from model.cli.commands import build_parser
from model.cli.options import execution_from_args, flag
from model.specs import execution as ex
from model.specs import execution_fields as ef
from model.specs import execution_variants as variants
from model.specs.stack import default_stack_name, load_stack

BASE = ["--model", "llama3-8b", "--system", "h100", "--global-batch", "256"]
RUNS = {"search": ["--gpus", "64", "--strategy", "1d"],
        "evaluate": ["--gpus", "8", "--strategy", "1d", "--tp", "8", "--pp", "1", "--dp", "1",
                     "--microbatch", "1"],
        "plan": ["--days", "30"]}


def _stack_execution() -> ex.Execution:
    return ex.resolve_execution(load_stack(default_stack_name()).execution)


def _other_value(name: str):
    """A valid value of ``name`` other than the stack's (and, where there is one, the plain
    default's)."""
    kind, taken = ef.field_kind(name), {getattr(ex.DEFAULT_EXECUTION, name),
                                        getattr(_stack_execution(), name)}
    if kind == "switch":
        return not getattr(_stack_execution(), name)
    if kind == "choice":
        others = [c for c in ex.LITERALS[name] if c != getattr(_stack_execution(), name)]
        return next((c for c in others if c not in taken), others[0])
    if kind == "integer":
        return next(v for v in (2, 3, 4) if v not in taken)
    lo, hi = ex.RANGES[name]
    return next(v for v in (lo + 1.5, lo + 2.5) if v not in taken and v <= hi)


def _argv_words(name: str, value) -> list[str]:
    if ef.field_kind(name) == "switch":
        return [flag(name) if value else "--no-" + flag(name)[2:]]
    return [flag(name), str(value)]


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    [sub] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def test_the_field_table_covers_every_field():
    assert set(ef.HELP) == set(ex.FIELDS)
    assert all(ef.field_kind(name) for name in ex.FIELDS)
    assert {"ep_dispatcher", "dp_overlap", "moe_imbalance"} <= set(ex.FIELDS)


@pytest.mark.parametrize("command", ["search", "evaluate", "plan", "codesign"])
def test_every_execution_field_is_a_flag(command):
    options = {o for a in _subparsers(build_parser())[command]._actions
               for o in a.option_strings}
    missing = [flag(name) for name in ex.FIELDS if flag(name) not in options]
    assert missing == []


@pytest.mark.parametrize("name", ex.FIELDS)
@pytest.mark.parametrize("command", sorted(RUNS))
def test_a_flag_reaches_the_execution(command, name):
    value = _other_value(name)
    args = build_parser().parse_args([command, *BASE, *RUNS[command], *_argv_words(name, value)])
    given = execution_from_args(args, searching=command != "evaluate")
    assert given[name] == value
    assert getattr(ex.resolve_execution(given), name) == value


def test_a_list_is_searched_and_all_means_every_choice():
    args = build_parser().parse_args(["search", *BASE, *RUNS["search"],
                                      "--ep-dispatcher", "all", "--moe-imbalance", "1,1.5"])
    given = execution_from_args(args, searching=True)
    assert given["ep_dispatcher"] == list(ef.EP_DISPATCHERS)
    assert given["moe_imbalance"] == [1.0, 1.5]
    assert len(variants.execution_variants(given)) == 4


@pytest.mark.parametrize("name", ex.FIELDS)
def test_every_execution_field_is_a_control_and_a_scenario_key(name):
    [control] = [c for c in CONTROLS if c.group == "execution" and c.spec == name]
    assert control.key in S.EXECUTION_KEYS
    value = _other_value(name)
    if name == "interleave":
        value = 2  # the control's range starts at 1 (the dashboard evaluates one V)
    scn = {**S.default_scenario(), control.key: value}
    assert S.execution_of(scn)[name] == value
    valid, errors = S.validate_scenario(scn)
    assert control.key not in errors, errors
    assert getattr(replace(ex.DEFAULT_EXECUTION, **{name: value}), name) == value  # the API key
