"""Labels that follow the choice (issue 29, item 8): a figure of a system or stack whose
predictions are not validated says so (Compare systems drew MI300X ~35 % faster than H200 with
nothing marking it), and the Scaling headline names the scenario's own stack, not Megatron's
lineage for an FSDP stack."""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile

_TMP_CACHE = tempfile.mkdtemp(prefix="perf-labels-test-")
atexit.register(shutil.rmtree, _TMP_CACHE, ignore_errors=True)
if "dashboard.settings" not in sys.modules:
    os.environ["PERF_CACHE_DIR"] = _TMP_CACHE

import pandas as pd  # noqa: E402

import app  # noqa: E402, F401 - registers the pages
from dashboard.controls import scenario as S  # noqa: E402
from dashboard.figures import systems_figure  # noqa: E402
from dashboard.figures.maker import plain  # noqa: E402
from dashboard.jobs import studies  # noqa: E402
from dashboard.pages import scaling, systems  # noqa: E402
from dashboard.views import notes  # noqa: E402


def _scenario(**raw):
    scn, errors = S.validate_scenario(S.with_presets(raw))
    assert errors == {}, errors
    return scn


def _marks(fig) -> list[str]:
    layout = fig["layout"] if isinstance(fig, dict) else plain(fig)["layout"]
    return [a["text"] for a in layout.get("annotations") or [] if "not validated" in a["text"]]


def test_the_systems_compared_name_the_unvalidated_ones():
    out = systems.unvalidated_systems(S.default_scenario(), list(studies.COMPARE_SYSTEMS))
    assert "mi300x" in out["MI300X"] and out["MI300X"].startswith("not validated: ")
    assert "GB200-NVL72" not in out  # scored runs: validated


def test_the_system_figure_marks_an_unvalidated_system():
    frame = pd.DataFrame([dict(system=f"{s} · NVS 8", gpus=n, train_days=d / n, strategy="1d")
                          for s, d in (("H200", 9e3), ("MI300X", 6e3)) for n in (64, 128)])
    why = "not validated: no published dense run on mi300x was ever scored"
    fig = plain(systems_figure(frame, unvalidated={"MI300X": why}))
    names = [t["name"] for t in fig["data"]]
    assert names == ["H200 · NVS 8", "MI300X · NVS 8 (not validated)"]
    (mark,) = _marks(fig)
    assert "MI300X" in mark and "mi300x was ever scored" in mark and "H200" not in mark
    assert _marks(plain(systems_figure(frame))) == []


def test_every_scaling_figure_of_an_unvalidated_system_says_so():
    scn = _scenario(model="llama3-8b", system="mi300x", gpus_max=256)
    out = scaling.build(scn)
    figures = out[len(scaling.TEXTS):]
    assert len(figures) == 5
    for fig in figures:
        assert any("mi300x" in m for m in _marks(fig)), fig.layout.title.text
    validated = _scenario(model="llama3-8b", system="gb200-nvl72", gpus_max=256)
    assert notes.not_validated(validated) == ""
    assert all(_marks(fig) == [] for fig in scaling.build(validated)[len(scaling.TEXTS):])


def test_the_headline_names_the_scenarios_own_stack():
    frame = pd.DataFrame([dict(strategy="1d", gpus=64, train_days=10.0, samples_per_s=5.0,
                               mfu=0.4, mfu_peak_tflops=15000.0, precision="nvfp4", dp=64,
                               tp1=1, tp2=1, pp=1, microbatch=1)])
    fsdp = scaling.summary_text(frame, {**S.default_scenario(), "stack": "pytorch-fsdp-2023"})
    assert "as Composer/llm-foundry on PyTorch FSDP1 runs them" in fsdp
    assert "Megatron-LM" not in fsdp and "NeMo" not in fsdp
    titan = scaling.summary_text(frame, {**S.default_scenario(), "stack": "torchtitan-2025"})
    assert "torchtitan" in titan and "Megatron" not in titan
    assert "15,000 TFLOP/s" in fsdp and "e+" not in fsdp  # not '1.5e+04 TFLOP/s'


def test_an_fsdp_only_stack_is_offered_only_its_layouts():
    """llm-foundry on PyTorch FSDP1 runs data parallelism only: the page searched cp/pp/tp
    layouts for it (13.2 days with 'dp 32 · tp1 8 · cp 2 · pp 32' on the default)."""
    import pytest

    from dashboard.jobs import compute
    from model import ModelError
    from model.specs.stack import load_stack, stack_from_dict

    fsdp = load_stack("pytorch-fsdp-2023")
    assert fsdp.parallelism == ("dp",)
    assert fsdp.layout_pins() == {"tp1": 1, "tp2": 1, "pp": 1, "ep": 1, "etp": 1}
    assert load_stack("torchtitan-2025").layout_pins() == {}
    assert stack_from_dict(fsdp.to_dict()).parallelism == ("dp",)  # a fitted stack keeps it
    with pytest.raises(ModelError, match="parallelism"):
        stack_from_dict({**fsdp.to_dict(), "parallelism": ["tp"]})
    scn = _scenario(model="llama3-8b", system="a100", stack="pytorch-fsdp-2023", gpus_max=64)
    request = S.request_of(scn, gpus=(8,), strategy="all")
    assert request.strategy == "1d" and dict(request.pins)["pp"] == 1
    frame = compute.scaling(scn)
    assert not frame.empty and set(frame["strategy"]) == {"1d"}
    assert (frame[["tp1", "tp2", "pp"]] == 1).all().all()
    megatron = S.request_of({**scn, "stack": "megatron-bridge-26.08"}, gpus=(8,))
    assert dict(megatron.pins) == {} and len(megatron.strategy) > 1


def test_the_design_pages_figures_of_an_unvalidated_system_say_so():
    from dashboard.jobs import compute
    from dashboard.pages import design
    from dashboard.views import selected

    scn = _scenario(model="llama3-8b", system="mi300x", gpus=64, gpus_max=256)
    rows = design._rows(compute.top(scn), scn)[:1]
    assert rows
    ops, roof, _ = design.build_ops(scn, rows)
    timeline, memory, _ = selected.build(scn, rows)
    for fig in (ops, roof, timeline, memory):
        assert any("mi300x" in m for m in _marks(fig)), fig
