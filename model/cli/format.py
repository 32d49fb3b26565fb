"""Output of the command line (:mod:`model.cli`): readable tables (the ``--json`` objects are
:mod:`model.cli.plain_json`'s).

Nothing here computes a result; every number comes from a
:class:`~model.engine.search.SearchResult` or an :class:`~model.engine.search.Evaluation`
(columns described in :mod:`model.engine.report`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from model.cli import numbers
from model.cli.plain_json import BREAKDOWN, MEMORY, fits_json, with_cp
from model.engine.search import Evaluation, SearchResult
from model.specs.conformal import COVERAGE
from model.specs.execution_variants import CHOICES as EXECUTION_COLUMNS
from model.validation.error_bars import ErrorBar

PLACEMENT_KEYS = ("nv_tp1", "nv_tp2", "nv_dp", "nv_pp")
MS_COLUMNS = (("fwd ms", "t_fwd_s"), ("bwd ms", "t_bwd_s"), ("comm ms", "t_comm_s"),
              ("mem-exposed ms", "t_memory_exposed_s"))
PLACEMENT_LEGEND = ("placement = GPUs of one NVLink domain along tp1 x tp2 x dp x pp "
                    "(context: tp1 x cp x dp x pp)")
MORE_GPUS_HINT = "hint: nothing fits in HBM; try more GPUs (--gpus)"
EXECUTION_LABELS = {"recompute": "recompute", "recompute_layers": "rc layers",
                    "interleave": "V", "zero": "ZeRO", "precision": "precision",
                    "tp_overlap": "TP overlap", "offload": "offload",
                    "sequence_parallel": "SP", "flash_attention": "flash",
                    "fp32_gradients": "fp32 grads", "context_attention": "CP attention",
                    "fp8_param_gather": "FP8 gather"}


def placement(row: pd.Series) -> str:
    """GPUs of one NVLink domain along tp1 x tp2 (cp for context) x dp x pp."""
    return "x".join(str(int(row[k])) for k in PLACEMENT_KEYS)


def config_line(row: pd.Series) -> str:
    experts = (f", ep {int(row['ep'])} · etp {int(row['etp'])}"
               if int(row.get("ep", 1)) * int(row.get("etp", 1)) > 1 else "")
    second = "cp" if row.get("strategy") == "context" else "tp2"
    return (f"dp {int(row['dp'])} · tp1 {int(row['tp1'])} · {second} {int(row['tp2'])} · "
            f"pp {int(row['pp'])}{experts}, microbatch {int(row['microbatch'])}, "
            f"nb {int(row['nb'])}, placement {placement(row)}")


def breakdown_line(row: pd.Series) -> str:
    parts = ", ".join(f"{name.replace('_', ' ')} {row[col]:.3f}" for name, col in BREAKDOWN)
    return f"time per iteration {row['iteration_time_s']:.3f} s = {parts}"


def memory_line(row: pd.Series) -> str:
    parts = ", ".join(f"{name} {row[col]:.2f}" for name, col in MEMORY)
    return f"memory {row['memory_gb']:.2f} of {row['hbm_capacity_gb']:g} GB per GPU = {parts}"


def days_text(row: pd.Series) -> str:
    """Days to train the model's budget, or per 1T tokens when it has none."""
    per_1t = f"{row['days_per_1t_tokens']:.3g} days per 1T tokens"
    if math.isfinite(float(row["train_days"])):
        return f"{row['train_days']:.1f} days to train ({per_1t})"
    return f"{per_1t} (no training budget)"


def throughput_line(row: pd.Series) -> str:
    return (f"{row['samples_per_s']:.4g} samples/s, {row['tokens_per_s']:,.0f} tokens/s, "
            f"{days_text(row)}, MFU {100 * row['mfu']:.1f}% of the {row['precision']} peak "
            f"{row['mfu_peak_tflops']:g} TFLOP/s")


def money(usd: float) -> str:
    """Dollars as every output writes them (:func:`model.cli.numbers.money`)."""
    return numbers.money(usd)


def cost_line(row: pd.Series) -> str:
    """GPU-hours, cost, energy and the days with failures of a row (NaN: no budget or price)."""
    if not math.isfinite(float(row["train_days"])):
        return "cost: no training budget"
    interval = float(row["checkpoint_interval_s"])
    every = (f", a checkpoint every {interval / 60:.0f} min" if math.isfinite(interval)
             else "")
    energy = float(row["energy_mwh"])
    mwh = f"{energy:,.0f} MWh" if math.isfinite(energy) else "energy unknown"
    return (f"cost: {row['gpu_hours']:,.0f} GPU-hours, {money(float(row['cost_usd']))} "
            f"({row['pricing']}), {mwh}; {row['train_days_with_failures']:.1f} days with "
            f"failures{every}")


