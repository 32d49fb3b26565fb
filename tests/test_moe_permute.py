"""The fused MoE kernel's permute term (model/physics/kernels/moe_kernel.py, ``permute_s``):
the token copies moved into expert order and back by kernels of their own, priced serially at
the fitted HBM rate, and the fit that recovers the shipped parameters."""

from __future__ import annotations

import numpy as np
import pytest

from model.physics.kernels import moe_kernel as mk


def _cols(tokens: float, routed: float, touched: float, tiles: float) -> dict:
    one = np.array([1.0])
    return {"tokens": tokens * one, "hidden": 4096.0 * one, "inter": 1024.0 * one,
            "tp": one, "gated": one, "touched": touched * one, "routed": routed * one,
            "tiles_64": tiles * one, "latency_s": one}


def test_permute_is_four_bytes_per_token_and_copy_element_over_the_bandwidth():
    """2 BF16 bytes × (read T·e, write r·e) + (read r·e, write T·e)."""
    t = mk.permute_s(np.array([3.0]), np.array([24.0]), np.array([4096.0]), 2e12)
    assert float(t[0]) == pytest.approx(4.0 * 27 * 4096 / 2e12, rel=1e-12)


def test_the_copies_add_to_the_grouped_gemms_instead_of_hiding_under_them():
    """Four tokens top-2 on four experts (two rows each, one 64-row tile each): with compute
    free and no per-CTA limit the kernel is the weights and GEMM activations overlapped, plus
    the copies after them — the copies are serial, not part of the GEMMs' max."""
    theta = (0.0, 1.0, 0.5, 1e30)
    t = mk.latency_s(_cols(4.0, 8.0, 4.0, 4.0), "h200_sxm", "bfloat16", theta, 64.0)
    e, f, r, bw = 4096.0, 1024.0, 8.0, 0.5 * 4.8e12
    fc1 = (4 * e * 2 * f * 2.0 + 2.0 * r * (e + 2 * f)) / bw
    fc2 = (4 * f * e * 2.0 + 2.0 * r * (f + e)) / bw
    copies = 4.0 * (4.0 + r) * e / bw
    assert float(t[0]) == pytest.approx(fc1 + fc2 + copies, rel=1e-9)


def test_efficiencies_above_one_are_capped():
    assert list(mk.physical([1e-5, 923.8, 1.2, 5e10])) == [1e-5, 1.0, 1.0, 5e10]
    assert list(mk.physical([1e-5, 0.4, 0.7, 5e10])) == [1e-5, 0.4, 0.7, 5e10]


def test_the_fit_recovers_the_shipped_parameters_from_their_own_predictions():
    """Timings made by the shipped H200 TensorRT-LLM CUTLASS BF16 fit on its validation subset
    are refitted (from the script's starting points, the shipped tile height) to the same
    parameters: the law identifies them and the fit is deterministic."""
    data = mk._data()
    shipped = mk.fitted("h200_sxm", "bfloat16", "trtllm/cutlass")
    rows = [r for r in data["subset"]
            if (r["gpu"], r["dtype"], r["engine"]) == ("h200_sxm", "bfloat16", "trtllm/cutlass")]
    cols = {k: np.array([r[k] for r in rows], dtype=float) for k in rows[0]
            if k not in ("gpu", "dtype", "engine")}
    cols["latency_s"] = mk.latency_s(cols, "h200_sxm", "bfloat16", shipped.theta, shipped.tile)
    theta, tile = mk.fit_group(cols, "h200_sxm", "bfloat16", (shipped.tile,))
    again, _ = mk.fit_group(cols, "h200_sxm", "bfloat16", (shipped.tile,))
    assert tile == shipped.tile and list(theta) == list(again)
    err = mk.relative_errors_pct(cols, "h200_sxm", "bfloat16", theta, tile)
    assert float(np.max(err)) < 0.5
    assert theta[1] == pytest.approx(shipped.theta[1], rel=0.05)
    assert theta[2] == pytest.approx(shipped.theta[2], rel=0.05)
