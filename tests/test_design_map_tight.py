"""The Design page's heatmap marks a cell whose only candidates are tight (issue 32, item 3):
kept, as the searches keep them, within the memory model's interval of the HBM limit
(model/engine/tight.py), shown with the fastest tight configuration's time, a ⚠ mark of its own
colour and "may not fit: X ± Y GB of Z" on hover — not ✕ as a cell where nothing may fit."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from test_dashboard import valid

from dashboard import figures
from dashboard.figures.design import TIGHT_MARK
from dashboard.pages import design as design_page
from model import best_per_cell, design_space, load_model, load_system
from model.api import design_cells
from model.engine.request import Request
from model.engine.space import COLUMNS
from model.engine.tight import memory_radius

MODEL, GPUS, BATCH, STRATEGY = "llama3-70b", 64, 1024, "1d"
FULL = {"recompute": "full"}  # a fixed recompute: "auto" would adapt the memory to the limit


@pytest.fixture(scope="module")
def squeezed():
    """An H100 whose usable HBM (less its stack's reserve) is 3 % under the least memory any
    candidate needs: the leanest cells then hold only candidates within the interval."""
    m, h100 = load_model(MODEL), load_system("h100")
    reserve = Request.build(m, h100, global_batch=BATCH, gpus=GPUS,
                            execution=FULL).resolve().system.memory_reserve_gb
    least = float(design_space(m, h100, GPUS, BATCH, STRATEGY, execution=FULL)[
        "memory_gb"].min())
    assert math.exp(memory_radius()) > 1.03  # the interval is wider than the squeeze
    return m, h100.with_overrides(hbm_capacity_gb=round(least / 1.03 + reserve, 3))


def test_a_cell_of_tight_candidates_keeps_its_fastest(squeezed):
    m, system = squeezed
    cells = design_cells(m, system, GPUS, BATCH, STRATEGY, "tp1", "pp", execution=FULL)
    tight = cells[(cells["feasible"] == 0) & (cells["tight"] > 0)]
    assert len(tight) >= 1 and np.isfinite(tight["best_time_s"]).all()
    usable = system.hbm_capacity_gb - Request.build(
        m, system, global_batch=BATCH, gpus=GPUS, execution=FULL).resolve().system.memory_reserve_gb
    assert (tight["memory_gb"] > usable).all()
    assert (tight["memory_gb"] <= usable * math.exp(memory_radius())).all()
    none = (cells["feasible"] == 0) & (cells["tight"] == 0)
    assert cells.loc[none, "best_time_s"].isna().all()
    # the chunked numpy cells are those of the whole space reduced by pandas
    whole = best_per_cell(design_space(m, system, GPUS, BATCH, STRATEGY, execution=FULL),
                          "tp1", "pp")
    pd.testing.assert_frame_equal(cells, whole, check_exact=True)
    pd.testing.assert_frame_equal(design_cells(m, system, GPUS, BATCH, STRATEGY, "tp1", "pp",
                                               chunk=97, execution=FULL),
                                  whole, check_exact=True)


def test_a_fitting_candidate_is_preferred_to_a_faster_tight_one():
    """best_per_cell's rule: a cell's best fits when any does, the tight only where none does."""
    frame = pd.DataFrame({"tp1": [1, 1, 2], "pp": [1, 1, 1], "fits": [True, False, False],
                          "tight": [False, True, True], "iteration_time_s": [2.0, 1.0, 3.0],
                          "memory_gb": [70.0, 82.0, 81.0]})
    for col in [*COLUMNS, "samples_per_s", "train_days"]:
        if col not in frame.columns:
            frame[col] = 1
    cells = best_per_cell(frame, "tp1", "pp")
    assert cells["best_time_s"].tolist() == [2.0, 3.0]
    assert cells["feasible"].tolist() == [1, 0] and cells["tight"].tolist() == [1, 1]


def test_the_heatmap_marks_the_tight_cells_with_the_table_words(squeezed, monkeypatch):
    m, system = squeezed
    # the scenario names a stock H100: the page's capacity is the squeezed one's here
    monkeypatch.setattr(design_page, "build_inputs", lambda scn: (m, system))
    cells = design_cells(m, system, GPUS, BATCH, STRATEGY, "tp1", "pp", execution=FULL)
    scn = valid(system="h100", model=MODEL)
    words = design_page.with_fit_words(scn, cells)
    tight = words[(words["feasible"] == 0) & (words["tight"] > 0)]
    assert tight["memory_fit"].str.match(r"may not fit: [\d.]+ ± [\d.]+ GB of [\d.]+$").all()
    fig = figures.heatmap_figure(words, "tp1", "pp")
    by_name = {t.name: t for t in fig.data}
    maybe = by_name["may not fit"]
    z = np.array(maybe.z, dtype=float)
    assert int(np.isfinite(z).sum()) == len(tight)
    marked = [t for row in maybe.text for t in row if t]
    assert len(marked) == len(tight) and all(t.startswith(TIGHT_MARK) for t in marked)
    names = maybe.meta["customdata"]
    k = names.index("memory_fit")
    assert f"%{{customdata[{k}]}}" in maybe.hovertemplate
    hovered = [c[k] for row in maybe.customdata for c in row if c is not None and c[k]]
    assert sorted(hovered) == sorted(tight["memory_fit"])
    # not drawn as "does not fit", nor coloured as a fitting cell
    for other in ("does not fit", "best iteration time (s)"):
        assert not np.isfinite(np.array(by_name[other].z, dtype=float)[np.isfinite(z)]).any()
    assert "optimum" not in by_name  # the star marks a cell that fits: none does here


def test_the_explanation_says_the_tight_cells_may_fit(squeezed) -> None:
    m, system = squeezed
    cells = design_cells(m, system, GPUS, BATCH, STRATEGY, "tp1", "pp", execution=FULL)
    scn = valid(system="h100", model=MODEL, gpus=GPUS, design_strategy=STRATEGY)
    nothing = cells.assign(feasible=0)
    text = design_page.infeasible_text(scn, nothing)
    assert "surely fits" in text and "the ⚠ cells may" in text, text
    assert "(✕ cells)" in design_page.infeasible_text(scn, nothing.assign(tight=0))
