"""How much the engines' kernels differ on the same shapes, measured: per GPU × kernel class ×
dtype, the median (and 10th/90th percentile) of t_engine / t_TensorRT-LLM over the shapes both
engines' tables timed, from NVIDIA AIConfigurator 0.12.0's tables (dev only: the unpacked wheel
and pyarrow, as ``scripts/extract_kernel_tables.py``). Each side is the kernel that engine's
fit uses (the extraction script's main kernel per dtype; MoE: the ``balanced`` rows of each
engine's most-swept kernel). Writes model/data/reference/kernels/engine_differences.json.

    PYTHONPATH=. .venv/bin/python scripts/compare_engine_kernels.py /tmp/aic/x
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
from extract_kernel_tables import GPUS, OUT, _folder, _main_kernel  # noqa: E402

# class → (folder, file, dtype column, shape columns)
TABLES = {
    "gemm": ("gemm", "gemm_perf", "gemm_dtype", ("m", "n", "k")),
    "context_attention": ("attention", "context_attention_perf", "attn_dtype",
                          ("batch_size", "isl", "num_heads", "num_key_value_heads", "head_dim",
                           "window_size")),
    "decode_attention": ("attention", "generation_attention_perf", "kv_cache_dtype",
                         ("batch_size", "isl", "step", "num_heads", "num_key_value_heads",
                          "head_dim", "window_size")),
    "mla_context": ("mla", "context_mla_perf", "kv_cache_dtype",
                    ("batch_size", "isl", "num_heads", "tp_size")),
    "mla_decode": ("mla", "generation_mla_perf", "kv_cache_dtype",
                   ("batch_size", "isl", "step", "num_heads", "tp_size")),
    "moe": ("moe", "moe_perf", "moe_dtype",
            ("num_tokens", "hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size",
             "moe_ep_size")),
}
ENGINES = ("vllm", "sglang")


def _table(data: Path, gpu: str, kind: str, engine: str) -> dict[str, dict] | None:
    """{dtype: {shape: latency ms}} of one engine's main kernel, None without a table."""
    folder, name, dtype_col, shape = TABLES[kind]
    where = _folder(data, gpu, folder, engine, f"{name}.parquet")
    path = where / f"{name}.parquet" if where else None
    if path is None or not path.exists():
        return None
    t = {k: np.asarray(v) for k, v in pq.read_table(path).to_pydict().items()}
    keep = t["latency"] > 0
    if kind == "moe":
        keep &= t["distribution"] == "balanced"
    if "window_size" not in t:
        t["window_size"] = np.zeros(keep.size)
    main, chosen = _main_kernel(t["kernel_source"][keep], t[dtype_col][keep])
    idx = np.flatnonzero(keep)[main]
    out: dict[str, dict] = {}
    for i in idx:
        out.setdefault(str(t[dtype_col][i]), {})[tuple(float(t[c][i]) for c in shape)] = float(
            t["latency"][i])
    return {d: {"kernel": chosen[d], "rows": rows} for d, rows in out.items()}


def compare(data: Path) -> list[dict]:
    rows = []
    for gpu in GPUS:
        for kind in TABLES:
            base = _table(data, gpu, kind, "trtllm")
            if base is None:
                continue
            for engine in ENGINES:
                other = _table(data, gpu, kind, engine)
                for dtype, side in (other or {}).items():
                    if dtype not in base:
                        continue
                    common = sorted(set(side["rows"]) & set(base[dtype]["rows"]))
                    if len(common) < 10:
                        continue
                    r = np.array([side["rows"][s] / base[dtype]["rows"][s] for s in common])
                    rows.append({"gpu": gpu, "class": kind, "dtype": dtype, "engine": engine,
                                 "kernel": side["kernel"], "trtllm_kernel": base[dtype]["kernel"],
                                 "shapes": len(common),
                                 "median_ratio": round(float(np.median(r)), 3),
                                 "p10_ratio": round(float(np.percentile(r, 10)), 3),
                                 "p90_ratio": round(float(np.percentile(r, 90)), 3)})
                    print(f"{gpu:9s} {kind:18s} {dtype:10s} {engine:7s} {len(common):6d} "
                          f"median {rows[-1]['median_ratio']:.2f} (p10 {rows[-1]['p10_ratio']:.2f}"
                          f", p90 {rows[-1]['p90_ratio']:.2f})  {side['kernel']} vs "
                          f"{base[dtype]['kernel']}", flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("unpacked", type=Path, help="folder the wheel was unpacked into")
    args = ap.parse_args(argv)
    data = args.unpacked / "aiconfigurator_core" / "systems" / "data"
    if not data.is_dir():
        print(f"error: no {data}", file=sys.stderr)
        return 2
    rows = compare(data)
    (OUT / "engine_differences.json").write_text(json.dumps({
        "what": "measured t_engine / t_trtllm on the shapes both tables timed, per GPU × "
                "kernel class × dtype (median, 10th and 90th percentile)",
        "provenance": {"package": "aiconfigurator-core", "version": "0.12.0",
                       "license": "Apache-2.0", "date": dt.date.today().isoformat(),
                       "script": "scripts/compare_engine_kernels.py"},
        "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
