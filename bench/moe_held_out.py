"""Held-out mixture-of-experts runs: predicted vs published throughput (prints figures; not a
test — tests/test_held_out.py bounds the errors).

Run: python bench/moe_held_out.py [--stack NAME] [--without-moe-fit]

What the runs are and how each is predicted: model/validation/moe_held_out.py (the formulas,
which the tests import); this script prints.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from model.validation.moe_held_out import (  # noqa: E402
    error_pct,
    predict,
    predicted_tokens_per_s,
    published_tokens_per_s,
    records,
    stack_of,
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stack", default=None, help="software stack (default: the run's date's)")
    ap.add_argument("--without-moe-fit", action="store_true",
                    help="diagnostic: the MoE token kernels at the full HBM rate (no MoE fit)")
    args = ap.parse_args()
    print(f"{'run':48s} {'stack':22s} {'published':>9s} {'predicted':>9s} {'error':>7s}  "
          "(tokens/s per GPU)")
    groups: dict[str, list[float]] = {}
    for r in records():
        row = predict(r, args.stack, args.without_moe_fit)
        err = error_pct(r, row)
        groups.setdefault(r["group"], []).append(err)
        print(f"{r['id']:48s} {args.stack or stack_of(r):22s} {published_tokens_per_s(r):9.0f} "
              f"{predicted_tokens_per_s(r, row):9.0f} {err:+6.1f}%  mb "
              f"{int(row['microbatch'])}, vp {int(row['interleave'])}, recompute "
              f"{int(row['recompute_layers'])} layers, offload {row['offload']}, all-to-all "
              f"{float(row['t_ep_comm_s']):.2f} s of {float(row['iteration_time_s']):.2f} s")
    for group, errs in groups.items():
        absolute = [abs(e) for e in errs]
        print(f"{group}: {len(errs)} runs, mean |error| {sum(absolute) / len(absolute):.1f} %, "
              f"max {max(absolute):.1f} %")


if __name__ == "__main__":
    main()
