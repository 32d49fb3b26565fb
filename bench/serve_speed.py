"""Serving search speed: candidate layouts evaluated per second (exact, vectorized), and the
time of whole searches (docs/serving.md, "Timings").

    .venv/bin/python bench/serve_speed.py [--candidates 1000000] [--repeat 3]

Prints candidates/s of model.serving.evaluate.evaluate_candidates on a grid of random
layouts of DeepSeek-V3 (MoE, MLA, attention DP) and Llama 3 70B (dense, GQA), and the wall
time of model.serve searches.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from model import ServingWorkload, load_model, load_system, serve  # noqa: E402
from model.physics.serving_step import Engine  # noqa: E402
from model.serving.evaluate import candidates, evaluate_candidates  # noqa: E402
from model.specs.serving_stack import load_serving_stack  # noqa: E402


def grid(n: int, moe: bool, seed: int = 0):
    """n random layouts: tp, pp, ep powers of two, attention DP on half of the MoE ones,
    1-8 instances, a tenth disaggregated, batch caps 1 … 4096."""
    rng = np.random.default_rng(seed)
    tp = 2.0 ** rng.integers(0, 4, n)
    ep = np.where(moe, tp, 1.0)
    adp = moe & (rng.random(n) < 0.5) & (tp > 1)
    prefill = np.where(rng.random(n) < 0.1, rng.integers(1, 4, n), 0)
    return candidates(tp=tp, pp=2.0 ** rng.integers(0, 3, n), ep=ep, adp=adp,
                      instances=rng.integers(1, 9, n), prefill=prefill,
                      batch_cap=2.0 ** rng.integers(0, 13, n))


def rate(model: str, system: str, precision: str, n: int, repeat: int) -> tuple[float, float]:
    """(candidates per wall-clock second, per CPU second of this process): on a shared,
    oversubscribed machine the second is what one free core would do."""
    m, s = load_model(model), load_system(system)
    engine = Engine.make(m, s, ServingWorkload(1000, 1000, weight_precision=precision),
                         load_serving_stack("trtllm-1.0"))
    c = grid(n, m.moe)
    wall = cpu = np.inf
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        evaluate_candidates(engine, c)
        wall = min(wall, time.perf_counter() - start)
        cpu = min(cpu, time.process_time() - start_cpu)
    return n / wall, n / cpu


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--candidates", type=int, default=1_000_000)
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    print(f"{platform.processor() or platform.machine()}, numpy {np.__version__}")
    for model, system, precision in (("deepseek-v3", "gb200-nvl72", "nvfp4"),
                                     ("llama3-70b", "h200", "fp8")):
        wall, cpu = rate(model, system, precision, args.candidates, args.repeat)
        print(f"{model} on {system}: {wall:,.0f} candidates/s wall clock, {cpu:,.0f} per CPU "
              f"second ({args.candidates:,} offline candidates, best of {args.repeat}; load "
              f"average {os.getloadavg()[0]:.1f})")
    for model, system, gpus in (("deepseek-v3", "gb200-nvl72", 64), ("llama3-70b", "h200", 64)):
        m, s = load_model(model), load_system(system)
        wl = ServingWorkload(1000, 1000, weight_precision="fp8", tpot_max_s=0.05)
        start = time.perf_counter()
        r = serve(m, s, gpus, wl)
        wall = time.perf_counter() - start
        print(f"serve search {model} on {gpus} x {system}: {r.best['candidates']:,} candidates "
              f"in {wall * 1000:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
