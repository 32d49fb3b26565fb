"""What a request asks the estimator to run: the workload field of
:class:`model.engine.request.Request`.

:class:`Training` is the first workload (pre-training at a global batch on some GPU counts);
serving's record plugs into the same field. A workload is a frozen record validated when it is
built, so every front end (CLI, API, dashboard) gets the same errors in the same words.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from model.errors import ModelError

MAX_GPUS = 10_000_000  # a GPU count above this is out of range for every front end
MAX_GLOBAL_BATCH = 100_000_000  # sequences


def positive_int(name: str, value: object, hi: int | None = None, hi_text: str = "") -> int:
    """``value`` as an int, or a ModelError naming ``name`` and the allowed range."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ModelError(f"'{name}' must be a positive integer, got {value!r:.80}")
    if hi is not None and value > hi:
        raise ModelError(f"'{name}' = {value} is out of range; allowed [1, {hi_text or hi}]")
    return int(value)


class Workload(Protocol):
    """What a request's workload is: a frozen record that says its kind ("training",
    "serving", …); each entry point takes the kinds it estimates."""

    kind: str


@dataclass(frozen=True)
class Training:
    """Training at ``global_batch`` sequences per iteration on exactly ``gpus`` GPUs (one count
    or several: a strong-scaling sweep), or on at most ``max_gpus`` in steps of ``gpu_step``
    (the rest idle; None: 1, or the system's node size for a plan). ``gpus`` empty with
    ``max_gpus`` None: a study that chooses its own counts (a plan)."""

    global_batch: int
    gpus: tuple[int, ...] = ()
    max_gpus: int | None = None
    gpu_step: int | None = None

    kind = "training"

    def __post_init__(self) -> None:
        positive_int("global_batch", self.global_batch, MAX_GLOBAL_BATCH, "1e8")
        if isinstance(self.gpus, (str, bytes)) or not hasattr(self.gpus, "__iter__"):
            raise ModelError(f"GPU counts must be a list of integers, got {self.gpus!r:.80}")
        counts = tuple(positive_int("gpus", n, MAX_GPUS) for n in self.gpus)
        object.__setattr__(self, "gpus", counts)
        object.__setattr__(self, "global_batch", int(self.global_batch))
        if self.max_gpus is not None:
            if counts:
                raise ModelError("give 'gpus' (use exactly that many) or 'max_gpus' (at most), "
                                 "not both")
            positive_int("max_gpus", self.max_gpus)  # its range: explore.counts.count_range
        if self.gpu_step is not None:
            positive_int("gpu_step", self.gpu_step)
