"""HBM the runtime holds beside the model's tensors: NCCL's communication buffers and the
caching allocator's rounding — the documented accounting, as closed forms (no parameter fitted).

**NCCL buffers.** Every connection a communicator opens to a peer, on every channel, holds one
buffer per protocol (NVIDIA/nccl ``src/init.cc`` at 00ad458b155af8d1fa53e75a7901a598a8afb724,
``computeBuffSizes``: ``DEFAULT_LL_BUFFSIZE``, ``DEFAULT_LL128_BUFFSIZE``,
``DEFAULT_BUFFSIZE``; the sizes from ``src/include/device.h``):

* Simple: ``NCCL_BUFFSIZE``, default ``1 << 22`` = 4 MiB;
* LL: NCCL_LL_LINES_PER_THREAD (8) × NCCL_LL_MAX_NTHREADS (512) × NCCL_STEPS (8) × 16-byte
  ``ncclLLFifoLine`` = 512 KiB;
* LL128: NCCL_LL128_ELEMS_PER_THREAD (120) × NCCL_LL128_MAX_NTHREADS (640) × NCCL_STEPS (8) ×
  8 bytes = 4,915,200 B;

so B_c = 9,633,792 B (9.19 MiB) a connection. A ring collective connects each rank to one peer
per channel (its ring's previous rank: the receive side holds the buffers), so a communicator of
more than one rank holds C·B_c with C channels. C is chosen by NCCL's topology search and is at
most ``MAXCHANNELS`` = 64 (``src/include/device.h``): :func:`nccl_buffer_bytes` takes C, and
:data:`NCCL_MAX_CHANNELS` gives the bound. Tree, NVLS and point-to-point channels open further
connections; the ring's C·B_c per communicator is the floor of what NCCL holds, the bound at
C = 64 what its rings can hold.

**The caching allocator's rounding** (pytorch/pytorch ``c10/cuda/CUDACachingAllocator.cpp`` at
eb42ad6eca0ce61e7c581212b4bf32f991425571, ``round_size`` and ``get_allocation_size``:
``kMinBlockSize`` 512 B, ``kSmallSize`` 1 MiB, ``kSmallBuffer`` 2 MiB, ``kLargeBuffer`` 20 MiB,
``kMinLargeAlloc`` 10 MiB, ``kRoundLarge`` 2 MiB): a request is rounded up to a multiple of
512 B and served from a segment of 2 MiB (requests ≤ 1 MiB), 20 MiB (1–10 MiB) or the request
rounded up to 2 MiB (larger): :func:`allocator_segment_bytes`. What the allocator *reserves*
beyond that — freed blocks kept cached for reuse, split segments no request fits — depends on
the order of every allocation and free, and has no closed form: it is not modelled.
"""

from __future__ import annotations

import numpy as np

MIB = 2**20
NCCL_SIMPLE_BUFFER_BYTES = 1 << 22  # DEFAULT_BUFFSIZE: NCCL_BUFFSIZE's default, 4 MiB
NCCL_LL_BUFFER_BYTES = 8 * 512 * 8 * 16  # lines/thread × threads × steps × 16-byte FIFO line
NCCL_LL128_BUFFER_BYTES = 120 * 640 * 8 * 8  # elements/thread × threads × steps × 8 bytes
NCCL_CONNECTION_BYTES = NCCL_SIMPLE_BUFFER_BYTES + NCCL_LL_BUFFER_BYTES + NCCL_LL128_BUFFER_BYTES
NCCL_MAX_CHANNELS = 64  # MAXCHANNELS

ALLOC_MIN_BLOCK_BYTES = 512  # kMinBlockSize
ALLOC_SMALL_SIZE_BYTES = 1 * MIB  # kSmallSize: the largest request of the small pool
ALLOC_SMALL_BUFFER_BYTES = 2 * MIB  # kSmallBuffer: a small-pool segment
ALLOC_LARGE_BUFFER_BYTES = 20 * MIB  # kLargeBuffer: a segment for 1–10 MiB requests
ALLOC_MIN_LARGE_ALLOC_BYTES = 10 * MIB  # kMinLargeAlloc
ALLOC_ROUND_LARGE_BYTES = 2 * MIB  # kRoundLarge


def nccl_buffer_bytes(group_sizes, channels=NCCL_MAX_CHANNELS) -> np.ndarray:
    """Bytes of ring buffers a rank holds for its communicators: C·B_c for each communicator
    of more than one rank (``group_sizes``: one array per communicator — the TP, CP, DP, PP and
    EP groups of each configuration; ``channels`` C: at most :data:`NCCL_MAX_CHANNELS`)."""
    comms = sum((np.asarray(g) > 1).astype(np.int64) for g in group_sizes)
    return comms * np.asarray(channels) * NCCL_CONNECTION_BYTES


def allocator_block_bytes(request_bytes) -> np.ndarray:
    """A request rounded as the caching allocator rounds it: up to a multiple of 512 B."""
    r = np.asarray(request_bytes, dtype=np.int64)
    return -(-np.maximum(r, 1) // ALLOC_MIN_BLOCK_BYTES) * ALLOC_MIN_BLOCK_BYTES


def allocator_segment_bytes(request_bytes) -> np.ndarray:
    """The segment the caching allocator reserves from CUDA for a request that finds no cached
    block: 2 MiB (≤ 1 MiB), 20 MiB (1–10 MiB) or the request rounded up to 2 MiB."""
    size = allocator_block_bytes(request_bytes)
    large = -(-size // ALLOC_ROUND_LARGE_BYTES) * ALLOC_ROUND_LARGE_BYTES
    return np.where(size <= ALLOC_SMALL_SIZE_BYTES, ALLOC_SMALL_BUFFER_BYTES,
                    np.where(size < ALLOC_MIN_LARGE_ALLOC_BYTES, ALLOC_LARGE_BUFFER_BYTES,
                             large))
