"""What the command line's subcommands share: its errors and exit codes, the argument types
(positive integers, GPU lists, strategy names), the workload and pin options, and loading the
model and system they name (:mod:`model.cli.commands` builds the parser from them)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any, NoReturn

from model.errors import ModelError
from model.physics.strategies import canonical_strategy
from model.specs.hardware import System, load_system
from model.specs.models import load_model
from model.specs.transformer import Transformer

EXIT_USAGE = 2
EXIT_NO_ANSWER = 3  # the inputs are valid but nothing fits, or the load is unstable
EXIT_INTERNAL = 1
MAX_INT = 10**15  # far beyond any valid value; keeps numpy int64 comparisons exact
DEFAULT_GLOBAL_BATCH = 4096  # samples per iteration, as in the paper (arXiv 2410.00273)
PIN_OPTIONS = (("--tp", "tp1"), ("--tp2", "tp2"), ("--pp", "pp"), ("--dp", "dp"),
               ("--ep", "ep"), ("--etp", "etp"),
               ("--microbatch", "microbatch"), ("--nb", "nb"), ("--nv-tp1", "nv_tp1"),
               ("--nv-tp2", "nv_tp2"), ("--nv-dp", "nv_dp"), ("--nv-pp", "nv_pp"))
PIN_HELP = {
    "tp1": "tensor-parallel size (tp1: hidden features / heads)",
    "tp2": "second tensor-parallel size (tp2: SUMMA rows; summa) or context-parallel size "
           "(cp: sequence shards; context)",
    "pp": "pipeline stages", "dp": "data-parallel replicas", "microbatch": "microbatch size",
    "ep": "expert parallel size (MoE layers; ep·etp divides tp·cp·dp)",
    "etp": "expert tensor parallel size (MoE layers)",
    "nb": "SUMMA panel count (summa only)",
    "nv_tp1": "GPUs of one NVLink domain along tp1", "nv_tp2": "… along tp2 (cp)",
    "nv_dp": "… along dp", "nv_pp": "… along pp",
}


class CliError(Exception):
    """A usage error of the command line; shown as ``error: <message>``."""


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors raise :class:`CliError` instead of exiting."""

    def error(self, message: str) -> NoReturn:
        raise CliError(f"{message} (see '{self.prog} --help')")


# --- argument types ------------------------------------------------------------------------------
def positive_int(text: str) -> int:
    """An integer ≥ 1 (argparse type)."""
    try:
        value = int(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if not 1 <= value <= MAX_INT:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def positive_number(text: str) -> float:
    """A finite number ≥ 1, e.g. 1e12 (argparse type)."""
    try:
        value = float(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number like 1e12, got {text!r}") from None
    if not 1 <= value <= 1e18:  # also refuses nan and inf
        raise argparse.ArgumentTypeError(f"expected a number in [1, 1e18], got {text!r}")
    return value


def gpu_list(text: str) -> list[int]:
    """A comma-separated list of positive integers, duplicates dropped (argparse type)."""
    items = [t for t in text.split(",")]
    if not text.strip() or any(not t.strip() for t in items):
        raise argparse.ArgumentTypeError(
            f"expected a comma-separated list of positive integers, got {text!r}")
    return list(dict.fromkeys(positive_int(t) for t in items))


def strategy_name(allow_all: bool) -> Callable[[str], str]:
    """An argparse type: a strategy name or alias, canonicalized (optionally also ``all``)."""
    def parse(text: str) -> str:
        if allow_all and text.strip().lower() == "all":
            return "all"
        try:
            return canonical_strategy(text.strip())
        except ModelError as exc:
            message = str(exc)
        if allow_all:
            message = f"unknown strategy {text!r}; choose 1d, summa, context or all"
        raise argparse.ArgumentTypeError(message)
    parse.__name__ = "strategy"
    return parse


def add_workload(p: argparse.ArgumentParser, many_gpus: bool) -> None:
    p.add_argument("--model", required=True, metavar="M",
                   help="workload preset (see 'models'), a path to a .json spec, or a Hugging "
                        "Face config.json (then --seq-len is needed)")
    p.add_argument("--seq-len", type=positive_int, metavar="L",
                   help="training sequence length in tokens (replaces the model's; a Hugging "
                        "Face config does not give one)")
    p.add_argument("--tokens", type=positive_number, metavar="T",
                   help="training budget in tokens, e.g. 1e12 (replaces the model's; without "
                        "any budget the output gives days per 1T tokens)")
    p.add_argument("--system", required=True, metavar="S",
                   help="system preset (see 'systems') or a path to a .json spec")
    p.add_argument("--nvs", type=positive_int, metavar="N",
                   help="override the system's NVLink domain size (GPUs)")
    if many_gpus:  # or --max-gpus (search checks that one of them is given)
        p.add_argument("--gpus", type=gpu_list, metavar="N[,N...]",
                       help="GPU counts, comma-separated (e.g. 512,4096)")
    else:
        p.add_argument("--gpus", type=positive_int, required=True, metavar="N",
                       help="GPU count")
    p.add_argument("--global-batch", type=positive_int, default=DEFAULT_GLOBAL_BATCH,
                   metavar="B", help="global batch in samples (default: %(default)s, the paper's)")
    choices = "1d, summa, context" + (" or all (the three)" if many_gpus else "")
    p.add_argument("--strategy", type=strategy_name(many_gpus), required=True, metavar="NAME",
                   help=f"parallel strategy: {choices}; aliases 2d = summa, 2d-seqp = context")
    # --compat: the flag's old name, deprecated, kept so older commands and scripts still run
    p.add_argument("--mode", "--compat", dest="mode", choices=("paper",),
                   help="'paper' reproduces the paper's model and its bugs (docs/model.md, "
                        "'The paper mode'); --compat is its deprecated old name")


def add_pins(p: argparse.ArgumentParser, required: tuple[str, ...]) -> None:
    group = p.add_argument_group("configuration" if required else "pins (fix a dimension)")
    for flag, dest in PIN_OPTIONS:
        flags = {"tp1": (flag, "--tp1"), "tp2": (flag, "--cp"),
                 "nv_tp2": (flag, "--nv-cp")}.get(dest, (flag,))
        default = 1 if dest == "tp2" and required else None
        extra = " (default: 1)" if default == 1 else ""
        if not required and dest in ("ep", "etp"):  # evaluate: the Megatron default 1
            extra = ""
        group.add_argument(*flags, dest=dest, type=positive_int, required=dest in required,
                           default=default, metavar=dest.upper().replace("_", "-"),
                           help=PIN_HELP[dest] + extra)


def load_workload(args: argparse.Namespace) -> tuple[Transformer, System]:
    model = load_model(args.model, seq_len=args.seq_len, tokens=args.tokens)
    return model, load_system(args.system, nvlink_domain_size=args.nvs)


def print_json(obj: Any) -> None:
    print(json.dumps(obj, indent=2, allow_nan=False))
