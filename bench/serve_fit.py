"""Fit the trtllm-1.0 serving stack on TensorRT-LLM's perf overview and write the fitted
efficiencies and the errors (in-sample, leave-one-model-out, leave-one-GPU-out) into
model/data/serving_stacks/trtllm-1.0.json (docs/serving.md, "Validation").

    .venv/bin/python bench/serve_fit.py            # about 10 minutes on one core
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from model.specs.serving_stack import SERVING_STACKS_DIR, load_serving_stack  # noqa: E402
from model.validation import serving as v  # noqa: E402


def main() -> int:
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
    by_model = v.leave_one_out(fitted, "model")
    print("leave one model out", by_model, flush=True)
    by_gpu = v.leave_one_out(fitted, "system")
    print("leave one GPU out", by_gpu, flush=True)
    data = json.loads(path.read_text(encoding="utf-8"))
    data["efficiency"] = fitted.efficiency
    data["fit"] = {"data": "model/data/reference/trtllm_perf_overview.json",
                   "commit": "00f37686aa854010d68bcbd0f4ab000221541ca6",
                   "in_sample": in_sample, "in_sample_by_kind": by_kind,
                   "leave_one_model_out": by_model,
                   "leave_one_gpu_out": by_gpu, "script": "bench/serve_fit.py"}
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {path} in {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
