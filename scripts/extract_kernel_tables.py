"""Fit the kernel layer (model/physics/kernels) to NVIDIA AIConfigurator 0.12.0's measured
kernel tables and write its parameters and a validation subset (dev only).

Needs the wheel unpacked and pyarrow, neither at run time::

    .venv/bin/pip install pyarrow   # dev-only, not in requirements*.lock
    pip download aiconfigurator-core==0.12.0 --no-deps -d /tmp/aic
    cd /tmp/aic && unzip -q aiconfigurator_core-0.12.0-*.whl -d x
    PYTHONPATH=. .venv/bin/python scripts/extract_kernel_tables.py /tmp/aic/x

Deterministic: each group's rows are drawn with its own seed (CRC-32 of class/GPU/dtype).
Writes model/data/reference/kernels/aic_params.json (parameters per class × GPU × dtype, the
rows each was fitted on) and aic_subset.json (down-sampled rows, whole shape families, for the
held-out test of ``tperf validate --set kernels``), each with its provenance: package, version,
the path of every table inside the wheel, its sha256, the date; then recomputes the held-out
error table (model/data/reference/kernels/kernel_errors.json)."""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import sys
import zlib
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from model.physics.kernels.classes import CLASSES, Columns, fit_group, subset

GPUS = ("h100_sxm", "h200_sxm", "b200_sxm", "gb200", "a100_sxm")
GEMM_DTYPES = ("bfloat16", "fp8", "fp8_block", "nvfp4")
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "alltoall")
NCCL_BYTES = {"half": 2.0, "int8": 1.0, "bfloat16": 2.0}
OUT = Path(__file__).resolve().parents[1] / "model" / "data" / "reference" / "kernels"
FIT_ROWS = 6000  # rows drawn (seeded) from a group's table for the shipped fit
# shape families per group in the validation subset, and rows per family
FAMILIES = {"gemm": 60, "context_attention": 40, "decode_attention": 40, "mla_context": 8,
            "mla_decode": 8}
PER_FAMILY = {"gemm": 8, "context_attention": 15, "decode_attention": 15, "mla_context": 30,
              "mla_decode": 30}


def _version_key(v: str) -> tuple:
    return tuple(int(p) if p.isdigit() else 0 for p in v.replace("rc", ".").split("."))


def _latest(folder: Path, prefer: str = "1.3.0rc20") -> Path | None:
    versions = [p for p in folder.iterdir() if p.is_dir()] if folder.is_dir() else []
    chosen = [p for p in versions if p.name == prefer] or sorted(
        versions, key=lambda p: _version_key(p.name))
    return chosen[-1] if chosen else None


def _read(path: Path, root: Path, sources: list[dict]) -> dict[str, np.ndarray]:
    sources.append({"path": str(path.relative_to(root)), "rows": pq.read_metadata(path).num_rows,
                    "sha256": hashlib.sha256(path.read_bytes()).hexdigest()})
    return {k: np.asarray(v) for k, v in pq.read_table(path).to_pydict().items()}


def gemm_groups(data: Path, gpu: str, root: Path, sources: list) -> dict[str, Columns]:
    folder = _latest(data / gpu / "gemm" / "trtllm")
    if folder is None:
        return {}
    t = _read(folder / "gemm_perf.parquet", root, sources)
    out = {}
    for dtype in GEMM_DTYPES:
        keep = t["gemm_dtype"] == dtype
        if keep.sum():
            out[dtype] = {"m": t["m"][keep].astype(float), "n": t["n"][keep].astype(float),
                          "k": t["k"][keep].astype(float),
                          "latency_s": t["latency"][keep].astype(float) * 1e-3}
    return out


def attention_groups(data: Path, gpu: str, root: Path, sources: list, phase: str
                     ) -> dict[str, Columns]:
    folder = _latest(data / gpu / "attention" / "trtllm")
    if folder is None:
        return {}
    t = _read(folder / f"{phase}_attention_perf.parquet", root, sources)
    key = t["attn_dtype"] if phase == "context" else t["kv_cache_dtype"]
    out = {}
    for dtype in sorted(set(key.tolist())):
        keep = (key == dtype) & (t["latency"] > 0)
        cols = {"batch": t["batch_size"], "heads": t["num_heads"], "kv_heads":
                t["num_key_value_heads"], "head_dim": t["head_dim"], "window": t["window_size"]}
        cols = {k: v[keep].astype(float) for k, v in cols.items()}
        out[dtype] = {**cols, **_length_and_latency(t, keep, phase)}
    return out


def _length_and_latency(t: dict, keep, phase: str) -> Columns:
    """The kept rows' sequence length (prefill: isl tokens) or KV-cache length (decode: isl +
    step tokens), and their latency in seconds (the tables give milliseconds)."""
    length = {"seq": t["isl"][keep]} if phase == "context" else {
        "kv_len": (t["isl"] + t["step"])[keep]}
    return {**{k: v.astype(float) for k, v in length.items()},
            "latency_s": t["latency"][keep].astype(float) * 1e-3}


def mla_groups(data: Path, gpu: str, root: Path, sources: list, phase: str
               ) -> dict[str, Columns]:
    """MLA rows keyed by the KV-cache dtype (the attention runs in BF16): prefill (isl tokens)
    or decode (a cache of isl + step tokens); heads as the kernel runs them (per GPU)."""
    folder = _latest(data / gpu / "mla" / "trtllm")
    path = folder / f"{phase}_mla_perf.parquet" if folder else None
    if path is None or not path.exists():
        return {}
    t = _read(path, root, sources)
    out = {}
    for dtype in sorted(set(t["kv_cache_dtype"].tolist())):
        keep = (t["kv_cache_dtype"] == dtype) & (t["latency"] > 0)
        cols = {"batch": t["batch_size"][keep].astype(float),
                "heads": t["num_heads"][keep].astype(float)}
        out[dtype] = {**cols, **_length_and_latency(t, keep, phase)}
    return out


