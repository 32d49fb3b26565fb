"""Every example of the README runs, and the configurations it shows fit in HBM.

The ``tperf …`` commands of its ```bash blocks run through the same entry point the console
command calls (in-process, from the repository root, as ``python -m model`` would); the
```python block of the Python API runs as written.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from model.cli import main

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", README, flags=re.M | re.S)


def _commands() -> list[list[str]]:
    """The ``tperf`` commands of the bash blocks, continuation lines joined, comments dropped."""
    out = []
    for block in _blocks("bash"):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if words[:1] == ["tperf"]:
                out.append(words[1:])
    return out


COMMANDS = _commands()


def test_the_readme_has_its_examples():
    kinds = [argv[0] for argv in COMMANDS]
    assert kinds.count("search") >= 5 and kinds.count("evaluate") >= 2
    assert {"systems", "models", "validate"} <= set(kinds)
    assert len(_blocks("python")) == 1


@pytest.mark.parametrize("argv", COMMANDS, ids=[" ".join(a)[:60] for a in COMMANDS])
def test_command_runs_and_what_it_shows_fits(argv, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)  # the examples' files are relative to the checkout
    code = main(argv, prog="tperf")
    out, err = capsys.readouterr()
    assert code == 0, err
    if argv[0] == "search":
        if "--json" in argv:
            results = json.loads(out)["results"]
            assert results and all(r["feasible"] and r["best"]["fits"] for r in results)
        else:
            assert "best: " in out and "no configuration fits" not in out
            assert out.count("reproduce: tperf evaluate") == out.count("== ")
    if argv[0] == "evaluate":
        assert "fits in HBM" in out and "does NOT fit" not in out


def test_python_api_example_runs_and_fits(monkeypatch):
    monkeypatch.chdir(ROOT)
    [code] = _blocks("python")
    scope: dict = {}
    exec(compile(code, "README.md (Python API)", "exec"), scope)  # noqa: S102 - our own README
    assert scope["res"].best is not None and bool(scope["res"].best["fits"])
    assert scope["ev"].fits
    assert scope["best"] is not None and bool(scope["best"]["fits"])
    assert scope["qwen"].name == "Qwen3-8B" and scope["qwen"].seq_len == 4096
