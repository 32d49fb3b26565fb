"""Fit the kernel layer (model/physics/kernels) to NVIDIA AIConfigurator 0.12.0's measured
kernel tables and write its parameters and a validation subset (dev only).

Needs the wheel unpacked and pyarrow, neither at run time::

    .venv/bin/pip install pyarrow   # dev-only, not in requirements*.lock
    pip download aiconfigurator-core==0.12.0 --no-deps -d /tmp/aic
    cd /tmp/aic && unzip -q aiconfigurator_core-0.12.0-*.whl -d x
    PYTHONPATH=. .venv/bin/python scripts/extract_kernel_tables.py /tmp/aic/x

    PYTHONPATH=. .venv/bin/python scripts/extract_kernel_tables.py /tmp/aic/x --engine vllm
    PYTHONPATH=. .venv/bin/python scripts/extract_kernel_tables.py /tmp/aic/x --engine sglang

``--engine`` (default ``trtllm``) picks whose tables are fitted: TensorRT-LLM 1.3.0rc20 (GEMM,
attention, MLA; NCCL and TensorRT-LLM's custom all-reduce for collectives), or vLLM / SGLang,
each from its newest version folder that holds the table (GEMM, context and decode attention;
SGLang's MLA; vLLM's MLA tables time whole modules, projections included, and are not fitted;
collectives are NCCL's, the same for every engine, so only the ``trtllm`` run fits them). An
engine's table can time several kernels of one dtype (``kernel_source``: e.g. vLLM's FP8
block-scale GEMM by DeepGEMM, CUTLASS and FlashInfer); each group is fitted on the kernel the
collector swept over the most shapes, named in the group's ``kernel_source``.

Deterministic: each group's rows are drawn with its own seed (CRC-32 of class/GPU/dtype, and the
engine for vLLM and SGLang). Writes model/data/reference/kernels/aic_params.json (parameters per
class × GPU × dtype, the rows each was fitted on) and aic_subset.json (down-sampled rows, whole
shape families, for the held-out test of ``tperf validate --set kernels``), each with its
provenance: package, version, the path of every table inside the wheel, its sha256, the date;
then recomputes the held-out error table (model/data/reference/kernels/kernel_errors.json).
Another engine writes aic_params_<engine>.json and aic_subset_<engine>.json in the same format."""

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
ENGINES = ("trtllm", "vllm", "sglang")
FIT_ROWS = 6000  # rows drawn (seeded) from a group's table for the shipped fit
# shape families per group in the validation subset, and rows per family
FAMILIES = {"gemm": 60, "context_attention": 40, "decode_attention": 40, "mla_context": 8,
            "mla_decode": 8}
PER_FAMILY = {"gemm": 8, "context_attention": 15, "decode_attention": 15, "mla_context": 30,
              "mla_decode": 30}


def _version_key(v: str) -> tuple:
    return tuple(int(p) if p.isdigit() else 0 for p in v.replace("rc", ".").split("."))


def _latest(folder: Path, prefer: str = "1.3.0rc20", needs: str = "") -> Path | None:
    """The ``prefer`` version folder, else the newest (holding the file ``needs`` if given)."""
    versions = [p for p in folder.iterdir() if p.is_dir()] if folder.is_dir() else []
    versions = [p for p in versions if not needs or (p / needs).exists()]
    chosen = [p for p in versions if p.name == prefer] or sorted(
        versions, key=lambda p: _version_key(p.name))
    return chosen[-1] if chosen else None


