"""Llama 3 405B on 8,192 and 16,384 H100s: the default search given only the published layout
(prints figures; not a test — tests/test_held_out.py checks the 12 % target).

Run: python bench/llama3_405b.py [--stack NAME]

The published runs and how they are predicted: model/validation/llama3_405b.py (the formulas,
which the tests import); this script prints.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from model.validation.llama3_405b import PUBLISHED, predict  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stack", default=None, help="software stack (default: the newest)")
    args = ap.parse_args()
    print(f"{'GPUs':>6} {'published':>9} {'predicted':>9} {'error':>7}  execution found")
    for gpus, published in PUBLISHED:
        best = predict(gpus, args.stack)
        tflops = float(best["tflops_per_gpu"])
        print(f"{gpus:>6} {published:>9.0f} {tflops:>9.1f} {100 * (tflops / published - 1):>+6.1f}%"
              f"  dp {int(best['dp'])}, microbatch {int(best['microbatch'])}, interleave "
              f"{int(best['interleave'])}, recompute {best['recompute']} with "
              f"{int(best['recompute_layers'])} full layers per stage, "
              f"{float(best['memory_gb']):.1f} GB")


if __name__ == "__main__":
    main()
