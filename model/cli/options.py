"""Command-line options for the execution choices (:class:`model.specs.execution.Execution`).

``search`` and ``evaluate`` use the Python API's default: over the software stack (``--stack``,
default the newest) every interleaving and the fewest recomputed layers that fit
(:data:`~model.specs.execution.DEFAULT_SEARCH`), unless told otherwise; ``search`` tries every
combination of the lists it is given (``--recompute all``, ``--interleave 1,2,4``) and prints
what it searched. The paper mode models a single execution: these options are refused with
``--compat paper``.
"""

from __future__ import annotations

import argparse
from typing import Any

from ..errors import ModelError
from ..specs.precision import NAMES as PRECISIONS
from ..specs.stack import NONE, list_stacks


def _interleave(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected integers like 1,2,4, got '{text}'") from None
    if not values or any(v < 1 or v > 64 for v in values):
        raise argparse.ArgumentTypeError(f"interleave values must be in [1, 64], got '{text}'")
    return values


def add_execution_args(p: argparse.ArgumentParser, searching: bool) -> None:
    g = p.add_argument_group("execution (how the training stack runs a configuration)")
    g.add_argument("--stack", metavar="NAME",
                   help="software stack: its execution defaults and calibrated kernel "
                        f"efficiencies ({', '.join(list_stacks())}; '{NONE}': the system's own "
                        "values; or a .json path). Default: the newest; options below override "
                        "its defaults (see 'stacks')")
    choices = ("none", "selective", "full") + (("all",) if searching else ())
    g.add_argument("--recompute", choices=choices,
                   help="activation recompute (default: selective, i.e. flash attention's"
                        + ("; all: none, selective and full, each searched)" if searching
                           else ")"))
    g.add_argument("--recompute-layers", type=int, metavar="N",
                   help="fully recompute N layers per pipeline stage, the rest as --recompute "
                        "(Megatron's block method; default 0)")
    g.add_argument("--sequence-parallel", action=argparse.BooleanOptionalAction, default=None,
                   help="Megatron sequence parallelism for 1D/context (default: on)")
    g.add_argument("--interleave", type=_interleave, metavar="V[,V...]",
                   help="virtual pipeline stages per GPU (default: 1"
                        + ("; a list such as 1,2,4 searches each)" if searching else ")"))
    g.add_argument("--zero", type=int, choices=(0, 1, 2, 3),
                   help="ZeRO stage: 0 replicated optimizer, 1 distributed optimizer (default), "
                        "2 + gradients, 3 + weights (FSDP)")
    g.add_argument("--precision", choices=PRECISIONS,
                   help="matmul precision (default bf16; fp8, mxfp8 and nvfp4 need the "
                        "system's FP8/FP4 rate)")
    g.add_argument("--tp-overlap", action=argparse.BooleanOptionalAction, default=None,
                   help="overlap tensor-parallel collectives with the matmuls (default: off)")
    g.add_argument("--fp8-param-gather", action=argparse.BooleanOptionalAction, default=None,
                   help="with an FP8 precision, all-gather parameters in FP8 (Megatron's "
                        "--fp8-param-gather; default: off, on in Megatron-Bridge stacks)")
    g.add_argument("--flash-attention", action=argparse.BooleanOptionalAction, default=None,
                   help="fused attention (default: on)")
    g.add_argument("--fp32-gradients", action=argparse.BooleanOptionalAction, default=None,
                   help="accumulate and reduce gradients in fp32 (Megatron main_grad)")
    g.add_argument("--offload", choices=("none", "optimizer", "activations", "weights", "all"),
                   help="keep these in the host memory tier (the system's host_* figures)")
    g.add_argument("--offload-layers", type=int, metavar="N",
                   help="without --offload activations: move N layers' activations of each "
                        "pipeline stage to host memory (Megatron's cpu_offloading_num_layers; "
                        "default 0)")
    g.add_argument("--production-layout", action=argparse.BooleanOptionalAction, default=None,
                   help="only layouts a production stack runs: tensor parallelism inside one "
                        "NVLink domain, whole nodes (default: on; --no-production-layout also "
                        "tries TP across domains and partial nodes; model/explore/production.py)")
    g.add_argument("--context-attention", choices=("allgather", "ring"),
                   help="context parallelism (--cp): gather K/V, or ring attention (overlapped)")


def execution_from_args(args: argparse.Namespace, searching: bool) -> dict[str, Any] | None:
    """The ``execution`` argument for search/evaluate (None: the default execution)."""
    given = {"sequence_parallel": args.sequence_parallel, "zero": args.zero,
             "precision": args.precision, "tp_overlap": args.tp_overlap,
             "flash_attention": args.flash_attention, "fp32_gradients": args.fp32_gradients,
             "context_attention": args.context_attention, "offload": args.offload,
             "recompute_layers": args.recompute_layers, "offload_layers": args.offload_layers,
             "fp8_param_gather": args.fp8_param_gather,
             "production_layout": args.production_layout}
    given = {k: v for k, v in given.items() if v is not None}
    recompute, interleave = args.recompute, args.interleave
    if args.compat == "paper":
        if given or recompute or interleave or args.stack:
            raise ModelError("--compat paper models one execution with the paper's constants; "
                             "drop the execution options and --stack")
        return None
    if recompute == "all":
        recompute = ["none", "selective", "full"]
    if args.recompute_layers and not recompute:
        recompute = "selective"  # partial recompute sits on selective, not on full
    if recompute:
        given["recompute"] = recompute
    if interleave:
        if len(interleave) > 1 and not searching:
            raise ModelError("evaluate takes one --interleave value")
        given["interleave"] = interleave if len(interleave) > 1 else interleave[0]
    return given or None
