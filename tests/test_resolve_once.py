"""The request is resolved once: the software stack is applied (``with_stack``) one time per
request, however many strategies, execution choices, GPU-count windows or chunks it searches
(issue 33: the stack was applied again per strategy and per window of counts)."""

from __future__ import annotations

import pytest

import model.engine.request as request
from model import Request, load_model, load_system, plan, search
from model.api import design_cells
from model.specs import memo
from model.studies.plan import FIRST_WINDOW


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Each call of ``with_stack``, by stack name (the real function still runs)."""
    seen: list[str] = []
    real = request.with_stack  # Request.resolve's, the one call site

    def counted(system, execution, stack, mode):  # type: ignore[no-untyped-def]
        seen.append(str(stack))
        return real(system, execution, stack, mode)

    monkeypatch.setattr(request, "with_stack", counted)
    memo.clear(memo.RESULTS)  # searched from scratch, not answered from the cache
    return seen


def test_search_applies_the_stack_once(calls: list[str]) -> None:
    m, s = load_model("llama3-8b"), load_system("h100")
    res = search(m, s, 64, 256, "1d", execution={"recompute": ["selective", "full"],
                                                 "zero": [1, 3]})
    assert len(res.executions) > 1 and calls == ["None"]


def test_search_at_most_applies_the_stack_once(calls: list[str]) -> None:
    m, s = load_model("llama3-8b"), load_system("h100")
    search(m, s, None, 256, "1d", max_gpus=96, gpu_step=8, stack="torchtitan-2025")
    assert calls == ["torchtitan-2025"]


def test_plan_applies_the_stack_once(calls: list[str]) -> None:
    """A plan of several strategies over several windows of GPU counts."""
    m, s = load_model("llama3-8b").with_overrides(tokens=1e11), load_system("h100")
    req = Request.build(m, s, global_batch=256, max_gpus=2 * FIRST_WINDOW + 64, gpu_step=1,
                        strategy=("1d", "context"))
    result = plan(req, days=1e-6)  # never met: every window is searched
    assert result.counts_searched > FIRST_WINDOW  # more than one window
    assert calls == ["None"]


def test_design_map_applies_the_stack_once(calls: list[str]) -> None:
    m, s = load_model("llama3-8b"), load_system("h100")
    design_cells(m, s, 64, 256, "1d", "tp1", "pp", stack="megatron-bridge-26.08")
    assert calls == ["megatron-bridge-26.08"]
