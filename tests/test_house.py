"""The house rules of model/ and dashboard/ that the code's shape must keep (issue 33): few
functions with long parameter lists (a function takes the resolved request, the pricing
context or a record, not their fields one by one)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("model", "dashboard")
MAX_PARAMETERS = 8  # more than this is a long parameter list
MAX_LONG = 10  # functions allowed one


def _sources() -> dict[str, ast.Module]:
    return {str(p.relative_to(ROOT)): ast.parse(p.read_text(encoding="utf-8"))
            for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))}


SOURCES = _sources()


def parameters(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    """A function's parameters, ``self`` and ``cls`` left out (``*args``/``**kwargs`` too:
    they are not a list the reader must follow)."""
    a = fn.args
    return [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs if x.arg not in ("self", "cls")]


def long_parameter_lists(sources: dict[str, ast.Module]) -> list[str]:
    """``path:line name (n)`` of every function taking more than :data:`MAX_PARAMETERS`."""
    out = []
    for path, tree in sources.items():
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = len(parameters(node))
                if n > MAX_PARAMETERS:
                    out.append(f"{path}:{node.lineno} {node.name} ({n})")
    return sorted(out)


def test_the_counter_counts_parameters():
    tree = ast.parse("def f(self, a, b, /, c, *args, d=1, e, **kw): ...\n"
                     "def g(a, b, c, d, e, f, g, h, i): ...\n")
    assert [len(parameters(n)) for n in tree.body] == [5, 9]
    assert long_parameter_lists({"x.py": tree}) == ["x.py:2 g (9)"]


def test_few_functions_take_a_long_parameter_list():
    offenders = long_parameter_lists(SOURCES)
    assert len(offenders) <= MAX_LONG, (
        f"{len(offenders)} functions take more than {MAX_PARAMETERS} parameters (at most "
        f"{MAX_LONG} may): pass the resolved request, the pricing context or a record "
        "instead:\n" + "\n".join(offenders))
