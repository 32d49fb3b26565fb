"""The memory model validated like time (issue 32, items 2–3): its residuals on the fit data's
memory figures (stored, checked against the code), "fits" / "tight" / "no" from their interval,
and every published configuration of the fit data fits (model/validation/memory_error.py)."""

from __future__ import annotations

import json
import math

import pytest

from model.cli import main
from model.validation import SETS, predict_row, time_cases
from model.validation import memory_error as me


def test_the_stored_memory_residuals_are_what_the_code_computes():
    stored = json.loads(me.STORED.read_text())["rows"]
    assert stored == me.compute_rows()
    assert len(stored) == 16 and {r["source"] for r in stored} == {"korthikanti-2022"}


def test_fits_tight_and_no_follow_the_memory_interval():
    r = me.memory_radius(0.8)
    scores = sorted(x["score"] for x in me.stored_rows())
    assert r == scores[math.ceil(17 * 0.8) - 1]
    usable = 80.0
    assert me.fit_status(usable * math.exp(-r) - 0.01, usable)[0] == "fits"
    state, words = me.fit_status(usable, usable)
    assert state == "tight" and words.startswith("may not fit: 80.0 ± ")
    assert words.endswith("GB of 80.0")
    assert me.fit_status(usable * math.exp(r) + 0.01, usable)[0] == "no"


def test_evaluate_json_carries_fits_as_words_and_the_old_boolean(capsys):
    argv = ["evaluate", "--model", "llama3-8b", "--system", "h100", "--gpus", "8",
            "--global-batch", "64", "--strategy", "1d", "--tp", "1", "--pp", "1", "--dp", "8",
            "--microbatch", "2", "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    want = me.fit_status(out["memory_gb"], 81.52)  # 85.52 GB less the stack's 4 GB reserve
    assert (out["fits"], out["fits_text"]) == want and out["fits_bool"] is True
    assert main(argv[:-1]) == 0
    assert f"{want[0]} in HBM ({want[1]})" in capsys.readouterr().out


@pytest.fixture(scope="module")
def fit_rows():
    return [(c, predict_row(c)) for c in time_cases(sets=SETS)]


def test_every_published_configuration_of_the_fit_data_fits(fit_rows):
    """Each run of the fit data ran and was measured: none may be predicted not to fit."""
    assert len(fit_rows) > 250
    over = [c.id for c, row in fit_rows if not bool(row["fits"])]
    assert over == []


def test_torchtitans_reserved_memory_bounds_the_allocated_prediction():
    """TorchTitan's Memory(GiB) is the caching allocator's peak reserved memory, which holds
    every allocated byte: the model's allocated prediction must stay below it for each of its
    14 runs of the fit data (stored and recomputed alike)."""
    stored = list(me.stored_reserved_rows())
    assert stored == me.compute_reserved_rows() and len(stored) == 14
    assert all(r["predicted_allocated_gib"] < r["reserved_gib"] for r in stored)
