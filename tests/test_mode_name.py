"""One name for the modelling mode (issue 33): ``mode`` everywhere inside; its old name
``compat`` still read at the user's edges, deprecated — the command line's ``--compat``, a
saved scenario's or an old link's ``compat`` key, the Python API's ``compat=`` keyword."""

from __future__ import annotations

import json
import warnings

import pytest

from dashboard.controls import scenario as S
from dashboard.controls.scenario_link import from_query, renamed, to_query
from model import ModelError, load_model, load_system, search
from model.cli.commands import main
from model.engine.request import Request

PAPER = ["search", "--model", "gpt3-175b", "--system", "paper-h200", "--gpus", "512",
         "--strategy", "1d", "--top", "2", "--json"]


def _json_out(capsys: pytest.CaptureFixture[str], argv: list[str]) -> dict:
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    out.pop("elapsed_s", None)
    for res in out["results"]:
        res.pop("elapsed_s", None)
    return out


def test_the_old_flag_is_the_new_one(capsys: pytest.CaptureFixture[str]) -> None:
    new = _json_out(capsys, [*PAPER, "--mode", "paper"])
    old = _json_out(capsys, [*PAPER, "--compat", "paper"])
    default = _json_out(capsys, PAPER)
    assert old == new != default  # nothing extra on stdout, and the flag is read
    assert new["compat"] == "paper"  # the JSON key saved outputs compare under


def test_the_old_keyword_warns_and_means_the_mode() -> None:
    m, s = load_model("gpt3-175b"), load_system("paper-h200")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the new keyword warns about nothing
        new = search(m, s, 512, 4096, "1d", mode="paper", top_k=2)
    with pytest.warns(DeprecationWarning, match="compat= is deprecated: use mode="):
        old = search(m, s, 512, 4096, "1d", compat="paper", top_k=2)
    assert old.top.equals(new.top)
    assert Request.build(m, s, global_batch=4096, gpus=512, mode="paper").mode.is_paper
    with pytest.warns(DeprecationWarning), pytest.raises(ModelError, match="disagree"):
        Request.build(m, s, global_batch=4096, gpus=512, mode="default", compat="paper")


def test_an_old_link_keeps_its_mode() -> None:
    scn = {**S.default_scenario(), "mode": "paper"}
    old_link = to_query(scn).replace("mode=paper", "compat=paper")
    assert "compat=paper" in old_link and "mode=" not in old_link
    clean, errors = S.validate_scenario(S.with_presets(from_query(old_link)))
    assert errors == {} and clean["mode"] == "paper"
    partial, _ = S.validate_scenario(S.with_presets(from_query("#compat=paper&system=h100")))
    assert partial["mode"] == "paper" and partial["system"] == "h100"


def test_an_old_saved_scenario_loads() -> None:
    scn = {**S.default_scenario(), "mode": "paper"}
    saved = json.loads(S.to_json(scn))
    saved["compat"] = saved.pop("mode")  # a file saved before the rename
    clean, errors = S.from_json(json.dumps(saved))
    assert errors == {} and clean == S.validate_scenario(scn)[0]
    # a key under both names: the present one wins
    assert renamed({"compat": "paper", "mode": "default"}) == {"mode": "default"}
    assert renamed({"model": "x"}) == {"model": "x"}
