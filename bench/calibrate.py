"""How the efficiencies in model/data/systems/*.json were calibrated (prints the fits; changes
nothing).

Run: python bench/calibrate.py

Method: each parameter is fitted by a grid search that minimises the mean absolute error of the
predicted iteration time on a *calibration* subset of the public runs; the rest of the runs are
held out and only reported, to show whether the fit generalises.

* A100 ``flop_efficiency`` (with and without GEMM wave quantisation, ``sm_count``): fitted on
  the four full-recompute runs of Korthikanti et al. 2022;
  held out: their four selective-recompute runs (and, in ``python -m model validate``, the
  memory figures and Narayanan et al. 2021).
* Hopper/Blackwell FP8 runs of Megatron-Bridge 25.11 (Llama 3 8B/70B/405B): for a given
  ``overlap_slowdown`` γ, ``flop_efficiency_fp8`` × ``attention_efficiency`` are fitted on the
  three H100 runs, and the Blackwell ``attention_efficiency`` on the two DGX B200 runs (the FP8
  GEMM efficiency is shared: the same Transformer Engine / cuBLAS stack). Then the GB200's own
  ``flop_efficiency_fp8`` on its three 25.11 runs (its nominal 1200 W peak is not sustained).
  Held out: the 25.11 GB300 runs (checked: H100's efficiencies) and every run of the 25.09 and
  26.02 releases in ``model/data/reference/megatron_bridge_extra.json``. γ itself is not
  identifiable from five runs (their fit error moves by less than half a point over γ = 0–0.3),
  so it is set a priori to 0.2 — collective kernels (NCCL, userbuffers) run on roughly 16–32 of
  the 132–148 SMs, slowing the compute they overlap by about that share — and the table shows
  how everything moves with it.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from model.validation import (  # noqa: E402
    extra_cases,
    korthikanti_cases,
    measurement_cases,
    predict,
    reference_dir,
)


def errors(cases, **system_overrides) -> np.ndarray:
    """Error % = 100·(1 − predicted/measured) of each case with the overridden system."""
    return np.array([100.0 * (1.0 - predict(replace(
        c, system=c.system.with_overrides(**system_overrides))) / c.measured) for c in cases])


def table(name: str, fit, held, grid: list[dict]) -> None:
    print(f"\n# {name}")
    print(f"{'parameters':44s} {'fit mean|e|':>11s} {'fit max':>8s} {'held mean|e|':>12s} "
          f"{'held max':>9s}")
    best = None
    for params in grid:
        ef, eh = np.abs(errors(fit, **params)), np.abs(errors(held, **params))
        label = ", ".join(f"{k}={v}" for k, v in params.items())
        print(f"{label:44s} {ef.mean():11.2f} {ef.max():8.2f} {eh.mean():12.2f} {eh.max():9.2f}")
        if best is None or ef.mean() < best[0]:
            best = (ef.mean(), label)
    print(f"best on the calibration subset: {best[1]}")


def main() -> None:
    path = reference_dir()
    times = [c for c in korthikanti_cases(path) if c.metric == "iteration_time_s"]
    full = [c for c in times if c.id.endswith("-full")]
    selective = [c for c in times if c.id.endswith("-seqsel")]
    table("A100: Korthikanti full recompute (fit) / selective (held out)", full, selective,
          [{"sm_count": sm, "flop_efficiency": e} for sm in (0, 108)
           for e in (0.74, 0.76, 0.78, 0.80, 0.82)])
    bridge = [c for c in measurement_cases(path) if not c.skip and c.id.startswith("mbridge")]
    extra = [c for c in extra_cases() if not c.skip]
    h100, b200, gb200, gb300 = ([c for c in bridge if f"_{gpu}_" in c.id]
                                for gpu in ("H100", "B200", "GB200", "GB300"))
    fp8_fit(h100, b200, gb300)
    table("GB200 FP8 efficiency: Megatron-Bridge 25.11 (fit) / 25.09 + 26.02 GB200 (held out)",
          gb200, [c for c in extra if "_GB200_" in c.id],
          [{"flop_efficiency_fp8": f} for f in (0.525, 0.55, 0.575, 0.6, 0.625)])
    table("GB300 (not fitted): Megatron-Bridge 25.11 / 26.02 GB300",
          gb300, [c for c in extra if "_GB300_" in c.id],
          [{"flop_efficiency_fp8": f} for f in (0.6, 0.625, 0.65)])


PRIOR_OVERLAP_SLOWDOWN = 0.2  # share of SMs collective kernels take (module docstring)


def fp8_fit(h100, b200, gb300) -> None:
    """The FP8 calibration of the module docstring, printed one γ per line."""
    print("\n# FP8: Megatron-Bridge 25.11 H100 + DGX B200 (fit) / GB300 (not fitted)")
    print(f"{'γ':>4s} {'H100 f':>7s} {'H100 a':>7s} {'B200 a':>7s} {'fit mean|e|':>11s} "
          f"{'GB300 mean|e|':>13s} {'GB300 max':>9s}")
    effs = np.round(np.arange(0.5, 0.751, 0.025), 3)
    atts = np.round(np.arange(0.25, 0.551, 0.025), 3)
    chosen = None
    for g in (0.0, 0.1, 0.2, 0.3, 0.4):
        eh, f, a = min((np.abs(errors(h100, flop_efficiency_fp8=f, attention_efficiency=a,
                                      overlap_slowdown=g)).mean(), f, a)
                       for f in effs for a in atts)
        eb, ab = min((np.abs(errors(b200, flop_efficiency_fp8=f, attention_efficiency=x,
                                    overlap_slowdown=g)).mean(), x) for x in atts)
        fit = (3 * eh + 2 * eb) / 5
        held = np.abs(errors(gb300, flop_efficiency_fp8=f, attention_efficiency=a,
                             overlap_slowdown=g))
        print(f"{g:4.1f} {f:7.3f} {a:7.3f} {ab:7.3f} {fit:11.2f} {held.mean():13.2f} "
              f"{held.max():9.2f}")
        if g == PRIOR_OVERLAP_SLOWDOWN:
            chosen = (g, f, a, ab)
    print(f"chosen (γ a priori): overlap_slowdown={chosen[0]}, flop_efficiency_fp8={chosen[1]},"
          f" attention_efficiency H100 {chosen[2]} / B200 {chosen[3]} (GB300: the H100 value, "
          "its exponential units no longer the limit)")


if __name__ == "__main__":
    main()
