"""A what-if scenario: every input of the dashboard as one flat, validated dict.

The schema is generated from the control table (:mod:`dashboard.controls.control_table`): the same
keys serve the controls, the URL fragment (a copied link reproduces the view) and the scenario JSON
download/upload. Keys carry units. Each bad value gets its reason next to the control it came
from, in that control's words (:mod:`dashboard.controls.inputs`). One key is no control: the
session's fitted software stack, ``fitted_stack`` (present only when the session holds one;
:mod:`dashboard.controls.fitted`), which the stack control's value ``fitted`` selects.
"""

from __future__ import annotations

import json
import re
from typing import Any

from dashboard.controls.control_record import Control
from dashboard.controls.control_table import BY_KEY as CONTROL
from dashboard.controls.control_table import CONTROLS
from dashboard.controls.fitted import FITTED, FITTED_KEY, fitted_checks, fitted_record
from dashboard.controls.inputs import check_value, number_text
from dashboard.controls.model_checks import model_checks
from dashboard.controls.presets import (
    PRESET_OF,
    preset_model,
    preset_stack,
    preset_system,
    preset_values,
)
from dashboard.controls.scenario_link import KEYS, renamed
from dashboard.controls.strategy_choice import (
    STRATEGY_KEYS,
    runnable,
    stack_record,
    with_supported_strategies,
)
from model import ModelError
from model.engine.request import Request
from model.physics.strategies import STRATEGIES
from model.specs import memo
from model.specs.execution import resolve_execution
from model.specs.hardware import System
from model.specs.schema import Field
from model.specs.stack import Stack
from model.specs.transformer import Transformer

# an upload is about 2 kB, 5 kB with a fitted stack (at most MAX_FITTED_BYTES: 8 kB as the
# file writes it); refuse anything larger
MAX_SCENARIO_BYTES = 16 * 1024

FIELDS: tuple[Field, ...] = tuple(c.field for c in CONTROLS)
BY_KEY = {f.name: f for f in FIELDS}


def group_keys(group: str) -> tuple[str, ...]:
    """The keys a group's preset fills (every key of the group but the preset's own)."""
    return tuple(c.key for c in CONTROLS if c.group == group and not c.preset)


MODEL_KEYS, SYSTEM_KEYS, EXECUTION_KEYS, PLAN_KEYS = (
    group_keys(g) for g in ("model", "system", "execution", "plan"))
# what the estimator's results depend on (cache keys): the presets and their groups, the mode
ESTIMATOR_KEYS = tuple(c.key for c in CONTROLS if c.group in PRESET_OF) + ("mode",)
# scenario key → the estimator's spec key, to attribute the estimator's errors to a control
SPEC_KEY = {c.key: c.spec for c in CONTROLS if c.spec and c.group in ("model", "system")}


def default_scenario() -> dict[str, Any]:
    """Every control's default: gpt3-1t on H200 (NVLink domain 8) with the newest software
    stack, every strategy, 4…16384 GPUs."""
    scn: dict[str, Any] = {}
    for group, preset in PRESET_OF.items():
        scn.update(preset_values(group, preset.default))
    for c in CONTROLS:
        if c.default is not None or c.key not in scn:
            scn[c.key] = c.default
    return {k: scn[k] for k in KEYS}


def with_presets(raw: dict[str, Any]) -> dict[str, Any]:
    """A partial scenario (a link such as ``#system=h100``) completed: the fields it does not
    give come from the presets it names, the rest from the defaults; an old file's renamed
    keys are read under their present names."""
    raw = renamed(raw)
    base = default_scenario()
    for group, preset in PRESET_OF.items():
        name = raw.get(preset.key)
        if isinstance(name, str) and name in preset.choices:
            base.update(preset_values(group, name))
    return with_supported_strategies({**base, **_attention_of_old(raw, base)},
                                     keep=tuple(k for k in STRATEGY_KEYS if k in raw))


