"""Before/after of the trtllm-1.0 serving stack with the kernel tables' GEMM shapes
(docs/accuracy.md, "Kernels"): the in-sample error on TensorRT-LLM's offline runs with
``gemm_shapes`` 'tiles' (the preset), 'kernel-tables' with the same constants, and — with
``--refit``, about 3 minutes on one core — 'kernel-tables' refitted.

    .venv/bin/python bench/kernel_shapes_serving.py [--refit]
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from model.specs.serving_stack import load_serving_stack  # noqa: E402
from model.validation import serving as v  # noqa: E402


def summary(stack, label: str) -> None:
    runs = list(v.runs())
    errors = v.log_errors(runs, stack)
    by_gpu: dict[str, list[float]] = {}
    for run, e in zip(runs, errors):
        by_gpu.setdefault(run.system, []).append(abs(float(np.expm1(e))) * 100)
    print(label, json.dumps(v.error_summary(errors)),
          {gpu: round(float(np.mean(e)), 1) for gpu, e in by_gpu.items()}, flush=True)


def main() -> int:
    base = load_serving_stack("trtllm-1.0")
    summary(base, "tiles (the preset)")
    kernel = dataclasses.replace(base, gemm_shapes="kernel-tables")
    summary(kernel, "kernel-tables, same constants")
    if "--refit" in sys.argv:
        start = time.perf_counter()
        refit = v.fit(kernel.with_efficiency({}))
        print(f"refit in {time.perf_counter() - start:.0f} s:", json.dumps(refit.efficiency))
        summary(refit, "kernel-tables, refitted")
    return 0


if __name__ == "__main__":
    sys.exit(main())