def _read(path: Path, root: Path, sources: list[dict], dtype_col: str = ""
          ) -> dict[str, np.ndarray]:
    """A table's columns; for another engine than TensorRT-LLM (``dtype_col`` given) only the
    rows of the kernel swept over the most shapes per dtype (:func:`_main_kernel`)."""
    entry = {"path": str(path.relative_to(root)), "rows": pq.read_metadata(path).num_rows,
             "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
    sources.append(entry)
    t = {k: np.asarray(v) for k, v in pq.read_table(path).to_pydict().items()}
    if dtype_col and "kernel_source" in t:
        keep, entry["kernel_source"] = _main_kernel(t["kernel_source"], t[dtype_col])
        t = {k: v[keep] for k, v in t.items()}
    return t


def _main_kernel(source: np.ndarray, dtype: np.ndarray) -> tuple[np.ndarray, dict[str, str]]:
    """Per dtype, the rows of the kernel with the most rows (ties: the first name), and
    {dtype: kernel}."""
    keep = np.zeros(source.size, dtype=bool)
    chosen = {}
    for d in sorted(set(dtype.tolist())):
        names, counts = np.unique(source[dtype == d], return_counts=True)
        chosen[str(d)] = str(names[int(np.argmax(counts))])
        keep |= (dtype == d) & (source == chosen[str(d)])
    return keep, chosen


def _folder(data: Path, gpu: str, kind: str, engine: str, needs: str) -> Path | None:
    """The version folder of ``engine``'s ``kind`` tables: TensorRT-LLM's 1.3.0rc20, another
    engine's newest that holds ``needs``."""
    if engine == "trtllm":
        return _latest(data / gpu / kind / engine)
    return _latest(data / gpu / kind / engine, prefer="", needs=needs)


def gemm_groups(data: Path, gpu: str, root: Path, sources: list, engine: str = "trtllm"
                ) -> dict[str, Columns]:
    folder = _folder(data, gpu, "gemm", engine, "gemm_perf.parquet")
    if folder is None:
        return {}
    t = _read(folder / "gemm_perf.parquet", root, sources,
              "" if engine == "trtllm" else "gemm_dtype")
    out = {}
    for dtype in GEMM_DTYPES:
        keep = t["gemm_dtype"] == dtype
        if keep.sum():
            out[dtype] = {"m": t["m"][keep].astype(float), "n": t["n"][keep].astype(float),
                          "k": t["k"][keep].astype(float),
                          "latency_s": t["latency"][keep].astype(float) * 1e-3}
    return out


def attention_groups(data: Path, gpu: str, root: Path, sources: list, phase: str,
                     engine: str = "trtllm") -> dict[str, Columns]:
    name = f"{phase}_attention_perf.parquet"
    folder = _folder(data, gpu, "attention", engine, name)
    if folder is None:
        return {}
    col = "attn_dtype" if phase == "context" else "kv_cache_dtype"
    t = _read(folder / name, root, sources, "" if engine == "trtllm" else col)
    key = t[col]
    out = {}
    for dtype in sorted(set(key.tolist())):
        keep = (key == dtype) & (t["latency"] > 0)
        window = t.get("window_size", np.zeros(key.size))  # older tables: no window column
        cols = {"batch": t["batch_size"], "heads": t["num_heads"], "kv_heads":
                t["num_key_value_heads"], "head_dim": t["head_dim"], "window": window}
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


def mla_groups(data: Path, gpu: str, root: Path, sources: list, phase: str,
               engine: str = "trtllm") -> dict[str, Columns]:
    """MLA rows keyed by the KV-cache dtype (the attention runs in BF16): prefill (isl tokens)
    or decode (a cache of isl + step tokens); heads as the kernel runs them (per GPU)."""
    name = f"{phase}_mla_perf.parquet"
    folder = _folder(data, gpu, "mla", engine, name)
    path = folder / name if folder else None
    if path is None or not path.exists():
        return {}
    t = _read(path, root, sources, "" if engine == "trtllm" else "kv_cache_dtype")
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


def _groups(data: Path, gpu: str, root: Path, sources: list, engine: str
            ) -> dict[str, dict[str, Columns]]:
    """One GPU's row groups per class and dtype from ``engine``'s tables (module docstring)."""
    groups = {"gemm": gemm_groups(data, gpu, root, sources, engine),
              "context_attention": attention_groups(data, gpu, root, sources, "context", engine),
              "decode_attention": attention_groups(data, gpu, root, sources, "generation",
                                                   engine)}
    if engine != "vllm":  # vLLM's MLA tables time whole modules (projections included)
        groups.update(mla_context=mla_groups(data, gpu, root, sources, "context", engine),
                      mla_decode=mla_groups(data, gpu, root, sources, "generation", engine))
    if engine == "trtllm":  # NCCL is every engine's; TensorRT-LLM's custom all-reduce
        groups["collective"] = comm_groups(data, gpu, root, sources)
    return groups


def _kernel_of(sources: list[dict], kind: str, dtype: str) -> str:
    """The kernel a group of another engine was fitted on (its table's main kernel)."""
    table = {"gemm": "gemm_perf", "context_attention": "context_attention",
             "decode_attention": "generation_attention", "mla_context": "context_mla",
             "mla_decode": "generation_mla"}[kind]
    entry = next(e for e in reversed(sources) if table in e["path"])
    return entry.get("kernel_source", {}).get(dtype, "")


ENGINE_NAMES = {"trtllm": "TensorRT-LLM (trtllm) tables for GEMM and attention; NCCL and "
                          "TensorRT-LLM custom all-reduce for collectives",
                "vllm": "vLLM (vllm) tables, newest version folder per GPU and kernel: GEMM, "
                        "context and decode attention; each group the kernel swept over the "
                        "most shapes (its kernel_source)",
                "sglang": "SGLang (sglang) tables, newest version folder per GPU and kernel: "
                          "GEMM, context and decode attention, MLA; each group the kernel "
                          "swept over the most shapes (its kernel_source)"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("unpacked", type=Path, help="folder the wheel was unpacked into")
    ap.add_argument("--engine", choices=ENGINES, default="trtllm",
                    help="whose kernel tables to fit (default: trtllm)")
    args = ap.parse_args(argv)
    data = args.unpacked / "aiconfigurator_core" / "systems" / "data"
    if not data.is_dir():
        print(f"error: no {data}", file=sys.stderr)
        return 2
    engine = args.engine
    sources: list = []
    params: dict = {k: {} for k in CLASSES}
    rows: dict = {k: {} for k in CLASSES}
    for gpu in GPUS:
        for kind, by_dtype in _groups(data, gpu, args.unpacked, sources, engine).items():
            for dtype, cols in by_dtype.items():
                n = cols["latency_s"].size
                # one seed per group: a group's rows do not depend on which others exist
                tag = f"{kind}/{gpu}/{dtype}" + ("" if engine == "trtllm" else f"/{engine}")
                rng = np.random.default_rng(zlib.crc32(tag.encode()))
                fit_rows = subset(cols, rng.choice(n, size=min(n, FIT_ROWS), replace=False))
                theta = fit_group(CLASSES[kind], fit_rows, gpu, dtype, engine)
                entry = {**theta, "rows": int(n)}
                if engine != "trtllm":
                    entry["kernel_source"] = _kernel_of(sources, kind, dtype)
                params[kind].setdefault(gpu, {})[dtype] = entry
                rows[kind].setdefault(gpu, {})[dtype] = _rows(_sample(cols, kind, rng), kind)
                print(f"{kind:18s} {gpu:9s} {dtype:22s} {n:6d} rows  "
                      + " ".join(f"{k}={v:.4g}" for k, v in theta.items()), flush=True)
    params = {k: v for k, v in params.items() if v}
    rows = {k: v for k, v in rows.items() if v}
    provenance = {"package": "aiconfigurator-core", "version": "0.12.0", "license": "Apache-2.0",
                  "engine": ENGINE_NAMES[engine],
                  "tables": sources, "date": dt.date.today().isoformat(),
                  "script": "scripts/extract_kernel_tables.py"
                            + ("" if engine == "trtllm" else f" --engine {engine}")}
    columns = {k: list(v.columns) for k, v in CLASSES.items()}
    suffix = "" if engine == "trtllm" else f"_{engine}"
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"aic_params{suffix}.json").write_text(json.dumps(
        {"provenance": provenance, "params": params}, indent=1) + "\n")
    (OUT / f"aic_subset{suffix}.json").write_text(json.dumps(
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
