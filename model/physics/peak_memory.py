"""What a PyTorch-native stack holds at its memory peak beyond the kept activations and the
sharded states: the eager FP32 cross-entropy's logit buffers, and FSDP2's unsharded parameters
and gradients under pipeline parallelism — closed forms from the framework code (no parameter
fitted), and FSDP2's root held gathered. One place for them; :mod:`model.physics.memory` adds
them to the stages.

**The eager FP32 loss** (``Execution.loss_fp32_eager``: the ``torchtitan-2025`` stack; the
FP32 passes' time is priced by ``elementwise``, :mod:`model.physics.elementwise`; llm-foundry's
runs of the fit data could not have held it — MPT-3B at 32K tokens and microbatch 3 would need
49 GB more than its measured layout had — so the flag is torchtitan's, not every eager
stack's).
TorchTitan's ``loss_fn`` is ``F.cross_entropy(pred.flatten(0, 1).float(), labels)`` and it is
not compiled (``train.py`` at pytorch/torchtitan@9dec370ad26b5f8e9a7333a0e36165018262644b:
"compiling loss function causes CUDA errors, turning off for now"); ``pred`` is deleted only
after the loss (``del pred`` before ``loss.backward()``). Per local logit (tokens × V/tp: with
tensor parallelism the logits stay vocab-sharded, loss parallel):

* forward: the BF16 logits (2 B), their FP32 copy (4 B) and log_softmax's FP32 output (4 B,
  saved for its backward) are alive together: 10 B;
* backward, first node: nll_loss's dense FP32 gradient (4 B) and log_softmax's backward output
  (4 B) beside the saved output (4 B): 12 B — the peak, at the start of the backward, when
  every kept activation is still held.

The op table already keeps 2 B a logit for the loss (:func:`model.physics.ops.cross_entropy`),
so the peak adds :data:`EAGER_LOSS_PEAK_BYTES_PER_LOGIT` − 2 = 10 B a logit, once (one
microbatch's loss at a time), on the stage that holds the head. DTensor's loss-parallel
log-softmax may hold further temporaries: not modelled.

**FSDP2 under pipeline parallelism.** TorchTitan does not reshard a block after its forward
when pipelining (``apply_fsdp``, ``reshard_after_forward = False`` "for PP",
``torchtitan/parallelisms/parallelize_llama.py`` at 9dec370), and PyTorch's pipeline stage runs
every microbatch's backward with ``set_reshard_after_backward(False)`` and
``set_requires_gradient_sync(False)``, reducing the gradients only after the last
(``backward_maybe_with_nosync``, ``torch/distributed/pipelining/stage.py`` at
pytorch/pytorch@0138610331c90b8053a0bfc6df0175b200a1cad2). So every block of the stage stays
gathered (2 B a parameter) and its gradients accumulate unsharded, upcast to the reduce dtype
(FP32 with ``fp32_gradients``: ``FSDPParam.to_accumulated_grad_if_needed``,
``torch/distributed/fsdp/_fully_shard/_fsdp_param.py`` at
17a7e1e09b3e17825b4cb51d75dab1a764712793): the stage's gradient bytes are those of its
weights unsharded, not over the replica group (:func:`fsdp_pipeline_grad_group`).

**FSDP2's root.** TorchTitan shards each block and then the whole model as FSDP2's root
(``fully_shard(model, …)``, ``apply_fsdp`` at 9dec370), whose own parameters are the embedding,
the final norm and the head. FSDP2 never reshards the root after its forward ("For the root, do
not reshard after forward since for training, the parameters would be freed and all-gathered
immediately": ``FSDPState._lazy_init`` sets its ``post_forward_mesh_info = None``,
``torch/distributed/fsdp/_fully_shard/_fsdp_state.py`` at
pytorch/pytorch@1fd469d0c96ead7343898aa01db036dbbe4c46db), so the end stages hold these weights
gathered (2 B a parameter, vocab-sharded by tensor parallelism) at the loss's peak
(:func:`root_gathered`).
"""

from __future__ import annotations

import numpy as np

from model.specs.execution import Execution

LOSS_KEPT_BYTES_PER_LOGIT = 2.0  # what the op table keeps for the loss (BF16 logits)
# nll_loss's FP32 gradient + log_softmax's backward output + its saved FP32 output
EAGER_LOSS_PEAK_BYTES_PER_LOGIT = 4.0 + 4.0 + 4.0


def eager_loss(ex: Execution) -> bool:
    """Whether the loss runs as eager PyTorch's FP32 cross-entropy (``loss_fp32_eager``)."""
    return bool(ex.loss_fp32_eager)


def loss_peak_extra_bytes(ex: Execution, loss_kept_bytes):
    """Bytes the eager FP32 loss adds at the peak beyond what the op table keeps for it
    (``loss_kept_bytes``: 2 B a local logit, the loss op's ``act_bytes``): 10 B a logit with
    ``loss_fp32_eager``, else 0."""
    kept = np.asarray(loss_kept_bytes, dtype=float)
    if not eager_loss(ex):
        return np.zeros_like(kept)
    logits = kept / LOSS_KEPT_BYTES_PER_LOGIT
    return (EAGER_LOSS_PEAK_BYTES_PER_LOGIT - LOSS_KEPT_BYTES_PER_LOGIT) * logits


def root_gathered(ex: Execution) -> bool:
    """Whether the embedding and head stay gathered through the step (FSDP2's root: ZeRO-3 with
    ``fsdp_version`` 2)."""
    return ex.zero >= 3 and ex.fsdp_version == 2


def fsdp_pipelined(ex: Execution, pp) -> np.ndarray:
    """Per configuration, whether FSDP2 runs under pipeline parallelism (ZeRO-3, FSDP2, pp > 1):
    every block of the stage stays gathered and its gradients unsharded (module docstring)."""
    pp = np.asarray(pp)
    return (pp > 1) & (ex.zero >= 3) & (ex.fsdp_version == 2)


def fsdp_pipeline_grad_group(ex: Execution, pp, dp_group) -> np.ndarray | None:
    """The group the held gradients are sharded over: 1 (unsharded) where FSDP2 pipelines,
    else the replica group; None (the replica group, nothing to compute) for any stack but
    FSDP2's ZeRO-3."""
    if not (ex.zero >= 3 and ex.fsdp_version == 2):
        return None
    return np.where(fsdp_pipelined(ex, pp), 1, np.asarray(dp_group))
