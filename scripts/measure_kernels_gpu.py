"""Measure the kernels the estimator prices on the GPU this runs on, with PyTorch (dev-only).

Needs a CUDA GPU and PyTorch; nothing in the project imports this file. It writes one JSON file
(``--out``, default ``kernels_measured.json``) with the device, the software versions and one row
per measured kernel:

* ``gemm``: Y[m, n] = X[m, k]·Wᵀ with W stored [n, k] (``torch.nn.Linear``'s layout, cuBLAS
  "TN"), BF16 and FP8 (``torch._scaled_mm``, e4m3, per-tensor scales, BF16 output). The weights
  rotate over enough copies to exceed the L2 cache, so a small-m GEMM reads them from HBM as a
  decode step does.
* ``grouped_gemm``: ``torch._grouped_mm`` over E experts with tokens routed top-k uniformly at
  random (balanced routing), BF16, the expert shapes of published MoE models.
* ``attention_fwd`` / ``attention_fwd_bwd``: ``scaled_dot_product_attention``, causal, GQA, BF16,
  per SDPA backend (flash, cuDNN) that accepts the shape.
* ``decode_attention``: one query token per sequence against a KV cache of length L.
* ``hbm_copy``: device-to-device copy bandwidth (bytes read + written); ``launch``: back-to-back
  tiny kernels.

Latency is the mean over a timed loop of back-to-back launches between two CUDA events, after
warm-up (the steady state a step of many kernels runs in), in milliseconds.

Usage: ``python3 scripts/measure_kernels_gpu.py --out /path/kernels.json`` (about 3–5 minutes on
an H100).
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import subprocess
import time

import torch
import torch.nn.functional as F

L2_FLUSH_BYTES = 256 * 2**20  # rotate weights over at least this many bytes (H100 L2: 50 MB)
TARGET_MS = 25.0  # timed loop length aimed for per shape

# (name, k, n): linear layers of published models (Llama 3 8B / 70B at TP 1 and 8, DeepSeek-V3)
LINEARS = [
    ("llama3-8b.qkv", 4096, 6144), ("llama3-8b.o", 4096, 4096),
    ("llama3-8b.gate_up", 4096, 28672), ("llama3-8b.down", 14336, 4096),
    ("llama3-70b.qkv", 8192, 10240), ("llama3-70b.o", 8192, 8192),
    ("llama3-70b.gate_up", 8192, 57344), ("llama3-70b.down", 28672, 8192),
    ("llama3-70b.tp8.qkv", 8192, 1280), ("llama3-70b.tp8.o", 1024, 8192),
    ("llama3-70b.tp8.gate_up", 8192, 7168), ("llama3-70b.tp8.down", 3584, 8192),
    ("deepseek-v3.q_a", 7168, 1536), ("deepseek-v3.kv_a", 7168, 576),
    ("deepseek-v3.shared_up", 7168, 4096), ("deepseek-v3.shared_down", 2048, 7168),
    ("square.16k", 16384, 16384),
]
M_VALUES = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384]

# (name, hidden, intermediate, experts, top_k): expert FFN shapes (up = gate+up fused, down)
EXPERTS = [
    ("deepseek-v3", 7168, 2048, 256, 8), ("deepseek-v3.ep8", 7168, 2048, 32, 8),
    ("mixtral-8x7b", 4096, 14336, 8, 2), ("gpt-oss-120b", 2880, 2880, 128, 4),
    ("qwen3-30b-a3b", 2048, 768, 128, 8),
]
TOKENS = [1, 4, 16, 64, 256, 1024, 4096, 16384]

# (name, q heads, kv heads, head dim)
ATTENTION = [("llama3-8b", 32, 8, 128), ("llama3-70b", 64, 8, 128), ("llama3-70b.tp8", 8, 1, 128)]
SEQ_LENS = [512, 1024, 2048, 4096, 8192, 16384, 32768, 65536]
DECODE_BATCH = [1, 8, 32, 128]
DECODE_KV = [1024, 4096, 16384, 65536]


def timed_ms(fn, reps_hint: int | None = None, graph_calls: int = 0) -> float:
    """Mean milliseconds of ``fn()`` back to back between two CUDA events. With ``graph_calls``
    the calls are captured in a CUDA graph of that many calls and replayed, so the host's Python
    overhead (~10 µs a call) does not hide a kernel shorter than it; eager otherwise."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    if graph_calls:
        try:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                fn()
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                for _ in range(graph_calls):
                    fn()
            fn = graph.replay
        except Exception:  # noqa: BLE001 — a kernel that cannot be captured is timed eagerly
            torch.cuda.synchronize()
            graph_calls = 0
    if reps_hint is None:
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        one_ms = (time.perf_counter() - start) * 1e3
        reps_hint = int(min(200, max(3, TARGET_MS / max(one_ms, 1e-3))))
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    begin.record()
    for _ in range(reps_hint):
        fn()
    end.record()
    torch.cuda.synchronize()
    return begin.elapsed_time(end) / reps_hint / max(graph_calls, 1)


