"""Held-out error of the kernel layer (model/physics/kernels) on AIConfigurator 0.12.0's
measured kernel tables: ``tperf validate --set kernels`` and the Validation page.

On the shipped subset (whole shape families, ``aic_subset.json``), the shape families — (n, k)
pairs for GEMM, head configurations for attention, message-size decades for a collective on a
GPU count — are left out a fifth at a time (one at a time where there are five or fewer), the
class's parameters refitted on the other families of the same GPU × dtype
(:func:`model.physics.kernels.classes.fit_group`) and the left-out rows
priced. Per engine whose tables were fitted (TensorRT-LLM ``trtllm``; vLLM ``vllm`` and SGLang
``sglang`` where their tables exist, :mod:`model.physics.kernels.params`). Rows: {class, gpu,
engine, dtype, n, median_pct, p90_pct} of |t̂ − t|/t, per dtype and pooled (dtype 'all');
:func:`join_rows` merges rows of other kernel classes (MoE) into one table."""

from __future__ import annotations

import json
from collections.abc import Iterable

import numpy as np

from model.physics.kernels.classes import CLASSES, columns_of, fit_group, subset
from model.physics.kernels.fit import relative_errors_pct
from model.physics.kernels.params import DEFAULT_ENGINE, ENGINES, KERNEL_DIR, kernel_subset

ROW_KEYS = ("class", "gpu", "engine", "dtype", "n", "median_pct", "p90_pct")
TORCH_ENGINE = "pytorch"  # the lead's PyTorch measurements (kernels_torch), not fitted
TARGET_MEDIAN_PCT, TARGET_P90_PCT = 10.0, 25.0
ERRORS_FILE = KERNEL_DIR / "kernel_errors.json"
ENGINE_ORDER = {e: i for i, e in enumerate(ENGINES)}
FOLDS = 5  # shape families are held out a fifth at a time


def held_out_errors(kind: str, gpu: str, dtype: str, rows: list[list[float]],
                    engine: str = DEFAULT_ENGINE) -> np.ndarray:
    """Percent errors of every row, each priced by a fit without its shape family: the
    families (sorted) are dealt into :data:`FOLDS` folds and each fold left out in turn — with
    at most :data:`FOLDS` families, one family at a time."""
    k = CLASSES[kind]
    cols = columns_of(rows, k)
    family = k.family(cols)
    ids = np.unique(family)
    fold = np.searchsorted(ids, family) % FOLDS
    errors = np.empty(family.size)
    for f in np.unique(fold):
        out = fold == f
        if out.all():
            continue
        theta = fit_group(k, subset(cols, ~out), gpu, dtype, engine)
        held = subset(cols, out)
        errors[out] = relative_errors_pct(k.price(held, gpu, dtype, theta), held["latency_s"])
    return errors


def _row(kind: str, gpu: str, dtype: str, errors: np.ndarray,
         engine: str = DEFAULT_ENGINE) -> dict:
    return {"class": kind, "gpu": gpu, "engine": engine, "dtype": dtype, "n": int(errors.size),
            "median_pct": round(float(np.median(errors)), 1),
            "p90_pct": round(float(np.percentile(errors, 90)), 1)}


def kernel_error_rows(classes: Iterable[str] | None = None,
                      engines: Iterable[str] = ENGINES) -> list[dict]:
    """Held-out error rows per engine × class × GPU × dtype and pooled per engine × class ×
    GPU ('all'); collectives per operation (dtype = the collective, GPU counts pooled)."""
    return [r for engine in engines for r in _engine_rows(engine, classes)]


def _engine_rows(engine: str, classes: Iterable[str] | None) -> list[dict]:
    data = kernel_subset(engine)["rows"]
    out: list[dict] = []
    for kind in classes or CLASSES:
        for gpu, groups in data.get(kind, {}).items():
            by_label: dict[str, list[np.ndarray]] = {}
            for dtype, rows in groups.items():
                label = dtype.split("/")[0]
                by_label.setdefault(label, []).append(held_out_errors(kind, gpu, dtype, rows,
                                                                   engine))
            pooled = [np.concatenate(v) for v in by_label.values()]
            out += [_row(kind, gpu, label, e, engine)
                    for label, e in zip(by_label, pooled)]
            if len(pooled) > 1:
                out.append(_row(kind, gpu, "all", np.concatenate(pooled), engine))
    return out


