"""Issue 29, item 10 (leftovers): numbers on the pages through the one formatter
(model/cli/numbers.py). Found: the Plan page's headline read "gpt3-1t on h200, 1e+12 tokens
within 30 days …"; a baseline over 10,000 days read "Baseline 1.488e+05 days" on the Scenarios
page (text and chart title); the RL headline wrote a long step as "1.23e+03 s" and its days the
same way; "1 runs" in the serving validation summary; a GPU count without its separator in the
design exports' captions ("4096 GPUs") and the Scaling page's knee label."""

from __future__ import annotations

import atexit
import datetime
import os
import shutil
import sys
import tempfile

_TMP_CACHE = tempfile.mkdtemp(prefix="perf-numbers-test-")
atexit.register(shutil.rmtree, _TMP_CACHE, ignore_errors=True)
if "dashboard.jobs.compute" not in sys.modules:
    os.environ["PERF_CACHE_DIR"] = _TMP_CACHE

import pandas as pd  # noqa: E402

import app  # noqa: E402, F401 - registers the pages
from dashboard.controls import scenario as S  # noqa: E402
from dashboard.figures.maker import plain  # noqa: E402
from dashboard.figures.scenarios import tornado_figure  # noqa: E402
from dashboard.jobs import planner  # noqa: E402
from dashboard.pages import plan as plan_page  # noqa: E402
from dashboard.server.export import caption  # noqa: E402
from dashboard.views import notes  # noqa: E402
from dashboard.views.post_training_view import finetune_headline, rl_headline  # noqa: E402
from dashboard.views.serve_validation import summary_text  # noqa: E402


def _no_scientific(text: str) -> None:
    assert "e+" not in text and "e-0" not in text, text


def test_the_plan_headline_writes_the_budget_for_people() -> None:
    scn = S.validate_scenario({**S.default_scenario(), "strategy": "1d"})[0]
    head, _ = plan_page.headline(scn, planner.answer(scn))
    assert head.startswith("gpt3-1t on h200, 1T tokens within 30 days"), head
    _no_scientific(head)
    assert notes.tokens_text(1.5e16) == "15,000T" and notes.tokens_text(12_582_912) == "12.6M"


def test_a_long_baseline_is_written_in_full() -> None:
    frame = pd.DataFrame({"label": ["matrix peak"], "low_change_pct": [5.0],
                          "high_change_pct": [-4.0], "base_days": [148_753.2]})
    title = plain(tornado_figure(frame, 0.1))["layout"]["title"]["text"]
    assert "Baseline 148,753.2 days" in title, title


def test_the_rl_and_finetune_headlines_have_no_scientific_notation() -> None:
    step = {"algorithm": "grpo", "placement": "split", "generation_gpus": 1,
            "training_gpus": 1_024, "off_policy": False, "step_s": 1_234.4,
            "generation_s": 1_000.25, "tail_s": 12.5, "reference_s": 100.0,
            "training_s": 120.0, "sync_s": 2.25, "idle_gpu_share": 0.25,
            "cost_per_step_usd": 12.0}
    text = rl_headline(step, 10_000, "not validated: a test")
    _no_scientific(text)
    assert "1 GPU generating, 1,024 training" in text
    assert "1,234 s per step" in text and "10,000 steps 142.9 days" in text, text
    answer = {"layout": {"tp1": 1, "pp": 1, "dp": 8}, "days": 1_234.56,
              "tokens_per_s_per_gpu": 1000.0, "memory_gb": 40.0, "cost_usd": 1e6,
              "trainable_params": 8e9}
    text = finetune_headline({"full": answer}, [], 8)
    assert "full: 1,234.6 days" in text, text


def test_counts_have_their_plural_and_separators() -> None:
    one = {"in_sample": {"mean_abs_error_pct": 5.0, "runs": 3, "max_abs_error_pct": 9.0},
           "populations": {"h100/vllm": {"output_tokens_per_s": {"mean_abs_error_pct": 4.0,
                                                                  "runs": 1}}}}
    assert "(1 run)" in summary_text(one)
    scn = {**S.default_scenario(), "gpus": 4096}
    text = caption(scn, "design-heatmap", today=datetime.date(2026, 11, 28))
    assert " · 4,096 GPUs · " in text, text


def test_no_hover_template_writes_an_exponent() -> None:
    """d3's 'g' format writes 148,753 days as '1.488e+5' and 15,000 TFLOP/s as '1.500e+4':
    the hover templates written by hand (those through figures.hover.Hover were converted
    already) use ",.N~r" like the rest (18 of them used '.3g' or '.4g')."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "dashboard"
    found = [f"{p.relative_to(root)}: {m.group(0)}" for p in sorted(root.rglob("*.py"))
             for m in re.finditer(r"%\{\{?[^{}:]+:[^{}]*\d[ge]\}", p.read_text())]
    assert found == [], found
