"""Command line: ``tperf {search,evaluate,validate,ablation,systems,models,stacks} ...`` once
installed (``pip install .``), or ``python -m model ...`` from a checkout.

Other tools rely on the options and on the ``--json`` output (see ``python -m model <cmd> --help``).
Any bad input (usage, numbers, files, presets, pins, budget) prints ONE line ``error: ...`` on
stderr and exits 2; an unexpected exception prints ``error: internal error: ...`` and exits 1.
Never a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

import pandas as pd

from .. import __version__
from ..errors import ModelError
from ..explore.ablation import ablation
from ..explore.rules import explain
from ..explore.search import DEFAULT_BUDGET, evaluate, search
from ..physics.strategies import (
    TRAITS,
    build_strategy,
    canonical_strategy,
    supported_strategies,
)
from ..specs.hardware import System, load_system
from ..specs.stack import NONE, load_stack
from ..specs.transformer import Transformer, load_model
from ..validation import run_validation
from ..validation import summary as validation_summary
from ..validation.error_bars import ErrorBar, error_bar
from . import format as cli_format
from .listings import add_listings
from .options import add_execution_args, execution_from_args
from .reproduce import evaluate_command

EXIT_USAGE = 2
EXIT_INTERNAL = 1
MAX_INT = 10**15  # far beyond any valid value; keeps numpy int64 comparisons exact
DEFAULT_GLOBAL_BATCH = 4096  # samples per iteration, as in the paper (arXiv 2410.00273)
PIN_OPTIONS = (("--tp", "tp1"), ("--tp2", "tp2"), ("--pp", "pp"), ("--dp", "dp"),
               ("--ep", "ep"), ("--etp", "etp"),
               ("--microbatch", "microbatch"), ("--nb", "nb"), ("--nv-tp1", "nv_tp1"),
               ("--nv-tp2", "nv_tp2"), ("--nv-dp", "nv_dp"), ("--nv-pp", "nv_pp"))
PIN_HELP = {
    "tp1": "tensor-parallel size (tp1: hidden features / heads)",
    "tp2": "second tensor-parallel size (tp2: SUMMA rows / context sequence); summa, context",
    "pp": "pipeline stages", "dp": "data-parallel replicas", "microbatch": "microbatch size",
    "ep": "expert parallel size (MoE layers; ep·etp divides tp·cp·dp)",
    "etp": "expert tensor parallel size (MoE layers)",
    "nb": "SUMMA panel count (summa only)",
    "nv_tp1": "GPUs of one NVLink domain along tp1", "nv_tp2": "… along tp2",
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


# --- parser --------------------------------------------------------------------------------------
def _add_workload(p: argparse.ArgumentParser, many_gpus: bool) -> None:
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
    if many_gpus:
        p.add_argument("--gpus", type=gpu_list, required=True, metavar="N[,N...]",
                       help="GPU counts, comma-separated (e.g. 512,4096)")
    else:
        p.add_argument("--gpus", type=positive_int, required=True, metavar="N",
                       help="GPU count")
    p.add_argument("--global-batch", type=positive_int, default=DEFAULT_GLOBAL_BATCH,
                   metavar="B", help="global batch in samples (default: %(default)s, the paper's)")
    choices = "1d, summa, context" + (" or all (the three)" if many_gpus else "")
    p.add_argument("--strategy", type=strategy_name(many_gpus), required=True, metavar="NAME",
                   help=f"parallel strategy: {choices}; aliases 2d = summa, 2d-seqp = context")
    p.add_argument("--compat", choices=("paper",),
                   help="'paper' reproduces the paper's model and its bugs (docs/model.md, "
                        "'The paper mode')")


def _add_pins(p: argparse.ArgumentParser, required: tuple[str, ...]) -> None:
    group = p.add_argument_group("configuration" if required else "pins (fix a dimension)")
    for flag, dest in PIN_OPTIONS:
        flags = {"tp1": (flag, "--tp1"), "tp2": (flag, "--cp")}.get(dest, (flag,))
        default = 1 if dest == "tp2" and required else None
        extra = " (default: 1)" if default == 1 else ""
        if not required and dest in ("ep", "etp"):  # evaluate: the Megatron default 1
            extra = ""
        group.add_argument(*flags, dest=dest, type=positive_int, required=dest in required,
                           default=default, metavar=dest.upper().replace("_", "-"),
                           help=PIN_HELP[dest] + extra)


def build_parser(prog: str = "python -m model") -> Parser:
    parser = Parser(prog=prog, allow_abbrev=False,
                    description="Analytical estimator of transformer training performance.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    s = sub.add_parser("search", allow_abbrev=False,
                       help="fastest configurations that fit in HBM, per strategy and GPU count")
    _add_workload(s, many_gpus=True)
    _add_pins(s, required=())
    add_execution_args(s, searching=True)
    s.add_argument("--top", type=positive_int, default=10, metavar="K",
                   help="configurations kept per search (default: %(default)s)")
    s.add_argument("--budget", type=positive_int, default=DEFAULT_BUDGET, metavar="N",
                   help="refuse a search of more candidates than this (default: %(default)s)")
    out = s.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print one JSON object")
    out.add_argument("--csv", metavar="PATH", help="write every top row of every search to PATH")
    s.set_defaults(run=run_search)
    e = sub.add_parser("evaluate", allow_abbrev=False,
                       help="one configuration: throughput, memory, per-op breakdown")
    _add_workload(e, many_gpus=False)
    _add_pins(e, required=("tp1", "pp", "dp", "microbatch"))
    add_execution_args(e, searching=False)
    e.add_argument("--json", action="store_true", help="print one JSON object")
    e.set_defaults(run=run_evaluate)
    v = sub.add_parser("validate", allow_abbrev=False,
                       help="predicted vs measured for published runs, with error statistics")
    v.add_argument("--reference", metavar="DIR",
                   help="folder with korthikanti_validation.json and measurements.json "
                        "(default: the published runs in the package, model/data/reference)")
    v.add_argument("--set", choices=("all", "korthikanti", "measurements", "extra", "moe"),
                   default="all", help="extra: Megatron-Bridge 25.09/26.02 runs, held out; moe: "
                                       "its DeepSeek-V3 and Qwen3-235B runs")
    v.add_argument("--json", action="store_true", help="print the records and the summary")
    v.set_defaults(run=run_validate)
    a = sub.add_parser("ablation", allow_abbrev=False,
                       help="what each of the paper's bugs changes: one search per fix")
    _add_workload(a, many_gpus=False)
    a.add_argument("--json", action="store_true", help="print a JSON list of rows")
    a.set_defaults(run=run_ablation)
    add_listings(sub)
    return parser


# --- commands ------------------------------------------------------------------------------------
def _load(args: argparse.Namespace) -> tuple[Transformer, System]:
    model = load_model(args.model, seq_len=args.seq_len, tokens=args.tokens)
    return model, load_system(args.system, nvlink_domain_size=args.nvs)


def _pins(args: argparse.Namespace) -> dict[str, int | None]:
    return {dest: getattr(args, dest) for _, dest in PIN_OPTIONS}


def _check_pins(strategies: Sequence[str], pins: dict[str, int | None]) -> None:
    """Refuse pins a strategy would silently ignore (it has no such dimension)."""
    with_tp2 = tuple(name for name, t in TRAITS.items() if t.has_tp2)
    with_panels = tuple(name for name, t in TRAITS.items() if t.has_panels)
    for s in strategies:
        for dest, owners in (("tp2", with_tp2), ("nb", with_panels)):
            if pins.get(dest) not in (None, 1) and s not in owners:
                raise CliError(f"--{dest} applies to {' and '.join(owners)} only; "
                               f"the {s} strategy has {dest} = 1")


def _csv_target(text: str) -> Path:
    path = Path(text)
    if not path.parent.is_dir():
        raise CliError(f"--csv: directory '{path.parent}' does not exist")
    if path.is_dir():
        raise CliError(f"--csv: '{path}' is a directory")
    return path


def _print_json(obj: Any) -> None:
    print(json.dumps(obj, indent=2, allow_nan=False))


def _stack_name(args: argparse.Namespace) -> str | None:
    """The software stack a command runs with (None: the paper mode, which takes none)."""
    if getattr(args, "compat", None) or not hasattr(args, "stack"):
        return None
    return load_stack(args.stack).name


def _error_bar(args: argparse.Namespace, model: Transformer) -> ErrorBar | None:
    """The cross-validated error bar of the command's predictions: none in the paper mode (the
    paper's constants) or without a stack (the system's own, uncalibrated, efficiencies)."""
    name = _stack_name(args)
    return None if name in (None, NONE) else error_bar(name, model.moe)


def _title(model: Transformer, system: System, args: argparse.Namespace) -> str:
    compat = ", paper compat" if args.compat else ""
    stack = _stack_name(args)
    stack = f", stack {stack}" if stack else ""
    return (f"{model.name} on {system.name} (NVLink domain {system.nvlink_domain_size}, "
            f"HBM {system.hbm_capacity_gb:g} GB), global batch {args.global_batch}{stack}"
            f"{compat}")


def run_search(args: argparse.Namespace) -> int:
    csv_path = _csv_target(args.csv) if args.csv else None
    model, system = _load(args)
    strategies = supported_strategies(model) if args.strategy == "all" else (args.strategy,)
    pins = _pins(args)
    _check_pins(strategies, pins)
    start = time.perf_counter()
    execution = execution_from_args(args, searching=True)
    results = [search(model, system, n, args.global_batch, s, compat=args.compat, pins=pins,
                      top_k=args.top, budget=args.budget, execution=execution, stack=args.stack)
               for s in strategies for n in args.gpus]
    elapsed = time.perf_counter() - start
    paper = args.compat == "paper"
    reasons = [explain(model, build_strategy(r.strategy, model, paper), r.gpus, args.global_batch,
                       system.nvlink_domain_size, pins, paper) if r.candidates == 0 else None
               for r in results]
    if all(r.candidates == 0 for r in results):
        raise ModelError(next(r for r in reasons if r))
    if csv_path is not None:
        frame = pd.concat([r.top for r in results], ignore_index=True)
        _write_csv(frame, csv_path)
        print(f"wrote {len(frame)} configurations of {len(results)} searches to {csv_path}")
    elif args.json:
        meta = {"model": model.name, "system": system.name, "global_batch": args.global_batch,
                "nvlink_domain_size": system.nvlink_domain_size, "compat": args.compat,
                "stack": _stack_name(args), "searched": results[0].searched,
                "executions": [ex.to_dict() for ex in results[0].executions]}
        bar = _error_bar(args, model)
        _print_json(cli_format.search_json(results, reasons, elapsed, meta, bar))
    else:
        print(cli_format.format_search_report(results, reasons, _title(model, system, args),
                                              lambda row: evaluate_command(row, args),
                                              _error_bar(args, model)))
    return 0


def _write_csv(frame: pd.DataFrame, path: Path) -> None:
    try:
        frame.to_csv(path, index=False)
    except OSError as exc:
        raise CliError(f"--csv: cannot write '{path}': {exc.strerror or exc}") from None


def run_evaluate(args: argparse.Namespace) -> int:
    model, system = _load(args)
    pins = _pins(args)
    _check_pins((args.strategy,), pins)
    pins = {k: v for k, v in pins.items() if v is not None or k not in ("ep", "etp")}
    ev = evaluate(model, system, args.gpus, args.global_batch, args.strategy, compat=args.compat,
                  execution=execution_from_args(args, searching=False), stack=args.stack,
                  **pins)
    if args.json:
        _print_json({**cli_format.evaluation_json(ev, _error_bar(args, model)),
                     "stack": _stack_name(args)})
    else:
        title = f"{_title(model, system, args)}\n{args.strategy} on {args.gpus} GPUs"
        print(cli_format.format_evaluation(ev, title, _error_bar(args, model)))
    return 0


def run_validate(args: argparse.Namespace) -> int:
    sets = ("korthikanti", "measurements", "extra", "moe") if args.set == "all" else (args.set,)
    frame = run_validation(args.reference, sets)
    stats = validation_summary(frame)
    if args.json:
        _print_json({"records": cli_format.records(frame),
                     "summary": cli_format.records(stats)})
        return 0
    done = frame[frame["skipped"] == ""]
    cols = ["id", "set", "metric", "measured", "predicted", "error_pct", "peer_error_pct",
            "uncertain"]
    print(done[cols].to_string(index=False, float_format="%.2f"))
    skipped = frame[frame["skipped"] != ""]
    if len(skipped):
        print(f"\nskipped ({len(skipped)}):")
        for row in skipped.itertuples():
            print(f"  {row.id}: {row.skipped}")
    print("\nerror % = 100·(1 − predicted/measured); peer = Calculon's published prediction")
    print(stats.to_string(index=False, float_format="%.2f"))
    return 0


def run_ablation(args: argparse.Namespace) -> int:
    if args.compat:
        raise CliError("ablation compares the paper mode with every fix; drop --compat")
    model, system = _load(args)
    frame = ablation(model, system, args.gpus, args.global_batch, args.strategy)
    if args.json:
        _print_json(cli_format.records(frame))
    else:
        print(f"{_title(model, system, args)}\n{args.strategy} on {args.gpus} GPUs")
        print(frame.drop(columns=["strategy", "gpus"]).to_string(index=False, float_format="%.4g"))
    return 0


# --- entry point ---------------------------------------------------------------------------------
def _fail(message: str, code: int) -> int:
    print("error: " + " ".join(message.split()), file=sys.stderr)
    return code


def main(argv: list[str] | None = None, prog: str = "python -m model") -> int:
    """Run the command line; returns the exit code (0 ok, 2 bad input, 1 internal error).

    ``prog`` is how the user called it (in usage lines and in printed commands)."""
    try:
        args = build_parser(prog).parse_args(argv)
        args.prog = prog
        return int(args.run(args))
    except (CliError, ModelError) as exc:
        return _fail(str(exc), EXIT_USAGE)
    except SystemExit as exc:  # --help / --version
        return exc.code if isinstance(exc.code, int) else 0
    except KeyboardInterrupt:
        return _fail("interrupted", 130)
    except BrokenPipeError:  # e.g. piped into head: stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_INTERNAL
    except Exception as exc:  # noqa: BLE001 - the promise is: never a traceback
        return _fail(f"internal error: {type(exc).__name__}: {exc}", EXIT_INTERNAL)


def console() -> int:
    """The installed console command ``tperf`` (pyproject.toml's ``[project.scripts]``)."""
    return main(prog="tperf")
