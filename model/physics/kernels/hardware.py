"""The few datasheet numbers the kernel models divide by, per GPU of the measured tables:
the tensor-core peak of each GEMM/attention dtype, HBM bandwidth and SM count, read from the
project's system presets (``model/data/systems``), so fitted efficiencies are fractions of the
same peaks the rest of the model uses."""

from __future__ import annotations

from dataclasses import dataclass

from model.specs import memo
from model.specs.hardware import load_system

# AIConfigurator's GPU folder → the project's system preset
GPU_PRESETS = {"h100_sxm": "h100", "h200_sxm": "h200", "b200_sxm": "b200",
               "gb200": "gb200-nvl72", "a100_sxm": "a100"}
# a kernel dtype → the peak field it runs at (FP8 with 128-element block scales runs FP8 MMAs)
PEAK_FIELD = {"bfloat16": "matrix_tflops_fp16", "fp8": "matrix_tflops_fp8",
              "fp8_block": "matrix_tflops_fp8", "nvfp4": "matrix_tflops_fp4"}
# bytes per input element: NVFP4 is 4-bit values plus one FP8 scale per 16 (0.5 + 1/16)
INPUT_BYTES = {"bfloat16": 2.0, "fp8": 1.0, "fp8_block": 1.0 + 1.0 / 128.0, "nvfp4": 0.5625}


@dataclass(frozen=True)
class KernelHardware:
    """Datasheet rates of one GPU: peaks in FLOP/s by dtype, HBM in bytes/s, SMs."""

    gpu: str
    peak_flop_per_s: dict[str, float]
    hbm_bytes_per_s: float
    sm_count: int

    def peak(self, dtype: str) -> float:
        """Dense tensor-core peak (FLOP/s) of ``dtype``; ValueError where the GPU has none."""
        value = self.peak_flop_per_s.get(dtype, 0.0)
        if value <= 0:
            raise ValueError(f"{self.gpu} has no {dtype} tensor-core rate")
        return value


@memo.lru("kernel-layer hardware", 64)
def kernel_hardware(gpu: str) -> KernelHardware:
    """The datasheet rates of an AIConfigurator GPU folder name or a project preset name."""
    system = load_system(GPU_PRESETS.get(gpu, gpu))
    peaks = {dtype: float(getattr(system, field)) * 1e12 for dtype, field in PEAK_FIELD.items()}
    return KernelHardware(gpu=gpu, peak_flop_per_s=peaks,
                          hbm_bytes_per_s=float(system.hbm_bandwidth_gb_per_s) * 1e9,
                          sm_count=int(system.sm_count))


__all__ = ["GPU_PRESETS", "INPUT_BYTES", "KernelHardware", "PEAK_FIELD", "kernel_hardware"]
