"""Issue 29, item 8: layouts a stack does not run are neither searched nor offered. Composer/
llm-foundry on PyTorch FSDP1 (pytorch-fsdp-2023) runs data parallelism only; the CLI searched
cp/pp/tp layouts for it and ran a pinned ``--strategy context --cp 2`` or ``--tp 8``. The
request (model.engine.layouts) now keeps every search inside the stack's layouts and refuses
in words what it does not run; the dashboard offers only what it runs."""

from __future__ import annotations

import json

import pytest

from model import ModelError, load_model, load_system, search
from model.api import sweep
from model.cli import main
from model.engine.layouts import stack_strategies
from model.engine.request import Request
from model.physics.strategies import STRATEGIES
from model.specs.stack import load_stack, stack_from_dict

FSDP = "pytorch-fsdp-2023"
ARGS = ["search", "--model", "llama3-8b", "--system", "a100", "--gpus", "64", "--stack", FSDP]


def _request(**kw) -> Request:
    return Request.build(load_model("llama3-8b"), load_system("a100"), global_batch=256,
                         gpus=64, **kw)


def test_each_stack_runs_the_strategies_of_its_parallelisms() -> None:
    assert stack_strategies(load_stack(FSDP)) == ("1d",)
    assert stack_strategies(load_stack("torchtitan-2025")) == STRATEGIES
    tp_only = stack_from_dict({**load_stack(FSDP).to_dict(), "parallelism": ["dp", "tp"]})
    assert stack_strategies(tp_only) == ("1d", "summa")


def test_the_request_narrows_the_search_to_the_stacks_layouts() -> None:
    req = _request(strategy="all", stack=FSDP)
    assert req.strategy == ("1d",)
    assert {k: req.pins[k] for k in ("tp1", "tp2", "pp", "ep", "etp")} == dict.fromkeys(
        ("tp1", "tp2", "pp", "ep", "etp"), 1)
    top = search(req.replace(strategy="1d")).top
    assert len(top) and (top[["tp1", "tp2", "pp"]] == 1).all().all()
    assert {r.strategy for r in sweep(req)} == {"1d"}
    megatron = _request(strategy="all", stack="megatron-bridge-26.08")
    assert megatron.strategy == "all" and dict(megatron.pins) == {}
    paper = _request(strategy="context", stack=FSDP, mode="paper")  # the paper takes no stack
    assert paper.strategy == "context"


@pytest.mark.parametrize("kw,words", [
    (dict(strategy="context"), "does not run the context strategy"),
    (dict(strategy="1d", pins={"tp1": 8}), "tp1 8 needs tensor parallelism"),
    (dict(strategy="1d", pins={"pp": 4}), "pp 4 needs pipeline parallelism"),
])
def test_a_layout_the_stack_does_not_run_is_refused_in_words(kw, words) -> None:
    with pytest.raises(ModelError, match=words) as info:
        _request(stack=FSDP, **kw)
    assert str(info.value).startswith(f"the stack {FSDP} runs data parallelism only: ")


@pytest.mark.parametrize("extra,words", [
    (["--strategy", "context", "--cp", "2"], "does not run the context strategy"),
    (["--strategy", "1d", "--tp", "8"], "tp1 8 needs tensor parallelism"),
])
def test_the_cli_refuses_a_pinned_layout_the_stack_does_not_run(capsys, extra, words) -> None:
    assert main([*ARGS, *extra]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and words in err, err


def test_the_cli_searches_only_the_layouts_the_stack_runs(capsys) -> None:
    assert main([*ARGS, "--strategy", "all", "--top", "3", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    rows = [row for result in doc["results"] for row in result["top"]]
    assert rows and {r["strategy"] for r in rows} == {"1d"}
    assert all(r["tp1"] == 1 and r["tp2"] == 1 and r["pp"] == 1 for r in rows)
