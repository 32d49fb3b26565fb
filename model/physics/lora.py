"""Fine-tuning with frozen base weights: LoRA and QLoRA as the matmuls run them.

``Execution.trainable`` says which weights train: ``all`` (pre-training, full fine-tuning),
``lora`` or ``qlora`` (Hu et al. 2021, *LoRA*, arXiv 2106.09685; Dettmers et al. 2023,
*QLoRA*, arXiv 2305.14314). With frozen base weights each matmul Y = X·W of the op table
changes as follows (:func:`frozen_counts`), per GPU per microbatch, s the element bytes:

* **no weight gradient**: the backward runs dX = dY·Wᵀ only. The dW GEMM's k·n·(2m − 1) FLOPs
  (:func:`model.physics.ops.linear`; m recovered from the forward's m·n·(2k − 1)) and half the
  backward's HBM bytes (dX and dW each read one operand of k·n and one of m·k or m·n and write
  the third: s(m·k + m·n + k·n) each) leave the backward.
* **adapters** on the targeted matmuls (``lora_targets``: attention, MLP or both; the routed
  experts count as MLP): Y += (X·A)·B with A [k, r], B [r, n], r = ``lora_rank``. FLOPs:
  forward 2·m·r·(k + n); backward 4·m·r·(k + n) (dX through B then A, dA and dB). They are
  thin GEMMs (r ≪ k, n) that read X again and are memory-bound, run as their own kernels after
  the base GEMM as PEFT's ``lora.Linear.forward`` does (huggingface/peft, ``result = result +
  lora_B(lora_A(dropout(x))) * scaling``): forward bytes s(m·k + 2·m·r + 2·m·n) (read X, write
  and read X·A, read-add-write Y), backward s(3·m·k + 4·m·r + 2·m·n); 3 launches forward, 4
  backward; X·A (m·r elements) kept for the backward. The adapters' weights 2·r·(k + n) bytes
  are the only trainable ones.
* **QLoRA**: every base matmul weight is stored in 4-bit NormalFloat with double-quantised block
  scales, 4.127 bits per parameter (QLoRA §3: 0.127 bits of constants for blocks of 64 and
  256); bitsandbytes dequantises the whole weight to BF16 before each GEMM, forward and
  backward (``MatMul4Bit`` in bitsandbytes/autograd/_functions.py: ``dequantize_4bit`` then
  ``torch.nn.functional.linear``), an extra pass of k·n·(0.516 + 2) bytes each way. The
  embedding and the output layer stay BF16 (bitsandbytes quantises ``nn.Linear`` layers of the
  blocks; Hugging Face's loaders skip ``lm_head``).

Gradients, optimizer state, the data-parallel reduction and the optimizer step then cover the
trainable bytes only: :func:`trainable_share` is the adapters' bytes over the weight bytes
held, and scales the gradient and optimizer factors of :mod:`model.physics.memory` and
:mod:`model.physics.pipeline` (one share for every stage: the adapters spread over the stages
as their matmuls do). Weights still gather under ZeRO-3/FSDP at the bytes held (QLoRA's
4-bit), as FSDP-QLoRA runs them.
"""

from __future__ import annotations

import numpy as np

from model.physics.context import Ctx
from model.physics.ops import OpCounts
from model.physics.optable import Kind, OpSpec
from model.specs.params import total_params
from model.specs.transformer import Transformer

NF4_BYTES_PER_PARAM = 4.127 / 8  # QLoRA §3: 4-bit NF4 + 0.127 bits of double-quantised scales
ADAPTER_BYTES_PER_PARAM = 2.0  # LoRA A and B in BF16
TARGETS = {"attn": ("attn/",), "mlp": ("mlp/", "moe/", "shared/"), "qkv": ("attn/qkv",),
           "all": ("attn/", "mlp/", "moe/", "shared/")}
_FROZEN_MATMULS = (Kind.LINEAR, Kind.SUMMA_LINEAR, Kind.EXPERT_LINEAR)


def frozen(trainable: str) -> bool:
    """Whether the base weights are frozen (LoRA, QLoRA)."""
    return trainable != "all"


def targeted(spec: OpSpec, targets: str) -> bool:
    """Whether the matmul ``spec`` carries a LoRA adapter under ``targets`` (attn, mlp, all):
    the block's matmuls by their op-table prefix; never the output layer or the embedding."""
    return spec.kind in _FROZEN_MATMULS and spec.name.startswith(TARGETS[targets])


