"""Fit the dense GEMM law's η and k₀ to the training GEMMs measured with PyTorch on Hopper and
write them with their provenance and held-out errors (dev only; numpy, no GPU, no pyarrow).

    PYTHONPATH=. .venv/bin/python scripts/fit_training_gemms.py

Reads model/data/reference/kernels/h100_training_gemms.json and h200_training_gemms.json (a
linear's forward, dX and dW GEMMs of 8 Llama-3 linears × m = 1,024–16,384, BF16 and FP8,
measured by scripts/measure_training_gemms_gpu.py; the commit of that script and of each table
is recorded), fits per GPU × dtype (model/physics/kernels/training_fit.py) and writes
model/data/reference/kernels/training_gemm_params.json: the full parameter set of the GEMM law
per GPU × dtype (η and k₀ fitted, β, t₀ and t_split copied from the GPU's TensorRT-LLM fit in
aic_params.json), the rows each was fitted on, and per pass the in-sample and the
leave-one-linear-out error (median, 90th percentile and mean signed, in %). Deterministic: the
same tables give the same file."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

from model.physics.kernels import training_fit as tf
from model.physics.kernels.params import TRAINING_FILE

ROOT = Path(__file__).resolve().parents[1]
MEASURE_SCRIPT = "scripts/measure_training_gemms_gpu.py"


def _commit(path: str) -> str:
    """The last commit that touched ``path`` (the version of the script or table used)."""
    out = subprocess.run(["git", "log", "-1", "--format=%H", "--", path], cwd=ROOT,
                         capture_output=True, text=True, check=False)
    return out.stdout.strip()


def _source(gpu: str, path: Path) -> dict:
    rel = str(path.relative_to(ROOT))
    return {"gpu": gpu, "path": rel, "commit": _commit(rel),
            "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
            "meta": json.loads(path.read_text())["meta"]}


def main() -> None:
    params: dict = {}
    errors: dict = {}
    for gpu, path in tf.TABLES.items():
        for table_dtype, dtype in tf.DTYPES.items():
            c = tf.table_columns(path, table_dtype)
            p = tf.fit(c, gpu, dtype)
            in_sample = 100.0 * (tf.price_s(c, gpu, dtype, p) - c["latency_s"]) / c["latency_s"]
            params.setdefault(gpu, {})[dtype] = {**p, "rows": int(c["latency_s"].size)}
            errors.setdefault(gpu, {})[dtype] = {
                "in_sample": tf.per_pass(c, in_sample),
                "held_out": tf.per_pass(c, tf.held_out_pct(c, gpu, dtype))}
            e = errors[gpu][dtype]["held_out"]
            print(f"{gpu} {dtype:9s} eta {p['eta']:.4f} k0 {p['k0']:7.1f} | held out "
                  + ", ".join(f"{w} {e[w]['median_pct']}/{e[w]['p90_pct']} %" for w in e))
    provenance = {
        "what": "the dense GEMM law (model/physics/kernels/gemm_kernel.py) fitted to training "
                "GEMMs measured with PyTorch/cuBLAS on Hopper: eta and k0 per GPU x dtype on "
                "the forward, dX and dW GEMMs pooled; beta, t0_s, t_split_s held at the GPU's "
                "TensorRT-LLM fit (aic_params.json)",
        "fitted": list(tf.FREE),
        "held_out": "one linear (one (n, k) pair, all its m and passes) left out at a time",
        "measurement_script": {"path": MEASURE_SCRIPT, "commit": _commit(MEASURE_SCRIPT)},
        "tables": [_source(gpu, path) for gpu, path in tf.TABLES.items()],
        "fit_script": "scripts/fit_training_gemms.py",
        "applies_to": "training through the kernel layer (Execution.kernel_tables) on these "
                      "GPUs and their die (H100 variants); other GPUs and dtypes keep the "
                      "TensorRT-LLM tables' fit"}
    TRAINING_FILE.write_text(json.dumps({"provenance": provenance, "params": {"gemm": params},
                                         "errors": errors}, indent=1) + "\n")
    print(f"wrote {TRAINING_FILE.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
