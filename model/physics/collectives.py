"""Collective communication time on a two-tier network (docs/model.md §5).

All functions take numpy arrays (or scalars) and broadcast. Symbols: V = buffer volume in bytes (the
full buffer the collective acts on), n = group size, τ = group members inside one NVLink domain
(τ | n), k = n // τ domains, b_f / b_s = effective NVLink / NIC bandwidth (bytes/s), λ_f / λ_s =
per-step latencies (s), ν = NICs per GPU.

Ring model, c = (n−1)/n for all-gather, reduce-scatter and all-reduce, c = 1 for broadcast/reduce:

* τ = 1 (every member in its own domain): T = λ_s(n−1) + c·V/(ν·b_s) (the paper: ν = 1)
* k = 1 (the group inside one domain):    T = λ_f(n−1) + c·V/b_f
* otherwise (τ parallel rings, one NIC each, NIC scaling):
  T = max(c·V/(ν·τ·b_s), c·V/b_f) + λ_s(k−1) + λ_f(n−k)

Optionally each tier's bandwidth falls off for small ring-step messages m = V/n as
b·m/(m + m_½) (``nvlink_half_message_bytes``, ``network_half_message_bytes``; 0: no fall-off).

An all-reduce is a reduce-scatter followed by an all-gather, so it costs twice the ring above. The
paper's code doubles only the bandwidth term and only in the hierarchical branch (its bug 3), and
its flat slow ring ignores ν; with ``paper=True`` both are reproduced.

All-to-all (the expert-parallel dispatch and combine; V = the bytes each member sends, spread
evenly over the group, as force-balanced routing does): each member sends V/n to every other
one at once (NCCL issues the n − 1 sends and receives together), V·(τ − 1)/n over NVLink and
V·(n − τ)/n over its ν NICs, the two tiers in parallel:
T = max(V·(τ−1)/(n·b_f), V·(n−τ)/(n·ν·b_s)) + λ, λ = λ_f inside one domain, else λ_s.
No placement beats V·(n−1)/(n·(b_f + ν·b_s)) + min(λ_f, λ_s): max(a/x, b/y) ≥ (a+b)/(x+y).

Deduplicating dispatch (``DISPATCH``: DeepEP, HybridEP — Megatron-Core's flex dispatcher; V
the bytes of a member's T·k routed copies, k = ``fanout``): a token crosses to each other
domain holding any of its k experts once, to the same-index GPU there, which forwards the
copies over NVLink (DeepEP README; DeepSeek-V3 report §3.2.2). With D = n/τ domains and the
experts drawn uniformly (force-balanced routing), a token reaches (D − 1)·(1 − (1 − 1/D)^k)
other domains on average, so the NICs carry V/k·(D − 1)·(1 − (1 − 1/D)^k) and NVLink every
copy not already on its GPU's index, V·(τ − 1)/τ:
T = max(V·(τ−1)/(τ·b_f), V/k·(D−1)·(1 − (1 − 1/D)^k)/(ν·b_s)) + λ. Inside one domain it is
the all-to-all. Its lower bound is V·min_τ max(…) at full bandwidth plus min(λ_f, λ_s), the
minimum over every τ = 1 … n.
"""

from __future__ import annotations

from enum import IntEnum

import numpy as np

from model.specs.hardware import System


class Collective(IntEnum):
    """Collective operations (integer codes so they can live in numpy arrays)."""

    ALLGATHER = 0
    REDUCESCATTER = 1
    ALLREDUCE = 2
    BROADCAST = 3
    REDUCE = 4
    P2P = 5
    ALLTOALL = 6
    DISPATCH = 7


def _ring_volume(kind: Collective, v: np.ndarray, n: np.ndarray) -> np.ndarray:
    """What each member moves through its link: c·V, c = (n−1)/n for the rings (all-gather,
    reduce-scatter, all-reduce), c = 1 for a broadcast or reduce."""
    return v if kind in (Collective.BROADCAST, Collective.REDUCE) else v * (n - 1) / n


def _finish(kind: Collective, ring_s: np.ndarray, live: np.ndarray, paper: bool) -> np.ndarray:
    """An all-reduce is a reduce-scatter plus an all-gather: twice the ring (except in the
    paper's code, bug 3); nothing moves when V = 0 or n = 1."""
    if kind == Collective.ALLREDUCE and not paper:
        ring_s = 2.0 * ring_s
    return np.where(live, ring_s, 0.0)


