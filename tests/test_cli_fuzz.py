"""Random argument lists thrown at the command line (hypothesis): built from the parser's own
flags (``model.cli.commands``) with random values and garbage tokens, and hostile spec files —
exit 0, or 2 with one ``error:`` line; never 1. Split from tests/test_inputs_fuzz.py (the
promise, and the value strategies these share)."""

from __future__ import annotations

import argparse
import json
import math
from functools import cache
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_inputs_fuzz import FUZZ, MODEL_BASE, SYSTEM_BASE, Arg, event

from model import list_models, list_systems
from model.cli.commands import build_parser, main

# --------------------------------------------------------------------------- command line

CLI_GPUS = st.lists(st.sampled_from([1, 2, 4, 8, 12, 16, 32, 64, 72]), min_size=1,
                    max_size=3).map(lambda ns: ",".join(map(str, ns)))
CLI_BAD_GPUS = st.sampled_from(["0", "-8", "8,", ",8", "8,,16", "1e3", "8.0", " 8", "８",
                                "99999999999999999", "10000001", "abc", ""])
SAFE_ALPHABET = st.characters(blacklist_characters="/\\~", blacklist_categories=("Cs",))
GARBAGE = st.one_of(st.text(SAFE_ALPHABET, max_size=12), st.sampled_from(
    ["--", "-", "-x", "--nope", "--gpus=", "--model=", "--json=1", "-h2", "--tp=-1", "--=", "''",
     "\x00", "--Model", "search", "evaluate"]))


def write_specs(folder: Path) -> dict[str, list[str]]:
    """Spec files for --model/--system: valid (shrunk), malformed and hostile, in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    docs = {"good": None, "not-json": "{", "array": "[1, 2]", "null": "null", "empty": "",
            "nested": "[" * 20_000 + "]" * 20_000, "long-number": '{"layers": ' + "7" * 5000 + "}",
            "unknown-key": None, "bad-utf8": b"\xff\xfe\xfa{", "huge": " " * (70 * 1024) + "{}",
            "nan": None}
    out: dict[str, list[str]] = {"model": [], "system": []}
    for kind, base in (("model", {**MODEL_BASE, "layers": 4}), ("system", SYSTEM_BASE)):
        for name, text in docs.items():
            if name == "good":
                text = json.dumps(base)
            elif name == "unknown-key":
                text = json.dumps({**base, "lyers": 4})
            elif name == "nan":
                text = json.dumps({**base, "layers" if kind == "model" else "hbm_capacity_gb":
                                   math.nan})
            path = folder / f"{kind}-{name}.json"
            path.write_bytes(text if isinstance(text, bytes) else text.encode())
            out[kind].append(str(path))
        out[kind].append(str(folder / "missing.json"))
        out[kind].append(str(folder))  # a directory
    return out


@cache
def cli_actions() -> dict[str, list[argparse.Action]]:
    """Each subcommand's options, straight from the parser (new flags are fuzzed too)."""
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {name: [a for a in p._actions if a.option_strings and a.dest != "help"]
            for name, p in sub.choices.items()}


def option_values(action: argparse.Action, specs: dict[str, list[str]],
                  tmp: Path) -> Arg:
    """Values for one option: plausible ones for its destination, and junk."""
    dest = action.dest
    small = st.sampled_from(["1", "2", "4", "8", "16", "64", "72"])
    numbers = st.sampled_from(["0", "-1", "1000000000000000", "1e3", "2.0", "0x10"])
    if dest in ("model", "system"):
        presets = list_models() if dest == "model" else list_systems()
        good = [p for p in specs[dest] if p.endswith("-good.json")]
        return Arg(st.sampled_from(presets + good),
                   st.sampled_from(specs[dest] + ["gpt3", "H200", "x.json", ""]))
    if dest == "gpus":
        many = getattr(action.type, "__name__", "") == "gpu_list"
        return Arg(CLI_GPUS if many else small, CLI_BAD_GPUS)
    if dest == "strategy":
        return Arg(st.sampled_from(["1d", "summa", "context", "2d", "2d-seqp"]
                                   + (["all"] * 3 if "or all" in (action.help or "") else [])),
                   st.sampled_from(["ALL", "3d", "", "1d,summa"]))
    if dest == "csv":
        return Arg(st.just(str(tmp / "out.csv")),
                   st.sampled_from([str(tmp / "nope" / "out.csv"), str(tmp), str(tmp / "specs")]))
    if dest == "reference":
        return Arg(st.nothing(), st.sampled_from([str(tmp), str(tmp / "missing"),
                                                  str(tmp / "specs"), ""]))
    if action.choices:
        return Arg(st.sampled_from([str(c) for c in action.choices]),
                   st.sampled_from([str(c).upper() for c in action.choices] + ["", "x"]))
    if dest == "interleave":
        return Arg(st.sampled_from(["1", "2", "1,2", "4"]),
                   st.sampled_from(["0", "65", "1,,2", "x", ",", "-1"]))
    if dest == "global_batch":
        return Arg(st.sampled_from(["1", "64", "512", "4096"]),
                   st.one_of(numbers, st.sampled_from(["100000000", "1000000000"])))
    if dest in ("budget", "top"):
        return Arg(st.sampled_from(["1000", "100000", "20000000", "5"]), numbers)
    return Arg(small, numbers)  # pins, --nvs and anything added later


