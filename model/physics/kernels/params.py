"""Loader of the kernel layer's fitted parameters and validation subset
(``model/data/reference/kernels/aic_params.json`` and ``aic_subset.json``, written by
``scripts/extract_kernel_tables.py``): plain JSON, read once and cached."""

from __future__ import annotations

import json
from typing import Any

from model.specs import memo
from model.specs.schema import DATA_DIR

KERNEL_DIR = DATA_DIR / "reference" / "kernels"
PARAMS_FILE = KERNEL_DIR / "aic_params.json"
SUBSET_FILE = KERNEL_DIR / "aic_subset.json"


@memo.lru("kernel-layer parameters", 1)
def kernel_params() -> dict[str, Any]:
    """{class: {gpu: {dtype: {parameter: value, 'rows': n}}}} and the provenance."""
    return json.loads(PARAMS_FILE.read_text())


@memo.lru("kernel-layer validation subset", 1)
def kernel_subset() -> dict[str, Any]:
    """The shipped validation rows: {'columns': {class: [...]}, 'rows': {class: {gpu: {dtype:
    [[...], ...]}}}, 'provenance': {...}}."""
    return json.loads(SUBSET_FILE.read_text())


def fitted(kind: str, gpu: str, dtype: str) -> dict[str, float] | None:
    """The fitted parameters of one class × GPU × dtype, None where the tables had none."""
    entry = kernel_params()["params"].get(kind, {}).get(gpu, {}).get(dtype)
    return None if entry is None else {k: v for k, v in entry.items() if k != "rows"}


__all__ = ["KERNEL_DIR", "PARAMS_FILE", "SUBSET_FILE", "fitted", "kernel_params",
           "kernel_subset"]
