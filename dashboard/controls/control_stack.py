"""The software-stack records of the control table (:mod:`dashboard.controls.control_table`, which
places them in the execution group): the kernels, pipeline schedule and optimizer a stack runs
(section ``kernels``), and PyTorch FSDP's options (section ``fsdp``: shown, and drawn open, only
with ZeRO stage 3, the only stage whose weights FSDP gathers). A stack preset fills them from its
execution (``model/data/stacks/*.json``); choices and ranges are the estimator's own tables
(:mod:`model.specs.execution`)."""

from __future__ import annotations

from dashboard.controls.control_moe import ZERO3
from dashboard.controls.control_record import ON_OFF, Control

FSDP_VERSION_NAMES = ("ZeRO-3 (DeepSpeed / Megatron)", "PyTorch FSDP1", "PyTorch FSDP2")

KERNEL_CONTROLS = (
    Control("attention_kernel", "Attention kernel", "execution", "dropdown",
            spec="attention_kernel", section="kernels"),
    Control("elementwise", "Element-wise kernels", "execution", "dropdown", spec="elementwise",
            section="kernels"),
    Control("pipeline_schedule", "Pipeline schedule", "execution", "dropdown",
            spec="pipeline_schedule", section="kernels"),
    Control("optimizer_bf16_moments", "BF16 Adam moments", "execution", "switch", names=ON_OFF[1],
            spec="optimizer_bf16_moments", section="kernels"),
    Control("recompute_norm_up_proj", "Recompute norms & up-projections", "execution", "switch",
            names=ON_OFF[1], spec="recompute_norm_up_proj", section="kernels"),
    Control("loss_fp32_eager", "Eager FP32 loss", "execution", "switch", names=ON_OFF[1],
            spec="loss_fp32_eager", section="kernels"),
)
TP_CONTROL = Control("tp_style", "TP implementation", "execution", "dropdown", spec="tp_style",
                     section="kernels")
KERNEL_TABLES_CONTROL = Control("kernel_tables", "Measured kernel tables", "execution",
                                "switch", names=ON_OFF[1], spec="kernel_tables",
                                section="kernels")
KERNEL_CONTROLS = (*KERNEL_CONTROLS, TP_CONTROL, KERNEL_TABLES_CONTROL)

FSDP_CONTROLS = (
    Control("fsdp_version", "FSDP implementation", "execution", "dropdown",
            names=FSDP_VERSION_NAMES, spec="fsdp_version", section="fsdp", when=ZERO3),
    Control("fsdp_reshard_after_forward", "Reshard after forward", "execution", "switch",
            names=ON_OFF[1], spec="fsdp_reshard_after_forward", section="fsdp", when=ZERO3),
    Control("fsdp_gather_dtype", "Gather dtype", "execution", "dropdown",
            spec="fsdp_gather_dtype", section="fsdp", when=ZERO3),
    Control("fsdp_prefetch", "Prefetch next gather", "execution", "radio", names=("off", "on"),
            spec="fsdp_prefetch", section="fsdp", when=ZERO3),
    Control("fsdp_shard_group", "HSDP shard group", "execution", "number",
            spec="fsdp_shard_group", section="fsdp", when=ZERO3),
)
