"""The element-wise kernels a stack runs between the matmuls, as extra HBM passes per layer.

The op table prices one kernel per norm, activation, bias and dropout (:mod:`model.physics.ops`),
as fused stacks run them (Megatron-LM, Transformer Engine). Unfused eager PyTorch runs every
step of an FP32 RMSNorm, of RoPE and of SwiGLU as its own kernel, and the residual adds apart;
``torch.compile`` fuses most of them back. ``reference/elementwise_passes.json`` counts, per
mode and kernel, the extra passes over a layer's BF16 tensors and says where each count comes
from (the torchtitan and llm-foundry model code). They are separate memory-bound kernels: their
bytes go to the ops' ``extra_bytes`` and their time is bytes / HBM bandwidth, added to the op's.

Where each count lands (per microbatch, local shapes, s = 2 bytes):

* the in-block norms (``attn/norm``, ``mlp/norm``) each carry half of the residual adds, the
  attention-output copy and (models with ``norm = rmsnorm``) the RMSNorm steps:
  passes·s·b·r·e / 2;
* the activation (SwiGLU models): passes·s·b·r·f;
* attention (``position_embedding = rope``): passes·s·b·r·(h + k)·q over its local heads;
* the loss (eager: its FP32 upcast, log-softmax and their backward): passes·s·b·r·V over
  the local logits.

The backward moves ``backward_factor`` × the forward passes of each kernel.
"""

from __future__ import annotations

import json

from model.physics import ops
from model.specs import memo
from model.specs.schema import DATA_DIR

TABLE = DATA_DIR / "reference" / "elementwise_passes.json"
BLOCK_NORMS = ("attn/norm", "mlp/norm")


@memo.lru("element-wise passes table", 1)
def _table() -> dict:
    return json.loads(TABLE.read_text())


def passes(mode: str, kernel: str) -> tuple[float, float]:
    """(forward, backward) extra passes per layer of ``kernel`` under ``mode`` (auto: fused)."""
    table = _table()
    fwd = float(table["modes"]["fused" if mode == "auto" else mode][kernel])
    return fwd, fwd * float(table["backward_factor"][kernel])


def add_passes(counts: ops.OpCounts, mode: str, kernels: tuple[str, ...], elements,
               share: float = 1.0, s: float = 2.0) -> ops.OpCounts:
    """``counts`` with the extra passes of ``kernels`` over ``elements`` BF16 values (times
    ``share``: half for each of a layer's two norms) added to its separate kernels' bytes."""
    for kernel in kernels:
        fwd, bwd = passes(mode, kernel)
        if fwd:
            counts.extra_bytes_fwd = counts.extra_bytes_fwd + share * fwd * s * elements
            counts.extra_bytes_bwd = counts.extra_bytes_bwd + share * bwd * s * elements
    return counts
