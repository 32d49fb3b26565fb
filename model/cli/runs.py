"""The estimator's own subcommands: ``search``, ``evaluate``, ``validate`` and ``ablation``
(their parsers in :mod:`model.cli.commands`; errors as described there)."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from model.cli import format as cli_format
from model.cli import plain_json
from model.cli.args import (
    EXIT_NO_ANSWER,
    PIN_OPTIONS,
    CliError,
    load_workload,
    print_json,
)
from model.cli.costs import costs_from_args
from model.cli.options import execution_from_args
from model.cli.reproduce import evaluate_command
from model.engine.api import search_request
from model.engine.request import Request
from model.engine.rules import Problem, explain
from model.engine.search import SearchResult, evaluate_request
from model.errors import ModelError
from model.physics.strategies import TRAITS, build_strategy, supported_strategies
from model.specs.batch import critical_batch_warning
from model.specs.conformal import COVERAGE
from model.specs.hardware import System
from model.specs.modes import resolve_mode
from model.specs.stack import NONE, load_stack
from model.specs.transformer import Transformer
from model.studies.ablation import ablation
from model.validation import run_validation
from model.validation import summary as validation_summary
from model.validation.error_bars import ErrorBar, error_bar
from model.validation.user_bars import fitted_bar


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


def _stack_name(args: argparse.Namespace) -> str | None:
    """The software stack a command runs with (None: the paper mode, which takes none)."""
    if getattr(args, "mode", None) or not hasattr(args, "stack"):
        return None
    return load_stack(args.stack).name


def _error_bar(args: argparse.Namespace, model: Transformer, system: System,
               strategy: str | None = None) -> ErrorBar | None:
    """The cross-validated error bar of the command's predictions with ``strategy`` (default
    the command's ``--strategy``), from the population they belong to (dense or MoE, stack,
    system; "not validated" where none was scored, or no scored run used the strategy): none
    in the paper mode (the paper's constants) or without a stack (the system's own,
    uncalibrated, efficiencies)."""
    name = _stack_name(args)
    coverage = getattr(args, "coverage", COVERAGE)
    if name in (None, NONE):
        return None
    strategy = strategy or getattr(args, "strategy", None)
    strategy = None if strategy == "all" else strategy
    fitted = fitted_bar(args, system.name, coverage, strategy)
    return fitted or error_bar(name, model.moe, system.name, coverage=coverage,
                               strategy=strategy)


def _search_bars(args: argparse.Namespace, model: Transformer, system: System,
                 results: list[SearchResult]) -> dict[str, ErrorBar] | None:
    """The error bar of each search's strategy (None without one: see :func:`_error_bar`)."""
    if _stack_name(args) in (None, NONE):
        return None
    return {r.strategy: _error_bar(args, model, system, r.strategy)  # type: ignore[misc]
            for r in results}


RECOMPUTE_NOTE = ("note: recompute 'none' no longer implies unfused attention: with flash "
                  "attention on, the kernel keeps no scores (add --no-flash-attention for the "
                  "old meaning)")


def _recompute_note(args: argparse.Namespace) -> str:
    """The one-line note for an old reading of ``--recompute none`` ('' when it does not
    apply)."""
    asked = getattr(args, "recompute", None) or []
    flash = getattr(args, "flash_attention", None)
    return RECOMPUTE_NOTE if "none" in asked and flash is not False and not args.mode else ""


def _usable_gb(args: argparse.Namespace, system: System) -> float:
    """The HBM a configuration must fit into (GB): capacity less the stack's reserve."""
    if getattr(args, "mode", None) or not hasattr(args, "stack"):
        return system.usable_hbm_bytes / 1e9
    return load_stack(args.stack).apply(system).usable_hbm_bytes / 1e9


def _title(model: Transformer, system: System, args: argparse.Namespace) -> str:
    note = _recompute_note(args)
    return _title_line(model, system, args) + (f"\n{note}" if note else "")


def _title_line(model: Transformer, system: System, args: argparse.Namespace) -> str:
    mode = ", paper mode" if args.mode else ""
    stack = _stack_name(args)
    stack = f", stack {stack}" if stack else ""
    warning = critical_batch_warning(model, args.global_batch)
    return (f"{model.name} on {system.name} (NVLink domain {system.nvlink_domain_size}, "
            f"HBM {system.hbm_capacity_gb:g} GB), global batch {args.global_batch}{stack}"
            f"{mode}" + (f"\n{warning}" if warning else ""))


