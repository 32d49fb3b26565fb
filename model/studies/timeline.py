"""The timeline of one iteration of a configuration: its pipeline schedule, stage by stage.

Built from the estimator's own numbers for one result row (:func:`model.engine.report.
result_frame`): the binding stage's local time T_loc = t_compute + t_memory + t_tp_comm +
t_ep_comm (its n_mb microbatches' forward and backward passes), the pipeline p2p time t_pp, the
data-parallel, optimizer and offload tails (``t_dp_comm_s``, ``t_optimizer_s``,
``t_offload_s``), and how the passes split into forward and backward (:func:`forward_share`, from
the configuration's per-op table). As in :func:`model.physics.pipeline.iteration_time`, every
stage runs at the binding stage's pace, and each microbatch's p2p messages are serial with its
passes: one chunk (a microbatch through one of the V virtual stages of a GPU) takes
τ_f = (s·T_loc + t_pp/2) / (n_mb·V) forward and τ_b = ((1 − s)·T_loc + t_pp/2) / (n_mb·V)
backward, s the forward share.

The schedule is Megatron-LM's (NVIDIA/Megatron-LM at 4dabc62,
``megatron/core/pipeline_parallel/schedules.py``: ``forward_backward_pipelining_without_
interleaving`` and ``…_with_interleaving``, its ``get_model_chunk_id``): stage r runs
W_r = (pp − r − 1)·2 + (V − 1)·pp warm-up forward chunks (pp − r − 1 without interleaving; every
chunk when interleaving with n_mb = pp), then one forward and one backward chunk at a time,
then the remaining backward chunks. Chunk k of a
stage is microbatch (k // (pp·V))·pp + k % pp of virtual stage (k // pp) % V (backward: the
virtual stages in reverse). A chunk starts when its stage is free and its input has arrived:
the previous stage's forward (the last stage's, one virtual stage down, for stage 0) or the next
stage's backward. Played out, the pipeline ends after (n_mb·V + pp − 1)·(τ_f + τ_b): each stage
idles (pp − 1)·(τ_f + τ_b) = (pp − 1)·(T_loc + t_pp)/(n_mb·V), the estimator's bubble
(Narayanan et al. 2021, §2.2).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from model.errors import ModelError

MAX_PASSES = 40_000  # forward and backward chunks drawn (2·pp·n_mb·V): a figure's worth
FORWARD, BACKWARD, IDLE = "forward", "backward", "idle"
# the tail after the pipeline drains, in order: (phase, the result row's column)
TAIL = (("data-parallel sync (exposed)", "t_dp_comm_s"), ("optimizer step", "t_optimizer_s"),
        ("offload (exposed)", "t_offload_s"))
LOCAL_COLUMNS = ("t_compute_s", "t_memory_s", "t_tp_comm_s", "t_ep_comm_s")
COLUMNS = ("stage", "phase", "microbatch", "virtual_stage", "start_s", "end_s", "duration_s")


def forward_share(ops: pd.DataFrame, pp: int) -> float:
    """The forward passes' share of a stage's time, from a configuration's per-op table
    (:func:`model.engine.report.op_table`: ``where``, ``t_fwd_s``, ``t_bwd_s`` per microbatch):
    its blocks' ops plus the edge ops the binding stage holds (both ends with pp = 1, else the
    slower end, as :func:`model.physics.pipeline.iteration_time` takes it)."""
    sums = {w: (float(g["t_fwd_s"].sum()), float(g["t_bwd_s"].sum()))
            for w, g in ops.groupby("where")}
    block = sums.get("block", (0.0, 0.0))
    ends = [sums.get(w, (0.0, 0.0)) for w in ("pre", "post")]
    if pp == 1:
        edge = (ends[0][0] + ends[1][0], ends[0][1] + ends[1][1])
    else:
        edge = max(ends, key=sum)
    fwd, total = block[0] + edge[0], sum(block) + sum(edge)
    if not total > 0:
        raise ModelError("the configuration's ops take no time: no timeline to draw")
    return fwd / total


def stage_order(pp: int, n_mb: int, interleave: int, rank: int) -> list[tuple[str, int, int]]:
    """(phase, microbatch, virtual stage) of each chunk stage ``rank`` runs, in order."""
    total = n_mb * interleave
    if interleave > 1 and n_mb == pp:  # Megatron: every forward, then every backward
        warmup = total
    elif interleave > 1:
        warmup = min((pp - rank - 1) * 2 + (interleave - 1) * pp, total)
    else:
        warmup = min(pp - rank - 1, total)

    def chunk(k: int, phase: str) -> tuple[str, int, int]:
        in_group = k % (pp * interleave)
        virtual = in_group // pp
        if phase == BACKWARD:
            virtual = interleave - 1 - virtual
        return phase, (k // (pp * interleave)) * pp + in_group % pp, virtual

    order = [chunk(k, FORWARD) for k in range(warmup)]
    for i in range(total - warmup):
        order += [chunk(warmup + i, FORWARD), chunk(i, BACKWARD)]
    order += [chunk(k, BACKWARD) for k in range(total - warmup, total)]
    return order


def _needs(phase: str, mb: int, v: int, rank: int, pp: int, interleave: int) -> tuple | None:
    """The chunk whose output this chunk waits for (None: nothing, the first forward)."""
    if phase == FORWARD:
        if rank > 0:
            return FORWARD, mb, v, rank - 1
        return (FORWARD, mb, v - 1, pp - 1) if v > 0 else None
    if rank < pp - 1:
        return BACKWARD, mb, v, rank + 1
    if v < interleave - 1:
        return BACKWARD, mb, v + 1, 0
    return FORWARD, mb, v, rank  # the loss: after its own forward


def play(pp: int, n_mb: int, interleave: int, t_fwd_s: float, t_bwd_s: float
         ) -> pd.DataFrame:
    """Start and end (s) of every chunk of the schedule, with τ_f = ``t_fwd_s`` and
    τ_b = ``t_bwd_s`` per chunk. Sized first: at most :data:`MAX_PASSES` chunks."""
    passes = 2 * pp * n_mb * interleave
    if passes > MAX_PASSES:
        raise ModelError(f"the timeline of this layout has {passes:,} forward and backward "
                         f"passes (2 × pp {pp} × {n_mb} microbatches × V {interleave}), more "
                         f"than the {MAX_PASSES:,} it draws: select a configuration with fewer "
                         "microbatches or stages")
    if interleave > 1 and n_mb % pp:
        raise ModelError(f"interleaving needs pp={pp} to divide the {n_mb} microbatches")
    orders = [stage_order(pp, n_mb, interleave, r) for r in range(pp)]
    done: dict[tuple, float] = {}
    free, nxt = [0.0] * pp, [0] * pp
    rows: list[tuple] = []
    left = sum(len(o) for o in orders)
    while left:
        moved = False
        for r in range(pp):
            while nxt[r] < len(orders[r]):
                phase, mb, v = orders[r][nxt[r]]
                need = _needs(phase, mb, v, r, pp, interleave)
                if need is not None and need not in done:
                    break
                start = max(free[r], done[need] if need is not None else 0.0)
                end = start + (t_fwd_s if phase == FORWARD else t_bwd_s)
                done[(phase, mb, v, r)] = free[r] = end
                rows.append((r, phase, mb, v, start, end))
                nxt[r] += 1
                left -= 1
                moved = True
        if not moved:  # a schedule bug, never the user's input
            raise RuntimeError("pipeline schedule deadlocked")
    frame = pd.DataFrame(rows, columns=list(COLUMNS[:-1]))
    frame["duration_s"] = frame["end_s"] - frame["start_s"]
    return frame.sort_values(["stage", "start_s"], kind="stable").reset_index(drop=True)


def _idle(passes: pd.DataFrame, end_s: float) -> pd.DataFrame:
    """Each stage's gaps between its passes up to ``end_s``: its share of the bubble."""
    rows = []
    for stage, g in passes.groupby("stage"):
        starts = np.append(g["start_s"].to_numpy(), end_s)
        ends = np.insert(g["end_s"].to_numpy(), 0, 0.0)
        for a, b in zip(ends, starts):
            if b - a > 1e-12 * max(end_s, 1.0):
                rows.append((stage, IDLE, -1, -1, a, b, b - a))
    return pd.DataFrame(rows, columns=list(COLUMNS))


