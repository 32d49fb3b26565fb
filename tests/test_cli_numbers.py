"""Every number true (issue 21), the command line's side: context parallelism named ``cp`` in
text, JSON and CSV (``--cp`` accepted as before, ``--tp2`` too), and the critical-batch warning
the dashboard shows printed by the CLI as well (model/specs/batch.py)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from model import load_model
from model.cli import main
from model.specs.batch import critical_batch_warning

CONTEXT = ["--model", "llama3-8b", "--system", "gb200-nvl72", "--gpus", "128",
           "--global-batch", "256", "--strategy", "context", "--top", "2"]


def _out(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("flag", ["--cp", "--tp2"])
def test_context_parallelism_is_cp_in_text_json_and_the_reproduce_line(capsys, flag):
    text = _out(capsys, ["search", *CONTEXT, flag, "2"])
    assert "· cp 2 ·" in text and "tp2" not in text.split("placement =")[0]
    assert "--cp 2" in text and "--nv-cp" in text and "--tp2" not in text
    best = json.loads(_out(capsys, ["search", *CONTEXT, flag, "2", "--json"]))
    row = best["results"][0]["best"]
    assert (row["cp"], row["tp2"]) == (2, 1) and row["nv_cp"] * row["nv_tp1"] >= 1


def test_other_strategies_have_cp_1_and_keep_their_tp2(capsys, tmp_path):
    path = tmp_path / "rows.csv"
    assert main(["search", "--model", "gpt3-1t", "--system", "h200", "--gpus", "512",
                 "--strategy", "summa", "--tp2", "2", "--top", "2", "--csv", str(path)]) == 0
    frame = pd.read_csv(path)
    assert (frame["cp"] == 1).all() and (frame["tp2"] == 2).all()


def test_the_cli_warns_past_the_critical_batch_as_the_dashboard_does(capsys):
    """llama3-8b at 4,096 sequences of 8,192 tokens: ~4.5× the fewest tokens (test_batch)."""
    argv = ["evaluate", "--model", "llama3-8b", "--system", "h100", "--gpus", "64",
            "--global-batch", "4096", "--strategy", "1d", "--tp", "1", "--pp", "1", "--dp",
            "64", "--microbatch", "1"]
    warning = critical_batch_warning(load_model("llama3-8b"), 4096)
    assert warning.startswith("⚠ The global batch (33.6M tokens) exceeds the critical batch")
    assert warning in _out(capsys, argv)
    assert json.loads(_out(capsys, [*argv, "--json"]))["critical_batch_warning"] == warning
    small = [*argv[:8], "64", *argv[9:], "--json"]
    assert json.loads(_out(capsys, small))["critical_batch_warning"] is None


def test_the_dashboard_warning_is_the_models():
    from dashboard.controls.scenario import default_scenario
    from dashboard.views import notes
    scn = {**default_scenario(), "model": "llama3-8b", "global_batch": 4096, "seq_len": 8192}
    assert notes.critical_batch_warning(scn) == critical_batch_warning(
        notes.build_inputs(scn)[0], 4096)


def test_the_dashboard_names_cp_too():
    """The headlines of the scaling, design and plan pages take the dimension names from
    dashboard.figures.theme.dimension_label (the plan page's text: tests/test_plan_one_path.py)."""
    from dashboard.figures.theme import dimension_label
    assert [dimension_label("tp2", s) for s in ("context", "summa", "1d")] == ["cp", "tp2", "tp2"]
    assert dimension_label("tp1", "context") == "tp1"
