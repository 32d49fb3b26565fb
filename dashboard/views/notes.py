"""Short texts the views show beside their numbers: the global batch in both units with its
critical-batch warning (:mod:`model.specs.batch`), and the cross-validated error bar of a
predicted training time or rate (:mod:`model.validation.error_bars`). The estimator computes;
these only format."""

from __future__ import annotations

import math
from typing import Any

from dash import html

from dashboard.controls.fitted import FITTED, FITTED_KEY, fit_error_bar
from dashboard.controls.inputs import number_text
from dashboard.controls.scenario import build_inputs
from model import ModelError, load_model
from model.cli.numbers import duration_days, fixed, number
from model.physics.strategies import STRATEGY_NAMES
from model.specs.batch import critical_batch_warning as batch_warning
from model.specs.stack import NONE as NO_STACK
from model.specs.stack import load_stack
from model.validation.error_bars import ErrorBar, error_bar
from model.validation.user_bars import idealised_reason


def tokens_text(tokens: float) -> str:
    """12,582,912 → '12.6M', 1e12 → '1T', 1.5e16 → '15,000T' (never '1.5e+04T')."""
    for size, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
        if tokens >= size:
            return f"{number(tokens / size)}{suffix}"
    return number_text(tokens)


def critical_batch_warning(scn: dict[str, Any]) -> str:
    """The critical-batch warning of :func:`model.specs.batch.critical_batch_warning` (the
    CLI prints the same words); '' below it, without a vocabulary or with invalid inputs."""
    try:
        model, _ = build_inputs(scn)
    except ModelError:
        return ""
    return batch_warning(model, scn["global_batch"])


def _preset_batch(scn: dict[str, Any]) -> str:
    """Where the preset's batch comes from, when the batch is the preset's."""
    preset = load_model(scn["model"])
    if preset.global_batch is None:
        return (f"{scn['model']} publishes no global batch: "
                f"{number_text(scn['global_batch'])} is this dashboard's default.")
    if preset.global_batch == scn["global_batch"]:
        return f"The batch {scn['model']} was published with."
    return ""


def batch_note(scn: dict[str, Any]) -> list[Any]:
    """The line under the global batch: both units, the preset's source, the warning."""
    tokens = scn["global_batch"] * scn["seq_len"]
    source = load_model(scn["model"]).global_batch_source
    parts: list[Any] = [html.Span(
        f"= {tokens_text(tokens)} tokens per step ({number_text(scn['global_batch'])} × "
        f"{number_text(scn['seq_len'])}). {_preset_batch(scn)}", title=source or None)]
    warning = critical_batch_warning(scn)
    if warning:
        parts.append(html.Div(warning, className="ctl-warning", role="status"))
    return parts


def error_bar_of(scn: dict[str, Any], strategy: str | None = None) -> ErrorBar | None:
    """The error bar of the scenario's predictions made with ``strategy`` (default: the
    scenario's Strategy control; "all": any): the cross-validated error of the population they
    belong to (dense or MoE, its software stack, its system), or "not validated" — also where
    no scored run used the strategy (:func:`model.validation.error_bars.error_bar`); None in
    the paper mode and without a stack (uncalibrated). The user's fitted stack: its own
    leave-one-out error on their runs of the scenario's system
    (:func:`dashboard.controls.fitted.fit_error_bar`), never a preset's, and none for an
    idealised strategy (:func:`model.validation.user_bars.idealised_reason`)."""
    if scn.get("mode") == "paper" or scn.get("stack") in (None, NO_STACK):
        return None
    strategy = _strategy(scn, strategy)
    if scn["stack"] == FITTED:
        name = scn[FITTED_KEY]["stack"]["name"]
        why = idealised_reason(name, strategy)
        return (ErrorBar(math.nan, math.nan, 0, name, system=scn["system"], reason=why) if why
                else fit_error_bar(scn[FITTED_KEY], scn["system"]))
    try:
        model, _ = build_inputs(scn)
    except ModelError:
        return None
    return error_bar(scn["stack"], model.moe, scn["system"], strategy=strategy)


def _strategy(scn: dict[str, Any], strategy: str | None) -> str | None:
    """The strategy asked (default the scenario's Strategy control), None for "all" or an
    unknown name (a damaged scenario: no strategy check)."""
    name = strategy if strategy is not None else scn.get("strategy")
    return name if name in STRATEGY_NAMES else None


_ASK = object()  # the error bar not given: worked out from the scenario


def not_validated(scn: dict[str, Any], system: str | None = None,
                  strategy: str | None = None) -> str:
    """'not validated: no published dense run on mi300x was ever scored' when the scenario's
    predictions (on ``system``, a preset name; default the scenario's; with ``strategy``, as
    :func:`error_bar_of`) have no cross-validated error bar, '' when they have one or carry
    none (paper mode, no stack)."""
    if system is not None and system != scn.get("system"):
        if scn.get("mode") == "paper" or scn.get("stack") in (None, NO_STACK, FITTED):
            return ""
        try:
            model, _ = build_inputs(scn)
        except ModelError:
            return ""
        bar = error_bar(scn["stack"], model.moe, system, strategy=_strategy(scn, strategy))
    else:
        bar = error_bar_of(scn, strategy)
    if bar is None or bar.validated:
        return ""
    return bar.text if bar.text.startswith("not validated") else f"not validated: {bar.text}"


def stack_lineage(scn: dict[str, Any]) -> str:
    """The software stack the scenario's predictions are calibrated to, in its own words:
    'Megatron-Bridge 26.08 (Megatron-Core + Transformer Engine)', 'Composer/llm-foundry on
    PyTorch FSDP1', 'your fitted stack'; '' without one (paper mode, no stack)."""
    name = scn.get("stack")
    if scn.get("mode") == "paper" or name in (None, NO_STACK):
        return ""
    if name == FITTED:
        return "your fitted stack"
    try:
        description = load_stack(name).description
    except ModelError:
        return str(name)
    return description.split(":")[0].strip() or str(name)


def days_text(scn: dict[str, Any], days: float, bar: Any = _ASK) -> str:
    """'182.0 days (173.0–191.0, ±5.1 % … on 10 runs of every stack on gb200-nvl72)', '182.0
    days (not validated: no published dense run on mi300x was ever scored)', or '182.0 days'.
    ``bar``: the scenario's :func:`error_bar_of` when the caller has it (it builds the model)."""
    bar = error_bar_of(scn) if bar is _ASK else bar
    if bar is None or not math.isfinite(days):
        return duration_days(days)
    if not bar.stated:
        return f"{duration_days(days)} ({bar.text})"
    low, high = bar.time_range(days)
    span = (f"{fixed(low)}–{fixed(high)}" if low >= 1
            else f"{duration_days(low)}–{duration_days(high)}")
    return f"{duration_days(days)} ({span}, {bar.text})"


def rate_text(scn: dict[str, Any], per_s: float, unit: str = "samples/s",
              bar: Any = _ASK) -> str:
    """'12.3 samples/s (11.7–12.9)', '12.3 samples/s (not validated)', or without a range when
    there is no error bar (``bar``: as :func:`days_text`)."""
    bar = error_bar_of(scn) if bar is _ASK else bar
    if bar is None or not math.isfinite(per_s):
        return f"{fixed(per_s)} {unit}"
    if not bar.validated:
        return f"{fixed(per_s)} {unit} (not validated)"
    if not bar.stated:
        return f"{fixed(per_s)} {unit} (interval not stated)"
    low, high = bar.rate_range(per_s)
    return f"{fixed(per_s)} {unit} ({fixed(low)}–{fixed(high)})"