def timeline_frame(row: Mapping[str, Any], forward: float) -> pd.DataFrame:
    """Every stage's forward and backward chunks, idle gaps and tail (s) for one result row;
    ``forward`` is :func:`forward_share`. The last end is the row's ``iteration_time_s``."""
    pp, n_mb = int(row["pp"]), int(row["n_microbatches"])
    v = int(row.get("interleave", 1) or 1)
    if not 0 < forward < 1:
        raise ModelError(f"the forward share must lie between 0 and 1, got {forward!r:.20}")
    local = sum(float(row[c]) for c in LOCAL_COLUMNS)
    p2p = float(row["t_pp_comm_s"])
    chunks = n_mb * v
    passes = play(pp, n_mb, v, (forward * local + p2p / 2) / chunks,
                  ((1 - forward) * local + p2p / 2) / chunks)
    drained = float(passes["end_s"].max())
    parts = [passes, _idle(passes, drained)]
    start = drained
    for phase, column in TAIL:
        seconds = float(row.get(column, 0.0) or 0.0)
        if seconds > 0:
            parts.append(pd.DataFrame({
                "stage": np.arange(pp), "phase": phase, "microbatch": -1, "virtual_stage": -1,
                "start_s": start, "end_s": start + seconds, "duration_s": seconds}))
            start += seconds
    frame = pd.concat(parts, ignore_index=True)
    return frame.sort_values(["stage", "start_s"], kind="stable").reset_index(drop=True)


def bubble_s(timeline: pd.DataFrame) -> pd.Series:
    """Each stage's idle seconds in the pipeline (its share of the bubble), by stage."""
    idle = timeline[timeline["phase"] == IDLE].groupby("stage")["duration_s"].sum()
    stages = pd.Index(sorted(timeline["stage"].unique()), name="stage")
    return idle.reindex(stages, fill_value=0.0)