def join_rows(*tables: Iterable[dict]) -> list[dict]:
    """One table of error rows from several sources (this module's and the MoE kernel's),
    each row reduced to :data:`ROW_KEYS` (a row without an engine: TensorRT-LLM's), ordered by
    class, GPU, engine, dtype."""
    rows = [{key: r.get(key, DEFAULT_ENGINE) if key == "engine" else r[key] for key in ROW_KEYS}
            for table in tables for r in table]
    return sorted(rows, key=lambda r: (r["class"], r["gpu"], ENGINE_ORDER.get(r["engine"], 9),
                                       r["engine"], r["dtype"] == "all", r["dtype"]))


def meets_target(row: dict) -> bool:
    """Whether a row is within the issue's target (median ≤ 10 %, p90 ≤ 25 %)."""
    return row["median_pct"] <= TARGET_MEDIAN_PCT and row["p90_pct"] <= TARGET_P90_PCT


__all__ = ["ROW_KEYS", "TARGET_MEDIAN_PCT", "TARGET_P90_PCT", "held_out_errors", "join_rows",
           "kernel_error_rows", "meets_target", "moe_error_rows", "stored_error_rows",
           "write_error_table",
           "format_rows"]


def stored_error_rows() -> list[dict]:
    """The error table as last written by :func:`write_error_table` (the Validation page reads
    it rather than refitting on every load; tests/test_kernel_layer.py checks it against
    :func:`kernel_error_rows`)."""
    return json.loads(ERRORS_FILE.read_text())["rows"]


def moe_error_rows() -> list[dict]:
    """The fused-MoE kernel model's held-out rows (:func:`model.physics.kernels.moe_kernel.
    validation_rows`: one expert configuration left out), class ``moe``, the engine's
    framework in the engine column and its kernel family in the dtype column (the kernels
    differ per engine)."""
    from model.physics.kernels.moe_kernel import validation_rows

    return [{**r, "engine": r["engine"].split("/")[0], "dtype": f"{r['dtype']} ({r['engine']})"}
            for r in validation_rows()]


def write_error_table() -> list[dict]:
    """Recompute the held-out error table and store it (``python -m model.validation.kernels``;
    the extraction script calls it after a refit)."""
    from model.validation.kernels_torch import torch_error_rows
    from model.validation.kernels_training import held_out_rows

    rows = join_rows(kernel_error_rows(), torch_error_rows(), moe_error_rows(),
                     held_out_rows())
    ERRORS_FILE.write_text(json.dumps({
        "what": "held-out error of the kernel layer per class × GPU × engine × dtype "
                "(model/validation/kernels.py kernel_error_rows), its error on the "
                "PyTorch measurements, not fitted (kernels_torch.py torch_error_rows), and "
                "the training-GEMM fit's held-out error (kernels_training.py "
                "held_out_rows)",
        "rows": rows}, indent=1) + "\n")
    return rows


def format_rows(rows: list[dict]) -> str:
    """The error table as text for the terminal, with a mark where a row misses the target."""
    lines = [f"{'class':18s} {'gpu':9s} {'engine':7s} {'dtype':18s} {'n':>5s} {'median %':>9s} "
             f"{'p90 %':>7s}"]
    for r in rows:
        mark = "" if meets_target(r) else "  above target"
        lines.append(f"{r['class']:18s} {r['gpu']:9s} {r.get('engine', DEFAULT_ENGINE):7s} "
                     f"{r['dtype']:18s} {r['n']:5d} "
                     f"{r['median_pct']:9.1f} {r['p90_pct']:7.1f}{mark}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(format_rows(write_error_table()))
