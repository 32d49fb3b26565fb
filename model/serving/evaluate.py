"""Every serving metric of a set of candidate layouts at once (numpy arrays over candidates);
the modes and the formulas are in :mod:`model.serving.modes` (docs/serving.md)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from model.engine.economics import power_and_prices
from model.physics import energy
from model.physics import serving_ops as so
from model.physics.serving_step import Engine
from model.serving.modes import (
    chunk_tokens,
    context_kv_bytes,
    decode_keys,
    decode_step_s,
    max_batch,
    md1_wait_quantile_s,
    md1_wait_s,
    memory,
    prefill_s,
    prefix_bytes,
    sequence_kv_bytes,
    solve_batch,
)
from model.serving.scheduler import ClosedLoop, closed_loop


@dataclass(frozen=True)
class Candidates:
    """Layouts as arrays: tp, pp, ep, attention DP, instances (aggregated replicas, or the
    decode instances y of xPyD), prefill instances x (0: aggregated) and a batch cap (inf:
    none)."""

    tp: np.ndarray
    pp: np.ndarray
    ep: np.ndarray
    adp: np.ndarray
    instances: np.ndarray
    prefill: np.ndarray
    batch_cap: np.ndarray

    def __len__(self) -> int:
        return len(self.tp)

    @property
    def gpus(self) -> np.ndarray:
        return (self.instances + self.prefill) * self.tp * self.pp

    def take(self, idx: np.ndarray) -> Candidates:
        return Candidates(*(getattr(self, f)[idx] for f in FIELDS))


FIELDS = ("tp", "pp", "ep", "adp", "instances", "prefill", "batch_cap")
MEMORY = ("weights", "activations", "kv", "free", "fits")


def candidates(**columns) -> Candidates:
    """Candidates from scalars or arrays, broadcast to one length (typed: floats, adp bool)."""
    arrays = np.broadcast_arrays(*(np.asarray(columns[f], dtype=bool if f == "adp" else float)
                                   for f in FIELDS))
    return Candidates(*(a.ravel().copy() for a in arrays))


def _kv_transfer_s(engine: Engine, lay: so.Layout, gpus: np.ndarray) -> np.ndarray:
    """Seconds to move one prompt's KV cache from a prefill GPU to its decode GPU (its uncached
    tokens: a cached prefix is taken to be cached on the decode side too): its bytes
    per GPU over NVLink when the whole deployment fits one NVLink domain, else over the GPU's
    NICs, plus one latency (every GPU of the instance sends its own share at once)."""
    sysm = engine.system
    volume = context_kv_bytes(engine, lay, float(engine.workload.computed_prompt_tokens))
    inside = gpus <= sysm.nvlink_domain_size
    return np.where(inside, sysm.nvlink_latency_s + volume / sysm.fast_bytes_per_s,
                    sysm.network_latency_s + volume / (sysm.nics_per_gpu * sysm.slow_bytes_per_s))


def _batch_and_wait(engine: Engine, c: Candidates, rate_of, b_max, capacity_p, lam):
    """(B, wait before the first token, stable) per candidate in the workload's mode (``lam``
    the request rate of each candidate in the request-rate mode). ``rate_of(B, rows)`` is the
    requests/s of the candidates ``rows`` (None: all) at batch B; only the disaggregated rows
    bisect in the offline and concurrency modes."""
    wl = engine.workload
    agg = c.prefill == 0
    split = np.flatnonzero(~agg)
    mu = rate_of(b_max)  # requests/s of one (decode) instance at its largest batch
    prefill_cap = np.where(agg, np.inf, c.prefill * capacity_p / c.instances)
    if wl.mode == "offline":
        batch = b_max
        if split.size:  # decode instances fed at the prefill instances' rate
            batch = b_max.copy()
            batch[split] = solve_batch(lambda b: rate_of(b, split),
                                       np.minimum(mu, prefill_cap)[split], b_max[split])
        return batch, np.zeros(len(c)), np.ones(len(c), bool)
    if wl.mode == "concurrency":  # aggregated rows: model.serving.scheduler (evaluate)
        users = wl.concurrency / (c.instances + np.where(agg, 0.0, c.prefill))
        batch = np.minimum(users, b_max)
        rate = np.minimum(rate_of(batch), prefill_cap)
        if split.size:
            batch[split] = solve_batch(lambda b: rate_of(b, split), rate[split], batch[split])
        wait = np.maximum(users - batch, 0.0) / np.maximum(rate, 1e-300)
        return batch, wait, np.ones(len(c), bool)
    rate = lam / c.instances
    batch = solve_batch(rate_of, rate, b_max)
    wait = md1_wait_s(rate, mu)
    wait = wait + np.where(agg, 0.0, md1_wait_s(lam / np.maximum(c.prefill, 1), capacity_p))
    return batch, wait, np.isfinite(wait)


def evaluate_candidates(engine: Engine, c: Candidates,
                        request_rate_per_s: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Columns (units in the names) for every candidate; see :mod:`serving_modes`. In the
    request-rate mode ``request_rate_per_s`` may give each candidate its own rate (default: the
    workload's)."""
    lam = np.broadcast_to(np.asarray(
        engine.workload.request_rate_per_s if request_rate_per_s is None
        else request_rate_per_s, dtype=float), (len(c),))
    return _evaluate(engine, c, lam)


