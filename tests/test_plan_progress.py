"""The plan's progress (model.studies.plan.plan_request's ``progress``) and the Plan & cost page's
stages (dashboard/pages/plan.py ``build``'s ``stage``): the counts the plan reports increase and
end at the counts in range, the answer is the same with or without a progress callable, and the
page reports the plan, then the Pareto front and the lost-node view, then done."""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile

_TMP_CACHE = tempfile.mkdtemp(prefix="perf-plan-progress-test-")
atexit.register(shutil.rmtree, _TMP_CACHE, ignore_errors=True)
if "dashboard.settings" not in sys.modules:  # read once (app.py creates CACHE_DIR/background)
    os.environ["PERF_CACHE_DIR"] = _TMP_CACHE


import app  # noqa: E402, F401 - registers the pages and their callbacks
from model import load_model, load_system  # noqa: E402
from model.api import plan  # noqa: E402
from model.engine.counts import count_range  # noqa: E402
from model.studies.plan import FIRST_WINDOW  # noqa: E402

MAX_GPUS = 8 * 2 * FIRST_WINDOW  # two windows of multiples of 8 (H200's node)


def planned(progress=None, **targets):
    return plan(load_model("gpt3-1t"), load_system("h200"), 4096, strategy="1d",
                max_gpus=MAX_GPUS, progress=progress, **targets)


def test_progress_counts_increase_and_end_at_the_counts_in_range():
    total = len(count_range(MAX_GPUS, 8))
    for targets in ({"days": 30.0}, {"budget_usd": 5e7}, {"days": 1.0}):  # 1 day: none fits
        calls = []
        res = planned(lambda done, top, calls=calls: calls.append((done, top)), **targets)
        done = [d for d, _ in calls]
        assert {top for _, top in calls} == {total}, targets
        assert done[0] == 0 and done[-1] == total, (targets, calls)
        assert all(a < b for a, b in zip(done, done[1:], strict=False)), (targets, calls)
        assert res.counts_searched in done  # the window searched last is reported
        quiet = planned(**targets)
        assert quiet.gpus == res.gpus and quiet.counts_searched == res.counts_searched


# the page's own stages (the plan in budget-sized chunks): tests/test_plan_stages.py
