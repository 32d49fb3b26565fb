"""Figure building speed: median milliseconds of each dashboard figure builder (not a test).

Run: python bench/figure_speed.py [--repeat 20] [--presentation]

Inputs are the dashboard's default scenario, built with the model API (no Dash, no cache):

* scaling views: ``best_frame(sweep(...))`` of gpt3-1t on H200 with an NVLink domain of 8,
  3 strategies × 13 GPU counts (4…16384), global batch 4096;
* design heatmap: ``best_per_cell(design_space(...), "tp1", "pp")`` at 4096 GPUs, SUMMA;
* per-op views: ``evaluate(...).ops`` of 1D TP, tp1=8, pp=16, dp=32, microbatch 1 at 4096 GPUs;
* systems: A100, H200, B200 × NVLink domains 4, 8, 64 on the same GPU counts (9 lines);
* HBM map: the HBM page's default grid, 8 capacities (40…400 GB) × 8 bandwidths (1…16 TB/s),
  best training days over the strategies at 4096 GPUs.

Each builder is called once (warm-up), then ``--repeat`` times; the median is reported against
its target: 12 ms for the scaling page's five figures, 15 ms for the others.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import plotly  # noqa: E402

from dashboard import figures  # noqa: E402
from model import (  # noqa: E402
    best_per_cell,
    design_space,
    evaluate,
    load_model,
    load_system,
    sweep,
)
from model.studies.sweep import best_frame  # noqa: E402

MODEL, SYSTEM, NVS, BATCH, GPUS = "gpt3-1t", "h200", 8, 4096, 4096
COUNTS = [2 ** k for k in range(2, 15)]  # 4 … 16384
COMPARE = (("a100", "b200", "h200"), (4, 8, 64))
HBM_CAPS = np.linspace(40.0, 400.0, 8)  # GB
HBM_BWS = np.linspace(1.0, 16.0, 8)  # TB/s
SCALING_TARGET_MS, OTHER_TARGET_MS = 12.0, 15.0


def inputs() -> dict[str, object]:
    """The default scenario's frames, from the model."""
    model, system = load_model(MODEL), load_system(SYSTEM, nvlink_domain_size=NVS)
    scaling = best_frame(sweep(model, system, COUNTS, BATCH))
    cells = best_per_cell(design_space(model, system, GPUS, BATCH, "summa"), "tp1", "pp")
    ops = evaluate(model, system, GPUS, BATCH, "1d", tp1=8, pp=16, dp=32, microbatch=1).ops
    frames = []
    for name in COMPARE[0]:
        for nvs in COMPARE[1]:
            best = best_frame(sweep(model, load_system(name), COUNTS, BATCH, nvs=nvs))
            best.insert(0, "system", f"{name.upper()} · NVS {nvs}")
            frames.append(best)
    rows = []
    for cap in HBM_CAPS:
        for bw in HBM_BWS:
            s = system.with_overrides(hbm_capacity_gb=float(cap),
                                      hbm_bandwidth_gb_per_s=float(bw) * 1000.0)
            best = best_frame(sweep(model, s, [GPUS], BATCH))
            days = float(best["train_days"].min()) if not best.empty else np.nan
            rows.append({"hbm_capacity_gb": float(cap),
                         "hbm_bandwidth_gb_per_s": float(bw) * 1000.0, "train_days": days})
    return {"system": system, "scaling": scaling, "cells": cells, "ops": ops,
            "systems": pd.concat(frames, ignore_index=True), "hbm": pd.DataFrame(rows)}


def builders(data: dict, presentation: bool) -> dict[str, tuple[Callable[[], object], float]]:
    """name → (a call building the figure, target median in ms)."""
    sc, system, p = data["scaling"], data["system"], presentation
    scaling = {
        "training_time_figure": lambda: figures.training_time_figure(sc, presentation=p),
        "time_breakdown_figure": lambda: figures.time_breakdown_figure(sc, presentation=p),
        "memory_figure": lambda: figures.memory_figure(sc, system.hbm_capacity_gb,
                                                       presentation=p),
        "optimal_config_figure": lambda: figures.optimal_config_figure(sc, presentation=p),
        "efficiency_figure": lambda: figures.efficiency_figure(sc, presentation=p),
    }
    other = {
        "heatmap_figure": lambda: figures.heatmap_figure(data["cells"], "tp1", "pp",
                                                         presentation=p),
        "roofline_figure": lambda: figures.roofline_figure(
            data["ops"], system.matrix_tflops_fp16, system.vector_tflops_fp16,
            system.hbm_bandwidth_gb_per_s, presentation=p),
        "ops_breakdown_figure": lambda: figures.ops_breakdown_figure(data["ops"],
                                                                     presentation=p),
        "systems_figure": lambda: figures.systems_figure(data["systems"], presentation=p),
        "hbm_contour_figure": lambda: figures.hbm_contour_figure(data["hbm"], presentation=p),
        "empty_figure": lambda: figures.empty_figure("nothing to show", presentation=p),
    }
    return ({k: (f, SCALING_TARGET_MS) for k, f in scaling.items()}
            | {k: (f, OTHER_TARGET_MS) for k, f in other.items()})


def median_ms(fn: Callable[[], object], repeat: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--presentation", action="store_true", help="fonts ×1.5 (slides)")
    args = ap.parse_args()
    print(f"python {platform.python_version()}, plotly {plotly.__version__}, "
          f"{platform.machine()}, median of {args.repeat} after a warm-up"
          + (", presentation mode" if args.presentation else ""))
    data = inputs()
    print(f"inputs: scaling {len(data['scaling'])} rows, design cells {len(data['cells'])}, "
          f"ops {len(data['ops'])}, systems {len(data['systems'])}, HBM grid {len(data['hbm'])}")
    print(f"{'builder':<24}{'median ms':>10}{'target':>8}")
    total_scaling, failed = 0.0, []
    for name, (fn, target) in builders(data, args.presentation).items():
        ms = median_ms(fn, args.repeat)
        if target == SCALING_TARGET_MS:
            total_scaling += ms
        ok = ms < target
        failed += [] if ok else [name]
        print(f"{name:<24}{ms:>10.1f}{target:>8.0f}  {'ok' if ok else 'SLOW'}")
    print(f"{'scaling page (5 figures)':<24}{total_scaling:>10.1f}")
    print("all within target" if not failed else f"over target: {', '.join(failed)}")


if __name__ == "__main__":
    main()
