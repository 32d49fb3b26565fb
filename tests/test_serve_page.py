"""The Serving page without a browser (dashboard/pages/serve_page.py, dashboard/views/serve_view.py,
dashboard/figures/serve.py): its answer is the API's for the same inputs, hardware what-ifs of
the control panel move it, bad input is an inline message, and the figures plot the frames."""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile

_TMP_CACHE = tempfile.mkdtemp(prefix="perf-serve-page-test-")
atexit.register(shutil.rmtree, _TMP_CACHE, ignore_errors=True)
if "dashboard.settings" not in sys.modules:  # read once (app.py creates CACHE_DIR/background)
    os.environ["PERF_CACHE_DIR"] = _TMP_CACHE

import pytest  # noqa: E402

import app  # noqa: E402, F401 - registers the pages and their callbacks
from dashboard.controls import presets as PR  # noqa: E402
from dashboard.controls import scenario as S  # noqa: E402
from dashboard.pages import serve_page as page  # noqa: E402
from dashboard.views.serve_view import CARDS, DEFAULT_FORM, checked_form  # noqa: E402
from model import ModelError, ServingLayout, load_model, load_system, serve  # noqa: E402

SCN = {**S.default_scenario(), **PR.model_values("llama3-70b"), "model": "llama3-70b"}
FORM = {**DEFAULT_FORM, "gpus": 8, "mode": "concurrency", "load": 64}


def outputs(scn, form=FORM):
    names = [*CARDS, "headline", "error", *(f"context-{n}" for n in CARDS)]
    values = page.update(scn, *(form[k] for k in page.FORM_KEYS))
    return dict(zip(names, values, strict=True))


def _data(fig):
    return fig["data"] if isinstance(fig, dict) else fig.to_plotly_json()["data"]


def test_the_page_answers_as_the_api():
    out = outputs(SCN)
    assert out["error"] == ""
    gpus, workload, pins = checked_form(FORM)
    best = serve(load_model("llama3-70b"), load_system("h200"), gpus, workload, pins).best
    assert f"{best['output_tokens_per_s_per_gpu']:,.0f} output tokens/s per GPU" in out["headline"]
    star = next(t for t in _data(out["serve-pareto"]) if t["name"] == "best within the SLAs")
    assert star["x"][0] == pytest.approx(best["output_tokens_per_s_per_gpu"])
    step = _data(out["serve-step"])[0]
    assert set(step["y"]) >= {"attn/core", "mlp/fc1", "attn/qkv"}
    memory = {t["name"]: t["x"][0] for t in _data(out["serve-memory"])}
    assert memory["weights"] == pytest.approx(best["weights_gb"])
    assert out["context-serve-pareto"] == FORM


def test_the_load_curve_has_its_knee_and_grows_past_it():
    fig = outputs(SCN)["serve-load"]
    ttft = next(t for t in _data(fig) if t["name"] == "TTFT (s)")
    y = [v for v in ttft["y"] if v is not None]
    assert y[-1] > 10 * y[0]  # near saturation the wait dominates
    assert ttft["y"][-1] is None  # past μ: unstable, a gap, not a number
    layout = fig["layout"] if isinstance(fig, dict) else fig.to_plotly_json()["layout"]
    knee = layout["shapes"][0]["x0"]
    assert ttft["x"][0] < knee < ttft["x"][-1]


def test_hardware_what_if_moves_it():
    base = outputs(SCN)["headline"]
    faster = outputs({**SCN, "hbm_tb_per_s": SCN["hbm_tb_per_s"] * 2})["headline"]

    def per_gpu(text):
        return float(text.split(": ")[1].split(" output")[0].replace(",", ""))
    assert per_gpu(faster) > 1.2 * per_gpu(base)


@pytest.mark.parametrize("change, words", [
    ({"gpus": 0}, "GPUs must be a whole number"),
    ({"load": -3}, "concurrent users must be a whole number"),
    ({"mode": "request-rate", "load": None}, "request rate must be"),
    ({"tpot_max_s": -1}, "TPOT limit must be a positive number"),
    ({"precision": "int2"}, "precision must be one of"),
    ({"tp": 3}, "no serving layout of 8 GPUs"),
])
def test_bad_input_is_an_inline_message(change, words):
    out = outputs(SCN, {**FORM, **change})
    assert words in out["error"]


