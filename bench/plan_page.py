"""Server-side time of the Plan & cost page (prints figures; not a test).

Run: python bench/plan_page.py [--repeat 3]

The page's callback (``dashboard.pages.plan.update``) for the default scenario (gpt3-1t, 1T
tokens on H200, 30 days) with every strategy and with 1D only, measured in-process without HTTP
or the browser:

* cold: an empty results cache and the estimator's per-process search cache and shape spaces
  emptied (a scenario never seen, from scratch): the plan (every multiple of 8 up to the first
  window that meets the target), the Pareto frame (4 systems, at most 128 counts each) and the
  lost-node view (every count up to the planned job);
* cached: the same scenario again (a read of the page's cached outputs).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
WORK = Path(tempfile.mkdtemp(prefix="perf-bench-plan-"))
os.environ["PERF_CACHE_DIR"] = str(WORK / "import")  # never the repository's cache/

import app  # noqa: E402, F401 - the Dash app: pages register, callbacks are defined
from dashboard.controls.scenario import default_scenario  # noqa: E402
from dashboard.jobs import compute  # noqa: E402
from dashboard.pages import plan as page  # noqa: E402
from model.engine.frontier import CACHE as SEARCH_CACHE  # noqa: E402
from model.engine.search import clear_shape_spaces  # noqa: E402


def fresh(tag: str) -> None:
    """An empty results cache and empty estimator caches."""
    if compute._cache is not None:
        compute._cache.close()
    compute.CACHE_DIR = Path(tempfile.mkdtemp(prefix=f"{tag}-", dir=WORK))
    compute._cache = None
    SEARCH_CACHE.clear()
    clear_shape_spaces()


def timed(scn: dict) -> float:
    t0 = time.perf_counter()
    out = page.update(scn)
    elapsed = time.perf_counter() - t0
    if out[1]:
        raise SystemExit(f"the page says: {out[1]}")
    return elapsed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3, help="repetitions per case (default 3)")
    args = ap.parse_args()
    if args.repeat < 1:
        ap.error("--repeat must be at least 1")
    base = default_scenario()
    fresh("warmup")
    timed({**base, "strategy": "1d", "target_days": 40.0})  # imports, figure machinery
    print(f"# {base['model']} on {base['system']}, {base['budget']:g} {base['budget_kind']}, "
          f"{base['target_days']:g} days; python={platform.python_version()} "
          f"cpus={os.cpu_count()} repeat={args.repeat} (best of)")
    for strategy in ("all", "1d"):
        scn = {**base, "strategy": strategy}
        cold = []
        for i in range(args.repeat):
            fresh(f"{strategy}{i}")
            cold.append(timed(scn))
        cached = min(timed(scn) for _ in range(args.repeat))
        print(f"strategy {strategy:4s}  cold {min(cold):6.2f} s   cached {cached * 1e3:6.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
