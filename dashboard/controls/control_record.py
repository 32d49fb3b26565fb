"""The record of one dashboard control and of a condition on another control's value (the
table itself: :mod:`dashboard.controls.control_table`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import Any

from model.specs.cost import FIELDS as COST_FIELDS
from model.specs.execution_fields import EXECUTION_FIELDS
from model.specs.hardware import FIELDS as SYSTEM_FIELDS
from model.specs.schema import Field
from model.specs.transformer import FIELDS as MODEL_FIELDS

# widget kinds (dashboard.controls.panel builds each): a number box (debounced: applies on Enter or
# blur); a number box with a slider beside it (the box holds the value, the slider only sets
# it); a dropdown; radio items; on/off radio items; a checkbox (the header's presentation mode)
WIDGETS = ("number", "slider", "dropdown", "radio", "switch", "checkbox")
ON_OFF = ((True, False), ("on", "off"))  # the choices and names of an on/off switch


@dataclass(frozen=True)
class When:
    """A condition on the value of control ``key`` (as typed: maybe not valid yet)."""

    key: str
    test: Callable[[Any], bool]

    def holds(self, values: dict[str, Any]) -> bool:
        """Whether the condition holds; an unreadable value (half typed) counts as holding,
        so that nothing the user works on disappears."""
        try:
            return bool(self.test(values.get(self.key)))
        except TypeError:
            return True


# the estimator's field declarations a control's ``spec`` names, by the control's group: the
# model's and the system's spec fields, the execution options and the cost inputs
SPEC_FIELDS: dict[str, dict[str, Field]] = {
    "model": {f.name: f for f in MODEL_FIELDS}, "system": {f.name: f for f in SYSTEM_FIELDS},
    "execution": {f.name: f for f in EXECUTION_FIELDS}, "plan": {f.name: f for f in COST_FIELDS}}
DERIVED = ("kind", "tip", "unit", "lo", "hi", "choices")  # what a field gives its control


def tooltip(doc: str) -> str:
    """A field's help as a tooltip: a sentence (capital first letter, final full stop)."""
    text = doc[:1].upper() + doc[1:]
    return text if text.endswith(".") else text + "."


def _scaled(bound: float | None, scale: float) -> float | None:
    """A field's bound in the control's unit (the control's value × ``scale`` is the field's)."""
    return bound if bound is None or scale == 1 else bound / scale


@dataclass(frozen=True)
class Control:
    """One scenario input: its key (URL, JSON and component id ``ctl-<key>``), how it is
    shown and checked, and where its value comes from.

    A control that feeds an estimator field (``spec``, a field of :data:`SPEC_FIELDS`) keeps
    only its display — label, widget, the unit of a scaled value, section, condition, the
    names of its choices — and takes its type, range, choices, unit and tooltip from the
    field's declaration (the range divided by ``scale``); ``lo``/``hi`` given for it may only
    narrow the field's range (:data:`declared` says what was given; tests/test_control_fields.py
    checks both). A control of the dashboard alone (a preset, the GPUs of the views) declares
    them itself."""

    key: str
    label: str  # what the panel and every message call it ("Layers")
    group: str  # one of GROUPS
    widget: str  # one of WIDGETS
    kind: type | None = None  # int, float, str or bool (a field's: its own)
    tip: str | None = None  # the tooltip (a field's: its help)
    unit: str | None = None  # shown after the label and in range messages ("GB", "TB/s")
    lo: float | None = None  # inclusive range of a number
    hi: float | None = None
    choices: tuple | None = None  # the allowed values of a dropdown or radio
    names: tuple = ()  # their display names (default: the values as text)
    suggest: tuple = ()  # values a number box offers (a datalist); others may be typed
    slider: tuple = ()  # (min, max, step, marks) of a slider widget
    spec: str | None = None  # the estimator's key: a model/system spec field, an Execution
    # option, or (plan group) a site, pricing or failure input of model.specs.cost.Costs
    scale: float = 1.0  # estimator value = scenario value × scale
    preset: bool = False  # this control names its group's preset
    default: Any = None  # the default; None: read from the group's default preset
    read: Callable[[Any], Any] | None = None  # value from the preset's object (else spec)
    per_token: str | None = None  # also shown and set in tokens: value × scenario[per_token]
    section: str = ""  # one of SECTIONS, or none
    when: When | None = None  # shown (and applied) only while this holds
    off: Callable[[dict[str, Any]], Any] | None = None  # the estimator's value while hidden
    # of DERIVED, what this record gave itself (set by __post_init__)
    declared: frozenset = dataclass_field(default=frozenset(), init=False)

    def __post_init__(self) -> None:
        field = self.spec_field
        given = frozenset(n for n in DERIVED if getattr(self, n) is not None)
        derived: dict[str, Any] = {"declared": given}
        if field is not None:
            kinds = field.kind if isinstance(field.kind, tuple) else (field.kind,)
            derived.update(
                kind=float if float in kinds else kinds[0], tip=tooltip(field.doc),
                unit=field.unit if self.scale == 1 else None,
                lo=_scaled(field.lo, self.scale), hi=_scaled(field.hi, self.scale),
                choices=tuple(field.choices or (ON_OFF[0] if bool in kinds else ())))
        derived.update({n: getattr(self, n) for n in given})  # a narrower range (checked)
        for name, empty in (("tip", ""), ("unit", ""), ("choices", ())):
            if derived.get(name) is None:
                derived[name] = empty
        for name, value in derived.items():
            object.__setattr__(self, name, value)

    @property
    def spec_field(self) -> Field | None:
        """The estimator field this control feeds (None: a control of the dashboard alone)."""
        return SPEC_FIELDS.get(self.group, {}).get(self.spec) if self.spec else None

    def applies(self, scn: dict[str, Any]) -> bool:
        """Whether the estimator receives this control's value (it is not hidden)."""
        return self.when is None or self.when.holds(scn)

    @property
    def field(self) -> Field:
        """The control as a field of the estimator's schema (:mod:`model.specs.schema`): type,
        range and text choices (integer choices become the range)."""
        texts = self.choices and all(isinstance(c, str) for c in self.choices)
        numbers = self.choices and self.kind is int
        lo = min(self.choices) if numbers else self.lo
        hi = max(self.choices) if numbers else self.hi
        return Field(self.key, self.kind, self.tip, lo, hi,
                     choices=self.choices if texts else None)

    @property
    def title(self) -> str:
        """The panel's label: the name with its unit ("HBM capacity (GB)")."""
        return f"{self.label} ({self.unit})" if self.unit else self.label

    def options(self) -> list[dict[str, Any]]:
        """Dropdown or radio options: value and display name."""
        names = self.names or tuple(str(c) for c in self.choices)
        return [{"label": n, "value": c} for c, n in zip(self.choices, names)]