def _option_pairs(draw, options: list, clean: bool, specs: dict[str, list[str]], tmp: Path
                  ) -> tuple[list[tuple[str, str | None]], dict[str, str]]:
    """(flag, value) pairs for some of a command's ``options`` (required ones mostly, when
    ``clean`` always), and the values by destination."""
    pairs: list[tuple[str, str | None]] = []
    values: dict[str, str] = {}
    for action in options:
        percent = (100 if clean else 90) if action.required else 15
        if draw(st.integers(0, 99)) >= percent:
            continue
        flag = draw(st.sampled_from(action.option_strings))
        if action.nargs == 0:
            pairs.append((flag, None))
            continue
        if clean and action.dest == "reference":
            continue
        arg = option_values(action, specs, tmp)
        value = draw(arg.plausible if clean else st.one_of(arg.plausible, arg.plausible,
                                                             arg.junk, GARBAGE))
        values[action.dest] = value
        pairs.append((flag, value))
    return pairs, values


def _matching_gpus(draw, pairs: list, values: dict[str, str]) -> list:
    """Most of the time, --gpus set to tp1·tp2·pp·dp (an evaluate that can run)."""
    dims = [values.get(d, "1") for d in ("tp1", "tp2", "pp", "dp")]
    if all(d.isdigit() for d in dims) and draw(st.integers(0, 3)):
        gpus = str(math.prod(int(d) for d in dims))
        return [(f, gpus if f == "--gpus" else v) for f, v in pairs]
    return pairs


def _argv(draw, command: str, pairs: list, clean: bool) -> list[str]:
    """The argument list: flags with their values (sometimes as --flag=value); unless
    ``clean``, garbage inserted and the order sometimes shuffled."""
    argv = [command]
    for flag, value in pairs:
        if value is None:
            argv.append(flag)
        elif draw(st.integers(0, 9)) == 0:
            argv.append(f"{flag}={value}")
        else:
            argv += [flag, value]
    if not clean:
        for _ in range(draw(st.integers(0, 2))):
            argv.insert(draw(st.integers(0, len(argv))), draw(GARBAGE))
        if draw(st.integers(0, 4)) == 0:
            argv = draw(st.permutations(argv))
    return argv


@st.composite
def cli_argvs(draw, specs: dict[str, list[str]], tmp: Path):
    """An argument list from the parser's own flags. Half the time a plausible command (a
    known subcommand, its required options, plausible values), else anything goes: garbage
    tokens, missing or repeated options, junk values, shuffled order."""
    actions = cli_actions()
    clean = draw(st.booleans())
    commands = st.sampled_from(sorted(actions))
    command = draw(commands if clean else st.one_of(commands, GARBAGE, st.just("--version")))
    pairs, values = _option_pairs(draw, actions.get(command, []), clean, specs, tmp)
    if clean and command == "evaluate":
        pairs = _matching_gpus(draw, pairs, values)
    return _argv(draw, command, pairs, clean)


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    event(f"exit {code}" + (f" ({argv[0]})" if code == 0 and argv else ""))
    return code, out, err


def assert_cli_contract(argv: list[str], code: int, out: str, err: str) -> None:
    assert code in (0, 2, 3), f"exit {code} for {argv}: {err.strip()}"
    assert "Traceback" not in out + err, argv
    if code == 3:  # valid input, no answer: the reason as one line
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("no answer: "), (argv, err)
    if code == 2:
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), (argv, err)
        assert len(lines[0]) > len("error: ")
    elif "--json" in argv and not {"-h", "--help", "--version"} & set(argv):
        json.loads(out)  # the CLI refuses NaN in JSON (allow_nan=False): exit 1 if any


@FUZZ
@given(data=st.data())
def test_cli_random_argument_lists(data, tmp_path, capsys, monkeypatch):
    specs = write_specs(tmp_path / "specs")  # once per test (the fixture is not per example)
    monkeypatch.chdir(tmp_path)  # anything relative lands in the temporary directory
    argv = data.draw(cli_argvs(specs, tmp_path), label="argv")
    code, out, err = run_cli(argv, capsys)
    assert_cli_contract(argv, code, out, err)


@pytest.mark.parametrize("name", ["nested", "long-number"])
def test_cli_hostile_spec_files_are_errors(name, tmp_path, capsys, monkeypatch):
    """A spec file nested 20 000 deep or holding a 5000-digit number is bad input (exit 2), not
    an internal error (found: RecursionError / ValueError escape ``schema.read_json``)."""
    write_specs(tmp_path / "specs")
    monkeypatch.chdir(tmp_path)
    for kind in ("model", "system"):
        workload = {"model": "gpt3-175b", "system": "h200",
                    kind: str(tmp_path / "specs" / f"{kind}-{name}.json")}
        argv = ["search", "--model", workload["model"], "--system", workload["system"],
                "--gpus", "8", "--strategy", "1d"]
        code, out, err = run_cli(argv, capsys)
        assert_cli_contract(argv, code, out, err)
        assert code == 2
