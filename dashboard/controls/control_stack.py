"""The software-stack records of the control table (:mod:`dashboard.controls.control_table`, which
places them in the execution group): the kernels, pipeline schedule and optimizer a stack runs
(section ``kernels``), and PyTorch FSDP's options (section ``fsdp``: shown, and drawn open, only
with ZeRO stage 3, the only stage whose weights FSDP gathers). A stack preset fills them from its
execution (``model/data/stacks/*.json``); choices and ranges are the estimator's own tables
(:mod:`model.specs.execution`)."""

from __future__ import annotations

from dashboard.controls.control_moe import ZERO3
from dashboard.controls.control_record import ON_OFF, Control
from model.specs import execution as ex

FSDP_VERSION_NAMES = ("ZeRO-3 (DeepSpeed / Megatron)", "PyTorch FSDP1", "PyTorch FSDP2")

KERNEL_CONTROLS = (
    Control("attention_kernel", "Attention kernel", "execution", "dropdown", str,
            "The fused attention kernel, priced at its published TFLOP/s for the sequence "
            "length, head dimension, causal mask and GPU (model/physics/attention_kernels.py): "
            "fa2 (FlashAttention-2), fa3 (FlashAttention-3, Hopper only), cudnn, triton (the "
            "Triton flash attention of 2023), math (unfused PyTorch); auto: the stack's "
            "calibrated attention efficiency.", choices=ex.ATTENTION_KERNELS,
            spec="attention_kernel", section="kernels"),
    Control("elementwise", "Element-wise kernels", "execution", "dropdown", str,
            "How the kernels between the matmuls run: fused (one kernel per op), eager "
            "(unfused PyTorch: every cast, norm step, residual add and RoPE step a pass over "
            "HBM) or compile (torch.compile-fused); auto: fused.", choices=ex.ELEMENTWISE,
            spec="elementwise", section="kernels"),
    Control("pipeline_schedule", "Pipeline schedule", "execution", "dropdown", str,
            "1f1b (interleaved by the stages per GPU above) or dualpipe (DeepSeek-V3 §3.2.1: "
            "two pipelines in opposite directions, each GPU holding two stages' weights, a "
            "smaller bubble; not with interleaving).", choices=ex.PIPELINE_SCHEDULES,
            spec="pipeline_schedule", section="kernels"),
    Control("optimizer_bf16_moments", "BF16 Adam moments", "execution", "switch", bool,
            "Adam's m and v kept in BF16 (Megatron-Core's precision-aware optimizer): 8 instead "
            "of 12 optimizer bytes per parameter, less optimizer-step traffic.",
            choices=ON_OFF[0], names=ON_OFF[1], spec="optimizer_bf16_moments",
            section="kernels"),
    Control("recompute_norm_up_proj", "Recompute norms & up-projections", "execution",
            "switch", bool,
            "DeepSeek-V3's light recompute (§3.2.3): every RMSNorm and MLA's up-projections "
            "rerun in the backward, so the layers after them keep none of their outputs.",
            choices=ON_OFF[0], names=ON_OFF[1], spec="recompute_norm_up_proj",
            section="kernels"),
)
TP_CONTROL = Control(
    "tp_style", "TP implementation", "execution", "dropdown", str,
    "How tensor parallelism with sequence parallelism moves activations: megatron (the "
    "column-parallel input kept as its shard and gathered again in the backward, in BF16) or "
    "dtensor (PyTorch's parallelize_module, torchtitan: the gathered input kept, nothing "
    "gathered again; with FP8, torchao gathers inputs and output gradients in FP8).",
    choices=ex.TP_STYLES, spec="tp_style", section="kernels")
KERNEL_TABLES_CONTROL = Control(
    "kernel_tables", "Measured kernel tables", "execution", "switch", bool,
    "The dense matmuls (forward, dX and dW GEMMs at their own shapes) and fused attention "
    "priced through the kernel layer fitted on measured kernel tables where they cover the GPU "
    "(model/physics/kernels/training.py); off: tile waves and the stack's attention kernel.",
    choices=ON_OFF[0], names=ON_OFF[1], spec="kernel_tables", section="kernels")
KERNEL_CONTROLS = (*KERNEL_CONTROLS, TP_CONTROL, KERNEL_TABLES_CONTROL)

FSDP_CONTROLS = (
    Control("fsdp_version", "FSDP implementation", "execution", "dropdown", int,
            "With ZeRO-3, how the weight gathers run: as DeepSpeed and Megatron run them, "
            "PyTorch FSDP1 (flat parameters) or FSDP2 (per-parameter shards, the gathered "
            "output copied into the parameters: twice its bytes of HBM traffic).",
            choices=ex.FSDP_VERSIONS, names=FSDP_VERSION_NAMES, spec="fsdp_version",
            section="fsdp", when=ZERO3),
    Control("fsdp_reshard_after_forward", "Reshard after forward", "execution", "switch",
            bool, "FSDP frees the gathered weights after each block's forward and gathers "
            "them again for its backward (FULL_SHARD); off (SHARD_GRAD_OP): one gather per "
            "microbatch, the weights held until the backward.", choices=ON_OFF[0],
            names=ON_OFF[1], spec="fsdp_reshard_after_forward", section="fsdp", when=ZERO3),
    Control("fsdp_gather_dtype", "Gather dtype", "execution", "dropdown", str,
            "The dtype FSDP gathers the parameters in: bf16 (2 bytes per parameter), fp32 "
            "(4: FSDP1 without a param_dtype, as Composer ran in 2023); auto: the precision's.",
            choices=ex.GATHER_DTYPES, spec="fsdp_gather_dtype", section="fsdp", when=ZERO3),
    Control("fsdp_prefetch", "Prefetch next gather", "execution", "radio", int,
            "On: the next block's all-gather is issued before the current block's compute and "
            "overlaps it (FSDP2, FSDP1 BACKWARD_PRE); off: the backward's gather waits for the "
            "current gradient (FSDP1 BACKWARD_POST), exposed.", choices=ex.LITERALS[
                "fsdp_prefetch"], names=("off", "on"), spec="fsdp_prefetch", section="fsdp",
            when=ZERO3),
    Control("fsdp_shard_group", "HSDP shard group", "execution", "number", int,
            "HSDP: shard over groups of this many GPUs and replicate across them (gathers and "
            "reduce-scatters inside a group, one all-reduce of the gradients across replicas "
            "per step); 0: shard over the whole data-parallel group.", unit="GPUs",
            lo=ex.INTEGERS["fsdp_shard_group"][0], hi=ex.INTEGERS["fsdp_shard_group"][1],
            spec="fsdp_shard_group", section="fsdp", when=ZERO3),
)