def weight_copies(nbytes: int) -> int:
    """Copies of a weight to rotate over so the set exceeds the L2 cache (at most 32)."""
    return int(min(32, max(1, math.ceil(L2_FLUSH_BYTES / max(nbytes, 1)))))


def rotating(fn_for, count: int):
    """A callable that runs ``fn_for(i)`` for i = 0, 1, … count−1, 0, … on successive calls."""
    state = {"i": 0}

    def run():
        fn_for(state["i"] % count)
        state["i"] += 1
    return run


def measure_gemm(rows: list[dict]) -> None:
    dev = "cuda"
    for name, k, n in LINEARS:
        for dtype in ("bf16", "fp8"):
            w_bytes = n * k * (2 if dtype == "bf16" else 1)
            copies = weight_copies(w_bytes)
            if dtype == "bf16":
                ws = [torch.randn(n, k, device=dev, dtype=torch.bfloat16) for _ in range(copies)]
            else:
                ws = [torch.randn(n, k, device=dev, dtype=torch.bfloat16).to(torch.float8_e4m3fn)
                      for _ in range(copies)]
            one = torch.ones((), device=dev, dtype=torch.float32)
            for m in M_VALUES:
                if m * (n + k) * 2 > 8 * 2**30:
                    continue
                try:
                    if dtype == "bf16":
                        x = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
                        run = rotating(lambda i, x=x, ws=ws: x @ ws[i].t(), copies)
                    else:
                        mp = max(16, m)  # _scaled_mm needs rows in multiples of 16
                        x = torch.randn(mp, k, device=dev, dtype=torch.bfloat16).to(
                            torch.float8_e4m3fn)
                        run = rotating(lambda i, x=x, ws=ws, one=one: torch._scaled_mm(
                            x, ws[i].t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16),
                            copies)
                    ms = timed_ms(run, graph_calls=2 * copies if m <= 1024 else 0)
                except Exception as exc:  # noqa: BLE001 — record the refusal, keep measuring
                    rows.append({"kind": "gemm", "layer": name, "m": m, "n": n, "k": k,
                                 "dtype": dtype, "error": str(exc)[:200]})
                    continue
                rows.append({"kind": "gemm", "layer": name, "m": m, "n": n, "k": k,
                             "dtype": dtype, "rows_run": m if dtype == "bf16" else max(16, m),
                             "latency_ms": ms, "tflops": 2 * m * n * k / ms / 1e9})
            torch.cuda.empty_cache()


def routed_offsets(tokens: int, experts: int, top_k: int, gen: torch.Generator) -> list[int]:
    """Rows per expert when each token picks top_k distinct experts uniformly at random."""
    picks = torch.rand(tokens, experts, generator=gen).argsort(dim=1)[:, :top_k]
    return torch.bincount(picks.flatten(), minlength=experts).tolist()


