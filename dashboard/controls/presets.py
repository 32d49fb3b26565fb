"""The presets of the dashboard's controls: a model, system or software-stack preset read by
name only (the web app never loads a file a request names), and the values each gives the
controls of its group (a model preset its model's, a stack its execution's; the session's
fitted stack as a preset does). :mod:`dashboard.controls.scenario` completes a scenario with
them.
"""

from __future__ import annotations

from typing import Any

from dashboard.controls.control_record import Control
from dashboard.controls.control_table import BY_KEY as CONTROL
from dashboard.controls.control_table import CONTROLS
from dashboard.controls.fitted import FITTED, fitted_record
from model import ModelError, list_models, list_systems, load_model, load_system
from model.specs import memo
from model.specs.execution import resolve_execution
from model.specs.hardware import System
from model.specs.stack import load_stack
from model.specs.transformer import Transformer

PRESET_OF = {c.group: c for c in CONTROLS if c.preset}  # group → its preset control


def preset_model(name: Any) -> Transformer:
    """A model preset, by name only: the web app never loads a file a request names (the
    error says nothing about the file system)."""
    if not isinstance(name, str) or name not in list_models():
        raise ModelError(f"not a model preset; presets: {', '.join(list_models())}")
    return load_model(name)


def preset_system(name: Any) -> System:
    """A system preset, by name only."""
    if not isinstance(name, str) or name not in list_systems():
        raise ModelError(f"not a system preset; presets: {', '.join(list_systems())}")
    return load_system(name)


def preset_stack(name: Any) -> str:
    """A software stack preset's name, checked (``load_stack`` would read a path too)."""
    choices = CONTROL["stack"].choices
    if not isinstance(name, str) or name not in choices:
        raise ModelError(f"not a software stack preset; presets: {', '.join(choices)}")
    return name


def _preset_object(group: str, name: str) -> Any:
    """What a group's preset reads from: the model, the system, or a stack's execution (by
    preset name only)."""
    if group == "model":
        return preset_model(name)
    if group == "system":
        return preset_system(name)
    return resolve_execution(load_stack(preset_stack(name)).execution)


def fitted_values(fitted: dict[str, Any]) -> dict[str, Any]:
    """The values the session's fitted stack (clean: :func:`~dashboard.controls.fitted.
    check_fitted`) gives the execution group, as a preset's do; its stack control: FITTED."""
    source = resolve_execution(fitted_record(fitted).execution)
    return {PRESET_OF["execution"].key: FITTED,
            **{c.key: control_value(c, source) for c in CONTROLS if c.group == "execution"
               and not c.preset}}


def control_value(c: Control, source: Any) -> Any:
    """Control *c*'s value read from a preset object *source* (a model, system, stack or
    execution record): its ``read`` if it has one, else its ``spec`` field over its ``scale``."""
    if c.read is not None:
        return c.read(source)
    value = getattr(source, c.spec)
    return value / c.scale if c.scale != 1.0 else value


@memo.lru("preset values", 64)
def _preset_items(group: str, name: str) -> tuple[tuple[str, Any], ...]:
    source = _preset_object(group, name)
    return ((PRESET_OF[group].key, name),
            *((c.key, control_value(c, source)) for c in CONTROLS
              if c.group == group and not c.preset))


def preset_values(group: str, name: str) -> dict[str, Any]:
    """The values a preset gives its group (``group``: model, system or execution); a name
    that is not a preset is a ModelError naming the presets."""
    if group not in PRESET_OF:
        raise ModelError(f"no preset group '{group:.40}'")
    choices = PRESET_OF[group].choices
    if not isinstance(name, str) or name not in choices:
        raise ModelError(f"not a {PRESET_OF[group].label.lower()}; presets: "
                         + ", ".join(choices))
    return dict(_preset_items(group, name))


def model_values(name: str) -> dict[str, Any]:
    """The model-group values of a model preset (its published global batch included)."""
    return preset_values("model", name)


def system_values(name: str) -> dict[str, Any]:
    """The system-group values of a system preset."""
    return preset_values("system", name)