def _attention_of_old(raw: dict[str, Any], base: dict[str, Any]) -> dict[str, Any]:
    """A scenario saved before the attention type was a control: KV heads other than the heads
    on a multi-head preset meant grouped-query attention."""
    if "attention" in raw or "kv_heads" not in raw or base["attention"] != "mha":
        return raw
    grouped = raw["kv_heads"] != raw.get("heads", base["heads"])
    return {**raw, "attention": "gqa"} if grouped else raw


def _spec_value(c: Control, value: Any) -> Any:
    return value * c.scale if c.scale != 1.0 else value


def estimator_value(c: Control, scn: dict[str, Any]) -> Any:
    """What the estimator receives for control ``c``: its value, or its ``off`` value while a
    condition hides it (a hidden MoE size of a dense model: 0; hidden KV heads: the heads)."""
    if c.off is not None and not c.applies(scn):
        return c.off(scn)
    return _spec_value(c, scn[c.key])


def build_inputs(scn: dict[str, Any]) -> tuple[Transformer, System]:
    """The estimator's model and system for a (field-valid) scenario. Raises ModelError."""
    def overrides(group: str) -> dict[str, Any]:
        return {c.spec: estimator_value(c, scn) for c in CONTROLS
                if c.group == group and c.spec}
    budget = {"tokens": None, "samples": None, scn["budget_kind"]: scn["budget"]}
    model = preset_model(scn["model"]).with_overrides(**overrides("model"), **budget)
    system = preset_system(scn["system"]).with_overrides(**overrides("system"))
    return model, system


def execution_of(scn: dict[str, Any]) -> dict[str, Any] | None:
    """The estimator's execution options (None in the paper mode: it models one execution)."""
    if scn.get("mode") == "paper":
        return None
    return {CONTROL[k].spec: scn[k] for k in EXECUTION_KEYS}


def request_of(scn: dict[str, Any], *, gpus: tuple[int, ...] = (),
               strategy: str | tuple[str, ...] = "all", top_k: int = 1,
               pins: dict[str, int] | None = None, max_gpus: int | None = None,
               costs: bool = False) -> Request:
    """The scenario's question as one :class:`~model.engine.request.Request` (model, system,
    stack, execution, mode), built once per computation: the views differ only in the GPUs,
    strategy, pins and rows they ask for (``costs``: with the Plan & cost page's inputs)."""
    model, system = build_inputs(scn)
    stack = stack_of(scn)
    strategy, pins = stack_layouts(stack, strategy, pins)
    return Request.build(model, system, global_batch=scn["global_batch"], gpus=gpus,
                         max_gpus=max_gpus, strategy=strategy, top_k=top_k, pins=pins,
                         mode="paper" if scn["mode"] == "paper" else None,
                         execution=execution_of(scn), stack=stack,
                         costs=costs_of(scn) if costs else None)


def stack_layouts(stack: str | Stack | None, strategy: str | tuple[str, ...],
                  pins: dict[str, int] | None) -> tuple[str | tuple[str, ...], dict | None]:
    """(strategy, pins) of a page's request: the strategies asked narrowed to those the stack
    runs (:func:`model.engine.layouts.stack_strategies`; llm-foundry on FSDP runs data
    parallelism only: the 1D strategy alone), so that a page asking for one the stack does not
    run (a link's) shows the first it runs. The request pins the dimensions the stack does not
    run (:mod:`model.engine.layouts`, where a pin the caller gives is refused in words)."""
    runs = runnable(stack_record(stack) if isinstance(stack, str) else stack)
    if runs == STRATEGIES:
        return strategy, pins
    asked = STRATEGIES if strategy == "all" else (strategy,) if isinstance(strategy, str) \
        else tuple(strategy)
    kept = tuple(s for s in asked if s in runs) or runs[:1]
    return (kept[0] if len(kept) == 1 else kept), pins


