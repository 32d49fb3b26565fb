"""Calibration of the stacks' GEMM efficiency, and leave-one-source-out cross-validation.

One parameter per (stack, GPU): η, the fraction of the BF16 tensor-core peak the stack's matmuls
reach on that GPU. The rest follows from kernel-level evidence, not from the runs:

* FP8 and MXFP8 matmuls reach ``FP8_RATIO``·η of their own peak: Transformer Engine's GEMM
  benchmark measures pre-quantised FP8 GEMMs 1.92× as fast as BF16 on an H200 NVL, against a
  2× peak ratio (TransformerEngine docs, "Low precision training: speedups", 2026);
* attention's tensor-core work runs at η too, and its exponentials at the special-function rate
  (``System.exp_tera_per_s``): FlashAttention-3's analysis (Shah et al. 2024, §3) of what bounds
  fused attention.

η is fitted by least squares of log(predicted / measured) iteration time over the firm (not
``uncertain``) runs of that stack on that GPU, each predicted with its published layout and its
stack's execution defaults. Predicted time as a function of η is tabulated once per run on
``GRID`` and interpolated (it is smooth and monotone: about a + b/η).

Leave-one-source-out: for each source (a paper or a release, :mod:`model.validation.sources`), η
is fitted on every *other* source's firm runs, pooled per GPU across stacks (a GPU none of them
ran firmly falls back to their uncertain runs of it, ZeRO-3 left out, then to its generation),
and the source's runs are predicted with it. Nothing fitted on a source is used to predict it.

Mixture of experts (the ``moe`` set, :mod:`model.validation.moe`): the same machinery fits one
more parameter per (stack, GPU), η_t (``System.moe_token_efficiency``), on the stack's MoE runs
only: the fraction of the HBM bandwidth the MoE layer's token kernels reach — the router, the
permutation into expert order and the unpermutation (:data:`model.physics.optable.
TOKEN_KERNELS`). Everything else of those runs is priced with the stack's dense values, fitted
on its dense runs (inherited from the base release where a release published no dense run); the
experts' grouped GEMMs run at the dense GEMM efficiency times their shape efficiency (waves over
the experts on the stack's kernel path, depth k/(k + k0): :mod:`model.physics.gemm`, fitted on
DeepGEMM's published table, never on these runs). Why the MoE-specific cost is charged
per routed byte and not per expert FLOP: grouped GEMMs with a thousand rows or more per expert
run close to a dense GEMM of the same shape (DeepGEMM's grouped FP8 kernels on H800: 1233 TFLOP/s
at 1024 rows per group, README 2025-03; its dense ones 1300–1550), and the recipes give every
expert thousands of rows (T·k·ep/E); what else a MoE layer costs — token kernels, unfused index
and sort kernels, synchronising the per-expert token counts with the host — scales with the
routed copies T·k and the hidden size e, not with the expert FFN. η_t absorbs those costs: a
value far below 1 says the release's MoE layers lose that much time outside the GEMMs and the
all-to-alls, not that a permutation kernel runs at that bandwidth. Its cross-validation leaves
one release (its patch release with it) out of the MoE runs; leave-one-model-out
(:func:`by_model`) fits it on one model's runs and predicts the other's.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from model.specs.stack import load_stack
from model.validation.case import Case
from model.validation.published import predict_row

ALL_FIRM_PYTORCH = "all firm PyTorch-family runs"  # the second summary row of error_table
FP8_RATIO = 0.96  # pre-quantised FP8 GEMM speed over BF16 / their peak ratio (1.92 / 2)
GRID = np.array([0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.9, 1.0])
FINE = np.linspace(GRID[0], GRID[-1], 1501)
# the MoE token kernels' bandwidth fraction: time ≈ a + b/η_t from a few % of the HBM rate up
TOKEN_GRID = np.array([0.02, 0.03, 0.04, 0.05, 0.07, 0.1, 0.15, 0.2, 0.3, 0.5, 0.7, 1.0])
TOKEN_FINE = np.linspace(TOKEN_GRID[0], TOKEN_GRID[-1], 1961)


def efficiency_fields(eta: float) -> dict[str, float]:
    """The system fields one GEMM efficiency η sets (see the module docstring)."""
    return {"flop_efficiency": eta, "flop_efficiency_fp8": FP8_RATIO * eta,
            "flop_efficiency_mxfp8": FP8_RATIO * eta, "flop_efficiency_fp4": FP8_RATIO * eta,
            "attention_efficiency": eta}


def token_fields(eta: float) -> dict[str, float]:
    """The system field one MoE token-kernel efficiency η_t sets."""
    return {"moe_token_efficiency": eta}


def predicted_time_s(case: Case, eta: float) -> float:
    """The case's iteration time (s) with its stack's execution defaults and efficiency η: of
    every GEMM and attention (dense runs), or of the experts' GEMMs with the stack's own dense
    values (the ``moe`` set)."""
    stack = load_stack(case.stack)
    bare = replace(stack, gemm_efficiency={}, attention_efficiency={},
                   expert_gemm_efficiency={}, moe_token_efficiency={})  # keeps its defaults
    if case.set == "moe":
        system = stack.apply(case.system).with_overrides(**token_fields(eta))
    else:
        system = case.system.with_overrides(**efficiency_fields(eta))
    return float(predict_row(case, system=system, stack=bare)["iteration_time_s"])


@dataclass(frozen=True)
class Curve:
    """A run's predicted log time on ``fine`` values of η (:data:`FINE`, or
    :data:`TOKEN_FINE` for the token-kernel efficiency of a MoE run)."""

    case: Case
    log_time: np.ndarray
    fine: np.ndarray = field(default_factory=lambda: FINE)

    @classmethod
    def of(cls, case: Case) -> Curve:
        grid, fine = (TOKEN_GRID, TOKEN_FINE) if case.set == "moe" else (GRID, FINE)
        t = np.array([predicted_time_s(case, e) for e in grid])
        # time ≈ a + b/η: interpolate linearly in 1/η, then take logs
        inv = 1.0 / grid
        return cls(case, np.log(np.interp(1.0 / fine, inv[::-1], t[::-1])), fine)

    def time_s(self, eta: float) -> float:
        return float(np.exp(np.interp(eta, self.fine, self.log_time)))


def fit(curves: list[Curve]) -> float:
    """η minimising Σ (log predicted − log measured)² over ``curves`` (of one kind)."""
    residual = sum((c.log_time - np.log(c.case.measured)) ** 2 for c in curves)
    return float(curves[0].fine[int(np.argmin(residual))])


def _key(case: Case) -> str:
    return case.system.name


def fit_by_gpu(curves: list[Curve]) -> dict[str, float]:
    """η per GPU (system preset) and per generation, pooled over ``curves``."""
    out: dict[str, float] = {}
    for key in sorted({_key(c.case) for c in curves}):
        out[key] = fit([c for c in curves if _key(c.case) == key])
    for gen in sorted({c.case.system.generation for c in curves}):
        out[gen] = fit([c for c in curves if c.case.system.generation == gen])
    return out


def _training_fit(curves: list[Curve]) -> dict[str, float]:  # noqa: D401
    """η per GPU and generation from the firm runs; a GPU with none falls back to its uncertain
    runs (partly inferred configurations), those with ZeRO-3 left out: DeepSpeed's 2021 ZeRO-3
    costs are not captured by the model (docs/model.md, limits)."""
    firm = [c for c in curves if not c.case.uncertain]
    loose = [c for c in curves if c.case.uncertain and c.case.execution.get("zero") != 3]
    return {**fit_by_gpu(loose), **fit_by_gpu(firm)}


def _eta_for(case: Case, table: dict[str, float]) -> float | None:
    return table.get(_key(case), table.get(case.system.generation))


def by_source(case: Case) -> str:
    """What leave-one-source-out holds out: the run's paper or release."""
    return case.source


