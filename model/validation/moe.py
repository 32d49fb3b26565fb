"""The mixture-of-experts validation set: Megatron-Bridge's published DeepSeek-V3 and
Qwen3-235B-A22B pre-training runs (``reference/moe_measurements.json``, 63 runs, releases
25.09–26.08 on DGX H100, DGX B200/B300 and GB200/GB300 NVL72).

Each record states its model as a Hugging Face config (read by :mod:`model.specs.hf_moe`), the
system, precision, global batch, microbatch, sequence, TP/PP/CP/VP/EP, and the measured tokens/s
per GPU and model TFLOP/s per GPU. How a record becomes a case:

* model: the config, with no MTP module for the page's "w/o MTP" rows (25.11);
* system: GB300 / GB200 → the NVL72 presets, B300 / B200 → the 8-GPU DGX presets, H100;
* precision: MXFP8 and FP8-MX → mxfp8, FP8 and FP8-CS → fp8 (current scaling), BF16 → bf16;
  the 25.09 page has no precision column: its numbers outside the parentheses are the per-tensor
  FP8 recipe (the parenthesised ones use "different quantization granularities", MXFP8 on
  Blackwell and 128×128 blocks on H100), read as fp8, as the dense 25.09 rows are;
* routing: force-balanced (imbalance 1.0), as the page states; the 25.09 "tokendrop" rows run
  Megatron-Core's token-drop recipe, capacity factor 1.0 with padding to capacity
  (``moe_expert_capacity_factor`` 1.0, ``moe_pad_expert_input_to_capacity``): with balanced
  routing every expert gets exactly its capacity, so it costs what dropless balanced routing
  does; the capacity factor is set to 1.0 all the same;
* layout: dp = n/(tp·pp·cp), EP folded over tp·cp·dp, ETP 1 (the recipes' base configs),
  interleave = VP (n/a: 1); memory strategy not stated: the fewest fully recomputed layers that
  fit, or activation offload where cheaper (as the dense records);
* DeepSeek-V3's recipe (Megatron-Bridge src/megatron/bridge/recipes/deepseek/deepseek_v3.py at
  v0.1.0rc4 to v0.5.0, perf_recipes/deepseek/common.py at v0.6.0): the precision-aware
  optimizer with BF16 Adam moments (``use_precision_aware_optimizer``, ``exp_avg_dtype`` and
  ``exp_avg_sq_dtype`` bfloat16: ``optimizer_bf16_moments``), and its benchmark scripts the
  fused router (``moe_router_fusion = True``: scripts/performance/configs/deepseek at v0.1.0rc4
  to v0.5.0) in every release; Qwen3's recipes keep fp32 moments
  (src/megatron/bridge/recipes/qwen/qwen3_moe.py) and fuse the router from 26.02 (v0.3.0: the
  stack's default);
* dispatcher and all-to-all overlap: as the record's ``recipe`` gives them (its release's
  benchmark recipe at the release's git tag: flex/HybridEP or DeepEP vs NCCL all-to-all,
  ``moe_a2a_overlap``); they changed from release to release (26.06 turned the overlap on for
  GB200/GB300 MXFP8);
* stack: the release's (``mbridge2604…`` → megatron-bridge-26.04); a patch release (26.02.01,
  26.04.01, 26.06.01) runs its release's recipes with fixes, so it maps to that release's stack
  and belongs to that release's source in the cross-validation (a near-duplicate of a release's
  runs must not help predict them).

Records the model cannot express are listed with the reason (e.g. uneven virtual-pipeline
chunks: the interleaving rule needs V to divide a stage's layers).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from model.engine.rules import stage_layout
from model.errors import ModelError
from model.specs.hardware import load_system
from model.specs.hf_moe import model_from_hf
from model.specs.schema import DATA_DIR
from model.specs.stack import load_stack
from model.validation.case import Case
from model.validation.sources import source_and_stack

MOE_RUNS = DATA_DIR / "reference" / "moe_measurements.json"
SYSTEMS = {"GB300": "gb300-nvl72", "GB200": "gb200-nvl72", "B300": "b300", "B200": "b200",
           "H100": "h100"}
PRECISIONS = {"MXFP8": "mxfp8", "FP8-MX": "mxfp8", "FP8": "fp8", "FP8-CS": "fp8",
              "BF16": "bf16", "": "fp8"}
SET = "moe"
DEEPSEEK = "DeepSeekV3"  # the records' model name for DeepSeek-V3


def moe_execution(r: dict[str, Any]) -> dict[str, Any]:
    """A record's execution over its stack's defaults (module docstring)."""
    out: dict[str, Any] = {
        "precision": PRECISIONS[str(r.get("precision") or "")],
        "interleave": int(r["vp"]) if r.get("vp") else 1,
        "moe_imbalance": 1.0,
        "ep_dispatcher": r["recipe"]["dispatcher"],
        "ep_overlap": bool(r["recipe"]["a2a_overlap"]),
        "recompute": "selective", "recompute_layers": "auto",
        "offload": ["none", "activations"],
    }
    if r.get("model") == DEEPSEEK:
        out.update(optimizer_bf16_moments=True, moe_router_fusion=True)
    if r.get("variant") == "tokendrop":
        out["moe_capacity_factor"] = 1.0
    if r.get("fsdp"):
        out["zero"] = 3
    return out


def moe_case(r: dict[str, Any]) -> Case:
    """A record as a case of the ``moe`` set, or with the reason it is skipped; a malformed
    record is skipped with what is wrong, never an exception."""
    base = Case(id=str(r.get("id", "?")), set=SET, metric="iteration_time_s",
                measured=float("nan"))
    try:
        _fill(base, r)
    except (KeyError, TypeError, ValueError, ZeroDivisionError, ModelError) as exc:
        base.skip = f"malformed record: {type(exc).__name__} {exc}"
    return base


def _fill(base: Case, r: dict[str, Any]) -> None:
    if r.get("pp") is None:
        base.skip = "pipeline parallel size not stated"
        return
    model = model_from_hf(r["hf_config"], int(r["seq_len"]), name=str(r["model"]))
    if r.get("variant") == "w/o MTP":
        model = model.with_overrides(mtp_layers=0)
    gpus, gbs = int(r["n_gpus"]), int(r["global_batch"])
    tp, pp, cp = int(r["tp"]), int(r["pp"]), int(r.get("cp") or 1)
    source, stack = source_and_stack(r)
    base.__dict__.update(
        measured=gbs * model.seq_len / (gpus * float(r["tokens_per_s_per_gpu"])),
        model=model, system=load_system(SYSTEMS[r["system"]]), gpus=gpus, global_batch=gbs,
        strategy="context" if cp > 1 else "1d", source=source, stack=stack,
        config={"tp1": tp, "tp2": cp, "pp": pp, "dp": gpus // (tp * pp * cp),
                "microbatch": int(r["microbatch"]), "ep": int(r["ep"]), "etp": 1},
        execution=moe_execution(r))
    vp = base.execution["interleave"]
    if vp > 1 and _uneven_chunks(base, vp):
        base.skip = (f"uneven virtual-pipeline chunks ({model.pipeline_layers} layers over "
                     f"pp {pp} × vp {vp}) are not modelled")


def _uneven_chunks(case: Case, vp: int) -> bool:
    """Whether vp virtual stages do not divide the fullest stage's layers (the stack's
    pipeline split; Megatron-Core's custom pipeline layouts allow uneven chunks)."""
    ends = bool(load_stack(case.stack).execution.get("ends_count_as_layers"))
    middle, _ = stage_layout(case.model, case.config["pp"], ends)
    return int(middle) % vp != 0


def moe_records(path: Path = MOE_RUNS) -> list[dict[str, Any]]:
    return json.loads(path.read_text())["records"]


def moe_cases(path: Path = MOE_RUNS) -> list[Case]:
    """Every record of the MoE set as a case (skipped ones carry their reason). A published id
    shared by runs of different global batches (26.06's two GB300 DeepSeek-V3 rows) gets the
    batch appended to each, ``…_gbs15360``, so every case names one run."""
    records = moe_records(path)
    seen = Counter(str(r.get("id", "?")) for r in records)
    cases = [moe_case(r) for r in records]
    for case, r in zip(cases, records):
        if seen[case.id] > 1:
            case.id = f"{case.id}_gbs{r.get('global_batch')}"
    return cases
