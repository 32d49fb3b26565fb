"""The Post-training page in a browser: on the default scenario (a 1T model on 8 H200s) only
QLoRA fits, and the memory card says so with its bars; the RL question shows its own cards."""

from __future__ import annotations


def test_the_page_draws_the_methods_that_fit(ui) -> None:
    ui.go("post_training")
    traces = ui.wait_figure("post-memory", lambda t: any(tr.get("x") for tr in t),
                            "the memory bars", timeout=90)
    assert {x for t in traces for x in t["x"]} == {"qlora"}
    ui.wait_text("#post-headline", lambda t: "qlora:" in t and "full, lora" in t,
                 "the headline")
    shown = ui.driver.execute_script(
        "return ['post-memory','post-days','post-timeline','post-split'].map("
        "(n) => getComputedStyle(document.getElementById('card-' + n)).display !== 'none');")
    assert shown == [True, True, False, False]
    assert ui.severe_logs() == []
