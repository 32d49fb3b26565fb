"""What the Post-training page computes: its form checked into a fine-tuning or an RL question,
answered on the scenario's model and system (so the control panel's hardware what-ifs — HBM,
NVLink domain, the GPU — move it) by ``model.finetune`` and ``model.rl_step``, asked by
:mod:`dashboard.jobs.post_training`. Pure: no Dash.

Fine-tuning is answered for every method at once (full, LoRA, QLoRA: each its fastest fitting
layout on the form's GPUs) — memory is where the methods differ most, so the page shows them
side by side; RL for the form's placement, its split searched unless pinned.
"""

from __future__ import annotations

import math
from typing import Any

from dashboard.controls.scenario import build_inputs, stack_of
from dashboard.figures import post_training as fp
from dashboard.jobs import post_training as jobs
from dashboard.views.page_form import (
    FormFields,
    FormInput,
    default_form,
    fields_of,
    query_of,
    whole,
)
from model import ModelError
from model.cli.numbers import count, duration_days, integer, quantity
from model.specs.execution_fields import BY_NAME
from model.specs.schema import Field
from model.specs.transformer import FIELDS as MODEL_FIELDS
from model.studies.finetune import TOKENS
from model.studies.rl import ALGORITHMS, PLACEMENTS, RL_FIELD, RL_STEPS
from model.validation.rl import accuracy as rl_accuracy

MAX_GPUS = 4096  # the page's searches stay within its latency budget
# each number of the form is a field declared once (its range, unit and help) ...
FIELDS: dict[str, Field] = {**RL_FIELD, "steps": RL_STEPS, "tokens": TOKENS,
                            "lora_rank": BY_NAME["lora_rank"],
                            **{f.name: f for f in MODEL_FIELDS
                               if f.name in ("seq_len", "global_batch")}}
# ... narrowed on the page only where its latency budget says so (a search's candidates grow
# with the sequence's and the batch's divisors)
NARROWED: dict[str, dict[str, float]] = {"seq_len": {"hi": 1_048_576},
                                         "global_batch": {"hi": 1_000_000}}
QUESTIONS = ("finetune", "rl")
TARGETS = ("all", "attn", "mlp", "qkv")


def _choices(values: tuple) -> tuple[tuple[str, Any], ...]:
    """A dropdown's (label, value) pairs, each value labelled as it reads."""
    return tuple((str(v), v) for v in values)


# the form, one record per input in the page's order, in three parts: both questions', then
# fine-tuning's and RL's (dashboard/views/page_form.py: FormInput)
COMMON_INPUTS: tuple[FormInput, ...] = (
    FormInput("question", "Question", "finetune", None, "choice", options=_choices(QUESTIONS)),
    FormInput("gpus", "GPUs", 8, step="1"))
FINETUNE_INPUTS: tuple[FormInput, ...] = (
    FormInput("tokens", "Training tokens", 2e9, "tokens"),
    FormInput("seq_len", "Sequence length", 4096, "seq_len", step="1"),
    FormInput("global_batch", "Global batch", 128, "global_batch", step="1"),
    FormInput("lora_rank", "LoRA rank", 16, "lora_rank", step="1"),
    FormInput("lora_targets", "LoRA targets", "all", None, "choice", options=_choices(TARGETS)))
RL_INPUTS: tuple[FormInput, ...] = (
    FormInput("prompts", "Prompts per step", 64, "prompts", step="1"),
    FormInput("samples", "Samples per prompt", 8, "samples", step="1"),
    FormInput("input_tokens", "Prompt tokens", 512, "input_tokens", step="1"),
    FormInput("output_tokens", "Mean answer tokens", 1024, "output_tokens", step="1"),
    FormInput("max_output_tokens", "Longest answer tokens", 4096, "max_output_tokens",
              step="1"),
    FormInput("placement", "Placement", "split", "placement", "choice",
              options=_choices(PLACEMENTS)),
    FormInput("generation_gpus", "Generation GPUs", "auto", None, "choice",
              options=_choices(("auto", 1, 2, 4, 8, 16, 32, 64, 128, 256, 512))),
    FormInput("algorithm", "Algorithm", "grpo", "algorithm", "choice",
              options=_choices(ALGORITHMS)),
    FormInput("off_policy", "One step off-policy", "no", None, "choice",
              options=_choices(("no", "yes"))),
    FormInput("steps", "RL steps", 1000, "steps", step="1"))
DEFAULT_FORM: dict[str, Any] = default_form((*COMMON_INPUTS, *FINETUNE_INPUTS, *RL_INPUTS))
CARDS = ("post-memory", "post-days", "post-timeline", "post-split")


def _choice(form: dict, key: str, allowed: tuple, what: str) -> str:
    value = form.get(key)
    if value not in allowed:
        raise ModelError(f"{what} must be one of {', '.join(allowed)}")
    return value


# the form's numbers in their fields' ranges, narrowed as NARROWED says
FORM_FIELDS = FormFields(FIELDS, NARROWED)
page_range = FORM_FIELDS.range
_whole = FORM_FIELDS.whole


def _finetune(form: dict) -> dict[str, Any]:
    tokens = form.get("tokens")
    lo, hi = page_range("tokens")
    if isinstance(tokens, bool) or not isinstance(tokens, (int, float)) or not (
            math.isfinite(tokens) and lo <= tokens <= hi):
        raise ModelError(f"training tokens must be a number in [{lo:g}, {hi:g}]")
    return {"tokens": float(tokens), "seq_len": _whole(form, "seq_len", "the sequence length"),
            "global_batch": _whole(form, "global_batch", "the global batch"),
            "lora_rank": _whole(form, "lora_rank", "the LoRA rank"),
            "lora_targets": _choice(form, "lora_targets", TARGETS, "LoRA targets")}