def collective_time_s(
    kind: Collective,
    volume_bytes: np.ndarray | float,
    group: np.ndarray | int,
    tau: np.ndarray | int,
    system: System,
    paper: bool = False,
    fanout: float = 1.0,
    max_domains: float = 0.0,
) -> np.ndarray:
    """Time (s) of one collective of ``kind`` over ``group`` GPUs, ``tau`` per NVLink domain.

    Zero when V = 0 or n = 1. ``P2P`` is one hop of a ring over the group: λ_s + V/b_s when the
    group leaves its domain (τ < n; for n = 2 that is τ = 1), else λ_f + V/b_f. See the module
    docstring for the ring formulas.
    """
    v = np.asarray(volume_bytes, dtype=float)
    n = np.asarray(group, dtype=float)
    t = np.maximum(np.asarray(tau, dtype=float), 1.0)
    b_f, b_s = system.fast_bytes_per_s, system.slow_bytes_per_s
    l_f, l_s = system.nvlink_latency_s, system.network_latency_s
    live = (v > 0) & (n > 1)
    if kind == Collective.P2P:  # one hop; slow when the group leaves its domain (τ < n)
        return np.where(live, np.where(t < n, l_s + v / b_s, l_f + v / b_f), 0.0)
    if kind in (Collective.ALLTOALL, Collective.DISPATCH):
        dedup = fanout if kind == Collective.DISPATCH else 0.0
        return np.where(live, alltoall_s(v, n, np.minimum(t, n), system, dedup, max_domains),
                        0.0)
    cv = _ring_volume(kind, v, n)
    k = np.floor(n / t)  # domains spanned (τ divides n)
    # small messages do not reach full bandwidth: ×(m + m_½)/m with m = V/n per ring step
    b_f, b_s = _fall_off(v, n, system)
    doubled = 2.0 if kind == Collective.ALLREDUCE and paper else 1.0  # paper bug 3
    hier = doubled * np.maximum(cv / (system.nics_per_gpu * t * b_s), cv / b_f) + (
        l_s * (k - 1) + l_f * (n - k))
    # the paper's flat slow ring uses one NIC; otherwise each GPU drives its ν NICs
    flat_bw = b_s if paper else system.nics_per_gpu * b_s
    out = np.where(t <= 1, l_s * (n - 1) + cv / flat_bw,
                   np.where(k <= 1, l_f * (n - 1) + cv / b_f, hier))
    return _finish(kind, out, live, paper)


def _fall_off(v, n, system: System):
    """(b_f, b_s) with the small-message fall-off at messages of V/n bytes (module docstring)."""
    b_f, b_s = system.fast_bytes_per_s, system.slow_bytes_per_s
    if system.nvlink_half_message_bytes or system.network_half_message_bytes:
        step = np.maximum(v / np.maximum(n, 1.0), 1.0)
        b_f = b_f * step / (step + system.nvlink_half_message_bytes)
        b_s = b_s * step / (step + system.network_half_message_bytes)
    return b_f, b_s


def _shares(n, tau, fanout: float, max_domains: float = 0.0):
    """(NVLink, NIC) bytes per byte of V of an all-to-all (``fanout`` 0) or of a deduplicating
    dispatch of ``fanout`` copies per token (module docstring), its experts in at most
    ``max_domains`` domains (0: any; :func:`remote_domains`)."""
    if not fanout:
        return (tau - 1) / n, (n - tau) / n
    return (tau - 1) / tau, remote_domains(n / tau, fanout, max_domains) / fanout


def remote_domains(domains, fanout: float, max_domains: float = 0.0):
    """Other NVLink domains a token's k = ``fanout`` copies reach, on average, over D =
    ``domains`` with its experts drawn uniformly: (D − 1)·(1 − (1 − 1/D)^k). Node-limited
    routing (DeepSeek-V3 report §2.1.2: each token's experts on at most M = 4 nodes; Megatron-
    Core ``moe_router_num_groups`` = nodes with ``moe_router_group_topk`` = M) draws M of the
    D domains, its own among them with probability M/D, then the k experts in those: m·(1 −
    (1 − 1/m)^k)·(1 − 1/D), m = min(M, D) — the unlimited figure when m = D."""
    d = np.asarray(domains, dtype=float)
    m = np.minimum(max_domains, d) if max_domains else d
    m = np.maximum(m, 1.0)
    return m * (1 - (1 - 1 / m) ** fanout) * (1 - 1 / d)


def alltoall_s(v, n, tau, system: System, fanout: float = 0.0, max_domains: float = 0.0):
    """All-to-all of V bytes per member over n members, τ per NVLink domain, or with
    ``fanout`` k a deduplicating dispatch (module docstring): the NVLink share and the NIC
    share in parallel, plus one step's latency."""
    b_f, b_s = _fall_off(v, n, system)
    fast, slow = _shares(n, tau, fanout, max_domains)
    inside = v * fast / b_f
    across = v * slow / (system.nics_per_gpu * b_s)
    latency = np.where(tau >= n, system.nvlink_latency_s, system.network_latency_s)
    return np.maximum(inside, across) + latency


