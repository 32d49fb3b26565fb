"""The field table of :class:`~model.specs.execution.Execution`, declared once: one
:class:`~model.specs.schema.Field` per option with its kind (on/off, one of a fixed set of
values, an integer or a number in a range), its allowed values, unit and help. Every front end
derives its options from it (the command line's flags and their help, model.cli.options; the
dashboard's controls, their ranges, choices and tooltips, and the scenario's keys,
dashboard/controls/control_table.py), and :class:`Execution` checks its values against it;
import its names from here, their one home. The help is the one text of each option (its
physics, with sources, is the :class:`Execution` docstring's).
"""

from __future__ import annotations

from model.specs.precision import NAMES
from model.specs.schema import Field

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
AUTO = "auto"  # recompute_layers: the fewest that make each configuration fit
SWITCH = (True, False)  # the values of an on/off option


def _switch(name: str, doc: str) -> Field:
    return Field(name, bool, doc, choices=SWITCH)


def _choice(name: str, values: tuple, doc: str) -> Field:
    return Field(name, type(values[0]), doc, choices=values)


def _integer(name: str, lo: int, hi: int, doc: str, unit: str = "") -> Field:
    return Field(name, int, doc, lo, hi, unit=unit)


def _number(name: str, lo: float, hi: float, doc: str, unit: str = "") -> Field:
    return Field(name, float, doc, lo, hi, unit=unit)


