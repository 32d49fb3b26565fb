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


MODULES = {}
for _path in SOURCES:
    _parts = list(Path(_path).with_suffix("").parts)
    MODULES[".".join(_parts[:-1] if _parts[-1] == "__init__" else _parts)] = _path


def defined_names(tree: ast.Module) -> set[str]:
    """The names a module defines at its top level (functions, classes, assignments)."""
    out: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            out.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
    return out


def imported_names(sources: dict[str, ast.Module]):
    """(importing file, module, name) of every absolute ``from module import name``."""
    for path, tree in sources.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    yield path, node.module, alias.name


def _all_sources() -> dict[str, ast.Module]:
    """model/ and dashboard/, and the tests and benchmarks that import from them."""
    more = {str(p.relative_to(ROOT)): ast.parse(p.read_text(encoding="utf-8"))
            for folder in ("tests", "bench") for p in sorted((ROOT / folder).rglob("*.py"))}
    return {**SOURCES, **more}


def borrowed_imports(sources: dict[str, ast.Module], modules: dict[str, str],
                     trees: dict[str, ast.Module]) -> list[str]:
    """Imports of a name from a module of model/ or dashboard/ that does not define it (it
    only imports it): a re-export shim, two homes for one name. A package's ``__init__`` is
    its public face and may re-export; ``from package import submodule`` is no re-export."""
    out = []
    for path, module, name in imported_names(sources):
        home = modules.get(module)
        if (home is None or home.endswith("__init__.py") or f"{module}.{name}" in modules):
            continue
        if name not in defined_names(trees[home]):
            out.append(f"{path}: from {module} import {name}")
    return sorted(out)


def module_aliases(tree: ast.Module, modules: dict[str, str]) -> dict[str, str]:
    """{local name: module} of the project modules a file imports as a whole
    (``from dashboard.controls import scenario as S``, ``import model.engine.space as sp``)."""
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.update({a.asname or a.name: f"{node.module}.{a.name}" for a in node.names
                        if f"{node.module}.{a.name}" in modules})
        elif isinstance(node, ast.Import):
            out.update({a.asname: a.name for a in node.names if a.asname and a.name in modules})
    return out


def borrowed_attributes(sources: dict[str, ast.Module], modules: dict[str, str],
                        trees: dict[str, ast.Module]) -> list[str]:
    """Reads of ``module.name`` where the module does not define the name (it only imports
    it): the same shim as :func:`borrowed_imports`, reached through the module."""
    out = set()
    for path, tree in sources.items():
        aliases = module_aliases(tree, modules)
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load)
                    and isinstance(node.value, ast.Name) and node.value.id in aliases):
                continue
            module = aliases[node.value.id]
            home = modules[module]
            if (not home.endswith("__init__.py") and f"{module}.{node.attr}" not in modules
                    and node.attr not in defined_names(trees[home])):
                out.add(f"{path}: {module}.{node.attr}")
    return sorted(out)


def private_imports(sources: dict[str, ast.Module], modules: dict[str, str]) -> list[str]:
    """Imports of a private name (``_x``) of one project module by another."""
    return sorted(f"{path}: from {module} import {name}"
                  for path, module, name in imported_names(sources)
                  if module in modules and name.startswith("_") and not name.startswith("__"))


def test_the_shim_finder_finds_one():
    trees = {"model/a.py": ast.parse("X = 1\n_y = 2\n"),
             "model/b.py": ast.parse("from model.a import X\n"),
             "model/c.py": ast.parse("from model.b import X\nfrom model.a import _y\n")}
    modules = {"model.a": "model/a.py", "model.b": "model/b.py", "model.c": "model/c.py"}
    assert borrowed_imports(trees, modules, trees) == ["model/c.py: from model.b import X"]
    assert private_imports(trees, modules) == ["model/c.py: from model.a import _y"]


def test_the_shim_finder_looks_in_the_dashboard():
    trees = {"dashboard/a.py": ast.parse("def f(): ...\n"),
             "dashboard/b.py": ast.parse("from dashboard.a import f  # noqa: F401\n_g = f\n"),
             "dashboard/c.py": ast.parse("from dashboard.b import _g, f\n"),
             "tests/t.py": ast.parse("from dashboard.b import f\n")}
    modules = {"dashboard.a": "dashboard/a.py", "dashboard.b": "dashboard/b.py",
               "dashboard.c": "dashboard/c.py"}
    assert borrowed_imports(trees, modules, trees) == ["dashboard/c.py: from dashboard.b import f",
                                                       "tests/t.py: from dashboard.b import f"]
    assert private_imports(trees, modules) == ["dashboard/c.py: from dashboard.b import _g"]


def test_the_shim_finder_follows_a_module_alias():
    trees = {"dashboard/a.py": ast.parse("K = 1\n"),
             "dashboard/b.py": ast.parse("from dashboard.a import K  # noqa: F401\nJ = 2\n"),
             "bench/c.py": ast.parse("from dashboard import b as B\nimport dashboard.a as A\n"
                                     "x = (B.K, B.J, A.K)\n")}
    modules = {"dashboard.a": "dashboard/a.py", "dashboard.b": "dashboard/b.py"}
    assert borrowed_attributes(trees, modules, trees) == ["bench/c.py: dashboard.b.K"]


def test_no_module_reads_a_name_through_a_module_that_only_imports_it():
    """model/, dashboard/ and bench/ (a test may reach into a module to patch or read what it
    uses)."""
    offenders = borrowed_attributes(
        {p: t for p, t in _all_sources().items() if not p.startswith("tests")}, MODULES, SOURCES)
    assert not offenders, ("read these names from the module that defines them:\n"
                           + "\n".join(offenders))


def test_every_name_is_imported_from_its_home():
    offenders = borrowed_imports(_all_sources(), MODULES, SOURCES)
    assert not offenders, ("import these names from the module that defines them (a module "
                           "that only imports a name is not its home):\n" + "\n".join(offenders))


def test_no_module_imports_another_module_private_name():
    """No module of model/ or dashboard/ imports another's private name (a test may, to
    check a piece by itself)."""
    offenders = private_imports(SOURCES, MODULES)
    assert not offenders, ("make these names public (or move them where they are used):\n"
                           + "\n".join(offenders))
