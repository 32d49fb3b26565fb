"""A stack fitted to the user's own measured runs (``python -m model calibrate``).

RUNS.json: ``{"runs": [{"model": NAME or a model object, "seq_len": L, "system": NAME or a
system object, "gpus": N, "global_batch": B, "layout": {"tp", "pp", "dp", "cp", "ep",
"microbatch", "interleave"}, "execution": {…the CLI's execution options…},
"tokens_per_s_per_gpu": X}]}`` — at most :data:`MAX_RUNS` runs. Each run's measured iteration
time is B·L / (N·X).

What is fitted: one parameter per system the runs ran on, η, the fraction of the BF16 matmul
peak the stack's GEMMs reach there (FP8 at 0.96 η, as scripts/calibrate), by least squares
of log time over that system's runs — the same machinery as the published stacks
(:mod:`model.validation.calibrate`). Attention kernels, element-wise passes and FSDP come from
the base stack's mechanisms, not from the fit. A parameter is determined by one run of its
system whose time depends on η (:func:`sensitivity`); a system asked for (``fit``) with no
run, or whose runs' times barely depend on η (communication-bound), is refused, naming the
runs that would pin it. Leave-one-out needs two runs of a system: each run predicted with η
fitted on the others. A run that cannot be is refused (:class:`ImpossibleRunError`, naming the
run and the bound): a throughput that is not finite or not positive, or above the GPU's dense
peak in the run's precision divided by the model's FLOPs per token (MFU above 1).
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from model.errors import ModelError
from model.specs import strict_json
from model.specs.hardware import System, load_system, system_from_dict
from model.specs.models import load_model
from model.specs.stack import Stack, load_stack, stack_from_dict
from model.specs.transformer import Transformer, transformer_from_dict
from model.validation.calibrate import FP8_RATIO, Curve, fit
from model.validation.case import Case

MAX_RUNS = 200
# a run pins η when doubling η changes its predicted time by at least this fraction
MIN_SENSITIVITY = 0.05
MAX_BYTES = 1_000_000
LAYOUT_KEYS = ("tp", "pp", "dp", "cp", "ep", "microbatch", "interleave")


def _model(value: Any, seq_len: Any, where: str) -> Transformer:
    if not isinstance(seq_len, int) or isinstance(seq_len, bool) or seq_len < 1:
        raise ModelError(f"{where}: 'seq_len' must be a positive integer")
    if isinstance(value, str):
        return load_model(value).with_overrides(seq_len=seq_len)
    if isinstance(value, dict):
        return transformer_from_dict({**value, "seq_len": seq_len})
    raise ModelError(f"{where}: 'model' must be a preset name or a model object")


def _system(value: Any, where: str) -> System:
    if isinstance(value, str):
        return load_system(value)
    if isinstance(value, dict):
        return system_from_dict(value)
    raise ModelError(f"{where}: 'system' must be a preset name or a system object")


class ImpossibleRunError(ModelError):
    """A measured run that cannot be: non-finite, non-positive, or faster than the GPU's peak
    allows for the model's FLOPs."""


def _positive(run: dict, key: str, where: str, kind=int) -> Any:
    value = run.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float) if kind is float else int):
        raise ModelError(f"{where}: '{key}' must be a positive {kind.__name__}")
    if not math.isfinite(value) or value <= 0:
        raise ImpossibleRunError(f"{where}: '{key}' is {value!r}; a measurement must be a "
                                 f"finite positive {kind.__name__}")
    return value


def peak_tokens_per_s(model: Transformer, system: System, precision: str) -> float:
    """The most tokens/s one GPU can train: its dense peak in ``precision`` (the fastest the
    GPU has when it lacks that one) over the model's FLOPs per token (6 × active matmul
    parameters + attention: :attr:`Transformer.model_flops_per_token`) — MFU 1."""
    try:
        peak = system.matrix_peak_flop_per_s(precision)
    except ModelError:
        peak = max(system.matrix_tflops_fp16, system.matrix_tflops_fp8,
                   system.matrix_tflops_fp4) * 1e12
    return peak / model.model_flops_per_token


def _physical(where: str, tps: float, model: Transformer, system: System,
              precision: str) -> None:
    """Refuse a throughput above the GPU's peak for the model's FLOPs, naming the bound."""
    bound = peak_tokens_per_s(model, system, precision)
    if tps > bound:
        raise ImpossibleRunError(
            f"{where}: {tps:,.6g} tokens/s per GPU is above what {system.name} can compute for "
            f"{model.name}: its {precision} peak allows at most {bound:,.0f} tokens/s per GPU "
            f"({model.model_flops_per_token / 1e9:,.1f} GFLOP per token at MFU 1)")


