"""The one-line help of every execution option (:class:`model.specs.execution.Execution`), with
its unit and default: the command line's flag help (model.cli.options) and the dashboard's
tooltips read it, so an option is described once."""

from __future__ import annotations

HELP: dict[str, str] = {
    "trainable": "which weights train: all, or LoRA adapters on frozen BF16 (lora) or 4-bit "
                 "NF4 (qlora) base weights",
    "lora_rank": "rank r of each LoRA adapter (A: k x r, B: r x n)",
    "lora_targets": "the matmuls that carry LoRA adapters: attention, MLP (experts too), all, or "
                    "the fused QKV matmul alone",
    "recompute": "activation recompute: selective (Megatron: core attention), op-sac "
                 "(TorchTitan's per-op policy: every second matmul and the element-wise ops "
                 "rerun), full, or none",
    "recompute_layers": "fully recompute N layers per pipeline stage, the rest as --recompute "
                        "(Megatron's block method; 'auto': the fewest that fit)",
    "sequence_parallel": "Megatron sequence parallelism for 1D/context",
    "interleave": "virtual pipeline stages per GPU (0: every count the stages allow)",
    "zero": "ZeRO stage: 0 replicated optimizer, 1 distributed optimizer, 2 + gradients, "
            "3 + weights (FSDP)",
    "precision": "matmul precision (fp8, mxfp8 and nvfp4 need the system's FP8/FP4 rate)",
    "tp_overlap": "overlap tensor-parallel collectives with the matmuls",
    "flash_attention": "fused attention",
    "fp32_gradients": "accumulate and reduce gradients in fp32 (Megatron's main_grad)",
    "context_attention": ("context parallelism (--cp): gather K/V, ring attention (overlapped), or "
                          "PyTorch's context_parallel (torchtitan)"),
    "offload": "keep these in the host memory tier (the system's host_* figures)",
    "ends_count_as_layers": "the embedding and the loss each count as a layer in the "
                            "pipeline split (lighter end stages)",
    "dp_overlap": "overlap the data-parallel gradient reduction with the backward",
    "dp_bucket_mb": "data-parallel collectives in buckets of at most this many MB, each "
                    "paying the ring latency (0: one per block)",
    "tp_style": "megatron: SP re-gathers inputs in the backward, BF16; dtensor: PyTorch "
                "TP keeps the gathered input, FP8 gathers with an FP8 precision",
    "fp8_param_gather": "with an FP8 precision, all-gather parameters in FP8 (Megatron's "
                        "--fp8-param-gather)",
    "offload_layers": "without activation offload: move N layers' activations of each "
                      "pipeline stage to host memory (Megatron's cpu_offloading_num_layers)",
    "ep_overlap": "overlap the expert-parallel all-to-alls with another microbatch's compute",
    "ep_dispatcher": "how tokens reach their experts: NCCL all-to-all, or flex (DeepEP/HybridEP)",
    "moe_capacity_factor": "0: dropless routing; c > 0: c x the mean tokens per expert, "
                           "dropped beyond, padded below",
    "moe_imbalance": "dropless routing: the busiest GPU's expert tokens over the mean "
                     "(1.0: force-balanced)",
    "expert_gemm": "the experts' GEMM kernels: one per local expert on 4 streams "
                   "(multi-stream, Transformer Engine) or one grouped kernel (grouped)",
    "moe_router_padding": "the router pads expert token counts to the FP8 GEMM alignment "
                          "(default: on; off: explicit padding copies under FP8/FP4)",
    "moe_router_fusion": "the router's score, top-k and aux loss as Transformer Engine's "
                         "fused kernels (default: off: PyTorch ops, one kernel each)",
    "moe_permute_fusion": "token permutation and unpermutation as Transformer Engine's "
                          "fused kernels (default: off: index_select / scatter_add)",
    "optimizer_bf16_moments": "Adam moments in BF16 (precision-aware optimizer): 8 instead "
                              "of 12 optimizer bytes per parameter (default: off)",
    "pipeline_schedule": "pipeline schedule: 1f1b (with --interleave) or dualpipe "
                         "(DeepSeek-V3's bidirectional schedule)",
    "ep_max_domains": "node-limited routing: each token's experts in at most N NVLink "
                      "domains (0: unlimited; DeepSeek-V3: 4)",
    "attention_kernel": "attention kernel priced from its published TFLOP/s: fa2, fa3, "
                        "cudnn, triton, math (unfused); auto: the stack's calibrated one",
    "elementwise": "element-wise kernels between the matmuls: fused (one per op), eager "
                   "(unfused PyTorch passes over HBM) or compile (torch.compile); auto: fused",
    "fsdp_version": "with ZeRO-3: 0 DeepSpeed/Megatron gathers, 1 PyTorch FSDP1, 2 FSDP2",
    "fsdp_reshard_after_forward": "FSDP frees gathered weights after each block's forward "
                                  "and gathers again for the backward (default: on)",
    "fsdp_gather_dtype": "dtype FSDP gathers parameters in: bf16 (2 B), fp32 (4 B); auto: "
                         "the precision's",
    "fsdp_prefetch": "1: the next block's gather overlaps the current compute; 0: exposed "
                     "(FSDP1 BACKWARD_POST)",
    "fsdp_shard_group": "HSDP: shard over groups of N GPUs, replicate across them (0: the "
                        "whole data-parallel group)",
    "recompute_norm_up_proj": "DeepSeek-V3's light recompute: RMSNorms and MLA "
                              "up-projections rerun in the backward (default: off)",
    "swiglu_fp8_cache": "routed experts keep the SwiGLU input in FP8 and rerun it in the "
                        "backward (DeepSeek-V3; default: off)",
    "production_layout": "only layouts a production stack runs: TP inside one NVLink domain, "
                         "whole nodes (default: on)",
    "kernel_tables": "dense GEMMs (forward, dX, dW) and fused attention priced through the "
                     "measured kernel layer where its tables cover the GPU (default: off)",
}
