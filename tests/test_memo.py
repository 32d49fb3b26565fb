"""Every per-process cache is declared in one module (model.specs.memo) and listed there: a
benchmark empties the results with one call, and no other module keeps a cache of its own."""

from __future__ import annotations

import re
from pathlib import Path

import app  # noqa: F401 - imports every module that declares a cache
from model import load_model, load_system, search
from model.engine import size  # noqa: F401 - the budget's space sizes
from model.specs import memo

ROOT = Path(__file__).resolve().parent.parent
OWN_CACHE = re.compile(r"lru_cache|functools\.cache\b|@cache\b|OrderedDict\(\)|cache_clear")


def test_no_module_keeps_a_cache_of_its_own():
    """functools caches and LRU tables appear only in memo.py (and the search cache's class,
    registered there)."""
    found = {str(p.relative_to(ROOT)) for pkg in ("model", "dashboard")
             for p in (ROOT / pkg).rglob("*.py") if p.name != "memo.py"
             if OWN_CACHE.search(p.read_text(encoding="utf-8"))}
    assert found == {"model/engine/frontier.py"}, found


def test_every_cache_is_listed_with_its_kind():
    names = set(memo.REGISTRY)
    assert {"searches", "shape spaces", "space sizes", "strategy tables", "system copies",
            "divisors", "NVLink placements", "text columns", "preset values"} <= names
    assert {kind for kind, _ in memo.REGISTRY.values()} == {memo.RESULTS, memo.TABLES}


def test_clearing_the_results_keeps_the_tables():
    m, s = load_model("gpt3-175b"), load_system("h100")
    before = search(m, s, 512, 1536, "1d", top_k=3, execution={"recompute_layers": 0}).top
    assert memo.sizes()["shape spaces"] > 0 and memo.sizes()["strategy tables"] > 0
    memo.clear(memo.RESULTS)
    assert memo.sizes()["shape spaces"] == memo.sizes()["searches"] == 0
    assert memo.sizes()["strategy tables"] > 0
    again = search(m, s, 512, 1536, "1d", top_k=3, execution={"recompute_layers": 0}).top
    assert again.equals(before)


def test_a_table_is_bounded_and_least_recently_used_out_first():
    table = memo.Table("test table", 2, memo.TABLES)
    try:
        table.put("a", 1)
        table.put("b", 2)
        assert table.get("a") == 1
        table.put("c", 3)
        assert (table.get("a"), table.get("b"), table.get("c"), len(table)) == (1, None, 3, 2)
    finally:
        del memo.REGISTRY["test table"]


def test_an_unhashable_argument_is_computed_not_remembered():
    calls = []

    @memo.lru("test lru", 4)
    def double(x):
        calls.append(x)
        return [v * 2 for v in x] if isinstance(x, list) else x * 2

    try:
        assert double(2) == double(2) == 4 and calls == [2]
        assert double([1]) == [2] and len(double) == 1
    finally:
        del memo.REGISTRY["test lru"]
