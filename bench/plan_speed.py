"""Speed of `plan` (the fewest GPUs within D days, the fastest within a budget): prints figures;
not a test.

Run: python bench/plan_speed.py [--repeat 5]

Each case is a plan as ``tperf plan`` asks it (the production strategies; failures counted
unless the case says otherwise; days are those with failures) from scratch — the per-process
search cache and the remembered shape spaces are emptied before every run — timed in-process
(best and median of ``--repeat`` runs after a warm-up), then the whole command
(`python -m model plan ... --json`, a new process: imports included) once. Target: under 2 s.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from model import load_model, load_system  # noqa: E402
from model.api import plan  # noqa: E402
from model.engine.frontier import CACHE  # noqa: E402
from model.engine.variant import clear_shape_spaces  # noqa: E402
from model.studies.plan import plan_strategies  # noqa: E402

TARGET_S = 2.0
# (label, model, tokens, system, global batch, plan keywords)
CASES = (
    ("gpt3-1t, 10T tokens, B200, 30 days, batch 4096", "gpt3-1t", 1e13, "b200", 4096,
     {"days": 30.0}),
    ("gpt3-1t, 10T tokens, B200, 30 days, batch 8192", "gpt3-1t", 1e13, "b200", 8192,
     {"days": 30.0}),
    ("megatron-1t, 10T tokens, B200, 30 days, batch 8192", "megatron-1t", 1e13, "b200", 8192,
     {"days": 30.0}),
    ("gpt3-1t, 10T tokens, GB200 NVL72, 30 days w/o failures", "gpt3-1t", 1e13, "gb200-nvl72",
     8192, {"days": 30.0, "failures": False}),
    ("gpt3-175b, 300B tokens, H100, fastest within $2M", "gpt3-175b", 3e11, "h100", 1536,
     {"budget_usd": 2e6}),
)


def _argv(model: str, tokens: float, system: str, gbs: int, kw: dict) -> list[str]:
    argv = ["plan", "--model", model, "--tokens", format(tokens, "g"), "--system", system,
            "--global-batch", str(gbs), "--json"]
    if "days" in kw:
        argv += ["--days", str(kw["days"])]
    if "budget_usd" in kw:
        argv += ["--budget-usd", format(kw["budget_usd"], "g")]
    if kw.get("failures") is False:
        argv.append("--no-with-failures")
    return argv


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    print(f"# python={platform.python_version()} cpus={os.cpu_count()} repeat={args.repeat} "
          f"(in-process: best / median of runs from scratch; command: one new process)")
    print(f"{'case':55s} {'gpus':>7s} {'days':>6s} {'best_s':>7s} {'median_s':>8s} "
          f"{'command_s':>9s}")
    worst, worst_command = 0.0, 0.0
    for label, name, tokens, system, gbs, kw in CASES:
        m, s = load_model(name, tokens=tokens), load_system(system)
        kw = {"strategy": plan_strategies(m), **kw}  # as the command: the production strategies
        plan(m, s, gbs, **kw)  # warm-up: imports, lazily built tables
        times = []
        for _ in range(args.repeat):
            CACHE.clear()
            clear_shape_spaces()
            start = time.perf_counter()
            res = plan(m, s, gbs, **kw)
            times.append(time.perf_counter() - start)
        start = time.perf_counter()
        out = subprocess.run([sys.executable, "-m", "model", *_argv(name, tokens, system, gbs,
                                                                     kw)],
                             cwd=ROOT, capture_output=True, text=True)
        command = time.perf_counter() - start
        if res.row is None:  # no count meets the target: the command says so (exit 2)
            assert out.returncode == 2, out.stderr
            gpus, days = "none", float("nan")
        else:
            assert json.loads(out.stdout)["gpus"] == res.gpus  # the command answers the same
            gpus, days = f"{res.gpus:d}", res.summary()["days_with_failures"]
        worst, worst_command = max(worst, max(times)), max(worst_command, command)
        print(f"{label:55s} {gpus:>7s} {days:6.1f} {min(times):7.2f} "
              f"{statistics.median(times):8.2f} {command:9.2f}")
    def verdict(t: float) -> str:
        return "PASS" if t < TARGET_S else "FAIL"
    print(f"# target: every plan under {TARGET_S:g} s — in-process, slowest run {worst:.2f} s: "
          f"{verdict(worst)}; whole command (a new Python process, imports included), slowest "
          f"{worst_command:.2f} s: {verdict(worst_command)}")


if __name__ == "__main__":
    main()
