"""Parallel strategies as data: which axis shards which dimension of each op, and which collective
each op needs over which group (docs/model.md §7).

A strategy is a table of :class:`OpSpec` rows for one transformer block (plus the ops before the
first and after the last block), evaluated by the one generic code path in
:mod:`model.physics.block`. Parallel axes: ``tp1`` shards hidden features / heads, ``tp2`` shards
the sequence (SUMMA rows or context parallel); ``dp`` and ``pp`` never shard an op. A dimension
name (``e``, ``f``, ``qkv``, …) refers to :func:`model_dims`. Volumes of collectives are named
(``in``, ``out``, ``kv``, …) and defined once in :func:`model.physics.volumes.comm_volume_bytes`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property

from model.errors import ModelError
from model.physics import moe
from model.physics.collectives import Collective
from model.physics.dims import model_dims
from model.physics.optable import NONE, TP1, TP2, Axes, CommSpec, Kind, OpSpec
from model.physics.optable import ag as _ag
from model.physics.optable import ar as _ar
from model.physics.optable import rs as _rs
from model.specs import memo
from model.specs.execution import Execution, resolve_execution
from model.specs.modes import Mode, resolve_mode
from model.specs.precision import PRECISIONS
from model.specs.transformer import Transformer

__all__ = ["Axes", "CommSpec", "Kind", "OpSpec", "Strategy", "build_strategy",
           "canonical_strategy", "model_dims", "supported_strategies", "supports"]


@dataclass(frozen=True)
class Strategy:
    """A parallel strategy: its block table and the groups of its data-parallel collectives.

    ``dp_axes``: axes over which weights are replicated (the gradient reduce-scatter / parameter
    all-gather group and the optimizer-state sharding). ``microbatch_divides``: axes whose product
    must divide mbs·l. ``boundary``: the op whose activation is the pipeline p2p message.
    """

    name: str
    label: str
    block: tuple[OpSpec, ...]
    pre: tuple[OpSpec, ...]
    post: tuple[OpSpec, ...]
    dp_axes: Axes
    microbatch_divides: Axes
    boundary: str
    has_tp2: bool
    has_panels: bool
    tp1_columns_factor: int  # tp1 must leave factor·e/tp1 matmul columns (1D: the fused QKV)
    tp2_divides_hidden: bool  # SUMMA: W rows are split over tp2 too
    p2p_scatter: Axes  # the boundary activation is replicated over these: each sends 1/size

    @cached_property
    def twins(self) -> dict[str, tuple[int, ...]]:
        """Per op of the block, pre and post tables: the position of the first op of its table
        equal to it but for its name (its own position when none), e.g. the attention's and
        the MLP's dropouts. Nothing prices an op by its name, so such ops have the same counts
        and times and are evaluated once."""
        def first(ops: tuple[OpSpec, ...]) -> tuple[int, ...]:
            seen: dict[OpSpec, int] = {}
            return tuple(seen.setdefault(replace(op, name=""), i) for i, op in enumerate(ops))
        return {which: first(getattr(self, which)) for which in ("block", "pre", "post")}


@dataclass(frozen=True)
class Traits:
    """What a strategy is independently of the model: its label, its rules
    (model.engine.rules) and which production training stacks ship it.

    ``implemented_by`` names the mainstream stacks that run the strategy as its op table models
    it; empty for an idealised strategy (modelled, not shipped), whose results are an upper
    bound of what a real run could reach. ``provenance`` says where the strategy comes from."""

    label: str
    has_tp2: bool
    has_panels: bool
    dp_axes: Axes
    microbatch_divides: Axes
    tp1_columns_factor: int
    tp2_divides_hidden: bool
    implemented_by: tuple[str, ...] = ()
    provenance: str = ""
    short: str = ""  # the label of a legend or a button ("1D TP")

    @property
    def production(self) -> bool:
        """Whether a production stack ships the strategy (else it is idealised)."""
        return bool(self.implemented_by)


MEGATRON_STACKS = ("Megatron-LM", "NeMo", "Megatron-Bridge")
# The strategies, in the order every list of them follows (CLI, sweep, dashboard)
TRAITS: dict[str, Traits] = {
    "1d": Traits("1D tensor parallel", False, False, ("dp",), TP1, 3, False, MEGATRON_STACKS,
                 "Megatron tensor parallelism (Shoeybi et al. 2019) with sequence parallelism "
                 "(Korthikanti et al. 2022): --tensor-model-parallel-size, "
                 "--sequence-parallel", short="1D TP"),
    "summa": Traits("2D SUMMA tensor parallel", True, True, ("dp",), TP2, 1, True, (),
                    "idealised: SUMMA matmuls on a tp2 x tp1 grid (van de Geijn & Watts 1997; "
                    "Optimus, Xu et al. 2021) as the paper models them; not in Megatron-LM, "
                    "NeMo or Megatron-Bridge", short="2D SUMMA"),
    "context": Traits("2D context/sequence parallel", True, False, ("dp", "tp2"),
                      ("tp1", "tp2"), 1, False, MEGATRON_STACKS,
                      "Megatron-Core context parallelism (--context-parallel-size, K/V "
                      "all-gather or ring exchange) combined with 1D tensor parallelism",
                      short="2D context"),
}
STRATEGIES: tuple[str, ...] = tuple(TRAITS)
PRODUCTION: tuple[str, ...] = tuple(n for n, t in TRAITS.items() if t.production)
IDEALISED: tuple[str, ...] = tuple(n for n, t in TRAITS.items() if not t.production)
LABELS = {name: t.label for name, t in TRAITS.items()}
SHORT_LABELS = {name: t.short for name, t in TRAITS.items()}
STRATEGY_NAMES = {**{name: name for name in STRATEGIES}, "2d": "summa", "2d-seqp": "context",
                  "seqp": "context"}


def _mlp_tail(model: Transformer, mode: Mode, rows: Axes, hid: Axes) -> list[OpSpec]:
    """fc1 bias, activation (and, in the paper, a dropout) on the [rows, f/hid] MLP hidden."""
    ops = []
    if model.mlp_bias:
        ops.append(OpSpec("mlp/fc1_bias", Kind.BIAS, k="f_in", rows=rows, k_shard=hid))
    ops.append(OpSpec("mlp/act", Kind.ACT, k="f", rows=rows, k_shard=hid))
    if model.dropout and mode.mlp_act_dropout:
        ops.append(OpSpec("mlp/act_dropout", Kind.DROPOUT, k="f", rows=rows, k_shard=hid))
    return ops


def _residual(model: Transformer, part: str, bias_rows: Axes, bias_cols: Axes, rows: Axes,
              cols: Axes, norm: OpSpec) -> list[OpSpec]:
    """Output bias, dropout and the norm that close an MLP or attention sub-block (a MoE
    model's MLP biases are on its experts' and dense MLPs' own rows)."""
    ops = []
    bias = model.attention_bias if part == "attn" else model.mlp_bias and not model.moe
    if bias:
        ops.append(OpSpec(f"{part}/out_bias", Kind.BIAS, rows=bias_rows, k_shard=bias_cols))
    if model.dropout:
        ops.append(OpSpec(f"{part}/dropout", Kind.DROPOUT, rows=rows, k_shard=cols))
    return ops + [norm]


def _tp_comms(mode: Mode, ex: Execution, seq: Axes, moved: bool) -> dict:
    """The collectives of Megatron's column- and row-parallel matmuls (module docstring of
    :func:`_megatron`); ``moved``: the SP gathers sit on the matmuls, not on the norms."""
    sp = ex.sequence_parallel
    col_bwd = (_rs("in", TP1),) if sp else (_ar("in", TP1),)
    # Megatron SP keeps the column-parallel input as its l/tp shard and all-gathers it again in
    # the backward pass (Korthikanti et al. 2022, §4.2.2); the paper, and PyTorch's DTensor TP
    # (autograd saves the gathered input), keep the gathered input
    dtensor = ex.tp_style == "dtensor"
    shard_inputs = sp and not mode.full_linear_inputs_kept and not dtensor
    if shard_inputs:
        col_bwd = col_bwd + (_ag("in", TP1),)
    # torchao's Float8 TP gathers the input and the output gradient in FP8 (Execution.tp_style)
    q = "_q" if dtensor and PRECISIONS[ex.precision].quantised else ""
    return {"col_fwd": (_ag("in" + q, TP1),) if moved else (), "col_bwd": col_bwd,
            "col_act": seq if shard_inputs else None,
            "row_fwd": (_rs("out", TP1),) if sp else (_ar("out", TP1),),
            "row_bwd": (_ag("out" + q, TP1),) if moved else (), "q": q}


def _megatron(model: Transformer, mode: Mode, ex: Execution, context: bool
              ) -> tuple[list[OpSpec], list[OpSpec], list[OpSpec], Axes]:
    """Megatron tensor parallelism over tp1 (docs/model.md §7.1), optionally on l/tp2 sequence
    rows with context-parallel flash attention over tp2 (§7.2).

    Column-parallel fc1/qkv and row-parallel fc2/proj. With sequence parallelism (the paper's
    choice) norms and dropouts act on rows sharded over tp1 too, the row-parallel output is
    reduce-scattered, the norms all-gather (fwd) and reduce-scatter (bwd); without it they act
    on replicated rows and the matmuls all-reduce (Korthikanti et al. 2022). Context attention
    all-gathers K and V over tp2 (fwd AG, bwd AG + RS), not overlapped. A MoE model's MLPs are
    the mix of its dense-layer MLP and MoE layer, MLA replaces the QKV projection
    (:mod:`model.physics.moe`), and MTP modules add rows to the last stage.
    """
    base = TP2 if context else NONE  # rows of the matmul inputs
    sp = ex.sequence_parallel
    seq = base + TP1 if sp else base  # rows of norms, dropouts, residual
    # With TP overlap the gathers go where Megatron overlaps them: the forward AG of the
    # column-parallel input into that matmul, the backward AG of dY into the row-parallel one.
    # Without it, the paper's attribution to the norm: the same collectives and volumes (its
    # backward RS costs what the AG does, docs/model.md §5.1), only shown on another op. A MoE
    # layer's routed tokens need no gather: a MoE model's MLP gathers sit on its MLP matmuls.
    moved = sp and ex.tp_overlap
    comms = _tp_comms(mode, ex, seq, moved)
    mlp_comms = _tp_comms(mode, ex, seq, sp) if model.moe else comms
    q = comms["q"]  # the norm's gather is the column input's; its backward RS prices the
    # row output gradient's gather (docs/model.md §5.1): both in FP8 under torchao's Float8 TP
    norm_comm = ({"fwd": (_ag("in" + q, TP1),), "bwd": (_rs("in" + q, TP1),)}
                 if sp and not moved else {})
    mlp_norm_comm = {} if model.moe else norm_comm
    paper = mode.paper_bias_sharding
    # the paper's output biases: 1D on unsharded [l, e]; context attention Bias(b, l, e; m2, m1)
    mlp_bias = (NONE, NONE) if paper and not context else (seq, NONE)
    attn_bias = mlp_bias if not (paper and context) else (TP2, TP1)
    ring = context and ex.context_attention == "ring"
    if ring:  # K/V blocks travel the tp2 ring, one step per block, under the attention compute
        p2p = CommSpec(Collective.P2P, "kv", TP2)
        kv, kv_bwd, kv_panels = (p2p,), (p2p, p2p), "tp2"  # backward: K/V and dK/dV
    elif context and ex.context_attention == "pytorch":  # model.physics.ring_attention
        gather = _ag("kv_rep", TP2)
        kv, kv_bwd, kv_panels = (gather,), (gather, CommSpec(Collective.P2P, "dkv_hop", TP2)), None
    else:
        kv = (_ag("kv", TP2),) if context else ()
        kv_bwd, kv_panels = kv + ((_rs("kv", TP2),) if context else ()), None
    if model.moe:
        mlp = (moe.dense_mlp_rows(model, base, mlp_comms) if model.dense_layers else []) + (
            moe.moe_rows(model, base, mlp_comms, ex.ep_dispatcher == "flex"))
    else:
        mlp = [OpSpec("mlp/fc1", Kind.LINEAR, k="e", n="f_in", rows=base, n_shard=TP1,
                      fwd=comms["col_fwd"], bwd=comms["col_bwd"], act_rows=comms["col_act"]),
               *_mlp_tail(model, mode, base, TP1),
               OpSpec("mlp/fc2", Kind.LINEAR, k="f", n="e", rows=base, k_shard=TP1,
                      fwd=comms["row_fwd"], bwd=comms["row_bwd"])]
    mlp += _residual(model, "mlp", *mlp_bias, seq, NONE,
                     OpSpec("mlp/norm", Kind.NORM, rows=seq, **mlp_norm_comm))
    if model.mla:
        attn = moe.mla_rows(model, base, comms, kv, kv_bwd, kv_panels)
    else:
        attn = [OpSpec("attn/qkv", Kind.LINEAR, k="e", n="qkv", rows=base, n_shard=TP1,
                       fwd=comms["col_fwd"], bwd=comms["col_bwd"], act_rows=comms["col_act"]),
                OpSpec("attn/flash", Kind.ATTENTION, rows=base, heads_shard=TP1, fwd=kv,
                       bwd=kv_bwd, panels=kv_panels)]
    attn += [OpSpec("attn/proj", Kind.LINEAR, k="attn_out", n="e", rows=base, k_shard=TP1,
                    fwd=comms["row_fwd"], bwd=comms["row_bwd"]),
             *_residual(model, "attn", *attn_bias, seq, NONE,
                        OpSpec("attn/norm", Kind.NORM, rows=seq, **norm_comm))]
    # vocab-parallel table [V/tp1, e]: partial outputs reduce-scattered (SP) or all-reduced
    embed_comm = ({"fwd": (_rs("in", TP1),), "bwd": (_ag("in", TP1),)} if sp
                  else {"fwd": (_ar("in", TP1),)})
    pre = [OpSpec("embed/lookup", Kind.EMBEDDING, k="e", n="V", rows=base, n_shard=TP1,
                  **embed_comm)]
    post = [OpSpec("head/norm", Kind.NORM, rows=seq, **norm_comm),
            OpSpec("head/logits", Kind.LINEAR, k="e", n="V", rows=base, n_shard=TP1,
                   fwd=comms["col_fwd"], bwd=comms["col_bwd"], act_rows=comms["col_act"]),
            OpSpec("head/loss", Kind.LOSS, k="V", rows=base, k_shard=TP1,
                   fwd=(_ar("stats", TP1),))]
    post += moe.mtp_rows(model, base, seq, comms, _ar("stats", TP1))
    return mlp + attn, pre, post, (() if sp else TP1)


def _summa_linear(name: str, k: str, n: str) -> OpSpec:
    """LinearSumma: X panels broadcast along tp1, W panels along tp2, nb panels (docs/model.md
    §6, §7.3)."""
    bc, rd = Collective.BROADCAST, Collective.REDUCE
    return OpSpec(
        name, Kind.SUMMA_LINEAR, k=k, n=n, rows=TP2, k_shard=TP1, n_shard=TP1, panels="nb",
        fwd=(CommSpec(bc, "summa_x", TP1), CommSpec(bc, "summa_w", TP2)),
        bwd=(CommSpec(bc, "summa_w", TP2), CommSpec(rd, "summa_x", TP1),
             CommSpec(bc, "summa_x", TP1), CommSpec(rd, "summa_w", TP2)),
    )


def _summa(model: Transformer, mode: Mode, ex: Execution
           ) -> tuple[list[OpSpec], list[OpSpec], list[OpSpec], Axes]:
    """2D SUMMA (docs/model.md §7.3): every matmul a SUMMA on the tp2 × tp1 grid, 2D LayerNorm.

    Paper mode copies its attention (context-parallel flash attention with an exposed K/V
    all-gather, bug 4) and its LayerNorm2D (features l // tp1, bug 1). The default model uses SUMMA
    attention: K/V row panels broadcast along tp2 and overlapped with the attention compute
    (tp2 panels, §5.3), and the norm statistics all-reduced over tp1 (2 values per row), γ/β
    gradients over tp2.
    """
    ar = Collective.ALLREDUCE
    if mode.layernorm2d_uses_seq_len:
        stats = ((CommSpec(ar, "stats", TP1),), (CommSpec(ar, "stats_paper_bwd", TP1),))
    else:
        stats = ((CommSpec(ar, "stats", TP1),),
                 (CommSpec(ar, "stats", TP1), CommSpec(ar, "norm_weights", TP2)))
    if mode.summa_context_attention:
        kv_fwd, kv_bwd, kv_panels = (_ag("kv", TP2),), (_ag("kv", TP2), _rs("kv", TP2)), None
    else:
        bc, rd = Collective.BROADCAST, Collective.REDUCE
        kv_fwd = (CommSpec(bc, "kv", TP2),)
        kv_bwd = (CommSpec(bc, "kv", TP2), CommSpec(rd, "kv", TP2))
        kv_panels = "tp2"

    def norm(name: str) -> OpSpec:
        return OpSpec(name, Kind.NORM, k="ln2d", rows=TP2, k_shard=TP1, fwd=stats[0], bwd=stats[1])

    mlp = [_summa_linear("mlp/fc1", "e", "f_in"),
           *_mlp_tail(model, mode, TP2, TP1),
           _summa_linear("mlp/fc2", "f", "e"),
           *_residual(model, "mlp", TP2, TP1, TP2, TP1, norm("mlp/norm"))]
    attn = [_summa_linear("attn/qkv", "e", "qkv"),
            OpSpec("attn/flash", Kind.ATTENTION, rows=TP2, heads_shard=TP1, fwd=kv_fwd,
                   bwd=kv_bwd, panels=kv_panels),
            _summa_linear("attn/proj", "attn_out", "e"),
            *_residual(model, "attn", TP2, TP1, TP2, TP1, norm("attn/norm"))]
    # the table is split by features over tp1 (each GPU: all V rows, e/tp1 columns): no comm
    pre = [OpSpec("embed/lookup", Kind.EMBEDDING, k="e", n="V", rows=TP2, k_shard=TP1)]
    post = [norm("head/norm"), _summa_linear("head/logits", "e", "V"),
            OpSpec("head/loss", Kind.LOSS, k="V", rows=TP2, k_shard=TP1,
                   fwd=(CommSpec(ar, "stats", TP1),))]
    return mlp + attn, pre, post, ()


_BUILDERS = {
    "1d": lambda m, mode, ex: _megatron(m, mode, ex, context=False),
    "summa": _summa,
    "context": lambda m, mode, ex: _megatron(m, mode, ex, context=True),
}


def supports(name: str, model: Transformer) -> bool:
    """Whether strategy ``name`` models ``model``: SUMMA has no MoE, MLA or MTP op table."""
    return canonical_strategy(name) != "summa" or not (model.moe or model.mla
                                                         or model.mtp_layers)


def supported_strategies(model: Transformer) -> tuple[str, ...]:
    """The strategies (in :data:`STRATEGIES` order) that model ``model``."""
    return tuple(name for name in STRATEGIES if supports(name, model))


def canonical_strategy(name: str) -> str:
    """'1d' | 'summa' | 'context' from any accepted alias (2d, 2d-seqp, seqp)."""
    key = STRATEGY_NAMES.get(str(name).lower())
    if key is None:
        raise ModelError(f"unknown strategy '{name}'; choose {', '.join(STRATEGIES[:-1])} or "
                         f"{STRATEGIES[-1]}")
    return key


def build_strategy(name: str, model: Transformer, mode: object = None,
                   execution: object = None) -> Strategy:
    """The op table of strategy ``name`` for ``model``; ``paper`` copies the paper's choices.

    In paper mode there are no embedding, head or loss ops (the paper models only blocks).
    """
    key = canonical_strategy(name)
    if not supports(key, model):
        raise ModelError(f"the summa strategy does not model mixture of experts, MLA or MTP "
                         f"('{model.name}'); use 1d or context")
    mode = resolve_mode(mode)
    ex = resolve_execution(execution)
    return _built(key, model, mode, ex)


@memo.lru("strategy tables", 256)
def _built(key: str, model: Transformer, mode: Mode, ex: Execution) -> Strategy:
    """:func:`build_strategy` of a canonical name, remembered per process: a strategy's table
    depends only on these (all frozen), and each search asks for it again."""
    block, pre, post, scatter = _BUILDERS[key](model, mode, ex)
    if mode.blocks_only or model.vocab == 0:
        pre, post = [], []
    t = TRAITS[key]
    return Strategy(
        name=key, label=t.label, block=tuple(block), pre=tuple(pre), post=tuple(post),
        dp_axes=t.dp_axes, microbatch_divides=t.microbatch_divides, boundary="attn/norm",
        has_tp2=t.has_tp2, has_panels=t.has_panels, tp1_columns_factor=t.tp1_columns_factor,
        tp2_divides_hidden=t.tp2_divides_hidden, p2p_scatter=scatter,
    )
