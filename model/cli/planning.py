"""Command line of the planning questions: ``plan`` (how many GPUs, how long, how much),
``lost-node`` (the best layout as nodes are lost) and ``codesign`` (systems under a budget).

Errors follow :mod:`model.cli.commands`: one line on stderr, exit 2 for bad input.
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any

import pandas as pd

from model.cli import format as cli_format
from model.cli import plain_json
from model.cli.args import (
    DEFAULT_GLOBAL_BATCH,
    EXIT_NO_ANSWER,
    load_workload,
    positive_int,
    positive_number,
    print_json,
    strategy_name,
)
from model.cli.costs import add_cost_args, costs_from_args
from model.cli.options import add_execution_args, execution_from_args
from model.cli.reproduce import evaluate_command
from model.engine.request import Request
from model.errors import ModelError
from model.physics.strategies import supported_strategies
from model.specs.batch import critical_batch_warning
from model.specs.conformal import COVERAGE
from model.specs.execution_variants import CHOICES
from model.specs.hardware import load_system
from model.specs.models import load_model
from model.specs.stack import NONE, load_stack
from model.studies.codesign import codesign_requests
from model.studies.lost_node import DEFAULT_CLIFF_RATIO, lost_node_request
from model.studies.plan import (
    DEFAULT_MAX_GPUS,
    PlanResult,
    check_targets,
    plan_request,
    plan_strategies,
)
from model.validation.error_bars import ErrorBar, error_bar
from model.validation.user_bars import fitted_bar

CONFIG = ("gpus", "strategy", "dp", "tp1", "tp2", "cp", "pp", "microbatch", "nb", "nv_tp1",
          "nv_tp2", "nv_cp", "nv_dp", "nv_pp", "n_microbatches", "layers_per_stage", *CHOICES)


def _positive_float(text: str) -> float:
    try:
        value = float(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not (math.isfinite(value) and 0 < value < 1e15):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def _add_common(p: argparse.ArgumentParser, gpus: bool) -> None:
    p.add_argument("--model", required=True, metavar="M",
                   help="workload preset (see 'models'), a .json spec or a Hugging Face "
                        "config.json (then --seq-len)")
    p.add_argument("--seq-len", type=positive_int, metavar="L", help="training sequence length")
    p.add_argument("--tokens", type=positive_number, metavar="T",
                   help="training budget in tokens, e.g. 1e13 (replaces the model's)")
    p.add_argument("--system", required=True, metavar="S",
                   help="system preset (see 'systems') or a .json spec")
    p.add_argument("--nvs", type=positive_int, metavar="N", help="override the NVLink domain")
    if gpus:
        p.add_argument("--gpus", type=positive_int, required=True, metavar="N",
                       help="GPUs of the full job")
    p.add_argument("--global-batch", type=positive_int, default=DEFAULT_GLOBAL_BATCH,
                   metavar="B", help="global batch in samples (default: %(default)s)")
    p.add_argument("--strategy", type=strategy_name(True), default="1d", metavar="NAME",
                   help="1d (default), summa, context or all")
    add_execution_args(p, searching=True)
    add_cost_args(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(mode=None)


def add_parsers(sub: Any) -> None:
    """Register ``plan`` and ``lost-node`` (and ``codesign``) on the command line."""
    p = sub.add_parser("plan", allow_abbrev=False,
                       help="the fewest GPUs that train within D days, or the fastest within "
                            "a budget, with days, GPU-hours, cost and energy")
    _add_common(p, gpus=False)
    p.add_argument("--days", type=_positive_float, metavar="D",
                   help="train the model's budget within D days")
    p.add_argument("--budget-usd", type=_positive_float, metavar="B",
                   help="cost at most B US dollars (alone: the fastest within it)")
    p.add_argument("--gpu-step", type=positive_int, metavar="K",
                   help="GPU counts in multiples of K (default: the system's node size)")
    p.add_argument("--max-gpus", type=positive_int, default=DEFAULT_MAX_GPUS, metavar="N",
                   help="search counts up to N (default: %(default)s)")
    p.add_argument("--with-failures", action=argparse.BooleanOptionalAction, default=True,
                   help="the days with failures (checkpoints, restarts) must meet --days; "
                        "GPU-hours, cost and energy of the expected wall time (default: on; "
                        "--no-with-failures plans the failure-free days)")
    # all: the production strategies (1d, context); SUMMA, idealised, only by name
    p.set_defaults(run=run_plan, strategy="all")
    n = sub.add_parser("lost-node", allow_abbrev=False,
                       help="the best configuration as a job loses nodes (N, N - node, ...), "
                            "with the cliff marked")
    _add_common(n, gpus=True)
    n.add_argument("--lost", type=int, default=8, metavar="K",
                   help="nodes lost at most (default: %(default)s)")
    n.add_argument("--node", type=positive_int, metavar="G",
                   help="GPUs per node (default: the system's node size)")
    n.add_argument("--cliff-ratio", type=_positive_float, default=DEFAULT_CLIFF_RATIO,
                   metavar="R", help="a cliff: throughput per GPU left below R of the full "
                                     "job's (default: %(default)s)")
    n.set_defaults(run=run_lost_node)
    c = sub.add_parser("codesign", allow_abbrev=False,
                       help="the best system design under a budget: per model and combination "
                            "of varied system fields, the best cluster size it buys")
    c.add_argument("--model", required=True, type=_names, metavar="M1,M2,...",
                   help="workload presets or .json specs, comma-separated")
    c.add_argument("--system", required=True, metavar="S",
                   help="the system the designs start from (preset or .json spec)")
    c.add_argument("--nvs", type=positive_int, metavar="N", help="override the NVLink domain")
    c.add_argument("--budget-usd", required=True, type=_positive_float, metavar="B",
                   help="what the cluster may cost, USD")
    c.add_argument("--vary", required=True, action="append", type=_vary, metavar="KEY=V1,V2",
                   help="a numeric system field and its values (repeat for more fields)")
    c.add_argument("--prices", required=True, metavar="PRICES.json",
                   help='{"base_usd": ..., "<field>": {"<value>": usd, ...}} (JSON, <= 16 KB)')
    c.add_argument("--global-batch", type=_batches, default=[DEFAULT_GLOBAL_BATCH],
                   metavar="B[,B...]", help="global batch in samples: one for every model or "
                                            "one per model (default: %(default)s)")
    c.add_argument("--strategy", type=strategy_name(True), default="1d", metavar="NAME",
                   help="1d (default), summa, context or all")
    add_execution_args(c, searching=True)
    c.add_argument("--json", action="store_true", help="print one JSON object")
    c.set_defaults(run=run_codesign, mode=None)


def _names(text: str) -> list[str]:
    names = [t.strip() for t in text.split(",")]
    if not text.strip() or not all(names):
        raise argparse.ArgumentTypeError(f"expected comma-separated names, got {text!r}")
    return list(dict.fromkeys(names))


def _batches(text: str) -> list[int]:
    parts = [t for t in text.split(",")]
    if not text.strip() or any(not t.strip() for t in parts):
        raise argparse.ArgumentTypeError(f"expected B or B1,B2,..., got {text!r}")
    return [positive_int(t) for t in parts]


def _vary(text: str) -> tuple[str, list[float]]:
    """KEY=V1,V2,... (argparse type)."""
    key, sep, values = text.partition("=")
    if not sep or not key.strip() or not values.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=V1,V2,..., got {text!r}")
    try:
        numbers = [float(v) for v in values.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--vary {key.strip()}: values must be numbers, got "
                                         f"{values!r}") from None
    if not all(math.isfinite(v) for v in numbers):
        raise argparse.ArgumentTypeError(f"--vary {key.strip()}: values must be finite")
    return key.strip(), list(dict.fromkeys(numbers))


def _strategy(args: argparse.Namespace, *models: Any) -> str | tuple[str, ...]:
    """'all': the strategies that can model every model (SUMMA has no MoE/MLA table)."""
    if args.strategy != "all":
        return args.strategy
    names = supported_strategies(models[0])
    return tuple(s for s in names if all(s in supported_strategies(m) for m in models[1:]))


def run_plan(args: argparse.Namespace) -> int:
    model, system = load_workload(args)
    check_targets(args.days, args.budget_usd, model)  # before anything else, as plan() does
    request = Request.build(model, system, global_batch=args.global_batch,
                            max_gpus=args.max_gpus, gpu_step=args.gpu_step,
                            strategy=plan_strategies(model, args.strategy),
                            execution=execution_from_args(args, searching=True),
                            stack=args.stack, costs=costs_from_args(args))
    res = plan_request(request, days=args.days, budget_usd=args.budget_usd,
                       failures=args.with_failures)
    if res.row is None:  # valid input, no answer: the reason on stderr, exit 3
        print(f"no answer: {_no_answer(res, model.name)}", file=sys.stderr)
        return EXIT_NO_ANSWER
    if args.json:
        print_json(plan_json(res, model, system, args))
    else:
        print(format_plan(res, model, system, args))
    return 0


def _no_answer(res: PlanResult, name: str) -> str:
    what = " and ".join(x for x in (
        f"within {res.target_days:g} days" if res.target_days is not None else "",
        f"for at most ${res.budget_usd:,.0f}" if res.budget_usd is not None else "") if x)
    text = (f"no GPU count up to {res.max_gpus} (multiples of {res.gpu_step}) trains {name} "
            f"{what}")
    if res.per_count.empty:
        return text + "; no configuration fits at any count (more GPUs or a larger batch?)"
    fastest = res.per_count.loc[res.per_count["plan_days"].idxmin()]
    return (text + f"; the fastest takes {fastest['plan_days']:.1f} days on "
            f"{int(fastest['gpus'])} GPUs (raise --max-gpus or the global batch)")


def _fewer(res: PlanResult) -> dict[str, Any]:
    """The best of one node fewer than the answer: what shows that it is the fewest."""
    n = res.gpus - res.gpu_step
    rows = res.per_count[res.per_count["gpus"] == n]
    days = float(rows["plan_days"].iloc[0]) if len(rows) else None
    return {"gpus": n, "days": days, "cost_usd": plain_json.plain(
        float(rows["plan_cost_usd"].iloc[0])) if len(rows) else None}


def _bar(model: Any, system: Any, args: argparse.Namespace, row: Any) -> ErrorBar | None:
    """The plan's error bar: its population's (dense or MoE, stack, system) for the answer
    ``row``'s strategy, as the Plan page shows it; None without a stack."""
    stack = load_stack(args.stack).name
    coverage = getattr(args, "coverage", COVERAGE)
    if stack == NONE:
        return None
    strategy = str(row["strategy"])
    return fitted_bar(args, system.name, coverage, strategy) or error_bar(
        stack, model.moe, system.name, coverage=coverage, strategy=strategy)