def test_checked_form_refuses_a_bad_form():
    with pytest.raises(ModelError, match="missing"):
        checked_form(None)
    gpus, wl, pins = checked_form({**FORM, "tp": 4, "pp": "auto"})
    assert (gpus, wl.concurrency, pins) == (8, 64, ServingLayout(tp=4))


@pytest.mark.parametrize("card", CARDS)
def test_every_card_exports_its_data_as_csv(card):
    from dashboard.server.export import card_figure, render

    figure = card_figure(card, SCN, FORM)
    text, ext = render(figure, "csv")
    assert ext == "csv" and len(text.splitlines()) >= 2


def test_export_refuses_a_form_it_cannot_check():
    from dashboard.server.export import card_figure

    with pytest.raises(ModelError, match="GPUs must be"):
        card_figure("serve-pareto", SCN, {**FORM, "gpus": -1})
    with pytest.raises(ModelError, match="draw the figure first"):
        card_figure("serve-pareto", SCN, None)


def test_the_form_round_trips_through_the_url():
    from dashboard.views.serve_view import form_from_query, form_query

    form = {**FORM, "tpot_max_s": 0.05, "tp": 4, "mode": "request-rate", "load": 2.5}
    assert form_from_query(form_query(form)) == {k: v for k, v in form.items()
                                                 if v is not None}
    assert form_from_query("?gpus=16&evil=1&mode=" + "x" * 80) == {"gpus": 16}
    assert form_from_query(12) == {}


def test_fp4_what_if():
    """NVFP4 weights on H200 need an FP4 rate: none in the preset (an inline message), and the
    hardware group's FP4 peak control makes the page answer; a negative rate is refused by the
    scenario's validation, in the control's words."""
    form = {**FORM, "precision": "nvfp4"}
    assert SCN["matrix_tflops_fp4"] == 0
    assert "NVFP4" in outputs(SCN, form)["error"]
    out = outputs({**SCN, "matrix_tflops_fp4": 4000.0}, form)
    assert out["error"] == "" and "output tokens/s per GPU" in out["headline"]
    _, errors = S.validate_scenario({**SCN, "matrix_tflops_fp4": -1.0})
    assert "matrix_tflops_fp4" in errors and "Peak FP4 matmul" in errors["matrix_tflops_fp4"]



def test_engine_selector_and_attention_dp_pin():
    """The engine picks the serving stack (the API's answer for it); the attention-DP pin is
    searched, on or off as the CLI's --attention-dp / --no-attention-dp."""
    from dashboard.views.serve_view import engines, form_stack

    assert {"trtllm-1.0", "vllm-0.x", "sglang-0.5"} <= set(engines())
    form = {**FORM, "engine": "vllm-0.x"}
    out = outputs(SCN, form)
    gpus, workload, pins = checked_form(form)
    best = serve(load_model("llama3-70b"), load_system("h200"), gpus, workload, pins,
                 stack=form_stack(form)).best
    assert f"{best['output_tokens_per_s_per_gpu']:,.0f} output tokens/s per GPU" in out["headline"]
    assert "not validated" in out["headline"]
    assert "not validated" not in outputs(SCN)["headline"].split("(")[0]
    with pytest.raises(ModelError, match="engine must be one of"):
        form_stack({**FORM, "engine": "ollama"})
    assert checked_form({**FORM, "attention_dp": "off"})[2] == ServingLayout(attention_dp=False)
    assert checked_form({**FORM, "attention_dp": "on"})[2] == ServingLayout(attention_dp=True)
    assert checked_form(FORM)[2] == ServingLayout()
    assert "attention DP must be" in outputs(SCN, {**FORM, "attention_dp": "maybe"})["error"]


def test_the_mtp_dropdown_offers_the_fields_range():
    """The MTP depth offered is the serving workload field's range (0..4 before, while the page
    checked 0..8 and the spec allowed 0..16)."""
    from model.specs.serving import MTP_DEPTH

    text = str(page.layout)
    assert "id='serve-mtp'" in text
    [dropdown] = [c for c in _walk(page.layout) if getattr(c, "id", None) == "serve-mtp"]
    assert [o["value"] for o in dropdown.options] == list(
        range(int(MTP_DEPTH.lo), int(MTP_DEPTH.hi) + 1))


def _walk(component):
    yield component
    children = getattr(component, "children", None)
    for child in children if isinstance(children, (list, tuple)) else [children]:
        if child is not None and not isinstance(child, (str, int, float)):
            yield from _walk(child)
