"""Command line: ``tperf {search,evaluate,validate,ablation,systems,models,stacks} ...`` once
installed (``pip install .``), or ``python -m model ...`` from a checkout.

Other tools rely on the options and on the ``--json`` output (see ``python -m model <cmd> --help``).
Any bad input (usage, numbers, files, presets, pins, budget) prints ONE line ``error: ...`` on
stderr and exits 2; an unexpected exception prints ``error: internal error: ...`` and exits 1;
valid input with no answer (nothing fits, no GPU count meets the target, a saturated load)
prints ``no answer: ...`` on stderr and exits 3 (docs/cli.md, "Exit codes"). Never a traceback.
"""

from __future__ import annotations

import os
import sys

from model import __version__
from model.cli.args import (
    EXIT_INTERNAL,
    EXIT_USAGE,
    CliError,
    Parser,
    add_pins,
    add_workload,
    positive_int,
)
from model.cli.costs import add_cost_args
from model.cli.listings import add_listings
from model.cli.options import add_execution_args
from model.cli.planning import add_parsers
from model.cli.post_training import add_post_training
from model.cli.runs import run_ablation, run_evaluate, run_search, run_validate
from model.cli.serve import add_serve
from model.cli.user_fit import run_calibrate
from model.errors import ModelError
from model.specs.workload import DEFAULT_BUDGET


def build_parser(prog: str = "python -m model") -> Parser:
    parser = Parser(prog=prog, allow_abbrev=False,
                    description="Analytical estimator of transformer training performance.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    s = sub.add_parser("search", allow_abbrev=False,
                       help="fastest configurations that fit in HBM, per strategy and GPU count")
    add_workload(s, many_gpus=True)
    add_pins(s, required=())
    add_execution_args(s, searching=True)
    s.add_argument("--top", type=positive_int, default=10, metavar="K",
                   help="configurations kept per search (default: %(default)s)")
    s.add_argument("--budget", type=positive_int, default=DEFAULT_BUDGET, metavar="N",
                   help="refuse a search of more candidates than this (default: %(default)s)")
    s.add_argument("--max-gpus", type=positive_int, metavar="N",
                   help="instead of --gpus: the best configurations using at most N GPUs (the "
                        "rest idle), each saying how many it uses")
    s.add_argument("--gpu-step", type=positive_int, default=1, metavar="K",
                   help="with --max-gpus: GPU counts in steps of K (default: %(default)s)")
    add_cost_args(s)
    out = s.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print one JSON object")
    out.add_argument("--csv", metavar="PATH", help="write every top row of every search to PATH")
    s.set_defaults(run=run_search)
    e = sub.add_parser("evaluate", allow_abbrev=False,
                       help="one configuration: throughput, memory, per-op breakdown")
    add_workload(e, many_gpus=False)
    add_pins(e, required=("tp1", "pp", "dp", "microbatch"))
    add_execution_args(e, searching=False)
    add_cost_args(e)
    e.add_argument("--json", action="store_true", help="print one JSON object")
    e.add_argument("--explain", action="store_true",
                   help="also print each op's kernel time and the FLOP and HBM efficiencies it "
                        "implies (with --json these columns are always in the ops records)")
    e.set_defaults(run=run_evaluate)
    v = sub.add_parser("validate", allow_abbrev=False,
                       help="predicted vs measured for published runs, with error statistics")
    v.add_argument("--reference", metavar="DIR",
                   help="folder with korthikanti_validation.json and measurements.json "
                        "(default: the published runs in the package, model/data/reference)")
    v.add_argument("--set", choices=("all", "korthikanti", "measurements", "extra", "pytorch",
                                     "moe", "serving", "finetune", "rl", "kernels"),
                   default="all", help="extra: Megatron-Bridge 25.09/26.02 runs, held out; "
                                       "pytorch: llm-foundry A100 and torchtitan H100 runs; "
                                       "moe: its DeepSeek-V3 and Qwen3-235B runs; serving: "
                                       "TensorRT-LLM's offline throughput (the serving fit); "
                                       "finetune: Megatron-Bridge's SFT and LoRA runs; "
                                       "rl: NeMo-RL's GRPO step times; "
                                       "kernels: the kernel layer's held-out error on "
                                       "AIConfigurator's measured kernel tables and on "
                                       "our PyTorch training GEMMs")
    v.add_argument("--json", action="store_true", help="print the records and the summary")
    v.set_defaults(run=run_validate)
    a = sub.add_parser("ablation", allow_abbrev=False,
                       help="what each of the paper's bugs changes: one search per fix")
    add_workload(a, many_gpus=False)
    a.add_argument("--json", action="store_true", help="print a JSON list of rows")
    a.set_defaults(run=run_ablation)
    c = sub.add_parser("calibrate", allow_abbrev=False,
                       help="fit a stack's GEMM efficiency per GPU to your measured runs")
    c.add_argument("--runs", required=True, metavar="RUNS.json",
                   help="measured runs (docs/stacks.md: schema)")
    c.add_argument("--base", default=None, metavar="STACK",
                   help="the stack the fit starts from (default: the newest preset)")
    c.add_argument("--out", required=True, metavar="STACK.json", help="where to write the stack")
    c.add_argument("--fit", default=None, metavar="GPU[,GPU]",
                   help="the systems whose efficiency to fit (default: every system of the runs)")
    c.set_defaults(run=run_calibrate)
    add_parsers(sub)
    add_serve(sub)
    add_post_training(sub)
    add_listings(sub)
    return parser


# --- entry point ---------------------------------------------------------------------------------
def _fail(message: str, code: int) -> int:
    print("error: " + " ".join(message.split()), file=sys.stderr)
    return code


def main(argv: list[str] | None = None, prog: str = "python -m model") -> int:
    """Run the command line; returns the exit code (0 ok, 2 bad input, 3 no answer, 1 internal
    error).

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
