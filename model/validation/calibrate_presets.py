"""Calibrate the software stacks' GEMM efficiency and cross-validate it.

Run: scripts/calibrate            # prints the fits and the error tables
     scripts/calibrate --write    # and writes them into model/data/stacks/*.json,
                                  # model/data/reference/cross_validation.json and
                                  # model/data/reference/moe_error_populations.json
(``scripts/calibrate`` runs ``python -m model.validation.calibrate_presets``: the project's own
build step for its presets, the fitting itself in :mod:`model.validation.calibrate`.)

Per stack and GPU one parameter η is fitted on the stack's firm dense runs (least squares of log
time); FP8 and attention follow from kernel benchmarks (see the module). Then, on the MoE runs
only (reference/moe_measurements.json), one more per stack and GPU: the MoE token kernels'
efficiency η_t (model/validation/calibrate.py says why per routed byte), with the stack's dense
values fixed. The error tables give, per
source (a paper or a release), the in-sample error (fitted on the stack's own runs) and the
leave-one-source-out error (fitted on every other source, pooled per GPU): the latter is the
honest one, and what the CLI and the dashboard quote as a prediction's range.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from model.specs.stack import presets
from model.validation.calibrate import (
    FP8_RATIO,
    Curve,
    by_model,
    cross_validate,
    error_table,
    stack_efficiencies,
)
from model.validation.published import time_cases

DATA = Path(__file__).resolve().parent.parent / "data"  # model/data
CV_PATH = DATA / "reference" / "cross_validation.json"
POPULATIONS_PATH = DATA / "reference" / "moe_error_populations.json"
POPULATIONS = ("generation", "precision", "model")  # what the MoE error bars are split by
KERNEL_CALIBRATED = "from kernel benchmarks"  # a stack left alone (deepseek-v3-2024)


def moe_populations(loro: pd.DataFrame, lomo: pd.DataFrame) -> dict:
    """The MoE runs' errors per population (GPU generation, precision, model): in sample,
    leave-one-release-out and leave-one-model-out, mean and max |error| (%) over the firm runs
    of each value — the MoE rows of a population error-bar lookup."""
    out: dict = {
        "description": "Mixture-of-experts prediction errors by population (scripts/calibrate "
                       "--write): per GPU generation, precision and model, the mean and max "
                       "|error| (%) of the firm Megatron-Bridge MoE runs "
                       "(reference/moe_measurements.json) in sample, leaving their release out "
                       "(LORO) and leaving their model out (LOMO: fitted on the other of the "
                       "two models only, the honest generalisation figure with two models). "
                       "error = 100·(1 − predicted / measured) of the iteration time.",
        "populations": {}}
    for by in POPULATIONS:
        a, b = (error_table(f[~f["uncertain"]].to_dict("records"), by=by) for f in (loro, lomo))
        rows = []
        for (_, ra), (_, rb) in zip(a.iterrows(), b.iterrows()):
            rows.append({"value": ra["source"], "runs": int(ra["runs"]),
                         "in_sample_mean_pct": round(ra["in_sample_mean_pct"], 2),
                         "in_sample_max_pct": round(ra["in_sample_max_pct"], 2),
                         "loro_mean_pct": round(ra["cross_validated_mean_pct"], 2),
                         "loro_max_pct": round(ra["cross_validated_max_pct"], 2),
                         "lomo_mean_pct": round(rb["cross_validated_mean_pct"], 2),
                         "lomo_max_pct": round(rb["cross_validated_max_pct"], 2)})
        out["populations"][by] = rows
    return out


def _gemm(table: dict[str, float]) -> dict[str, dict[str, float]]:
    return {k: {"bf16": round(v, 4), "fp8": round(FP8_RATIO * v, 4),
                "mxfp8": round(FP8_RATIO * v, 4)} for k, v in sorted(table.items())}


def write_stacks(fits: dict[str, dict[str, float]], pooled: dict[str, dict[str, float]],
                 expert_fits: dict[str, dict[str, float]]) -> None:
    """Each stack's fitted η (per GPU and generation) into its preset; a stack with no firm
    dense runs of its own inherits its base release's, or without a base takes the pooled fit
    of every firm run (said in its file). Its MoE runs' η_t likewise, inherited where it has
    none."""
    for path in sorted((DATA / "stacks").glob("*.json")):
        data = json.loads(path.read_text())
        if str(data.get("calibration", "")).startswith(KERNEL_CALIBRATED):
            continue  # its efficiencies come from kernel benchmarks, not from training runs
        own = fits.get(data["name"])
        family = data.get("family", "megatron")
        for key in ("gemm_efficiency", "attention_efficiency", "expert_gemm_efficiency"):
            data.pop(key, None)
        if own or not data.get("base"):
            table = own if own else dict(pooled[family])
            data["gemm_efficiency"] = _gemm(table)
            data["attention_efficiency"] = {k: round(v, 4) for k, v in sorted(table.items())}
        data["calibration"] = (
            "fitted on its own runs" if own else f"no firm dense runs of its own: inherits "
            f"{data['base']}'s" if data.get("base") else
            "no firm runs of its own: the pooled fit of every firm run")
        experts = expert_fits.get(data["name"])
        data.pop("expert_calibration", None)
        data.pop("moe_token_efficiency", None)
        if experts:
            data["moe_token_efficiency"] = {k: round(v, 4) for k, v in sorted(experts.items())}
            data["expert_calibration"] = "MoE token kernels fitted on its own MoE runs"
        path.write_text(json.dumps(data, indent=2) + "\n")


def _pooled(curves) -> dict[str, dict[str, float]]:
    """Per family, the pooled fit of its firm runs (for its stacks without runs of their own)."""
    from model.validation.calibrate import pooled_fit
    return {f: pooled_fit(curves, f) for f in ("megatron", "pytorch")}


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="scripts/calibrate", description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true",
                    help="write model/data/stacks/*.json and the CV table")
    args = ap.parse_args(argv)
    start = time.perf_counter()
    curves = [Curve.of(c) for c in time_cases()]
    rows = pd.DataFrame(cross_validate(curves))
    fits = stack_efficiencies(curves)
    table = error_table(rows)
    pd.set_option("display.width", 200)
    print(f"# {len(curves)} dense runs, {time.perf_counter() - start:.1f} s")
    for stack, fit in fits.items():
        print(f"{stack:24s} " + ", ".join(f"{k} {v:.3f}" for k, v in sorted(fit.items())))
    print(table.to_string(index=False, float_format="%.2f"))
    if args.write:  # the MoE runs are priced with the stacks' dense values: write them first
        write_stacks(fits, _pooled(curves), {})
        presets.clear()  # the presets just written are read again
    start = time.perf_counter()
    moe = [Curve.of(c) for c in time_cases(sets=("moe",))]
    moe_rows = pd.DataFrame(cross_validate(moe))
    moe_fits = stack_efficiencies(moe)
    moe_table = error_table(moe_rows)
    lomo_rows = pd.DataFrame(cross_validate(moe, held_out=by_model))
    lomo_table = error_table(lomo_rows, by="held_out")
    populations = moe_populations(moe_rows, lomo_rows)
    print(f"# {len(moe)} MoE runs (MoE token-kernel efficiency), "
          f"{time.perf_counter() - start:.1f} s")
    for stack, fit in moe_fits.items():
        print(f"{stack:24s} " + ", ".join(f"{k} {v:.3f}" for k, v in sorted(fit.items())))
    print(moe_table.to_string(index=False, float_format="%.2f"))
    print("# MoE leave-one-model-out (fitted on the other model's runs)")
    print(lomo_table.to_string(index=False, float_format="%.2f"))
    for by, table_rows in populations["populations"].items():
        print(f"# MoE errors by {by}")
        print(pd.DataFrame(table_rows).to_string(index=False))
    if args.write:
        write_stacks(fits, _pooled(curves), moe_fits)
        CV_PATH.write_text(json.dumps({
            "method": "leave-one-source-out (model/validation/calibrate.py, "
                      "model/validation/calibrate_presets.py)",
            "sources": table.to_dict("records"),
            "runs": rows.replace({np.nan: None}).to_dict("records"),
            "moe": {"method": "leave-one-release-out of the MoE runs: the MoE token "
                              "kernels' efficiency (dense values: the stacks')",
                    "sources": moe_table.to_dict("records"),
                    "runs": moe_rows.replace({np.nan: None}).to_dict("records"),
                    "leave_one_model_out": {
                        "method": "leave-one-model-out of the MoE runs: the token kernels' "
                                  "efficiency fitted on the other model's runs only",
                        "models": lomo_table.to_dict("records"),
                        "runs": lomo_rows.replace({np.nan: None}).to_dict("records")}}},
            indent=1) + "\n")
        POPULATIONS_PATH.write_text(json.dumps(populations, indent=1) + "\n")
        print(f"wrote model/data/stacks/*.json, {CV_PATH.name} and {POPULATIONS_PATH.name}")


if __name__ == "__main__":
    main()
