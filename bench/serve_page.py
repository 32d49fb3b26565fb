"""The Serving page's callback time (dashboard/pages/serve_page.py: update), p50 and p95 over
varied forms and hardware what-ifs, the target p95 < 300 ms (docs/serving.md, "Timings").

    .venv/bin/python bench/serve_page.py [--runs 60]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("PERF_CACHE_DIR", tempfile.mkdtemp(prefix="perf-serve-bench-"))

import app  # noqa: E402, F401 - registers the pages
from dashboard.controls import presets as PR  # noqa: E402
from dashboard.controls import scenario as S  # noqa: E402
from dashboard.pages import serve_page as page  # noqa: E402
from dashboard.views.serve_view import CARDS, DEFAULT_FORM  # noqa: E402

CASES = (("llama3-70b", "h200"), ("llama3-8b", "h100"), ("deepseek-v3", "gb200-nvl72"),
         ("qwen3-235b-a22b", "b200"))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--runs", type=int, default=60)
    args = p.parse_args()
    rng = np.random.default_rng(0)
    times, cpu = [], []
    for i in range(args.runs):
        model, system = CASES[i % len(CASES)]
        scn = {**S.default_scenario(), **PR.model_values(model), "model": model,
               **PR.system_values(system), "system": system}
        scn["hbm_tb_per_s"] = scn["hbm_tb_per_s"] * float(rng.uniform(0.8, 1.5))
        mode = ("offline", "concurrency", "request-rate")[i % 3]
        form = {**DEFAULT_FORM, "gpus": int(rng.choice([8, 16, 32])), "mode": mode,
                "load": float(rng.integers(8, 512)) if mode != "offline" else None,
                "precision": "nvfp4" if system.startswith(("b", "gb")) else "fp8"}
        if mode == "concurrency":
            form["load"] = int(form["load"])
        start, start_cpu = time.perf_counter(), time.process_time()
        out = page.update(scn, *(form[k] for k in page.FORM_KEYS))
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
        assert out[len(CARDS) + 1] == "", out[len(CARDS) + 1]
    for label, values in (("wall clock", times), ("CPU time", cpu)):
        ms = np.array(values) * 1e3
        print(f"serving page callback over {args.runs} runs, {label}: p50 "
              f"{np.percentile(ms, 50):.0f} ms, p95 {np.percentile(ms, 95):.0f} ms, max "
              f"{ms.max():.0f} ms")
    print(f"load average {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