def run_case(run: Any, index: int, stack: str) -> Case:
    """One run of RUNS.json as a calibration case (its schema checked)."""
    where = f"runs[{index}]"
    if isinstance(run, dict) and isinstance(run.get("id"), str):
        where += f" ('{run['id']:.40}')"
    if not isinstance(run, dict):
        raise ModelError(f"{where}: expected an object")
    allowed = {"model", "seq_len", "system", "gpus", "global_batch", "layout", "execution",
               "tokens_per_s_per_gpu", "id"}
    unknown = sorted(set(run) - allowed)
    if unknown:
        raise ModelError(f"{where}: unknown key '{unknown[0]}'; allowed: "
                         f"{', '.join(sorted(allowed))}")
    model = _model(run.get("model"), run.get("seq_len"), where)
    system = _system(run.get("system"), where)
    gpus, gbs = _positive(run, "gpus", where), _positive(run, "global_batch", where)
    tps = _positive(run, "tokens_per_s_per_gpu", where, float)
    layout = run.get("layout") or {}
    if not isinstance(layout, dict) or set(layout) - set(LAYOUT_KEYS):
        raise ModelError(f"{where}: 'layout' must be an object with keys among "
                         f"{', '.join(LAYOUT_KEYS)}")
    execution = run.get("execution") or {}
    if not isinstance(execution, dict):
        raise ModelError(f"{where}: 'execution' must be an object of execution options")
    precision = str(execution.get("precision") or
                    load_stack(stack).execution.get("precision") or "bf16")
    _physical(where, float(tps), model, system, precision)
    tp, pp, cp = (int(layout.get(k, 1)) for k in ("tp", "pp", "cp"))
    dp = int(layout.get("dp", gpus // max(tp * pp * cp, 1)))
    config = {"tp1": tp, "tp2": cp, "pp": pp, "dp": dp,
              "microbatch": int(layout.get("microbatch", 1))}
    if layout.get("interleave"):
        execution = {**execution, "interleave": int(layout["interleave"])}
    return Case(id=str(run.get("id", f"run{index}")), set="user", metric="iteration_time_s",
                measured=gbs * model.seq_len / (gpus * tps), model=model, system=system,
                gpus=gpus, global_batch=gbs, strategy="context" if cp > 1 else "1d",
                config=config, execution=execution, stack=stack, source=f"run{index}")


def read_runs(path: str | Path, stack: str) -> list[Case]:
    """The runs of a RUNS.json file (size-limited, schema-checked)."""
    p = Path(path)
    if not p.is_file():
        raise ModelError(f"runs file '{path}' not found")
    if p.stat().st_size > MAX_BYTES:
        raise ModelError(f"runs file '{path}' is over {MAX_BYTES // 1000} kB")
    return runs_from_text(p.read_bytes(), stack)


def runs_from_text(text: bytes | str, stack: str, max_runs: int = MAX_RUNS) -> list[Case]:
    """The runs of a RUNS.json document (its bytes or text; schema-checked, at most
    ``max_runs``): what the command line reads from a file and the dashboard from an upload."""
    data = strict_json.loads(text, "runs file")  # NaN, Infinity, 1e308, 5,000 digits: refused
    runs = data.get("runs") if isinstance(data, dict) else None
    if not isinstance(runs, list) or not runs:
        raise ModelError("runs file: expected {\"runs\": [ … ]} with at least one run")
    if len(runs) > max_runs:
        raise ModelError(f"runs file: {len(runs)} runs; at most {max_runs}")
    return [run_case(r, i, stack) for i, r in enumerate(runs)]


def sensitivity(curve: Curve) -> float:
    """How much the run's predicted time falls when η doubles (0.4 → 0.8): 1 − t(0.8)/t(0.4);
    about 0.5 for a compute-bound run, 0 for one whose time does not depend on η."""
    return 1.0 - curve.time_s(0.8) / curve.time_s(0.4)


def calibrate_runs(cases: list[Case], systems: list[str] | None = None) -> dict[str, Any]:
    """η per system fitted on ``cases`` (each predicted with its stack's mechanisms: see the
    module docstring), with each run's in-sample and leave-one-out prediction; refuses
    systems no run pins."""
    have = sorted({c.system.name for c in cases})
    wanted = systems or have
    missing = [s for s in wanted if s not in have]
    if missing:
        raise ModelError(f"cannot fit {', '.join(missing)}: no run pins its efficiency; add a "
                         f"run on {missing[0]} (any model and layout) — the runs are on "
                         f"{', '.join(have)}")
    curves = [Curve.of(c) for c in cases if c.system.name in wanted]
    for system in wanted:
        mine = [c for c in curves if c.case.system.name == system]
        if max(sensitivity(c) for c in mine) < MIN_SENSITIVITY:
            raise ModelError(
                f"cannot fit {system}: its runs' times hardly depend on the GEMM efficiency "
                f"(communication- or memory-bound: at most {100 * MIN_SENSITIVITY:.0f} % per "
                "doubling), so they do not pin it; add a compute-bound run on "
                f"{system} (a larger model or microbatch on fewer GPUs)")
    fitted = {s: fit([c for c in curves if c.case.system.name == s]) for s in wanted}
    rows = []
    for i, c in enumerate(curves):
        mates = [o for j, o in enumerate(curves) if j != i and
                 o.case.system.name == c.case.system.name]
        loo = c.time_s(fit(mates)) if mates else np.nan
        rows.append({"id": c.case.id, "system": c.case.system.name,
                     "measured_s": c.case.measured,
                     "in_sample_s": c.time_s(fitted[c.case.system.name]),
                     "leave_one_out_s": loo})
    return {"efficiency": fitted, "runs": rows}


def fitted_stack(base: Stack, name: str, efficiency: dict[str, float]) -> Stack:
    """``base`` with the fitted GEMM and (unless its kernel is benchmarked) attention
    efficiency per system."""
    data = base.to_dict()
    gemm = {**data["gemm_efficiency"]}
    attention = {**data["attention_efficiency"]}
    for system, eta in efficiency.items():
        gemm[system] = {"bf16": round(eta, 4), "fp8": round(FP8_RATIO * eta, 4),
                        "mxfp8": round(FP8_RATIO * eta, 4)}
        attention[system] = round(eta, 4)
    data.update(name=name, gemm_efficiency=gemm, attention_efficiency=attention,
                source=f"fitted by 'python -m model calibrate' on the user's runs, from "
                       f"{base.name}: {base.source}")
    data.pop("base", None)
    return replace(stack_from_dict(data), name=name)
