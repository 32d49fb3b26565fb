"""The dashboard's edges (issue 33): the environment read in one file
(:mod:`dashboard.settings`), no ``global`` statement in ``model/`` or ``dashboard/``, and
figures that are plain because they are asked to be (``plain=True``), not because of a context
variable."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from dashboard.settings import ROOT, Settings

SETTINGS_FILE = ROOT / "dashboard" / "settings.py"
SOURCES = sorted([*(ROOT / "model").rglob("*.py"), *(ROOT / "dashboard").rglob("*.py"),
                  ROOT / "app.py"])
ENV_NAMES = {"environ", "environb", "getenv", "getenvb", "putenv", "unsetenv"}


def _trees():
    for path in SOURCES:
        yield path, ast.parse(path.read_text(encoding="utf-8"))


def _env_reads(tree: ast.AST) -> list[int]:
    """Lines that touch the process environment: ``os.environ``/``os.getenv``… or a name of
    them imported from ``os``."""
    lines = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and node.attr in ENV_NAMES
                and isinstance(node.value, ast.Name) and node.value.id == "os"):
            lines.append(node.lineno)
        if isinstance(node, ast.ImportFrom) and node.module == "os" and any(
                a.name in ENV_NAMES for a in node.names):
            lines.append(node.lineno)
    return sorted(lines)


def test_the_checks_see_what_they_look_for():
    assert len(SOURCES) > 100
    assert _env_reads(ast.parse("import os\nx = os.environ.get('A')\ny = os.getenv('B')")) == [2, 3]
    assert _env_reads(ast.parse("from os import environ")) == [1]
    assert _env_reads(ast.parse("request.environ.get('REMOTE_ADDR')")) == []  # WSGI's, not os'
    assert len(_globals(ast.parse("def f():\n    global x\n    x = 1"))) == 1


def test_the_environment_is_read_in_one_file():
    readers = {str(path.relative_to(ROOT)): _env_reads(tree) for path, tree in _trees()}
    readers = {path: lines for path, lines in readers.items() if lines}
    assert set(readers) == {str(SETTINGS_FILE.relative_to(ROOT))}, readers


def _globals(tree: ast.AST) -> list[int]:
    return [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Global)]


def test_no_global_statement():
    found = {str(path.relative_to(ROOT)): _globals(tree) for path, tree in _trees()}
    assert {path: lines for path, lines in found.items() if lines} == {}


def test_settings_from_an_environment():
    """Each variable reaches its field in SI units; defaults follow the ones they derive from."""
    s = Settings.from_environ({"PERF_CACHE_DIR": "/tmp/c", "PERF_REQUEST_MEMORY_MB": "512",
                               "PERF_SWEEP_TIME_BUDGET_S": "100", "PERF_MAX_JOBS": "5",
                               "GUNICORN_OUTBOX_MB": "2", "PERF_PUBLIC_SCHEME": "https",
                               "REDIS_URL": "  ", "PERF_CACHE_SIZE_BYTES": "5e5"})
    assert s.cache_dir == Path("/tmp/c") and s.client_secret_file == Path("/tmp/c/client-secret")
    assert s.request_memory_bytes == 512 * 2**20 and s.job_memory_bytes == 1024 * 2**20
    assert s.job_timeout_s == 130 and s.max_jobs_per_client == 2
    assert s.outbox_bytes == 2 * 2**20 and s.public_scheme == "https" and s.redis_url is None
    assert s.cache_size_bytes == 500_000
    assert Settings.from_environ({"PERF_PUBLIC_SCHEME": "gopher"}).public_scheme == "http"
    assert Settings.from_environ({"PERF_MAX_JOBS": "1"}).max_jobs_per_client == 1


def test_settings_are_frozen():
    with pytest.raises(AttributeError):
        Settings.from_environ({}).port = 1  # type: ignore[misc]


def test_no_context_variable():
    """A context variable made every figure builder return plain dicts inside a ``with`` block
    (issue 33); the builders take ``plain=True`` now."""
    found = [str(path.relative_to(ROOT)) for path, tree in _trees() for node in ast.walk(tree)
             if (isinstance(node, ast.Name) and node.id == "ContextVar")
             or (isinstance(node, ast.Attribute) and node.attr == "ContextVar")
             or (isinstance(node, ast.Import) and any(a.name == "contextvars" for a in node.names))]
    assert found == []


def _builders() -> dict[str, ast.FunctionDef]:
    """Every function of dashboard/ that calls ``make_figure``, by ``path:name``."""
    out = {}
    for path, tree in _trees():
        for fn in ast.walk(tree):
            if isinstance(fn, ast.FunctionDef) and fn.name != "make_figure" and any(
                    isinstance(n, ast.Call) and getattr(n.func, "id", "") == "make_figure"
                    for n in ast.walk(fn)):
                out[f"{path.relative_to(ROOT)}:{fn.name}"] = fn
    return out


def test_every_figure_builder_takes_plain_and_passes_it_on():
    builders = _builders()
    assert len(builders) >= 25
    for name, fn in builders.items():
        params = [a.arg for a in (*fn.args.args, *fn.args.kwonlyargs)]
        assert "plain" in params, name
        calls = [n for n in ast.walk(fn) if isinstance(n, ast.Call)
                 and getattr(n.func, "id", "") == "make_figure"]
        assert all(any(k.arg == "plain" and getattr(k.value, "id", "") == "plain"
                       for k in c.keywords) for c in calls), name


def test_plain_true_gives_the_figures_dicts():
    """``plain=True`` gives the dict whose JSON is the Figure's; without it, a Figure."""
    import plotly.graph_objects as go
    from plotly.io.json import to_json_plotly

    from dashboard.figures import empty_figure
    from dashboard.figures.maker import plain

    fig, raw = empty_figure("nothing", presentation=True), empty_figure("nothing", True, plain=True)
    assert isinstance(fig, go.Figure) and isinstance(raw, dict)
    assert json.loads(to_json_plotly(raw)) == json.loads(to_json_plotly(plain(fig)))
