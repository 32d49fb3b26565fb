"""A further check of the kernel layer, not fitted: the lead's PyTorch measurements on an H100
and an H200 (``model/data/reference/kernels/h100_torch_measured.json``,
``h200_torch_measured.json``: scripts/measure_kernels_gpu.py — cuBLAS GEMMs by layer shape,
BF16 and FP8 ``torch._scaled_mm`` on pre-quantised inputs, ``scaled_dot_product_attention``
causal forward and decode with the flash and cuDNN backends), priced with the parameters
fitted to AIConfigurator's TensorRT-LLM tables of the same GPU. An FP8 row is priced without
the activation quantisation kernel (the measurement quantised beforehand), on the rows the
kernel ran (``rows_run``: ``_scaled_mm`` pads to 16). Attention rows run other kernels than
TensorRT-LLM's (FlashAttention-2 / cuDNN through SDPA), so their error is a cross-engine one —
except the forward rows, priced as training prices them (:mod:`model.physics.kernels.training`:
the kernel's ρ and key-loop depth L₀ₖ over the context model), ρ and L₀ₖ refitted without the
row's head configuration (its ``model``), so the figure is held out;
decode rows are priced with the vLLM tables' FlashAttention-3 fit of the same GPU (packed GQA and
FlashAttention's split-KV rule, :func:`model.physics.kernels.attention_kernel.decode_splits`)."""

from __future__ import annotations

import json

import numpy as np

from model.physics.kernels import attention_kernel as attn
from model.physics.kernels import gemm_kernel as gemm
from model.physics.kernels.hardware import kernel_hardware
from model.physics.kernels.params import KERNEL_DIR, fitted
from model.physics.kernels.training import attention_forward_s, fit_attention_forward

SOURCES = {"h100_sxm": "h100_torch_measured.json", "h200_sxm": "h200_torch_measured.json"}
DTYPES = {"bf16": "bfloat16", "fp8": "fp8"}


def _gemm_s(r: dict, gpu: str) -> float:
    dtype = DTYPES[r["dtype"]]
    p, hw = fitted("gemm", gpu, dtype), kernel_hardware(gpu)
    rows = r.get("rows_run", r["m"])
    t = gemm.gemm_latency_s(rows, r["n"], r["k"], dtype, hw, p)
    return float(t - gemm.quantise_s(rows, r["k"], dtype, hw, p))


def _context_s(r: dict, gpu: str) -> float:
    p = fitted("context_attention", gpu, "bfloat16")
    return float(attn.context_latency_s(r["batch"], r["seq"], r["heads"], r["kv_heads"],
                                        r["head_dim"], 0, "bfloat16", kernel_hardware(gpu), p))


def _decode_s(r: dict, gpu: str) -> float:
    # SDPA's flash decode is FlashAttention-2 (its split-KV rule, GQA packed): priced by the
    # FlashAttention-3 fit of vLLM's tables on the same GPU, the nearest measured kernel
    p = fitted("decode_attention", gpu, "bfloat16", "vllm")
    return float(attn.decode_latency_s(r["batch"], r["kv_len"], r["heads"], r["kv_heads"],
                                       r["head_dim"], 0, "bfloat16", kernel_hardware(gpu), p))


def _forward_held_out_s(rows: list[dict], gpu: str) -> dict[int, float]:
    """{id(row): seconds} of one backend's causal forward rows, each priced by the training
    attention model with (ρ, L₀ₖ) fitted on the other head configurations' rows."""
    p, out = fitted("context_attention", gpu, "bfloat16"), {}
    for model in sorted({r["model"] for r in rows}):
        held = [r for r in rows if r["model"] == model]
        rest = [r for r in rows if r["model"] != model]
        rho, l0 = fit_attention_forward(gpu, p, rest)
        out.update(zip(map(id, held), attention_forward_s(gpu, p, rho, l0, held)))
    return out


def _held_out_forward(rows: list[dict], gpu: str) -> dict[int, float]:
    """:func:`_forward_held_out_s` per SDPA backend, over the causal forward rows."""
    out: dict[int, float] = {}
    fwd_rows = [r for r in rows if r["kind"] == "attention_fwd" and r["causal"]]
    for backend in sorted({r["backend"] for r in fwd_rows}):
        fwd = [r for r in fwd_rows if r["backend"] == backend]
        if len({r["model"] for r in fwd}) > 1:
            out.update(_forward_held_out_s(fwd, gpu))
    return out


PRICERS = {"gemm": _gemm_s, "attention_fwd": _context_s, "decode_attention": _decode_s}
LABELS = {"gemm": "gemm (torch)", "attention_fwd": "context_attention (torch)",
          "decode_attention": "decode_attention (torch)"}


def torch_error_rows() -> list[dict]:
    """Rows {class, gpu, dtype, n, median_pct, p90_pct} of |t̂ − t|/t on the PyTorch tables
    (dtype: the GEMM dtype, or the SDPA backend for attention); none where a file is absent."""
    out = []
    for gpu, name in SOURCES.items():
        path = KERNEL_DIR / name
        if not path.exists():
            continue
        groups: dict[tuple[str, str], list[float]] = {}
        rows = json.loads(path.read_text())["rows"]
        held_out = _held_out_forward(rows, gpu)
        for r in rows:
            if r["kind"] not in PRICERS:
                continue
            label = r["dtype"] if r["kind"] == "gemm" else r["backend"]
            t = r["latency_ms"] * 1e-3
            t_hat = held_out[id(r)] if id(r) in held_out else PRICERS[r["kind"]](r, gpu)
            err = 100.0 * abs(t_hat - t) / t
            groups.setdefault((LABELS[r["kind"]], label), []).append(err)
        for (kind, label), errs in groups.items():
            e = np.asarray(errs)
            out.append({"class": kind, "gpu": gpu, "engine": "pytorch", "dtype": label,
                        "n": int(e.size),
                        "median_pct": round(float(np.median(e)), 1),
                        "p90_pct": round(float(np.percentile(e, 90)), 1)})
    return out


__all__ = ["SOURCES", "torch_error_rows"]
