"""Matmul precisions as data: which peak rate a precision runs at, what its quantisation costs
and what a matmul keeps for its backward pass (docs/model.md, precisions).

Every recipe keeps weights and activations in BF16 between kernels and quantises each matmul
input before the GEMM (Transformer Engine's recipes): the activations X in the forward pass and
the output gradients dY in the backward (weights once per iteration, cached across microbatches).
Bytes per quantised element (HBM traffic of the separate quantisation kernels):

* ``fp8`` (current scaling, one FP32 scale per tensor): an amax pass reads the BF16 tensor
  (2 B), the cast reads it again (2 B) and writes the FP8 copy (1 B) and the transposed copy the
  other GEMM of the backward needs (1 B): 6 B.
* ``fp8-delayed`` (scale from the amax history, computed inside the cast): 2 + 1 + 1 = 4 B.
* ``mxfp8`` (Blackwell: one E8M0 scale per 32 consecutive values, along rows for the forward
  GEMM and along columns for the weight gradient): one pass reads 2 B and writes two FP8 copies
  with their scales, 2 + 2·(1 + 1/32) B.
* ``fp8-blockwise`` (DeepSeek-V3's recipe, Transformer Engine's ``Float8BlockScaling``: one FP32
  scale per 1×128 tile of activations and gradients, per 128×128 block of weights): the cast
  computes each tile's amax in the same pass, reads 2 B and writes the rowwise and the
  columnwise FP8 copies with their scales, 2 + 2·(1 + 4/128) B. Its GEMMs apply a scale per
  128-element slice of K, so they run below a per-tensor FP8 GEMM: cuBLAS 12.9's block-scaled
  FP8 matmuls on Hopper reach 1.75× the BF16 speed on large matmuls (NVIDIA technical blog,
  "Boosting Matrix Multiplication Speed and Flexibility with NVIDIA cuBLAS 12.9", 2025), where
  pre-quantised per-tensor FP8 reaches 1.92× (the FP8 ratio of model.validation.calibrate):
  ``efficiency_scale`` = 1.75 / 1.92 of the calibrated FP8 efficiency.
* ``nvfp4`` (Blackwell: E2M1 values with an E4M3 scale per 16 values and an FP32 tensor
  scale): an amax pass (2 B), then a pass that reads 2 B and writes two 4-bit copies with their
  scales, 2 + 2 + 2·(0.5 + 1/16) B.

Gathered by the distributed optimizer with ``fp8_param_gather`` (Megatron-Core's
``--fp8-param-gather``: the FP8 recipes keep the matmul weights in their quantised format, so the
data-parallel all-gather of the updated parameters moves those bytes instead of BF16 ones): one
byte per value plus the weights' scales — none to speak of per tensor, 1/32 B per value for
MXFP8, 4 B per 128×128 block for block-wise FP8. NVFP4 gathers BF16 (Megatron-Bridge's NVFP4
recipe turns the FP8 gather off; a separate FP4 gather is not modelled), as do bf16 and fp16.

Kept for the backward: the matmul input, in its quantised form under the FP8/FP4 recipes (TE
saves the quantised input for the weight-gradient GEMM; Megatron's MoE guide: "stores linear
layer inputs in FP8 instead of BF16"), one copy with its scales.

Sources: NVIDIA Transformer Engine documentation, "Low precision training" (FP8 current and
delayed scaling, MXFP8, NVFP4 recipes; "Activations saved for backward"), 2025–2026.
"""

from __future__ import annotations

from dataclasses import dataclass

# Which matmul formats each GPU generation's tensor cores (or matrix cores) run, from the vendors'
# datasheets and architecture papers:
# * ampere (A100): FP16/BF16, TF32, INT8/INT4; no FP8 (NVIDIA A100 Tensor Core GPU Architecture
#   whitepaper, 2020, table 1).
# * hopper (H100/H200/H800): adds FP8 E4M3/E5M2 with a per-tensor scale (NVIDIA H100 Tensor Core
#   GPU Architecture whitepaper, 2022, "FP8"); no block-scaled microscaling formats. Block-wise
#   FP8 (1x128/128x128 scales) is an FP8 GEMM with software scales: cuBLAS 12.9's block-scaled
#   FP8 matmuls on Hopper (NVIDIA technical blog, 2025), DeepSeek-V3 trained with it on H800s.
# * blackwell, blackwell-ultra (B200/GB200, B300/GB300): fifth-generation tensor cores add the
#   block-scaled MXFP8 (E8M0 scale per 32 values) and NVFP4 (E4M3 scale per 16 values) formats
#   in hardware (NVIDIA Blackwell Architecture Technical Brief, 2024; "Inside NVIDIA Blackwell
#   Ultra", NVIDIA technical blog, 2025).
# * cdna3 (MI300X): FP8 (E4M3/E5M2 "FNUZ") matrix cores at 2,614.9 TFLOP/s dense (AMD CDNA 3
#   Instinct MI300 architecture whitepaper, 2023); block-scaled FP8 GEMMs in software
#   (ROCm/aiter csrc/ck_gemm_a8w8_blockscale, 128x128 scales); MX formats (MXFP8, MXFP4) arrive
#   with CDNA 4 (MI350/MI355X, AMD CDNA 4 whitepaper, 2025), so none here.
_FP16 = ("ampere", "hopper", "blackwell", "blackwell-ultra", "cdna3")
_FP8 = ("hopper", "blackwell", "blackwell-ultra", "cdna3")
_BLACKWELL = ("blackwell", "blackwell-ultra")


