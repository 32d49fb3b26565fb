"""The context every op is priced in (:class:`Ctx`): the model, the system, the mode, the
execution and the efficiencies its precision and stack give — built once per search by
:meth:`Ctx.make`, priced exactly or as lower bounds (:mod:`model.physics.pricing`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from model.errors import ModelError
from model.physics.attention_kernels import kernel_used, pass_efficiencies, supports
from model.physics.dims import model_dims
from model.physics.kernels import moe_training
from model.physics.kernels import training as kernel_training
from model.physics.op_sac_scope import check_model
from model.physics.optable import OpSpec, layer_share
from model.physics.pricing import Bound, Exact, Pricing
from model.specs.execution import DEFAULT_EXECUTION, Execution, resolve_execution
from model.specs.hardware import System
from model.specs.modes import Mode, resolve_mode
from model.specs.params import attention_keys
from model.specs.precision import PRECISIONS
from model.specs.transformer import Transformer


@dataclass
class Ctx:
    """What every op needs besides its spec: model sizes, the system and the mode."""

    model: Transformer
    system: System
    mode: Mode
    dims: dict[str, int]
    execution: Execution = DEFAULT_EXECUTION
    matrix_flop_per_s: float = 0.0  # peak of the matmuls at the execution's precision
    linear_efficiency: float = 0.8  # achievable fraction of that peak in the linear layers
    attention_efficiency: float = 0.8  # … in fused attention (always bf16)
    pricing: Pricing | None = None  # exact times (default) or lower bounds (physics.pricing)
    expert_efficiency: float = 0.8  # … in the routed experts' grouped GEMMs
    token_efficiency: float = 1.0  # fraction of the HBM bandwidth the MoE token kernels reach
    # (forward, backward) fractions of the BF16 peak of the execution's attention kernel, from
    # its published benchmark (model.physics.attention_kernels); None: attention_efficiency
    attention_passes: tuple[float, float] | None = None
    # the measured kernel layer (Execution.kernel_tables) where its tables cover the system:
    # the dense matmuls' GEMM kernel and the fused attention's (model.physics.kernels.training)
    gemm_kernel: kernel_training.GemmKernel | None = None
    attention_kernel: kernel_training.AttentionKernel | None = None
    # … and the routed experts' grouped GEMM kernel (model.physics.kernels.moe_training)
    expert_kernel: moe_training.ExpertKernel | None = None

    def __post_init__(self) -> None:
        if self.pricing is None:
            self.pricing = Exact(self.system, self.mode)

    def bounded(self) -> Ctx:
        """The same context pricing lower bounds over placements instead of exact times."""
        return replace(self, pricing=Bound(self.system, self.mode))

    @classmethod
    def make(cls, model: Transformer, system: System, mode: object,
             execution: object = None) -> Ctx:
        mode = resolve_mode(mode)
        ex = resolve_execution(execution)
        if mode.is_paper and ex != DEFAULT_EXECUTION:
            raise ModelError("the paper mode models one execution (flash attention, sequence "
                             "parallelism, 1F1B, distributed optimizer, bf16); drop the "
                             "execution options or use the default model")
        if ex.recompute == "op-sac":  # TorchTitan's policy: Llama-style blocks only
            check_model(model)
        precision = PRECISIONS[ex.precision]
        peak = system.matrix_peak_flop_per_s(ex.precision)  # ModelError if the GPU lacks it
        eta = system.gemm_efficiency(precision.efficiency_key) * precision.efficiency_scale
        attention = system.attention_efficiency or system.flop_efficiency
        if (ex.offload != "none" or ex.offload_layers) and (system.host_memory_gb <= 0
                                     or system.host_bandwidth_gb_per_s <= 0):
            raise ModelError(f"system '{system.name}' has no host memory tier "
                             "(host_memory_gb, host_bandwidth_gb_per_s); offload needs one")
        # the experts' grouped GEMMs: the dense efficiency unless the system sets their own
        own = (system.expert_flop_efficiency_fp8 if precision.quantised
               else system.expert_flop_efficiency)
        expert = eta if own is None else own * precision.efficiency_scale
        gemm_kernel = attention_kernel = expert_kernel = None
        if ex.kernel_tables:
            gemm_kernel = kernel_training.gemm_kernel_of(system, ex.precision)
            attention_kernel = kernel_attention(model, system, mode, ex)
            if model.experts:
                expert_kernel = moe_training.expert_kernel_of(system, ex.precision)
        if expert_kernel is not None and own is None:  # the kernel's dtype asymptote, as below
            expert = system.gemm_efficiency("bf16")
        if gemm_kernel is not None:  # the kernel's own dtype asymptote replaces the FP8 ratio
            eta = system.gemm_efficiency("bf16")
        return cls(model, system, mode, model_dims(model, mode), ex, peak, eta, attention,
                   expert_efficiency=expert,
                   token_efficiency=system.moe_token_efficiency or 1.0,
                   attention_passes=attention_passes(model, system, mode, ex),
                   gemm_kernel=gemm_kernel, attention_kernel=attention_kernel,
                   expert_kernel=expert_kernel)

    @property
    def causal_attention(self) -> bool:
        """Whether attention is causal (a kernel skips the masked blocks)."""
        return self.model.causal and not self.mode.non_causal_attention

    def share(self, spec: OpSpec) -> float:
        """Share of the pipeline's layers an op runs in (:func:`~model.physics.optable.
        layer_share`)."""
        return layer_share(self.model, spec)


def kernel_attention(model: Transformer, system: System, mode: Mode, ex: Execution
                     ) -> kernel_training.AttentionKernel | None:
    """The measured kernel layer's fused attention for this model on this system
    (:func:`model.physics.kernels.training.attention_kernel_of`), None without flash attention
    or where the tables do not cover it."""
    kernel = kernel_used(ex.attention_kernel, model.attention_sinks)
    if not ex.flash_attention or kernel == "math":
        return None
    causal = model.causal and not mode.non_causal_attention
    return kernel_training.attention_kernel_of(system, kernel, causal,
                                               float(model.qk_head_dim), float(model.seq_len))


def attention_passes(model: Transformer, system: System, mode: Mode, ex: Execution
                     ) -> tuple[float, float] | None:
    """(forward, backward) efficiency of the execution's attention kernel for this model's
    sequence length, query/key head dimension and mask on this system's generation; None for
    ``auto`` (the stack's calibrated ``attention_efficiency``)."""
    if ex.attention_kernel == "auto":
        return None
    causal = model.causal and not mode.non_causal_attention
    kernel = kernel_used(ex.attention_kernel, model.attention_sinks)
    seq = float(model.seq_len)
    if model.sliding_window and supports(kernel, "sliding_window"):  # the blocks it visits
        seq = 2.0 * attention_keys(model, seq) if causal else attention_keys(model, seq)
    return pass_efficiencies(kernel, system.generation, causal, float(model.qk_head_dim), seq)
