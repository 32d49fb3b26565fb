"""Server-side latency of a typical what-if (prints figures; not a test).

Run: python bench/callback_latency.py [--repeat 30] [--budget 50]

A user changes one control: ``dashboard.state.collect`` validates every control and stores the
scenario, then the scaling page's callback ``dashboard.pages.scaling.update(scn)`` recomputes its
five figures (or reads them from the cache): gpt3-1t on H200 (NVLink domain 8), 3 strategies x
13 GPU counts (4…16384), the default scenario. Measured in-process, without HTTP or the browser:

* uncached: every repetition is a scenario never seen before (HBM capacity 141.01, 141.02, …), a
  fresh, empty results cache directory: validation + sweep + figures. The estimator's
  per-process search cache (``model.engine.frontier``) answers these sweeps from the candidates it
  evaluated for an earlier capacity, as a server does for a what-if of the HBM capacity;
* uncached, cold estimator: the same, with that search cache emptied too (a what-if of any
  other input, e.g. NIC bandwidth: a search from scratch, pruned to the candidates that can be
  among the best). The per-process shape spaces (``model.engine.variant``) stay, as they do for a
  what-if of a bandwidth; a what-if of the model rebuilds them too (about 15 ms more);
* cached: the same scenario again (after one warm-up): validation + a read of the page's cached
  outputs (figures as JSON);
* MoE preset, uncached, cold estimator: the DeepSeek-V3 preset (256 experts, top-8, MLA) with
  everything else as the default scenario, a what-if of its HBM capacity with the search cache
  emptied before each: every strategy the page offers a MoE model, with EP searched.

Targets: p95 < 300 ms uncached (dense and MoE), < 50 ms cached. The design page
(``build_space``: heatmap and top-50 table) and the JSON encoding of the scaling outputs (what
Dash sends back) are reported for information. ``--budget`` bounds the wall time: a case stops
early (after at least 3 repetitions) when its share is spent, and reports how many it ran.
"""

from __future__ import annotations

import argparse
import contextvars
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
WORK = Path(tempfile.mkdtemp(prefix="perf-bench-"))
os.environ["PERF_CACHE_DIR"] = str(WORK / "import")  # never the repository's cache/

import numpy as np  # noqa: E402
from dash._callback_context import context_value  # noqa: E402
from dash._utils import AttributeDict, to_json  # noqa: E402

import app  # noqa: E402, F401 - the Dash app: pages register, callbacks are defined
from dashboard import state  # noqa: E402
from dashboard.controls.panel import CONTROL_KEYS  # noqa: E402
from dashboard.controls.scenario import default_scenario, gpu_counts, with_presets  # noqa: E402
from dashboard.jobs import compute  # noqa: E402
from dashboard.pages import design, scaling  # noqa: E402
from model.engine.frontier import CACHE as SEARCH_CACHE  # noqa: E402

TARGETS_MS = {"uncached": 300.0, "cached": 50.0}
MOE_PRESET = "deepseek-v3"


def fresh_cache(tag: str) -> None:
    """Point the results cache at a new, empty directory."""
    if compute.HANDLE.store is not None:
        compute.HANDLE.store.close()
    compute.CACHE_DIR = Path(tempfile.mkdtemp(prefix=f"{tag}-", dir=WORK))
    compute.HANDLE.store = None


def collect(scn: dict, current: dict) -> tuple:
    """``state.collect`` as Dash calls it when a number box (HBM capacity) changes: with the
    callback context set and the presets applied so far (a preset change waits for its values)."""
    def call() -> tuple:
        context_value.set(AttributeDict(
            triggered_inputs=[{"prop_id": "ctl-hbm_gb.value", "value": None}]))
        return state.collect(*[scn[k] for k in CONTROL_KEYS], [], current, True,
                             state._applied(current))
    return contextvars.copy_context().run(call)


