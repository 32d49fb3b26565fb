"""Issue 29, item 8 in a browser: a link naming llm-foundry's FSDP stack (data parallelism
only) offered every strategy and drew cp/tp layouts for it, and Compare systems said "1D TP or
context parallelism". The strategy controls now offer only what the stack runs, and the
Compare systems summary names the stack's own lineage."""

from __future__ import annotations

import pytest


def _labels(ui, ident: str) -> list[str]:
    return [e.text.strip() for e in ui.driver.find_elements("css selector", f"#{ident} label")]


@pytest.mark.own_page  # it opens a link naming the stack
def test_an_fsdp_stack_is_offered_only_what_it_runs(ui) -> None:
    ui.driver.get("about:blank")
    ui.driver.get(f"{ui.duo.server_url}/systems#model=llama3-8b&stack=pytorch-fsdp-2023")
    ui.until(lambda: _labels(ui, "ctl-strategy") == ["all", "1D TP"], "the stack's strategies",
             timeout=60)
    assert _labels(ui, "ctl-design_strategy") == ["1D TP"]
    shown = ui.wait_text("#systems-summary", lambda t: "Composer/llm-foundry" in t,
                         "the stack's lineage", timeout=60)
    assert "Megatron" not in shown and "runs data parallelism only" in shown
    ui.driver.get(f"{ui.duo.server_url}/#model=llama3-8b&stack=megatron-bridge-26.08")
    ui.until(lambda: _labels(ui, "ctl-strategy") == ["all", "1D TP", "2D SUMMA", "2D context"],
             "every strategy again", timeout=60)
    assert ui.severe_logs() == []
