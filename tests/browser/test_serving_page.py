"""The Serving page in a browser: its best layout is the API's for the same inputs, the load
curve shows the knee and grows near saturation, and a form change moves the answer."""

from __future__ import annotations

import pytest

from dashboard.views.serve_view import DEFAULT_FORM, checked_form
from model import load_model, load_system, serve


def api_best(**form):
    """The API's best layout for the page's default scenario (Llama 3 70B on H100, which the
    page loads when opened on the untouched training default) and the form."""
    gpus, workload, pins = checked_form({**DEFAULT_FORM, **form})
    return serve(load_model("llama3-70b"), load_system("h100"), gpus, workload, pins).best


def star(traces):
    return next((t for t in traces if t.get("name") == "best within the SLAs"), None)


def test_the_page_answers_as_the_api(ui) -> None:
    ui.go("serve_page")
    best = api_best()
    traces = ui.wait_figure(
        "serve-pareto", lambda t: star(t) is not None and star(t)["x"][0] == pytest.approx(
            best["output_tokens_per_s_per_gpu"]), "the best layout", timeout=90)
    assert star(traces)["y"][0] == pytest.approx(best["tokens_per_s_per_user"])
    ui.wait_text("#serve-headline", lambda t: "output tokens/s per GPU" in t, "the headline")
    load = ui.wait_data("serve-load")
    ttft = next(t for t in load if t["name"] == "TTFT (s)")
    finite = [y for y in ttft["y"] if isinstance(y, (int, float))]
    assert finite[-1] > 10 * finite[0]
    step = ui.wait_data("serve-step")
    assert "attn/core" in step[0]["y"]


def test_more_gpus_move_the_answer(ui) -> None:
    from selenium.webdriver.common.keys import Keys

    ui.go("serve_page")
    first = api_best()
    ui.wait_figure("serve-pareto", lambda t: star(t) is not None and star(t)["x"][0] == (
        pytest.approx(first["output_tokens_per_s_per_gpu"])), "the first answer", timeout=90)
    box = ui.duo.find_element("#serve-gpus")
    box.send_keys(Keys.CONTROL, "a")
    box.send_keys(Keys.BACKSPACE)
    box.send_keys("16", Keys.TAB)
    best = api_best(gpus=16)
    traces = ui.wait_figure(
        "serve-pareto", lambda t: star(t) is not None and star(t)["x"][0] == pytest.approx(
            best["output_tokens_per_s_per_gpu"]), "the 16-GPU answer", timeout=90)
    assert star(traces)["y"][0] == pytest.approx(best["tokens_per_s_per_user"])


@pytest.mark.own_page  # it opens a link first
def test_a_link_reproduces_the_page(ui) -> None:
    from urllib.parse import parse_qsl, urlsplit

    ui.driver.get("about:blank")
    ui.driver.get(f"{ui.duo.server_url}/serving?gpus=16&mode=offline&tpot_max_s=0.08")
    best = api_best(gpus=16, mode="offline", load=None, tpot_max_s=0.08)
    ui.wait_figure("serve-pareto", lambda t: star(t) is not None and star(t)["x"][0] == (
        pytest.approx(best["output_tokens_per_s_per_gpu"])), "the linked answer", timeout=90)
    query = dict(parse_qsl(urlsplit(ui.driver.current_url).query))
    assert query["gpus"] == "16" and query["mode"] == "offline"