def execution_line(row: pd.Series) -> str:
    """Every execution choice of a row (model.execution.COLUMNS)."""
    return "execution: " + ", ".join(
        f"{k} {('on' if v else 'off') if isinstance(v, (bool, np.bool_)) else v}"
        for k, v in ((k, row[k]) for k in EXECUTION_COLUMNS))


def range_line(row: pd.Series, bar: ErrorBar) -> str:
    """The row's iteration time and throughput as ranges, and where the error bar comes from;
    'not validated' and why when no run of its population was scored."""
    if not bar.validated:
        return f"range: none, {bar.text}"
    t_lo, t_hi = bar.time_range(float(row["iteration_time_s"]))
    r_lo, r_hi = bar.rate_range(float(row["samples_per_s"]))
    return (f"range: {t_lo:.3f}–{t_hi:.3f} s per iteration, {r_lo:.4g}–{r_hi:.4g} samples/s: "
            f"{bar.text}")


def _second_axes(top: pd.DataFrame) -> dict[str, Any]:
    """The tp2 and cp columns of a top table: only those its strategies have."""
    named = with_cp(top)
    strategies = set(top["strategy"])
    keep = ["tp2"] if strategies - {"context"} else []
    keep += ["cp"] if "context" in strategies else []
    return {k: named[k].to_numpy() for k in keep}


def top_table(top: pd.DataFrame, states: list[str] | None = None) -> str:
    """The top configurations, one line each: the configuration, every execution choice that
    differs between the rows, and the key results; ``states`` ("fits" | "tight" per row:
    :func:`fits_json`) marks the tight rows' memory "tight"."""
    no_budget = not np.isfinite(top["train_days"].to_numpy(dtype=float)).any()
    days = ("days/1T tokens", "days_per_1t_tokens") if no_budget else ("days", "train_days")
    table = pd.DataFrame({
        "rank": range(1, len(top) + 1),
        "samples/s": top["samples_per_s"].map(lambda v: f"{v:.4g}"),
        days[0]: top[days[1]].map(lambda v: f"{v:.3g}" if no_budget else f"{v:.1f}"),
        "dp": top["dp"], "tp1": top["tp1"], **_second_axes(top), "pp": top["pp"],
        "mb": top["microbatch"], "nb": top["nb"],
        "placement": [placement(row) for _, row in top.iterrows()],
    })
    for col in EXECUTION_COLUMNS:  # the choices that tell rows apart
        if top[col].nunique() > 1:
            table[EXECUTION_LABELS.get(col, col)] = top[col].to_numpy()
    marks = [" tight" if s == "tight" else "" for s in (states or [""] * len(top))]
    table["memory GB"] = [f"{v:.1f}{m}" for v, m in zip(top["memory_gb"], marks, strict=True)]
    table["MFU"] = top["mfu"].map(lambda v: f"{100 * v:.1f}%").to_numpy()
    return table.to_string(index=False)


def format_search(res: SearchResult, reason: str | None,
                  command: Callable[[pd.Series], str] | None = None,
                  bar: ErrorBar | None = None, usable_gb: float | None = None) -> str:
    """One search: counts, the best configuration with its breakdown, and the top table."""
    where = (f"at most {res.max_gpus} GPUs (the best uses {res.gpus})"
             if res.max_gpus is not None else f"{res.gpus} GPUs")
    head = (f"== {res.strategy} on {where}: {res.candidates:,} candidates, "
            f"{res.feasible:,} fit in HBM ({res.elapsed_s:.2f} s) ==")
    if res.candidates == 0:
        return f"{head}\nno valid configuration: {reason or 'none matches the inputs'}"
    best = res.best
    if best is None:
        return f"{head}\nno configuration fits in HBM"
    lines = [head, f"best: {throughput_line(best)}"]
    if bar is not None:
        lines.append(f"      {range_line(best, bar)}")
    lines += [f"      {config_line(best)}",
              f"      {execution_line(best)}", f"      {cost_line(best)}",
             f"      {breakdown_line(best)}", f"      {memory_line(best)}"
              + tight_note(best, usable_gb, bar)]
    if command is not None:
        lines.append(f"      reproduce: {command(best)}")
    states = ([fits_json(row, usable_gb, bar.coverage if bar else COVERAGE)["fits"]
               for _, row in res.top.iterrows()] if usable_gb is not None else None)
    lines += [f"top {len(res.top)}:", top_table(res.top, states)]
    if states and "tight" in states:
        lines.append(TIGHT_LEGEND)
    return "\n".join(lines)


TIGHT_LEGEND = ("tight: may not fit: the memory model's interval holds the usable HBM "
                "(kept and ranked by throughput, not dropped)")