def what_if(scn: dict, current: dict) -> dict:
    """What runs when one control changes: validation, then the scaling page's callback."""
    out = collect(scn, current)
    new = out[0]
    if not isinstance(new, dict):
        raise SystemExit(f"the benchmark scenario is invalid: {[m for m in out[2:] if m]}")
    scaling.update(new)
    return new


def run(case: Callable[[int], None], repeat: int, budget_s: float,
        setup: Callable[[int], None] | None = None) -> list[float]:
    """Milliseconds of ``case(i)`` (``setup(i)`` untimed), until ``repeat`` or the budget."""
    times: list[float] = []
    start = time.perf_counter()
    for i in range(repeat):
        if setup is not None:
            setup(i)
        t0 = time.perf_counter()
        case(i)
        times.append((time.perf_counter() - t0) * 1e3)
        if time.perf_counter() - start > budget_s and len(times) >= 3:
            break
    return times


def stats(times: list[float]) -> tuple[int, float, float, float]:
    arr = np.asarray(times)
    return len(arr), float(np.percentile(arr, 50)), float(np.percentile(arr, 95)), float(arr.max())


def line(name: str, times: list[float], target: float | None = None) -> tuple[str, bool]:
    n, p50, p95, worst = stats(times)
    if target is None:
        verdict, ok = "(info)", True
    else:
        ok = p95 < target
        verdict = f"p95 < {target:.0f}  {'PASS' if ok else 'FAIL'}"
    return f"{name:46s} {n:4d} {p50:8.1f} {p95:8.1f} {worst:8.1f}  {verdict}", ok


def scenario_at(base: dict, i: int) -> dict:
    """``base`` with an HBM capacity never seen before: 141.01, 141.02, …"""
    return {**base, "hbm_gb": round(base["hbm_gb"] + 0.01 * (i + 1), 2)}


def collect_or_exit(scn: dict, current: dict) -> dict:
    out = collect(scn, current)
    if not isinstance(out[0], dict):
        raise SystemExit(f"the benchmark scenario is invalid: {[m for m in out[2:] if m]}")
    return out[0]


def cold_setup(i: int) -> None:
    fresh_cache(f"c{i}")
    SEARCH_CACHE.clear()


def scaling_cases(base: dict, repeat: int, budget: dict[str, float]) -> dict[str, list]:
    """The scaling page's cases, with each repetition's collect and compute.scaling times."""
    collect_ms: list[float] = []
    compute_ms: list[float] = []
    real_scaling = compute.scaling

    def timed_collect(scn: dict) -> dict:
        t0 = time.perf_counter()
        out = collect_or_exit(scn, base)
        collect_ms.append((time.perf_counter() - t0) * 1e3)
        return out

    def timed_scaling(scn: dict):  # what scaling.build calls: sweep or cache read
        t0 = time.perf_counter()
        frame = real_scaling(scn)
        compute_ms.append((time.perf_counter() - t0) * 1e3)
        return frame

    def parts(total: list[float]) -> tuple[list[float], list[float], list[float]]:
        """(collect, compute.scaling, the rest: figures and text) of each repetition."""
        c, s = collect_ms[-len(total):], compute_ms[-len(total):]
        return c, s, [t - a - b for t, a, b in zip(total, c, s)]

    out: dict[str, list] = {}
    compute.scaling = timed_scaling
    try:
        out["uncached"] = run(lambda i: scaling.update(timed_collect(scenario_at(base, i))),
                              repeat, budget["uncached"], setup=lambda i: fresh_cache(f"u{i}"))
        out["uncached_parts"] = parts(out["uncached"])
        out["cold"] = run(lambda i: scaling.update(timed_collect(scenario_at(base, 500 + i))),
                          repeat, budget["cold"], setup=cold_setup)
        out["cold_parts"] = parts(out["cold"])
        fresh_cache("cached")
        what_if(base, base)  # fills the cache
        out["cached"] = run(lambda _: scaling.update(timed_collect(base)), repeat,
                            budget["cached"])
        out["cached_collect"] = collect_ms[-len(out["cached"]):]  # the rest: a cache read
    finally:
        compute.scaling = real_scaling
    return out


