"""The runtime's HBM beside the model's tensors (issue 32, item 2; model/physics/runtime_memory.py):
NCCL's ring buffers and the caching allocator's rounding as closed forms from their code, what
they add to TorchTitan's reserved-memory comparison, and that the stacks' reserve holds them."""

from __future__ import annotations

import json

import numpy as np

from model.physics import runtime_memory as rm
from model.specs.schema import DATA_DIR
from model.validation import memory_error as me

MIB = 2**20


def test_an_nccl_connection_holds_the_three_protocols_buffers():
    assert rm.NCCL_SIMPLE_BUFFER_BYTES == 4 * MIB
    assert rm.NCCL_LL_BUFFER_BYTES == 512 * 1024  # 8 lines × 512 threads × 8 steps × 16 B
    assert rm.NCCL_LL128_BUFFER_BYTES == 4_915_200  # 120 × 640 × 8 steps × 8 B
    assert rm.NCCL_CONNECTION_BYTES == 9_633_792


def test_nccl_buffers_count_the_communicators_of_more_than_one_rank():
    tp, dp, pp = np.array([1, 8, 8]), np.array([4, 1, 16]), np.array([1, 1, 2])
    out = rm.nccl_buffer_bytes([tp, dp, pp], channels=32)
    np.testing.assert_array_equal(out, np.array([1, 1, 3]) * 32 * rm.NCCL_CONNECTION_BYTES)
    assert rm.nccl_buffer_bytes([1, 1, 1]) == 0


def test_the_caching_allocator_rounds_and_segments_as_its_code():
    """Rounded to 512 B first, so 10 MiB − 1 B is a 10 MiB request: its own 2 MiB-rounded
    segment, not a 20 MiB one."""
    sizes = np.array([1, 513, MIB, MIB + 1, 10 * MIB - 1, 10 * MIB, 10 * MIB + 1])
    np.testing.assert_array_equal(rm.allocator_block_bytes(sizes)[:3], [512, 1024, MIB])
    np.testing.assert_array_equal(
        rm.allocator_segment_bytes(sizes),
        [2 * MIB, 2 * MIB, 2 * MIB, 20 * MIB, 10 * MIB, 10 * MIB, 12 * MIB])


def test_every_stacks_reserve_holds_nccl_rings_of_four_groups_at_the_channel_limit():
    """TP, DP, PP and CP or EP, each at NCCL's 64-channel maximum: 2.47 GB, inside the 4 GB
    every stack reserves (the rest: the CUDA context and workspaces)."""
    rings_gb = float(rm.nccl_buffer_bytes([2, 2, 2, 2])) / 1e9
    assert 2.4 < rings_gb < 2.5
    for path in (DATA_DIR / "stacks").glob("*.json"):
        reserve = json.loads(path.read_text()).get("memory_reserve_gb") or {}
        assert all(gb >= rings_gb + 1.0 for gb in reserve.values()), path.name


def test_nccl_rings_are_small_beside_torchtitans_reserved_memory():
    """The documented buffers add at most ~1.7 GiB to the model's allocated figure (NCCL
    allocates them outside the caching allocator); with them the prediction stays below the
    published peak reserved memory of every run."""
    rows = list(me.stored_reserved_rows())
    assert rows == me.compute_reserved_rows()
    for r in rows:
        assert 0 < r["nccl_rings_max_gib"] < 2.0
        assert r["gap_pct"] < r["gap_with_nccl_pct"] < 0.0