def costs_of(scn: dict[str, Any]) -> dict[str, Any]:
    """The site, pricing and failure inputs (``costs=`` of the estimator's calls)."""
    return {CONTROL[k].spec: scn[k] for k in PLAN_KEYS if CONTROL[k].spec}


def stack_of(scn: dict[str, Any]) -> str | Stack | None:
    """The software stack of the estimator's calls (None in the paper mode: it takes none): a
    preset's name, or the session's fitted stack as a record."""
    if scn.get("mode") == "paper":
        return None
    if scn["stack"] == FITTED:
        return fitted_record(scn[FITTED_KEY])
    return preset_stack(scn["stack"])


def estimator_inputs(scn: dict[str, Any]) -> dict[str, Any]:
    """What the estimator's results depend on, for cache keys: the :data:`ESTIMATOR_KEYS`,
    and the fitted stack's whole content while it is the stack (two fits never share)."""
    inputs = {k: scn[k] for k in ESTIMATOR_KEYS}
    if scn["stack"] == FITTED:
        inputs[FITTED_KEY] = scn[FITTED_KEY]
    return inputs


# the answers for the scenarios validated last: every callback validates its scenario store,
# which changes only when a control does (about 0.5 ms for 96 controls and the specs' checks)
_VALIDATED = memo.Table("validated scenarios", 64, memo.TABLES)
_PLAIN = frozenset((str, int, float, bool, type(None)))  # what the key's ``repr`` is taken of


def validate_scenario(raw: dict[str, Any]) -> tuple[dict[str, Any] | None, dict[str, str]]:
    """(clean scenario, {}) or (None, {key: message}) — one message per offending control.

    Missing keys take their defaults; unknown keys are an error under ``"_"``; a refused
    fitted stack, or ``stack`` "fitted" without one, an error under ``"stack"``. A scenario
    of plain values validated lately is answered from :data:`_VALIDATED` (new dicts of the
    same content): the same keys in the same order with values of the same types and texts
    (``repr``: 1 and True, 0.0 and -0.0 differ).
    """
    if not isinstance(raw, dict):
        return None, {"_": "a scenario is a JSON object"}
    values = raw.values()
    types = tuple(map(type, values))
    if not _PLAIN.issuperset(types):  # a fitted stack, or anything odd: computed each time
        return _validate(raw)
    key = (tuple(raw), tuple(map(type, raw)), types, tuple(map(repr, values)))
    found = _VALIDATED.get(key)
    if found is None:
        found = _validate(raw)
        _VALIDATED.put(key, found)
    clean, errors = found
    return (None if clean is None else dict(clean)), dict(errors)


def _validate(raw: dict[str, Any]) -> tuple[dict[str, Any] | None, dict[str, str]]:
    """:func:`validate_scenario` of a dict, computed."""
    errors: dict[str, str] = {}
    unknown = sorted(set(raw) - {*KEYS, FITTED_KEY}, key=str)
    if unknown:
        name = unknown[0]
        shown = f"'{name}'" if isinstance(name, str) and len(name) <= 80 else "(unreadable)"
        errors["_"] = f"unknown key {shown}"
    clean = default_scenario()
    for c in CONTROLS:
        if c.key in raw:
            value, message = (FITTED, "") if c.key == "stack" and raw[c.key] == FITTED else \
                check_value(c, raw[c.key])
            if message:
                errors[c.key] = message
            else:
                clean[c.key] = value
    errors.update(fitted_checks(raw, clean))
    if not errors:
        errors.update(_cross_checks(clean))
    return (None, errors) if errors else (clean, {})


def _labelled(message: str) -> tuple[str | None, str]:
    """An estimator message with its spec keys ('hbm_capacity_gb') replaced by the controls'
    labels, and the scenario key of the first one (None when it names none)."""
    first = None
    for name in re.findall(r"'([a-z_0-9]+)'", message):
        key = next((k for k, spec in SPEC_KEY.items() if spec == name), None)
        if key is None and name in EXECUTION_KEYS:
            key = name
        if key is not None:
            first = first or key
            message = message.replace(f"'{name}'", CONTROL[key].label)
    return first, re.sub(r"^(model|system|scenario): ", "", message)


