"""The fused MoE kernel (routed experts' grouped GEMMs of one layer on one GPU) as a roofline of
what runs: the touched experts' weights read from HBM against their tokens' tile-padded matmuls
on the tensor cores, plus a fixed floor.

For T tokens entering the layer routed top-k over E experts, a GPU holding E_l = E/ep experts
of f = F/tp intermediate features each (g = 3 weight matrices gated — gate, up, down — or 2),
with n_e of its experts touched by r routed rows in R row tiles of B = 128 rows
(:mod:`model.physics.routing`: each touched expert's rows padded to whole tiles):

    t = t₀ + P / (η_m · B_hbm) + max(F_pad / (η_c · P_dtype), (W + A) / (η_m · B_hbm))
    P = 2 · 2 · (T + r) · e                  (BF16: the permute and the un-permute/top-k
                                              reduce, kernels of their own: :func:`permute_s`)
    F_pad = 2 · R · B · g · e · f            (every padded row through fc1 and fc2)
    W = n_e · g · e · f · s_w                (only touched experts' weights, scales included)
    A = 2 · r · (2e + 2(g − 1) f)            (BF16: the permuted rows in and out of the GEMMs,
                                              the intermediate)

(the max per grouped GEMM, :func:`grouped_gemm_s`, over waves of CTAs with a per-CTA bandwidth
limit). The permute term was added after the residuals of the law without it ran against
tokens per expert: 20–37 % too fast at 32–512 routed rows per touched expert, where the copies
of the routed rows are as many bytes as the experts' weights and no tile hides them.

four parameters per GPU × dtype × engine (t₀ s, η_c, η_m, β bytes/s per CTA), fitted by least
squares on log latency (:func:`model.physics.kernels.fit.fit_log_latency`) to NVIDIA
AIConfigurator 0.12.0's measured ``moe`` tables (``scripts/fit_moe_kernels.py``; the parameters
and a validation subset in ``model/data/reference/kernels/moe_kernels.json``). Engines whose
kernels differ are fitted apart: TensorRT-LLM's CUTLASS grouped GEMM (and FlashInfer's wrapper
of it), the TensorRT-LLM-Gen kernels, SGLang/vLLM's Triton ``fused_moe``, DeepGEMM, Marlin
(weight-only INT4/MXFP4).

Weight formats: BF16, FP8 (per tensor), FP8 with 128×128 block scales, NVFP4 (E2M1 + an E4M3
scale per 16), MXFP4 weights with BF16 (``w4a16_mxfp4``, gpt-oss's native format with an E8M0
scale per 32) or MXFP8 activations (``w4a8_mxfp4_mxfp8``), INT4 weight-only (group 128);
refused (:func:`unsupported`) on a GPU generation whose tensor cores lack the activation format
(:mod:`model.specs.precision`'s table) or where no table measured it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from model.errors import ModelError
from model.physics import routing
from model.physics.gemm import depth_efficiency, depth_overhead
from model.physics.kernels.fit import fit_log_latency
from model.specs import memo
from model.specs.hardware import load_system
from model.specs.schema import DATA_DIR
from model.specs.transformer import Transformer

Array = np.ndarray
Columns = dict[str, Array]
DATA = DATA_DIR / "reference" / "kernels" / "moe_kernels.json"
TILE_ROWS = 128.0  # edge of a grouped GEMM output tile (CUTLASS/DeepGEMM/Triton's M block)
TRIM = 3.0  # robust standard deviations beyond which a row is left out of the refit
K_BLOCK = 64.0  # reduction elements per main-loop step of a tile (CUTLASS/Triton BLOCK_K)
TILES = (64.0, 128.0)  # row-tile heights a fit chooses from (the kernels' M block configs)
PARAMS = ("launch_s", "eta_compute", "eta_hbm", "cta_bytes_per_s")
STARTS = ([2e-5, 0.5, 0.7, 2e10], [1e-5, 0.2, 0.4, 5e9], [5e-5, 0.8, 0.9, 6e10])
_FP16, _FP8 = ("ampere", "hopper", "blackwell", "blackwell-ultra"), (
    "hopper", "blackwell", "blackwell-ultra")
_BLACKWELL = ("blackwell", "blackwell-ultra")
# AIConfigurator dtype → (weight bytes per element, peak field of the MMA it runs, generations)
MOE_DTYPES: dict[str, tuple[float, str, tuple[str, ...]]] = {
    "bfloat16": (2.0, "matrix_tflops_fp16", _FP16),
    "fp8": (1.0, "matrix_tflops_fp8", _FP8),
    "fp8_block": (1.0 + 4.0 / 128 ** 2, "matrix_tflops_fp8", _FP8),
    "nvfp4": (0.5 + 1.0 / 16, "matrix_tflops_fp4", _BLACKWELL),
    "w4a16_mxfp4": (0.5 + 1.0 / 32, "matrix_tflops_fp16", _FP8),  # dequantised to BF16 MMAs
    "w4a8_mxfp4_mxfp8": (0.5 + 1.0 / 32, "matrix_tflops_fp8", _BLACKWELL),
    "int4_wo": (0.5 + 2.0 / 128, "matrix_tflops_fp16", _FP16),
}
# a serving weight precision → the MoE table dtype its TensorRT-LLM fused MoE runs
SERVING_DTYPES = {"bf16": "bfloat16", "fp16": "bfloat16", "fp8": "fp8", "nvfp4": "nvfp4"}
SERVING_ENGINE = "trtllm/cutlass"
# AIConfigurator GPU folder → project system preset
GPU_PRESETS = {"h100_sxm": "h100", "h200_sxm": "h200", "b200_sxm": "b200",
               "gb200": "gb200-nvl72", "b300_sxm": "b300", "gb300": "gb300-nvl72",
               "a100_sxm": "a100"}


class MoEKernelError(ModelError):
    """A MoE kernel the GPU cannot run or no table measured."""


def engine_of(framework: str, kernel_source: str) -> str:
    """The engine × kernel family of a table row (``framework/family``)."""
    s = kernel_source.lower()
    if "marlin" in s:
        family = "marlin"
    elif "deepgemm" in s:
        family = "deepgemm"
    elif "triton" in s and "trtllm" not in s.replace("flashinfer_trtllm", ""):
        family = "triton"
    elif "cutlass" in s or "nongated" in s:
        family = "cutlass"
    else:  # moe_torch_flow / min_latency / flashinfer_trtllm: TensorRT-LLM-Gen kernels
        family = "trtllm-gen"
    return f"{framework}/{family}"


@memo.lru("MoE kernel hardware", 64)
def _hardware(gpu: str, dtype: str) -> tuple[float, float, float, str]:
    """(peak FLOP/s of the dtype's MMA, HBM bytes/s, SMs, peak field) of a GPU."""
    s = load_system(GPU_PRESETS.get(gpu, gpu))
    field = MOE_DTYPES[dtype][1]
    return (float(getattr(s, field)) * 1e12, float(s.hbm_bandwidth_gb_per_s) * 1e9,
            float(s.sm_count), field)


def unsupported(gpu: str, dtype: str) -> str:
    """Why ``gpu`` cannot run a MoE kernel of ``dtype`` ('' where it can)."""
    if dtype not in MOE_DTYPES:
        return f"unknown MoE weight format {dtype!r}: one of {', '.join(MOE_DTYPES)}"
    s = load_system(GPU_PRESETS.get(gpu, gpu))
    if s.generation and s.generation not in MOE_DTYPES[dtype][2]:
        return (f"{s.name} ({s.generation}) has no tensor cores for {dtype} MoE kernels: "
                f"they run on {', '.join(MOE_DTYPES[dtype][2])}")
    return ""


def latency_s(cols: Columns, gpu: str, dtype: str, theta, tile: float = TILE_ROWS) -> Array:
    """The kernel's seconds (module docstring) for rows of ``cols``: tokens, hidden, inter,
    tp, gated, touched, routed and ``tiles_<B>`` the row tiles of B = ``tile`` rows (one GPU's,
    :mod:`model.physics.routing`)."""
    t0, eta_c, eta_m, cta_bw = (float(x) for x in theta)
    peak, bw, sms, field = _hardware(gpu, dtype)
    e, f, tok, routed = cols["hidden"], cols["inter"] / cols["tp"], cols["tokens"], cols["routed"]
    g = np.where(cols["gated"] > 0, 3.0, 2.0)
    row_tiles = cols[f"tiles_{int(tile)}"]
    k0, s_w = depth_overhead(field), MOE_DTYPES[dtype][0]
    total = t0 + permute_s(tok, routed, e, eta_m * bw)
    # fc1 (gate, up: e → (g − 1)f) and fc2 (f → e) on the permuted rows
    for k, n, acts in ((e, (g - 1.0) * f, 2.0 * routed * (e + (g - 1.0) * f)),
                       (f, e, 2.0 * routed * (f + e))):
        total = total + grouped_gemm_s(row_tiles, tile, np.ceil(n / TILE_ROWS),
                                       np.ceil(k / K_BLOCK) * K_BLOCK, k,
                                       cols["touched"] * k * n * s_w + acts,
                                       (k0, eta_c * peak, eta_m * bw, cta_bw, sms))
    return total


def permute_s(tokens: Array, routed: Array, hidden: Array, hbm_bytes_per_s: float) -> Array:
    """Seconds of the token copies moved by kernels of their own, before and after the grouped
    GEMMs, at η_m·B_hbm: the permute into expert order (read T·e, write r·e) and the un-permute
    with the top-k weighted reduce (read r·e, write T·e), BF16: 2·2·(T + r)·e bytes.
    TensorRT-LLM's CUTLASS MoE runs them as ``expandInputRowsKernel`` and
    ``finalizeMoeRoutingKernel`` (NVIDIA/TensorRT-LLM @ ac73e31,
    cpp/tensorrt_llm/kernels/cutlass_kernels/moe_gemm/moe_kernels.cu); vLLM's and SGLang's
    Triton ``fused_moe`` gathers its rows inside the GEMM but writes the r·e expert outputs and
    reduces them over top-k in its own ``moe_sum`` pass, and runs the gated activation (r·3f
    elements) as a kernel of its own — taken here at the same 2·2·(T + r)·e bytes. Serial:
    no GEMM tile overlaps them."""
    return 4.0 * (tokens + routed) * hidden / hbm_bytes_per_s


def grouped_gemm_s(row_tiles: Array, tile: float, col_tiles: Array, depth_padded: Array,
                   depth: Array, hbm_bytes: Array, rates: tuple) -> Array:
    """Seconds of one grouped GEMM of the fused kernel (module docstring), rates = (k₀, η_c·P
    FLOP/s, η_m·B_hbm bytes/s, β bytes/s per CTA, SMs): ``row_tiles`` tiles of ``tile`` rows
    × ``col_tiles`` of 128 columns, each reducing ``depth_padded`` elements (``depth`` before
    padding to K blocks), run in waves over the SMs at the depth efficiency d/(d + k₀), against
    ``hbm_bytes`` read and written at min(η_m·B_hbm, CTAs·β):
    max(2·R·B·d_pad·C·128 / (w·d/(d + k₀)·η_c·P), M / rate)."""
    k0, flops, bw, cta_bw, sms = rates
    ctas = row_tiles * col_tiles
    waves = np.maximum(np.ceil(ctas / sms), 1.0) * sms
    eff = depth_efficiency(depth, k0) * np.where(ctas > 0, ctas / waves, 1.0)
    # every tile is whole: rows to B, columns to 128, the reduction to K blocks of 64
    padded = 2.0 * row_tiles * tile * depth_padded * col_tiles * TILE_ROWS
    compute = padded / (np.maximum(eff, 1e-9) * flops)
    rate = np.minimum(bw, np.maximum(ctas, 1.0) * cta_bw)
    return np.maximum(compute, hbm_bytes / rate)


def relative_errors_pct(cols: Columns, gpu: str, dtype: str, theta,
                        tile: float = TILE_ROWS) -> Array:
    t = cols["latency_s"]
    return 100.0 * np.abs(latency_s(cols, gpu, dtype, theta, tile) - t) / t


def physical(theta) -> Array:
    """θ with both efficiencies capped at 1 (no kernel beats its peak or its HBM): a table
    whose rows never reach the compute roof (e.g. few tokens per expert only) would otherwise
    let η_c run off to any value above 1 that leaves its predictions unchanged."""
    th = np.array(theta, dtype=float)
    th[1:3] = np.minimum(th[1:3], 1.0)
    return th


def _fit(cols: Columns, gpu: str, dtype: str, tile: float, keep: Array, starts) -> Array:
    sub = {k: v[keep] for k, v in cols.items()}
    return physical(fit_log_latency(
        lambda th: latency_s(sub, gpu, dtype, physical(th), tile), sub["latency_s"], starts))


def fit_group(cols: Columns, gpu: str, dtype: str, tiles: tuple[float, ...] = TILES,
              starts=STARTS) -> tuple[Array, float]:
    """(θ = (t₀, η_c, η_m, β), row-tile height) of one GPU × dtype × engine by least squares on
    log latency, the tile height the better of :data:`TILES`. Robust: refitted once without the
    rows whose log residual is more than :data:`TRIM` robust standard deviations (1.4826·MAD)
    from the median — the tables hold timings several times any neighbour's (e.g. a 2 GB
    weight read taking 3.8 ms on H200, 5× its HBM time, next to 0.7 ms for 4× the tokens)."""
    best, best_cost = None, np.inf
    t = cols["latency_s"]
    for tile in tiles:
        keep = np.ones(len(t), dtype=bool)
        theta = _fit(cols, gpu, dtype, tile, keep, starts)
        r = np.log(latency_s(cols, gpu, dtype, theta, tile) / t)
        mad = 1.4826 * np.median(np.abs(r - np.median(r)))
        keep = np.abs(r - np.median(r)) <= TRIM * max(mad, 1e-3)
        theta = _fit(cols, gpu, dtype, tile, keep, [theta])
        r = np.log(latency_s(cols, gpu, dtype, theta, tile) / t)[keep]
        if float(r @ r) / len(r) < best_cost:
            best, best_cost = (theta, tile), float(r @ r) / len(r)
    return best


def config_id(cols: Columns) -> Array:
    """One id per expert configuration (hidden, intermediate, top-k, experts)."""
    key = np.stack([cols[c] for c in ("hidden", "inter", "top_k", "experts")], axis=1)
    return np.unique(key, axis=0, return_inverse=True)[1].ravel()


def held_out_errors_pct(cols: Columns, gpu: str, dtype: str,
                        full: tuple[Array, float] | None = None) -> Array:
    """|t̂ − t|/t of every row predicted by the fit without its expert configuration, each
    refit started from the full fit ``full`` (θ, tile height) with its tile height; a group of
    one configuration is predicted by nothing (no rows returned)."""
    theta, tile = full if full is not None else fit_group(cols, gpu, dtype)
    ids = config_id(cols)
    out = np.full(len(ids), np.nan)
    for i in np.unique(ids):
        rest = {k: v[ids != i] for k, v in cols.items()}
        held = {k: v[ids == i] for k, v in cols.items()}
        if len(rest["latency_s"]) == 0:
            continue
        th, _ = fit_group(rest, gpu, dtype, (tile,), [theta])
        out[ids == i] = relative_errors_pct(held, gpu, dtype, th, tile)
    return out[np.isfinite(out)]


@memo.lru("MoE kernel fits", 1)
def _data() -> dict:
    return json.loads(DATA.read_text(encoding="utf-8"))


@dataclass(frozen=True)
class KernelFit:
    """The shipped fit of one GPU (AIConfigurator folder) × dtype × engine: θ and tile height."""

    gpu: str
    dtype: str
    engine: str
    theta: tuple[float, ...]
    tile: float


def fitted(gpu: str, dtype: str, engine: str) -> KernelFit | None:
    """The shipped fit of a GPU (folder or preset name) × dtype × engine, None if none."""
    folder = next((k for k, v in GPU_PRESETS.items() if v == gpu), gpu)
    for f in _data()["fits"]:
        if (f["gpu"], f["dtype"], f["engine"]) == (folder, dtype, engine):
            return KernelFit(folder, dtype, engine, tuple(f["params"][p] for p in PARAMS),
                             float(f["tile"]))
    return None


def require(gpu: str, dtype: str, engine: str = SERVING_ENGINE) -> KernelFit:
    """The shipped fit, or :class:`MoEKernelError` saying in words why there is none (the GPU
    lacks the format, or no table measured it)."""
    why = unsupported(gpu, dtype)
    if why:
        raise MoEKernelError(why)
    fit = fitted(gpu, dtype, engine)
    if fit is None:
        raise MoEKernelError(f"no measured table has {dtype} MoE kernels of {engine} on {gpu}")
    return fit


@memo.lru("MoE kernel serving fits", 64)
def serving_fit(system: str, weight_precision: str,
                engine: str = SERVING_ENGINE) -> KernelFit | None:
    """The fit a serving step prices its routed experts with: the system preset's GPU, the
    weight precision's MoE dtype (:data:`SERVING_DTYPES`), TensorRT-LLM's CUTLASS fused MoE;
    None where no table measured it (the step falls back to the roofline)."""
    dtype = SERVING_DTYPES.get(weight_precision)
    return fitted(system, dtype, engine) if dtype else None


ENGINE_KERNELS = DATA_DIR / "reference" / "kernels" / "engine_kernels.json"


@memo.lru("MoE kernel per serving engine", 1)
def _engine_kernels() -> dict:
    return json.loads(ENGINE_KERNELS.read_text(encoding="utf-8"))


@memo.lru("MoE kernel serving fits per engine", 64)
def engine_serving_fit(system: str, generation: str, weight_precision: str,
                       kernels: str = "trtllm") -> KernelFit | None:
    """The fit a serving step of an engine's stack (its ``kernels``) prices its routed experts
    with: TensorRT-LLM's as :func:`serving_fit`; vLLM's and SGLang's the fused MoE kernel that
    engine runs on the GPU generation at the weight precision
    (``model/data/reference/kernels/engine_kernels.json``, which cites the tables); None where
    no fit covers it (the step keeps the roofline)."""
    if kernels == "trtllm":
        return serving_fit(system, weight_precision)
    entry = _engine_kernels()["moe"].get(kernels, {}).get(generation, {}).get(weight_precision)
    if entry is None:
        return None
    engine, dtype = entry.split(":")
    return fitted(system, dtype, engine)


def grouped_moe_s(fit: KernelFit, model: Transformer, tokens: Array, local: Array,
                  etp: Array) -> Array:
    """Seconds of one MoE layer's fused expert kernel on one GPU: ``tokens`` tokens entering
    the layer routed top-k (balanced) over the model's E experts, ``local`` of them on this GPU,
    their features split over ``etp`` (:func:`latency_s` on the expected touched experts,
    routed rows and row tiles of :mod:`model.physics.routing`)."""
    t = np.asarray(tokens, dtype=float)
    loc = np.asarray(local, dtype=float)
    cols = {"tokens": t, "hidden": float(model.hidden), "inter": float(model.expert_ffn),
            "tp": np.asarray(etp, dtype=float), "gated": 1.0 if model.mlp == "swiglu" else 0.0,
            "touched": loc * routing.touched_share(t, model.top_k, model.experts),
            "routed": t * model.top_k * loc / model.experts,
            f"tiles_{int(fit.tile)}": loc * routing.row_tiles_per_expert(
                t, model.top_k, model.experts, fit.tile)}
    return latency_s(cols, fit.gpu, fit.dtype, fit.theta, fit.tile)


def validation_rows() -> list[dict]:
    """Per GPU × dtype × engine: the held-out error of the shipped fit (leave one expert
    configuration out, ``scripts/fit_moe_kernels.py``) and the shipped parameters' error on the
    validation subset, recomputed here: {class, gpu, dtype, engine, n, median_pct, p90_pct,
    subset_n, subset_median_pct}."""
    data = _data()
    rows = []
    for f in data["fits"]:
        sub = [r for r in data["subset"]
               if (r["gpu"], r["dtype"], r["engine"]) == (f["gpu"], f["dtype"], f["engine"])]
        cols = {k: np.array([r[k] for r in sub], dtype=float) for k in sub[0]
                if k not in ("gpu", "dtype", "engine")}
        theta = [f["params"][p] for p in PARAMS]
        err = relative_errors_pct(cols, f["gpu"], f["dtype"], theta, float(f["tile"]))
        rows.append({"class": "moe", "gpu": f["gpu"], "dtype": f["dtype"],
                     "engine": f["engine"], "n": f["rows"],
                     "median_pct": round(f["held_out_median_pct"], 1),
                     "p90_pct": round(f["held_out_p90_pct"], 1), "subset_n": len(sub),
                     "subset_median_pct": round(float(np.median(err)), 1)})
    return rows


__all__ = ["ENGINE_KERNELS", "MOE_DTYPES", "KernelFit", "MoEKernelError", "PARAMS",
           "SERVING_DTYPES", "TILE_ROWS", "config_id", "engine_of", "engine_serving_fit",
           "fit_group", "fitted", "grouped_gemm_s", "grouped_moe_s", "held_out_errors_pct",
           "latency_s", "permute_s", "physical", "relative_errors_pct", "require",
           "serving_fit", "unsupported", "validation_rows"]
