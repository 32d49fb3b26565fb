"""The Serving page fit for a presentation (issue 29, item 5): axis titles Plotly.js 3 draws
(title objects, never bare strings), export captions of the serving workload, a fractional
batch written as one, a default a presenter would serve, the knee's note clear of the legend."""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile

_TMP_CACHE = tempfile.mkdtemp(prefix="perf-serve-presentable-test-")
atexit.register(shutil.rmtree, _TMP_CACHE, ignore_errors=True)
if "dashboard.settings" not in sys.modules:
    os.environ["PERF_CACHE_DIR"] = _TMP_CACHE

import pytest  # noqa: E402
from dash.exceptions import PreventUpdate  # noqa: E402

import app  # noqa: E402, F401 - registers the pages
from dashboard.controls import presets as PR  # noqa: E402
from dashboard.controls import scenario as S  # noqa: E402
from dashboard.controls import scenario_link as L  # noqa: E402
from dashboard.figures.maker import plain  # noqa: E402
from dashboard.pages import serve_page as page  # noqa: E402
from dashboard.server.export import caption  # noqa: E402
from dashboard.views.serve_view import CARDS, DEFAULT_FORM, build, headline  # noqa: E402

SCN = {**S.default_scenario(), **PR.model_values("llama3-70b"), "model": "llama3-70b",
       **PR.system_values("h100"), "system": "h100"}


@pytest.fixture(scope="module")
def drawn():
    figs, text = build(SCN, DEFAULT_FORM)
    return {k: (v if isinstance(v, dict) else plain(v)) for k, v in figs.items()}, text


def _axes(layout):
    return {k: v for k, v in layout.items() if k.startswith(("xaxis", "yaxis"))}


@pytest.mark.parametrize("card", CARDS)
def test_every_visible_axis_title_is_a_title_object(drawn, card):
    layout = drawn[0][card]["layout"]
    shown = {k: a for k, a in _axes(layout).items() if a.get("visible", True)}
    assert shown, card
    for key, axis in shown.items():
        assert isinstance(axis.get("title"), dict) and axis["title"].get("text"), (card, key)


@pytest.mark.parametrize("card", CARDS)
def test_the_export_caption_describes_the_serving_workload(drawn, card):
    figure = drawn[0][card]
    text = caption(SCN, card, figure)
    for words in ("llama3-70b", "8 h100 GPUs", "fp8 weights", "1,000 input / 1,000 output",
                  "64 concurrent users"):
        assert words in text, text
    assert "budget" not in text and "global batch" not in text


def test_a_fractional_batch_reads_per_replica():
    best = {"fits": True, "prefill_instances": 0, "decode_instances": 0, "replicas": 2,
            "tp": 1, "pp": 1, "batch": 0.5, "output_tokens_per_s_per_gpu": 16.48,
            "tokens_per_s_per_user": 32.95, "ttft_s": 0.1582, "tpot_s": 0.03035,
            "usd_per_million_output_tokens": 82.71}
    text = headline(best, "")
    assert "batch 0.5 per replica" in text and "batch 0:" not in text
    assert "2 replicas" in text and "$82.71 per million" in text


def test_the_pareto_hover_keeps_a_fractional_batch():
    figs, _ = build(SCN, {**DEFAULT_FORM, "gpus": 2, "tp": 1, "load": 1})
    fig = figs["serve-pareto"]
    fig = fig if isinstance(fig, dict) else plain(fig)
    texts = [t for trace in fig["data"] for t in (trace.get("text") or [])]
    assert any("per replica" in t for t in texts)
    assert not any(t.endswith("batch 0") for t in texts)


def test_the_default_is_a_model_people_serve():
    assert (DEFAULT_FORM["gpus"], DEFAULT_FORM["load"], DEFAULT_FORM["precision"],
            DEFAULT_FORM["mode"]) == (8, 64, "fp8", "concurrency")
    fragment, done = page.serving_default(1, True, None, S.default_scenario())
    assert done is True
    raw = L.from_query(fragment)
    scn, errors = S.validate_scenario(S.with_presets(raw))
    assert errors == {} and (scn["model"], scn["system"]) == ("llama3-70b", "h100")
    _, text = build(scn, DEFAULT_FORM)
    ttft_ms = float(text.split("TTFT ")[1].split(" ms")[0].replace(",", ""))
    assert ttft_ms < 2000, text  # not "TTFT 1,312,268 ms"
    for hydrated, defaulted, current in ((False, None, S.default_scenario()),
                                         (True, True, S.default_scenario()),
                                         (True, None, {**S.default_scenario(), "gpus": 64})):
        with pytest.raises(PreventUpdate):
            page.serving_default(1, hydrated, defaulted, current)


def test_the_knee_note_sits_inside_the_plot_under_the_legend(drawn):
    layout = drawn[0]["serve-load"]["layout"]
    assert layout["legend"]["y"] >= 1 and layout["legend"]["yanchor"] == "bottom"
    for note in layout["annotations"]:
        assert note["y"] < 1 and note["yanchor"] == "top", note
    assert layout["yaxis2"]["title"]["text"] == "TPOT (ms)"
    assert layout["yaxis2"]["nticks"] <= 6 and layout["margin"]["r"] >= 60


def test_the_command_line_writes_the_same_fractional_batch(capsys):
    """One user over two replicas: the CLI said 'batch 0' too (model/cli/numbers.share)."""
    from model.cli.commands import main

    assert main(["serve", "--model", "llama3-70b", "--system", "h100", "--gpus", "2", "--tp",
                 "1", "--precision", "fp8", "--input-tokens", "1000", "--output-tokens",
                 "1000", "--concurrency", "1"]) == 0
    out = capsys.readouterr().out
    assert "2 replicas, batch 0.5 per replica" in out and "batch 0\n" not in out


def test_a_system_the_serving_stack_was_never_fitted_on_is_marked(drawn):
    def marks(fig):
        fig = fig if isinstance(fig, dict) else plain(fig)
        return [a["text"] for a in fig["layout"].get("annotations") or []
                if "not validated" in a["text"]]

    assert all(marks(fig) == [] for fig in drawn[0].values())  # H100: fitted
    mi300x = {**SCN, **PR.system_values("mi300x"), "system": "mi300x"}
    figs, _ = build(mi300x, DEFAULT_FORM)
    for card in CARDS:
        assert any("no fit on mi300x" in m for m in marks(figs[card])), card
