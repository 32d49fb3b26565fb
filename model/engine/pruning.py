"""Exact pruning of a search: price only the shapes some placement of which can be kept.

A shape's throughput bound (global batch / a lower bound of its iteration time, see
:func:`model.engine.evaluate.shape_lower_bound`) says no placement of it is faster. A shape is left
out when, at its GPU count, ``depth`` priced candidates that need no more memory are strictly
faster than its bound: at every capacity where it fits they fit too and rank before it, so the
frontier (:func:`model.engine.frontier.keep_positions`) never keeps it. Results, row order and
counts are those of pricing everything (tests/test_pruning.py).
"""

from __future__ import annotations

import heapq

import numpy as np

from model.engine.frontier import keep_positions, shape_leaders

FIRST_ROUNDS = 1  # pruning rounds of the most promising shapes before pricing all that remain


def pruned(price, todo: np.ndarray, bound: np.ndarray, prunable: np.ndarray,
           memory: np.ndarray, count_of: np.ndarray, global_batch: int, depth: int
           ) -> tuple[dict, dict]:
    """A search's candidates and their times (``price(ids)`` prices shapes ``ids``), priced
    only for the shapes (``todo``, every fitting shape with a placement) some placement of which
    can be kept.

    ``bound`` is each shape's throughput bound (``global_batch`` / its iteration time's lower
    bound; ``prunable`` where that bound is finite): no placement of the shape is faster. A
    shape is left out when, at its GPU count, ``depth`` priced candidates that need no more
    memory are strictly faster than its bound: at every capacity where it fits they fit too and
    rank before each of its placements, so :func:`~model.engine.frontier.keep_positions` never
    keeps it — and leaving out a candidate it does not keep changes nothing it keeps. Each round
    prices, per count, the shapes whose bounds could be among the ``depth`` best
    (``keep_positions`` of the bounds) of those left; after ``FIRST_ROUNDS`` rounds, every shape
    left. Should a priced throughput be NaN, every shape is priced (no order to prune by).
    """
    parts: list[tuple[dict, dict]] = []
    left = np.zeros(len(memory), dtype=bool)
    left[todo] = True
    thr_parts: list[np.ndarray] = []
    everything = False
    for round_ in range(FIRST_ROUNDS + 1):
        ids = np.flatnonzero(left)
        if round_ < FIRST_ROUNDS and not everything:
            ids = _promising(ids, bound, prunable, memory, count_of, depth)
        if len(ids) or not parts:
            cands, res = price(ids)
            parts.append((cands, res))
            thr_parts.append(global_batch / res["iteration_time_s"])
            left[ids] = False
            everything = everything or bool(np.isnan(thr_parts[-1]).any())
        if not left.any():
            break
        if everything:  # a NaN throughput: no order to prune by
            continue
        _drop_beaten(left, prunable, bound, memory, count_of, depth,
                     np.concatenate(thr_parts), np.concatenate([c["shape"] for c, _ in parts]))
        if not left.any():
            break
    if len(parts) == 1:
        return parts[0]
    cands = {k: np.concatenate([c[k] for c, _ in parts]) for k in parts[0][0]}
    res = {k: np.concatenate([r[k] for _, r in parts]) for k in parts[0][1]}
    order = np.argsort(cands["shape"], kind="stable")  # whole shapes per round: candidate order
    return {k: v[order] for k, v in cands.items()}, {k: v[order] for k, v in res.items()}


def _promising(ids: np.ndarray, bound: np.ndarray, prunable: np.ndarray, memory: np.ndarray,
               count_of: np.ndarray, depth: int) -> np.ndarray:
    """Of the shapes ``ids``, those priced first: every one without a finite bound, and per
    GPU count those whose bounds could be among the ``depth`` best (``keep_positions``)."""
    chosen = [ids[~prunable[ids]]]
    ids = ids[prunable[ids]]
    for own in _by_count(ids, count_of):
        chosen.append(own[keep_positions(bound[own], memory[own], depth)])
    return np.sort(np.concatenate(chosen))


