"""Training's routed-expert GEMMs priced through the kernel layer (``Execution.kernel_tables``):
the forward grouped GEMM and the backward's two, dX and dW, each at its own shape through the
fitted fused-MoE kernel model of :mod:`model.physics.kernels.moe_kernel` (NVIDIA
AIConfigurator 0.12.0's measured ``moe`` tables, TensorRT-LLM's CUTLASS grouped GEMM).

A GPU holds E_l local experts; R routed rows reach them (the op's rows: the sequence shard's
tokens × top-k × the busiest GPU's load × etp). Balanced top-k routing gives each expert
m ~ Binomial(N, k/E) rows, N = (R/E_l)·E/k the tokens whose routing fills it
(:mod:`model.physics.routing`), so the kernel runs n_e = E_l·P(m > 0) touched experts, each
padded to its own row tiles: T_B = E_l·E[⌈m/B⌉] tiles of the fit's B rows. For a linear
Y[m, n] = X[m, k]·W[k, n] per expert (s_w bytes per weight, 2 per activation, as the fit):

* forward: T_B × ⌈n/128⌉ tiles, reduction k;  HBM n_e·k·n·s_w + 2·R·(k + n);
* dX = dY·Wᵀ: T_B × ⌈k/128⌉ tiles, reduction n;  the same bytes;
* dW = Xᵀ·dY per expert, output [k, n]: n_e·⌈k/B⌉ × ⌈n/128⌉ tiles, each reducing its
  expert's m rows padded to K blocks of 64 (E_l·E[⌈m/64⌉]·64 over the n_e touched experts)
  at the depth efficiency of the mean m̄ = R/n_e; HBM 2·R·(k + n) read plus the FP32 main
  gradient read and written, 8·n_e·k·n (Megatron-Core's ``gradient_accumulation_fusion``:
  Transformer Engine's ``GroupedLinear(fuse_wgrad_accumulation=True)`` accumulates each
  expert's wgrad into its ``main_grad`` in FP32). With few tokens per expert the reduction is
  shallow and mostly padding: dW's efficiency per FLOP falls, as the model's terms say.

Each time is :func:`model.physics.kernels.moe_kernel.grouped_gemm_s` with the fit's η_m, β,
tile height and the dtype's depth overhead k₀, and its compute rate η·(η_c/η_c,bf16)·P: the
stack's GEMM efficiency η (its calibrated fraction of the BF16 peak on large GEMMs), times
the table's asymptote of the precision's kernel over its BF16 one (0.80 for per-tensor FP8 on
H100), at the system's peak P of the precision — the convention of the dense path
(:mod:`model.physics.kernels.training`): the kernel model gives the shape, the stack the
asymptote, so ``stack η / table η`` stays what the kernels do not explain. The fit's own
asymptote η_c (0.51 of the BF16 peak on H100, below cuBLAS's 0.86) is not imposed: DeepGEMM's
grouped FP8 GEMMs reach its dense ones' rate at 1,024 rows per group (README, 2025-03). The
fit's fixed floor t₀ is left out (zero or 0.1 ms in every fit): the op's kernel launches are
priced by its own launch count (:func:`model.physics.moe.expert_launches`).

The times enter the op as the efficiencies they imply (F/(t·η·P), the backward's over
t_dX + t_dW), so the roofline of :func:`model.physics.block.kernel_times` returns them
exactly, and the op's HBM bytes become the kernels' (touched experts only). Precisions run
the tables' kernel: BF16, per-tensor FP8 (MXFP8 as FP8, as the dense path), FP8 with block
scales, NVFP4; where no fit covers the GPU × dtype the op keeps the old shape terms.

The router's logits GEMM runs the measured BF16 GEMM kernel (:func:`model.physics.block.
_router`). The MoE all-to-all stays on the two-tier model of :mod:`model.physics.collectives`:
the tables' NCCL all-to-all (``comm_kernel``) covers 2–8 GPUs of one node (GB200: 2–4), the
training runs' expert-parallel groups 8–64 GPUs across nodes or an NVL72 domain.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from model.physics import routing
from model.physics.gemm import depth_overhead
from model.physics.kernels import moe_kernel
from model.physics.kernels.training import gemm_kernel_of, table_gpu
from model.specs import memo
from model.specs.hardware import System, load_system

Array = np.ndarray
ENGINE = "trtllm/cutlass"  # the tables' CUTLASS grouped GEMM (every table GPU, BF16 and FP8)
# FP8 with 128×128 block scales where CUTLASS has no fit (Blackwell): DeepGEMM's grouped GEMM
BLOCK_ENGINE = "trtllm/deepgemm"
# GPUs with MoE tables but no GEMM fit → the GPU whose cuBLASLt table gives their FP8/BF16
# asymptote (the same tensor cores per SM and the same FP8:BF16 peak ratio, 2:1)
CUBLAS_STANDIN = {"b300": "b200", "gb300-nvl72": "gb200-nvl72"}
ACT_BYTES = 2.0  # bytes per activation element, the fit's convention (moe_kernel)
MAIN_GRAD_BYTES = 8.0  # FP32 main gradient read and written by the fused wgrad accumulation
# a training precision → the MoE table dtype its grouped GEMM runs (MXFP8 as per-tensor FP8)
TRAINING_MOE_DTYPE = {"bf16": "bfloat16", "fp16": "bfloat16", "fp8": "fp8",
                      "fp8-delayed": "fp8", "mxfp8": "fp8", "fp8-blockwise": "fp8_block",
                      "nvfp4": "nvfp4"}

# system preset → the MoE tables' GPU folder (B300 and GB300 have MoE tables, no GEMM fit)
MOE_TABLE_GPU = {preset: gpu for gpu, preset in moe_kernel.GPU_PRESETS.items()}


@dataclass(frozen=True)
class ExpertKernel:
    """The fitted grouped-GEMM kernel of one table GPU × dtype, on a system's SMs and HBM."""

    dtype: str
    relative: float  # the dtype's asymptote over BF16 on the GPU (module docstring)
    k0: float  # depth overhead of the dtype's MMA (reduction elements)
    weight_bytes: float  # bytes per weight element, scales included
    tile: float  # rows per row tile of the fit
    hbm_bytes_per_s: float  # η_m·B_hbm of the system
    cta_bytes_per_s: float  # β: bytes/s one CTA streams
    sm_count: int


