"""The rules a parallel configuration obeys, written once: the search space applies them to arrays
of candidates (:mod:`model.engine.space`), and :func:`explain` applies the same rules to pinned
values to say which one a configuration breaks (docs/model.md, the search space).

Each :class:`Rule` restricts one dimension (``axis``: checked when the space adds that
dimension) and reads the dimensions in ``reads``; its test is elementwise numpy over
broadcastable arrays, its message a format string over the same names plus the problem's
constants (``n`` GPUs, ``gbs``, ``e`` hidden, ``h`` heads, ``kv`` KV heads, ``l`` sequence,
``layers``, ``split``, ``strategy``). A strategy's own rules (which axes a
microbatch must divide, whether tp2 must divide the hidden size, how many columns tp1 must leave)
are fields of its :class:`~model.physics.strategies.Strategy` record.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from model.engine.production import (
    RELAX,
    WHOLE_NODES,
    placement_problem,
    production_node,
    whole_node_mask,
)
from model.errors import ModelError
from model.physics.strategies import Strategy
from model.specs import memo
from model.specs.execution import Execution
from model.specs.hardware import System
from model.specs.modes import Mode, resolve_mode
from model.specs.transformer import Transformer

MIN_COLUMNS = 128  # tp1 must leave at least this many matmul columns per GPU
MIN_ROWS = 128  # tp2 must leave at least this many sequence rows per GPU


@dataclass(frozen=True)
class Problem:
    """The search-space spec of one strategy at one GPU count: what the rules read besides the
    configuration's dimensions, and what the shapes and their NVLink placements are built from
    (:func:`~model.engine.space.build_space`, :func:`~model.engine.size.space_size`,
    :func:`explain`). :meth:`of` makes it from an execution and a system."""

    model: Transformer
    strategy: Strategy
    gpus: int
    global_batch: int
    interleave: int = 1  # the virtual stages asked for (0: every count the stages allow)
    equal_stages: bool = False
    ends_count_as_layers: bool = False
    production_node: int = 0  # >0: the production rules apply (model.engine.production)
    nvs: int = 1  # GPUs per NVLink domain (the placements)
    pins: Mapping[str, int | None] = field(default_factory=dict)  # fixed dimensions
    exact_domain_fill: bool = False  # the paper's placement rule (model.specs.modes)

    @classmethod
    def of(cls, model: Transformer, strategy: Strategy, gpus: int, global_batch: int, *,
           mode: Mode, execution: Execution, system: System,
           pins: Mapping[str, int | None] | None = None) -> Problem:
        """The space a search of ``execution`` on ``system`` under ``mode`` covers: its
        interleaving and lighter ends, the mode's stage and placement rules, the system's
        NVLink domain and the production rules where they apply."""
        return cls(model, strategy, int(gpus), int(global_batch), execution.stage_interleave,
                   mode.equal_pipeline_stages, execution.ends_count_as_layers,
                   production_node(execution, mode, system.node_size),
                   system.nvlink_domain_size, {k: v for k, v in (pins or {}).items()
                                               if v is not None}, mode.exact_domain_fill)

    def constants(self) -> dict[str, Any]:
        m, st = self.model, self.strategy
        return {"n": self.gpus, "gbs": self.global_batch, "e": m.hidden, "h": m.heads,
                "kv": m.kv_heads, "l": m.seq_len, "layers": m.pipeline_layers,
                "strategy": st.name, "cols": st.tp1_columns_factor * m.hidden,
                "min_cols": MIN_COLUMNS, "min_rows": MIN_ROWS, "E": m.experts,
                "fe": m.expert_ffn, "model": m.name, "node": self.production_node}

    @functools.cached_property
    def rules(self) -> dict[str, tuple[Rule, ...]]:
        """The rules checked when each axis is added, for this problem: worked out once per
        problem (the space asks them at every axis it adds), not per check."""
        return {axis: tuple(r for r in rules if r.applies(self))
                for axis, rules in _BY_AXIS.items()}


@dataclass(frozen=True)
class Rule:
    """One rule: ``holds(d, p)`` is True where dimensions ``d`` (a dict of arrays) obey it."""

    axis: str
    reads: tuple[str, ...]
    holds: Callable[[dict[str, Any], Problem], Any]
    message: str
    applies: Callable[[Problem], bool] = lambda p: True


def _split(d: dict[str, Any], p: Problem) -> Any:
    """Product of the axes a microbatch's b·l tokens are split over."""
    out = 1
    for axis in p.strategy.microbatch_divides:
        out = out * d[axis]
    return out


