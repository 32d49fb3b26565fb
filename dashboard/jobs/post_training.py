"""What the Post-training page asks the estimator: every fine-tuning method's answer
(``model.finetune``) on the scenario's request at the form's GPUs, sequence length and global
batch, or one RL step (``model.rl_step``) on the scenario's model, system and stack. The
requests are built by :func:`~dashboard.controls.scenario.request_of`, as every view's."""

from __future__ import annotations

from typing import Any

from dashboard.controls.scenario import build_inputs, request_of, stack_of
from model import FineTune, ModelError, RlResult, RlStep, finetune, rl_step
from model.studies.finetune import METHODS

TRAINED_FIELDS = ("trainable", "lora_rank", "lora_targets")  # the method's, not the panel's


def finetune_answers(scn: dict[str, Any], form: dict) -> tuple[dict[str, dict], list[str]]:
    """Each method's summary (those that fit) and the words of those that do not: the
    scenario's request (stack, execution, costs) at the form's GPUs, sequence length and
    global batch, the method's trained weights over the panel's."""
    request = request_of(scn, gpus=(form["gpus"],), strategy="1d", costs=True)
    given = request.execution_given()
    if isinstance(given, dict):
        given = {k: v for k, v in given.items() if k not in TRAINED_FIELDS}
    request = request.replace(model=request.model.with_overrides(seq_len=form["seq_len"]),
                              execution=given).with_workload(global_batch=form["global_batch"])
    answers, refused = {}, []
    for method in METHODS:
        ft = FineTune(method, form["tokens"], form["lora_rank"], form["lora_targets"])
        try:
            answers[method] = finetune(request, ft).summary()
        except ModelError:
            refused.append(method)
    return answers, refused


def rl_answer(scn: dict[str, Any], form: dict) -> RlResult:
    """One RL step of the form's (checked) rollout on the scenario's model, system and stack."""
    model, system = build_inputs(scn)
    step = RlStep(form["prompts"], form["samples"], form["input_tokens"],
                  form["output_tokens"], form["max_output_tokens"], form["placement"],
                  form["algorithm"], form["off_policy"])
    return rl_step(model, system, form["gpus"], step, stack=stack_of(scn),
                   generation_gpus=form["generation_gpus"])
