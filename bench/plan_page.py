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

With ``--http`` (issue 29): the page's callback over HTTP as the browser calls it (a POST to
``/_dash-update-component`` through Flask's test client: the request checks, Dash's dispatch
and the JSON of the answer, without a socket; a background callback's job polled every
500 ms until it answers, as the renderer polls it: the page before issue 29), p50/p95 of
``--repeat`` requests each:

* Plan, cached: the callback the scenario store triggers (``show``) for a scenario answered
  before; the Scaling page's callback for its cached default beside it, the goal;
* Plan, new target: a target never planned before each time (30.01, 30.02, … days), the
  estimator's search cache kept warm as a running server's is (the counts already searched are
  reused); new dense: a PUE never seen (1.301, 1.302, …: the plan and its stages again, the
  estimator's per-process search cache warm: its searches are reused, the fewest recomputed
  layers' too since issue 29); new model: 8, 16, … layers fewer (a model never searched:
  every count searched from scratch). A request answers within its wall deadline
  (``planner.QUICK_WALL_S``) or hands the plan to the job: its time is then the deadline's;
* Plan, new MoE plan (``--moe``, once): DeepSeek-V3's plan in stages, in-process (the job's
  work), its peak memory growth and the request that hands it to the job.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
WORK = Path(tempfile.mkdtemp(prefix="perf-bench-plan-"))
os.environ["PERF_CACHE_DIR"] = str(WORK / "import")  # never the repository's cache/

import app  # noqa: E402, F401 - the Dash app: pages register, callbacks are defined
from dashboard.controls.presets import model_values  # noqa: E402
from dashboard.controls.scenario import default_scenario  # noqa: E402
from dashboard.jobs import compute  # noqa: E402
from dashboard.pages import plan as page  # noqa: E402
from model.engine.frontier import CACHE as SEARCH_CACHE  # noqa: E402
from model.engine.variant import clear_shape_spaces  # noqa: E402


def fresh(tag: str) -> None:
    """An empty results cache and empty estimator caches."""
    if compute.HANDLE.store is not None:
        compute.HANDLE.store.close()
    compute.CACHE_DIR = Path(tempfile.mkdtemp(prefix=f"{tag}-", dir=WORK))
    compute.HANDLE.store = None
    SEARCH_CACHE.clear()
    clear_shape_spaces()


def timed(scn: dict) -> float:
    t0 = time.perf_counter()
    out = page.update(scn)
    elapsed = time.perf_counter() - t0
    if out[1]:
        raise SystemExit(f"the page says: {out[1]}")
    return elapsed


def _outputs(spec: str) -> list[dict]:
    """A callback's outputs as the renderer sends them, from its ``output`` string."""
    out = []
    for part in spec.strip(".").split("..."):
        ident, prop = part.rsplit(".", 1)
        out.append({"id": json.loads(ident) if ident.startswith("{") else ident,
                    "property": prop})
    return out


POLL_S = 0.5  # the page's background poll (``interval=500``)
HANDED: list[bool] = []  # per Plan request: handed to the job (not answered in the request)


def http_caller(has: str) -> Callable[[dict, dict], float]:
    """A function posting the callback whose output names ``has`` (its inputs: the scenario
    store, then the values given by id) and returning the seconds it took (whether a Plan
    request handed its plan to the job: :data:`HANDED`)."""
    client = app.app.server.test_client()
    deps = client.get("/_dash-dependencies").get_json()
    dep = next(d for d in deps if has in d["output"] and d["inputs"][0]["id"] == "scenario")

    def call(scn: dict, others: dict) -> float:
        body = {"output": dep["output"], "outputs": _outputs(dep["output"]),
                "inputs": [{**i, "value": scn if i["id"] == "scenario" else others[i["id"]]}
                           for i in dep["inputs"]],
                "changedPropIds": ["scenario.data"], "state": []}
        t0 = time.perf_counter()
        res = client.post("/_dash-update-component", json=body)
        doc = res.get_json(silent=True) or {}
        job = doc if "cacheKey" in doc else None  # a background callback (before issue 29)
        while job is not None and "response" not in doc:  # polled as the renderer does
            time.sleep(POLL_S)
            res = client.post(f"/_dash-update-component?cacheKey={job['cacheKey']}"
                              f"&job={job['job']}", json=body)
            doc = res.get_json(silent=True) or {}
        elapsed = time.perf_counter() - t0
        if res.status_code != 200:
            raise SystemExit(f"HTTP {res.status_code}: {res.get_data(as_text=True)[:300]}")
        HANDED.append("plan-job" in doc.get("response", {}))
        return elapsed
    return call


def pcts(times: list[float], plan: bool = True) -> str:
    ms, handed = np.array(times) * 1e3, sum(HANDED[-len(times):])
    return (f"p50 {np.percentile(ms, 50):7.1f} ms  p95 {np.percentile(ms, 95):7.1f} ms  "
            f"(n={len(ms)}" + (f", {handed} handed to the job)" if plan else ")"))


def http(repeat: int, moe: bool) -> None:
    """The ``--http`` cases (module docstring)."""
    base = default_scenario()
    plan_http, scaling_http = http_caller("plan-headline"), http_caller("scaling-summary")
    scaling_in = {"scaling-threshold": 80, "scaling-breakdown-scale": "log"}
    fresh("http")
    page.update(base)  # the plan as its job computes it (a request past its deadline hands
    scaling_http(base, scaling_in)  # it to the job, which the test client does not poll)
    print(f"scaling cached   "
          f"{pcts([scaling_http(base, scaling_in) for _ in range(repeat)], plan=False)}")
    print(f"plan cached      {pcts([plan_http(base, {}) for _ in range(repeat)])}")
    new = [plan_http({**base, "target_days": round(30.0 + (i + 1) / 100, 2)}, {})
           for i in range(repeat)]
    print(f"plan new target  {pcts(new)}")
    new = [plan_http({**base, "pue": round(1.3 + (i + 1) / 1000, 3)}, {})
           for i in range(repeat)]
    print(f"plan new dense   {pcts(new)}  (a new PUE: nothing cached but the estimator's)")
    new = [plan_http({**base, "layers": base["layers"] - 8 * (i + 1)}, {})
           for i in range(repeat)]
    print(f"plan new model   {pcts(new)}  (8 layers fewer each time: nothing cached)")
    if moe:
        scn = {**base, **model_values("deepseek-v3")}
        print(f"plan new, MoE    the request handing it to the job: "
              f"{plan_http(scn, {}) * 1e3:.0f} ms")
        rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        t0 = time.perf_counter()
        out = page.update(scn)
        grew_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0) / 1024
        print(f"plan new, MoE    staged (the job's work): {time.perf_counter() - t0:.1f} s, "
              f"peak RSS growth {grew_mb:.0f} MB: {out[0]}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3, help="repetitions per case (default 3)")
    ap.add_argument("--http", action="store_true", help="the callbacks over HTTP (p50/p95)")
    ap.add_argument("--moe", action="store_true", help="with --http: DeepSeek-V3 staged too")
    args = ap.parse_args()
    if args.repeat < 1:
        ap.error("--repeat must be at least 1")
    if args.http:
        http(args.repeat, args.moe)
        return 0
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
