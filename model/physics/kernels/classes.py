"""The kernel classes of the measured tables, one entry each: the columns a row carries, the
closed form that prices it (:mod:`.gemm_kernel`, :mod:`.attention_kernel`, :mod:`.comm_kernel`),
its parameter names and fit starts, and the shape family a held-out test leaves out — shared by
the extraction script (fitting the shipped parameters) and ``validate --set kernels``
(refitting without each family)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from model.physics.kernels import attention_kernel as attn
from model.physics.kernels import comm_kernel as comm
from model.physics.kernels import gemm_kernel as gemm
from model.physics.kernels import mla_kernel as mla
from model.physics.kernels.fit import fit_log_latency
from model.physics.kernels.hardware import kernel_hardware

Array = np.ndarray
Columns = dict[str, Array]


@dataclass(frozen=True)
class KernelClass:
    """One kernel class: columns (the last is ``latency_s``), parameter names, starts, how a
    group (GPU, dtype) of rows is priced, and each row's held-out family."""

    name: str
    columns: tuple[str, ...]
    params: tuple[str, ...]
    starts: Callable[[], list[list[float]]]
    price: Callable[[Columns, str, str, dict[str, float]], Array]  # (cols, gpu, dtype, θ)
    family: Callable[[Columns], Array]  # one integer id per row
    family_name: str


def _gemm_price(c: Columns, gpu: str, dtype: str, p: dict[str, float]) -> Array:
    return gemm.gemm_latency_s(c["m"], c["n"], c["k"], dtype, kernel_hardware(gpu), p)


def _context_price(c: Columns, gpu: str, dtype: str, p: dict[str, float]) -> Array:
    return attn.context_latency_s(c["batch"], c["seq"], c["heads"], c["kv_heads"],
                                  c["head_dim"], c["window"], dtype, kernel_hardware(gpu), p)


def _decode_price(c: Columns, gpu: str, dtype: str, p: dict[str, float]) -> Array:
    return attn.decode_latency_s(c["batch"], c["kv_len"], c["heads"], c["kv_heads"],
                                 c["head_dim"], c["window"], dtype, kernel_hardware(gpu), p)


def _mla_context_price(c: Columns, gpu: str, dtype: str, p: dict[str, float]) -> Array:
    return mla.mla_context_latency_s(c["batch"], c["seq"], c["heads"], dtype,
                                     kernel_hardware(gpu), p)


def _mla_decode_price(c: Columns, gpu: str, dtype: str, p: dict[str, float]) -> Array:
    return mla.mla_decode_latency_s(c["batch"], c["kv_len"], c["heads"], dtype,
                                    kernel_hardware(gpu), p)


def _comm_price(c: Columns, gpu: str, dtype: str, p: dict[str, float]) -> Array:
    op = dtype.split("/")[0]
    return comm.collective_latency_s(op, c["bytes"], c["gpus"], p)


def _pair_id(a: Array, b: Array) -> Array:
    return (np.asarray(a, dtype=np.int64) * 1_000_003 + np.asarray(b, dtype=np.int64))


def _heads_id(c: Columns) -> Array:
    return (np.asarray(c["heads"], np.int64) * 1_000 + np.asarray(c["kv_heads"], np.int64)) * \
        1_000 + np.asarray(c["head_dim"], np.int64)


CLASSES: dict[str, KernelClass] = {
    "gemm": KernelClass("gemm", ("m", "n", "k", "latency_s"), gemm.PARAMS, gemm.gemm_starts,
                        _gemm_price, lambda c: _pair_id(c["n"], c["k"]), "(n, k) pair"),
    "context_attention": KernelClass(
        "context_attention",
        ("batch", "seq", "heads", "kv_heads", "head_dim", "window", "latency_s"),
        attn.CONTEXT_PARAMS, attn.context_starts, _context_price, _heads_id,
        "head configuration (heads, kv heads, head dim)"),
    "decode_attention": KernelClass(
        "decode_attention",
        ("batch", "kv_len", "heads", "kv_heads", "head_dim", "window", "latency_s"),
        attn.DECODE_PARAMS, attn.decode_starts, _decode_price, _heads_id,
        "head configuration (heads, kv heads, head dim)"),
    "mla_context": KernelClass(
        "mla_context", ("batch", "seq", "heads", "latency_s"), mla.CONTEXT_PARAMS,
        attn.context_starts, _mla_context_price,
        lambda c: np.asarray(c["heads"], np.int64), "head count"),
    "mla_decode": KernelClass(
        "mla_decode", ("batch", "kv_len", "heads", "latency_s"), mla.DECODE_PARAMS,
        mla.mla_decode_starts, _mla_decode_price,
        lambda c: np.asarray(c["heads"], np.int64), "head count"),
    "collective": KernelClass(
        "collective", ("gpus", "bytes", "latency_s"), comm.PARAMS, comm.comm_starts,
        _comm_price, lambda c: np.floor(np.log10(np.asarray(c["bytes"], float))).astype(
            np.int64), "message-size decade"),
}


def columns_of(rows: list[list[float]], kind: KernelClass) -> Columns:
    """Column arrays of a list of rows in ``kind.columns`` order."""
    table = np.asarray(rows, dtype=float).reshape(-1, len(kind.columns))
    return {name: table[:, i] for i, name in enumerate(kind.columns)}


def subset(cols: Columns, keep: Array) -> Columns:
    """The rows of ``cols`` where ``keep``."""
    return {name: v[keep] for name, v in cols.items()}


def fixed_params(kind: KernelClass, engine: str) -> dict[str, float]:
    """Parameters of a class set by the engine's kernel, not fitted: the decode kernel's launch
    rules (:func:`.attention_kernel.decode_rules`)."""
    return attn.decode_rules(engine) if kind.name == "decode_attention" else {}


def fit_group(kind: KernelClass, cols: Columns, gpu: str, dtype: str,
              engine: str = "trtllm") -> dict[str, float]:
    """Least-squares parameters of one (GPU, dtype) group of ``engine``'s rows (:mod:`.fit`),
    with the class's fixed parameters of that engine (:func:`fixed_params`)."""
    fixed = fixed_params(kind, engine)

    def model(theta: Array) -> Array:
        return kind.price(cols, gpu, dtype, {**fixed, **dict(zip(kind.params, theta))})
    theta = fit_log_latency(model, cols["latency_s"], kind.starts())
    out = {**{name: float(v) for name, v in zip(kind.params, theta)}, **fixed}
    if kind.name == "gemm" and not gemm.KERNEL_PATH[dtype][0]:
        out["t_split_s"] = 0.0  # a kernel that does not split: the term never applies
    return out


__all__ = ["CLASSES", "Columns", "KernelClass", "columns_of", "fit_group", "fixed_params",
           "subset"]
