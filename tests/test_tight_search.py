"""Searches keep tight candidates, marked (issue 32, item 3): a candidate predicted over the
usable HBM but within the memory model's interval of it is kept and ranked by throughput with
the rest, never dropped; the CLI table, the JSON and the Design and Plan pages label it
(model/engine/tight.py)."""

from __future__ import annotations

import json
import math

import pytest

from model import load_model, load_system
from model.cli import main
from model.cli.format import TIGHT_LEGEND
from model.cli.plain_json import fits_json
from model.engine import tight
from model.engine.counts import best_per_count
from model.engine.request import Request
from model.specs.modes import DEFAULT, PAPER
from model.validation.memory_error import fit_status
from tests.unstacked import search

ARGV = ["search", "--model", "gpt3-1t", "--system", "paper-h200", "--gpus", "1024",
        "--global-batch", "4096", "--strategy", "1d", "--top", "8", "--stack", "none"]


@pytest.fixture(scope="module")
def found():
    h200 = load_system("paper-h200")
    return h200, search(load_model("gpt3-1t"), h200, 1024, 4096, "1d", top_k=40)


def test_keep_bytes_is_the_usable_hbm_times_the_memory_interval():
    r = tight.memory_radius()
    assert r is not None and r > 0
    assert tight.keep_bytes(80e9) == pytest.approx(80e9 * math.exp(r))
    assert tight.keep_bytes(0.0) == 0.0
    # a configuration at the kept limit is "tight", just above it "no" (memory_error's states)
    assert fit_status(80 * math.exp(r) - 1e-6, 80.0)[0] == "tight"
    assert fit_status(80 * math.exp(r) + 1e-3, 80.0)[0] == "no"


def test_the_search_keeps_candidates_over_the_usable_hbm_within_the_interval(found):
    h200, res = found
    usable_gb = h200.usable_hbm_bytes / 1e9
    over = res.top[res.top["memory_gb"] > usable_gb]  # the old search dropped every such row
    assert len(over) > 0 and not over["fits"].any()
    assert (over["memory_gb"] <= tight.keep_bytes(h200.usable_hbm_bytes) / 1e9).all()
    assert {fits_json(row, usable_gb)["fits"] for _, row in over.iterrows()} == {"tight"}
    thr = res.top["samples_per_s"].to_numpy()
    assert (thr[:-1] >= thr[1:]).all()  # ranked by throughput, tight rows among the others
    assert len(res.top) <= res.feasible  # counted with the candidates kept


def test_best_per_count_keeps_what_the_search_keeps(found):
    h200, res = found
    req = Request.build(load_model("gpt3-1t"), h200, global_batch=4096, gpus=1024,
                        strategy="1d", stack="none")
    frame, _ = best_per_count(req.resolve(), [1024], top_k=40)
    assert list(frame["samples_per_s"]) == pytest.approx(list(res.top["samples_per_s"]))
    assert (frame["memory_gb"] > h200.usable_hbm_bytes / 1e9).any()


def test_the_cli_table_and_json_mark_tight_rows(capsys):
    assert main(ARGV) == 0
    out = capsys.readouterr().out
    assert " tight " in out and TIGHT_LEGEND in out
    assert main([*ARGV, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    [entry] = data["results"]
    states = [r["fits_state"] for r in entry["top"]]
    assert "tight" in states and set(states) <= {"fits", "tight"}
    words = [r["fits_text"] for r in entry["top"] if r["fits_state"] == "tight"]
    assert all(w.startswith("may not fit: ") for w in words)
    assert entry["best_fits"]["fits"] in ("fits", "tight")


def test_the_paper_mode_keeps_nothing_tight(found):
    """The paper's model drops what is over the limit (docs/model.md §12.1): so does its mode."""
    h200, res = found
    paper = search(load_model("gpt3-1t"), h200, 1024, 4096, "1d", mode="paper", top_k=40)
    assert paper.top["fits"].all() and tight.kept_bytes(h200, PAPER) == h200.usable_hbm_bytes
    assert tight.kept_bytes(h200, DEFAULT) > h200.usable_hbm_bytes
