"""Command-line options for the cost inputs (:class:`model.specs.cost.Costs`): the site,
pricing and failure inputs, and overrides of the system's power and prices."""

from __future__ import annotations

import argparse
import math
from typing import Any

from model.specs.cost import FIELDS as COST_FIELDS
from model.specs.schema import Field

COST_FIELD = {f.name: f for f in COST_FIELDS}
FLAGS = (("--pricing", "pricing"), ("--usd-per-gpu-hour", "usd_per_gpu_hour"),
         ("--purchase-usd-per-gpu", "purchase_usd_per_gpu"), ("--tdp-w", "tdp_w"),
         ("--node-power-factor", "node_power_factor"), ("--pue", "pue"),
         ("--usd-per-kwh", "usd_per_kwh"), ("--amortization-years", "amortization_years"),
         ("--failures-per-gpu-hour", "failures_per_gpu_hour"),
         ("--checkpoint-gb-per-s", "checkpoint_gb_per_s"), ("--restart-s", "restart_s"))


def field_help(field: Field) -> str:
    """A cost flag's help: its field's, with the default where the help does not give it (an
    override without a default keeps the system's value)."""
    if "default" in field.doc:
        return field.doc
    if field.default is None:
        return f"{field.doc} (default: the system's)"
    value = field.default if isinstance(field.default, str) else format(field.default, "g")
    return f"{field.doc} (default {value})"


# (flag, Costs field, help)
OPTIONS = tuple((flag, dest, field_help(COST_FIELD[dest])) for flag, dest in FLAGS)


def _number(text: str) -> float:
    try:
        value = float(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative number, got {text!r}")
    return value


def add_cost_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("cost, energy and failures (docs/model.md §15)")
    for flag, dest, text in OPTIONS:
        if dest == "pricing":
            g.add_argument(flag, dest=dest, choices=COST_FIELD[dest].choices, help=text)
        else:
            g.add_argument(flag, dest=dest, type=_number, metavar="X", help=text)


def costs_from_args(args: argparse.Namespace) -> dict[str, Any] | None:
    """The ``costs`` argument of the API from the options given (None: the defaults)."""
    given = {dest: getattr(args, dest, None) for _, dest, _ in OPTIONS}
    given = {k: v for k, v in given.items() if v is not None}
    return given or None


def cost_argv(args: argparse.Namespace) -> list[str]:
    """The cost options given, as command-line arguments (for a reproduce command)."""
    out: list[str] = []
    for flag, dest, _ in OPTIONS:
        value = getattr(args, dest, None)
        if value is not None:
            out += [flag, format(value, ".17g") if isinstance(value, float) else str(value)]
    return out