def by_model(case: Case) -> str:
    """What leave-one-model-out holds out: the run's model (DeepSeek-V3, Qwen3-235B-A22B)."""
    return case.model.name


def family(case: Case) -> str:
    """The family of a run's stack (``Stack.family``): megatron or pytorch."""
    return load_stack(case.stack).family


def cross_validate(curves: list[Curve], held_out=by_source) -> list[dict]:
    """Per run: its source, measured time, in-sample and held-out predictions (s).

    In-sample: η fitted on its own stack's firm runs on its GPU (pooled over every source of
    its stack's family where its stack has none). Cross-validated: η fitted only on the runs
    whose ``held_out`` key (the source by default; :func:`by_model` for leave-one-model-out)
    differs from the run's — those of its family first (a PyTorch stack's η is another
    quantity than a Megatron one: other kernels around the same GEMMs), then, for a GPU its
    family has no other run of, every other run."""
    firm = [c for c in curves if not c.case.uncertain]
    by_stack = {}
    for stack in {c.case.stack for c in curves}:
        own = [c for c in firm if c.case.stack == stack]
        kin = [c for c in firm if family(c.case) == load_stack(stack).family]
        by_stack[stack] = {**fit_by_gpu(kin), **fit_by_gpu(own)}
    rows = []
    for source in sorted({held_out(c.case) for c in curves}):
        rest = [c for c in curves if held_out(c.case) != source]
        fam = family(next(c for c in curves if held_out(c.case) == source).case)
        others = {**_training_fit(rest),
                  **_training_fit([c for c in rest if family(c.case) == fam])}
        for c in (c for c in curves if held_out(c.case) == source):
            eta_in, eta_cv = _eta_for(c.case, by_stack[c.case.stack]), _eta_for(c.case, others)
            rows.append({
                "id": c.case.id, "source": c.case.source, "stack": c.case.stack,
                "family": fam, "held_out": source, "model": c.case.model.name,
                "generation": c.case.system.generation,
                "precision": c.case.execution.get("precision", "bf16"),
                "system": c.case.system.name, "strategy": c.case.strategy,
                "uncertain": c.case.uncertain,
                "measured_s": c.case.measured,
                "in_sample_s": np.nan if eta_in is None else c.time_s(eta_in),
                "cross_validated_s": np.nan if eta_cv is None else c.time_s(eta_cv),
                "eta_in_sample": eta_in, "eta_cross_validated": eta_cv})
    return rows