def measure_grouped(rows: list[dict]) -> None:
    dev = "cuda"
    gen = torch.Generator().manual_seed(0)
    if not hasattr(torch, "_grouped_mm"):
        rows.append({"kind": "grouped_gemm", "error": "torch._grouped_mm missing"})
        return
    for name, hidden, inter, experts, top_k in EXPERTS:
        for proj, k, n in (("up", hidden, 2 * inter), ("down", inter, hidden)):
            w = torch.randn(experts, n, k, device=dev, dtype=torch.bfloat16).transpose(-2, -1)
            for tokens in TOKENS:
                counts = routed_offsets(tokens, experts, top_k, gen)
                total = sum(counts)
                offs = torch.tensor(counts, device=dev, dtype=torch.int32).cumsum(0).to(
                    torch.int32)
                x = torch.randn(max(total, 1), k, device=dev, dtype=torch.bfloat16)
                touched = sum(1 for c in counts if c)
                tiles128 = sum(math.ceil(c / 128) for c in counts)
                base = {"kind": "grouped_gemm", "model": name, "proj": proj, "tokens": tokens,
                        "experts": experts, "top_k": top_k, "k": k, "n": n, "dtype": "bf16",
                        "rows": total, "touched_experts": touched, "row_tiles_128": tiles128}
                try:
                    ms = timed_ms(lambda x=x, w=w, offs=offs: torch._grouped_mm(x, w, offs=offs,
                                                            out_dtype=torch.bfloat16),
                                  graph_calls=8 if tokens <= 1024 else 0)
                except Exception as exc:  # noqa: BLE001
                    rows.append({**base, "error": str(exc)[:200]})
                    continue
                rows.append({**base, "latency_ms": ms, "tflops": 2 * total * n * k / ms / 1e9,
                             "touched_weight_gbs": touched * n * k * 2 / ms / 1e6})
            torch.cuda.empty_cache()


def _backends():
    from torch.nn.attention import SDPBackend
    out = [("flash", SDPBackend.FLASH_ATTENTION)]
    if hasattr(SDPBackend, "CUDNN_ATTENTION"):
        out.append(("cudnn", SDPBackend.CUDNN_ATTENTION))
    return out


def measure_attention(rows: list[dict]) -> None:
    from torch.nn.attention import sdpa_kernel
    dev = "cuda"
    for name, heads, kv_heads, dim in ATTENTION:
        for seq in SEQ_LENS:
            batch = max(1, 16384 // seq)
            for backend_name, backend in _backends():
                q = torch.randn(batch, heads, seq, dim, device=dev, dtype=torch.bfloat16,
                                requires_grad=True)
                k = torch.randn(batch, kv_heads, seq, dim, device=dev, dtype=torch.bfloat16,
                                requires_grad=True)
                v = torch.randn_like(k, requires_grad=True)
                # causal FLOPs (FA2 convention): 4·b·h·s²·d / 2 forward, 2.5× that fwd+bwd
                fwd_flops = 4 * batch * heads * seq * seq * dim / 2
                base = {"model": name, "heads": heads, "kv_heads": kv_heads, "head_dim": dim,
                        "seq": seq, "batch": batch, "causal": True, "dtype": "bf16",
                        "backend": backend_name}
                try:
                    with sdpa_kernel([backend]):
                        def fwd(q=q, k=k, v=v):
                            return F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                                                  enable_gqa=True)
                        with torch.no_grad():
                            ms = timed_ms(fwd)
                        rows.append({"kind": "attention_fwd", **base, "latency_ms": ms,
                                     "tflops": fwd_flops / ms / 1e9})
                        grad = torch.randn(batch, heads, seq, dim, device=dev,
                                           dtype=torch.bfloat16)

                        def fwd_bwd(fwd=fwd, grad=grad):
                            out = fwd()
                            out.backward(grad)
                        ms = timed_ms(fwd_bwd)
                        rows.append({"kind": "attention_fwd_bwd", **base, "latency_ms": ms,
                                     "tflops": 3.5 * fwd_flops / ms / 1e9})
                except Exception as exc:  # noqa: BLE001
                    rows.append({"kind": "attention_fwd", **base, "error": str(exc)[:200]})
                torch.cuda.empty_cache()


