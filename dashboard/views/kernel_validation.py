"""The kernel part of the Validation page: the kernel layer's held-out error on NVIDIA
AIConfigurator 0.12.0's measured kernel tables (dense GEMM, context and decode attention,
MLA, collectives; MoE rows where the MoE kernel model adds them), per class × GPU × engine
× dtype — the table ``tperf validate --set kernels`` prints, as stored by
``model.validation.kernels``."""

from __future__ import annotations

from typing import Any

import dash_ag_grid as dag
from dash import html

from dashboard.views.grid import number_column as _num
from dashboard.views.grid import text_column as _text
from model.validation import kernels as kv

COLUMNS = [
    _text("class", "kernel class", 170, filter=False), _text("gpu", "GPU", 100, filter=False),
    _text("engine", "engine", 90, filter=False),
    _text("dtype", "dtype / collective", 160, filter=False),
    _num("n", "rows", "d", 70, filter=False),
    _num("median_pct", "median |err| %", ".1f", 120, flag=True, filter=False),
    _num("p90_pct", "90th pct |err| %", ".1f", 130, filter=False),
    _text("target", "within target", 110, filter=False),
]


def table_rows() -> tuple[list[dict[str, Any]], str]:
    """(grid rows, message): the stored error table, each row marked against the target
    (median ≤ 10 %, 90th percentile ≤ 25 %); no rows and a message if it cannot be read."""
    try:
        rows = kv.stored_error_rows()
    except (OSError, ValueError, KeyError) as exc:
        return [], f"The kernel error table could not be read: {exc}"
    return [{**r, "target": "yes" if kv.meets_target(r) else "no"} for r in rows], ""


def section() -> html.Div:
    """The card: a short note, the table (sortable), a message where the table is missing."""
    rows, message = table_rows()
    return html.Div(className="card wide", children=[
        html.H3("Kernels: held-out error on measured kernel tables"),
        html.P(className="summary", children=(
            "Each kernel class is a closed form (roofline × shape terms) fitted per GPU × "
            "dtype to NVIDIA AIConfigurator 0.12.0's measured kernel tables, per engine: "
            "TensorRT-LLM (trtllm) and NCCL, vLLM (vllm) and SGLang (sglang), each on its "
            "own kernels. "
            "Error: the shape families (GEMM: (n, k) pairs; attention: head configurations; "
            "MLA: head counts; collectives: message-size decades) held out a fifth at a "
            "time, each priced by a refit without it. Target: median ≤ 10 %, 90th "
            "percentile ≤ 25 %. '(torch)', engine pytorch: PyTorch measurements on an H100 and "
            "an H200, not fitted (the SDPA forward: training's attention model, its ratio and "
            "key-loop depth refitted without the row's head configuration). 'training_gemm': a "
            "linear's forward, dX and dW GEMMs measured with PyTorch on an H100 and an H200, the "
            "fit training uses on Hopper, one linear ((n, k) pair) held out at a time.")),
        html.Div(message, className="alert", role="status") if message else None,
        dag.AgGrid(id="validation-kernels", columnDefs=COLUMNS, rowData=rows,
                   defaultColDef={"resizable": True},
                   dashGridOptions={"animateRows": False}, style={"height": "420px"},
                   className="ag-theme-alpine"),
    ])


__all__ = ["COLUMNS", "section", "table_rows"]
