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


# -- output blocks and prose figures: re-run, so that what the README says cannot drift --------

def _console_blocks() -> list[tuple[list[str], list[str]]]:
    """Each ```console block: the ``$ tperf …`` command and the output lines it shows (a block
    may leave lines out, never change one)."""
    out = []
    for block in _blocks("console"):
        first, *shown = block.rstrip("\n").splitlines()
        assert first.startswith("$ tperf "), first
        out.append((shlex.split(first[2:])[1:], shown))
    return out


CONSOLE = _console_blocks()


def _run(argv: list[str], capsys) -> str:
    code = main(argv, prog="tperf")
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


@pytest.mark.parametrize("argv,shown", CONSOLE, ids=[" ".join(a)[:50] for a, _ in CONSOLE])
def test_console_block_is_what_the_command_prints(argv, shown, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    printed = [line.rstrip() for line in _run(argv, capsys).splitlines()]
    assert len(shown) >= 2
    missing = [line for line in shown if line.rstrip() not in printed]
    assert missing == [], f"the README shows lines the command no longer prints: {missing}"


def _tperf(*argv: str) -> tuple[int, str, str]:
    """``tperf argv`` in-process: its exit code, stdout and stderr."""
    import contextlib
    import io
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv), prog="tperf")
    return code, out.getvalue(), err.getvalue()


PLAN_1T = ("plan", "--model", "gpt3-1t", "--tokens", "1e13", "--days", "30")


def _plan(*extra: str, system: str = "b200", batch: int = 8192) -> dict:
    """The README's 1T question as ``tperf plan … --json`` answers it (the same strategies and
    execution the console block's command searches)."""
    code, out, err = _tperf(*PLAN_1T, "--system", system, "--global-batch", str(batch),
                            "--json", *extra)
    assert code == 0, err
    return json.loads(out)


def _days(days: float) -> str:
    return f"{days:.1f}"


def _cross_validated() -> dict[str, float]:
    from model.validation.cross_validation import ALL_FIRM, cross_validation_sources
    dense = cross_validation_sources().set_index("source").loc[ALL_FIRM]
    moe = cross_validation_sources(part="moe").set_index("source").loc[ALL_FIRM]
    return {"runs": dense["runs"], "cv_mean": dense["cross_validated_mean_pct"],
            "cv_max": dense["cross_validated_max_pct"], "in_mean": dense["in_sample_mean_pct"],
            "in_max": dense["in_sample_max_pct"], "moe_runs": moe["runs"],
            "moe_cv_mean": moe["cross_validated_mean_pct"]}


def _claims():
    """(document, the phrase it must contain, computed now) for each figure of the prose."""
    def batch_4096():
        code, _, err = _tperf(*PLAN_1T, "--system", "b200", "--global-batch", "4096")
        found = re.search(r"no GPU count up to (\d+) .* the fastest takes ([\d.]+) days on "
                          r"(\d+) GPUs", err)
        assert code == 3 and found, err  # valid input, no answer (docs/cli.md)
        top, days, gpus = int(found[1]), found[2], int(found[3])
        return (f"With batches of 4,096 no count up to {top:,} GPUs meets 30 days (the\n"
                f"fastest, {gpus:,} GPUs, takes {days} days with failures)")

    def without_failures():
        s = _plan("--no-with-failures")
        return (f"`--no-with-failures`) {s['gpus']:,} GPUs would do ({_days(s['days'])} days), "
                f"but\nthey take {_days(s['days_with_failures'])} days with failures")

    def gb200():
        s = _plan(system="gb200-nvl72")
        return (f"On GB200 NVL72 {s['gpus']:,} GPUs take {_days(s['days'])} days\n"
                f"({_days(s['days_with_failures'])} with failures)")

    def purchased():
        from model.specs.cost import Costs
        rented, bought = _plan(), _plan("--pricing", "purchase")
        return (f"costs ${rented['cost_usd'] / 1e6:.2f}M rented and "
                f"${bought['cost_usd'] / 1e6:.2f}M on purchased GPUs\n"
                f"(`--pricing purchase`: amortized over "
                f"{Costs().amortization_years:g} years plus electricity)")

    def accuracy():
        c = _cross_validated()
        return (f"over the {c['runs']} firm dense\nruns is {c['cv_mean']:.1f} % mean, "
                f"{c['cv_max']:.1f} % max (in sample {c['in_mean']:.1f} % / {c['in_max']:.1f} %); "
                f"over the {c['moe_runs']} Megatron-Bridge MoE runs,\n{c['moe_cv_mean']:.1f} % "
                "mean left out by release")

    def paper_entries():
        from model.validation import reference_dir
        data = json.loads((reference_dir() / "paper_results.json").read_text(encoding="utf-8"))
        return f"all {sum(len(f['results']) for f in data['files'])} entries"

    def budget():
        from model import load_model
        return f"budget: {load_model('llama3-70b').tokens / 1e12:g}T tokens"

    def lost_node():
        from model import load_model, load_system
        from model.api import lost_node_frame
        m, s = load_model("gpt3-1t"), load_system("b200")
        pow2 = lost_node_frame(m, s, 4096, 4096, lost=1).set_index("lost_nodes")
        even = lost_node_frame(m, s, 4096, 4080, lost=1).set_index("lost_nodes")
        loss = 1 - even.loc[1, "samples_per_s"] / even.loc[0, "samples_per_s"]
        assert even.loc[0, "gpus"] == even.loc[1, "gpus"]
        return (f"B200s ({pow2.loc[0, 'samples_per_s']:.1f} samples/s) that loses one node "
                f"cannot use\n  4,088 GPUs at all, and the best fallback uses "
                f"{pow2.loc[1, 'gpus']:,} ({pow2.loc[1, 'samples_per_s']:.1f} samples/s, "
                f"{pow2.loc[1, 'relative_efficiency']:.0%} of the per-GPU\n  throughput: a "
                f"*cliff*, `tperf lost-node`); with a batch of 4,080 the best layout uses "
                f"{even.loc[0, 'gpus']:,}\n  GPUs with or without the lost node, so the loss "
                f"costs {loss:.1%}").replace("%", " %")

    readme, planning = "README.md", "docs/planning.md"
    return [(readme, batch_4096), (readme, without_failures), (readme, gb200), (readme, purchased),
            (readme, accuracy), (readme, paper_entries), (readme, budget),
            (planning, lost_node)]


CLAIMS = _claims()


@pytest.mark.parametrize("document,claim", CLAIMS, ids=[f.__name__ for _, f in CLAIMS])
def test_prose_figure_is_what_the_code_computes_now(document, claim):
    text = (ROOT / document).read_text(encoding="utf-8")
    phrase = claim()
    assert phrase in text, f"{document} should say {phrase!r} (the figure drifted)"


def test_the_two_commands_are_the_quick_start_and_ci_runs_the_test_one():
    """The README's first bash block is the two commands; .ci/run executes exactly the test
    one, and the quick start's first estimate is on the first screen (within 40 lines)."""
    first = _blocks("bash")[0]
    commands = [line.split("#")[0].strip() for line in first.splitlines() if line.strip()]
    assert commands == ["./scripts/run", "./scripts/test"]
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8")
          .splitlines() if line.strip() and not line.lstrip().startswith("#")]
    assert ci[-1] == "exec ./scripts/test"
    first_estimate = README.splitlines().index("```console")
    assert first_estimate < 40 and len(README.splitlines()) <= 300