def _by_count(ids: np.ndarray, count_of: np.ndarray) -> list[np.ndarray]:
    """``ids`` split by GPU count (``count_of``), each group in the order of ``ids``: one
    stable sort, not a pass over all ids per count (searches of thousands of counts)."""
    order = np.argsort(count_of[ids], kind="stable")
    groups = count_of[ids][order]
    cuts = np.flatnonzero(np.diff(groups)) + 1
    return [part for part in np.split(ids[order], cuts) if part.size]


def _drop_beaten(left: np.ndarray, prunable: np.ndarray, bound: np.ndarray, memory: np.ndarray,
                 count_of: np.ndarray, depth: int, thr: np.ndarray, shape: np.ndarray) -> None:
    """Clear ``left`` for the shapes whose bound is beaten, at their GPU count, by the
    ``depth``-th best priced throughput (``thr`` of candidates of shapes ``shape``) among
    candidates needing no more memory."""
    ids = np.flatnonzero(left & prunable)
    of_candidate = count_of[shape]
    priced = {int(of_candidate[rows[0]]): rows
              for rows in _by_count(np.arange(len(shape)), of_candidate)}
    for own in _by_count(ids, count_of):
        mine = priced.get(int(count_of[own[0]]))
        if mine is not None:
            beat = depth_best(thr[mine], memory[shape[mine]], depth, memory[own])
            left[own[beat > bound[own]]] = False


def depth_best(thr: np.ndarray, memory: np.ndarray, depth: int, query: np.ndarray
                ) -> np.ndarray:
    """For each ``query`` memory m: the ``depth``-th largest ``thr`` of the candidates needing
    at most m bytes (−inf when fewer). Only candidates :func:`keep_positions` keeps can be
    among the ``depth`` best at some capacity, so only they are looked at."""
    keep = keep_positions(thr, memory, depth)
    order = np.argsort(memory[keep], kind="stable")
    t, m = thr[keep][order], memory[keep][order]
    level = np.full(len(t), -np.inf)
    if depth == 1:
        level = np.maximum.accumulate(t) if len(t) else level
    else:
        best: list[float] = []  # a min-heap of the depth largest so far
        for j, value in enumerate(t.tolist()):
            if len(best) < depth:
                heapq.heappush(best, value)
            elif value > best[0]:
                heapq.heapreplace(best, value)
            if len(best) == depth:
                level[j] = best[0]
    at = np.searchsorted(m, query, side="right") - 1
    return np.where(at >= 0, level[np.maximum(at, 0)], -np.inf) if len(t) else np.full(
        len(query), -np.inf)


def kept_rows(thr: np.ndarray, memory: np.ndarray, shape: np.ndarray, bounds: np.ndarray,
          depth: int | None, top_k: int, asked: float) -> tuple[np.ndarray, np.ndarray]:
    """(positions of the candidates to keep, each GPU count's first row among them): per count
    (candidates ``bounds[i]:bounds[i + 1]``), those that can be among the ``depth`` fastest at
    some capacity, fastest first; with ``depth`` None (a NaN throughput) the ``top_k`` that fit
    in ``asked`` bytes, as a search always picked them."""
    keep, starts = [], [0]
    for a, b in zip(bounds[:-1], bounds[1:]):
        t, m = thr[a:b], memory[a:b]
        if depth == 1 and b > a:  # only each shape's fastest placement can be the best
            lead = shape_leaders(t, shape[a:b])
            pos = lead[keep_positions(t[lead], m[lead], 1)]
        elif depth is not None:
            pos = keep_positions(t, m, depth)
        else:
            fit = np.flatnonzero(m <= asked)
            pos = fit[top_positions(t[fit], top_k)]
        keep.append(a + pos)
        starts.append(starts[-1] + len(pos))
    return np.concatenate(keep), np.array(starts)


def top_positions(thr: np.ndarray, top_k: int) -> np.ndarray:
    """The ``top_k`` largest ``thr``, largest first (ties in position order); NaN as numpy's
    partition and sort place it. Used when a throughput is NaN (no frontier is kept then)."""
    idx = np.arange(len(thr))
    if len(idx) > top_k:
        kth = np.partition(-thr, top_k - 1)[top_k - 1]
        sel = -thr <= kth
        idx, thr = idx[sel], thr[sel]
    return idx[np.argsort(-thr, kind="stable")[:top_k]]