def _rl(form: dict) -> dict[str, Any]:
    return {"prompts": _whole(form, "prompts", "prompts per step"),
            "samples": _whole(form, "samples", "samples per prompt"),
            "input_tokens": _whole(form, "input_tokens", "input tokens"),
            "output_tokens": _whole(form, "output_tokens", "output tokens"),
            "max_output_tokens": _whole(form, "max_output_tokens", "the longest answer"),
            "placement": _choice(form, "placement", PLACEMENTS, "the placement"),
            "algorithm": _choice(form, "algorithm", ALGORITHMS, "the algorithm"),
            "off_policy": _choice(form, "off_policy", ("no", "yes"), "off-policy") == "yes",
            "steps": _whole(form, "steps", "RL steps")}


def checked_form(form: Any) -> dict[str, Any]:
    """The form's values, checked, or a ModelError in the form's words."""
    if not isinstance(form, dict):
        raise ModelError("the post-training form is missing")
    out = {"question": _choice(form, "question", QUESTIONS, "the question"),
           "gpus": whole(form, "gpus", 1, MAX_GPUS, "GPUs")}
    if out["question"] == "finetune":
        return {**out, **_finetune(form)}
    out.update(_rl(form))
    g = form.get("generation_gpus")
    out["generation_gpus"] = None if g in ("auto", None, "") else whole(
        form, "generation_gpus", 1, MAX_GPUS, "generation GPUs")
    return out


def form_query(form: dict[str, Any]) -> str:
    """The form as a URL query (empty fields left out), so a copied link reproduces the page."""
    return query_of(form, DEFAULT_FORM)


def form_from_query(search: Any) -> dict[str, Any]:
    """The form's fields a URL query gives (checked as typed ones are, by
    :func:`checked_form`)."""
    return fields_of(search, DEFAULT_FORM)


def _usd(value: float | None, decimals: int = 0, times: int = 1) -> str:
    """``times`` × ``value`` dollars, or words when the system has no price (None)."""
    if value is None:
        return "cost unknown (this GPU has no price: set its rental price)"
    return f"${times * value:,.{decimals}f}"


def finetune_headline(answers: dict[str, dict], refused: list[str], gpus: int) -> str:
    """The fine-tuning answer in one paragraph."""
    if not answers:
        return (f"No method fits on {gpus:,} GPUs (not even QLoRA): more GPUs, a smaller "
                "global batch or a shorter sequence.")
    parts = []
    for method, a in answers.items():
        lay = a["layout"]
        parts.append(f"{method}: {duration_days(a['days'])}, {a['tokens_per_s_per_gpu']:,.0f} "
                     f"tokens/s per GPU, {a['memory_gb']:.1f} GB per GPU, "
                     f"{_usd(a['cost_usd'])} (tp {lay['tp1']} · pp {lay['pp']} · dp "
                     f"{lay['dp']}; {a['trainable_params']:,.0f} trainable parameters)")
    text = f"On {gpus:,} GPUs — " + "; ".join(parts) + "."
    return text + (f" No layout of {', '.join(refused)} fits on these GPUs." if refused
                   else "")


def _s(seconds: float) -> str:
    """A step's part in seconds, three significant digits, never in scientific notation."""
    return quantity(seconds, "s")


def rl_headline(step: dict, steps: int, accuracy: str) -> str:
    """The RL answer in one paragraph, ending with its population's accuracy
    (:func:`model.validation.rl.accuracy`)."""
    pools = ("every GPU alternates" if step["placement"] == "colocated" else
             f"{count(step['generation_gpus'], 'GPU')} generating, "
             f"{integer(step['training_gpus'])} training"
             + (", one step off-policy" if step["off_policy"] else ""))
    return (f"{step['algorithm'].upper()}, {step['placement']} ({pools}): "
            f"{_s(step['step_s'])} per step = generation {_s(step['generation_s'])} (of "
            f"it the straggler tail {_s(step['tail_s'])}), forward passes "
            f"{_s(step['reference_s'])}, update {_s(step['training_s'])}, sync "
            f"{_s(step['sync_s'])}; GPUs idle {step['idle_gpu_share']:.0%}; "
            f"{_usd(step['cost_per_step_usd'], 2)} per step, {count(steps, 'step')} "
            f"{duration_days(steps * step['step_s'] / 86400)} and "
            f"{_usd(step['cost_per_step_usd'], 0, steps)}. Accuracy: {accuracy}.")


def build(scn: dict[str, Any], form: Any) -> tuple[dict[str, Any], str]:
    """(figures by card name, headline) of the page for a validated scenario and the form."""
    checked = checked_form(form)
    _, system = build_inputs(scn)
    pres = bool(scn.get("presentation"))
    if checked["question"] == "finetune":
        answers, refused = jobs.finetune_answers(scn, checked)
        return ({"post-memory": fp.memory_figure(answers, system.hbm_capacity_gb, pres),
                 "post-days": fp.days_figure(answers, pres),
                 "post-timeline": fp.timeline_figure({}, pres),
                 "post-split": fp.split_figure([], 0, pres)},
                finetune_headline(answers, refused, checked["gpus"]))
    result = jobs.rl_answer(scn, checked)
    summary, step = result.summary(), result.step
    return ({"post-memory": fp.memory_figure({}, system.hbm_capacity_gb, pres),
             "post-days": fp.days_figure({}, pres),
             "post-timeline": fp.timeline_figure(summary, pres),
             "post-split": fp.split_figure(list(result.splits), result.generation_gpus, pres)},
            rl_headline(summary, checked["steps"], rl_accuracy(
                system.generation, step.placement, step.off_policy, step.algorithm,
                step.precision, stack_of(scn))))
