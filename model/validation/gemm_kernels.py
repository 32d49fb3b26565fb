"""Fit the shape-aware GEMM constants (model/physics/gemm.py) on published kernel benchmarks.

:func:`fit` (tests/test_moe_kernels.py checks it; ``python bench/gemm_kernels.py`` prints the
rows).

The table (model/data/reference/gemm_kernels.json: deepseek-ai/DeepGEMM README @ 55ab91f, FP8
GEMMs with 128-element block scales on H800) gives TFLOP/s by (groups, rows per group, n, k).
Each row is priced as the model prices a grouped GEMM on the h800 preset: its FLOPs and HBM
bytes (model.physics.moe.grouped_linear), its wave quantisation with each group's rows padded
to whole tiles (grouped_wave_efficiency), the depth efficiency k/(k + k0) (model.physics.gemm)
and the roofline max(t_c, t_m) of model.physics.block, with the kernel's asymptotic efficiency A
a free factor (the stacks' calibrated efficiency plays its part in the model). A and k0
minimise the squared log error over the rows with at least 256 rows per group (training
shapes; the 64- and 128-row rows are decoding shapes, printed but not fitted). A partial
overlap of compute and HBM time, max + alpha·min, was tried as a third parameter: its best
alpha is 0 (the rows with 256 rows per group are already HBM-bound in the model's bytes), so
the model keeps the plain roofline.
"""

from __future__ import annotations

import json

import numpy as np

from model.physics.moe import grouped_linear, grouped_wave_efficiency
from model.physics.ops import wave_efficiency
from model.specs.hardware import load_system
from model.specs.schema import DATA_DIR

TABLE = DATA_DIR / "reference" / "gemm_kernels.json"
MIN_ROWS = 256
A_GRID = np.linspace(0.5, 1.0, 101)
K0_GRID = np.arange(0.0, 1000.0, 10.0)


def rows() -> np.ndarray:
    """(groups, rows per group, n, k, TFLOP/s) of every table row."""
    tables = json.loads(TABLE.read_text())["tables"]
    out = [[1, m, n, k, tf] for m, n, k, tf, _ in tables["normal"]["rows"]]
    for key in ("grouped_contiguous", "grouped_masked"):
        out += [[g, m, n, k, tf] for g, m, n, k, tf, _ in tables[key]["rows"]]
    return np.array(out, dtype=float)


def _shapes(r: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, float, float]:
    """Per row: FLOPs, HBM bytes and wave efficiency as the model counts them; the peak
    (FLOP/s) and HBM rate (bytes/s) of the table's system."""
    system = load_system(json.loads(TABLE.read_text())["system"])
    g, m, n, k = r[:, 0], r[:, 1], r[:, 2], r[:, 3]
    counts = grouped_linear(1.0, g * m, k, n, g, 2.0)
    wave = grouped_wave_efficiency(g * m, g, n, system.gemm_tile, system.sm_count)
    return (counts.flop_mat_fwd, counts.bytes_fwd, wave, system.matrix_tflops_fp8 * 1e12,
            system.hbm_bytes_per_s)


def predicted_tflops(r: np.ndarray, a, k0) -> np.ndarray:
    """The model's TFLOP/s of each row (module docstring); a and k0 broadcast against the
    rows (a trailing axis)."""
    flop, hbm, wave, peak, rate = _shapes(r)
    k = r[:, 3]
    t_c = flop / (np.asarray(a)[..., None] * peak * wave * k / (k + np.asarray(k0)[..., None]))
    t_m = hbm / rate
    return flop / np.maximum(t_c, t_m) / 1e12


def fit(r: np.ndarray) -> tuple[float, float]:
    """(A, k0) minimising the squared log error over ``r`` on a grid."""
    a, k0 = np.meshgrid(A_GRID, K0_GRID, indexing="ij")
    err = np.log(predicted_tflops(r, a, k0) / r[:, 4])
    i = np.unravel_index(int(np.argmin((err ** 2).sum(axis=-1))), a.shape)
    return float(a[i]), float(k0[i])


# --- Blackwell: a published depth series (the table's "blackwell" entry) -------------------
BF16_K0_GRID = np.arange(0.0, 800.0, 5.0)


def blackwell_rows() -> np.ndarray:
    """(m, n, k, TFLOP/s) of the Blackwell depth series: B200 BF16 cuBLAS GEMMs of one m × n
    and reductions k = 256–2048 (linkedin/Liger-Kernel #1380, its cuBLAS column)."""
    table = json.loads(TABLE.read_text())["blackwell"]
    r = np.array(table["rows"], dtype=float)
    m, n, k, ms = r.T
    return np.column_stack([m, n, k, 2 * m * n * k / (ms * 1e-3) / 1e12])


