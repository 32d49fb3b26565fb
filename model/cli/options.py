"""Command-line options for the execution choices (:class:`model.specs.execution.Execution`).

``search`` searches recompute (selective, full) and interleaving (1, 2) unless they are given;
``evaluate`` uses one value each (the defaults of :class:`~model.specs.execution.Execution`). The
paper mode models a single execution: these options are refused with ``--compat paper``.
"""

from __future__ import annotations

import argparse
from typing import Any

from ..errors import ModelError
from ..specs.precision import NAMES as PRECISIONS

SEARCHED = {"recompute": ["selective", "full"], "interleave": [1, 2]}


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
    choices = ("none", "selective", "full") + (("all",) if searching else ())
    g.add_argument("--recompute", choices=choices,
                   help="activation recompute (search default: selective and full; "
                        "evaluate default: selective, i.e. flash attention)")
    g.add_argument("--recompute-layers", type=int, metavar="N",
                   help="fully recompute N layers per pipeline stage, the rest as --recompute "
                        "(Megatron's block method; default 0)")
    g.add_argument("--sequence-parallel", action=argparse.BooleanOptionalAction, default=None,
                   help="Megatron sequence parallelism for 1D/context (default: on)")
    g.add_argument("--interleave", type=_interleave, metavar="V[,V...]",
                   help="virtual pipeline stages per GPU (search default: 1,2; evaluate: 1)")
    g.add_argument("--zero", type=int, choices=(0, 1, 2, 3),
                   help="ZeRO stage: 0 replicated optimizer, 1 distributed optimizer (default), "
                        "2 + gradients, 3 + weights (FSDP)")
    g.add_argument("--precision", choices=PRECISIONS,
                   help="matmul precision (default bf16; fp8, mxfp8 and nvfp4 need the "
                        "system's FP8/FP4 rate)")
    g.add_argument("--tp-overlap", action=argparse.BooleanOptionalAction, default=None,
                   help="overlap tensor-parallel collectives with the matmuls (default: off)")
    g.add_argument("--flash-attention", action=argparse.BooleanOptionalAction, default=None,
                   help="fused attention (default: on)")
    g.add_argument("--fp32-gradients", action=argparse.BooleanOptionalAction, default=None,
                   help="accumulate and reduce gradients in fp32 (Megatron main_grad)")
    g.add_argument("--offload", choices=("none", "optimizer", "activations", "weights", "all"),
                   help="keep these in the host memory tier (the system's host_* figures)")
    g.add_argument("--context-attention", choices=("allgather", "ring"),
                   help="context parallelism (--cp): gather K/V, or ring attention (overlapped)")


def execution_from_args(args: argparse.Namespace, searching: bool) -> dict[str, Any] | None:
    """The ``execution`` argument for search/evaluate (None: the default execution)."""
    given = {"sequence_parallel": args.sequence_parallel, "zero": args.zero,
             "precision": args.precision, "tp_overlap": args.tp_overlap,
             "flash_attention": args.flash_attention, "fp32_gradients": args.fp32_gradients,
             "context_attention": args.context_attention, "offload": args.offload,
             "recompute_layers": args.recompute_layers}
    given = {k: v for k, v in given.items() if v is not None}
    recompute, interleave = args.recompute, args.interleave
    if args.compat == "paper":
        if given or recompute or interleave:
            raise ModelError("--compat paper models one execution; drop the execution options")
        return None
    if recompute == "all":
        recompute = ["none", "selective", "full"]
    if args.recompute_layers and not recompute:
        recompute = "selective"  # partial recompute sits on selective, not on full
    if searching:
        given["recompute"] = recompute or SEARCHED["recompute"]
        given["interleave"] = interleave or SEARCHED["interleave"]
    else:
        if recompute:
            given["recompute"] = recompute
        if interleave:
            if len(interleave) > 1:
                raise ModelError("evaluate takes one --interleave value")
            given["interleave"] = interleave[0]
    return given or None
