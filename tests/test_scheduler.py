"""The closed-loop scheduler's closed forms (model/serving/scheduler.py) against a step-by-step
simulation of the same scheduler: decodes first, then prompt chunks first come first served in
what is left of the token budget, at most max_batch sequences, a prompt's first token out of the
step of its last chunk, each user sending its next request when the last ends (all at t = 0)."""

from __future__ import annotations

import numpy as np
import pytest

from model.serving.scheduler import closed_loop

USERS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
# (I, O, budget N, max batch, s per prompt token): an 8B-like instance on one H100
CASES = ((1024, 128, 8192, 512, 7e-6), (128, 1024, 8192, 512, 7e-6),
         (2048, 256, 8192, 512, 7e-6), (1000, 1000, 2048, 256, 2e-5))


def tau_d(d):
    """A decode step of d sequences, s: a fixed part plus a per-sequence part."""
    return 4.5e-3 + 2e-5 * np.asarray(d, dtype=float)


def simulate(users: int, i: int, o: int, budget: int, b_max: int, c_p: float,
             cycles: int = 6, warm: int = 3) -> dict[str, float]:
    """Mean TTFT, TPOT (s) and requests/s of the requests ending after ``warm`` cycles."""
    left_p = np.full(users, float(i))
    left_d = np.zeros(users)
    arrival, first = np.zeros(users), np.zeros(users)
    fifo = np.arange(users, dtype=float)
    t, ticket = 0.0, float(users)
    ttft, tpot, ends = [], [], []
    while len(ends) < users * cycles:
        decoding = left_d > 0
        room, running = budget - int(decoding.sum()), int(decoding.sum())
        take = np.zeros(users)
        waiting = np.flatnonzero(left_p > 0)
        for u in waiting[np.argsort(fifo[waiting], kind="stable")]:
            if room <= 0 or running >= b_max:
                break
            take[u] = min(left_p[u], room)
            room -= take[u]
            running += 1
        t += tau_d(decoding.sum()) + take.sum() * c_p
        left_d[decoding] -= 1
        left_p -= take
        prefilled = (take > 0) & (left_p <= 0)
        first[prefilled] = t
        left_d[prefilled] = o - 1
        for u in np.flatnonzero(decoding & (left_d <= 0)):
            ttft.append(first[u] - arrival[u])
            tpot.append((t - first[u]) / (o - 1))
            ends.append(t)
            arrival[u], left_p[u], fifo[u], ticket = t, i, ticket, ticket + 1
    k = users * warm
    return {"ttft": float(np.mean(ttft[k:])), "tpot": float(np.mean(tpot[k:])),
            "rate": (len(ends) - k) / (ends[-1] - ends[k - 1])}


def _closed(case):
    i, o, budget, b_max, c_p = case
    users = np.array(USERS, dtype=float)
    return closed_loop(users, i, o, 1.0, 1.0, np.full(len(users), float(budget)),
                       np.full(len(users), float(b_max)), tau_d, np.full(len(users), c_p))


@pytest.mark.parametrize("case", CASES)
def test_throughput_and_tpot_match_the_simulation(case):
    """TPOT and requests/s within 5 % of the simulated scheduler from 1 to 1,024 users."""
    got = _closed(case)
    for j, users in enumerate(USERS):
        ref = simulate(users, *case)
        assert got.tpot_s[j] == pytest.approx(ref["tpot"], rel=0.05), (users, case)
        assert got.requests_per_s[j] == pytest.approx(ref["rate"], rel=0.05), (users, case)


@pytest.mark.parametrize("case", CASES)
def test_ttft_matches_where_the_clumps_do_not_straddle(case):
    """TTFT within 5 % in the wave regime (users·I ≤ N), for short prompts (I ≤ N/8) and when
    the users exceed max_batch (the queue outside the engine dominates)."""
    i, o, budget, b_max, _ = case
    got = _closed(case)
    for j, users in enumerate(USERS):
        if users * i <= budget or i <= budget / 64 or users > 2 * b_max:
            ref = simulate(users, *case)
            assert got.ttft_s[j] == pytest.approx(ref["ttft"], rel=0.05), (users, case)


def test_ttft_grows_with_the_wave_not_only_past_the_kv_cache():
    """Closed loop: 8 users of 1,024-token prompts wait for each other's prefill (8·I·c_p), far
    above one prompt alone, though every user fits the batch."""
    got = _closed(CASES[0])
    one, eight = got.ttft_s[0], got.ttft_s[3]
    assert eight == pytest.approx(tau_d(0) + 8 * 1024 * 7e-6, rel=1e-6)
    assert eight > 4 * one
