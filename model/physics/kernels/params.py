"""Loader of the kernel layer's fitted parameters and validation subset
(``model/data/reference/kernels/aic_params.json`` and ``aic_subset.json``, written by
``scripts/extract_kernel_tables.py``): plain JSON, read once and cached.

Per engine: TensorRT-LLM's tables (``trtllm``, the default) in ``aic_params.json``, vLLM's and
SGLang's in ``aic_params_<engine>.json`` / ``aic_subset_<engine>.json`` (the same format; each
group also names the ``kernel_source`` it was fitted on)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from model.specs import memo
from model.specs.schema import DATA_DIR

KERNEL_DIR = DATA_DIR / "reference" / "kernels"
PARAMS_FILE = KERNEL_DIR / "aic_params.json"
SUBSET_FILE = KERNEL_DIR / "aic_subset.json"
# the GEMM law fitted to training GEMMs measured with PyTorch on Hopper
# (scripts/fit_training_gemms.py, model/physics/kernels/training_fit.py)
TRAINING_FILE = KERNEL_DIR / "training_gemm_params.json"
ENGINES = ("trtllm", "vllm", "sglang")  # whose measured tables the kernel layer is fitted on
DEFAULT_ENGINE = "trtllm"
# keys of a fitted group that are not model parameters
NOT_PARAMS = ("rows", "kernel_source")


class UnknownEngineError(ValueError):
    """A kernel engine the tables do not have."""


def _file(base: Path, engine: str) -> Path:
    if engine not in ENGINES:
        raise UnknownEngineError(f"unknown kernel engine {engine!r}: one of {', '.join(ENGINES)}")
    return base if engine == DEFAULT_ENGINE else base.with_name(
        f"{base.stem}_{engine}{base.suffix}")


def params_file(engine: str = DEFAULT_ENGINE) -> Path:
    """The parameter file of ``engine``'s tables."""
    return _file(PARAMS_FILE, engine)


def subset_file(engine: str = DEFAULT_ENGINE) -> Path:
    """The validation-subset file of ``engine``'s tables."""
    return _file(SUBSET_FILE, engine)


@memo.lru("kernel-layer parameters", 4)
def kernel_params(engine: str = DEFAULT_ENGINE) -> dict[str, Any]:
    """{class: {gpu: {dtype: {parameter: value, 'rows': n}}}} and the provenance of one
    engine's tables (an engine whose file is absent: no parameters)."""
    path = params_file(engine)
    if engine != DEFAULT_ENGINE and not path.exists():
        return {"provenance": {}, "params": {}}
    return json.loads(path.read_text())


@memo.lru("kernel-layer validation subset", 4)
def kernel_subset(engine: str = DEFAULT_ENGINE) -> dict[str, Any]:
    """The shipped validation rows: {'columns': {class: [...]}, 'rows': {class: {gpu: {dtype:
    [[...], ...]}}}, 'provenance': {...}} of one engine's tables."""
    path = subset_file(engine)
    if engine != DEFAULT_ENGINE and not path.exists():
        return {"provenance": {}, "columns": {}, "rows": {}}
    return json.loads(path.read_text())


def fitted(kind: str, gpu: str, dtype: str, engine: str = DEFAULT_ENGINE
           ) -> dict[str, float] | None:
    """The fitted parameters of one class × GPU × dtype on ``engine``'s tables, None where
    they had none."""
    entry = kernel_params(engine)["params"].get(kind, {}).get(gpu, {}).get(dtype)
    return None if entry is None else {k: v for k, v in entry.items() if k not in NOT_PARAMS}


def kernel_source(kind: str, gpu: str, dtype: str, engine: str = DEFAULT_ENGINE) -> str:
    """The kernel a group was fitted on ('' for TensorRT-LLM's single-kernel tables)."""
    entry = kernel_params(engine)["params"].get(kind, {}).get(gpu, {}).get(dtype) or {}
    return str(entry.get("kernel_source", ""))


@memo.lru("training GEMM parameters", 1)
def training_params() -> dict[str, Any]:
    """The training-GEMM fit's file (provenance, parameters, errors); empty where absent."""
    if not TRAINING_FILE.exists():
        return {"provenance": {}, "params": {}, "errors": {}}
    return json.loads(TRAINING_FILE.read_text())


def training_fitted(gpu: str, dtype: str) -> dict[str, float] | None:
    """The GEMM law's parameters fitted to PyTorch training GEMMs of one GPU × dtype, None
    where none were measured (every GPU but H100 and H200, every dtype but BF16 and FP8)."""
    entry = training_params()["params"].get("gemm", {}).get(gpu, {}).get(dtype)
    return None if entry is None else {k: v for k, v in entry.items() if k not in NOT_PARAMS}


__all__ = ["DEFAULT_ENGINE", "ENGINES", "KERNEL_DIR", "PARAMS_FILE", "SUBSET_FILE",
           "TRAINING_FILE", "UnknownEngineError", "fitted", "training_fitted",
           "training_params", "kernel_params", "kernel_source", "kernel_subset",
           "params_file", "subset_file"]