def comm_groups(data: Path, gpu: str, root: Path, sources: list) -> dict[str, Columns]:
    out: dict[str, Columns] = {}
    folder = _latest(data / gpu / "comm" / "nccl", prefer="")
    if folder is not None:
        t = _read(folder / "nccl_perf.parquet", root, sources)
        size = np.array([NCCL_BYTES[d] for d in t["nccl_dtype"]]) * t["message_size"]
        for op in COLLECTIVES:
            for n in sorted(set(t["num_gpus"].tolist())):
                keep = (t["op_name"] == op) & (t["num_gpus"] == n)
                if keep.sum():
                    out[f"{op}/{n}"] = {"gpus": t["num_gpus"][keep].astype(float),
                                        "bytes": size[keep].astype(float),
                                        "latency_s": t["latency"][keep] * 1e-3}
    folder = _latest(data / gpu / "comm" / "trtllm")
    path = folder / "custom_allreduce_perf.parquet" if folder else None
    if path is not None and path.exists():
        t = _read(path, root, sources)
        for n in sorted(set(t["num_gpus"].tolist())):
            keep = t["num_gpus"] == n
            out[f"custom_all_reduce/{n}"] = {
                "gpus": t["num_gpus"][keep].astype(float),
                "bytes": 2.0 * t["message_size"][keep].astype(float),
                "latency_s": t["latency"][keep] * 1e-3}
    return out


def _sample(cols: Columns, kind: str, rng: np.random.Generator) -> Columns:
    """Whole shape families (seeded choice) for the held-out subset; collectives whole."""
    if kind == "collective":
        return cols
    fam = CLASSES[kind].family(cols)
    ids, counts = np.unique(fam, return_counts=True)
    ids = ids[counts >= 8]
    chosen = rng.choice(ids, size=min(FAMILIES[kind], ids.size), replace=False)
    keep = np.zeros(fam.size, dtype=bool)
    for f in chosen:
        rows = np.flatnonzero(fam == f)
        keep[rng.choice(rows, size=min(PER_FAMILY[kind], rows.size), replace=False)] = True
    return subset(cols, keep)


def _rows(cols: Columns, kind: str) -> list[list[float]]:
    table = np.stack([cols[c] for c in CLASSES[kind].columns], axis=1)
    return [[float(f"{v:.5g}") for v in row] for row in table]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("unpacked", type=Path, help="folder the wheel was unpacked into")
    args = ap.parse_args(argv)
    data = args.unpacked / "aiconfigurator_core" / "systems" / "data"
    if not data.is_dir():
        print(f"error: no {data}", file=sys.stderr)
        return 2
    sources: list = []
    params: dict = {k: {} for k in CLASSES}
    rows: dict = {k: {} for k in CLASSES}
    for gpu in GPUS:
        groups = {"gemm": gemm_groups(data, gpu, args.unpacked, sources),
                  "context_attention": attention_groups(data, gpu, args.unpacked, sources,
                                                        "context"),
                  "decode_attention": attention_groups(data, gpu, args.unpacked, sources,
                                                       "generation"),
                  "mla_context": mla_groups(data, gpu, args.unpacked, sources, "context"),
                  "mla_decode": mla_groups(data, gpu, args.unpacked, sources, "generation"),
                  "collective": comm_groups(data, gpu, args.unpacked, sources)}
        for kind, by_dtype in groups.items():
            for dtype, cols in by_dtype.items():
                n = cols["latency_s"].size
                # one seed per group: a group's rows do not depend on which others exist
                rng = np.random.default_rng(zlib.crc32(f"{kind}/{gpu}/{dtype}".encode()))
                fit_rows = subset(cols, rng.choice(n, size=min(n, FIT_ROWS), replace=False))
                theta = fit_group(CLASSES[kind], fit_rows, gpu, dtype)
                params[kind].setdefault(gpu, {})[dtype] = {**theta, "rows": int(n)}
                rows[kind].setdefault(gpu, {})[dtype] = _rows(_sample(cols, kind, rng), kind)
                print(f"{kind:18s} {gpu:9s} {dtype:22s} {n:6d} rows  "
                      + " ".join(f"{k}={v:.4g}" for k, v in theta.items()))
    provenance = {"package": "aiconfigurator-core", "version": "0.12.0", "license": "Apache-2.0",
                  "engine": "TensorRT-LLM (trtllm) tables for GEMM and attention; NCCL and "
                            "TensorRT-LLM custom all-reduce for collectives",
                  "tables": sources, "date": dt.date.today().isoformat(),
                  "script": "scripts/extract_kernel_tables.py"}
    columns = {k: list(v.columns) for k, v in CLASSES.items()}
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "aic_params.json").write_text(json.dumps(
        {"provenance": provenance, "params": params}, indent=1) + "\n")
    (OUT / "aic_subset.json").write_text(json.dumps(
        {"provenance": provenance, "columns": columns, "rows": rows},
        separators=(",", ":")) + "\n")
    from model.physics.kernels.params import kernel_params, kernel_subset
    from model.validation.kernels import format_rows, write_error_table
    kernel_params.clear()
    kernel_subset.clear()
    print(format_rows(write_error_table()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
