"""Why a configuration is not in the search space: the rules of :mod:`model.space`, one message
each, for clear errors when a user pins or evaluates an invalid configuration."""

from __future__ import annotations

from .modes import resolve_mode
from .strategies import Strategy
from .transformer import Transformer


def explain(model: Transformer, strategy: Strategy, gpus: int, global_batch: int, nvs: int,
            pins: dict, compat: object = None) -> str:
    """The first rule of the search space that the pinned values break (or a generic message)."""
    p = {k: v for k, v in pins.items() if v is not None}
    e, h, kv, l, depth = model.hidden, model.heads, model.kv_heads, model.seq_len, model.layers
    tp1, tp2, pp, dp, mb = (p.get(k) for k in ("tp1", "tp2", "pp", "dp", "microbatch"))
    checks: list[tuple[bool, str]] = []
    if tp1 is not None:
        floor = (3 * e) // tp1 if strategy.name == "1d" else e // tp1
        checks += [
            (gpus % tp1 != 0, f"tp={tp1} does not divide {gpus} GPUs"),
            (h % tp1 != 0, f"tp={tp1} does not divide heads={h}"),
            (e % tp1 != 0, f"tp={tp1} does not divide hidden={e}"),
            (floor < 128, f"tp={tp1} leaves fewer than 128 columns per GPU"),
            (kv % tp1 != 0 and tp1 % kv != 0,
             f"tp={tp1} neither divides nor is a multiple of kv_heads={kv}"),
        ]
    if tp2 is not None and strategy.has_tp2:
        checks += [(l // tp2 < 128, f"tp2={tp2} leaves fewer than 128 sequence rows per GPU"),
                   (strategy.name == "summa" and e % tp2 != 0,
                    f"tp2={tp2} does not divide hidden={e} (SUMMA)")]
    if pp is not None:
        if resolve_mode(compat).equal_pipeline_stages:
            checks.append((depth % pp != 0, f"pp={pp} does not divide layers={depth}"))
        checks.append((pp > depth, f"pp={pp} is more stages than layers={depth}"))
    if dp is not None:
        checks.append((global_batch % dp != 0,
                       f"dp={dp} does not divide the global batch {global_batch}"))
    if mb is not None and dp is not None and global_batch % dp == 0:
        local = global_batch // dp
        checks.append((local % mb != 0,
                       f"microbatch={mb} does not divide the local batch {local} (= GBS/dp)"))
        split = 1
        for axis in strategy.microbatch_divides:
            split *= p.get(axis, 1)
        checks.append(((mb * l) % split != 0,
                       f"microbatch·seq_len = {mb * l} is not divisible by {split}"))
    if p.get("nb") is not None and strategy.has_panels:
        checks.append((e % p["nb"] != 0, f"nb={p['nb']} does not divide hidden={e}"))
    nv = [p.get(k) for k in ("nv_tp1", "nv_tp2", "nv_dp", "nv_pp")]
    dims = [tp1, tp2 or 1, dp, pp]
    for name, v, dim in zip(("nv_tp1", "nv_tp2", "nv_dp", "nv_pp"), nv, dims):
        if v is not None and dim is not None:
            checks.append((dim % v != 0, f"{name}={v} does not divide its dimension {dim}"))
    if all(v is not None for v in nv) and gpus > nvs:
        prod = nv[0] * nv[1] * nv[2] * nv[3]
        checks.append((prod != nvs, f"the placement fills {prod} GPUs of an NVLink domain of {nvs};"
                       " it must fill it exactly"))
    for failed, message in checks:
        if failed:
            return f"invalid configuration for {strategy.name}: {message}"
    pinned = ", ".join(f"{k}={v}" for k, v in p.items())
    return (f"no {strategy.name} configuration on {gpus} GPUs matches {pinned or 'the inputs'}"
            " (see the search-space rules in model/space.py)")
