"""Serving search: every layout of N GPUs (tp, pp, ep, attention DP, replicas or the xPyD
split, the batch) evaluated at once, the best for output tokens/s per GPU within the SLAs, and
the Pareto front of tokens/s per user against tokens/s per GPU (docs/serving.md, "Search").

The space is built as numpy arrays (tp and pp powers of two, or the pins; ep a divisor of tp
that divides the experts; attention DP only for MoE models, with ep = tp; instances
N/(tp·pp), all aggregated or split x + y = instances; offline batch caps 1, 2, 4, … and none),
evaluated in one call (:func:`model.serving.evaluate.evaluate_candidates`) — exact, no
pruning — and reduced with argmax and a sort for the front.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from model.engine.dominance import pareto_mask
from model.engine.request import Request
from model.errors import ModelError
from model.physics import serving_ops as so
from model.physics.serving_step import Engine, step_times
from model.serving.evaluate import Candidates, candidates, evaluate_candidates
from model.serving.inputs import check_inputs
from model.serving.modes import decode_keys
from model.serving.validity import error_bars, unmeasured_layout, unmeasured_mechanisms
from model.specs.hardware import System
from model.specs.serving import (
    Serving,
    ServingLayout,
    ServingWorkload,
    serving_workload,
)
from model.specs.serving_stack import ServingStack, load_serving_stack
from model.specs.transformer import Transformer

MAX_CANDIDATES = 5_000_000  # a search larger than this is refused before it is built
BATCH_CAPS = tuple(2.0**i for i in range(17))  # offline batch caps searched (and none)


def _powers(limit: int) -> list[int]:
    return [2**i for i in range(int(np.log2(max(limit, 1))) + 1)]


def _shapes(m: Transformer, gpus: int, pins: ServingLayout) -> list[tuple[int, int, int, bool]]:
    """(tp, pp, ep, attention DP) allowed by the pins and the model (module docstring)."""
    out = []
    for tp in [pins.tp] if pins.tp else _powers(gpus):
        for pp in [pins.pp] if pins.pp else _powers(min(gpus // tp, m.layers)):
            if tp * pp > gpus or gpus % (tp * pp) or pp > m.layers:
                continue
            for adp in ([pins.attention_dp] if pins.attention_dp is not None
                        else ([False, True] if m.moe and tp > 1 else [False])):
                if adp and not (m.moe and tp > 1):
                    continue
                if not adp and m.heads % tp:
                    continue
                eps = [tp] if adp else [e for e in range(1, tp + 1) if tp % e == 0]
                if not m.moe:
                    eps = [1]
                for ep in eps if pins.ep is None else [pins.ep]:
                    if tp % ep or (m.moe and m.experts % ep) or (adp and ep != tp) or (
                            not m.moe and ep != 1):
                        continue
                    out.append((tp, pp, ep, adp))
    return out


def _splits(instances: int, pins: ServingLayout) -> list[tuple[int, int]]:
    """(instances, prefill) pairs: aggregated, and every x + y split unless pinned."""
    if pins.disaggregated:
        if pins.prefill_instances + pins.decode_instances != instances:
            raise ModelError(f"serving layout: prefill_instances + decode_instances "
                             f"({pins.prefill_instances} + {pins.decode_instances}) must be "
                             f"gpus / (tp·pp) = {instances}")
        return [(pins.decode_instances, pins.prefill_instances)]
    if pins.replicas is not None:
        if pins.replicas != instances:
            raise ModelError(f"serving layout: replicas {pins.replicas} × tp·pp must equal "
                             f"the GPUs ({instances} instances fit)")
        return [(instances, 0)]
    return [(instances, 0)] + [(instances - x, x) for x in range(1, instances)]


def space(m: Transformer, gpus: int, wl: ServingWorkload, pins: ServingLayout) -> Candidates:
    """Every candidate (module docstring), sized before it is built."""
    shapes = _shapes(m, gpus, pins)
    if not shapes:
        raise ModelError(f"no serving layout of {gpus} GPUs for {m.name}: tp must divide the "
                         f"{m.heads} heads (or use attention DP with a MoE model), pp at most "
                         f"{m.layers} layers, tp·pp must divide the GPUs, ep divide tp and "
                         "the experts")
    caps = [pins.max_batch] if pins.max_batch else (
        list(BATCH_CAPS) + [np.inf] if wl.mode == "offline" else [np.inf])
    size = sum(len(_splits(gpus // (tp * pp), pins)) for tp, pp, _, _ in shapes) * len(caps)
    if size > MAX_CANDIDATES:
        raise ModelError(f"the serving search has {size:,} candidates (limit "
                         f"{MAX_CANDIDATES:,}); pin tp, pp or the split")
    rows = [(tp, pp, ep, adp, y, x, cap) for tp, pp, ep, adp in shapes
            for y, x in _splits(gpus // (tp * pp), pins) for cap in caps]
    cols = np.array(rows, dtype=float).T
    return candidates(tp=cols[0], pp=cols[1], ep=cols[2], adp=cols[3] > 0, instances=cols[4],
                      prefill=cols[5], batch_cap=cols[6])


@dataclass
class ServeResult:
    """A serving estimate: the best row (a dict, units in the keys), every candidate
    (``frame``), the Pareto front, and the decode step of the best by op (s)."""

    best: dict
    frame: pd.DataFrame
    pareto: pd.DataFrame
    step_by_op_s: dict[str, float] = field(default_factory=dict)
    message: str = ""


def _row(frame: pd.DataFrame, i: int) -> dict:
    return {k: (v.item() if hasattr(v, "item") else v) for k, v in frame.iloc[i].items()}


def serve_request(req: Request) -> ServeResult:
    """Evaluate the pinned layout, or search what is not pinned, of a request whose workload is
    :class:`Serving` (its stack a serving stack, default the fitted TensorRT-LLM preset); the
    keyword form is :func:`model.api.serve`."""
    if not isinstance(req.workload, Serving):
        raise ModelError(f"this estimate is for serving; the request's workload is "
                         f"{getattr(req.workload, 'kind', type(req.workload).__name__)}")
    model, system, stack = req.model, req.system, req.stack
    wl, pins, gpus = req.workload.workload, req.workload.layout, req.workload.gpus
    check_inputs(model, system, wl)
    engine = Engine.make(model, system, wl, load_serving_stack(stack))
    cand = space(model, int(gpus), wl, pins)
    cols = evaluate_candidates(engine, cand)
    frame = pd.DataFrame(cols)
    ok = cols["meets_sla"]
    score = np.where(ok, cols["output_tokens_per_s_per_gpu"], -np.inf)
    message = ""
    if not ok.any():
        fitting = cols["fits"] & cols["stable"]
        if fitting.any():
            message = "no layout meets the SLAs; the fastest that fits is shown"
        elif cols["fits"].any():
            message = ("the request rate exceeds every layout's capacity: the queue grows "
                       "without bound (saturated)")
        else:
            message = "no layout fits in memory"
        score = np.where(fitting, cols["output_tokens_per_s_per_gpu"], -np.inf)
        if not fitting.any():
            score = cols["kv_cache_gb"].astype(float)
    best_i = int(np.argmax(score))
    per_gpu = np.where(cols["fits"] & cols["stable"], cols["output_tokens_per_s_per_gpu"], 0.0)
    # faster per GPU and per user is better: the front of the two rates negated; a layout
    # that does not fit or is unstable (0 per GPU) is never on it
    front = pareto_mask(-per_gpu, -cols["tokens_per_s_per_user"]) & (per_gpu > 0)
    pareto = frame[front].sort_values("output_tokens_per_s_per_gpu").reset_index(drop=True)
    best = _row(frame, best_i)
    for key in ("ttft_p90_s", "ttft_p99_s"):  # not modelled outside Poisson arrivals: None
        if best[key] != best[key]:
            best[key] = None
    best.update(meets_sla=bool(ok[best_i]), candidates=len(cand), stack=engine.stack.name,
                model=model.name, system=system.name, mode=wl.mode,
                weight_precision=wl.weight_precision, kv_precision=wl.kv_precision,
                validated=engine.stack.validated,
                error_bars=error_bars(engine.stack, model.moe, system.generation,
                                      unmeasured_mechanisms(wl)
                                      + unmeasured_layout(engine.stack, model.moe, best)))
    return ServeResult(best, frame, pareto, decode_breakdown(engine, cand.take([best_i]),
                                                             best["batch"]), message)


def decode_breakdown(engine: Engine, c: Candidates, batch: float) -> dict[str, float]:
    """Seconds of one decode step of the first candidate at ``batch`` by op."""
    lay = so.layout(c.tp, c.pp, c.ep, c.adp)
    k = engine.workload.mtp_depth
    b = np.array([max(batch, 1e-9)])
    st = step_times(engine, lay, b * (k + 1), b, decode_keys(engine), True)
    return {name: float(v[0]) for name, v in st.by_op_s.items()}


KNEE_UTILISATION = 2.0 / 3.0  # M/D/1: the mean wait equals one service time 1/μ at ρ = 2/3


def load_curve(model: Transformer, system: System, workload: ServingWorkload | dict,
               row: dict, stack: ServingStack | str | None = None,
               points: int = 40) -> tuple[pd.DataFrame, float]:
    """Latency against Poisson load for the layout of ``row`` (a :func:`serve` row): TTFT,
    TPOT and e2e at request rates from 2 % to 110 % of its saturated rate μ, and the knee
    rate ρ = 2/3·μ where the M/D/1 wait equals one service time. Rows past μ are unstable
    (infinite latency): shown, not hidden."""
    if not 2 <= points <= 400:
        raise ModelError(f"points must be in [2, 400], got {points}")
    wl = serving_workload(workload)
    base = wl.with_overrides(mode="request-rate", concurrency=None, request_rate_per_s=1.0)
    engine = Engine.make(model, system, base, load_serving_stack(stack))
    one = candidates(tp=row["tp"], pp=row["pp"], ep=row["ep"], adp=bool(row["attention_dp"]),
                     instances=row["replicas"] or row["decode_instances"],
                     prefill=row["prefill_instances"], batch_cap=np.inf)
    offline = Engine.make(model, system, base.with_overrides(mode="offline",
                                                             request_rate_per_s=None),
                          engine.stack)
    saturated = evaluate_candidates(offline, one)["requests_per_s"][0]
    rho = np.linspace(0.02, 1.1, points)
    many = one.take(np.zeros(points, dtype=int))
    cols = evaluate_candidates(engine, many, rho * saturated)
    frame = pd.DataFrame({"request_rate_per_s": rho * saturated, "utilisation": rho,
                          **{k: cols[k] for k in ("ttft_s", "tpot_s", "e2e_s", "batch",
                                                  "stable", "output_tokens_per_s_per_gpu")}})
    return frame, float(KNEE_UTILISATION * saturated)


def cost_versus_sla(frame: pd.DataFrame, tpot_limits_s: np.ndarray) -> pd.DataFrame:
    """The lowest $ per million output tokens among the fitting, stable candidates of a
    :func:`serve` frame whose TPOT is within each limit (NaN where none is)."""
    ok = (frame["fits"] & frame["stable"]).to_numpy()
    tpot = frame["tpot_s"].to_numpy()
    usd = frame["usd_per_million_output_tokens_all_in"].to_numpy()
    within = ok[None, :] & (tpot[None, :] <= np.asarray(tpot_limits_s)[:, None])  # (L, N)
    best = np.where(within, usd[None, :], np.inf).min(axis=1)
    return pd.DataFrame({"tpot_max_s": tpot_limits_s,
                         "usd_per_million_output_tokens": np.where(np.isfinite(best), best,
                                                                   np.nan)})
