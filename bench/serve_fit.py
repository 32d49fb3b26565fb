"""Fit the trtllm-1.0 serving stack on TensorRT-LLM's perf overview and write the fitted
efficiencies and the errors (in-sample, leave-one-model-out, leave-one-GPU-out) into
model/data/serving_stacks/trtllm-1.0.json (docs/serving.md, "Validation").

    .venv/bin/python bench/serve_fit.py            # the fit, its leave-one-out refits (from
                                                   # START) and the held-out residuals
                                                   # (serving_residuals.json)
    .venv/bin/python bench/serve_fit.py --converge # the converged descent instead (issue 31:
                                                   # printed, not written; not the shipped fit)
    .venv/bin/python bench/serve_fit.py --errors   # only the in-sample and per-population
                                                   # errors of the stored fit (seconds), after
                                                   # a physics change that keeps the fit
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pandas as pd  # noqa: E402

from model.specs.serving_stack import SERVING_STACKS_DIR, load_serving_stack  # noqa: E402
from model.validation import serving as v  # noqa: E402
from model.validation import serving_residuals as residuals  # noqa: E402


def errors_only() -> int:
    """Rewrite ``fit.in_sample`` and ``fit.populations`` of both TensorRT-LLM presets from the
    stored efficiencies (no refit)."""
    stack = load_serving_stack("trtllm-1.0")
    frame = pd.DataFrame(v.records(stack))
    in_sample = v.error_summary(v.log_errors(list(v.runs()), stack))
    for name in ("trtllm-1.0", "trtllm-1.0-serve"):
        path = SERVING_STACKS_DIR / f"{name}.json"
        data = json.loads(path.read_text(encoding="utf-8"))
        data["fit"]["in_sample"] = in_sample
        data["fit"]["populations"] = v.population_errors(frame)
        path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    print("in-sample", in_sample)
    return 0


def converged() -> int:
    """Print the converged fit's values and its in-sample and leave-one-out errors (run-weighted
    means), writing nothing."""
    stack = load_serving_stack("trtllm-1.0").with_efficiency({})
    fitted = v.fit(stack, converge=True)
    print("efficiency", fitted.efficiency)
    print("in-sample", v.error_summary(v.log_errors(list(v.runs()), fitted)), flush=True)
    for by in ("model", "system"):
        rows = v.leave_one_out(fitted, by, v.leave_one_out_fits(fitted, by, converge=True))
        runs = sum(r["runs"] for r in rows.values())
        mean = sum(r["runs"] * r["mean_abs_error_pct"] for r in rows.values()) / runs
        print(f"leave one {by} out {mean:.2f} %", rows, flush=True)
    return 0


def main() -> int:
    if "--errors" in sys.argv[1:]:
        return errors_only()
    if "--converge" in sys.argv[1:]:
        return converged()
    path = SERVING_STACKS_DIR / "trtllm-1.0.json"
    start = time.perf_counter()
    stack = load_serving_stack("trtllm-1.0").with_efficiency({})  # from v.START
    fitted = v.fit(stack)
    all_runs = list(v.runs())
    errors = v.log_errors(all_runs, fitted)
    in_sample = v.error_summary(errors)
    moe = np.array([v._model(r.model).moe for r in all_runs])
    by_kind = {"dense": v.error_summary(errors[~moe]), "moe": v.error_summary(errors[moe])}
    print("in-sample", in_sample, by_kind, f"{time.perf_counter() - start:.0f} s", flush=True)
    model_fits = v.leave_one_out_fits(fitted, "model")
    by_model = v.leave_one_out(fitted, "model", model_fits)
    print("leave one model out", by_model, flush=True)
    residuals.write(residuals.scores_of(model_fits))  # the same refits: no second pass
    by_gpu = v.leave_one_out(fitted, "system")
    print("leave one GPU out", by_gpu, flush=True)
    data = json.loads(path.read_text(encoding="utf-8"))
    data["efficiency"] = fitted.efficiency
    frame = pd.DataFrame(v.records(fitted))
    data["fit"] = {"populations": v.population_errors(frame),
                   "data": "model/data/reference/trtllm_perf_overview.json",
                   "commit": "00f37686aa854010d68bcbd0f4ab000221541ca6",
                   "in_sample": in_sample, "in_sample_by_kind": by_kind,
                   "leave_one_model_out": by_model,
                   "leave_one_gpu_out": by_gpu, "script": "bench/serve_fit.py"}
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    serve_path = SERVING_STACKS_DIR / "trtllm-1.0-serve.json"  # the same engine, online limits
    online = json.loads(serve_path.read_text(encoding="utf-8"))
    online["efficiency"], online["fit"] = data["efficiency"], data["fit"]
    serve_path.write_text(json.dumps(online, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {path} in {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