def plan_json(res: PlanResult, model: Any, system: Any, args: argparse.Namespace
              ) -> dict[str, Any]:
    row = plain_json.row_dict(res.row)
    bar = _bar(model, system, args, res.row)
    return {"model": model.name, "system": system.name, "global_batch": args.global_batch,
            "target": {"days": res.target_days, "budget_usd": res.budget_usd,
                       "with_failures": res.failures},
            **res.summary(), "configuration": {k: row[k] for k in CONFIG},
            "one_node_fewer": _fewer(res) if res.gpus > res.gpu_step else None,
            "max_gpus": res.max_gpus, "counts_searched": res.counts_searched,
            "elapsed_s": res.elapsed_s, "reproduce": evaluate_command(res.row, args),
            "critical_batch_warning": critical_batch_warning(model, args.global_batch) or None,
            "budget_note": res.budget_note(args.global_batch) or None,
            "error_bar": bar.to_dict() if bar else None,
            **plain_json.fits_json(res.row, load_stack(args.stack).apply(system)
                                   .usable_hbm_bytes / 1e9, bar.coverage if bar else COVERAGE),
            "best": row}


def format_plan(res: PlanResult, model: Any, system: Any, args: argparse.Namespace) -> str:
    s, row = res.summary(), res.row
    fewer = _fewer(res) if res.gpus > res.gpu_step else None
    target = " and ".join(x for x in (
        f"within {res.target_days:g} days" + (" with failures" if res.failures else "")
        if res.target_days is not None else "",
        f"at most {cli_format.money(res.budget_usd)}" if res.budget_usd else "") if x)
    lines = [f"{model.name} on {system.name}, global batch {args.global_batch}: "
             f"{model.training_samples * model.seq_len:,.4g} tokens {target}",
             f"plan: {s['gpus']:,} GPUs ({s['gpus'] // res.gpu_step:,} x {res.gpu_step}) train "
             f"in {s['days']:.1f} days ({s['days_with_failures']:.1f} with failures)",
             f"      {cli_format.throughput_line(row)}",
             *([f"      error bar: {bar.text}"] if (bar := _bar(model, system, args, row)) else []),
             f"      {cli_format.config_line(row)}",
             f"      {cli_format.execution_line(row)}",
             f"      {_plan_cost_line(row, res.failures)}"]
    warning = critical_batch_warning(model, args.global_batch)
    if warning:
        lines.insert(1, warning)
    note = res.budget_note(args.global_batch)
    if note:
        lines.append(f"      note: {note}")
    if fewer is not None:
        days = "no configuration" if fewer["days"] is None else f"{fewer['days']:.1f} days"
        lines.append(f"      one node fewer ({fewer['gpus']:,} GPUs): {days}")
    lines += [f"      reproduce: {evaluate_command(row, args)}",
              f"searched every multiple of {res.gpu_step} up to "
              f"{res.counts_searched * res.gpu_step:,} GPUs in {res.elapsed_s:.2f} s"]
    return "\n".join(lines)


