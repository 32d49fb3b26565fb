"""Calibrate the software stacks' GEMM efficiency and cross-validate it.

Run: python bench/calibrate.py            # prints the fits and the error tables
     python bench/calibrate.py --write    # and writes them into model/data/stacks/*.json and
                                          # model/data/reference/cross_validation.json

Per stack and GPU one parameter η is fitted on the stack's firm runs (least squares of log
time); FP8 and attention follow from kernel benchmarks (see the module). The error tables give,
per source (a paper or a release), the in-sample error (η fitted on the stack's own runs) and the
leave-one-source-out error (η fitted on every other source, pooled per GPU): the latter is the
honest one, and what the CLI and the dashboard quote as a prediction's range.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from model.validation import time_cases  # noqa: E402
from model.validation.calibrate import (  # noqa: E402
    FP8_RATIO,
    Curve,
    cross_validate,
    error_table,
    stack_efficiencies,
)

CV_PATH = ROOT / "model" / "data" / "reference" / "cross_validation.json"


def write_stacks(fits: dict[str, dict[str, float]], pooled: dict[str, float]) -> None:
    """Each stack's fitted η (per GPU and generation) into its preset; a stack with no firm
    runs of its own takes the pooled fit of every firm run (said in its file)."""
    for path in sorted((ROOT / "model" / "data" / "stacks").glob("*.json")):
        data = json.loads(path.read_text())
        own = fits.get(data["name"])
        table = own if own else {k: v for k, v in pooled.items()}
        data["gemm_efficiency"] = {k: {"bf16": round(v, 4), "fp8": round(FP8_RATIO * v, 4),
                                       "mxfp8": round(FP8_RATIO * v, 4)}
                                   for k, v in sorted(table.items())}
        data["attention_efficiency"] = {k: round(v, 4) for k, v in sorted(table.items())}
        data["calibration"] = ("fitted on its own runs" if own else
                               "no firm runs of its own: the pooled fit of every firm run")
        path.write_text(json.dumps(data, indent=2) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true",
                    help="write model/data/stacks/*.json and the CV table")
    args = ap.parse_args()
    start = time.perf_counter()
    curves = [Curve.of(c) for c in time_cases()]
    rows = pd.DataFrame(cross_validate(curves))
    fits = stack_efficiencies(curves)
    table = error_table(rows)
    pd.set_option("display.width", 200)
    print(f"# {len(curves)} runs, {time.perf_counter() - start:.1f} s")
    for stack, fit in fits.items():
        print(f"{stack:24s} " + ", ".join(f"{k} {v:.3f}" for k, v in sorted(fit.items())))
    print(table.to_string(index=False, float_format="%.2f"))
    if args.write:
        from model.validation.calibrate import pooled_fit
        write_stacks(fits, pooled_fit(curves))
        CV_PATH.write_text(json.dumps({
            "method": "leave-one-source-out (model/validation/calibrate.py, bench/calibrate.py)",
            "sources": table.to_dict("records"),
            "runs": rows.replace({np.nan: None}).to_dict("records")}, indent=1) + "\n")
        print(f"wrote model/data/stacks/*.json and {CV_PATH.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