def expert_kernel_of(system: System, precision: str) -> ExpertKernel | None:
    """The measured grouped-GEMM kernel of ``system`` in ``precision``, None where no table
    fit covers it (A100, MI300X …)."""
    gpu, dtype = MOE_TABLE_GPU.get(system.name, table_gpu(system)), TRAINING_MOE_DTYPE.get(
        precision)
    if gpu is None or dtype is None or system.sm_count <= 0:
        return None
    standin = CUBLAS_STANDIN.get(system.name)
    dense = gemm_kernel_of(load_system(standin) if standin else system, precision)
    relative = None if dense is None else dense.eta / dense.reference_eta
    return _expert_kernel(gpu, dtype, int(system.sm_count), float(system.hbm_bytes_per_s),
                          relative)


@memo.lru("kernel-layer expert kernels", 32)
def _expert_kernel(gpu: str, dtype: str, sm_count: int, hbm: float, relative: float | None
                   ) -> ExpertKernel | None:
    """:func:`expert_kernel_of` once per table GPU × dtype × system (every evaluation of a
    search builds its context); ``relative`` the cuBLASLt table's asymptote of the dtype over
    BF16 (None: the grouped kernel's own, η_c over η_c,bf16)."""
    fit = moe_kernel.fitted(gpu, dtype, ENGINE) or moe_kernel.fitted(gpu, dtype, BLOCK_ENGINE)
    ref = moe_kernel.fitted(gpu, "bfloat16", ENGINE)
    if fit is None or ref is None:
        return None
    params = dict(zip(moe_kernel.PARAMS, fit.theta))
    if relative is None:
        relative = params["eta_compute"] / ref.theta[1]
    field = moe_kernel.MOE_DTYPES[dtype][1]
    return ExpertKernel(dtype, relative, depth_overhead(field),
                        moe_kernel.MOE_DTYPES[dtype][0], fit.tile, params["eta_hbm"] * hbm,
                        params["cta_bytes_per_s"], sm_count)


