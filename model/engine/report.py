"""The one result schema: tidy DataFrames for searches (one row per configuration) and for the
per-op breakdown of one configuration. Units are in every column name (s, GB = 1e9 bytes,
TFLOP/s); conversion from the model's SI units happens only here."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from model.engine.economics import cost_columns
from model.engine.kernel_report import kernel_columns
from model.engine.space import COLUMNS
from model.physics.block import OpResult
from model.physics.context import Ctx
from model.physics.memory import fits_in_memory
from model.physics.optable import Shards
from model.physics.volumes import comm_volume_bytes
from model.specs import memo
from model.specs.hardware import System
from model.specs.transformer import Transformer

GB = 1e9
# the components of the iteration time (they add up to it); t_ep_comm_s: the exposed
# expert-parallel all-to-all of a mixture of experts (0 for a dense model)
TIME_COLUMNS = ("t_compute_s", "t_memory_s", "t_tp_comm_s", "t_ep_comm_s", "t_pp_comm_s",
                "t_dp_comm_s", "t_bubble_s", "t_optimizer_s", "t_offload_s")
MEMORY_COLUMNS = ("weights_gb", "gradients_gb", "optimizer_gb", "activations_gb")


def result_frame(model: Transformer, system: System, strategy: str, gpus: int | np.ndarray,
                 global_batch: int, res: dict[str, np.ndarray], idx: np.ndarray,
                 constants: dict[str, Any] | None = None) -> pd.DataFrame:
    """Rows ``idx`` of an evaluated space as a DataFrame (see the module docstring for units).

    ``gpus`` is the GPU count of every row, or an array of one per row (rows of several counts).

    samples/s = GBS / t; tokens/s = samples/s · l; train_days = samples in the budget /
    samples/s / 86400 (NaN without a budget); days_per_1t_tokens = 1e12 / tokens/s / 86400;
    tflops_per_gpu = model FLOPs per GPU per iteration / t (no recompute); mfu = that / the
    dense matrix peak of the precision the matmuls run in (``mfu_peak_tflops``: the FP8 peak
    for fp8, else the fp16/bf16 one); hfu counts recomputed FLOPs too;
    model_flops_per_token = the model's 6 × active parameters + attention convention
    (:mod:`model.specs.params`; with experts, the routed ones only). ``constants`` are extra
    columns with one value for every row: the execution's choices (its ``precision`` picks the
    peak). GPU-hours, energy, cost and days with failures: :mod:`model.engine.economics`.
    """
    t = res["iteration_time_s"][idx]
    samples_per_s = global_batch / t
    peak = system.matrix_peak_flop_per_s((constants or {}).get("precision", "bf16"))
    samples = model.training_samples
    rows = len(idx)
    per_row = np.asarray(gpus, dtype=np.int64) if np.ndim(gpus) else np.full(rows, gpus)
    data: dict[str, object] = {"gpus": per_row, "strategy": _text(strategy, rows)}
    for name in COLUMNS:
        data[name] = res[name][idx]
    data["interleave"] = res["interleave"][idx]
    data["recompute_layers"] = res["recompute_layers"][idx]
    data["n_microbatches"] = res["n_microbatches"][idx]
    data["layers_per_stage"] = res["layers_per_stage"][idx]
    data.update({
        "samples_per_s": samples_per_s,
        "tokens_per_s": samples_per_s * model.seq_len,
        "iteration_time_s": t,
        "train_days": (samples / samples_per_s / 86400.0 if samples is not None
                       else np.full(len(idx), np.nan)),
        "days_per_1t_tokens": 1e12 / (samples_per_s * model.seq_len) / 86400.0,
        "tflops_per_gpu": res["model_flop_per_gpu"][idx] / t / 1e12,
        "model_tflops_per_gpu": res["model_flop_per_gpu"][idx] / t / 1e12,
        "hardware_tflops_per_gpu": res["flop_per_gpu"][idx] / t / 1e12,
        "mfu": res["model_flop_per_gpu"][idx] / t / peak,
        "hfu": res["flop_per_gpu"][idx] / t / peak,
        "mfu_peak_tflops": np.full(rows, peak / 1e12),
        "model_flops_per_token": np.full(rows, model.model_flops_per_token),
    })
    data.update(cost_columns(model, system, per_row, data["train_days"]))
    data["pricing"] = _text(data["pricing"], rows)
    for name in TIME_COLUMNS:
        data[name] = res[name][idx]
    data["memory_gb"] = res["memory_bytes"][idx] / GB
    for name, key in zip(MEMORY_COLUMNS, ("weights_bytes", "gradients_bytes", "optimizer_bytes",
                                          "activations_bytes")):
        data[name] = res[key][idx] / GB
    data["host_memory_gb"] = res["host_bytes"][idx] / GB
    data["hbm_capacity_gb"] = np.full(rows, system.hbm_capacity_gb)
    data["fits"] = fits_in_memory({k: res[k][idx] for k in ("memory_bytes", "host_bytes")},
                                  system.usable_hbm_bytes, system.host_memory_gb * 1e9)
    for name, value in (constants or {}).items():  # an array: pandas infers a list slowly
        data[name] = (_text(value, rows) if isinstance(value, str) and rows
                      else np.full(rows, value, dtype=object if isinstance(value, str) else None))
    return _frame(data, rows)


# text columns by (value, rows): 256 columns, each of at most _TEXT_ROWS rows (a few MB in all)
_TEXTS = memo.Table("text columns", 256, memo.TABLES)
_TEXT_ROWS = 1024


def _text(value: object, rows: int) -> object:
    """A text column of ``rows`` times ``value`` as the frame stores it (pandas' string dtype:
    what it infers from text), remembered per (value, rows) up to :data:`_TEXT_ROWS` rows:
    inferring it is most of the cost of such a column in a small frame, and the frame copies
    it. Without rows, or for anything but text, ``value`` itself (pandas broadcasts it)."""
    if not rows or not isinstance(value, str):
        return value
    found = _TEXTS.get((value, rows))
    if found is None:
        found = pd.array(np.full(rows, value, dtype=object), dtype="str")
        if rows > _TEXT_ROWS:
            return found
        _TEXTS.put((value, rows), found)
    return found


# zero-row frames by their columns' types
_EMPTY_FRAMES = memo.Table("zero-row frames", 64, memo.TABLES)


def _frame(data: dict[str, object], rows: int) -> pd.DataFrame:
    """``pd.DataFrame(data)`` (its index given: 0…rows − 1, not worked out from the columns).
    A frame without rows depends only on the names and types of its columns (and the values
    of its one-value columns, which set their dtype): built once per process, and a copy
    returned."""
    if rows:
        return _stored_frame(data, rows)
    key = tuple((name, v.dtype.str if isinstance(v, np.ndarray) else (type(v), v))
                for name, v in data.items())
    try:
        frame = _EMPTY_FRAMES.get(key)
    except TypeError:  # an unhashable one-value column: not remembered
        return pd.DataFrame(data)
    if frame is None:
        frame = pd.DataFrame(data)
        _EMPTY_FRAMES.put(key, frame)
    return frame.copy()


def _stored_frame(data: dict[str, object], rows: int) -> pd.DataFrame:
    """``pd.DataFrame(data, index=pd.RangeIndex(rows))``, built without the constructor's
    per-column checks and inference when every column is already what a frame stores: a 1-D
    numeric or boolean numpy array of ``rows`` values, or a pandas array (the text columns of
    :func:`_text`, copied as the dict constructor copies them, since the remembered one must
    not be shared). The checks cost 2–3 µs a column, most of a search's frame (87 columns:
    0.33 ms against 0.12 ms); the frame is the same, dtypes and blocks included
    (tests/test_report_frame.py). pandas' ``DataFrame._from_arrays(…, verify_integrity=False)``
    is the constructor's own path for such columns (pandas/core/frame.py, 2.2–3.1); any other
    column, or a pandas without it, takes the constructor."""
    arrays = []
    for v in data.values():
        if isinstance(v, pd.api.extensions.ExtensionArray) and len(v) == rows:
            arrays.append(v.copy())
        elif (isinstance(v, np.ndarray) and v.ndim == 1 and len(v) == rows
              and v.dtype.kind in "biuf"):
            arrays.append(v)
        else:
            return pd.DataFrame(data, index=pd.RangeIndex(rows))
    if not hasattr(pd.DataFrame, "_from_arrays"):
        return pd.DataFrame(data, index=pd.RangeIndex(rows))
    return pd.DataFrame._from_arrays(arrays, pd.Index(list(data)), pd.RangeIndex(rows),
                                     verify_integrity=False)


def describe_comms(r: OpResult, sh: Shards, ctx: Ctx) -> str:
    """Each collective of an op: kind, volume (MB), group axes and size, members per domain."""
    parts = []
    for phase, comms in (("fwd", r.spec.fwd), ("bwd", r.spec.bwd)):
        for c in comms:
            size, tau = int(np.ravel(sh.size(c.axes))[0]), int(np.ravel(sh.tau(c.axes))[0])
            if size == 1:
                continue
            mb = float(comm_volume_bytes(c.volume, r.spec, c.axes, sh, ctx)[0]) / 1e6
            parts.append(f"{phase} {c.collective.name.lower()} {mb:.3g} MB over "
                         f"{'·'.join(c.axes)}={size} ({tau} per domain)")
    return "; ".join(parts)


def _bound(r: OpResult, ctx: Ctx) -> str:
    """What limits the op most (model/physics/roofline.py: kernel_times prices its kernels):

    * ``communication``: its exposed collectives exceed both its FLOP time and its exposed HBM
      time;
    * ``memory``: its kernels' HBM time (their bytes, separate FP8 quantisation kernels
      included, at the achievable bandwidth) exceeds their launch + FLOP time — the roofline's
      memory side;
    * ``overhead``: else, when the fixed launch overhead (one kernel launch per direction,
      ``kernel_overhead_s``) exceeds the op's FLOP time: small elementwise kernels (biases,
      dropouts) whose arithmetic is not what they wait for;
    * ``compute``: else.
    """
    comp = float(r.fwd.t_comp[0] + r.bwd.t_comp[0])
    mem = float(r.fwd.t_mem_exposed[0] + r.bwd.t_mem_exposed[0])
    comm = float(r.fwd.t_comm[0] + r.bwd.t_comm[0])
    if comm > max(comp, mem):
        return "communication"
    c = r.counts
    hbm_s = float(np.sum(c.bytes_fwd) + np.sum(c.bytes_bwd) + np.sum(c.extra_bytes_fwd)
                  + np.sum(c.extra_bytes_bwd)) / ctx.system.hbm_bytes_per_s
    if hbm_s > comp:
        return "memory"
    launch = 2.0 * ctx.system.kernel_overhead_s
    return "overhead" if launch > comp - launch else "compute"


def op_table(results: list[tuple[str, OpResult]], n_microbatches: int,
             layers_per_stage: int, sh: Shards, ctx: Ctx) -> pd.DataFrame:
    """Per-op breakdown of one configuration: counts per microbatch, and seconds per iteration.

    ``t_iteration_s`` = (t_fwd + t_bwd) · n_microbatches · (layers per stage for block ops): where
    the time of the slowest stage goes. ``intensity_flop_per_byte`` = FLOPs / HBM bytes.
    ``kernel_time_{fwd,bwd}_s``, ``implied_{flop,hbm}_efficiency_{fwd,bwd}`` and
    ``matrix_peak_tflops``: each direction's kernel time and the fractions of peak it implies
    (:mod:`model.engine.kernel_report`).
    """
    rows = []
    for where, r in results:
        c = r.counts
        flop_f = float(np.sum(c.flop_mat_fwd) + np.sum(c.flop_vec_fwd))
        flop_b = float(np.sum(c.flop_mat_bwd) + np.sum(c.flop_vec_bwd))
        # all HBM traffic of the op: its kernel's and its separate (FP8 quantisation) kernels'
        bytes_f = float(np.sum(c.bytes_fwd) + np.sum(c.extra_bytes_fwd))
        bytes_b = float(np.sum(c.bytes_bwd) + np.sum(c.extra_bytes_bwd))
        repeat = n_microbatches * (layers_per_stage if where == "block" else 1)
        t_f, t_b = float(r.fwd.t[0]), float(r.bwd.t[0])
        rows.append({
            "where": where,
            "op": r.spec.name,
            "kind": r.spec.kind.value,
            "flop_fwd": flop_f,
            "flop_bwd": flop_b,
            "flop_matrix_fraction": float(np.sum(c.flop_mat_fwd) + np.sum(c.flop_mat_bwd))
            / max(flop_f + flop_b, 1.0),
            "hbm_bytes_fwd": bytes_f,
            "hbm_bytes_bwd": bytes_b,
            "intensity_flop_per_byte": (flop_f + flop_b) / max(bytes_f + bytes_b, 1.0),
            "comm_bytes_fwd": float(r.fwd.comm_bytes[0]),
            "comm_bytes_bwd": float(r.bwd.comm_bytes[0]),
            "collectives": describe_comms(r, sh, ctx),
            "activation_bytes": float(np.sum(c.act_bytes)),
            "weight_bytes": float(np.sum(c.weight_bytes)),
            "t_fwd_s": t_f,
            "t_bwd_s": t_b,
            "t_compute_s": float(r.fwd.t_comp[0] + r.bwd.t_comp[0]),
            "t_memory_exposed_s": float(r.fwd.t_mem_exposed[0] + r.bwd.t_mem_exposed[0]),
            "t_comm_s": float(r.fwd.t_comm[0] + r.bwd.t_comm[0]),
            "bound": _bound(r, ctx),
            "t_iteration_s": (t_f + t_b) * repeat,
            **kernel_columns(r, ctx),
        })
    return pd.DataFrame(rows)
