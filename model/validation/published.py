"""Predicted vs measured: the estimator against published training runs.

The published runs live in the package, ``model/data/reference/`` (its README says where each
file comes from); ``--reference DIR`` / ``folder`` reads the first two sets from another folder:

* ``korthikanti``: the eight Megatron-LM runs of Korthikanti et al. 2022 (arXiv 2205.05198) on
  Selene (DGX A100 80GB): iteration time per run, and the memory breakdown (parameters +
  gradients + optimizer, activations) of each model without and with sequence parallelism +
  selective recompute. Calculon's predictions for the same runs are carried along.
* ``measurements``: other published runs with enough configuration to predict them (Narayanan
  et al. 2021 PTD-P and ZeRO-3, BLOOM-176B, Megatron-Bridge Llama 3 runs on H100/B200/GB200).
  Records the model cannot express (TPUs, GPUs without a preset, uneven pipeline stages,
  missing configuration) are listed with the reason they are skipped; its mixture-of-experts
  rows are in the ``moe`` set.
* ``moe``: Megatron-Bridge's DeepSeek-V3 and Qwen3-235B-A22B runs, releases 25.09–26.08
  (``reference/moe_measurements.json``, :mod:`model.validation.moe`).

Throughput in TFLOP/s per GPU is turned into iteration time with the formula its source used,
96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h)) FLOPs per iteration (Narayanan et al. 2021, eq. 3: full
recomputation counted); tokens/s per GPU into iteration time by GBS·s/(n·tokens/s).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from model.engine.api import search_request
from model.engine.request import Request
from model.engine.search import evaluate_request
from model.errors import ModelError
from model.specs.hardware import System, load_system
from model.specs.models import load_model
from model.specs.schema import DATA_DIR
from model.specs.transformer import transformer_from_dict
from model.validation.case import FITTING_DEPTH, Case, fastest_fitting
from model.validation.moe import moe_cases
from model.validation.sources import recipe_memory, source_and_stack

REFERENCE = DATA_DIR / "reference"  # the published runs, shipped with the package
# published runs of other Megatron-Bridge releases (each release a source of its own)
EXTRA_RUNS = REFERENCE / "megatron_bridge_extra.json"
REFERENCE_FILES = ("korthikanti_validation.json", "measurements.json")
# PyTorch-native runs: llm-foundry's A100 tables and torchtitan's Llama 3.1 H100 tables
# (bench/pytorch_runs.py writes it from the copied tables)
PYTORCH_RUNS = REFERENCE / "pytorch_runs.json"
GIB = 2.0**30
# a record's GPU name → preset, first match wins (GB200 before B200): the names of other sources
# ("H100 SXM", "NVIDIA B200", "GB300 NVL72", "A100-SXM4-40GB") map as well as this data's
GPU_MATCH = (("H100 96GB", "h100-96gb-500w"), ("GB300", "gb300-nvl72"), ("B300", "gb300-nvl72"),
             ("GB200", "gb200-nvl72"),
             ("B200", "b200"), ("H200", "h200"), ("H100", "h100"), ("A100", "a100"),
             ("MI300X", "mi300x"))
KORTHIKANTI_STACK = {"source": "korthikanti-2022", "stack": "megatron-lm-2022"}
KORTHIKANTI_MODELS = {"megatron-22B": "megatron-22b", "gpt3-175B": "gpt3-175b",
                      "turing-530B": "turing-530b", "megatron-1T": "megatron-1t"}


def reference_dir(folder: str | Path | None = None) -> Path:
    """The folder of the published runs: ``folder`` when given, else the package's own
    ``model/data/reference`` (never anything outside the package)."""
    path = Path(folder) if folder else REFERENCE
    missing = [name for name in REFERENCE_FILES if not (path / name).is_file()]
    if missing:
        raise ModelError(f"no reference data in '{path}': missing {', '.join(missing)}")
    return path


def _megatron_execution(mode: str, interleave: int) -> dict[str, Any]:
    """Korthikanti's modes on Megatron-LM 2022: unfused attention, fp16 with fp32 main grads,
    no distributed optimizer."""
    sp = mode in ("seq", "seqsel")
    recompute = {"full": "full", "sel": "selective", "seqsel": "selective"}.get(mode, "none")
    return {"recompute": recompute, "sequence_parallel": sp, "interleave": interleave, "zero": 0,
            "recompute_layers": 0,
            "flash_attention": False, "fp32_gradients": True, "precision": "fp16"}


def korthikanti_cases(folder: Path) -> list[Case]:
    """Iteration times and memory breakdowns of Korthikanti et al. 2022."""
    data = json.loads((folder / "korthikanti_validation.json").read_text())
    a100 = load_system("a100")
    cases = []
    for r in data["end_to_end_time"]:
        cases.append(Case(
            id=f"{r['model']}-{r['recompute_mode']}", set="korthikanti",
            metric="iteration_time_s", measured=r["measured_iteration_s"],
            model=load_model(KORTHIKANTI_MODELS[r["model"]]), system=a100, gpus=r["num_gpus"],
            global_batch=r["global_batch"], config={"tp1": r["tp"], "pp": r["pp"],
                                                    "dp": r["dp"], "microbatch": r["microbatch"]},
            execution=_megatron_execution(r["recompute_mode"], r["pipeline_interleaving"]),
            peer=r["calculon_iteration_s"], **KORTHIKANTI_STACK))
    # the memory was measured on the same runs: the same pipeline interleaving
    interleave = {r["model"]: r["pipeline_interleaving"] for r in data["end_to_end_time"]}
    for r in data["memory"]:
        common = dict(model=load_model(KORTHIKANTI_MODELS[r["model"]]), system=a100,
                      gpus=r["num_gpus"], global_batch=r["global_batch"],
                      config={"tp1": r["tp"], "pp": r["pp"], "dp": r["dp"],
                              "microbatch": r["microbatch"]},
                      execution=_megatron_execution(r["mode"], interleave.get(r["model"], 1)),
                      set="korthikanti-memory", **KORTHIKANTI_STACK)
        cases.append(Case(id=f"{r['model']}-{r['mode']}-params",
                          metric="params_grads_optimizer_gib",
                          measured=r["measured_params_grads_optimizer_GiB"],
                          peer=r["calculon_params_grads_optimizer_GiB"], **common))
        cases.append(Case(id=f"{r['model']}-{r['mode']}-activations", metric="activations_gib",
                          measured=r["measured_activations_GiB"],
                          peer=r["calculon_activations_GiB"], **common))
    return cases


def _narayanan_flops(m: dict[str, Any], gbs: int) -> float:
    """FLOPs per iteration counted by Narayanan et al. 2021, eq. 3 (recompute included)."""
    s, l, h, v = m["seq_len"], m["layers"], m["hidden"], m.get("vocab", 51200)
    return 96.0 * gbs * s * l * h * h * (1 + s / (6.0 * h) + v / (16.0 * l * h))


def _preset_of(gpu: str) -> str | None:
    name = str(gpu).upper()
    if "PCIE" in name:  # other clocks, power and links than the SXM presets
        return None
    return next((preset for key, preset in GPU_MATCH if key in name), None)


def record_system(sysinfo: dict[str, Any]) -> System:
    """The preset of a record's GPU, with the record's NVLink domain size and a 40 GB A100's
    capacity where they differ from the preset."""
    gpu = str(sysinfo.get("gpu", ""))
    system = load_system(_preset_of(gpu) or "")
    over: dict[str, Any] = {}
    nvl = sysinfo.get("nvlink_domain")
    if isinstance(nvl, int) and not isinstance(nvl, bool) and nvl >= 1 and (
            nvl != system.nvlink_domain_size):
        over["nvlink_domain_size"] = nvl
    if "40GB" in gpu.upper().replace(" ", ""):
        over["hbm_capacity_gb"] = 42.94  # 40,960 MiB (NVML), as the 80 GB preset
        # and its HBM2 at 1,555 GB/s (NVIDIA A100 datasheet: 40 GB SXM 1,555 GB/s, 80 GB
        # SXM 2,039 GB/s): element-wise kernels and FSDP2 copies run at this bandwidth
        over["hbm_bandwidth_gb_per_s"] = 1555.0
    return system.with_overrides(**over) if over else system


def _int(value: Any, default: int) -> int:
    """An integer field that may be absent or written "n/a" in a record."""
    if isinstance(value, bool):
        return default
    try:
        return int(value) if value not in (None, "") else default
    except (TypeError, ValueError):
        return default


def _record_skip(r: dict[str, Any]) -> str:
    m, p, gpu = r.get("model", {}), r.get("parallel", {}), r.get("system", {}).get("gpu", "")
    if r["id"].startswith("korthikanti22"):
        return "the same run is in the korthikanti set"
    if "moe" in m or m.get("attention") == "MLA":
        return ("a mixture of experts run: the moe set (reference/moe_measurements.json) holds "
                "the published MoE runs with their configs")
    if _preset_of(gpu) is None:
        return f"no system preset for '{gpu}'"
    if not all(isinstance(m.get(k), int) for k in ("layers", "hidden", "heads", "seq_len")):
        return "no model dimensions (coarse anchor)"
    if not all(isinstance(p.get(k), int) for k in ("tp", "pp", "global_batch", "microbatch")):
        return "parallel configuration incomplete"
    return ""


def _measured_time(r: dict[str, Any], gpus: int) -> float | None:
    meas, m, gbs = r["measured"], r["model"], r["parallel"]["global_batch"]
    if "iteration_time_s" in meas:
        return float(meas["iteration_time_s"])
    if "tokens_per_s_per_gpu" in meas:
        return gbs * m["seq_len"] / (gpus * meas["tokens_per_s_per_gpu"])
    if "tflops_per_gpu" in meas:
        return _narayanan_flops(m, gbs) / (gpus * meas["tflops_per_gpu"] * 1e12)
    return None


def measurement_case(r: dict[str, Any], set_name: str = "measurements") -> Case:
    """A record of ``measurements.json`` as a case (or with the reason it is skipped); a
    malformed record is skipped with what is wrong, never an exception."""
    base = Case(id=str(r.get("id", "?")), set=set_name, metric="iteration_time_s",
                measured=np.nan, uncertain=bool(r.get("uncertain")))
    try:
        base.skip = _record_skip(r)
        if not base.skip:
            _fill_case(base, r)
    except (KeyError, TypeError, ValueError, ZeroDivisionError, ModelError) as exc:
        base.skip = f"malformed record: {type(exc).__name__} {exc}"
    return base


def _fill_case(base: Case, r: dict[str, Any]) -> None:
    m, p, sysinfo = r["model"], r["parallel"], r["system"]
    gpus = int(sysinfo["n_gpus"])
    measured = _measured_time(r, gpus)
    if measured is None:
        base.skip = "no iteration time, tokens/s or TFLOP/s to compare"
        return
    llama = "llama" in m["name"].lower()
    stated = {k: m[k] for k in ("mlp", "bias", "dropout", "tied_embeddings",
                                "position_embedding", "norm") if k in m}
    model = transformer_from_dict({
        "name": m["name"], "layers": m["layers"], "hidden": m["hidden"], "heads": m["heads"],
        "kv_heads": m.get("kv_heads"), "ffn": m.get("ffn"), "seq_len": m["seq_len"],
        "vocab": m.get("vocab", 0), "mlp": "swiglu" if llama else "gelu", "bias": not llama,
        "dropout": not llama, "tied_embeddings": not llama and m.get("vocab", 0) > 0,
        "tokens": 1e12, **stated})
    tp, pp, cp = p["tp"], p["pp"], _int(p.get("cp"), 1)
    source, stack = source_and_stack(r)
    base.__dict__.update(source=source, stack=stack)
    base.__dict__.update(
        measured=measured, model=model, system=record_system(sysinfo),
        gpus=gpus, global_batch=p["global_batch"], strategy="context" if cp > 1 else "1d",
        config={"tp1": tp, "tp2": cp, "pp": pp, "dp": gpus // (tp * pp * cp),
                "microbatch": p["microbatch"]},
        execution={**record_execution(p), **recipe_memory(base.id), **r.get("execution", {})})


def record_execution(p: dict[str, Any]) -> dict[str, Any]:
    """What a record's parallel configuration states about its execution (the rest comes from
    its stack): precision, FSDP or ZeRO stage, recompute (not stated: the fewest fully
    recomputed layers that fit, as a recipe would choose), sequence parallelism if stated, and
    the virtual pipeline stages."""
    precision = str(p.get("precision", "")).lower()
    recompute = str(p.get("recompute") or "").lower()
    out: dict[str, Any] = {
        "precision": ("mxfp8" if "mx" in precision else "fp8" if "fp8" in precision
                      else "bf16" if "bf16" in precision else "fp16"),
        "interleave": _int(p.get("vp"), _int(p.get("virtual_pipeline_stages"), 1)),
    }
    if p.get("fsdp"):
        out["zero"] = 3
    elif _int(p.get("zero"), -1) >= 0:
        out["zero"] = _int(p.get("zero"), 0)
    if "full" in recompute:
        out["recompute"] = "full"
    elif recompute == "op-sac":  # TorchTitan's per-op policy (model.physics.op_sac)
        out.update(recompute="op-sac", recompute_layers=0)
    elif "selective" in recompute or "none" in recompute:
        out.update(recompute="selective", recompute_layers=0)
    else:  # not stated: the cheaper of partial recompute and activation offload that fits
        out.update(recompute="selective", recompute_layers="auto",
                   offload=["none", "activations"])
    if isinstance(p.get("sp"), bool):
        out["sequence_parallel"] = p["sp"]
    return out


def measurement_cases(folder: Path) -> list[Case]:
    data = json.loads((folder / "measurements.json").read_text())
    return [measurement_case(r) for r in data["records"]]


def extra_cases(path: Path = EXTRA_RUNS) -> list[Case]:
    """The held-out Megatron-Bridge runs of other releases (set ``megatron-bridge-extra``)."""
    data = json.loads(path.read_text())
    return [measurement_case(r, "megatron-bridge-extra") for r in data["records"]]


def pytorch_cases(path: Path = PYTORCH_RUNS) -> list[Case]:
    """The PyTorch-native runs (set ``pytorch``): llm-foundry A100, torchtitan H100."""
    data = json.loads(path.read_text())
    return [measurement_case(r, "pytorch") for r in data["records"]]


DENSE_SETS = ("korthikanti", "measurements", "extra", "pytorch")
SETS = DENSE_SETS + ("moe",)


def cases_of(path: Path, sets: tuple[str, ...]) -> list[Case]:
    cases: list[Case] = []
    if "korthikanti" in sets:
        cases += korthikanti_cases(path)
    if "measurements" in sets:
        cases += measurement_cases(path)
    if "extra" in sets:
        cases += extra_cases()
    if "pytorch" in sets:
        cases += pytorch_cases()
    if "moe" in sets:
        cases += moe_cases()
    return cases


def time_cases(folder: str | Path | None = None,
               sets: tuple[str, ...] = DENSE_SETS) -> list[Case]:
    """Every published iteration time the estimator can predict, skipped records left out:
    by default the dense sets (korthikanti, measurements and the other Megatron-Bridge
    releases), on which the stacks' GEMM efficiency is calibrated; ``sets`` may add ``moe``
    (its runs calibrate the MoE token-kernel efficiency, model.validation.calibrate)."""
    cases = cases_of(reference_dir(folder), sets)
    return [c for c in cases if not c.skip and c.metric == "iteration_time_s"]


def predict_row(case: Case, **overrides) -> pd.Series:
    """The estimator's result row for the case's published layout: one evaluation, or with
    lists in its execution (a choice the record does not state) the fastest fitting choice.
    ``overrides`` replace case fields (e.g. ``system``, ``stack``)."""
    c = {**case.__dict__, **overrides}
    execution = c["execution"]
    if not any(isinstance(v, list) for v in execution.values()):
        return evaluate_request(Request.build(
            c["model"], c["system"], global_batch=c["global_batch"], gpus=c["gpus"],
            strategy=c["strategy"], pins=c["config"], top_k=1, execution=execution,
            stack=c["stack"])).row
    if execution.get("offload") and c["system"].host_memory_gb <= 0:
        execution = {**execution, "offload": "none"}
    res = search_request(Request.build(
        c["model"], c["system"], global_batch=c["global_batch"], gpus=c["gpus"],
        strategy=c["strategy"], pins=c["config"], execution=execution, stack=c["stack"],
        top_k=FITTING_DEPTH))
    best = fastest_fitting(res.top)  # not a tight row (model.validation.case)
    if best is None:  # nothing fits: the plain choice, as published
        plain = {k: (v[0] if isinstance(v, list) else v) for k, v in execution.items()}
        return predict_row(case, **{**overrides, "execution": plain})
    return best


def predict(case: Case) -> float:
    """The estimator's value of the case's metric."""
    row = predict_row(case)
    if case.metric == "iteration_time_s":
        return float(row["iteration_time_s"])
    if case.metric == "params_grads_optimizer_gib":
        return float(row["weights_gb"] + row["gradients_gb"] + row["optimizer_gb"]) * 1e9 / GIB
    if case.metric == "activations_gib":
        return float(row["activations_gb"]) * 1e9 / GIB
    raise AssertionError(case.metric)


def run_validation(folder: str | Path | None = None, sets: tuple[str, ...] = DENSE_SETS
                   ) -> pd.DataFrame:
    """Every case with measured, predicted and error (%) = 100·(1 − predicted/measured)
    (positive: the estimator predicts less than was measured), plus Calculon's where known.
    ``sets``: by default the dense ones; add ``"moe"`` (``SETS``) for the MoE runs (the CLI's
    ``validate`` does; the dashboard's Validation page shows the dense sets until it has a
    place for them)."""
    cases = cases_of(reference_dir(folder), sets)
    rows = []
    for c in cases:
        row = {"id": c.id, "set": c.set, "metric": c.metric, "measured": c.measured,
               "predicted": np.nan, "error_pct": np.nan, "peer_calculon": c.peer,
               "peer_error_pct": np.nan if c.peer is None else 100 * (1 - c.peer / c.measured),
               "uncertain": c.uncertain, "skipped": c.skip}
        if not c.skip:
            try:
                row["predicted"] = predict(c)
                row["error_pct"] = 100.0 * (1.0 - row["predicted"] / c.measured)
            except ModelError as exc:
                row["skipped"] = f"cannot evaluate: {exc}"
        rows.append(row)
    return pd.DataFrame(rows)


def summary(frame: pd.DataFrame) -> pd.DataFrame:
    """Per set and metric: cases, mean and max absolute error (%), and Calculon's where known."""
    done = frame[frame["skipped"] == ""].copy()
    done["abs_error_pct"] = done["error_pct"].abs()
    done["peer_abs_error_pct"] = done["peer_error_pct"].abs()
    keys = ["set", "metric", "uncertain"]
    out = done.groupby(keys).agg(n=("id", "size"), mean_abs_error_pct=("abs_error_pct", "mean"),
                                 max_abs_error_pct=("abs_error_pct", "max"),
                                 calculon_mean_abs_error_pct=("peer_abs_error_pct", "mean"),
                                 calculon_max_abs_error_pct=("peer_abs_error_pct", "max"))
    return out.reset_index()
