"""Held-out mixture-of-experts runs: predicted vs published throughput (:func:`predict`,
:func:`error_pct`; tests/test_held_out.py bounds the errors, ``python bench/moe_held_out.py
[--stack NAME] [--without-moe-fit]`` prints the figures).

The runs (``model/data/reference/moe_held_out.json``, each with its source) come from sources
other than the Megatron-Bridge performance summary the MoE calibration is fitted on: NVIDIA's
Megatron-MoE-ModelZoo (Mixtral 8x22B on 128 H100), Megatron-LM's MoE README (Mixtral 8x7B on 64
H100) and the DeepSeek-V3 technical report (2,048 H800). Nothing was ever fitted to them. Each is
predicted with its published layout pinned (TP, PP, EP, DP, and microbatch and virtual stages
where published), its precision, dispatcher and all-to-all overlap, TP-communication overlap and
FP8 parameter gather where its scripts set them, force-balanced routing (the
only routing the model prices without a published imbalance), and the stack of its date
(:func:`model.validation.sources.stack_by_date`); the memory strategy, not published, is the
MoE validation set's rule: selective recompute plus the fewest fully recomputed layers that fit,
or activation offload where cheaper. Throughput is compared in tokens/s per GPU: a published
model TFLOP/s is turned into tokens/s with the FLOP count its source used
(:func:`megatron_lm_flops_per_token`).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from model.engine.api import search_request
from model.engine.request import Request
from model.specs.hardware import load_system
from model.specs.hf_moe import model_from_hf
from model.specs.schema import DATA_DIR
from model.specs.stack import load_stack
from model.specs.transformer import Transformer
from model.validation.case import FITTING_DEPTH, fastest_fitting
from model.validation.sources import stack_by_date

RUNS = DATA_DIR / "reference" / "moe_held_out.json"
SYSTEMS = {"H100": "h100", "H800": "h800"}
# FP8 with block-wise scaling: DeepSeek-V3's recipe, Megatron's --fp8-recipe blockwise
PRECISIONS = {"BF16": "bf16", "FP8-blockwise": "fp8-blockwise"}


def records(path: Path = RUNS) -> list[dict[str, Any]]:
    return json.loads(path.read_text())["records"]


def megatron_lm_flops_per_token(r: dict[str, Any]) -> float:
    """FLOPs per token as Megatron-LM's ``num_floating_point_operations`` counts them (its
    TFLOP/s log line) for a GQA/SwiGLU model whose every layer is MoE with top-k experts:
    12·l·e²·((1 + g/a + s/e)·(a·d/e) + 1.5·k·f/e + V/(2·l·e)) — attention scores over the full
    s × s (not halved for causal masking), the untied LM head's V·e once more in the backward."""
    c = r["hf_config"]
    e, layers, heads = c["hidden_size"], c["num_hidden_layers"], c["num_attention_heads"]
    head_dim = c.get("head_dim") or e // heads
    groups, top_k = c["num_key_value_heads"], c["num_experts_per_tok"]
    ffn, vocab, s = c["intermediate_size"], c["vocab_size"], r["seq_len"]
    attention = (1 + groups / heads + s / e) * (heads * head_dim / e)
    return 12.0 * layers * e * e * (attention + 1.5 * top_k * ffn / e
                                    + vocab / (2.0 * layers * e))


def published_tokens_per_s(r: dict[str, Any]) -> float:
    """The published throughput in tokens/s per GPU."""
    if r.get("published_tokens_per_s_per_gpu"):
        return float(r["published_tokens_per_s_per_gpu"])
    assert r["flops_convention"] == "megatron-lm", r["id"]
    return float(r["published_tflops_per_gpu"]) * 1e12 / megatron_lm_flops_per_token(r)


def model_of(r: dict[str, Any]) -> Transformer:
    return model_from_hf(r["hf_config"], int(r["seq_len"]), name=str(r["model"]))


def execution_of(r: dict[str, Any]) -> dict[str, Any]:
    """The run's execution as published, the memory strategy as the MoE validation set's."""
    out: dict[str, Any] = {
        "precision": PRECISIONS[r["precision"]], "interleave": int(r["vp"] or 0),
        "ep_dispatcher": r["dispatcher"], "ep_overlap": bool(r["a2a_overlap"]),
        "moe_imbalance": 1.0, "recompute": "selective", "recompute_layers": "auto",
        "offload": ["none", "activations"]}
    if r["routing"].startswith("capacity factor"):
        out["moe_capacity_factor"] = 1.0
    for key, option in (("tp_comm_overlap", "tp_overlap"), ("fp8_param_gather",
                                                            "fp8_param_gather")):
        if r.get(key) is not None:  # as the source's scripts set it, else the stack's
            out[option] = bool(r[key])
    return out


def pins_of(r: dict[str, Any]) -> dict[str, int]:
    gpus, tp, pp, cp = int(r["n_gpus"]), int(r["tp"]), int(r["pp"]), int(r["cp"] or 1)
    pins = {"tp1": tp, "tp2": cp, "pp": pp, "dp": gpus // (tp * pp * cp), "ep": int(r["ep"]),
            "etp": int(r["etp"])}
    if r.get("microbatch"):
        pins["microbatch"] = int(r["microbatch"])
    return pins


def stack_of(r: dict[str, Any]) -> str:
    return stack_by_date(str(r["date"]))


def predict(r: dict[str, Any], stack: str | None = None, without_moe_fit: bool = False):
    """The best row of the search with the run's published layout pinned. ``without_moe_fit``
    (a diagnostic): the MoE token kernels at the full HBM rate instead of the efficiency fitted
    on the Megatron-Bridge MoE runs."""
    strategy = "context" if int(r["cp"] or 1) > 1 else "1d"
    chosen: Any = load_stack(stack or stack_of(r))
    if without_moe_fit:
        chosen = replace(chosen, moe_token_efficiency={})
    return search_request(Request.build(
        model_of(r), load_system(SYSTEMS[r["system"]]), global_batch=int(r["global_batch"]),
        gpus=int(r["n_gpus"]), strategy=strategy, pins=pins_of(r), execution=execution_of(r),
        stack=chosen, top_k=FITTING_DEPTH)).top.pipe(fastest_fitting)


def predicted_tokens_per_s(r: dict[str, Any], row) -> float:
    return int(r["global_batch"]) * int(r["seq_len"]) / (
        int(r["n_gpus"]) * float(row["iteration_time_s"]))


def error_pct(r: dict[str, Any], row) -> float:
    """Throughput error, 100·(predicted / published − 1): positive = predicted too fast."""
    return 100.0 * (predicted_tokens_per_s(r, row) / published_tokens_per_s(r) - 1.0)
