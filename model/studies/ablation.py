"""What each of the paper's bugs and simplifications changes: one search per mode switch.

Starting from the paper mode (every switch on, docs/model.md §12), each row turns one switch
off; the last row is the default model (all off). Reported per row: best samples/s, its change
against the paper mode, and the best configuration. :func:`ablation` takes a
:class:`~model.engine.request.Request` (one GPU count, one strategy), or the keywords that
build one.
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from model.engine.api import search_request
from model.engine.request import Request
from model.engine.search import only_request
from model.errors import ModelError
from model.specs.hardware import System
from model.specs.modes import DEFAULT, PAPER, SWITCHES, Mode
from model.specs.transformer import Transformer


def ablation(model: Transformer | Request, system: System | None = None,
             gpus: int | None = None, global_batch: int | None = None, strategy: str = "1d",
             nvs: int | None = None) -> pd.DataFrame:
    """Rows: paper mode, paper mode with each switch fixed in turn, and the default model.
    ``ablation(request)`` (its mode is replaced by each in turn), or the keyword form,
    an adapter that builds the request."""
    if isinstance(model, Request):
        req = only_request(model, system, gpus, global_batch)
    else:
        req = Request.build(model, system, global_batch=global_batch, gpus=gpus,
                            strategy=strategy, nvs=nvs)
    work = req.training()
    if len(work.gpus) != 1 or not isinstance(req.strategy, str) or req.strategy == "all":
        raise ModelError("the ablation takes one GPU count and one strategy")
    [count] = work.gpus
    modes: list[tuple[str, Mode]] = [("paper (all bugs)", PAPER)]
    modes += [(f"paper, fix {name}", replace(PAPER, **{name: False})) for name in SWITCHES]
    modes.append(("default (all fixed)", DEFAULT))
    rows = []
    for label, mode in modes:
        best = search_request(req.replace(mode=mode, top_k=1)).best
        row = {"mode": label, "strategy": req.strategy, "gpus": count}
        if best is not None:
            row.update({k: best[k] for k in ("samples_per_s", "train_days", "memory_gb", "dp",
                                              "tp1", "tp2", "pp", "microbatch", "nb", "nv_tp1",
                                              "nv_tp2", "nv_dp", "nv_pp")})
        rows.append(row)
    frame = pd.DataFrame(rows)
    if "samples_per_s" in frame:
        frame["change_vs_paper"] = frame["samples_per_s"] / frame["samples_per_s"].iloc[0] - 1.0
    return frame
