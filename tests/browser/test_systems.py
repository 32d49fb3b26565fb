"""The system-comparison page in a browser (a background callback): nine systems plotted, newer
GPU generations faster, and a full-page screenshot once it has finished computing."""

from __future__ import annotations

import math


def _best(values: list) -> float:
    return min(v for v in values if isinstance(v, (int, float)) and math.isfinite(v))


def test_nine_systems_are_compared(ui) -> None:
    ui.go("systems")
    traces = ui.wait_figure("systems-compare", lambda t: len(ui.ys(t)) == 9,
                            "nine systems plotted", timeout=60)
    ys = ui.ys(traces)
    expected = {f"{gpu} · NVS {nvs}" for gpu in ("A100", "H200", "B200") for nvs in (4, 8, 64)}
    assert set(ys) == expected
    for nvs in (4, 8, 64):  # each generation trains faster than the one before
        a100, h200, b200 = (_best(ys[f"{gpu} · NVS {nvs}"]) for gpu in ("A100", "H200", "B200"))
        assert b200 < h200 < a100, nvs
    ui.wait_text("#systems-compare-busy", lambda s: s == "", "the computation to finish")
    assert ui.severe_logs() == []
    ui.screenshot("systems")
