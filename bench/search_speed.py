"""Search speed: candidates evaluated per second and wall time (prints figures; not a test).

Run: python bench/search_speed.py [--repeat 15] [--mode paper|default]

Cases (issue 2): 1D gpt3-1t at 4096 GPUs; SUMMA vit-era5 at 4096 GPUs; and the paper's whole
strong-scaling figure for one system (3 strategies × 13 GPU counts, 4…16384, gpt3-1t on H200 with
an NVLink domain of 8). Issue 14: DeepSeek-V3 on 2,048 GB200 NVL72 GPUs, every strategy that
models it (1D and context; SUMMA has no MoE table) with EP and ETP searched, in the default
model with the newest stack's defaults (every interleaving, the fewest recomputed layers).
Each case reports the best of ``--repeat`` runs after one warm-up. The machine's BLAS threads
are irrelevant (no BLAS is used); the process is single-threaded. The
estimator's per-process search cache (``model.engine.frontier``) and its remembered shape spaces
(``model.engine.search``) are emptied before every run, so each run is a search from scratch
(pruned: only the candidates that can be among the best are priced; every candidate is counted).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from model import load_model, load_system, search, sweep  # noqa: E402
from model.physics.strategies import STRATEGIES  # noqa: E402
from model.specs import memo  # noqa: E402
from model.studies.sweep import PAPER_GPU_COUNTS  # noqa: E402


def best_time(fn, repeat: int) -> tuple[float, int]:
    """(best wall seconds of ``repeat`` runs of ``fn`` after a warm-up, each from an empty
    search cache; the count ``fn`` returns)."""
    fn()  # warm-up: imports, lazily built tables
    best, count = float("inf"), 0
    for _ in range(repeat):
        memo.clear(memo.RESULTS)  # a search from scratch: no searches, no shape spaces
        start = time.perf_counter()
        count = fn()
        best = min(best, time.perf_counter() - start)
    return best, count


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--mode", "--compat", dest="mode", choices=("paper", "default"),
                    default="paper")  # --compat: the old name
    args = ap.parse_args()
    mode = "paper" if args.mode == "paper" else None
    system = "paper-h200" if mode else "h200"
    gpt, vit, h200 = load_model("gpt3-1t"), load_model("vit-era5"), load_system(system)

    def one(model, strategy, gpus):
        return lambda: search(model, h200, gpus, 4096, strategy, mode=mode, nvs=8).candidates

    def figure():  # model.studies.sweep: one batched evaluation per strategy over the 13 GPU counts
        results = sweep(gpt, h200, PAPER_GPU_COUNTS, 4096, STRATEGIES, mode=mode, nvs=8)
        return sum(r.candidates for r in results)

    dsv3, gb200 = load_model("deepseek-v3"), load_system("gb200-nvl72")

    def moe():  # the default model and stack whatever --mode says: the paper has no MoE
        results = sweep(dsv3, gb200, [2048], 8192)
        return sum(r.candidates for r in results)

    cases = [("1D gpt3-1t, 4096 GPUs", one(gpt, "1d", 4096)),
             ("SUMMA vit-era5, 4096 GPUs", one(vit, "summa", 4096)),
             ("whole figure: gpt3-1t, 3 strategies x 13 GPU counts", figure),
             ("DeepSeek-V3, 2048 GB200, 1d + context, EP searched", moe)]
    print(f"# model={args.mode} system={system} nvs=8 python={platform.python_version()} "
          f"cpus={os.cpu_count()} repeat={args.repeat} (best of)")
    print(f"{'case':55s} {'candidates':>11s} {'wall_ms':>8s} {'candidates/s':>13s}")
    for name, fn in cases:
        wall, count = best_time(fn, args.repeat)
        print(f"{name:55s} {count:11,d} {wall * 1e3:8.1f} {count / wall:13,.0f}")


if __name__ == "__main__":
    main()
