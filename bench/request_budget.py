"""Memory and time of the dashboard's heavy computations per shape and per candidate: the
measurements behind the constants of ``dashboard/jobs/budget.py``.

Each case runs in a fresh process (so its peak resident memory is its own): the estimator's
search at one GPU count (top 50, as the design page's table), a sweep over GPU counts (the
scaling page) and the design heatmap's cells (chunked). Printed per case: shapes and candidates
(``model.engine.size.space_size``), wall time, peak RSS growth over the process's resident memory
before the call, and that growth per shape and per candidate.

    .venv/bin/python bench/request_budget.py
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# (kind, model overrides, gpus, global batch, strategy, nvs)
CASES = [
    ("search", {}, 4096, 4096, "summa", 8),
    ("search", {}, 16384, 4096, "1d", 8),
    ("search", {"hidden": 98304, "heads": 768, "kv_heads": 768, "layers": 7560}, 8192, 887040,
     "summa", 72),
    ("search", {"hidden": 98304, "heads": 768, "kv_heads": 768, "layers": 7560}, 887040, 887040,
     "summa", 72),
    ("search", {"hidden": 98304, "heads": 768, "kv_heads": 768, "layers": 7560}, 887040, 887040,
     "context", 72),
    ("search", {"layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8, "ffn": 14336,
                "mlp": "swiglu", "seq_len": 8192, "vocab": 128256}, 4096, 4096, "summa", 8),
    ("search", {"layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8, "ffn": 14336,
                "mlp": "swiglu", "seq_len": 8192, "vocab": 128256}, 4608, 4608, "context", 72),
    ("sweep", {}, 0, 4096, "summa", 8),
    ("sweep", {"layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8, "ffn": 14336,
               "mlp": "swiglu", "seq_len": 8192, "vocab": 128256}, 0, 4096, "context", 8),
    ("sweep", {"hidden": 98304, "heads": 768, "kv_heads": 768, "layers": 7560}, 0, 887040,
     "context", 72),
    # a mixture of experts (dashboard/jobs/budget.py): its own preset ("preset" names it)
    ("sweep", {"preset": "deepseek-v3"}, 0, 4096, "context", 8),
    ("sweep", {"preset": "deepseek-v3"}, 0, 4096, "1d", 8),
    ("design", {}, 4096, 4096, "summa", 8),
    ("design", {}, 4608, 4608, "summa", 72),
    ("design", {"layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8, "ffn": 14336,
                "mlp": "swiglu", "seq_len": 8192, "vocab": 128256}, 4608, 4608, "context", 72),
    ("design", {"hidden": 98304, "heads": 768, "kv_heads": 768, "layers": 7560}, 8192, 887040,
     "summa", 72),
    ("design", {"hidden": 98304, "heads": 768, "kv_heads": 768, "layers": 7560}, 65536, 887040,
     "summa", 72),
]

CHILD = r'''
import json, resource, sys, time
sys.path.insert(0, sys.argv[1])
import psutil
from model import load_model, load_system
from model.api import design_cells
from model.specs.execution import resolve_execution
from model.specs.modes import resolve_mode
from model.api import search
from model.api import search_counts
from model.engine.rules import Problem
from model.engine.size import space_size
from model.physics.strategies import build_strategy

kind, over, gpus, gbs, strategy, nvs = json.loads(sys.argv[2])
model = load_model(over.pop("preset", "gpt3-1t")).with_overrides(**over)
system = load_system("h200").with_overrides(nvlink_domain_size=nvs)
from model.engine.resolved import with_stack
# counted with the execution the search runs (the default stack's searched interleave), as
# dashboard/jobs/budget.py counts
ex = resolve_execution(with_stack(system, None, None, resolve_mode(None))[1])
strat = build_strategy(strategy, model, resolve_mode(None), ex)
counts = [2 ** k for k in range(2, 15)] if kind == "sweep" else [gpus]
mode = resolve_mode(None)
sizes = [space_size(Problem(model, strat, n, gbs, ex.interleave, mode.equal_pipeline_stages,
                            ex.ends_count_as_layers, nvs=nvs,
                            exact_domain_fill=mode.exact_domain_fill)) for n in counts]
shapes, candidates = sum(s for s, _ in sizes), sum(c for _, c in sizes)
before = psutil.Process().memory_info().rss
start = time.perf_counter()
if kind == "search":
    search(model, system, gpus, gbs, strategy, top_k=50)
elif kind == "sweep":
    search_counts(model, system, counts, gbs, strategy, top_k=1)
else:
    design_cells(model, system, gpus, gbs, strategy, "tp1", "pp")
wall = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"shapes": shapes, "candidates": candidates, "wall_s": wall,
                  "growth_bytes": max(peak - before, 0)}))
'''


def main() -> None:
    """Every case, or those whose model preset is named on the command line."""
    only = set(sys.argv[1:])
    print(f"{'kind':7} {'gpus':>7} {'strategy':8} {'shapes':>10} {'candidates':>11} "
          f"{'wall_s':>7} {'growth_MB':>9} {'B/shape':>8} {'B/cand':>7} {'us/cand':>7}")
    for kind, over, gpus, gbs, strategy, nvs in CASES:
        if only and over.get("preset", "gpt3-1t") not in only:
            continue
        out = subprocess.run([sys.executable, "-c", CHILD, str(ROOT),
                              json.dumps([kind, over, gpus, gbs, strategy, nvs])],
                             capture_output=True, text=True, timeout=900, check=True)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        shapes, cands = max(r["shapes"], 1), max(r["candidates"], 1)
        print(f"{kind:7} {gpus:>7} {strategy:8} {r['shapes']:>10,} {r['candidates']:>11,} "
              f"{r['wall_s']:>7.2f} {r['growth_bytes'] / 1e6:>9.0f} "
              f"{r['growth_bytes'] / shapes:>8.0f} {r['growth_bytes'] / cands:>7.0f} "
              f"{1e6 * r['wall_s'] / cands:>7.2f}")


if __name__ == "__main__":
    main()
