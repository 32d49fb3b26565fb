"""Tiny background jobs for the job tests, in a module that imports almost nothing: a job's
process imports the module of its function (it is pickled by name), so a light module keeps
hundreds of job starts fast."""

from __future__ import annotations

import os
import signal
import time


def quick_job(key, progress_key, store, context) -> None:
    """Stores (done, its process id, its parent's) under ``key``."""
    store.set(key, ["done", os.getpid(), os.getppid()])


def masked_sleeper(key, progress_key, store, context) -> None:
    """A job stuck where no Python handler runs (as one blocked in C): SIGALRM and SIGTERM
    blocked, then a long sleep."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM, signal.SIGTERM})
    store.set(f"{key}-started", os.getpid())
    time.sleep(120)


def allocator(key, progress_key, store, context) -> None:
    """Asks for 1 GiB of address space (numpy, never touched: no memory is used unless the
    kernel refuses it), storing how it ended."""
    import numpy as np

    try:
        block = np.empty(2**30, dtype=np.uint8)
        store.set(key, f"allocated {block.nbytes}")
    except MemoryError:
        store.set(key, "MemoryError")


def spinning_job(key, progress_key, store, context) -> None:
    """A job looping in Python for ever (as the divisor listing did); it records when it
    started and how it ended."""
    from model import ModelError

    store.set(f"{key}-start", time.monotonic())
    try:
        n = 0
        while True:
            n += 1
    except ModelError as exc:
        store.set(key, [str(exc), time.monotonic()])


def sleeping_job(key, progress_key, args, context) -> None:
    time.sleep(120)


def napping_job(key, progress_key, store, context) -> None:
    """A job that outlives the request starting it (its thread), then stores its result."""
    time.sleep(1.5)
    store.set(key, "finished")
