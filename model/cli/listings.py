"""The listing commands: ``systems``, ``models`` and ``stacks`` (every preset, as a table or
JSON)."""

from __future__ import annotations

import argparse
import json
import textwrap
from typing import Any

import pandas as pd

from model.cli.plain_json import plain
from model.specs.hardware import System, list_systems, load_system
from model.specs.models import load_model
from model.specs.stack import Stack, default_stack_name, list_stacks, load_stack
from model.specs.transformer import Transformer, list_models
from model.validation.error_bars import error_bar

WIDTH = 100  # columns of the stacks listing


def _print_json(obj: Any) -> None:
    print(json.dumps(obj, indent=2, allow_nan=False))


def system_info(system: System) -> dict[str, Any]:
    """Every field of a system spec (for ``systems --json``)."""
    return {k: plain(v) for k, v in system.to_dict().items()}


def model_info(model: Transformer) -> dict[str, Any]:
    """Every field of a workload spec plus its parameter count (for ``models --json``)."""
    info = {k: plain(v) for k, v in model.to_dict().items()}
    info["params"] = int(model.params)
    info["params_b"] = model.params / 1e9
    return info


def format_systems(systems: list[System]) -> str:
    table = pd.DataFrame({
        "name": [s.name for s in systems],
        "gpu": [s.gpu for s in systems],
        "matrix TFLOP/s": [s.matrix_tflops_fp16 for s in systems],
        "HBM GB": [s.hbm_capacity_gb for s in systems],
        "HBM GB/s": [s.hbm_bandwidth_gb_per_s for s in systems],
        "NVLink domain": [s.nvlink_domain_size for s in systems],
        "NVLink GB/s": [s.nvlink_bandwidth_gb_per_s for s in systems],
        "NIC GB/s per GPU": [s.nic_bandwidth_gb_per_s * s.nics_per_gpu for s in systems],
    })
    return table.to_string(index=False, float_format=lambda v: f"{v:g}")


def format_models(models: list[Transformer]) -> str:
    table = pd.DataFrame({
        "name": [m.name for m in models],
        "layers": [m.layers for m in models],
        "hidden": [m.hidden for m in models],
        "heads": [m.heads for m in models],
        "kv_heads": [m.kv_heads for m in models],
        "seq": [m.seq_len for m in models],
        "vocab": [m.vocab for m in models],
        "params (B)": [f"{m.params / 1e9:.1f}" for m in models],
    })
    return table.to_string(index=False)


def stack_info(stack: Stack) -> dict[str, Any]:
    """A stack preset with whether it is the default and its cross-validated error bar."""
    return {**stack.to_dict(), "default": stack.name == default_stack_name(),
            "error_bar": error_bar(stack.name).to_dict(),
            "moe_error_bar": error_bar(stack.name, moe=True).to_dict()}


def _efficiencies(stack: Stack) -> str:
    return "; ".join(f"{gpu} " + ", ".join(f"{k} {v:.3g}" for k, v in table.items())
                     for gpu, table in stack.gemm_efficiency.items()) or "-"


def format_stacks(stacks: list[Stack]) -> str:
    """One block per stack: release, what it sets, its GEMM efficiencies and error bar."""
    blocks = []
    for s in stacks:
        default = " (default)" if s.name == default_stack_name() else ""
        sets = ", ".join(f"{k} {v}" for k, v in s.execution.items()) or "-"
        lines = [s.description, f"source: {s.source}", f"execution defaults: {sets}",
                 f"GEMM efficiency (fraction of peak): {_efficiencies(s)}",
                 f"predictions: {error_bar(s.name).text}; mixture of experts: "
                 f"{error_bar(s.name, moe=True).text}"]
        blocks.append("\n".join([f"{s.name}{default}: released {s.released}", *(
            textwrap.fill(line, WIDTH, initial_indent="  ", subsequent_indent="    ",
                          break_on_hyphens=False)
            for line in lines if line)]))
    return "\n\n".join(blocks)


def run_systems(args: argparse.Namespace) -> int:
    systems = [load_system(name) for name in list_systems()]
    if args.json:
        _print_json([system_info(s) for s in systems])
    else:
        print(format_systems(systems))
    return 0


def run_models(args: argparse.Namespace) -> int:
    models = [load_model(name) for name in list_models()]
    if args.json:
        _print_json([model_info(m) for m in models])
    else:
        print(format_models(models))
    return 0


def run_stacks(args: argparse.Namespace) -> int:
    stacks = [load_stack(name) for name in list_stacks()]
    if args.json:
        _print_json([stack_info(s) for s in stacks])
    else:
        print(format_stacks(stacks))
    return 0


def add_listings(sub: Any) -> None:
    """The ``systems``, ``models`` and ``stacks`` subcommands."""
    for name, run, what in (("systems", run_systems, "system"), ("models", run_models, "model"),
                            ("stacks", run_stacks, "software stack")):
        p = sub.add_parser(name, allow_abbrev=False, help=f"list the {what} presets")
        p.add_argument("--json", action="store_true", help="print a JSON list")
        p.set_defaults(run=run)
