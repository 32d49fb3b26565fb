"""``python -m model calibrate``: a stack fitted to the user's runs (model.validation.user_runs)."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np

from model.errors import ModelError
from model.specs.conformal import COVERAGE, score
from model.specs.stack import load_stack
from model.validation.user_bars import SCORES, scores_bar
from model.validation.user_runs import calibrate_runs, fitted_stack, read_runs


def _pct(measured: float, predicted: float) -> float:
    return 100.0 * (1.0 - predicted / measured)


def run_calibrate(args: argparse.Namespace) -> int:
    base = load_stack(args.base)
    cases = read_runs(args.runs, base.name)
    systems = [s.strip() for s in args.fit.split(",") if s.strip()] if args.fit else None
    result = calibrate_runs(cases, systems)
    name = Path(args.out).stem
    stack = fitted_stack(base, name, result["efficiency"])
    scores: dict[str, list[float]] = {}
    for r in result["runs"]:
        if math.isfinite(r["leave_one_out_s"]):
            scores.setdefault(r["system"], []).append(
                round(score(r["leave_one_out_s"], r["measured_s"]), 6))
    data = {**stack.to_dict(), "calibration": {
        "name": name, "runs": len(cases), SCORES: scores,
        "note": "leave-one-out scores |ln(predicted/measured)| per system: the interval every "
                "command using this stack prints"}}
    try:
        Path(args.out).write_text(json.dumps(data, indent=2) + "\n")
    except OSError as exc:
        raise ModelError(f"cannot write '{args.out}': {exc.strerror}") from None
    print(f"fitted on {len(cases)} runs from stack {base.name}:")
    for system, eta in result["efficiency"].items():
        n = sum(r["system"] == system for r in result["runs"])
        print(f"  {system}: GEMM efficiency {eta:.3f} of the BF16 peak ({n} runs)")
    ins = [abs(_pct(r["measured_s"], r["in_sample_s"])) for r in result["runs"]]
    loo = [abs(_pct(r["measured_s"], r["leave_one_out_s"])) for r in result["runs"]
           if not np.isnan(r["leave_one_out_s"])]
    print(f"in-sample |error|: mean {np.mean(ins):.1f} %, max {np.max(ins):.1f} %")
    if loo:
        print(f"leave-one-out |error|: mean {np.mean(loo):.1f} %, max {np.max(loo):.1f} % "
              f"({len(loo)} runs)")
    single = sorted({r["system"] for r in result["runs"]} - {
        r["system"] for r in result["runs"] if not np.isnan(r["leave_one_out_s"])})
    if single:
        print(f"no leave-one-out for {', '.join(single)}: one run each; another run there "
              "would test the fit")
    for system in result["efficiency"]:
        bar = scores_bar(name, scores.get(system), system, COVERAGE)
        print(f"  {system}: {bar.text}")
    print(f"wrote {args.out} (use it with --stack {args.out}: its commands print this "
          "interval)")
    return 0