EXECUTION_FIELDS: tuple[Field, ...] = (
    _choice("recompute", RECOMPUTE,
            "Activation recompute: selective (Megatron: the attention core reruns), op-sac "
            "(TorchTitan's per-op policy: every second matmul and the element-wise ops rerun; "
            "Llama-style dense blocks), full (keep only each block's input, rerun its forward "
            "in the backward) or none (keep everything; the attention scores only with "
            "unfused attention, the flash_attention option)."),
    _switch("sequence_parallel",
            "Megatron sequence parallelism: norms and dropouts on l/tp rows with "
            "reduce-scatter + all-gather instead of all-reduce (1D and context)."),
    _integer("interleave", 0, 64,
             "Virtual pipeline stages per GPU (interleaved 1F1B): a V× smaller bubble, V× the "
             "stage-to-stage messages, more activations in flight; 0: every V the stages "
             "allow, searched."),
    _choice("zero", ZERO_STAGES,
            "ZeRO stage: 0 replicated optimizer, 1 distributed optimizer, 2 + gradients, "
            "3 + weights (FSDP: weights gathered per block, every microbatch)."),
    _choice("precision", PRECISIONS,
            "Matmul precision: bf16/fp16, FP8 with current, delayed or 128-element block "
            "scaling, or Blackwell's block-scaled MXFP8 and NVFP4 (linear layers at that rate, "
            "with their quantisation kernels; attention stays bf16; the FP8 and FP4 ones need "
            "the system's FP8/FP4 rate)."),
    _switch("tp_overlap", "Overlap tensor-parallel collectives with the matmuls next to them."),
    _switch("flash_attention",
            "Fused attention; off: the score matrices go through HBM (QKᵀ out, softmax, "
            "dropout, PV in), as in Megatron-LM before flash attention."),
    _switch("fp32_gradients",
            "Accumulate and reduce gradients in fp32 (Megatron's main_grad): 4 bytes per "
            "parameter and twice the data-parallel reduce-scatter volume."),
    _choice("context_attention", CONTEXT_ATTENTION,
            "Context parallelism (cp, the context strategy's second axis): all-gather K/V "
            "before attending, or ring attention (K/V blocks passed around the ring under the "
            "attention compute), or PyTorch's context_parallel as torchtitan runs it (one K/V "
            "all-gather, FP32 dK/dV ring and merges)."),
    _choice("offload", OFFLOAD,
            "Keep these in host memory (the system's host tier): the optimizer (Adam on the "
            "CPU), activations or weights, streamed over the host link."),
    _integer("recompute_layers", 0, 10_000,
             "Partial (block) recompute: this many layers of each pipeline stage recompute "
             "fully, the others as recompute says (Megatron's --recompute-num-layers); 0: "
             "none; 'auto': the fewest that make each configuration fit. Not with full "
             "recompute.", unit="layers"),
    _switch("ends_count_as_layers",
            "The embedding and the loss each count as one layer in the pipeline split: the "
            "first and last stages hold one layer fewer (Megatron's "
            "account_for_embedding/loss_in_pipeline_split)."),
    _switch("dp_overlap",
            "Overlap each block's data-parallel gradient reduction (and parameter gather) with "
            "the next block's compute; off: after the backward pass, exposed (Megatron-LM "
            "2021)."),
    _number("dp_bucket_mb", 0.0, 1e6,
            "Data-parallel (and FSDP) collectives issued in buckets of at most this many MB, "
            "each paying the ring's latency again; 0: one per block.", unit="MB"),
    _switch("fp8_param_gather",
            "With an FP8 precision, the data-parallel all-gather of the updated parameters "
            "moves FP8 bytes, about half of BF16 (Megatron's --fp8-param-gather, on in "
            "Megatron-Bridge's FP8 recipes)."),
    _integer("offload_layers", 0, 10_000,
             "Partial activation offload: the activations of this many layers of each "
             "pipeline stage go to host memory after their forward and come back for their "
             "backward, under the compute of other layers (Megatron-Core's "
             "cpu_offloading_num_layers); 0: none. Not with activation offload, which moves "
             "every layer's.", unit="layers"),
    _switch("ep_overlap",
            "Overlap the expert-parallel all-to-alls of one microbatch with the compute of "
            "another (Megatron-Core's --overlap-moe-expert-parallel-comm); off: exposed."),
    _choice("ep_dispatcher", EP_DISPATCHERS,
            "How tokens travel to their experts: alltoall (NCCL all-to-all, one copy per "
            "routed expert) or flex (DeepEP / HybridEP: each token crosses to another NVLink "
            "domain once, then fans out over NVLink)."),
    _number("moe_capacity_factor", 0.0, 64.0,
            "0: dropless routing. c > 0: every expert takes c × the mean tokens per expert, "
            "dropping beyond and padding below (the token-drop recipes); it then sets the "
            "busiest GPU's load instead of the imbalance.", unit="× mean"),
    _number("moe_imbalance", 1.0, 64.0,
            "Dropless routing: tokens of the busiest GPU's experts over the mean (1.0: "
            "force-balanced, as published benchmarks run; real routing is not); the step "
            "waits for that GPU's expert GEMMs and all-to-alls.", unit="× mean"),
    _choice("expert_gemm", EXPERT_GEMMS,
            "How the local experts' matmuls run: multi-stream (Transformer Engine's "
            "GroupedLinear: one cuBLASLt GEMM per expert on 4 streams, so at most 4 experts' "
            "tiles share a wave) or grouped (one grouped kernel over every local expert: "
            "CUTLASS grouped GEMM, DeepGEMM)."),
    _switch("moe_router_padding",
            "The router pads each expert's token count to the FP8 GEMM alignment "
            "(Megatron-Core's moe_router_padding_for_fp8); off: under FP8/FP4 the experts' "
            "input and output are copied through padded buffers (Transformer Engine "
            "Fp8Padding/Fp8Unpadding)."),
    _switch("optimizer_bf16_moments",
            "Adam's m and v kept in BF16 (Megatron-Core's precision-aware optimizer): 8 "
            "instead of 12 optimizer bytes per parameter, less optimizer-step traffic."),
    _switch("moe_router_fusion",
            "The router's score, top-k and aux-loss as Transformer Engine's fused kernels "
            "(Megatron-Core's moe_router_fusion); off: PyTorch ops, one kernel and one pass "
            "over HBM each (model/physics/token_kernels.py)."),
    _switch("moe_permute_fusion",
            "The tokens' permutation to their experts and back as Transformer Engine's fused "
            "kernels (Megatron-Core's moe_permute_fusion); off: PyTorch index ops, one kernel "
            "and one pass over HBM each."),
    _choice("pipeline_schedule", PIPELINE_SCHEDULES,
            "Pipeline schedule: 1f1b (interleaved by the virtual stages per GPU) or dualpipe "
            "(DeepSeek-V3 §3.2.1: two pipelines in opposite directions, each GPU holding two "
            "stages' weights, a smaller bubble; not with interleaving)."),
    _integer("ep_max_domains", 0, 10_000,
             "Node-limited routing: each token's experts lie in at most this many NVLink "
             "domains, so its all-to-all copies cross at most this many domains (DeepSeek-V3 "
             "§2.1.2: 4 nodes); 0: unlimited.", unit="domains"),
    _choice("attention_kernel", ATTENTION_KERNELS,
            "The fused attention kernel, priced at its published TFLOP/s for the sequence "
            "length, head dimension, causal mask and GPU (model/physics/attention_kernels.py): "
            "fa2 (FlashAttention-2), fa3 (FlashAttention-3, Hopper only), cudnn, triton (the "
            "Triton flash attention of 2023), math (unfused PyTorch); auto: the stack's "
            "calibrated attention efficiency."),
    _choice("elementwise", ELEMENTWISE,
            "How the kernels between the matmuls run: fused (one kernel per op), eager "
            "(unfused PyTorch: every cast, norm step, residual add and RoPE step a pass over "
            "HBM) or compile (torch.compile-fused); auto: fused."),
    _choice("fsdp_version", FSDP_VERSIONS,
            "With ZeRO-3, how the weight gathers run: 0 as DeepSpeed and Megatron run them, "
            "1 PyTorch FSDP1 (flat parameters) or 2 FSDP2 (per-parameter shards, the gathered "
            "output copied into the parameters: twice its bytes of HBM traffic)."),
    _switch("fsdp_reshard_after_forward",
            "FSDP frees the gathered weights after each block's forward and gathers them "
            "again for its backward (FULL_SHARD); off (SHARD_GRAD_OP): one gather per "
            "microbatch, the weights held until the backward."),
    _choice("fsdp_gather_dtype", GATHER_DTYPES,
            "The dtype FSDP gathers the parameters in: bf16 (2 bytes per parameter), fp32 "
            "(4: FSDP1 without a param_dtype, as Composer ran in 2023); auto: the "
            "precision's."),
    _choice("fsdp_prefetch", (0, 1),
            "1 (on): the next block's all-gather is issued before the current block's compute "
            "and overlaps it (FSDP2, FSDP1 BACKWARD_PRE); 0 (off): the backward's gather waits "
            "for the current gradient (FSDP1 BACKWARD_POST), exposed."),
    _integer("fsdp_shard_group", 0, 1_000_000,
             "HSDP: shard over groups of this many GPUs and replicate across them (gathers and "
             "reduce-scatters inside a group, one all-reduce of the gradients across replicas "
             "per step); 0: shard over the whole data-parallel group.", unit="GPUs"),
    _switch("recompute_norm_up_proj",
            "DeepSeek-V3's light recompute (§3.2.3): every RMSNorm and MLA's up-projections "
            "rerun in the backward, so the layers after them keep none of their outputs."),
    _switch("swiglu_fp8_cache",
            "The routed experts keep their SwiGLU input in FP8 with 1×128 scales and rerun "
            "the SwiGLU in the backward, so the second expert linear keeps nothing of its own "
            "(DeepSeek-V3 §3.3.3)."),
    _switch("loss_fp32_eager",
            "The loss runs as eager PyTorch's cross-entropy on an FP32 copy of the logits "
            "(torchtitan): 12 bytes a local logit held at the start of the backward instead of "
            "a fused kernel's 2."),
    _switch("production_layout",
            "Only layouts a production stack runs: tensor parallelism inside one NVLink "
            "domain and jobs of whole nodes (model/engine/production.py). Off: also TP groups "
            "across domains and partial nodes, which no production run uses."),
    _switch("kernel_tables",
            "The dense matmuls and the router (forward, dX and dW GEMMs at their own shapes), "
            "the routed experts' grouped GEMMs (touched experts' tiles) and fused attention "
            "priced through the kernel layer fitted on measured kernel tables where they cover "
            "the GPU and precision (model/physics/kernels/training.py, moe_training.py); off: "
            "tile waves and the stack's attention kernel or efficiency."),
    _choice("tp_style", TP_STYLES,
            "How tensor parallelism with sequence parallelism moves activations: megatron (the "
            "column-parallel input kept as its shard and gathered again in the backward, in "
            "BF16) or dtensor (PyTorch's parallelize_module, torchtitan: the gathered input "
            "kept, nothing gathered again; with FP8, torchao gathers inputs and output "
            "gradients in FP8)."),
    _choice("trainable", TRAINABLE,
            "Which weights train: all (pre-training, full fine-tuning), or LoRA adapters on "
            "frozen BF16 (lora) or 4-bit NF4 (qlora) base weights: no weight gradients for the "
            "base, gradients and optimizer state for the adapters only "
            "(model/physics/lora.py)."),
    _integer("lora_rank", 1, 65_536,
             "Rank r of each LoRA adapter (A: k×r, B: r×n); ignored when every weight "
             "trains."),
    _choice("lora_targets", LORA_TARGETS,
            "The matmuls that carry LoRA adapters: attention, MLP (the experts too), all, or "
            "the fused QKV matmul alone (Megatron-Bridge's performance recipes)."),
)
BY_NAME: dict[str, Field] = {f.name: f for f in EXECUTION_FIELDS}
# the tables each front end reads, derived from the fields: the on/off options, the options
# with a fixed set of values, the numbers and the integers in a range (lowest, highest)
FLAGS = tuple(f.name for f in EXECUTION_FIELDS if f.kind is bool)
LITERALS: dict[str, tuple] = {f.name: f.choices for f in EXECUTION_FIELDS
                              if f.choices and f.kind is not bool}
RANGES: dict[str, tuple[float, float]] = {f.name: (f.lo, f.hi) for f in EXECUTION_FIELDS
                                          if f.kind is float}
INTEGERS: dict[str, tuple[int, int]] = {f.name: (int(f.lo), int(f.hi)) for f in EXECUTION_FIELDS
                                        if f.kind is int and not f.choices}
HELP: dict[str, str] = {f.name: f.doc for f in EXECUTION_FIELDS}  # each option's one help


def field_kind(name: str) -> str:
    """How a field is given: ``switch`` (on/off), ``choice`` (one of :data:`LITERALS`),
    ``integer`` (:data:`INTEGERS`) or ``number`` (:data:`RANGES`)."""
    kinds = {"switch": FLAGS, "choice": LITERALS, "integer": INTEGERS, "number": RANGES}
    [kind] = [k for k, names in kinds.items() if name in names]
    return kind