def stage_layers(layers: int, pp: Any) -> Any:
    """Blocks on the fullest pipeline stage: ceil(layers / pp) (uneven stages put the extra
    blocks on some stages; with pp | layers it is layers / pp)."""
    return -(-layers // pp)


def ends_lighter(model: Transformer, pp: Any, ends_count_as_layers: bool) -> Any:
    """Where the end stages hold one layer fewer: the embedding and the loss count as layers
    (``Execution.ends_count_as_layers``), there is an embedding, pp > 1, and pp | layers + 2."""
    if not ends_count_as_layers or model.vocab == 0:
        return np.zeros(np.shape(pp), dtype=bool)
    return (np.asarray(pp) > 1) & ((model.pipeline_layers + 2) % np.asarray(pp) == 0)


def stage_layout(model: Transformer, pp: Any, ends_count_as_layers: bool) -> tuple[Any, Any]:
    """(blocks on the fullest middle stage, blocks on each end stage) for ``pp`` stages: with
    lighter ends (layers + 2)/pp and one fewer, else ceil(layers/pp) on both. The layers are
    the pipeline's: the model's plus its MTP layers (on the last stage, as Megatron-Core's
    pipeline layouts place them)."""
    depth = model.pipeline_layers
    plain = stage_layers(depth, pp)
    if not ends_count_as_layers or model.vocab == 0:
        return plain, plain
    lighter = ends_lighter(model, pp, ends_count_as_layers)
    middle = np.where(lighter, (depth + 2) // np.asarray(pp), plain)
    return middle, middle - lighter


RULES: tuple[Rule, ...] = (
    Rule("tp1", (), lambda d, p: whole_node_mask(d, p.gpus, p.production_node),
         "{n} GPUs are not whole nodes of {node} GPUs (" + WHOLE_NODES + ": a " + RELAX + ")",
         applies=lambda p: p.production_node > 0),
    Rule("tp1", ("tp1",), lambda d, p: p.gpus % d["tp1"] == 0, "tp={tp1} does not divide {n} GPUs"),
    Rule("tp1", ("tp1",), lambda d, p: p.model.heads % d["tp1"] == 0,
         "tp={tp1} does not divide heads={h}"),
    Rule("tp1", ("tp1",), lambda d, p: p.model.hidden % d["tp1"] == 0,
         "tp={tp1} does not divide hidden={e}"),
    Rule("tp1", ("tp1",),
         lambda d, p: p.strategy.tp1_columns_factor * p.model.hidden // d["tp1"] >= MIN_COLUMNS,
         "tp={tp1} leaves fewer than {min_cols} columns per GPU"),
    Rule("tp1", ("tp1",),
         lambda d, p: (p.model.kv_heads % d["tp1"] == 0) | (d["tp1"] % p.model.kv_heads == 0),
         "tp={tp1} neither divides nor is a multiple of kv_heads={kv}"),
    Rule("tp2", ("tp2",), lambda d, p: d["tp2"] == 1,
         "the {strategy} strategy has no tp2; leave it at 1",
         applies=lambda p: not p.strategy.has_tp2),
    Rule("tp2", ("tp1", "tp2"), lambda d, p: p.gpus % (d["tp1"] * d["tp2"]) == 0,
         "tp1·tp2 = {tp1}·{tp2} does not divide {n} GPUs"),
    Rule("tp2", ("tp2",), lambda d, p: p.model.seq_len // d["tp2"] >= MIN_ROWS,
         "tp2={tp2} leaves fewer than {min_rows} sequence rows per GPU",
         applies=lambda p: p.strategy.has_tp2),
    Rule("tp2", ("tp2",), lambda d, p: p.model.hidden % d["tp2"] == 0,
         "tp2={tp2} does not divide hidden={e} ({strategy})",
         applies=lambda p: p.strategy.tp2_divides_hidden),
    Rule("pp", ("pp",), lambda d, p: p.model.pipeline_layers % d["pp"] == 0,
         "pp={pp} does not divide layers={layers}", applies=lambda p: p.equal_stages),
    Rule("pp", ("pp",), lambda d, p: d["pp"] <= p.model.pipeline_layers,
         "pp={pp} is more stages than layers={layers}"),
    Rule("pp", ("tp1", "tp2", "pp"), lambda d, p: p.gpus % (d["tp1"] * d["tp2"] * d["pp"]) == 0,
         "tp1·tp2·pp = {tp1}·{tp2}·{pp} does not divide {n} GPUs"),
    Rule("dp", ("dp",), lambda d, p: (p.global_batch % d["dp"] == 0) & (d["dp"] <= p.global_batch),
         "dp={dp} does not divide the global batch {gbs}"),
    Rule("etp", ("etp",), lambda d, p: p.model.moe | (d["etp"] == 1),
         "{model} has no experts: etp must be 1"),
    Rule("etp", ("etp",), lambda d, p: ~np.bool_(p.model.moe) | (
        (p.model.expert_ffn % d["etp"] == 0) & (p.model.expert_ffn // d["etp"] >= MIN_COLUMNS)),
         "etp={etp} does not divide the expert FFN {fe} into at least {min_cols} columns"),
    Rule("etp", ("tp1", "tp2", "dp", "etp"),
         lambda d, p: (d["tp1"] * d["tp2"] * d["dp"]) % d["etp"] == 0,
         "etp={etp} does not divide the stage's tp1·tp2·dp = {stage_gpus} GPUs"),
    Rule("ep", ("ep",), lambda d, p: p.model.moe | (d["ep"] == 1),
         "{model} has no experts: ep must be 1"),
    Rule("ep", ("ep",), lambda d, p: ~np.bool_(p.model.moe) | (
        p.model.experts % d["ep"] == 0), "ep={ep} does not divide experts={E}"),
    Rule("ep", ("tp1", "tp2", "dp", "ep", "etp"),
         lambda d, p: (d["tp1"] * d["tp2"] * d["dp"]) % (d["ep"] * d["etp"]) == 0,
         "ep·etp = {ep}·{etp} does not divide the stage's tp1·tp2·dp = {stage_gpus} GPUs"),
    Rule("microbatch", ("dp", "microbatch"),
         lambda d, p: (p.global_batch // d["dp"]) % d["microbatch"] == 0,
         "microbatch={microbatch} does not divide the local batch {local} (= GBS/dp)"),
    Rule("microbatch", ("tp1", "tp2", "microbatch"),
         lambda d, p: (d["microbatch"] * p.model.seq_len) % _split(d, p) == 0,
         "microbatch·seq_len = {tokens} is not divisible by {split}"),
    Rule("interleave", ("pp", "interleave"), lambda d, p: (d["interleave"] == 1) | (d["pp"] > 1),
         "interleaving {interleave} virtual stages needs pipeline parallelism (pp > 1)"),
    Rule("interleave", ("pp", "interleave"), lambda d, p: stage_layout(
        p.model, d["pp"], p.ends_count_as_layers)[0] % d["interleave"] == 0,
         "{interleave} virtual stages do not divide the {stage_layers} layers of a stage"),
    Rule("interleave", ("pp", "dp", "microbatch", "interleave"),
         lambda d, p: (d["interleave"] == 1)
         | ((p.global_batch // d["dp"] // d["microbatch"]) % d["pp"] == 0),
         "interleaving needs pp={pp} to divide the {n_mb} microbatches"),
    Rule("nb", ("nb",), lambda d, p: p.model.hidden % d["nb"] == 0,
         "nb={nb} does not divide hidden={e}", applies=lambda p: p.strategy.has_panels),
)
AXES = ("tp1", "tp2", "pp", "dp", "etp", "ep", "microbatch", "interleave", "nb")


_BY_AXIS: dict[str, tuple[Rule, ...]] = {a: tuple(r for r in RULES if r.axis == a) for a in AXES}


def rules_for(axis: str, problem: Problem) -> list[Rule]:
    """The rules checked when ``axis`` is added to the space, for this problem."""
    return list(problem.rules.get(axis, ()))


def mask(axis: str, dims: dict[str, Any], problem: Problem) -> Any:
    """Where ``dims`` (broadcastable arrays) obey every rule of ``axis``."""
    ok: Any = True
    for rule in problem.rules.get(axis, ()):
        ok = ok & rule.holds(dims, problem)
    return ok


def _derived(values: dict[str, int], p: Problem) -> dict[str, Any]:
    """Numbers the messages name besides the pins (each only where its inputs are known)."""
    out: dict[str, Any] = {}
    if "dp" in values and values["dp"] and p.global_batch % values["dp"] == 0:
        out["local"] = p.global_batch // values["dp"]
        if values.get("microbatch"):
            out["n_mb"] = out["local"] // values["microbatch"]
    if "microbatch" in values:
        out["tokens"] = values["microbatch"] * p.model.seq_len
    if all(values.get(a) for a in ("tp1", "tp2", "dp")):
        out["stage_gpus"] = values["tp1"] * values["tp2"] * values["dp"]
    if "pp" in values:
        out["stage_layers"] = int(stage_layout(p.model, values["pp"], p.ends_count_as_layers)[0])
    if all(a in values for a in p.strategy.microbatch_divides):
        out["split"] = _split(values, p)
    return out


def explain(problem: Problem) -> str:
    """The first rule of the search space that the pinned values break (or a generic message)."""
    model, strategy, gpus, nvs = problem.model, problem.strategy, problem.gpus, problem.nvs
    interleave, pins = problem.interleave, problem.pins
    p = {k: v for k, v in pins.items() if v is not None}
    if not strategy.has_tp2:
        p.setdefault("tp2", 1)
    if not model.moe:
        p.setdefault("etp", 1)
    if interleave:  # 0: every interleaving is searched, none is pinned
        p.setdefault("interleave", interleave)
    words = {**problem.constants(), **p, **_derived(p, problem)}
    for rule in RULES:
        if rule.applies(problem) and all(k in p for k in rule.reads) and not bool(
                np.all(rule.holds(p, problem))):
            return f"invalid configuration for {strategy.name}: {rule.message.format(**words)}"
    placement = _placement_message(p, gpus, nvs) or (placement_problem(
        p.get("tp1"), nvs, gpus, p.get("nv_tp1")) if problem.production_node else "")
    if placement:
        return f"invalid configuration for {strategy.name}: {placement}"
    pinned = ", ".join(f"{k}={v}" for k, v in pins.items() if v is not None)
    return (f"no {strategy.name} configuration on {gpus} GPUs matches {pinned or 'the inputs'}"
            " (see the search-space rules in docs/model.md)")


PLACEMENT = ("nv_tp1", "nv_tp2", "nv_dp", "nv_pp")


def _placement_message(p: dict, gpus: int, nvs: int) -> str:
    """Why pinned NVLink placements cannot be (model.engine.space.placement_mask), or ''."""
    nv = [p.get(k) for k in PLACEMENT]
    dims = [p.get("tp1"), p.get("tp2", 1), p.get("dp"), p.get("pp")]
    for name, v, dim in zip(PLACEMENT, nv, dims):
        if v is not None and dim is not None and dim % v:
            return f"{name}={v} does not divide its dimension {dim}"
    if all(v is not None for v in nv) and gpus > nvs:
        prod = nv[0] * nv[1] * nv[2] * nv[3]
        if prod != nvs:
            return (f"the placement fills {prod} GPUs of an NVLink domain of {nvs}; it must "
                    "fill it exactly")
    return ""


# the largest number whose divisors are listed: trial division takes √n steps (10^6 here,
# about 0.1 s); a global batch of 10^300 once listed divisors for ever (issue 26)
MAX_DIVISIBLE = 10**12


def check_divisible(n: int) -> None:
    """ModelError unless ``n``'s divisors can be listed in bounded time (sized first)."""
    if n > MAX_DIVISIBLE:
        raise ModelError(f"{n:.3g} is too large to search its divisors (a global batch or GPU "
                         f"count above {MAX_DIVISIBLE:.0e} is not a training job)")


@memo.lru("divisors", 256)
def divisors(n: int) -> np.ndarray:
    """All positive divisors of ``n`` ≥ 1, increasing (trial division up to √n; read-only:
    remembered per n; n sized first)."""
    check_divisible(n)
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    out = np.array(sorted(set(small + [n // d for d in small])), dtype=np.int64)
    out.flags.writeable = False
    return out


def _has_microbatch(tp1: int, tp2: int, dp: int, problem: Problem) -> bool:
    """Whether some microbatch size obeys the microbatch rules for these tp1, tp2, dp."""
    mbs = np.array(divisors(problem.global_batch // dp), dtype=np.int64)
    ok = mask("microbatch", {"tp1": tp1, "tp2": tp2, "dp": dp, "microbatch": mbs}, problem)
    return bool(np.any(ok))


def why_no_candidates(model: Transformer, strategy: Strategy, gpus: int, global_batch: int,
                      nvs: int, mode: object = None, ends_count_as_layers: bool = False,
                      production_node: int = 0) -> str:
    """Why ``strategy`` has no configuration at all on ``gpus`` GPUs, in words.

    The GPUs must factor as tp1·tp2·dp·pp. Of the factorisations whose tp1, tp2 and dp obey
    their rules (dp divides the global batch, tp1 the heads and hidden size, some microbatch
    fits, …), the one with the largest tp1·tp2·dp leaves the fewest GPUs to pipeline stages;
    :func:`explain` names the rule that this closest configuration breaks (typically: more
    stages than layers).
    """
    problem = Problem(model, strategy, gpus, global_batch, 1,
                      resolve_mode(mode).equal_pipeline_stages, ends_count_as_layers,
                      production_node, nvs)
    divs = np.array(divisors(gpus), dtype=np.int64)
    tp1 = divs[np.asarray(mask("tp1", {"tp1": divs}, problem), dtype=bool)].tolist()
    dps = divs[np.asarray(mask("dp", {"dp": divs}, problem), dtype=bool)].tolist()
    tp2 = divs.tolist() if strategy.has_tp2 else [1]
    best = (1, 1, 1)
    for a in tp1:
        for b in tp2:
            if not bool(np.all(mask("tp2", {"tp1": a, "tp2": b}, problem))):
                continue
            for d in dps:
                size = a * b * d
                if (gpus % size == 0 and size > best[0] * best[1] * best[2]
                        and _has_microbatch(a, b, d, problem)):
                    best = (a, b, d)
    a, b, d = best
    pp = gpus // (a * b * d)
    reason = explain(replace(problem, pins={"tp1": a, "tp2": b, "dp": d, "pp": pp}))
    reason = reason.removeprefix(f"invalid configuration for {strategy.name}: ")
    return (f"no {strategy.name} configuration exists on {gpus} GPUs: dp must divide the global "
            f"batch ({global_batch}), tp1 the heads ({model.heads}) and the hidden size "
            f"({model.hidden}), and a microbatch must split evenly; the most they take is "
            f"tp1·tp2·dp = {a}·{b}·{d}, which leaves pp = {pp} pipeline stages, and {reason}")
