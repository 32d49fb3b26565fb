"""What each of the paper's bugs and simplifications changes: one search per mode switch.

Starting from the paper mode (every switch on, docs/model.md §12), each row turns one switch
off; the last row is the default model (all off). Reported per row: best samples/s, its change
against the paper mode, and the best configuration.
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from model.engine.api import search
from model.specs.hardware import System
from model.specs.modes import DEFAULT, PAPER, SWITCHES, Mode
from model.specs.transformer import Transformer


def ablation(model: Transformer, system: System, gpus: int, global_batch: int, strategy: str,
             nvs: int | None = None) -> pd.DataFrame:
    """Rows: paper mode, paper mode with each switch fixed in turn, and the default model."""
    modes: list[tuple[str, Mode]] = [("paper (all bugs)", PAPER)]
    modes += [(f"paper, fix {name}", replace(PAPER, **{name: False})) for name in SWITCHES]
    modes.append(("default (all fixed)", DEFAULT))
    rows = []
    for label, mode in modes:
        best = search(model, system, gpus, global_batch, strategy, compat=mode, nvs=nvs,
                      top_k=1).best
        row = {"mode": label, "strategy": strategy, "gpus": gpus}
        if best is not None:
            row.update({k: best[k] for k in ("samples_per_s", "train_days", "memory_gb", "dp",
                                              "tp1", "tp2", "pp", "microbatch", "nb", "nv_tp1",
                                              "nv_tp2", "nv_dp", "nv_pp")})
        rows.append(row)
    frame = pd.DataFrame(rows)
    if "samples_per_s" in frame:
        frame["change_vs_paper"] = frame["samples_per_s"] / frame["samples_per_s"].iloc[0] - 1.0
    return frame
