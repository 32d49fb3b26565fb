"""The ``evaluate`` command that reproduces one result row of ``search`` (printed beside the best).

A row carries its whole configuration (dimensions, SUMMA panels, NVLink placement) and every
execution choice (:data:`model.specs.execution.CHOICES`); the model, system, stack and global
batch come from the search's own arguments. Options equal to the stack's defaults are left out.
"""

from __future__ import annotations

import argparse
import shlex

import pandas as pd

from model.cli.costs import cost_argv
from model.cli.options import flag
from model.specs.execution import FIELDS, resolve_execution
from model.specs.execution_fields import field_kind
from model.specs.execution_variants import DEFAULT_SEARCH
from model.specs.stack import load_stack

# (evaluate option, row column) of the configuration, in the order evaluate's help lists them
CONFIG_OPTIONS = (("--tp", "tp1"), ("--tp2", "tp2"), ("--pp", "pp"), ("--dp", "dp"),
                  ("--microbatch", "microbatch"), ("--nb", "nb"), ("--nv-tp1", "nv_tp1"),
                  ("--nv-tp2", "nv_tp2"), ("--nv-dp", "nv_dp"), ("--nv-pp", "nv_pp"))
# execution columns given as --name VALUE, and the on/off ones as --name / --no-name: every
# field of the execution table (model.specs.execution), these first in this order
_FIRST = ("recompute", "recompute_layers", "interleave", "zero", "precision", "offload",
          "context_attention", "offload_layers", "sequence_parallel", "tp_overlap",
          "flash_attention", "fp32_gradients")
_ORDER = (*_FIRST, *(f for f in FIELDS if f not in _FIRST))
VALUE_OPTIONS = tuple(f for f in _ORDER if field_kind(f) != "switch")
PINNED = tuple(DEFAULT_SEARCH)  # searched unless given: the row's value is always given
SWITCH_OPTIONS = tuple(f for f in _ORDER if field_kind(f) == "switch")




def _execution_options(row: pd.Series, stack: str | None) -> list[str]:
    """The options of the row's execution that differ from what ``evaluate`` does by itself
    (the stack's defaults); the interleaving and recomputed layers, which ``evaluate`` would
    otherwise search, always."""
    defaults = resolve_execution(load_stack(stack).execution)
    out: list[str] = []
    for name in VALUE_OPTIONS:
        value = row[name]
        if name in PINNED or value != getattr(defaults, name):
            out += [flag(name), str(value.item() if hasattr(value, "item") else value)]
    for name in SWITCH_OPTIONS:
        value = bool(row[name])
        if value != getattr(defaults, name):
            out.append(flag(name) if value else "--no-" + flag(name)[2:])
    return out


def evaluate_argv(row: pd.Series, args: argparse.Namespace) -> list[str]:
    """The arguments of ``evaluate`` (after the program name) for a search row."""
    argv = ["evaluate", "--model", str(args.model), "--system", str(args.system)]
    if args.nvs is not None:
        argv += ["--nvs", str(args.nvs)]
    if getattr(args, "seq_len", None) is not None:
        argv += ["--seq-len", str(args.seq_len)]
    if getattr(args, "tokens", None) is not None:
        argv += ["--tokens", format(args.tokens, ".17g")]  # exact, 15e12 → 15000000000000
    argv += ["--gpus", str(int(row["gpus"])), "--global-batch", str(args.global_batch),
             "--strategy", str(row["strategy"])]
    for option, col in CONFIG_OPTIONS:
        if (col == "tp2" and row["strategy"] == "1d") or (col == "nb" and row["strategy"]
                                                          != "summa"):
            continue  # not a dimension of this strategy (evaluate takes 1)
        if row["strategy"] == "context":  # context parallelism: --cp, --nv-cp
            option = {"--tp2": "--cp", "--nv-tp2": "--nv-cp"}.get(option, option)
        argv += [option, str(int(row[col]))]
    if int(row.get("ep", 1)) * int(row.get("etp", 1)) > 1:  # expert layers (evaluate: 1)
        argv += ["--ep", str(int(row["ep"])), "--etp", str(int(row["etp"]))]
    argv += cost_argv(args)  # the cost columns as the search computed them
    if args.mode:
        return argv + ["--mode", args.mode]  # the paper mode has one execution
    if args.stack is not None:
        argv += ["--stack", str(args.stack)]
    return argv + _execution_options(row, args.stack)


def evaluate_command(row: pd.Series, args: argparse.Namespace) -> str:
    """The shell command, as the user called the program (``tperf`` or ``python -m model``)."""
    prog = getattr(args, "prog", "python -m model")
    return " ".join([prog, *(shlex.quote(a) for a in evaluate_argv(row, args))])