def measure_decode(rows: list[dict]) -> None:
    from torch.nn.attention import sdpa_kernel
    dev = "cuda"
    for name, heads, kv_heads, dim in ATTENTION:
        for batch in DECODE_BATCH:
            for kv_len in DECODE_KV:
                kv_bytes = 2 * batch * kv_heads * kv_len * dim * 2
                if kv_bytes > 24 * 2**30:
                    continue
                q = torch.randn(batch, heads, 1, dim, device=dev, dtype=torch.bfloat16)
                k = torch.randn(batch, kv_heads, kv_len, dim, device=dev, dtype=torch.bfloat16)
                v = torch.randn_like(k)
                for backend_name, backend in _backends():
                    base = {"kind": "decode_attention", "model": name, "heads": heads,
                            "kv_heads": kv_heads, "head_dim": dim, "batch": batch,
                            "kv_len": kv_len, "dtype": "bf16", "backend": backend_name,
                            "kv_bytes": kv_bytes}
                    try:
                        with sdpa_kernel([backend]), torch.no_grad():
                            ms = timed_ms(lambda q=q, k=k, v=v: F.scaled_dot_product_attention(
                                q, k, v, enable_gqa=True), graph_calls=8)
                    except Exception as exc:  # noqa: BLE001
                        rows.append({**base, "error": str(exc)[:200]})
                        continue
                    rows.append({**base, "latency_ms": ms, "kv_gbs": kv_bytes / ms / 1e6})
                torch.cuda.empty_cache()


def measure_basics(rows: list[dict]) -> None:
    dev = "cuda"
    for mib in (16, 256, 4096):
        a = torch.empty(mib * 2**20, device=dev, dtype=torch.uint8)
        b = torch.empty_like(a)
        ms = timed_ms(lambda a=a, b=b: b.copy_(a))
        rows.append({"kind": "hbm_copy", "bytes": a.numel(), "latency_ms": ms,
                     "gbs_read_plus_written": 2 * a.numel() / ms / 1e6})
    x = torch.zeros(1, device=dev)
    ms = timed_ms(lambda: x.add_(1.0), reps_hint=2000)
    rows.append({"kind": "launch", "what": "eager add_ on one element", "latency_ms": ms})
    graph = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        for _ in range(3):
            x.add_(1.0)
    torch.cuda.synchronize()
    with torch.cuda.graph(graph):
        for _ in range(100):
            x.add_(1.0)
    ms = timed_ms(graph.replay, reps_hint=50) / 100
    rows.append({"kind": "launch", "what": "add_ inside a CUDA graph of 100", "latency_ms": ms})


def device_meta() -> dict:
    props = torch.cuda.get_device_properties(0)
    meta = {"device": props.name, "sm_count": props.multi_processor_count,
            "memory_gib": props.total_memory / 2**30, "torch": torch.__version__,
            "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
            "python": platform.python_version(),
            "date": time.strftime("%Y-%m-%d", time.gmtime()),
            "method": "mean of a back-to-back loop between CUDA events after 3 warm-ups; "
                      "weights rotated over >= 256 MiB to defeat the L2 cache"}
    try:
        meta["nvidia_smi"] = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem,"
             "power.limit", "--format=csv,noheader"], capture_output=True, text=True,
            timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        meta["nvidia_smi"] = f"unavailable: {exc}"
    return meta


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="kernels_measured.json")
    parser.add_argument("--only", default="basics,gemm,grouped,attention,decode")
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    result = {"meta": device_meta(), "rows": []}
    steps = {"basics": measure_basics, "gemm": measure_gemm, "grouped": measure_grouped,
             "attention": measure_attention, "decode": measure_decode}
    for name in args.only.split(","):
        start = time.perf_counter()
        try:
            steps[name](result["rows"])
        except Exception as exc:  # noqa: BLE001 — keep what the other steps measured
            result["rows"].append({"kind": name, "error": f"step failed: {exc}"[:300]})
        result["meta"][f"seconds_{name}"] = round(time.perf_counter() - start, 1)
        with open(args.out, "w") as fh:
            json.dump(result, fh, indent=0)
        print(f"{name}: {result['meta'][f'seconds_{name}']} s, {len(result['rows'])} rows",
              flush=True)


if __name__ == "__main__":
    main()
