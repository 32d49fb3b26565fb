"""The collectives' closed forms (docs/model.md §5.1): ring and two-tier times inside a domain,
on the slow network and hierarchical with NIC scaling, the all-reduce against two
reduce-scatters (and the paper mode's), point-to-point, over arrays. Split from
tests/test_formulas.py, whose constants and paper-h200 fixture these use."""

from __future__ import annotations

import numpy as np
import pytest
import test_formulas
from test_formulas import B_F, B_S, L_F, L_S, REL

from model.physics.collectives import Collective, collective_time_s

h200 = test_formulas.h200  # its fixture (the paper's H200), found here by pytest

ALL_KINDS = [Collective.ALLGATHER, Collective.REDUCESCATTER, Collective.ALLREDUCE,
             Collective.BROADCAST, Collective.REDUCE, Collective.P2P]
RING = [Collective.ALLGATHER, Collective.REDUCESCATTER, Collective.BROADCAST, Collective.REDUCE]
V = 3.0e8  # bytes


def ring_c(kind: Collective, n: int) -> float:
    return 1.0 if kind in (Collective.BROADCAST, Collective.REDUCE) else (n - 1) / n


def t(kind, volume, n, tau, system, paper=False) -> float:
    return float(collective_time_s(kind, volume, n, tau, system, paper))


@pytest.mark.parametrize("paper", [False, True])
@pytest.mark.parametrize("kind", ALL_KINDS)
def test_collective_trivial_cases_are_free(h200, kind, paper):
    assert t(kind, V, 1, 1, h200, paper) == 0.0
    for n, tau in ((2, 1), (8, 8), (16, 4)):
        assert t(kind, 0.0, n, tau, h200, paper) == 0.0
    assert t(kind, V, 2, 1, h200, paper) > 0.0


@pytest.mark.parametrize("kind", RING)
def test_collective_inside_one_domain(h200, kind):
    for n in (2, 4, 8):
        expected = L_F * (n - 1) + ring_c(kind, n) * V / B_F
        assert t(kind, V, n, n, h200) == pytest.approx(expected, rel=REL)


@pytest.mark.parametrize("kind", RING)
def test_collective_all_on_the_slow_network(h200, kind):
    for n in (2, 16, 64):
        expected = L_S * (n - 1) + ring_c(kind, n) * V / B_S
        assert t(kind, V, n, 1, h200) == pytest.approx(expected, rel=REL)
        assert t(kind, V, n, 1, h200, paper=True) == pytest.approx(expected, rel=REL)


@pytest.mark.parametrize("kind", RING)
@pytest.mark.parametrize("n,tau,nics", [(16, 4, 1), (16, 4, 2), (64, 8, 1), (64, 8, 2),
                                        (32, 2, 1)])
def test_collective_hierarchical_with_nic_scaling(h200, kind, n, tau, nics):
    system = h200.with_overrides(nics_per_gpu=nics)
    k = n // tau
    cv = ring_c(kind, n) * V
    expected = max(cv / (nics * tau * B_S), cv / B_F) + L_S * (k - 1) + L_F * (n - k)
    assert t(kind, V, n, tau, system) == pytest.approx(expected, rel=REL)


def test_collective_hierarchical_max_switches_to_nvlink(h200):
    """τ·ν·b_s = 8·2·35 GB/s > b_f = 315 GB/s: NVLink is then the bottleneck ring."""
    n, tau, k = 64, 8, 8
    cv = (n - 1) / n * V
    slow = t(Collective.ALLGATHER, V, n, tau, h200)
    fast = t(Collective.ALLGATHER, V, n, tau, h200.with_overrides(nics_per_gpu=2))
    latency = L_S * (k - 1) + L_F * (n - k)
    assert slow == pytest.approx(cv / (tau * B_S) + latency, rel=REL)
    assert fast == pytest.approx(cv / B_F + latency, rel=REL)


def test_broadcast_and_reduce_move_the_whole_buffer(h200):
    for n, tau in ((8, 8), (16, 1), (16, 4)):
        ag = t(Collective.ALLGATHER, V, n, tau, h200)
        bc = t(Collective.BROADCAST, V, n, tau, h200)
        assert t(Collective.REDUCE, V, n, tau, h200) == bc
        assert bc > ag
        # scaling the volume by n/(n−1) turns the all-gather into the broadcast
        assert t(Collective.ALLGATHER, V * n / (n - 1), n, tau, h200) == pytest.approx(bc, rel=REL)


@pytest.mark.parametrize("n,tau", [(16, 1), (8, 8), (16, 4), (64, 8)])
def test_allreduce_default_is_twice_reduce_scatter(h200, n, tau):
    rs = t(Collective.REDUCESCATTER, V, n, tau, h200)
    assert rs == t(Collective.ALLGATHER, V, n, tau, h200)
    assert t(Collective.ALLREDUCE, V, n, tau, h200) == pytest.approx(2 * rs, rel=REL)


@pytest.mark.parametrize("n,tau", [(16, 1), (8, 8), (4, 4)])
def test_paper_allreduce_not_doubled_in_flat_branches(h200, n, tau):
    rs = t(Collective.REDUCESCATTER, V, n, tau, h200, paper=True)
    assert rs == pytest.approx(t(Collective.REDUCESCATTER, V, n, tau, h200), rel=REL)
    assert t(Collective.ALLREDUCE, V, n, tau, h200, paper=True) == pytest.approx(rs, rel=REL)


@pytest.mark.parametrize("n,tau", [(16, 4), (64, 8), (32, 2)])
def test_paper_allreduce_doubles_bandwidth_only_in_hierarchical_branch(h200, n, tau):
    k = n // tau
    cv = (n - 1) / n * V
    bandwidth = max(cv / (tau * B_S), cv / B_F)
    latency = L_S * (k - 1) + L_F * (n - k)
    assert t(Collective.REDUCESCATTER, V, n, tau, h200, paper=True) == pytest.approx(
        bandwidth + latency, rel=REL)
    assert t(Collective.ALLREDUCE, V, n, tau, h200, paper=True) == pytest.approx(
        2 * bandwidth + latency, rel=REL)
    assert t(Collective.ALLREDUCE, V, n, tau, h200) == pytest.approx(
        2 * (bandwidth + latency), rel=REL)


def test_p2p(h200):
    assert t(Collective.P2P, V, 2, 1, h200) == pytest.approx(L_S + V / B_S, rel=REL)
    assert t(Collective.P2P, V, 2, 2, h200) == pytest.approx(L_F + V / B_F, rel=REL)
    assert t(Collective.P2P, V, 1, 1, h200) == 0.0
    assert t(Collective.P2P, 0.0, 2, 1, h200) == 0.0


def test_collectives_broadcast_over_arrays(h200):
    """Arrays of configurations give the same numbers as one call per configuration."""
    n = np.array([1, 2, 8, 16, 16, 64, 64])
    tau = np.array([1, 1, 8, 1, 4, 8, 2])
    vol = np.array([V, V, 2 * V, V, 0.0, V / 3, V])
    for kind in ALL_KINDS:
        if kind == Collective.P2P:
            continue
        for paper in (False, True):
            vec = collective_time_s(kind, vol, n, tau, h200, paper)
            one = [t(kind, v, g, x, h200, paper) for v, g, x in zip(vol, n, tau)]
            assert vec.shape == n.shape
            np.testing.assert_allclose(vec, one, rtol=REL, atol=0)
