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
         (2048, 256, 8192, 512, 7e-6), (1000, 200, 2048, 256, 2e-5),
         (12000, 300, 8192, 512, 7e-6))  # the last: prompts longer than a step's budget


def tau_d(d):
    """A decode step of d sequences, s: a fixed part plus a per-sequence part."""
    return 4.5e-3 + 2e-5 * np.asarray(d, dtype=float)


def _allocate(left_p: np.ndarray, fifo: np.ndarray, room: int, slots: int) -> np.ndarray:
    """Prompt tokens each user gets this step: first come first served, ``room`` tokens and
    ``slots`` sequences at most."""
    take = np.zeros(len(left_p))
    waiting = np.flatnonzero(left_p > 0)
    if room <= 0 or slots <= 0 or not waiting.size:
        return take
    order = waiting[np.argsort(fifo[waiting], kind="stable")][:slots]
    before = np.concatenate(([0.0], np.cumsum(left_p[order])[:-1]))
    take[order] = np.clip(room - before, 0.0, left_p[order])
    return take


def simulate(users: int, i: int, o: int, budget: int, b_max: int, c_p: float,
             max_cycles: int = 400, tail: int = 50) -> dict[str, float]:
    """The steady state: mean TTFT, TPOT (s) and requests/s of one cycle (``users``
    requests) once a cycle's means equal the one before to 1e-6 (the first wave's pattern
    settles over many cycles), else (a prefill queue that keeps cycling) the means of the
    last ``tail`` of ``max_cycles`` cycles."""
    left_p, left_d = np.full(users, float(i)), np.zeros(users)
    arrival, first = np.zeros(users), np.zeros(users)
    fifo = np.arange(users, dtype=float)
    t, ticket, done = 0.0, float(users), 0
    rows: list[tuple[float, float, float]] = []
    last = None
    while done < users * max_cycles:
        decoding = left_d > 0
        running = int(decoding.sum())
        take = _allocate(left_p, fifo, budget - running, b_max - running)
        t += tau_d(running) + take.sum() * c_p
        left_d[decoding] -= 1
        left_p -= take
        prefilled = (take > 0) & (left_p <= 0)
        first[prefilled] = t
        left_d[prefilled] = o - 1
        for u in np.flatnonzero(decoding & (left_d <= 0)):
            rows.append((first[u] - arrival[u], (t - first[u]) / (o - 1), t))
            arrival[u], left_p[u], fifo[u], ticket = t, i, ticket, ticket + 1
            done += 1
            if done % users == 0 and done >= 2 * users:
                cycle = np.array(rows[-users:])
                means = (cycle[:, 0].mean(), cycle[:, 1].mean(),
                         users / (cycle[-1, 2] - rows[-users - 1][2]))
                if last is not None and np.allclose(means, last, rtol=1e-6):
                    return {"ttft": means[0], "tpot": means[1], "rate": means[2]}
                last = means
    last_rows = np.array(rows[-users * tail:])
    return {"ttft": last_rows[:, 0].mean(), "tpot": last_rows[:, 1].mean(),
            "rate": users * tail / (last_rows[-1, 2] - rows[-users * tail - 1][2])}


def _closed(case):
    i, o, budget, b_max, c_p = case
    users = np.array(USERS, dtype=float)
    return closed_loop(users, i, o, 1.0, 1.0, np.full(len(users), float(budget)),
                       np.full(len(users), float(b_max)), tau_d, np.full(len(users), c_p))


@pytest.mark.parametrize("case", CASES)
def test_closed_forms_match_the_simulation(case):
    """TTFT, TPOT and requests/s within 5 % of the simulated scheduler's steady state from 1
    to 1,024 users (the prefill knee included: 1000/200 at 256 users, where more prompts
    arrive per step than the budget holds whole; and prompts longer than the budget, whose
    last chunk's step the next prompt fills)."""
    got = _closed(case)
    for j, users in enumerate(USERS):
        ref = simulate(users, *case)
        assert got.ttft_s[j] == pytest.approx(ref["ttft"], rel=0.05), (users, case)
        assert got.tpot_s[j] == pytest.approx(ref["tpot"], rel=0.05), (users, case)
        assert got.requests_per_s[j] == pytest.approx(ref["rate"], rel=0.05), (users, case)


def test_one_output_token_is_a_prefill_loop():
    """O = 1: no TPOT (NaN); one wave of users·I ≤ N tokens is one step."""
    got = closed_loop(np.array([4.0]), 1024, 1, 1.0, 1.0, np.array([8192.0]),
                      np.array([512.0]), tau_d, np.array([7e-6]))
    assert np.isnan(got.tpot_s[0])
    assert got.ttft_s[0] == pytest.approx(tau_d(0) + 4 * 1024 * 7e-6, rel=1e-6)


def test_ttft_grows_with_the_wave_not_only_past_the_kv_cache():
    """Closed loop: 8 users of 1,024-token prompts wait for each other's prefill (8·I·c_p), far
    above one prompt alone, though every user fits the batch."""
    got = _closed(CASES[0])
    one, eight = got.ttft_s[0], got.ttft_s[3]
    assert eight == pytest.approx(tau_d(0) + 8 * 1024 * 7e-6, rel=1e-6)
    assert eight > 4 * one


@pytest.mark.parametrize("rho", [0.3, 0.7, 0.9])
def test_md1_wait_quantiles_match_a_lindley_simulation(rho):
    """The request-rate mode's TTFT p90/p99: the M/D/1 wait quantiles (Cramér–Lundberg) within
    10 % of a Lindley recursion W' = max(W + S − A, 0) over 200,000 Poisson arrivals."""
    from model.serving.modes import md1_wait_quantile_s, md1_wait_s

    rng = np.random.default_rng(7)
    gaps = 1.0 - rng.exponential(1.0 / rho, 200_000)  # service 1 s minus the next gap
    waits = np.empty(len(gaps))
    w = 0.0
    for k, x in enumerate(gaps):
        waits[k] = w
        w = max(w + x, 0.0)
    waits = waits[10_000:]
    assert waits.mean() == pytest.approx(md1_wait_s(np.array([rho]), np.array([1.0]))[0],
                                         rel=0.05)
    for q in (0.9, 0.99):
        got = md1_wait_quantile_s(np.array([rho]), np.array([1.0]), q)[0]
        assert got == pytest.approx(np.quantile(waits, q), rel=0.10), (rho, q)
    assert np.isinf(md1_wait_quantile_s(np.array([1.2]), np.array([1.0]), 0.9)[0])