def run_search(args: argparse.Namespace) -> int:
    csv_path = _csv_target(args.csv) if args.csv else None
    model, system = load_workload(args)
    strategies = supported_strategies(model) if args.strategy == "all" else (args.strategy,)
    pins = _pins(args)
    _check_pins(strategies, pins)
    start = time.perf_counter()
    execution = execution_from_args(args, searching=True)
    if (args.gpus is None) == (args.max_gpus is None):
        raise CliError("give --gpus N[,N...] (use exactly N GPUs) or --max-gpus N (at most N)")
    # one request, built once; each search changes only its strategy and GPU count
    request = Request.build(model, system, global_batch=args.global_batch,
                            max_gpus=args.max_gpus, gpu_step=args.gpu_step,
                            strategy=tuple(strategies), mode=args.mode, pins=pins,
                            top_k=args.top, budget=args.budget, execution=execution,
                            stack=args.stack, costs=costs_from_args(args))
    # those the stack runs (model.engine.layouts: one it does not run, named alone, refused)
    strategies = tuple(request.strategy) if isinstance(request.strategy, tuple) else (
        request.strategy,)
    counts = [(n,) for n in args.gpus] if args.gpus else [()]
    results = [search_request(request.replace(strategy=s).with_workload(gpus=n))
               for s in strategies for n in counts]
    elapsed = time.perf_counter() - start
    reasons = [_no_candidates(model, r, args, system, pins) if r.candidates == 0 else None
               for r in results]
    if all(r.candidates == 0 for r in results):
        raise ModelError(next(r for r in reasons if r))
    if csv_path is not None:
        frame = pd.concat([r.top for r in results], ignore_index=True)
        _write_csv(frame, csv_path)
        print(f"wrote {len(frame)} configurations of {len(results)} searches to {csv_path}")
    elif args.json:
        meta = {"model": model.name, "system": system.name, "global_batch": args.global_batch,
                "nvlink_domain_size": system.nvlink_domain_size,
                "compat": args.mode,  # the mode under its old key: saved outputs still compare
                "max_gpus": args.max_gpus,
                "stack": _stack_name(args), "searched": results[0].searched,
                "critical_batch_warning": critical_batch_warning(model, args.global_batch)
                or None,
                "executions": [ex.to_dict() for ex in results[0].executions]}
        bars = _search_bars(args, model, system, results)
        print_json(plain_json.search_json(results, reasons, elapsed, meta, bars,
                                          _usable_gb(args, system)))
    else:
        print(cli_format.format_search_report(results, reasons, _title(model, system, args),
                                              lambda row: evaluate_command(row, args),
                                              _search_bars(args, model, system, results),
                                              _usable_gb(args, system)))
    if all(r.feasible == 0 for r in results):  # valid input, no answer: exit 3 with why
        print("no answer: no configuration fits in HBM; try more GPUs (--gpus)",
              file=sys.stderr)
        return EXIT_NO_ANSWER
    return 0


def _no_candidates(model: Transformer, r: SearchResult, args: argparse.Namespace,
                   system: System, pins: dict) -> str:
    """Why a search has no candidate at all (the first rule its pins break, or the count)."""
    paper = args.mode == "paper"
    if r.max_gpus is not None:
        return (f"no {r.strategy} configuration on at most {r.max_gpus} GPUs (in steps of "
                f"{args.gpu_step}) matches the inputs")
    relaxed = args.production_layout is False  # the production rules apply unless relaxed
    node = 0 if paper or relaxed else system.node_size
    mode = resolve_mode(paper)
    return explain(Problem(model, build_strategy(r.strategy, model, paper), r.gpus,
                           args.global_batch, equal_stages=mode.equal_pipeline_stages,
                           production_node=node, nvs=system.nvlink_domain_size, pins=pins,
                           exact_domain_fill=mode.exact_domain_fill))


def _write_csv(frame: pd.DataFrame, path: Path) -> None:
    try:
        plain_json.with_cp(frame).to_csv(path, index=False)
    except OSError as exc:
        raise CliError(f"--csv: cannot write '{path}': {exc.strerror or exc}") from None


def run_evaluate(args: argparse.Namespace) -> int:
    model, system = load_workload(args)
    pins = _pins(args)
    _check_pins((args.strategy,), pins)
    pins = {k: v for k, v in pins.items() if v is not None or k not in ("ep", "etp")}
    ev = evaluate_request(Request.build(
        model, system, global_batch=args.global_batch, gpus=args.gpus, strategy=args.strategy,
        mode=args.mode, pins=pins, top_k=1,
        execution=execution_from_args(args, searching=False), stack=args.stack,
        costs=costs_from_args(args)))
    if args.json:
        print_json({**plain_json.evaluation_json(ev, _error_bar(args, model, system),
                                                  _usable_gb(args, system)),
                    "note": _recompute_note(args) or None,
                     "stack": _stack_name(args), "critical_batch_warning":
                     critical_batch_warning(model, args.global_batch) or None})
    else:
        title = f"{_title(model, system, args)}\n{args.strategy} on {args.gpus} GPUs"
        print(cli_format.format_evaluation(ev, title, _error_bar(args, model, system),
                                           _usable_gb(args, system)))
        if args.explain:  # after the rest, which it leaves as it was
            print(f"\n{cli_format.kernel_report(ev.ops)}")
    return 0


