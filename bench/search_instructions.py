"""Instructions of one search, counted by valgrind's callgrind (prints the case's figures).

Wall time on a shared 2-core machine varies by tens of per cent from run to run; a count of
instructions does not, so "no search slower than before" (issue 30) is judged on this count.
The measured call runs inside ``operator.call``, so callgrind collects only it
(``--toggle-collect``); imports and the warm-up search are not counted:

    valgrind --tool=callgrind --toggle-collect=_operator_call --callgrind-out-file=cg.out \\
        .venv/bin/python bench/search_instructions.py dense
    grep -E '^(summary|totals):' cg.out     # instructions of the measured search

Cases (those of ``bench/search_speed.py`` and ``bench/serve_speed.py``):

* ``dense``: 1D gpt3-1t on 4,096 H200 (NVLink domain 8), global batch 4,096, default model;
* ``figure``: the paper's strong-scaling sweep, 3 strategies × 13 GPU counts (4…16,384);
* ``moe``: DeepSeek-V3 on 2,048 GB200 NVL72, 1D and context with EP searched;
* ``moe_kernels``: the same with ``kernel_tables`` on (dense and expert GEMMs, router and
  attention priced by the measured kernel layer);
* ``serve``: the serving search of Llama 3 70B FP8 on 64 H200 under a 50 ms TPOT;
* ``serve_moe``: the same for DeepSeek-V3 on 64 GB200 NVL72.

Every case empties the per-process search cache before the measured call, as the wall-time
bench does. The script imports the tree it runs in (``cd`` to an older checkout to count it).
"""

from __future__ import annotations

import operator
import os
import sys
from collections.abc import Callable

sys.path.insert(0, os.getcwd())

from model import ServingWorkload, load_model, load_system, search, serve, sweep  # noqa: E402
from model.physics.strategies import STRATEGIES  # noqa: E402
from model.specs import memo  # noqa: E402
from model.studies.sweep import PAPER_GPU_COUNTS  # noqa: E402


def _cases() -> dict[str, Callable[[], object]]:
    gpt, h200 = load_model("gpt3-1t"), load_system("h200")
    dsv3, gb200 = load_model("deepseek-v3"), load_system("gb200-nvl72")
    tpot = ServingWorkload(1000, 1000, weight_precision="fp8", tpot_max_s=0.05)
    return {
        "dense": lambda: search(gpt, h200, 4096, 4096, "1d", nvs=8),
        "figure": lambda: sweep(gpt, h200, PAPER_GPU_COUNTS, 4096, STRATEGIES, nvs=8),
        "moe": lambda: sweep(dsv3, gb200, [2048], 8192),
        "moe_kernels": lambda: sweep(dsv3, gb200, [2048], 8192,
                                     execution={"kernel_tables": True}),
        "serve": lambda: serve(load_model("llama3-70b"), h200, 64, tpot),
        "serve_moe": lambda: serve(dsv3, gb200, 64, tpot),
    }


def main(case: str) -> None:
    cases = _cases()
    if case not in cases:
        raise SystemExit(f"unknown case {case!r}: {', '.join(cases)}")
    run = cases[case]
    run()  # warm-up: lazily built tables, imports inside the estimator
    memo.clear(memo.RESULTS)  # the measured search starts from scratch
    operator.call(run)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: search_instructions.py CASE (dense, figure, moe, serve, "
                         "serve_moe)")
    main(sys.argv[1])
