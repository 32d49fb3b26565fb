"""Model modes: the paper's number-changing bugs and simplifications as independent switches.

``mode="paper"`` turns every switch on and reproduces arXiv 2410.00273's published figures
(docs/model.md §12); the default model turns them all off. Any mix can be passed as a
:class:`Mode` to measure what each fix changes (an ablation).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from model.errors import ModelError


@dataclass(frozen=True)
class Mode:
    """Which of the paper's choices to copy (True) or fix (False)."""

    layernorm2d_uses_seq_len: bool = False  # bug 1: LayerNorm2D local features l//tp1, not e//tp1
    free_slow_pipeline_links: bool = False  # bug 2: cross-domain p2p costs 0; p2p uses one NIC
    allreduce_half_counted: bool = False  # bug 3: all-reduce = reduce-scatter except hierarchical
    summa_context_attention: bool = False  # bug 4: SUMMA runs context-parallel attention
    blocks_only: bool = False  # no embedding, LM head or loss
    paper_bias_sharding: bool = False  # output biases on unsharded rows (1D) as in the paper
    exact_domain_fill: bool = False  # placement must fill NVS exactly (no partly filled node)
    no_optimizer_step: bool = False  # the optimizer update (HBM-bound Adam step) costs nothing
    mlp_act_dropout: bool = False  # a dropout on the MLP hidden activation (not in GPT/Megatron)
    full_linear_inputs_kept: bool = False  # SP matmuls keep the gathered input, not its shard
    non_causal_attention: bool = False  # fused attention computes the masked half too
    equal_pipeline_stages: bool = False  # pp must divide the layers (no uneven stages)
    attention_output_kept: bool = False  # fused attention keeps O, which proj keeps too (twice)
    summa_matmul_2k_flops: bool = False  # SUMMA matmuls: 2K FLOPs per output (1D: 2K − 1)

    @property
    def is_paper(self) -> bool:
        return self == PAPER

    @property
    def label(self) -> str:
        if self == PAPER:
            return "paper"
        if self == DEFAULT:
            return "default"
        return "custom(" + ",".join(f.name for f in fields(self) if getattr(self, f.name)) + ")"


PAPER = Mode(**{f.name: True for f in fields(Mode)})
DEFAULT = Mode()
SWITCHES = tuple(f.name for f in fields(Mode))


def resolve_mode(mode: object) -> Mode:
    """A :class:`Mode` from ``None``/"default" (fixed model), "paper" / True, or a Mode."""
    if isinstance(mode, Mode):
        return mode
    if mode is None or mode is False or mode == "default":
        return DEFAULT
    if mode is True or mode == "paper":
        return PAPER
    raise ModelError(f"unknown mode {mode!r}; use None (default model) or 'paper'")
