"""How a training stack executes a configuration: recompute, sequence parallelism, interleaving,
ZeRO stage, precision, overlap. One frozen record per evaluation; the default reproduces the
model's established behaviour (flash attention with its selective recompute, Megatron sequence
parallelism, plain 1F1B, distributed optimizer, bf16).

Sources: activation recompute and sequence parallelism — Korthikanti et al. 2022 (arXiv
2205.05198); interleaved 1F1B — Narayanan et al. 2021 (arXiv 2104.04473); ZeRO stages —
Rajbhandari et al. 2020 (arXiv 1910.02054).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np

from model.errors import ModelError
from model.specs.execution_fields import (
    AUTO,
    FLAGS,
    INTEGERS,
    LITERALS,
    RANGES,
)


@dataclass(frozen=True)
class Execution:
    """Execution choices of one evaluation.

    * ``recompute``: ``none`` keeps every activation — with unfused attention
      (``flash_attention`` off) its scores too; a fused kernel never stores them and recomputes
      them in its own backward, so with flash attention ``none`` and ``selective`` keep the
      same (the kernel is its own field, never implied by recompute); ``selective``
      recomputes the attention core in the backward pass (Megatron's
      ``--recompute-granularity selective``: core attention; what flash attention does);
      ``op-sac`` is TorchTitan's per-op policy (``selective_ac_option = "op"``: the outputs of
      matmuls, attention and collectives kept except every second matmul's, everything else
      rerun: model.physics.op_sac); ``full`` keeps only each block's input and reruns its
      forward pass.
    * ``recompute_layers``: with ``none``, ``selective`` or ``op-sac``, this many transformer
      layers of each pipeline stage (capped at its layers) recompute fully instead — Megatron's
      ``--recompute-method block --recompute-num-layers N``: memory and time between the two;
      ``"auto"``: each configuration recomputes the fewest layers that make it fit.
    * ``sequence_parallel``: norms and dropouts on l/tp rows with reduce-scatter + all-gather
      (Megatron SP); off: replicated, with all-reduces after the row-parallel matmuls.
    * ``interleave``: V virtual pipeline stages per GPU (interleaved 1F1B): bubble / V, V× the
      pipeline messages, more activations in flight; 0 searches every V that divides a
      stage's layers (each configuration's row says which).
    * ``zero``: 0 replicated optimizer; 1 optimizer state sharded over the data-parallel group
      (distributed optimizer); 2 gradients too; 3 weights too (FSDP: gathered per block in the
      forward and again in the backward).
    * ``precision``: bf16 / fp16 (2-byte values) or fp8 (matmuls at the FP8 rate; values kept
      in 2 bytes, as in Transformer Engine's delayed/current scaling recipes).
    * ``tp_overlap``: tensor-parallel collectives overlap the matmuls next to them.
    * ``flash_attention``: fused attention; off, the score matrices go through HBM (QKᵀ out,
      softmax, dropout, PV in) as in Megatron-LM before flash attention.
    * ``fp32_gradients``: gradients accumulated and reduced in fp32 (Megatron's ``main_grad``):
      4 bytes per parameter, and twice the data-parallel reduce-scatter volume.
    * ``context_attention``: how context parallelism (tp2 of the context strategy) shares K and
      V: ``allgather`` (the paper's: gather all, then attend; not overlapped) or ``ring`` (ring
      attention: tp2 steps, each passing one K/V block to the next GPU under the attention
      compute of the previous one; Liu et al. 2023, as in Megatron's context parallelism), or
      ``pytorch`` (PyTorch's experimental ``context_parallel`` as torchtitan runs it: K/V
      repeated to every query head, all-gathered under the first step, dK/dV passed on in FP32,
      FP32 merges through HBM; :mod:`model.physics.ring_attention`).
    * ``production_layout``: only layouts a production stack runs (the rules of
      :mod:`model.engine.production`): tensor parallelism inside one NVLink domain and jobs of
      whole nodes; off, the search also tries TP groups across domains and partial nodes (the
      paper mode models its own space and ignores it).
    * ``ends_count_as_layers``: the embedding and the loss each count as one layer when the
      layers are split over pipeline stages, where the layers plus two divide evenly: the first
      and last stages hold one layer fewer (Megatron's ``account_for_embedding_in_pipeline_split``
      and ``account_for_loss_in_pipeline_split``; Llama 3's 405B run, Dubey et al. 2024, §3.3.2).
    * ``dp_overlap``: the data-parallel gradient reduction (and parameter gather) of each block
      overlaps the compute of the next; off, it runs after the backward pass, exposed, as in
      Megatron-LM of 2021 (one all-reduce of the gradient buffer, Narayanan et al. 2021).
    * ``fp8_param_gather``: with an FP8 precision, the matmul weights live in their FP8 format
      and the data-parallel all-gather of the updated parameters moves those bytes (Megatron-
      Core's ``--fp8-param-gather``; on in Megatron-Bridge's FP8 and MXFP8 recipes): about half
      the BF16 gather (:attr:`model.specs.precision.Precision.gathered_bytes_per_param`). The
      gradient reduce-scatter is unchanged; other precisions ignore it. Memory is unchanged:
      an FP8 weight keeps its transposed (or column-wise) copy for the backward pass, about
      the two bytes of a BF16 one.
    * ``dp_bucket_mb``: the data-parallel (and FSDP) gathers and reduce-scatters are issued in
      buckets of at most this many MB, each paying the ring's latency again (0: one per block).
    * ``offload``: what lives in the host memory tier instead of HBM (ZeRO-Offload / Infinity,
      Ren et al. 2021, Rajbhandari et al. 2021): ``optimizer`` (state and the Adam step on the
      CPU), ``activations`` (written out after each block's forward, read back for its
      backward), ``weights`` (weights and gradients streamed per block), or ``all``.
    * ``offload_layers``: without activation offload, the activations of this many layers of
      each pipeline stage go to host memory (written after the layer's forward, read back
      before its backward, each transfer under a layer's compute) — Megatron-Core's
      ``cpu_offloading_num_layers`` (Transformer Engine's CPU offload context), as the
      Megatron-Bridge recipes of large models on Grace-Blackwell use it.
    * ``ep_overlap``: the expert-parallel all-to-alls of one microbatch overlap the compute of
      another (Megatron-Core's 1F1B all-to-all overlap, ``--overlap-moe-expert-parallel-comm``:
      the forward of one microbatch merged with the backward of the previous one); off, they
      are exposed.
    * ``ep_dispatcher``: how the tokens travel to their experts: ``alltoall`` (NCCL's all-to-all,
      a copy per routed expert) or ``flex`` (Megatron-Core's flex dispatcher with DeepEP or
      HybridEP: each token crosses to another NVLink domain once, then fans out over NVLink).
    * ``moe_capacity_factor``: 0 is dropless routing; c > 0 gives every expert c × the mean
      tokens per expert, dropping beyond and padding below (Megatron-Core's
      ``moe_expert_capacity_factor`` with ``moe_pad_expert_input_to_capacity``, as the
      token-drop benchmark recipes run).
    * ``moe_imbalance``: dropless routing, the tokens of the busiest GPU's experts over the mean
      (1.0: force-balanced, as published benchmarks run; real routing is not): the step waits
      for that GPU's expert GEMMs and all-to-alls.
    * ``expert_gemm``: the experts' GEMM kernels (model.physics.gemm): ``multi-stream``
      (Transformer Engine's ``GroupedLinear``: one cuBLASLt GEMM per local expert on 4 streams,
      so at most 4 experts' tiles share a wave) or ``grouped`` (one grouped kernel over every
      local expert: CUTLASS grouped GEMM, DeepGEMM's M-grouped layout).
    * ``moe_router_padding``: the router pads each expert's token count to the FP8 GEMM
      alignment (Megatron-Core ``moe_router_padding_for_fp8``: "This can remove the explicit
      padding in the GroupedMLP layer"); off, under an FP8/FP4 precision the experts' input is
      copied into a padded buffer and the output back (Transformer Engine ``Fp8Padding`` /
      ``Fp8Unpadding``), each way: model.physics.moe.fp8_padding.
    * ``moe_router_fusion`` / ``moe_permute_fusion``: the router's score, top-k and aux-loss
      kernels, and the token permutation and unpermutation, as Transformer Engine's fused
      kernels (Megatron-Core ``moe_router_fusion``, ``moe_permute_fusion``; off by default
      there) or as PyTorch ops, one kernel each (model.physics.token_kernels).
    * ``optimizer_bf16_moments``: Adam's m and v kept in BF16 (Megatron-Core's precision-aware
      optimizer, ``--use-precision-aware-optimizer`` with ``--exp-avg-dtype bf16
      --exp-avg-sq-dtype bf16``): 8 instead of 12 optimizer bytes per parameter, 20 instead
      of 28 bytes of optimizer-step traffic.
    * ``pipeline_schedule``: ``1f1b`` (with ``interleave``) or ``dualpipe`` (DeepSeek-V3
      report §3.2.1, deepseek-ai/DualPipe: two pipelines in opposite directions, each GPU
      holding two stages' parameters; bubble (pp/2 − 1)·(F&B + B − 3W):
      model.physics.pipeline.dualpipe_bubble_s).
    * ``ep_max_domains``: node-limited routing — each token's experts lie in at most this many
      NVLink domains (DeepSeek-V3 §2.1.2: at most 4 nodes; Megatron-Core
      ``moe_router_num_groups`` = nodes, ``moe_router_group_topk``); 0: unlimited.
    * ``attention_kernel``: the fused attention kernel the stack runs — ``fa2``
      (FlashAttention-2), ``fa3`` (FlashAttention-3, Hopper only), ``cudnn`` (cuDNN fused
      attention), ``triton`` (the Triton flash attention of 2023), ``math`` (unfused PyTorch
      attention) — priced at its published TFLOP/s for the sequence length, head dimension,
      causal mask and GPU, forward and backward apart (:mod:`model.physics.attention_kernels`,
      docs/stacks.md); ``auto``: the stack's calibrated attention efficiency.
    * ``elementwise``: how the element-wise kernels between the matmuls run — ``fused``/``auto``
      (one kernel per op of the op table), ``eager`` (unfused PyTorch: every cast, norm step,
      residual add and RoPE step a pass over HBM) or ``compile`` (``torch.compile``-fused):
      the extra HBM passes per layer of ``reference/elementwise_passes.json``.
    * ``fsdp_version``: with ZeRO-3, 0 prices the gathers as DeepSpeed and Megatron run them;
      1 and 2 as PyTorch FSDP1 (flat parameters) and FSDP2 (per-parameter DTensor shards,
      whose all-gather output is copied out into the parameters: 2 × the gathered bytes of
      HBM traffic per gather, ``torch/distributed/_composable/fsdp/_fsdp_collectives.py``).
    * ``fsdp_reshard_after_forward``: FSDP frees the gathered weights after each block's
      forward and gathers them again for its backward (FULL_SHARD, FSDP2's default); off
      (SHARD_GRAD_OP): one gather per microbatch, the weights held until the backward.
    * ``fsdp_gather_dtype``: the dtype FSDP gathers the parameters in: ``fp32`` (FSDP1 with
      ``param_dtype`` unset, Composer's DEFAULT mixed precision of 2023) moves 4 bytes per
      parameter, ``bf16`` 2; ``auto``: the precision's (``fp8_param_gather``).
    * ``fsdp_prefetch``: 1 issues the next block's all-gather before the current block's
      compute (FSDP2's default, FSDP1 with BACKWARD_PRE), so it overlaps it; 0 issues the
      backward's gather after the current block's gradient (FSDP1's BACKWARD_POST): exposed.
    * ``fsdp_shard_group``: HSDP — shard over groups of this many GPUs and replicate across
      them (gathers and reduce-scatters inside the group, an all-reduce of each shard's
      gradients across the replicas once per step); 0: shard over the whole data-parallel
      group.
    * ``tp_style``: how tensor parallelism with sequence parallelism moves activations.
      ``megatron``: the column-parallel input is kept as its l/tp shard and all-gathered again
      in the backward (Korthikanti et al. 2022, §4.2.2), every gather in BF16. ``dtensor``
      (PyTorch's ``parallelize_module`` with ``ColwiseParallel``/``RowwiseParallel``, as
      torchtitan runs it): autograd keeps the gathered input for the weight gradient, so the
      backward gathers nothing again (l rows kept instead of l/tp); with an FP8 precision
      torchao's ``Float8ColwiseParallel``/``PrepareFloat8ModuleInput`` cast the input to FP8
      before its all-gather and ``NoopFwToFloat8BwDynamic`` casts the row-parallel output's
      gradient to FP8 before the backward's all-gather: both gathers move 1 byte per element
      (``torchao/float8/float8_tensor_parallel.py`` at eab345c); reduce-scatters stay BF16.
    * ``recompute_norm_up_proj``: DeepSeek-V3's light recompute (report §3.2.3): every RMSNorm
      and MLA's up-projections rerun in the backward, so the linears after a norm and the
      attention core keep nothing of their outputs (model.physics.light_recompute).
    * ``trainable``: which weights train — ``all`` (pre-training, full fine-tuning) or LoRA
      adapters of rank ``lora_rank`` on the ``lora_targets`` matmuls (attention, MLP and
      experts, or both) over frozen BF16 (``lora``) or 4-bit NF4 (``qlora``) base weights: no
      weight gradients of the base, adapters as their own kernels, gradients and optimizer
      state of the adapters only (:mod:`model.physics.lora`).
    * ``loss_fp32_eager``: the loss runs as eager PyTorch's cross-entropy on an FP32 copy of
      the logits (torchtitan's uncompiled ``loss_fn``): 12 B a local logit at the start of the
      backward instead of the fused kernel's 2 (:mod:`model.physics.peak_memory`). Memory only:
      the FP32 passes' time follows ``elementwise``.
    * ``swiglu_fp8_cache``: the routed experts' SwiGLU keeps its input in FP8 with 1×128
      scales and reruns in the backward, so ``moe/fc2`` keeps nothing (DeepSeek-V3 §3.3.3).
    * ``kernel_tables``: the dense matmuls and the router (forward, dX and dW GEMMs at their
      own shapes), the routed experts' grouped GEMMs (touched experts' tiles) and fused
      attention (forward, backward) priced through the kernel layer fitted on measured kernel
      tables, where they cover the GPU and precision (:mod:`model.physics.kernels.training`,
      :mod:`model.physics.kernels.moe_training`); off: the tile-wave and depth shape terms and
      the stack's attention kernel or efficiency.
    """

    recompute: str = "selective"
    sequence_parallel: bool = True
    interleave: int = 1
    zero: int = 1
    precision: str = "bf16"
    tp_overlap: bool = False
    flash_attention: bool = True
    fp32_gradients: bool = False
    context_attention: str = "allgather"
    offload: str = "none"
    recompute_layers: int | str = 0
    ends_count_as_layers: bool = False
    dp_overlap: bool = True
    dp_bucket_mb: float = 0.0
    fp8_param_gather: bool = False
    offload_layers: int = 0
    ep_overlap: bool = False
    ep_dispatcher: str = "alltoall"
    moe_capacity_factor: float = 0.0
    moe_imbalance: float = 1.0
    expert_gemm: str = "multi-stream"
    moe_router_padding: bool = True
    optimizer_bf16_moments: bool = False
    moe_router_fusion: bool = False
    moe_permute_fusion: bool = False
    pipeline_schedule: str = "1f1b"
    ep_max_domains: int = 0
    attention_kernel: str = "auto"
    elementwise: str = "auto"
    fsdp_version: int = 0
    fsdp_reshard_after_forward: bool = True
    fsdp_gather_dtype: str = "auto"
    fsdp_prefetch: int = 1
    fsdp_shard_group: int = 0
    recompute_norm_up_proj: bool = False
    swiglu_fp8_cache: bool = False
    loss_fp32_eager: bool = False
    production_layout: bool = True
    tp_style: str = "megatron"
    trainable: str = "all"
    lora_rank: int = 16
    lora_targets: str = "all"
    kernel_tables: bool = False

    def __post_init__(self) -> None:
        self._check_values()
        if isinstance(self.zero, bool) or not isinstance(self.zero, int):
            raise ModelError(f"zero must be 0, 1, 2 or 3, got {self.zero!r}")
        for name, allowed in LITERALS.items():
            value = getattr(self, name)
            # True == 1 and 1.0 == 1 in Python: an integer choice takes integers only
            wrong_type = isinstance(value, bool) or (
                all(isinstance(a, int) for a in allowed) and not isinstance(value, int))
            if wrong_type or value not in allowed:
                raise ModelError(f"{name} must be {_one_of(allowed)}, got "
                                 f"{getattr(self, name)!r}")
        self._check_integers()
        if self.pipeline_schedule == "dualpipe" and self.interleave > 1:
            raise ModelError(f"DualPipe is not interleaved: interleave {self.interleave} needs "
                             "pipeline_schedule '1f1b'")
        self._check_combinations()

    def _check_values(self) -> None:
        """The on/off options and the numbers in a range."""
        for name in FLAGS:
            if not isinstance(getattr(self, name), bool):
                raise ModelError(f"{name} must be true or false, got {getattr(self, name)!r}")
        for name, (lo, hi) in RANGES.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
                    lo <= value <= hi):
                raise ModelError(f"{name} must be a number in [{lo:g}, {hi:g}], got {value!r}")

    def _check_integers(self) -> None:
        """The integers in their fields' ranges (:data:`INTEGERS`; ``recompute_layers`` also
        takes 'auto')."""
        for name, lo, hi, note in _INTEGER_CHECKS:
            value = getattr(self, name)
            if (isinstance(value, int) and not isinstance(value, bool) and lo <= value <= hi) \
                    or (value == AUTO and name == "recompute_layers"):
                continue
            raise ModelError(f"{name} must be an integer in [{lo}, {hi}]{note}, got {value!r}")

    def _check_combinations(self) -> None:
        """Options that exclude each other."""
        if self.offload_layers and self.offloads("activations"):
            raise ModelError("offload_layers applies without activation offload (offload "
                             f"'{self.offload}' moves every layer's activations already)")
        r = self.recompute_layers
        if r and r != AUTO and self.recompute == "full":
            raise ModelError("recompute_layers applies with recompute none, selective or "
                             "op-sac (full already recomputes every layer)")

    @property
    def stage_interleave(self) -> int:
        """The virtual stages a search asks for: ``interleave`` (0: every count), 1 under
        DualPipe (two chunks per GPU in opposite directions, not interleaved)."""
        return 1 if self.pipeline_schedule == "dualpipe" else self.interleave

    @property
    def fewest_recomputed(self) -> bool:
        """Whether each configuration recomputes the fewest layers that make it fit (with
        ``full`` every layer recomputes already)."""
        return self.recompute_layers == AUTO and self.recompute != "full"

    def recompute_share(self, layers, recomputed=None):
        """Share of a stage's ``layers`` that rerun their forward pass in the backward: 1 with
        full recompute, min(r, D) / D with r = ``recomputed`` (a configuration's column) or
        ``recompute_layers``, else 0."""
        if self.recompute == "full":
            return 1.0
        r = self.recompute_layers if recomputed is None else recomputed
        if isinstance(r, (int, str)) and (r == AUTO or not r):
            return 0.0
        d = np.asarray(layers, dtype=float)
        return np.minimum(np.asarray(r, dtype=float), d) / np.maximum(d, 1.0)

    @property
    def moe_load(self) -> float:
        """Tokens the busiest GPU's experts process over the mean: the capacity factor when
        tokens are dropped and padded to capacity, else the imbalance."""
        return float(self.moe_capacity_factor or self.moe_imbalance)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def offloads(self, what: str) -> bool:
        """Whether ``what`` (optimizer, activations, weights) lives in host memory."""
        return self.offload in (what, "all")


# what an integer option's message adds to its range
_INTEGER_NOTES = {"interleave": " (0: every count the pipeline stages allow)",
                  "recompute_layers": " or 'auto'",
                  "ep_max_domains": " (0: tokens routed to any domain)",
                  "fsdp_shard_group": " (0: shard over the whole data-parallel group)"}
# (name, lowest, highest, note) of each integer option, checked in this order
_INTEGER_CHECKS = tuple((name, lo, hi, _INTEGER_NOTES.get(name, ""))
                        for name, (lo, hi) in INTEGERS.items())


def _one_of(allowed: tuple) -> str:
    """'0, 1, 2 or 3' for the small integer literals, else 'one of a, b, c'."""
    if all(isinstance(a, int) for a in allowed):
        return ", ".join(map(str, allowed[:-1])) + f" or {allowed[-1]}"
    if len(allowed) == 2:
        return f"{allowed[0]!r} or {allowed[1]!r}"
    return "one of " + ", ".join(map(str, allowed))


DEFAULT_EXECUTION = Execution()
FIELDS = tuple(f.name for f in fields(Execution))

def resolve_execution(value: object) -> Execution:
    """An :class:`Execution` from None (default), a dict of fields, or an Execution."""
    if value is None:
        return DEFAULT_EXECUTION
    if isinstance(value, Execution):
        return value
    if isinstance(value, dict):
        unknown = sorted(set(value) - set(FIELDS))
        if unknown:
            raise ModelError(f"unknown execution option '{unknown[0]}'; allowed: "
                             f"{', '.join(FIELDS)}")
        return Execution(**{k: v for k, v in value.items() if v is not None})
    raise ModelError(f"execution must be a dict of options, got {type(value).__name__}")
