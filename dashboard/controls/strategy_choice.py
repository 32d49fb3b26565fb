"""Strategies a scenario can run, chosen when a preset or a link names the model or the stack:
the Design page defaults to 2D SUMMA (the paper's strategy), which has no MoE, MLA or MTP op
table, so every MoE preset (DeepSeek-V3, Mixtral, Qwen3, …) would open on a refusal; and a
stack runs only its own layouts (:mod:`model.engine.layouts`: llm-foundry on FSDP runs data
parallelism only, so the 1D strategy alone, at tp 1)."""

from __future__ import annotations

from typing import Any

from dashboard.controls.control_table import BY_KEY as CONTROL
from dashboard.controls.fitted import FITTED, FITTED_KEY, check_fitted, fitted_record
from model import list_models, load_model
from model.engine.layouts import runs_words, stack_strategies
from model.errors import ModelError
from model.physics.strategies import LABELS, PRODUCTION, STRATEGIES, supports
from model.specs.stack import NONE, Stack, list_stacks, load_stack

STRATEGY_KEYS = ("strategy", "design_strategy")


def stack_record(stack: Any, mode: Any = None, fitted: Any = None) -> Stack | None:
    """The scenario's stack as a record: a preset's, the session's fitted one (``fitted``, the
    fitted-stack object) for "fitted"; None in the paper mode (no stack), for a name that is
    no preset or when it cannot be read (the scenario's validation says why)."""
    if mode == "paper":
        return None
    try:
        if stack == FITTED:
            clean, _ = check_fitted(fitted)
            return fitted_record(clean) if clean is not None else None
        # a preset's name only: the value comes from the browser, never a path to read
        return load_stack(stack) if stack in (*list_stacks(), NONE) else None
    except ModelError:
        return None


def runnable(stack: Stack | None) -> tuple[str, ...]:
    """The strategies ``stack`` runs (every one without a stack)."""
    return STRATEGIES if stack is None else stack_strategies(stack)


def strategy_options(stack: Stack | None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(Strategy options, Design strategy options): only those the stack runs ("all" too)."""
    runs = runnable(stack)
    run = [o for o in CONTROL["strategy"].options() if o["value"] in ("all", *runs)]
    design = [o for o in CONTROL["design_strategy"].options() if o["value"] in runs]
    return run, design


def with_supported_strategies(scn: dict[str, Any], keep: tuple[str, ...] = ()) -> dict[str, Any]:
    """The scenario with strategies its model and its stack can run: a design strategy the
    model's preset cannot model (2D SUMMA has no MoE, MLA or MTP op table) or the stack does
    not run becomes the first production one both can (1D), a single run strategy becomes
    "all". Keys in ``keep`` (those a link or a file gives) are left as they are: the page then
    says why it refuses them."""
    name = scn.get("model")
    if not isinstance(name, str) or name not in list_models():
        return scn
    model = load_model(name)
    runs = runnable(stack_record(scn.get("stack"), scn.get("mode"), scn.get(FITTED_KEY)))
    out = dict(scn)
    if "design_strategy" not in keep and out.get("design_strategy") in STRATEGIES \
            and not (supports(out["design_strategy"], model)
                     and out["design_strategy"] in runs):
        out["design_strategy"] = next(n for n in PRODUCTION if supports(n, model)
                                      and n in runs)
    if "strategy" not in keep and out.get("strategy") in STRATEGIES \
            and not (supports(out["strategy"], model) and out["strategy"] in runs):
        out["strategy"] = "all"
    return out


def with_run_strategies(scn: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """A link's or a file's scenario (its strategies kept: :func:`with_supported_strategies`)
    with each strategy its stack does not run replaced by the one the pages compute instead
    (``dashboard.controls.scenario.stack_layouts``: the first the stack runs, 1D), and the
    words saying so for the banner ('' when nothing changed): the Strategy radio then shows
    what the figures compute, not nothing selected."""
    stack = stack_record(scn.get("stack"), scn.get("compat"), scn.get(FITTED_KEY))
    runs = runnable(stack)
    changed = [k for k in STRATEGY_KEYS if scn.get(k) in STRATEGIES and scn[k] not in runs]
    if stack is None or not changed:
        return scn, ""
    asked = sorted({scn[k] for k in changed}, key=STRATEGIES.index)
    what = " or ".join(f"the {s} strategy ({LABELS[s]})" for s in asked)
    fields = " and ".join(CONTROL[k].label for k in changed)
    return ({**scn, **dict.fromkeys(changed, runs[0])},
            f"{fields} set to {runs[0]} ({LABELS[runs[0]]}), which the figures compute: "
            f"{runs_words(stack)}, not {what}.")
