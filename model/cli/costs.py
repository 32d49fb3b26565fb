"""Command-line options for the cost inputs (:class:`model.specs.cost.Costs`): the site,
pricing and failure inputs, and overrides of the system's power and prices."""

from __future__ import annotations

import argparse
import math
from typing import Any

# (flag, Costs field, help)
OPTIONS = (
    ("--pricing", "pricing", "rental (default: the rental price, power included) or purchase "
     "(the purchase price amortized over --amortization-years, plus electricity)"),
    ("--usd-per-gpu-hour", "usd_per_gpu_hour", "rental price, USD per GPU-hour (default: the "
     "system's)"),
    ("--purchase-usd-per-gpu", "purchase_usd_per_gpu", "purchase price per GPU, USD (default: "
     "the system's)"),
    ("--tdp-w", "tdp_w", "power of one GPU, W (default: the system's)"),
    ("--node-power-factor", "node_power_factor", "a node's power per GPU over the GPU's "
     "(default: the system's)"),
    ("--pue", "pue", "power usage effectiveness of the site (default 1.58)"),
    ("--usd-per-kwh", "usd_per_kwh", "electricity price, USD/kWh (default 0.0806)"),
    ("--amortization-years", "amortization_years", "useful life of a purchase, years "
     "(default 5)"),
    ("--failures-per-gpu-hour", "failures_per_gpu_hour", "job-stopping failures per GPU-hour "
     "(default: Llama 3's 419 in 54 days on 16,384 GPUs)"),
    ("--checkpoint-gb-per-s", "checkpoint_gb_per_s", "storage bandwidth for checkpoints, GB/s "
     "(default 2000)"),
    ("--restart-s", "restart_s", "time from a failure to training again, s (default 600)"),
)


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
            g.add_argument(flag, dest=dest, choices=("rental", "purchase"), help=text)
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