def stack_efficiencies(curves: list[Curve]) -> dict[str, dict[str, float]]:
    """Per stack, η fitted on its own firm runs, per GPU and generation (what its preset
    carries)."""
    firm = [c for c in curves if not c.case.uncertain]
    return {stack: fit_by_gpu([c for c in firm if c.case.stack == stack])
            for stack in sorted({c.case.stack for c in firm})}


def pooled_fit(curves: list[Curve], of_family: str = "megatron") -> dict[str, float]:
    """η per GPU and generation over every firm run of a family's stacks (what a stack
    without runs of its own carries)."""
    return fit_by_gpu([c for c in curves if not c.case.uncertain
                       and family(c.case) == of_family])


def error_table(rows, by: str = "source") -> pd.DataFrame:
    """Per ``by`` value (the source; or a population: ``generation``, ``precision``, ``model``)
    and over the firm runs of each family ("all firm runs" for the Megatron family's stacks,
    :data:`ALL_FIRM_PYTORCH` for the PyTorch ones): runs, mean and max |error| (%) in sample
    and cross-validated; error = 100·(1 − predicted / measured). The first column is named
    ``source`` whatever ``by`` is (the value's name)."""
    frame = pd.DataFrame(rows)
    frame["in_sample_pct"] = 100.0 * (1.0 - frame["in_sample_s"] / frame["measured_s"])
    frame["cross_validated_pct"] = 100.0 * (1.0 - frame["cross_validated_s"]
                                            / frame["measured_s"])
    parts = [(src, g) for src, g in frame.groupby(by)]
    fam = frame["family"] if "family" in frame else pd.Series("megatron", index=frame.index)
    if (fam == "pytorch").any():
        parts.append((ALL_FIRM_PYTORCH, frame[~frame["uncertain"] & (fam == "pytorch")]))
    # the Megatron family's summary keeps its name: every figure quoted before the PyTorch
    # stacks came (README, error bars) is this row
    parts.append(("all firm runs", frame[~frame["uncertain"] & (fam != "pytorch")]))
    out = []
    for name, g in parts:
        ins, cv = g["in_sample_pct"].abs(), g["cross_validated_pct"].abs()
        out.append({"source": name, "runs": len(g), "uncertain": bool(g["uncertain"].all()),
                    "in_sample_mean_pct": ins.mean(), "in_sample_max_pct": ins.max(),
                    "cross_validated_mean_pct": cv.mean(), "cross_validated_max_pct": cv.max(),
                    "cross_validated_runs": int(cv.notna().sum())})
    return pd.DataFrame(out)
