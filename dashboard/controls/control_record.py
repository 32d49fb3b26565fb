"""The record of one dashboard control and of a condition on another control's value (the
table itself: :mod:`dashboard.controls.control_table`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from model.specs.schema import Field

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


@dataclass(frozen=True)
class Control:
    """One scenario input: its key (URL, JSON and component id ``ctl-<key>``), how it is
    shown and checked, and where its value comes from."""

    key: str
    label: str  # what the panel and every message call it ("Layers")
    group: str  # one of GROUPS
    widget: str  # one of WIDGETS
    kind: type  # int, float, str or bool
    tip: str
    unit: str = ""  # shown after the label and in range messages ("GB", "TB/s")
    lo: float | None = None  # inclusive range of a number
    hi: float | None = None
    choices: tuple = ()  # the allowed values of a dropdown or radio
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