def run_validate(args: argparse.Namespace) -> int:
    if args.set == "serving":
        return run_validate_serving(args)
    if args.set == "finetune":
        from model.cli.post_training import run_validate_finetune
        return run_validate_finetune(args)
    if args.set == "rl":
        from model.cli.post_training import run_validate_rl
        return run_validate_rl(args)
    if args.set == "kernels":
        return run_validate_kernels(args)
    sets = (("korthikanti", "measurements", "extra", "pytorch", "moe") if args.set == "all"
            else (args.set,))
    frame = run_validation(args.reference, sets)
    stats = validation_summary(frame)
    if args.json:
        print_json({"records": plain_json.records(frame),
                     "summary": plain_json.records(stats)})
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


def run_validate_kernels(args: argparse.Namespace) -> int:
    """Held-out error of the kernel layer on AIConfigurator 0.12.0's measured kernel tables
    (model/validation/kernels.py): per class × GPU × dtype, median and 90th percentile."""
    from model.validation import kernels as kv  # refits only when asked for
    from model.validation.kernels_torch import torch_error_rows
    from model.validation.kernels_training import held_out_rows

    rows = kv.join_rows(kv.kernel_error_rows(), torch_error_rows(), kv.moe_error_rows(),
                        held_out_rows())
    if args.json:
        print_json({"rows": rows, "target": {"median_pct": kv.TARGET_MEDIAN_PCT,
                                              "p90_pct": kv.TARGET_P90_PCT}})
        return 0
    print(kv.format_rows(rows))
    print(f"\n|error| % of rows held out by shape family (a fifth of the families at a time), "
          f"each priced by a refit without them; "
          f"target: median ≤ {kv.TARGET_MEDIAN_PCT:.0f} %, 90th percentile ≤ "
          f"{kv.TARGET_P90_PCT:.0f} %; '(torch)': the lead's PyTorch measurements on H100/H200, "
          f"not fitted, priced with the TensorRT-LLM tables' parameters (decode: vLLM's "
          f"FlashAttention-3 fit; the SDPA forward: training's attention model, its ρ and "
          f"key-loop depth refitted without the row's head configuration); 'training_gemm': "
          f"a linear's forward, dX and dW GEMMs measured with PyTorch on H100/H200, the fit "
          f"training uses on Hopper, one linear ((n, k) pair) held out at a time")
    return 0


def run_validate_serving(args: argparse.Namespace) -> int:
    """Predicted vs measured offline tokens/s on TensorRT-LLM's perf overview (the data the
    trtllm-1.0 serving stack is fitted to), the in-sample error and the leave-one-out errors
    the fit recorded (bench/serve_fit.py)."""
    from model.validation import serving as sv  # the serving validation only when asked for

    frame = pd.DataFrame(sv.records())
    summary = sv.summary(frame)
    if args.json:
        print_json({"records": plain_json.records(frame), "summary": summary})
        return 0
    cols = ["model", "system", "tp", "weight_precision", "input_tokens", "output_tokens",
            "output_tokens_per_s", "predicted_tokens_per_s", "error_pct"]
    print(frame[cols].to_string(index=False, float_format="%.1f"))
    print(f"\nerror % = 100·(predicted/measured − 1); stack {summary['stack']}, fitted on these "
          f"{summary['in_sample']['runs']} runs ({summary['source']})")
    print(f"in-sample mean |error| {summary['in_sample']['mean_abs_error_pct']:.1f} %, "
          f"max {summary['in_sample']['max_abs_error_pct']:.1f} %")
    for name in ("leave_one_model_out", "leave_one_gpu_out"):
        for key, row in summary.get(name, {}).items():
            print(f"{name} {key}: mean |error| {row['mean_abs_error_pct']:.1f} % over "
                  f"{row['runs']} runs")
    print("\nper population (engine trtllm-1.0 × dense/MoE × GPU generation × metric):")
    for key, metrics in summary["populations"].items():
        for metric in ("output_tokens_per_s", "ttft_s", "tpot_s"):
            row = metrics.get(metric)
            print(f"  {key:16s} {metric:20s} " + (
                f"mean |error| {row['mean_abs_error_pct']:.1f} %, max "
                f"{row['max_abs_error_pct']:.1f} %, mean {row['mean_error_pct']:+.1f} % over "
                f"{row['runs']} runs" if row else "no measurement in the fit data: not "
                                                   "validated"))
    print(summary["latency_note"])
    return 0


def run_ablation(args: argparse.Namespace) -> int:
    if args.mode:
        raise CliError("ablation compares the paper mode with every fix; drop --mode")
    model, system = load_workload(args)
    request = Request.build(model, system, global_batch=args.global_batch, gpus=args.gpus,
                            strategy=args.strategy)
    frame = ablation(request)
    if args.json:
        print_json(plain_json.records(frame))
    else:
        print(f"{_title(model, system, args)}\n{args.strategy} on {args.gpus} GPUs")
        print(frame.drop(columns=["strategy", "gpus"]).to_string(index=False, float_format="%.4g"))
    return 0