@dataclass(frozen=True)
class Precision:
    """One matmul precision: its peak-rate and efficiency fields on a system, its quantisation
    bytes per element and the bytes per element of a kept matmul input."""

    name: str
    label: str
    peak_field: str  # System field with the dense matmul peak, TFLOP/s
    efficiency_key: str  # which calibrated GEMM efficiency applies (bf16, fp8, mxfp8, nvfp4)
    quantise_bytes_per_element: float
    kept_bytes_per_element: float
    efficiency_scale: float = 1.0  # its GEMMs' speed relative to the efficiency key's
    gathered_bytes_per_param: float = 2.0  # a weight in the fp8_param_gather all-gather
    generations: tuple[str, ...] = _FP16  # GPU generations whose tensor cores run the format

    @property
    def param_gather_factor(self) -> float:
        """Bytes of a parameter in the fp8_param_gather all-gather over the 2 of a BF16 one."""
        return self.gathered_bytes_per_param / 2.0

    @property
    def quantised(self) -> bool:
        return self.quantise_bytes_per_element > 0


PRECISIONS: dict[str, Precision] = {p.name: p for p in (
    Precision("bf16", "BF16", "matrix_tflops_fp16", "bf16", 0.0, 2.0),
    Precision("fp16", "FP16", "matrix_tflops_fp16", "bf16", 0.0, 2.0),
    Precision("fp8", "FP8 (current scaling)", "matrix_tflops_fp8", "fp8", 6.0, 1.0,
              gathered_bytes_per_param=1.0, generations=_FP8),
    Precision("fp8-delayed", "FP8 (delayed scaling)", "matrix_tflops_fp8", "fp8", 4.0, 1.0,
              gathered_bytes_per_param=1.0, generations=_FP8),
    Precision("fp8-blockwise", "FP8 (128-element blocks)", "matrix_tflops_fp8", "fp8",
              2.0 + 2 * (1.0 + 4 / 128), 1.0 + 4 / 128, efficiency_scale=1.75 / 1.92,
              gathered_bytes_per_param=1.0 + 4 / 128**2, generations=_FP8),
    Precision("mxfp8", "MXFP8 (32-element blocks)", "matrix_tflops_fp8", "mxfp8",
              2.0 + 2 * (1.0 + 1 / 32), 1.0 + 1 / 32, gathered_bytes_per_param=1.0 + 1 / 32,
              generations=_BLACKWELL),
    Precision("nvfp4", "NVFP4 (16-element blocks)", "matrix_tflops_fp4", "nvfp4",
              4.0 + 2 * (0.5 + 1 / 16), 0.5 + 1 / 16, generations=_BLACKWELL),
)}
NAMES: tuple[str, ...] = tuple(PRECISIONS)


def unsupported(name: str, generation: str, peak_tflops: float, gpu: str) -> str:
    """Why a GPU cannot run matmuls in precision ``name`` ('' when it can): its generation's
    tensor cores lack the format (the table above; a system without a generation is judged by
    its peak alone), or its spec gives no peak rate for it (``peak_tflops`` = 0)."""
    precision = PRECISIONS[name]
    able = [p.name for p in PRECISIONS.values() if generation in p.generations]
    # a peak field only this format reads (FP4's) states the tensor cores themselves: a what-if
    # part given an FP4 rate has FP4 tensor cores whatever its generation; a shared one (FP8's,
    # which MXFP8 also reads) says nothing of the block-scaled variant
    dedicated = sum(p.peak_field == precision.peak_field for p in PRECISIONS.values()) == 1
    stated = dedicated and peak_tflops > 0 and precision.peak_field != "matrix_tflops_bf16"
    if generation and generation not in precision.generations and not stated:
        where = ", ".join(g for g in precision.generations)
        choices = ", ".join(able[:-1]) + f" or {able[-1]}" if len(able) > 1 else able[0]
        return (f"{gpu} ({generation}) has no {precision.label} tensor cores: {name} runs on "
                f"{where} GPUs only; choose {choices}")
    if peak_tflops <= 0:
        return (f"{gpu} has no {precision.label} matrix rate ({precision.peak_field} = 0); "
                "choose bf16 or fp16")
    return ""
