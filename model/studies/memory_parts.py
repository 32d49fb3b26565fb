"""Where one configuration's HBM goes: the binding stage's memory per GPU, part by part, against
the GPU's capacity.

The parts are the result row's (:func:`model.engine.report.result_frame`), which
:class:`model.physics.memory.StageMemory` computes (after :func:`model.physics.memory.
offload_memory`): weights (with ZeRO-3's two gathered blocks), gradients, optimizer state and
activations of the stage that needs the most; they add up to ``memory_gb``. Beside them the
system's reserve (``memory_reserve_gb``: CUDA context, workspaces, communication buffers,
fragmentation — what a configuration may not use, the software stack's figure where it has
one), the free HBM, and what offload keeps in host memory. HBM parts + reserve + free (or minus
the excess, when it does not fit) = the capacity.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from model.errors import ModelError

# (part, the result row's column)
MODEL_PARTS = (("weights", "weights_gb"), ("gradients", "gradients_gb"),
               ("optimizer state", "optimizer_gb"), ("activations", "activations_gb"))
RESERVE = "other (reserve: CUDA context, buffers, fragmentation)"
FREE, OVER, HOST = "free", "over capacity", "offloaded to host"


def memory_frame(row: Mapping[str, Any], reserve_gb: float) -> pd.DataFrame:
    """One row per part: ``part``, ``tier`` (HBM or host), ``memory_gb``,
    ``share_of_capacity`` (of the HBM capacity) and ``hbm_capacity_gb``. ``reserve_gb``: the
    system's reserve as the search used it (after its software stack)."""
    capacity = float(row["hbm_capacity_gb"])
    if not capacity > 0 or not 0 <= reserve_gb <= capacity:
        raise ModelError(f"the reserve ({reserve_gb:g} GB) must lie within the HBM capacity "
                         f"({capacity:g} GB)")
    rows = [(name, "HBM", float(row[col])) for name, col in MODEL_PARTS]
    used = sum(r[2] for r in rows)
    rows.append((RESERVE, "HBM", float(reserve_gb)))
    left = capacity - reserve_gb - used
    rows.append((FREE, "HBM", max(left, 0.0)))
    if left < 0:
        rows.append((OVER, "HBM", -left))
    host = float(row.get("host_memory_gb", 0.0) or 0.0)
    if host > 0:
        rows.append((HOST, "host", host))
    frame = pd.DataFrame(rows, columns=["part", "tier", "memory_gb"])
    frame["share_of_capacity"] = frame["memory_gb"] / capacity
    frame["hbm_capacity_gb"] = capacity
    return frame
