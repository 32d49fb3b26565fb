"""The model's shape rules on a scenario, in the controls' words: heads that divide the hidden
size, the attention type's sizes (KV heads for GQA, the ranks and head dims for MLA), a
mixture of experts' sizes, and a vocabulary for a preset that ties its LM head to the
embedding. Each failure is one message for the control it names; the first rule that fails
wins (:func:`dashboard.controls.scenario.validate_scenario` runs them after each value's own
check)."""

from __future__ import annotations

from typing import Any

from dashboard.controls.control_table import BY_KEY as CONTROL
from dashboard.controls.inputs import number_text
from model import load_model


def _at_least_one(scn: dict[str, Any], keys: tuple[str, ...], why: str) -> dict[str, str]:
    """The first of ``keys`` below 1, in its control's words."""
    for key in keys:
        if scn[key] < 1:
            return {key: f"{CONTROL[key].label} must be at least 1 {why}"}
    return {}


def _moe_checks(scn: dict[str, Any]) -> dict[str, str]:
    """A mixture of experts' sizes (none for a dense model: its MoE sizes do not apply)."""
    if not scn["experts"]:
        return {}
    errors = _at_least_one(scn, ("top_k", "expert_ffn"), "in a mixture of experts")
    if not errors and scn["top_k"] > scn["experts"]:
        errors = {"top_k": f"Experts per token ({number_text(scn['top_k'])}) must not exceed "
                           f"the routed experts ({number_text(scn['experts'])})"}
    if not errors and scn["dense_layers"] >= scn["layers"]:
        errors = {"dense_layers": f"Dense layers must be fewer than the layers "
                                  f"({number_text(scn['layers'])}): a mixture of experts "
                                  "needs at least one MoE layer"}
    return errors


def _attention_checks(scn: dict[str, Any]) -> dict[str, str]:
    """The sizes the attention type uses: KV heads (GQA) or the MLA ranks and head dims."""
    if scn["attention"] == "mla":
        return _at_least_one(scn, ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim",
                                   "v_head_dim"), "with MLA attention")
    if scn["attention"] == "gqa" and scn["heads"] % scn["kv_heads"]:
        return {"kv_heads": f"KV heads ({number_text(scn['kv_heads'])}) must divide the heads "
                            f"({number_text(scn['heads'])})"}
    return {}


def model_checks(scn: dict[str, Any]) -> dict[str, str]:
    """The model's shape rules, in the controls' words (the first that fails)."""
    if scn["hidden"] % scn["heads"]:
        return {"heads": f"Heads ({number_text(scn['heads'])}) must divide the hidden size "
                         f"({number_text(scn['hidden'])})"}
    errors = _attention_checks(scn) or _moe_checks(scn)
    if errors:
        return errors
    if scn["vocab"] == 0 and load_model(scn["model"]).tied_embeddings:
        return {"vocab": f"Vocabulary must be at least 1: {scn['model']} ties its LM head to "
                         "the embedding"}
    return {}
