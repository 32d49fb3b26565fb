"""Issue 29, item 2, finding 9: NaN, Infinity, 1e308 and 5,000-digit numbers in a runs file (the
Validation page's upload, ``tperf calibrate --runs``) or in any JSON the command line reads (a
model, system, stack, serving stack or price file) are refused in words: never fitted, never a
traceback. Before, ``NaN`` tokens/s passed the "positive" check and was fitted, a 5,000-digit
integer raised ValueError past the checks ("internal error", exit 1 in the CLI)."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path

import pytest
from test_stacks import _synthetic_runs

from model.errors import ModelError
from model.specs import strict_json
from model.validation.user_runs import runs_from_text

ROOT = Path(__file__).resolve().parent.parent
ABSURD = {"NaN": "NaN", "Infinity": "Infinity", "-Infinity": "-Infinity", "1e308": "1e308",
          "1e400": "1e400", "5000-digit integer": "9" * 5000,
          "5000-digit fraction": "1." + "1" * 5000}


def _runs_with(tmp_path: Path, key: str, text: str) -> bytes:
    """The synthetic runs file with the first run's ``key`` written as ``text``."""
    doc = json.loads(_synthetic_runs(tmp_path, 0.55).read_text())
    doc["runs"][0][key] = "@@"
    return json.dumps(doc).replace('"@@"', text).encode()


@pytest.mark.parametrize("text", ABSURD.values(), ids=ABSURD.keys())
@pytest.mark.parametrize("key", ["tokens_per_s_per_gpu", "gpus", "seq_len"])
def test_a_runs_file_with_an_absurd_number_is_refused_in_words(tmp_path, key, text):
    raw = _runs_with(tmp_path, key, text)
    with pytest.raises(ModelError, match="runs file: .*(JSON allows|digits|characters|range)"):
        runs_from_text(raw, "torchtitan-2025")


def test_the_validation_upload_refuses_nan_in_words(tmp_path):
    from dashboard.views.runs_upload import fit_upload

    raw = _runs_with(tmp_path, "tokens_per_s_per_gpu", "NaN")
    contents = "data:application/json;base64," + base64.b64encode(raw).decode()
    with pytest.raises(ModelError, match="NaN is not a number JSON allows"):
        fit_upload(contents, "torchtitan-2025")


@pytest.mark.parametrize("text", ["NaN", "1e308", "9" * 5000], ids=["nan", "1e308", "digits"])
def test_the_cli_refuses_in_one_line_with_exit_2(tmp_path, text):
    """``calibrate --runs`` and a model file: exit 2, one line on stderr, no traceback."""
    runs = tmp_path / "runs.json"
    runs.write_bytes(_runs_with(tmp_path, "tokens_per_s_per_gpu", text))
    spec = tmp_path / "model.json"
    spec.write_text('{"layers": @@, "hidden": 4096}'.replace("@@", text))
    for args in (["calibrate", "--runs", str(runs), "--out", str(tmp_path / "fit.json")],
                 ["search", "--model", str(spec), "--system", "h100", "--gpus", "8",
                  "--strategy", "1d"]):
        done = subprocess.run([sys.executable, "-m", "model", *args], cwd=ROOT,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 2, (args, done.stderr[-500:])
        assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
        assert "internal error" not in done.stderr
        assert any(w in done.stderr for w in ("JSON allows", "digits", "out of range")), \
            done.stderr


def test_sane_numbers_still_parse():
    doc = strict_json.loads(b'{"a": 1, "b": -2.5e3, "c": [1e15, 123456789012345678], '
                            b'"d": 0.1234567890123456789}', "test")
    assert doc == {"a": 1, "b": -2500.0, "c": [1e15, 123456789012345678],
                   "d": 0.1234567890123456789}


def test_a_saved_scenarios_file_with_nan_is_refused_in_words():
    from dashboard.controls import saved

    with pytest.raises(ModelError, match="the file: NaN is not a number JSON allows"):
        saved.from_file(b'{"scenarios": [{"name": "a", "scenario": {"layers": NaN}}]}')
    with pytest.raises(ModelError, match="not valid JSON"):
        saved.from_file(b'{"scenarios": [')