def frozen_counts(counts: OpCounts, spec: OpSpec, k: np.ndarray, n: np.ndarray,
                  element_bytes: float, trainable: str, rank: int, targets: str) -> OpCounts:
    """The counts of one matmul whose base weight is frozen (module docstring), from its
    trainable counts; ``k``, ``n`` its local input and output features, ``m`` (rows, the
    expert's tokens included) recovered from its forward FLOPs 2·m·k·n."""
    if spec.kind not in _FROZEN_MATMULS:
        return counts
    s = element_bytes
    params = counts.weight_bytes / s  # base weight elements held (0 where tied)
    experts = params / np.maximum(k * n, 1.0)  # local experts (1 for a plain matmul)
    # m, the rows over the local experts too: the forward is m·n·(2k − 1) FLOPs
    rows = counts.flop_mat_fwd / np.maximum(n * (2.0 * k - 1.0), 1.0)
    weight_grad = k * n * np.maximum(2.0 * rows - experts, 0.0)  # k·n·(2m − 1) per expert
    counts.flop_mat_bwd = np.maximum(counts.flop_mat_bwd - weight_grad, 0.0)
    counts.bytes_bwd = counts.bytes_bwd / 2.0
    quantised = trainable == "qlora" and spec.name.startswith(TARGETS["all"])
    held = params * (NF4_BYTES_PER_PARAM if quantised else s)
    if quantised:  # dequantise to BF16 before the forward GEMM and the dX GEMM
        dequant = params * (NF4_BYTES_PER_PARAM + s)
        counts.extra_bytes_fwd = counts.extra_bytes_fwd + dequant
        counts.extra_bytes_bwd = counts.extra_bytes_bwd + dequant
        counts.launches_fwd = counts.launches_fwd + 1
        counts.launches_bwd = counts.launches_bwd + 1
    if targeted(spec, targets):
        r = float(rank)
        counts.flop_mat_fwd = counts.flop_mat_fwd + 2.0 * rows * r * (k + n)
        counts.flop_mat_bwd = counts.flop_mat_bwd + 4.0 * rows * r * (k + n)
        counts.extra_bytes_fwd = counts.extra_bytes_fwd + s * rows * (k + 2 * r + 2 * n)
        counts.extra_bytes_bwd = counts.extra_bytes_bwd + s * rows * (3 * k + 4 * r + 2 * n)
        counts.act_bytes = counts.act_bytes + s * rows * r
        counts.launches_fwd = counts.launches_fwd + 3
        counts.launches_bwd = counts.launches_bwd + 4
        held = held + ADAPTER_BYTES_PER_PARAM * experts * r * (k + n)
    counts.weight_bytes = held
    return counts


def adapter_params(specs, dims: dict[str, int], share, layers: int, experts: int, rank: int,
                   targets: str) -> float:
    """LoRA parameters of the whole model: r·(k + n) per targeted matmul of a block's op
    table (global k, n; each routed expert its own adapter), in the share of layers it runs
    in (``share``: a spec → fraction function), times the layers."""
    total = 0.0
    for spec in specs:
        if not targeted(spec, targets):
            continue
        copies = experts if spec.kind == Kind.EXPERT_LINEAR else 1
        total += copies * rank * (dims[spec.k] + dims[spec.n]) * share(spec)
    return total * layers


def quantised_params(specs, dims: dict[str, int], share, layers: int, experts: int) -> float:
    """Base matmul parameters of the blocks (the ones QLoRA stores in 4 bits)."""
    total = 0.0
    for spec in specs:
        if targeted(spec, "all") and not spec.tied:
            copies = experts if spec.kind == Kind.EXPERT_LINEAR else 1
            total += copies * dims[spec.k] * dims[spec.n] * share(spec)
    return total * layers


def share_of(specs, dims: dict[str, int], share, layers: int, experts: int,
             params: float, trainable: str, rank: int, targets: str) -> float:
    """Trainable bytes over the weight bytes held (1 for ``all``): 2·A / (2·P + 2·A) for LoRA
    (P the model's parameters, A the adapters'), with the blocks' matmul weights at NF4 bytes
    for QLoRA (module docstring)."""
    if not frozen(trainable):
        return 1.0
    adapters = ADAPTER_BYTES_PER_PARAM * adapter_params(specs, dims, share, layers, experts,
                                                        rank, targets)
    held = 2.0 * params + adapters
    if trainable == "qlora":
        held -= (2.0 - NF4_BYTES_PER_PARAM) * quantised_params(specs, dims, share, layers,
                                                               experts)
    return adapters / held if held > 0 else 0.0


def trainable_share(model: Transformer, strategy, ctx: Ctx) -> float:
    """:func:`share_of` for a model priced under ``strategy``'s op table in ``ctx`` (1 unless
    the execution freezes the base weights)."""
    ex = ctx.execution
    if not frozen(ex.trainable):
        return 1.0
    return share_of(strategy.block, ctx.dims, ctx.share, model.layers, model.experts,
                    float(total_params(model)), ex.trainable, ex.lora_rank, ex.lora_targets)


def gradient_factor(ctx: Ctx, share: float) -> float:
    """Gradient bytes per weight byte held: 2 for fp32 gradients, else 1, times the trainable
    ``share`` (:func:`trainable_share`: gradients, their reduction and the optimizer state
    cover trainable weights only)."""
    return (2.0 if ctx.execution.fp32_gradients else 1.0) * share