def moe_case(base: dict, repeat: int, budget_s: float) -> list[float]:
    """The MoE preset's cold what-if: collect + the scaling callback, search cache emptied."""
    moe_base = with_presets({**base, "model": MOE_PRESET})

    def case(i: int) -> None:
        scaling.update(collect_or_exit(scenario_at(moe_base, i), moe_base))

    fresh_cache("moe-warmup")
    case(999)  # the preset's op tables and shape spaces, as for any model what-if
    return run(case, repeat, budget_s, setup=cold_setup)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=30, help="repetitions per case (default 30)")
    ap.add_argument("--budget", type=float, default=50.0,
                    help="wall-time bound in seconds for all cases together (default 50)")
    args = ap.parse_args()
    if args.repeat < 1:
        ap.error("--repeat must be at least 1")
    share = {"uncached": 0.2, "cold": 0.2, "moe": 0.2, "cached": 0.1, "design_uncached": 0.15,
             "design_cached": 0.10, "json": 0.05}
    budget = {k: v * args.budget for k, v in share.items()}
    base = default_scenario()
    # warm-up: imports, lazily built tables, the figure machinery (in a throw-away cache)
    fresh_cache("warmup")
    what_if({**base, "hbm_gb": 1000.0}, base)
    design.update_space({**base, "hbm_gb": 1000.0})

    sc = scaling_cases(base, args.repeat, budget)
    moe = moe_case(base, args.repeat, budget["moe"])
    design_uncached = run(lambda i: design.update_space(scenario_at(base, 1000 + i)),
                          args.repeat, budget["design_uncached"],
                          setup=lambda i: fresh_cache(f"d{i}"))
    fresh_cache("design")
    design.update_space(base)
    design_cached = run(lambda _: design.update_space(base), args.repeat,
                        budget["design_cached"])
    outputs = scaling.update(base)
    encode = run(lambda _: to_json(list(outputs)), args.repeat, budget["json"])

    print(f"# gpt3-1t on {base['system']} nvs={base['nvs']}, strategies 1d/summa/context, "
          f"{len(gpu_counts(base))} GPU counts {base['gpus_min']}…{base['gpus_max']}; "
          f"python={platform.python_version()} cpus={os.cpu_count()} "
          f"repeat={args.repeat} budget={args.budget:g}s")
    print(f"{'case (server side, in-process)':46s} {'n':>4s} {'p50_ms':>8s} {'p95_ms':>8s} "
          f"{'max_ms':>8s}  target")
    target = TARGETS_MS
    rows = [line("what-if uncached: collect + scaling callback", sc["uncached"],
                 target["uncached"]),
            line("  of which collect (validation)", sc["uncached_parts"][0]),
            line("  of which compute.scaling (sweep)", sc["uncached_parts"][1]),
            line("  of which figures (5) and texts", sc["uncached_parts"][2]),
            line("what-if uncached, cold estimator", sc["cold"]),
            line("  of which compute.scaling (sweep)", sc["cold_parts"][1]),
            line(f"MoE ({MOE_PRESET}) what-if, cold estimator", moe, target["uncached"]),
            line("what-if cached: collect + scaling callback", sc["cached"], target["cached"]),
            line("  of which collect (validation)", sc["cached_collect"]),
            line("design callback uncached", design_uncached),
            line("design callback cached", design_cached),
            line("JSON encoding of the scaling outputs", encode)]
    for text, _ in rows:
        print(text)
    print(f"# targets: {'PASS' if all(ok for _, ok in rows) else 'FAIL'}")
    return 0


if __name__ == "__main__":
    try:
        code = main()
    finally:
        if compute.HANDLE.store is not None:
            compute.HANDLE.store.close()
        shutil.rmtree(WORK, ignore_errors=True)
    sys.exit(code)