def _dispatch_floor(n, fanout: float, system: System, max_domains: float = 0.0):
    """min over τ = 1 … n of the deduplicating dispatch's seconds per byte, per member count
    (full bandwidth, no latency)."""
    n = np.asarray(n, dtype=float)
    out = np.empty_like(n)
    b_f, b_s = system.fast_bytes_per_s, system.nics_per_gpu * system.slow_bytes_per_s
    for size in np.unique(n):
        tau = np.arange(1, int(size) + 1, dtype=float)
        fast, slow = _shares(size, tau, fanout, max_domains)
        out[n == size] = np.min(np.maximum(fast / b_f, slow / b_s))
    return out


def p2p_messages_s(volume_bytes, system: System, paper: bool = False):
    """(slow, fast) time of one pipeline message of V bytes: λ_s + V/(ν·b_s) across domains
    (each GPU of a stage sends its own shard over its own ν NICs; ν = 1 in the paper mode) and
    λ_f + V/b_f inside one."""
    v = np.asarray(volume_bytes, dtype=float)
    nics = 1.0 if paper else system.nics_per_gpu
    return (system.network_latency_s + v / (nics * system.slow_bytes_per_s),
            system.nvlink_latency_s + v / system.fast_bytes_per_s)


def p2p_time_s(volume_bytes, pp, nv_pp, system: System, paper: bool):
    """Mean time of one pipeline p2p message of V bytes over the pp − 1 stage links.

    All links slow when nv_pp = 1. Otherwise slow = int(pp/nv_pp − 1) links leave the domain and
    fast = pp − 1 − slow stay in it: (fast·T_fast + slow·T_slow)/(pp − 1) with the messages of
    :func:`p2p_messages_s`, and T_slow = 0 in paper mode (its bug 2, docs/model.md).
    """
    slow_msg, fast_msg = p2p_messages_s(volume_bytes, system, paper)
    links = np.maximum(pp - 1, 1)
    slow = np.floor(pp / nv_pp - 1).astype(float)
    fast = (pp - 1) - slow
    mixed = (fast * fast_msg + slow * (0.0 if paper else slow_msg)) / links
    out = np.where(nv_pp == 1, slow_msg, mixed)
    return np.where(pp > 1, out, 0.0)


def summa_comm_time_s(
    piece_s: np.ndarray, panels: np.ndarray, compute_s: np.ndarray
) -> np.ndarray:
    """Exposed communication of a panel-pipelined (SUMMA) op, docs/model.md §5.3.

    ``piece_s`` is Σ_i T_comm(V_i / nb, …), the collectives of one panel; the first panel is
    exposed and the other nb − 1 hide behind the op's compute max(t_comp, t_mem):
    t_comm = t_piece + max(nb · t_piece − t_compute, 0).
    """
    return piece_s + np.maximum(panels * piece_s - compute_s, 0.0)


def overlapped_s(t_comm, t_compute, slowdown: float):
    """Time a collective of T = ``t_comm`` adds when overlapped with compute C = ``t_compute``:
    the excess max(T − C, 0), plus γ·min(T, C) for the hidden part (γ = the system's
    ``overlap_slowdown``: the collective's kernels slow the compute they run beside)."""
    hidden = np.minimum(t_comm, t_compute)
    return np.maximum(t_comm - t_compute, 0.0) + (slowdown * hidden if slowdown else 0.0)


def collective_lower_bound_s(kind: Collective, volume_bytes, group, system: System,
                             paper: bool = False, fanout: float = 1.0,
                             max_domains: float = 0.0) -> np.ndarray:
    """A lower bound of :func:`collective_time_s` at every placement τ of the group: the
    smaller of the flat slow ring (τ = 1) and full NVLink bandwidth with the cheaper latency on
    every step (the hierarchical and single-domain rings cost at least that), at full bandwidth
    (the small-message fall-off only slows a ring down) and without the paper's doubling."""
    v = np.asarray(volume_bytes, dtype=float)
    n = np.asarray(group, dtype=float)
    b_f, b_s = system.fast_bytes_per_s, system.slow_bytes_per_s
    l_f, l_s = system.nvlink_latency_s, system.network_latency_s
    live = (v > 0) & (n > 1)
    if kind == Collective.P2P:
        return np.where(live, np.minimum(l_s + v / b_s, l_f + v / b_f), 0.0)
    if kind == Collective.ALLTOALL:
        both = b_f + system.nics_per_gpu * b_s  # the two tiers at once, at full bandwidth
        return np.where(live, v * (n - 1) / np.maximum(n, 1.0) / both + min(l_f, l_s), 0.0)
    if kind == Collective.DISPATCH:
        floor = _dispatch_floor(np.broadcast_to(n, np.broadcast(v, n).shape), fanout, system,
                                max_domains)
        return np.where(live, v * floor + min(l_f, l_s), 0.0)
    cv = _ring_volume(kind, v, n)
    flat = l_s * (n - 1) + cv / max(b_s, system.nics_per_gpu * b_s)
    out = np.minimum(flat, min(l_s, l_f) * (n - 1) + cv / b_f)
    return _finish(kind, out, live, paper)
