"""Issue 29, item 3 (plan latency): the Plan & cost page sizes every GPU count of a plan
(``model.engine.size.space_size``, for its budgets) and then searches the same counts, which
built every count's shapes a second time (about half of a new model's plan was the search space
built and counted). A count's shapes counted whole are now kept per process
(``model.engine.space.SHAPES``) and the search takes them: the same arrays, to the bit, as a
build from scratch."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from model import load_model, load_system
from model.engine import space
from model.engine.counts import best_per_count
from model.engine.request import Request
from model.engine.rules import Problem
from model.engine.size import SIZES, space_size
from model.engine.space import SHAPES, build_shapes, shapes_key
from model.physics.strategies import build_strategy
from model.specs import memo
from model.specs.execution import resolve_execution
from model.specs.modes import resolve_mode


def _problem(name: str, strategy: str, gpus: int, gbs: int, **kw) -> Problem:
    model, mode = load_model(name), resolve_mode(None)
    ex = resolve_execution({"interleave": kw.pop("interleave", 0)})
    return Problem(model, build_strategy(strategy, model, mode, ex), gpus, gbs,
                   ex.interleave, mode.equal_pipeline_stages, True, nvs=8, **kw)


def _fresh() -> None:
    SHAPES.clear()
    SIZES.clear()


CASES = [("gpt3-1t", "1d", 1024, 4096, {}), ("gpt3-1t", "context", 6144, 4096, {}),
         ("mixtral-8x7b", "1d", 32, 256, {}), ("llama3-70b", "1d", 64, 1024,
                                                 {"pins": {"tp1": 8}}),
         ("gpt3-175b", "summa", 64, 1536, {"production_node": 8, "interleave": 1})]


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-{c[1]}-{c[2]}" for c in CASES])
def test_shapes_counted_whole_are_those_a_build_gives(case):
    name, strategy, gpus, gbs, kw = case
    problem = _problem(name, strategy, gpus, gbs, **kw)
    _fresh()
    fresh = build_shapes(problem)  # built (and kept)
    _fresh()
    counted = space_size(problem)  # counted whole: kept for the search
    kept = SHAPES.get(shapes_key(problem))
    assert kept is not None and counted[0] == len(kept["tp1"]) > 0
    assert list(kept) == list(fresh)
    for col in fresh:
        assert kept[col].dtype == fresh[col].dtype and np.array_equal(kept[col], fresh[col])
        assert not kept[col].flags.writeable  # shared: nobody may write into them
    assert build_shapes(problem) is kept


def test_a_space_counted_in_blocks_is_not_kept_and_builds_the_same():
    problem = _problem("gpt3-1t", "1d", 1024, 4096)
    _fresh()
    want = build_shapes(problem)
    _fresh()
    space_size(problem, block_rows=7)  # grown a few rows at a time: no block is every shape
    assert SHAPES.get(shapes_key(problem)) is None
    got = build_shapes(problem)
    assert all(np.array_equal(got[c], want[c]) for c in want)


def test_the_production_rules_share_shapes_only_on_whole_nodes():
    """The production rule on tp1 keeps every shape (whole nodes) or none: 12 GPUs on nodes of
    8 have no shape under it and are not answered by the relaxed space's shapes."""
    relaxed = _problem("llama3-8b", "1d", 12, 96)
    strict = dataclasses.replace(relaxed, production_node=8)
    _fresh()
    assert len(build_shapes(relaxed)["tp1"]) > 0
    assert len(build_shapes(strict)["tp1"]) == 0
    whole = dataclasses.replace(relaxed, gpus=16)
    assert shapes_key(whole) == shapes_key(dataclasses.replace(whole, production_node=8))


def test_a_plan_sized_first_builds_no_count_again(monkeypatch):
    """The page's order (dashboard.jobs.plan_stages): size the counts, then search them. The
    search builds none of the shapes the sizing counted whole again (before: every count of
    every strategy was built twice; now only the few counted in blocks are), and its rows are
    those of a search from scratch."""
    from dashboard.jobs.plan_stages import sized
    from model.engine.frontier import CACHE
    from model.engine.variant import clear_shape_spaces

    req = Request.build(load_model("gpt3-175b"), load_system("h200"), global_batch=1536,
                        max_gpus=2048, strategy=("1d", "context"),
                        execution={"interleave": 0, "recompute_layers": "auto"})
    counts = list(range(8, 1025, 8))
    CACHE.clear()
    clear_shape_spaces()
    want, _ = best_per_count(req.resolve(), counts)
    CACHE.clear()
    clear_shape_spaces()
    SIZES.clear()
    sized(req, counts)
    kept = set(SHAPES._rows)  # the shapes the sizing counted whole
    built = []
    real = space.stage_rows
    monkeypatch.setattr(space, "stage_rows", lambda p: built.append(p) or real(p))
    got, _ = best_per_count(req.resolve(), counts)
    assert len(kept) > len(counts)  # most of the 2 × 128 spaces
    assert not any(shapes_key(p) in kept for p in built)
    assert 0 < len(built) < len(counts) // 4  # the spaces counted in blocks
    assert got.equals(want) and len(got) > 0


def test_a_table_with_a_byte_budget_drops_the_oldest():
    table = memo.Table("test bytes", 10, memo.TABLES, weigh=len, max_bytes=5)
    try:
        table.put("a", "xx")
        table.put("b", "xxx")
        table.put("c", "xx")  # 7 bytes: "a" goes
        assert (table.get("a"), table.get("b"), table.get("c")) == (None, "xxx", "xx")
        table.put("b", "x")  # replaced: counted once
        table.put("d", "xx")
        assert len(table) == 3
        table.clear()
        table.put("e", "xxxxx")
        assert table.get("e") == "xxxxx"
    finally:
        del memo.REGISTRY["test bytes"]
