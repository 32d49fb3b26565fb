"""The field table of :class:`~model.specs.execution.Execution`: each option's kind (on/off,
one of a fixed set of values, an integer or a number in a range) and its allowed values. Every
front end derives its options from it (the command line's flags, model.cli.options; the
dashboard's controls and the scenario's keys, dashboard/controls/control_table.py), and
:class:`Execution` checks its values against it; :mod:`model.specs.execution` re-exports it.
"""

from __future__ import annotations

from model.specs.precision import NAMES

RECOMPUTE = ("none", "selective", "op-sac", "full")
PRECISIONS = NAMES  # model.specs.precision
ZERO_STAGES = (0, 1, 2, 3)
OFFLOAD = ("none", "optimizer", "activations", "weights", "all")
CONTEXT_ATTENTION = ("allgather", "ring", "pytorch")
EP_DISPATCHERS = ("alltoall", "flex")
EXPERT_GEMMS = ("multi-stream", "grouped")  # model.physics.gemm.EXPERT_GEMM_STREAMS
PIPELINE_SCHEDULES = ("1f1b", "dualpipe")
# attention kernels priced from their published benchmarks (model.physics.attention_kernels);
# "auto": the stack's calibrated attention efficiency (fused, or unfused without flash attention)
ATTENTION_KERNELS = ("auto", "fa2", "fa3", "cudnn", "triton", "math")
# element-wise kernels (norms, activations, residual adds, RoPE) between the matmuls: "auto"
# counts one kernel per op of the op table (Megatron/Transformer Engine fusions); "eager" and
# "compile" add the HBM passes of model/data/reference/elementwise_passes.json
ELEMENTWISE = ("auto", "fused", "eager", "compile")
FSDP_VERSIONS = (0, 1, 2)  # 0: ZeRO-3 as DeepSpeed/Megatron run it; 1, 2: PyTorch FSDP1/FSDP2
GATHER_DTYPES = ("auto", "bf16", "fp32")
TP_STYLES = ("megatron", "dtensor")  # model.physics.strategies._tp_comms
# which weights train (model.physics.lora): every one, or LoRA adapters on frozen BF16 or
# 4-bit NF4 (QLoRA) base weights; the matmuls the adapters sit on
TRAINABLE = ("all", "lora", "qlora")
LORA_TARGETS = ("all", "attn", "mlp", "qkv")  # qkv: the fused QKV matmul only
# the on/off options, and the options with a fixed set of values (checked in this order)
FLAGS = ("sequence_parallel", "tp_overlap", "flash_attention", "fp32_gradients",
         "ends_count_as_layers", "dp_overlap", "ep_overlap", "fp8_param_gather",
         "moe_router_padding", "optimizer_bf16_moments", "fsdp_reshard_after_forward",
         "moe_router_fusion", "moe_permute_fusion",
         "recompute_norm_up_proj", "swiglu_fp8_cache", "production_layout", "kernel_tables")
LITERALS: dict[str, tuple] = {"recompute": RECOMPUTE, "precision": PRECISIONS,
                              "context_attention": CONTEXT_ATTENTION, "offload": OFFLOAD,
                              "zero": ZERO_STAGES, "ep_dispatcher": EP_DISPATCHERS,
                              "expert_gemm": EXPERT_GEMMS,
                              "pipeline_schedule": PIPELINE_SCHEDULES,
                              "attention_kernel": ATTENTION_KERNELS,
                              "elementwise": ELEMENTWISE, "fsdp_version": FSDP_VERSIONS,
                              "fsdp_gather_dtype": GATHER_DTYPES, "fsdp_prefetch": (0, 1),
                              "tp_style": TP_STYLES, "trainable": TRAINABLE,
                              "lora_targets": LORA_TARGETS}
# numbers in a range: (lowest, highest)
RANGES: dict[str, tuple[float, float]] = {"moe_capacity_factor": (0.0, 64.0),
                                          "moe_imbalance": (1.0, 64.0),
                                          "dp_bucket_mb": (0.0, 1e6)}

AUTO = "auto"  # recompute_layers: the fewest that make each configuration fit

# integers in a range: (lowest, highest) (``recompute_layers`` also takes AUTO)
INTEGERS: dict[str, tuple[int, int]] = {"interleave": (0, 64), "recompute_layers": (0, 10_000),
                                        "offload_layers": (0, 10_000),
                                        "ep_max_domains": (0, 10_000),
                                        "fsdp_shard_group": (0, 1_000_000),
                                        "lora_rank": (1, 65_536)}


def field_kind(name: str) -> str:
    """How a field is given: ``switch`` (on/off), ``choice`` (one of :data:`LITERALS`),
    ``integer`` (:data:`INTEGERS`) or ``number`` (:data:`RANGES`)."""
    kinds = {"switch": FLAGS, "choice": LITERALS, "integer": INTEGERS, "number": RANGES}
    [kind] = [k for k, names in kinds.items() if name in names]
    return kind