def _distinct(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(codes, first): each row's distinct value's index and each distinct value's first row
    (a hash table, pandas.factorize: linear time, unlike a sort)."""
    codes, uniques = pd.factorize(key, sort=False)
    first = np.empty(len(uniques), dtype=np.int64)
    first[codes[::-1]] = np.arange(len(key) - 1, -1, -1)  # the last write is the first row
    return codes, first


def _per_distinct(fn, lay: so.Layout, value: np.ndarray):
    """``fn(layout, value)`` evaluated once per distinct (layout, value) pair and gathered
    back to every row (a step's time depends on nothing else: the search's instances, splits
    and batch caps repeat the same few)."""
    codes, first = _distinct(lay.key + 1j * value)
    out = fn(lay.take(first), value[first])
    return tuple(o[codes] for o in out) if isinstance(out, tuple) else out[codes]


def _kv_used_bytes(engine: Engine, lay: so.Layout, batch: np.ndarray) -> np.ndarray:
    """KV bytes per GPU of ``batch`` sequences and the shared prefix (none added without
    prefix caching)."""
    used = sequence_kv_bytes(engine, lay) * batch / lay.attention_groups
    return used + prefix_bytes(engine, lay) if engine.workload.cached_prompt_tokens else used


def _evaluate(engine: Engine, c: Candidates, lam: np.ndarray) -> dict[str, np.ndarray]:
    """:func:`evaluate_candidates` of candidates all aggregated or all disaggregated."""
    wl = engine.workload
    lay = so.layout(c.tp, c.pp, c.ep, c.adp)
    zero = np.zeros(len(c))
    mem = _per_distinct(lambda lay_, _: tuple(memory(engine, lay_)[k] for k in MEMORY), lay,
                        zero)
    mem = dict(zip(MEMORY, mem))
    b_max = np.where(mem["fits"], np.maximum(max_batch(engine, lay, mem["kv"], c.batch_cap),
                                             0.0), 0.0)
    keys = decode_keys(engine)
    chunk = chunk_tokens(engine, b_max, lay)
    t_p, t_p0 = _per_distinct(lambda lay_, n: prefill_s(engine, lay_, n), lay, chunk)
    a, out_len, in_len = wl.tokens_per_step, float(wl.output_tokens), float(wl.input_tokens)
    agg = c.prefill == 0

    def step_s(batch, rows=None):
        """(τ, τ_d) of the candidates ``rows`` (None: all) at batch ``batch``."""
        lay_, agg_, t_p_ = (lay, agg, t_p) if rows is None else (
            lay.take(rows), agg[rows], t_p[rows])
        dec = _per_distinct(lambda l_, b: decode_step_s(engine, l_, b, keys), lay_, batch)
        return np.where(agg_, dec + batch * a / out_len * t_p_, dec), dec

    full = step_s(np.maximum(b_max, 1e-9))  # the largest batch's step, asked for twice

    def rate_of(batch, rows=None):
        tau_ = full[0] if batch is b_max else step_s(np.maximum(batch, 1e-9), rows)[0]
        return batch * a / (tau_ * out_len)

    batch, wait, stable = _batch_and_wait(engine, c, rate_of, b_max, 1.0 / t_p, lam)
    stable &= b_max >= 1
    tau, dec = full if batch is b_max else step_s(np.maximum(batch, 1e-9))
    tpot = tau / a
    chunks = np.ceil(wl.computed_prompt_tokens / chunk)
    gpus = c.gpus
    service = np.where(agg, t_p0 + chunks * dec, t_p0 + _kv_transfer_s(engine, lay, gpus))
    ttft = service + wait
    rate = np.where(stable, c.instances * batch * a / (tau * out_len), 0.0)
    if wl.mode == "concurrency" and agg.any():
        rows = np.flatnonzero(agg)
        loop = _closed_loop(engine, c, lay, rows, keys, b_max, chunk, t_p)
        batch, tau, tpot, ttft, rate = (x.astype(float).copy() for x in (
            batch, tau, tpot, ttft, rate))
        batch[rows], tau[rows], tpot[rows] = loop.decoding, loop.step_s, loop.tpot_s
        ttft[rows] = loop.ttft_s
        rate[rows] = np.where(stable[rows], c.instances[rows] * loop.requests_per_s, 0.0)
    if out_len <= 1:  # one output token: a TTFT, no TPOT
        tpot = np.full(len(c), np.nan)
    if wl.mode == "request-rate":
        rate = np.where(stable, lam, 0.0)
    out_tps = rate * out_len
    ttft, tpot = np.where(stable, ttft, np.inf), np.where(stable, tpot, np.inf)
    per_user = np.where(stable, 1.0 / tpot, 0.0) if out_len > 1 else np.full(len(c), np.nan)
    cols = {"tp": c.tp, "pp": c.pp, "ep": c.ep, "attention_dp": c.adp,
            "replicas": np.where(agg, c.instances, 0), "prefill_instances": c.prefill,
            "decode_instances": np.where(agg, 0, c.instances), "gpus": gpus,
            "batch": batch, "max_batch": b_max, "ttft_s": ttft, "tpot_s": tpot,
            "itl_s": np.where(stable, tau, np.inf),
            "e2e_s": ttft + (out_len - 1) * np.where(np.isnan(tpot), 0.0, tpot),
            "tokens_per_s_per_user": per_user,
            "output_tokens_per_s": out_tps, "output_tokens_per_s_per_gpu": out_tps / gpus,
            "total_tokens_per_s": rate * (in_len + out_len),
            "total_tokens_per_s_per_gpu": rate * (in_len + out_len) / gpus,
            "requests_per_s": rate, "fits": mem["fits"] & (b_max >= 1), "stable": stable,
            "weights_gb": mem["weights"] / 1e9, "activations_gb": mem["activations"] / 1e9,
            "kv_cache_gb": mem["kv"] / 1e9, "free_gb": mem["free"] / 1e9,
            "kv_used_gb": _kv_used_bytes(engine, lay, batch) / 1e9,
            "prefill_s_per_request": t_p, "decode_step_s": dec}
    cols.update(_ttft_tail(engine, c, lam, rate_of(b_max), 1.0 / t_p, service, stable))
    cols["memory_gb"] = cols["weights_gb"] + cols["activations_gb"] + cols["kv_cache_gb"]
    # the share of an instance's GPU time spent on prompts: its requests per second × the
    # prefill time of one (closed loop included, whose step is not the open-loop τ); at most
    # all of it
    busy = np.minimum(rate / np.maximum(c.instances, 1) * t_p, 1.0)
    share = np.where(agg, busy, c.prefill / (c.prefill + c.instances))
    cols.update(_costs(engine, gpus, out_tps, rate * in_len, share))
    cols["meets_sla"] = _sla(wl, cols)
    return cols


QUANTILES = {"ttft_p90_s": 0.9, "ttft_p99_s": 0.99}


def _ttft_tail(engine: Engine, c: Candidates, lam: np.ndarray, mu: np.ndarray,
               capacity_p: np.ndarray, service: np.ndarray, stable: np.ndarray
               ) -> dict[str, np.ndarray]:
    """TTFT p90 and p99, s: in the request-rate mode the TTFT without its wait plus the wait's
    quantile (:func:`md1_wait_quantile_s`; with disaggregation the prefill queue's quantile
    added too, an upper bound of the sum's); NaN in the offline and concurrency modes (fixed
    lengths, no arrival randomness: the closed loop's clumps give a few discrete values)."""
    if engine.workload.mode != "request-rate":
        return {k: np.full(len(c), np.nan) for k in QUANTILES}
    split = c.prefill > 0
    out = {}
    for key, q in QUANTILES.items():
        wait = md1_wait_quantile_s(lam / c.instances, mu, q)
        wait = wait + np.where(split, md1_wait_quantile_s(lam / np.maximum(c.prefill, 1),
                                                          capacity_p, q), 0.0)
        out[key] = np.where(stable, service + wait, np.inf)
    return out


def _closed_loop(engine: Engine, c: Candidates, lay: so.Layout, rows: np.ndarray,
                 keys: np.ndarray, b_max: np.ndarray, chunk: np.ndarray,
                 t_p: np.ndarray) -> ClosedLoop:
    """:func:`model.serving.scheduler.closed_loop` of the aggregated candidates ``rows``: the
    users of one instance, its token budget (the chunk of every attention rank), its largest
    batch, its decode step and the GPU time of one computed prompt token (t_p / (I − ⌊h·I⌋))."""
    wl = engine.workload
    lay_ = lay.take(rows)
    groups = lay_.attention_groups

    def tau_d(d: np.ndarray) -> np.ndarray:
        return _per_distinct(lambda l_, b: decode_step_s(engine, l_, b, keys), lay_, d)

    prompt = wl.computed_prompt_tokens  # a cached prefix takes no budget and no GPU time
    return closed_loop(wl.concurrency / c.instances[rows], prompt, wl.output_tokens,
                       wl.tokens_per_step, wl.mtp_depth + 1.0, chunk[rows] * groups,
                       b_max[rows], tau_d, t_p[rows] / prompt)


def _costs(engine: Engine, gpus, out_tps, in_tps, prefill_share) -> dict[str, np.ndarray]:
    """$ per second of the GPUs (rental, or amortized purchase plus electricity, the training
    inputs of :mod:`model.physics.energy`), split between input and output tokens by the
    share of GPU time spent on prefill; energy per output token at rated power."""
    sysm = engine.system
    p = power_and_prices(sysm)
    hours_per_s = gpus / 3600.0
    mwh_per_s = energy.energy_mwh(hours_per_s, p["tdp_w"] or np.nan, p["node_power_factor"],
                                  sysm.costs.pue)
    if sysm.costs.pricing == "rental":
        usd_per_s = energy.rental_usd(hours_per_s, p["usd_per_gpu_hour"])
    else:
        usd_per_s = energy.purchase_usd(hours_per_s, p["purchase_usd_per_gpu"],
                                        sysm.costs.amortization_years, mwh_per_s,
                                        sysm.costs.usd_per_kwh)
    with np.errstate(divide="ignore", invalid="ignore"):
        return {"usd_per_hour": usd_per_s * 3600.0,
                "usd_per_million_output_tokens": usd_per_s * (1 - prefill_share) / out_tps * 1e6,
                "usd_per_million_input_tokens": usd_per_s * prefill_share / in_tps * 1e6,
                "usd_per_million_output_tokens_all_in": usd_per_s / out_tps * 1e6,
                "energy_j_per_output_token": mwh_per_s * 3.6e9 / out_tps}


def _sla(wl, cols) -> np.ndarray:
    """Fits, stable, and within the TTFT and TPOT limits that are set."""
    ok = cols["fits"] & cols["stable"] & (cols["output_tokens_per_s"] > 0)
    if wl.ttft_max_s is not None:
        ok &= cols["ttft_s"] <= wl.ttft_max_s
    if wl.tpot_max_s is not None and wl.output_tokens > 1:  # no TPOT with one output token
        ok &= cols["tpot_s"] <= wl.tpot_max_s
    return ok