def expert_gemm_times(kern: ExpertKernel, flop_per_s: float, routed: Array, local: Array,
                      top_k: float, experts: float, k: Array, n: Array
                      ) -> tuple[Array, Array, Array, Array, Array]:
    """(t_fwd, t_dX, t_dW, HBM bytes forward, HBM bytes backward) of the local experts'
    grouped GEMM X[m, k]·W[k, n] on ``routed`` rows over ``local`` experts (module
    docstring); ``flop_per_s`` = η·P, the stack's rate on large BF16 GEMMs at the precision's
    peak."""
    r = np.asarray(routed, dtype=float)
    loc = np.maximum(np.asarray(local, dtype=float), 1.0)
    k, n = np.asarray(k, dtype=float), np.asarray(n, dtype=float)
    tokens = r / loc * experts / min(top_k, experts)  # N: each expert's m ~ Bin(N, k/E)
    touched = loc * routing.touched_share(tokens, top_k, experts)
    row_tiles = loc * routing.row_tiles_per_expert(tokens, top_k, experts, kern.tile)
    k_blocks = loc * routing.row_tiles_per_expert(tokens, top_k, experts, moe_kernel.K_BLOCK)
    rates = (kern.k0, flop_per_s * kern.relative, kern.hbm_bytes_per_s, kern.cta_bytes_per_s,
             float(kern.sm_count))
    weights, acts = touched * k * n, ACT_BYTES * r * (k + n)
    bytes_fwd = weights * kern.weight_bytes + acts
    t_fwd = moe_kernel.grouped_gemm_s(row_tiles, kern.tile, np.ceil(n / moe_kernel.TILE_ROWS),
                                      _padded(k), k, bytes_fwd, rates)
    t_dx = moe_kernel.grouped_gemm_s(row_tiles, kern.tile, np.ceil(k / moe_kernel.TILE_ROWS),
                                     _padded(n), n, bytes_fwd, rates)
    live = np.maximum(touched, 1e-12)
    bytes_dw = acts + MAIN_GRAD_BYTES * weights
    t_dw = moe_kernel.grouped_gemm_s(touched * np.ceil(k / kern.tile), kern.tile,
                                     np.ceil(n / moe_kernel.TILE_ROWS),
                                     moe_kernel.K_BLOCK * k_blocks / live, r / live, bytes_dw,
                                     rates)
    return t_fwd, t_dx, t_dw, bytes_fwd, bytes_fwd + bytes_dw


def _padded(depth: Array) -> Array:
    """A reduction of ``depth`` elements padded to whole K blocks of 64."""
    return np.ceil(depth / moe_kernel.K_BLOCK) * moe_kernel.K_BLOCK


def implied_efficiency(flop: Array, seconds: Array, flop_per_s: float) -> Array:
    """The efficiency (over η·P) at which ``flop`` FLOPs take ``seconds``: F/(t·η·P), so
    that the roofline's F/(η·wave·P) is ``seconds`` again; 1 where nothing runs."""
    t = np.asarray(seconds, dtype=float)
    return np.where(t > 0, np.asarray(flop, dtype=float) / (np.maximum(t, 1e-30) * flop_per_s),
                    1.0)


__all__ = ["ACT_BYTES", "BLOCK_ENGINE", "CUBLAS_STANDIN", "ENGINE", "ExpertKernel",
           "MAIN_GRAD_BYTES", "MOE_TABLE_GPU", "TRAINING_MOE_DTYPE", "expert_gemm_times",
           "expert_kernel_of", "implied_efficiency"]
