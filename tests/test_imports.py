"""The import graph of model/ and dashboard/ has no circle and runs one way: specs → physics →
engine (the search) → studies and serving (the questions asked of it, and the second workload) →
validation → cli (and the package's API); dashboard on top, its own folders one way too:
controls → figures → jobs → server → views → the shell (layout, state) → pages. Every import
counts: module level, inside functions and under ``if TYPE_CHECKING`` alike (a circle hidden in
a function is still a circle)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# layer of each package, lowest first; a module may import its own layer and those below
LAYERS = {"model.errors": 0, "model.specs": 1, "model.physics": 2, "model.engine": 3,
          "model.studies": 4, "model.serving": 4, "model.validation": 5, "model.cli": 6,
          "model": 6, "model.__main__": 7,
          "dashboard.settings": 8, "dashboard.controls": 8, "dashboard.figures": 9,
          "dashboard.jobs": 10, "dashboard.server": 11, "dashboard.views": 12, "dashboard": 13,
          "dashboard.pages": 14}


def _name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_name(p): p for pkg in ("model", "dashboard") for p in (ROOT / pkg).rglob("*.py")}


def _targets(module: str, node: ast.Import | ast.ImportFrom) -> list[str]:
    """The project modules an import statement names (a name of a package's module, else the
    package)."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        base = module.split(".") if node.level else []  # absolute: from the root
        if node.level:
            package = MODULES[module].name == "__init__.py"
            base = base[:len(base) - node.level + package]
        prefix = ".".join(base + ([node.module] if node.module else []))
        names = [f"{prefix}.{a.name}" if f"{prefix}.{a.name}" in MODULES else prefix
                 for a in node.names]
    out = []
    for name in names:
        while name and name not in MODULES:
            name = name.rpartition(".")[0]
        if name and name != module:
            out.append(name)
    return out


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                graph[module].update(_targets(module, node))
    return graph


def _layer(module: str) -> int:
    while module not in LAYERS:
        module = module.rpartition(".")[0]
    return LAYERS[module]


def _reach(graph: dict[str, set[str]], start: str) -> set[str]:
    """The modules ``start`` imports, directly or through others."""
    seen: set[str] = set()
    todo = list(graph.get(start, ()))
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo.extend(graph.get(node, ()))
    return seen


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each circle as the sorted modules that reach one another."""
    reach = {m: _reach(graph, m) for m in graph}
    circles = {tuple(sorted(n for n in reach[m] if m in reach[n])) for m in graph
               if m in reach[m]}
    return sorted(list(c) for c in circles)


GRAPH = _graph()


def test_the_graph_is_read():
    assert len(MODULES) > 100
    assert "model.engine.search" in GRAPH["model.engine.api"]
    assert "model.physics.context" in GRAPH["model.physics.moe"]  # under TYPE_CHECKING
    assert "model.validation.published" in GRAPH["model.validation"]  # a package's own modules


def test_no_import_circle():
    assert _cycles(GRAPH) == []


def test_the_cycle_finder_finds_one():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_three_circles_stay_broken():
    """explore/search ↔ counts, physics/block ↔ moe ↔ strategies ↔ context and
    specs/transformer ↔ hf_moe ↔ params, each cut at the edge that closed it."""
    assert "model.engine.counts" not in GRAPH["model.engine.search"]
    assert "model.physics.block" not in GRAPH["model.physics.moe"]
    assert "model.physics.strategies" not in GRAPH["model.physics.context"]
    assert "model.specs.hf_moe" not in GRAPH["model.specs.transformer"]
    assert "model.specs.transformer" not in GRAPH["model.specs.params"]


def test_imports_run_one_way():
    upward = sorted(f"{m} -> {t}" for m, targets in GRAPH.items() for t in targets
                    if _layer(t) > _layer(m))
    assert upward == []


def test_the_model_never_imports_the_dashboard():
    assert not [m for m, targets in GRAPH.items() if m.startswith("model")
                and any(t.startswith("dashboard") for t in targets)]


# the estimator's entry points: a view reaches them only through dashboard/jobs/, whose request
# builders (dashboard.controls.scenario.request_of, dashboard.jobs.serving.serving_request) ask
ESTIMATOR_MODULES = {"model.engine.api", "model.engine.search", "model.engine.design",
                     "model.engine.evaluate", "model.serving.serve", "model.serving.evaluate"}
ESTIMATOR_NAMES = {"search", "serve", "evaluate", "design_space", "best_per_cell", "sweep",
                   "plan", "codesign", "finetune", "rl_step"}


def _estimator_imports(module: str) -> list[str]:
    """The estimator entry points ``module`` imports: its modules, or their names from the
    ``model`` package."""
    found = sorted(t for t in GRAPH[module] if t in ESTIMATOR_MODULES)
    for node in ast.walk(ast.parse(MODULES[module].read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module == "model" and not node.level:
            found += [f"model.{a.name}" for a in node.names if a.name in ESTIMATOR_NAMES]
    return found


def test_views_import_neither_search_nor_serve():
    views = [m for m in MODULES if m.startswith("dashboard.views")]
    assert len(views) > 10
    assert {m: _estimator_imports(m) for m in views if _estimator_imports(m)} == {}
    # the check sees them where they are asked for
    assert "model.search" in _estimator_imports("dashboard.jobs.scenarios")
    assert "model.serve" in _estimator_imports("dashboard.jobs.serving")
