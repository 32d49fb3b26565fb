"""Measure a linear layer's three training GEMMs on the GPU this runs on (dev-only: PyTorch, a
CUDA GPU; nothing in the project imports this file): forward Y[m, n] = X[m, k]·Wᵀ, input
gradient dX[m, k] = dY[m, n]·W and weight gradient dW[n, k] = dYᵀ·X (reduction m), as
autograd runs ``torch.nn.functional.linear``'s backward, in BF16 and in FP8
(``torch._scaled_mm``, e4m3, per-tensor scales, BF16 output, the operands laid out as the
kernel needs: row-major A, column-major B, as Transformer Engine keeps transposed FP8 copies).

Latency: the mean of a back-to-back loop between CUDA events after warm-up, weights rotated
over more than the L2 cache (scripts/measure_kernels_gpu.py's method). Writes one JSON file
(``--out``) with the device, versions and one row per (layer, m, dtype, gemm).

Usage: ``python3 scripts/measure_training_gemms_gpu.py --out training_gemms.json``
(about a minute on an H100).
"""

from __future__ import annotations

import argparse
import json
import time

import torch

# (layer, k, n): Llama 3 8B at TP 1 and Llama 3 70B at TP 8 (the linears of a training block)
LINEARS = [("llama3-8b.qkv", 4096, 6144), ("llama3-8b.o", 4096, 4096),
           ("llama3-8b.gate_up", 4096, 28672), ("llama3-8b.down", 14336, 4096),
           ("llama3-70b.tp8.qkv", 8192, 1280), ("llama3-70b.tp8.o", 1024, 8192),
           ("llama3-70b.tp8.gate_up", 8192, 7168), ("llama3-70b.tp8.down", 3584, 8192)]
M_VALUES = [1024, 4096, 8192, 16384]  # tokens per microbatch (b·seq)
L2_BYTES = 256 * 2**20


def _time_ms(fn, target_ms: float = 15.0) -> float:
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    torch.cuda.synchronize()
    reps = max(3, min(200, int(target_ms / max(start.elapsed_time(end), 1e-3))))
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / reps


def _rotating(make, nbytes: int):
    """Enough copies of an operand to exceed the L2 cache, handed out in turn."""
    copies = [make() for _ in range(max(1, min(16, L2_BYTES // max(nbytes, 1) + 1)))]
    state = {"i": 0}

    def next_copy():
        state["i"] = (state["i"] + 1) % len(copies)
        return copies[state["i"]]
    return next_copy


def _bf16_gemms(m: int, k: int, n: int) -> dict:
    dev = "cuda"
    x = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
    dy = torch.randn(m, n, device=dev, dtype=torch.bfloat16)
    w = _rotating(lambda: torch.randn(n, k, device=dev, dtype=torch.bfloat16), 2 * n * k)
    return {"fwd": lambda: torch.nn.functional.linear(x, w()),
            "dgrad": lambda: dy @ w(),
            "wgrad": lambda: dy.t() @ x}


def _fp8_gemms(m: int, k: int, n: int) -> dict:
    dev, f8 = "cuda", torch.float8_e4m3fn
    one = torch.ones((), device=dev, dtype=torch.float32)

    def q(t: torch.Tensor) -> torch.Tensor:
        return t.to(f8)
    x = q(torch.randn(m, k, device=dev))
    xt_col = q(torch.randn(k, m, device=dev)).t()  # [m, k] column-major
    dy = q(torch.randn(m, n, device=dev))
    dyt = q(torch.randn(n, m, device=dev))  # dYᵀ row-major
    w_col = _rotating(lambda: q(torch.randn(n, k, device=dev)).t(), n * k)  # [k, n] col-major
    wt_col = _rotating(lambda: q(torch.randn(k, n, device=dev)).t(), n * k)  # [n, k] col-major

    def mm(a, b):
        return torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    return {"fwd": lambda: mm(x, w_col()), "dgrad": lambda: mm(dy, wt_col()),
            "wgrad": lambda: mm(dyt, xt_col)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="training_gemms.json")
    args = ap.parse_args()
    props = torch.cuda.get_device_properties(0)
    rows, t0 = [], time.time()
    for layer, k, n in LINEARS:
        for m in M_VALUES:
            for dtype, make in (("bf16", _bf16_gemms), ("fp8", _fp8_gemms)):
                for gemm, fn in make(m, k, n).items():
                    ms = _time_ms(fn)
                    rows.append({"layer": layer, "m": m, "k": k, "n": n, "dtype": dtype,
                                 "gemm": gemm, "latency_ms": ms,
                                 "tflops": 2.0 * m * n * k / (ms * 1e-3) / 1e12})
                torch.cuda.empty_cache()
    meta = {"device": props.name, "sm_count": props.multi_processor_count,
            "torch": torch.__version__, "cuda": torch.version.cuda,
            "date": time.strftime("%Y-%m-%d"), "seconds": round(time.time() - t0, 1),
            "method": "mean of a back-to-back loop between CUDA events after 3 warm-ups; "
                      "weights rotated over >= 256 MiB"}
    with open(args.out, "w") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=1)
    print(f"{len(rows)} rows in {meta['seconds']} s")


if __name__ == "__main__":
    main()