def _cross_checks(scn: dict[str, Any]) -> dict[str, str]:
    """Checks that need several fields: GPU range, heatmap axes, and the specs themselves."""
    errors: dict[str, str] = {}
    if scn["gpus_min"] > scn["gpus_max"]:
        errors["gpus_min"] = ("GPUs (from) must not be larger than the largest count, GPUs (to) "
                              f"= {number_text(scn['gpus_max'])}")
    if scn["x_axis"] == scn["y_axis"]:
        errors["y_axis"] = "choose two different axes"
    if scn["recompute_layers"] and scn["recompute"] == "full":
        errors["recompute_layers"] = ("Recomputed layers per stage must be 0 with full "
                                      "recompute (full already recomputes every layer)")
    if scn["offload_layers"] and scn["offload"] in ("activations", "all"):
        errors["offload_layers"] = ("Offloaded layers per stage must be 0 with activation "
                                    f"offload ('{scn['offload']}' moves every layer's already)")
    errors.update(model_checks(scn))
    if errors:
        return errors
    try:
        _, system = build_inputs(scn)
        resolve_execution(execution_of(scn))
    except ModelError as exc:
        key, message = _labelled(str(exc))
        return {key or "_": message}
    problem = system.precision_problem(scn["precision"])  # the format × generation table
    if problem:
        errors["precision"] = problem
    if (scn["offload"] != "none" or scn["offload_layers"]) and system.host_memory_gb <= 0:
        key = "offload" if scn["offload"] != "none" else "offload_layers"
        errors[key] = f"{scn['system']} has no host memory tier; offload needs one"
    return errors


MAX_COUNTS = 24


def gpu_counts(scn: dict[str, Any]) -> list[int]:
    """The GPU counts of the scaling views: powers of two in [gpus_min, gpus_max] whatever the
    NVLink domain, so that domains compare at equal counts (an NVL72 system at 1,024 GPUs uses
    14 full domains and one partly filled). The paper mode cannot fill a domain partly: there,
    multiples NVS·2^k when the domain is not a power of two. At most 24 counts.

    Bounded for any input (the loop runs at most 64 times): ModelError unless nvs, gpus_min
    and gpus_max are positive integers."""
    nvs, lo, hi = (scn.get(k) for k in ("nvs", "gpus_min", "gpus_max"))
    for key, value in (("nvs", nvs), ("gpus_min", lo), ("gpus_max", hi)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ModelError(f"'{key}' must be a positive integer, got {value!r:.40}")
    unit = nvs if scn.get("mode") == "paper" and nvs & (nvs - 1) else 1
    counts = []
    for k in range(64):
        n = unit * 2**k
        if n > hi or len(counts) == MAX_COUNTS:
            break
        if n >= lo:
            counts.append(n)
    return counts


def to_json(scn: dict[str, Any]) -> str:
    """The scenario as pretty JSON (for download)."""
    fitted = {FITTED_KEY: scn[FITTED_KEY]} if scn.get(FITTED_KEY) else {}
    return json.dumps({**{k: scn[k] for k in KEYS}, **fitted}, indent=2)


def from_json(text: str | bytes) -> tuple[dict[str, Any] | None, dict[str, str]]:
    """Parse and validate an uploaded scenario (size-limited; JSON only, never pickle)."""
    if len(text) > MAX_SCENARIO_BYTES:
        return None, {"_": f"the file is larger than {MAX_SCENARIO_BYTES // 1024} KB"}
    try:
        data = json.loads(text)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:  # incl. huge numbers, depth
        return None, {"_": f"not valid JSON ({type(exc).__name__})"}
    if isinstance(data, dict):
        data = with_presets(data)  # what an older file does not say comes from its presets
    return validate_scenario(data)
