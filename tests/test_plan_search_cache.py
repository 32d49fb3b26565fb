"""Issue 29, item 3: a new dense plan over HTTP took 1.6–1.9 s (over the 1 s goal): with the
recomputed layers searched (the fewest that fit, the plan's default) the per-process search
cache kept nothing, so every plan, and every stage of the Plan page, searched every count again
though only a price, the PUE or the target had changed. Such a search is now cached under its
HBM capacity. The answers are the same rows, to the bit, as a search from scratch."""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile

_TMP_CACHE = tempfile.mkdtemp(prefix="perf-plan-cache-test-")
atexit.register(shutil.rmtree, _TMP_CACHE, ignore_errors=True)
if "dashboard.jobs.compute" not in sys.modules:  # the sizing test imports the dashboard's jobs
    os.environ["PERF_CACHE_DIR"] = _TMP_CACHE

import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from model import load_model, load_system  # noqa: E402
from model.api import plan  # noqa: E402
from model.engine import variant  # noqa: E402
from model.engine.frontier import CACHE  # noqa: E402
from model.engine.variant import clear_shape_spaces  # noqa: E402

# (model, system, global batch, target days, largest GPU count): a dense preset each
CASES = [("llama3-8b", "h100", 1024, 60.0, 512), ("gpt3-175b", "h200", 1536, 20.0, 2048)]


def _fresh() -> None:
    CACHE.clear()
    clear_shape_spaces()


def _plan(case, **costs):
    name, system, batch, days, most = case
    model = load_model(name)
    return plan(model, load_system(system), batch, days=days, max_gpus=most,
                costs=costs or None)


def _same(a, b) -> None:
    pd.testing.assert_frame_equal(a.per_count, b.per_count, check_exact=True)
    pd.testing.assert_series_equal(a.row, b.row, check_exact=True)
    assert a.counts_searched == b.counts_searched


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_a_plan_with_other_prices_reuses_the_search_with_the_same_answer(case, monkeypatch):
    evaluated = []
    real = variant._evaluate_variant

    def counted(*args, **kw):
        evaluated.append(args[1].name)  # the strategy (after the resolved request)
        return real(*args, **kw)

    monkeypatch.setattr(variant, "_evaluate_variant", counted)
    _fresh()
    first = _plan(case, pue=1.3)
    assert first.row is not None and evaluated
    searched = len(evaluated)
    again = _plan(case, pue=1.4, usd_per_gpu_hour=3.1)  # prices only: the same searches
    assert len(evaluated) == searched  # answered from the cache: nothing evaluated again
    assert again.row["plan_cost_usd"] != first.row["plan_cost_usd"]
    _fresh()
    _same(again, _plan(case, pue=1.4, usd_per_gpu_hour=3.1))  # as from scratch


def test_another_capacity_is_searched_again(monkeypatch):
    """The fewest recomputed layers depend on the HBM capacity: a system with less HBM is
    not answered from the cached search of the larger one."""
    evaluated = []
    real = variant._evaluate_variant
    monkeypatch.setattr(variant, "_evaluate_variant",
                        lambda *a, **k: evaluated.append(1) or real(*a, **k))
    model = load_model("llama3-8b")
    big, small = load_system("h100"), load_system("h100").with_overrides(hbm_capacity_gb=40.0)
    _fresh()
    plan(model, big, 1024, days=60.0, max_gpus=512)
    before = len(evaluated)
    cached = plan(model, small, 1024, days=60.0, max_gpus=512)
    assert len(evaluated) > before
    _fresh()
    _same(cached, plan(model, small, 1024, days=60.0, max_gpus=512))


@pytest.mark.parametrize("name,system,batch", [("gpt3-1t", "h200", 4096),
                                               ("deepseek-v3", "h200", 8192),
                                               ("llama3-70b", "b200", 1024)])
def test_the_plans_sizes_skip_only_counts_without_a_layout(name, system, batch):
    """The plan's sizing (dashboard/jobs/plan_stages.sized) counts only the GPU counts some
    layout makes (model.engine.counts.possible): the same shapes and candidates as counting
    every count."""
    from dashboard.jobs import budget
    from dashboard.jobs.plan_stages import sized
    from model.engine.request import Request

    req = Request.build(load_model(name), load_system(system), global_batch=batch,
                        max_gpus=4096, strategy=("1d", "context"))
    counts = list(range(8, 4097, 8))
    ex, strategies = budget.counted(req)
    want = [[sum(budget.count(req, ex, s, n)[k] for s in strategies) for n in counts]
            for k in (0, 1)]
    shapes, cands = sized(req, counts)
    assert shapes.tolist() == want[0] and cands.tolist() == want[1]
    assert sum(want[1]) > 0 and want[1].count(0) > len(counts) // 4  # many counts have none