def tight_note(row: pd.Series, usable_gb: float | None, bar: ErrorBar | None) -> str:
    """'; tight: may not fit: X ± Y GB of Z' for a row within the memory interval of the
    limit, else ''."""
    if usable_gb is None:
        return ""
    state = fits_json(row, usable_gb, bar.coverage if bar else COVERAGE)
    return f"; tight: {state['fits_text']}" if state["fits"] == "tight" else ""


def format_search_report(results: list[SearchResult], reasons: list[str | None],
                         title: str, command: Callable[[pd.Series], str] | None = None,
                         bars: dict[str, ErrorBar] | None = None,
                         usable_gb: float | None = None) -> str:
    """The whole text output of ``search``: what was searched, then each search (with its
    strategy's error bar, ``bars[strategy]``)."""
    searched = f"searched {results[0].searched}" if results and results[0].executions else ""
    blocks = [title + (f"\n{searched}" if searched else "")]
    blocks += [format_search(r, why, command, bars.get(r.strategy) if bars else None,
                             usable_gb)
               for r, why in zip(results, reasons, strict=True)]
    if all(r.feasible == 0 for r in results) and any(r.candidates for r in results):
        blocks.append(MORE_GPUS_HINT)
    else:
        blocks.append(PLACEMENT_LEGEND)
    return "\n\n".join(blocks)


def op_table(ops: pd.DataFrame) -> str:
    """The per-op breakdown with its key columns, times in ms per microbatch."""
    if ops.empty:
        return "(no ops)"
    table = ops[["where", "op", "kind"]].copy()
    for label, col in MS_COLUMNS:
        table[label] = ops[col] * 1e3
    table["bound"] = ops["bound"]
    table["FLOP/byte"] = ops["intensity_flop_per_byte"]
    table["iteration s"] = ops["t_iteration_s"]
    return table.to_string(index=False, float_format=lambda v: f"{v:.4g}")


def format_evaluation(ev: Evaluation, title: str, bar: ErrorBar | None = None,
                      usable_gb: float | None = None) -> str:
    """One configuration: summary lines, then the per-op table."""
    row = ev.row
    fits = "fits in HBM" if ev.fits else "does NOT fit in HBM"
    if usable_gb is not None:
        state = fits_json(row, usable_gb, bar.coverage if bar else COVERAGE)
        fits = {"fits": "fits in HBM", "tight": "tight in HBM",
                "no": "does NOT fit in HBM"}[state["fits"]] + f" ({state['fits_text']})"
    lines = [
        title,
        f"config: {config_line(row)}",
        f"        {int(row['n_microbatches'])} microbatches per iteration, "
        f"{int(row['layers_per_stage'])} layers per stage",
        f"{fits}: {memory_line(row)}",
        execution_line(row),
        f"throughput: {throughput_line(row)}, {row['tflops_per_gpu']:.1f} TFLOP/s per GPU",
        *([range_line(row, bar)] if bar is not None else []),
        cost_line(row),
        breakdown_line(row),
        "",
        "per op (ms: one microbatch, forward and backward; iteration s: the op's share of one"
        " iteration on the slowest stage):",
        op_table(ev.ops),
        "",
        PLACEMENT_LEGEND,
    ]
    return "\n".join(lines)


# --- evaluate --explain --------------------------------------------------------------------------
KERNEL_HEADING = ("per op kernel (ms: one microbatch, collectives left out; FLOP eff: the time its "
                  "FLOPs take at peak,\nmatrix FLOPs at the matrix peak of the precision it "
                  "runs in, vector FLOPs at the vector peak, over\nits kernel time; HBM eff: its "
                  "HBM bytes / kernel time / the nominal HBM bandwidth):")


def kernel_table(ops: pd.DataFrame) -> str:
    """Each op's kernel time per direction (ms per microbatch) and the fractions of the peaks
    it implies (:mod:`model.engine.kernel_report`), as percentages."""
    if ops.empty:
        return "(no ops)"
    table = ops[["where", "op", "kind", "bound"]].copy()
    for way in ("fwd", "bwd"):
        table[f"{way} kernel ms"] = (ops[f"kernel_time_{way}_s"] * 1e3).map(lambda v: f"{v:.4g}")
        for label, col in (("FLOP", "implied_flop_efficiency"), ("HBM", "implied_hbm_efficiency")):
            table[f"{way} {label} eff"] = ops[f"{col}_{way}"].map(
                lambda v: f"{100 * v:.1f}%" if math.isfinite(v) else "-")
    table["matrix peak TFLOP/s"] = ops["matrix_peak_tflops"].map(lambda v: f"{v:.4g}")
    return table.to_string(index=False)


def kernel_report(ops: pd.DataFrame) -> str:
    """What ``evaluate --explain`` adds after the evaluation: its heading and
    :func:`kernel_table`."""
    return f"{KERNEL_HEADING}\n{kernel_table(ops)}"
