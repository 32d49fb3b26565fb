"""Calculon's Study 5 reproduced: system co-design of HBM and DDR5 offload memory under a fixed
$125M budget (Isaev et al., SC23, Table 3); prints the timing and our table beside Calculon's.
Not a test.

Run: python bench/study5.py [--markdown]

The same as the command line::

    python -m model codesign --model gpt3-175b,turing-530b,megatron-1t \\
        --system bench/study5/h100-ddr.json --budget-usd 125e6 \\
        --vary hbm_capacity_gb=20,40,80,120 --vary host_memory_gb=0,256,512,1024 \\
        --prices bench/study5/prices.json --global-batch 1536,2520,3072 --json

48 rows (3 models x 16 designs), every cluster size (multiples of 8 GPUs) up to what each design's
price allows, offload searched where a design has DDR5. From scratch: the per-process search
cache and the remembered shape spaces are emptied first. Target: under 60 s.

Assumptions where Study 5 publishes none (bench/study5/): the h100 preset (calibrated
Megatron-Bridge efficiencies, NVML HBM sizes replaced by the design's); DDR5 at 100 GB/s per GPU
(Calculon's Study 4); global batches 1536 / 2520 / 3072 (Narayanan et al. 2021's runs of these
models; Calculon's README runs turing-530B with a largest batch of 2520).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from model import load_model, load_system  # noqa: E402
from model.api import codesign  # noqa: E402
from model.engine.frontier import CACHE  # noqa: E402
from model.engine.variant import clear_shape_spaces  # noqa: E402

STUDY = HERE / "study5"
MODELS = (("gpt3-175b", 1536), ("turing-530b", 2520), ("megatron-1t", 3072))
VARY = {"hbm_capacity_gb": [20, 40, 80, 120], "host_memory_gb": [0, 256, 512, 1024]}
BUDGET_USD = 125e6
TARGET_S = 60.0
SHORT = {"gpt3-175b": "175B", "turing-530b": "530B", "megatron-1t": "1T"}


def run() -> tuple[object, float]:
    CACHE.clear()
    clear_shape_spaces()
    start = time.perf_counter()
    res = codesign([load_model(m) for m, _ in MODELS], load_system(str(STUDY / "h100-ddr.json")),
                   BUDGET_USD, VARY, str(STUDY / "prices.json"), [b for _, b in MODELS])
    return res, time.perf_counter() - start


def side_by_side(rows, calculon: list[dict]) -> list[dict]:
    """One line per (design, model): ours and Calculon's GPUs, samples/s, per $100M."""
    theirs = {(r["model"], r["hbm_capacity_gb"], r["host_memory_gb"]): r for r in calculon}
    out = []
    for _, r in rows.iterrows():
        c = theirs[(r["model"], float(r["hbm_capacity_gb"]), float(r["host_memory_gb"]))]
        out.append({"model": SHORT[r["model"]], "hbm": int(r["hbm_capacity_gb"]),
                    "ddr": int(r["host_memory_gb"]), "price": r["price_per_gpu_usd"],
                    "max_gpus": int(r["max_gpus"]), "c_max": c["max_gpus"],
                    "gpus": int(r["gpus"]), "c_gpus": c["gpus"],
                    "perf": r["samples_per_s"], "c_perf": c["samples_per_s"],
                    "per100m": 100 * r["samples_per_s_per_musd"],
                    "c_per100m": c["perf_per_100musd"], "best": bool(r["best"]),
                    "config": f"tp{int(r['tp1'])} pp{int(r['pp'])} dp{int(r['dp'])} "
                              f"mb{int(r['microbatch'])} {r['recompute']}"
                              f"{'' if r['offload'] == 'none' else ' off:' + r['offload']}"
                    if r["gpus"] else "-"})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--markdown", action="store_true", help="print the README's table")
    args = ap.parse_args()
    calculon = json.loads((STUDY / "calculon_table3.json").read_text(encoding="utf-8"))["rows"]
    res, wall = run()
    lines = side_by_side(res.rows, calculon)
    print(f"# python={platform.python_version()} cpus={os.cpu_count()}: {len(res.rows)} rows "
          f"(models x designs) in {wall:.1f} s from scratch; target under {TARGET_S:g} s: "
          f"{'PASS' if wall < TARGET_S else 'FAIL'}")
    if args.markdown:
        print("| model | HBM GB | DDR GB | $/GPU | max GPUs | GPUs ours / Calculon | samples/s "
              "ours / Calculon | per $100M ours / Calculon | our configuration |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
        for x in lines:
            star = " **best**" if x["best"] else ""
            print(f"| {x['model']} | {x['hbm']} | {x['ddr']} | {x['price'] / 1e3:g}k | "
                  f"{x['max_gpus']} | {x['gpus']} / {x['c_gpus']} | {x['perf']:.0f} / "
                  f"{x['c_perf']:.0f} | {x['per100m']:.0f} / {x['c_per100m']:.0f} | "
                  f"{x['config']}{star} |")
        return
    print(f"{'model':5s} {'HBM':>4s} {'DDR':>5s} {'$/GPU':>7s} {'max':>5s} {'GPUs':>5s} "
          f"{'Calc':>5s} {'samp/s':>7s} {'Calc':>6s} {'/$100M':>7s} {'Calc':>5s}  config")
    for x in lines:
        print(f"{x['model']:5s} {x['hbm']:4d} {x['ddr']:5d} {x['price']:7.0f} "
              f"{x['max_gpus']:5d} {x['gpus']:5d} {x['c_gpus']:5d} {x['perf']:7.1f} "
              f"{x['c_perf']:6.0f} {x['per100m']:7.1f} {x['c_per100m']:5.0f}  {x['config']}"
              f"{'  <- best' if x['best'] else ''}")


if __name__ == "__main__":
    main()