def run_lost_node(args: argparse.Namespace) -> int:
    model, system = load_workload(args)
    request = Request.build(model, system, global_batch=args.global_batch, gpus=args.gpus,
                            strategy=_strategy(args, model),
                            execution=execution_from_args(args, searching=True),
                            stack=args.stack, costs=costs_from_args(args))
    frame = lost_node_request(request, lost=args.lost, node=args.node,
                            cliff_ratio=args.cliff_ratio)
    if args.json:
        print_json({"model": model.name, "system": system.name, "gpus": args.gpus,
                     "global_batch": args.global_batch, "cliff_ratio": args.cliff_ratio,
                     "rows": plain_json.records(frame)})
        return 0
    cols = ["lost_nodes", "available_gpus", "gpus", "samples_per_s", "train_days",
            "all_used_samples_per_s", "relative_efficiency", "cliff", "tp1", "tp2", "pp", "dp",
            "microbatch"]
    print(f"{model.name} on {system.name}, {args.gpus} GPUs in nodes of "
          f"{int(frame['node_gpus'].iloc[0])}, global batch {args.global_batch}")
    print(pd.DataFrame(frame[cols]).to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    print("gpus: what the best configuration on at most the GPUs left uses; all_used: the best "
          f"using every GPU left; cliff: under {args.cliff_ratio:g} of the full job's "
          "throughput per GPU")
    return 0


def run_codesign(args: argparse.Namespace) -> int:
    vary: dict[str, list[float]] = {}
    for key, values in args.vary:
        if key in vary:
            raise ModelError(f"--vary {key} is given twice")
        vary[key] = values
    models = [load_model(name) for name in args.model]
    system = load_system(args.system, nvlink_domain_size=args.nvs)
    batches = args.global_batch * len(models) if len(args.global_batch) == 1 \
        else args.global_batch
    if len(batches) != len(models):
        raise ModelError(f"give one global batch, or one per model ({len(models)}), got "
                         f"{len(batches)}")
    strategy, execution = _strategy(args, *models), execution_from_args(args, searching=True)
    requests = [Request.build(m, system, global_batch=gbs, strategy=strategy,
                              execution=execution, stack=args.stack)
                for m, gbs in zip(models, batches)]
    res = codesign_requests(requests, args.budget_usd, vary, args.prices)
    if args.json:
        print_json({"system": system.name, "budget_usd": res.budget_usd,
                     "varied": list(res.varied), "global_batch": args.global_batch,
                     "elapsed_s": res.elapsed_s, "rows": plain_json.records(res.rows)})
        return 0
    cols = ["model", *res.varied, "price_per_gpu_usd", "max_gpus", "gpus", "samples_per_s",
            "samples_per_s_per_musd", "tp1", "pp", "dp", "microbatch", "recompute", "offload",
            "best"]
    print(f"{system.name} designs under ${res.budget_usd:,.0f}: the best cluster size each "
          f"buys ({res.elapsed_s:.1f} s)")
    print(res.rows[[c for c in cols if c in res.rows]].to_string(
        index=False, float_format=lambda v: f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.4g}"))
    return 0


def _plan_cost_line(row: pd.Series, failures: bool) -> str:
    """The cost line of the plan's row with the GPU-hours, cost and energy the plan compared
    (``plan_*``: those of the wall time with failures when it counts them), as the JSON and
    :meth:`PlanResult.summary` give them."""
    priced = row.copy()
    for name in ("gpu_hours", "cost_usd", "energy_mwh"):
        priced[name] = row[f"plan_{name}"]
    line = cli_format.cost_line(priced)
    return line + (" (GPU-hours, cost and energy of the time with failures)" if failures else "")
