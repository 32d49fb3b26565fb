"""Issue 29, item 8 on the pages: the Strategy and Design strategy controls offer only what the
software stack runs (they listed every strategy for llm-foundry on FSDP, which runs data
parallelism only), a preset applied moves a strategy the stack does not run to one it does,
and the Compare systems page's summary names the stack's own lineage (it said "1D TP or
context parallelism" whatever the stack)."""

from __future__ import annotations

import atexit
import base64
import json
import os
import shutil
import sys
import tempfile

_TMP_CACHE = tempfile.mkdtemp(prefix="perf-stack-layouts-test-")
atexit.register(shutil.rmtree, _TMP_CACHE, ignore_errors=True)
if "dashboard.jobs.compute" not in sys.modules:
    os.environ["PERF_CACHE_DIR"] = _TMP_CACHE

import app  # noqa: E402, F401 - registers the pages
from dashboard import state  # noqa: E402
from dashboard.controls import scenario as S  # noqa: E402
from dashboard.controls.banner import banner_text  # noqa: E402
from dashboard.controls.panel import PANEL  # noqa: E402
from dashboard.controls.strategy_choice import with_supported_strategies  # noqa: E402
from dashboard.pages import systems  # noqa: E402
from model.specs.stack import load_stack  # noqa: E402

FSDP = "pytorch-fsdp-2023"


def _values(options: list[dict]) -> list[str]:
    return [o["value"] for o in options]


def test_the_strategy_controls_offer_what_the_stack_runs() -> None:
    run, design = state.strategies_offered(FSDP, "default", None)
    assert _values(run) == ["all", "1d"] and _values(design) == ["1d"]
    run, design = state.strategies_offered("megatron-bridge-26.08", "default", None)
    assert _values(run) == ["all", "1d", "summa", "context"]
    assert _values(design) == ["1d", "summa", "context"]
    run, _ = state.strategies_offered(FSDP, "paper", None)  # the paper mode takes no stack
    assert len(run) == 4


def test_a_strategy_the_stack_does_not_run_follows_the_stack() -> None:
    scn = {**S.default_scenario(), "model": "llama3-8b", "stack": FSDP,
           "strategy": "context", "design_strategy": "summa"}
    out = with_supported_strategies(scn)
    assert out["strategy"] == "all" and out["design_strategy"] == "1d"
    megatron = with_supported_strategies({**scn, "stack": "megatron-bridge-26.08"})
    assert megatron["strategy"] == "context" and megatron["design_strategy"] == "summa"


def test_the_systems_summary_names_the_stacks_own_lineage() -> None:
    scn, errors = S.validate_scenario(S.with_presets({"model": "llama3-8b", "stack": FSDP}))
    assert errors == {}, errors
    text = systems.summary_text(scn)
    assert "Megatron" not in text and "context" not in text and "SUMMA" not in text
    assert "as Composer/llm-foundry on PyTorch FSDP1 runs them" in text, text
    assert f"the stack {FSDP} runs data parallelism only" in text
    megatron = systems.summary_text({**scn, "stack": "megatron-bridge-26.08"})
    assert "1D TP or 2D context, as Megatron-Bridge" in megatron, megatron


def test_the_stack_control_value_is_never_read_as_a_path(tmp_path) -> None:
    """The control's value comes from the browser: only a preset's name is loaded (a path
    such as a stack JSON file on the server is not read)."""
    planted = tmp_path / "stack.json"  # a readable stack that runs data parallelism only
    planted.write_text(json.dumps({**load_stack(FSDP).to_dict(), "name": "planted"}))
    assert load_stack(str(planted)).parallelism == ("dp",)
    run, design = state.strategies_offered(str(planted), "default", None)
    assert len(run) == 4 and len(design) == 3  # as without a stack: nothing was read


def test_a_link_naming_a_strategy_the_stack_does_not_run_selects_what_it_computes() -> None:
    """A link with the FSDP-only stack and strategy=context: the Strategy radio selects 1D (what
    the pages compute: scenario.stack_layouts), the panel and the banner say why, and the
    link's other inputs stay."""
    out = state.hydrate(f"#stack={FSDP}&strategy=context&model=llama3-8b&gpus=512",
                        False, None)
    keys = [c.key for c in PANEL]
    values = dict(zip(keys, out[:len(keys)]))
    assert values["strategy"] == "1d" and values["stack"] == FSDP
    assert values["model"] == "llama3-8b" and values["gpus"] == 512
    assert S.stack_layouts(FSDP, "context", None)[0] == values["strategy"]
    note = out[-1]
    assert note == ("From the link: Strategy set to 1d (1D tensor parallel), which the figures "
                    f"compute: the stack {FSDP} runs data parallelism only, not the context "
                    "strategy (2D context/sequence parallel)."), note
    shown = S.validate_scenario(S.with_presets({"model": "llama3-8b", "stack": FSDP}))[0]
    assert note in banner_text({"_": note}, shown)
    # a stack that runs it keeps it, without a word
    out = state.hydrate("#stack=megatron-bridge-26.08&strategy=context&model=llama3-8b",
                        False, None)
    assert dict(zip(keys, out))["strategy"] == "context" and out[-1] == ""


def test_a_file_naming_a_strategy_the_stack_does_not_run_selects_what_it_computes() -> None:
    body = json.dumps({"model": "llama3-8b", "stack": FSDP, "design_strategy": "summa"})
    contents = "data:application/json;base64," + base64.b64encode(body.encode()).decode()
    out = state.upload(contents, None, "scenario.json")
    values = dict(zip([c.key for c in PANEL], out))
    assert values["design_strategy"] == "1d" and values["model"] == "llama3-8b"
    assert out[-1].startswith("From the file: Design strategy set to 1d (1D tensor parallel)")
    assert "not the summa strategy" in out[-1], out[-1]