def blackwell_tflops(r: np.ndarray, a, k0) -> np.ndarray:
    """The model's BF16 TFLOP/s of each Blackwell row on the table's system: the roofline
    max(F/(A·P·w·k/(k + k0)), M/B) of one matmul (model.physics.ops.linear's forward bytes,
    the wave quantisation of its tiles); a and k0 broadcast (a trailing axis)."""
    table = json.loads(TABLE.read_text())["blackwell"]
    system = load_system(table["system"])
    m, n, k = r[:, 0], r[:, 1], r[:, 2]
    counts = grouped_linear(1.0, m, k, n, 1.0, 2.0)
    wave = grouped_wave_efficiency(m, 1.0, n, system.gemm_tile, system.sm_count)
    peak = system.matrix_tflops_fp16 * 1e12
    t_c = counts.flop_mat_fwd / (np.asarray(a)[..., None] * peak * wave
                                 * k / (k + np.asarray(k0)[..., None]))
    t_m = counts.bytes_fwd / system.hbm_bytes_per_s
    return counts.flop_mat_fwd / np.maximum(t_c, t_m) / 1e12


def fit_blackwell() -> tuple[float, float]:
    """(A, k0) of the Blackwell series, k0 in BF16 units (model.physics.gemm.depth_overhead
    ("matrix_tflops_fp16") is Hopper's 190): least squares of log TFLOP/s on a grid."""
    r = blackwell_rows()
    a, k0 = np.meshgrid(A_GRID, BF16_K0_GRID, indexing="ij")
    err = np.log(blackwell_tflops(r, a, k0) / r[:, 3])
    i = np.unravel_index(int(np.argmin((err ** 2).sum(axis=-1))), a.shape)
    return float(a[i]), float(k0[i])
# --- the second table: XLA's GEMM timings on B200 and H100 (a check, never fitted into the model)
XLA_TABLE = DATA_DIR / "reference" / "xla_gemm_shapes.json"
XLA_COLUMNS = {"matrix_tflops_fp16": "bf16_tflops", "matrix_tflops_fp8": "fp8_tflops"}
T0_GRID_S = np.arange(0.0, 10.5e-6, 0.5e-6)  # a fixed time per call: launch and timing


def xla_rows(system: str, peak_field: str) -> np.ndarray:
    """(b, m, n, k, TFLOP/s) of XLA's table for ``system`` (b200, h100) at the precision whose
    peak is ``peak_field``."""
    table = json.loads(XLA_TABLE.read_text())["tables"][system]
    col = table["columns"].index(XLA_COLUMNS[peak_field])
    return np.array([r[:4] + [r[col]] for r in table["rows"]], dtype=float)


def xla_depth_fit(system: str, peak_field: str) -> tuple[float, float, float]:
    """(A, k0, t0 in s) of the model's GEMM time on XLA's table: each batched GEMM of b·⌈m/128⌉·
    ⌈n/128⌉ output tiles priced as the model prices a dense one (its wave quantisation on the
    system's SMs, depth k/(k + k0), the roofline with 2-byte elements as model.physics.block
    counts them) plus a fixed time t0 per call (the kernel launch, which the model charges
    apart as its kernel overhead). Only GEMMs of at least one full wave of tiles: smaller ones
    leave SMs idle whatever their depth. A, k0 and t0 minimise the squared log error."""
    sysm = load_system(system)
    b, m, n, k, tflops = xla_rows(system, peak_field).T
    tiles = b * np.ceil(m / sysm.gemm_tile) * np.ceil(n / sysm.gemm_tile)
    keep = tiles >= sysm.sm_count
    b, m, n, k, tflops, tiles = (x[keep] for x in (b, m, n, k, tflops, tiles))
    flop = 2.0 * b * m * n * k
    t_m = 2.0 * b * (m * k + k * n + m * n) / sysm.hbm_bytes_per_s
    busy = flop / (getattr(sysm, peak_field) * 1e12 * wave_efficiency(
        m * b, n, sysm.gemm_tile, sysm.sm_count))
    a, k0 = np.meshgrid(A_GRID, K0_GRID, indexing="ij")
    best = (np.inf, 0.0, 0.0, 0.0)
    for t0 in T0_GRID_S:
        t_c = busy / (a[..., None] * k / (k + k0[..., None]))
        err = np.log(flop / (np.maximum(t_c, t_m) + t0) / (tflops * 1e12))
        sse = (err ** 2).sum(axis=-1)
        i = np.unravel_index(int(np.argmin(sse)), sse.shape)
        if sse[i] < best[0]:
            best = (float(sse[i]), float(a[i]), float(k0[i]), float(t0))
    return best[1], best[2], best[3]
