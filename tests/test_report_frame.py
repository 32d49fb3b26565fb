"""The speed paths of a search's hot loop give what the plain code gives, bit for bit: result
frames built without the DataFrame constructor's checks (model/engine/report.py:
_stored_frame), and the paper mode's GEMM shape efficiency without its depth factors
(model/physics/block.py: _shape_efficiency), and a sweep's best rows
(model/studies/sweep.py: best_frame)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from model import load_model, load_system, search, sweep
from model.engine.report import _stored_frame, _text
from model.physics import gemm, ops
from model.physics.block import _shape_efficiency
from model.specs.modes import resolve_mode
from model.studies.sweep import best_frame

ROWS = 7


def _columns(rows: int = ROWS) -> dict[str, object]:
    """One column of every kind a result frame has: float, int, bool and text."""
    rng = np.random.default_rng(3)
    return {"gpus": np.full(rows, 4096), "strategy": _text("1d", rows),
            "tp1": rng.integers(1, 64, rows), "iteration_time_s": rng.random(rows) * 10,
            "nan_col": np.full(rows, np.nan), "fits": rng.random(rows) > 0.5,
            "pricing": _text("rental", rows), "mfu": rng.random(rows)}


def _same(fast: pd.DataFrame, plain: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(fast, plain, check_exact=True)
    assert list(fast.columns) == list(plain.columns)
    assert fast.dtypes.equals(plain.dtypes)
    assert fast._mgr.nblocks == plain._mgr.nblocks  # consolidated as the constructor does
    assert isinstance(fast.index, pd.RangeIndex) and isinstance(plain.index, pd.RangeIndex)


def test_stored_frame_is_the_constructors_frame():
    data = _columns()
    _same(_stored_frame(data, ROWS), pd.DataFrame(data, index=pd.RangeIndex(ROWS)))


@pytest.mark.parametrize("odd", [np.array(["a"] * ROWS, dtype=object), 3.5, np.array(2.0),
                                 np.zeros((ROWS, 1))[:, 0], [1] * ROWS])
def test_other_columns_take_the_constructor(odd):
    """An object array, a scalar, a 0-d array, a strided view or a list: the same frame as the
    constructor (which infers, broadcasts or copies them)."""
    data = {**_columns(), "odd": odd}
    _same(_stored_frame(data, ROWS), pd.DataFrame(data, index=pd.RangeIndex(ROWS)))


def test_a_frames_text_column_is_its_own():
    """Writing into a frame leaves the remembered text column (and later frames) untouched."""
    frame = _stored_frame(_columns(), ROWS)
    frame.loc[0, "strategy"] = "summa"
    assert frame["strategy"].iloc[0] == "summa"
    assert _text("1d", ROWS)[0] == "1d"
    assert _stored_frame(_columns(), ROWS)["strategy"].iloc[0] == "1d"


def test_a_search_frame_is_the_constructors_frame():
    res = search(load_model("gpt3-1t"), load_system("paper-h200"), 512, 4096, "1d",
                 mode="paper", nvs=8, top_k=5)
    data = {c: res.top[c].array.copy() if res.top[c].dtype == "str" else res.top[c].to_numpy()
            for c in res.top.columns}
    _same(res.top, pd.DataFrame(data, index=pd.RangeIndex(len(res.top))))


@pytest.mark.parametrize("sm_count", [0, 132])
def test_paper_shape_efficiency_is_the_waves_alone(sm_count):
    """k₀ = 0 in the paper mode: each GEMM's depth efficiency k/(k + 0) is exactly 1, so the
    shortcut gives bit for bit what the full formula gives (waves only)."""
    m = np.array([0.0, 128.0, 2048.0, 4096.0, 777.0])
    k = np.array([512.0, 0.0, 12288.0, 3072.0, 96.0])
    n = np.array([1536.0, 4096.0, 0.0, 49152.0, 64.0])
    system = SimpleNamespace(sm_count=sm_count, gemm_tile=128)
    ctx = SimpleNamespace(mode=resolve_mode("paper"), system=system)
    fwd, bwd = _shape_efficiency(m, k, n, ctx, "matrix_tflops_fp16")
    waves = [ops.wave_efficiency(r, c, 128, sm_count) if sm_count else 1.0
             for r, c in ((m, n), (m, k), (k, n))]
    full_fwd = gemm.depth_efficiency(k, 0.0) * waves[0]
    full_bwd = gemm.backward_efficiency(gemm.depth_efficiency(n, 0.0) * waves[1],
                                        gemm.depth_efficiency(m, 0.0) * waves[2])
    np.testing.assert_array_equal(np.broadcast_to(fwd, m.shape), full_fwd)
    np.testing.assert_array_equal(np.broadcast_to(bwd, m.shape), full_bwd)


@pytest.mark.parametrize("top_k", [1, 3])
def test_best_frame_is_the_first_rows_concatenated(top_k):
    """A one-row top is not sliced again: the same frame as slicing every top."""
    results = sweep(load_model("gpt3-1t"), load_system("h200"), [64, 512, 4096], 4096,
                    ["1d", "summa"], nvs=8, top_k=top_k)
    plain = pd.concat([r.top.iloc[:1] for r in results if not r.top.empty], ignore_index=True)
    pd.testing.assert_frame_equal(best_frame(results), plain, check_exact=True)


def test_best_frame_takes_from_the_tops_origins():
    """A sweep's tops are row slices of one frame per strategy (and group of counts): their
    best rows taken from those frames at once are the frame the concatenation of the slices
    gives, dtypes and consolidated blocks included; counts where nothing fits (4 GPUs) are
    left out, and two groups of counts (two frames per strategy) keep their order."""
    from dataclasses import replace

    from dashboard.jobs.sweep_parts import sweep_in_parts
    from model.engine.request import Request

    request = Request.build(load_model("gpt3-1t"), load_system("h200"), global_batch=4096,
                            gpus=(4, 512, 2048, 4096), strategy=("1d", "summa"), nvs=8)
    results = sweep_in_parts(request, [(4, 512), (2048, 4096)])
    found = [r for r in results if not r.top.empty]
    assert len(found) < len(results) and all(r.origin is not None for r in found)
    assert len({id(r.origin[0]) for r in found}) == 4  # 2 strategies x 2 groups
    taken = best_frame(results)
    _same(taken, best_frame([replace(r, origin=None) for r in results]))
    assert list(taken["gpus"]) == [r.gpus for r in found]
