"""Command-line options for the execution choices, one per field of
:class:`model.specs.execution.Execution`, derived from its field table (``FIELDS``,
``field_kind``, ``HELP``, ``LITERALS``): a new field is a new flag without an edit here.

``search`` and ``evaluate`` use the Python API's default: over the software stack (``--stack``,
default the newest) every interleaving and the fewest recomputed layers that fit
(:data:`~model.specs.execution_variants.DEFAULT_SEARCH`), unless told otherwise; ``search`` (and
``plan``, ``codesign``) tries every combination of the lists it is given (``--recompute all``,
``--interleave 1,2,4``, ``--ep-dispatcher alltoall,flex``) and prints what it searched. The
paper mode models a single execution: these options are refused with ``--mode paper``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from model.errors import ModelError
from model.specs.conformal import (
    COVERAGE,
    COVERAGE_MAX,
    COVERAGE_MIN,
    CoverageError,
    check_coverage,
)
from model.specs.execution import FIELDS
from model.specs.execution_fields import AUTO, HELP, LITERALS, field_kind
from model.specs.stack import NONE, list_stacks

ALL = "all"  # a choice field's every value (searching only)


def flag(name: str) -> str:
    """The command-line flag of an execution field: ``ep_dispatcher`` → ``--ep-dispatcher``."""
    return "--" + name.replace("_", "-")


def _item(name: str, text: str) -> Any:
    """One value of a field from its text (a choice, an integer, 'auto' or a number)."""
    kind = field_kind(name)
    if kind == "choice":
        by_text = {str(c): c for c in LITERALS[name]}
        if text not in by_text:
            raise argparse.ArgumentTypeError(
                f"'{text}' is not one of {', '.join(by_text)}")
        return by_text[text]
    if kind == "integer":
        if name == "recompute_layers" and text == AUTO:
            return AUTO
        try:
            return int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got '{text}'") from None
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got '{text}'") from None


def _values(name: str, searching: bool) -> Callable[[str], list[Any]]:
    """An argparse type: a comma-separated list of the field's values (``all``: every choice
    when searching); the list is checked by :class:`Execution` itself."""
    def parse(text: str) -> list[Any]:
        words = [w.strip() for w in text.split(",") if w.strip()]
        if not words:
            raise argparse.ArgumentTypeError("expected a value")
        choices = LITERALS.get(name, ())
        if searching and words == [ALL] and choices and ALL not in choices:
            return list(LITERALS[name])
        return [_item(name, w) for w in words]
    parse.__name__ = name  # argparse names the option's type in its error
    return parse


def _metavar(name: str, searching: bool) -> str:
    kind = field_kind(name)
    if kind == "choice":
        values = [str(c) for c in LITERALS[name]]
        values += [ALL] if searching and ALL not in values else []
        return "{" + ",".join(values) + "}" + ("[,...]" if searching else "")
    one = "N" if kind == "integer" else "X"
    return one + ("[,...]" if searching else "")


def _coverage(text: str) -> float:
    try:
        return check_coverage(text)
    except CoverageError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_execution_args(p: argparse.ArgumentParser, searching: bool) -> None:
    """``--stack`` and one flag per execution field (on/off fields as ``--x/--no-x``)."""
    g = p.add_argument_group("execution (how the training stack runs a configuration; "
                             "defaults: the stack's)" + (" — a comma list is searched"
                                                         if searching else ""))
    g.add_argument("--stack", metavar="NAME",
                   help="software stack: its execution defaults and calibrated kernel "
                        f"efficiencies ({', '.join(list_stacks())}; '{NONE}': the system's own "
                        "values; or a .json path). Default: the newest; options below override "
                        "its defaults (see 'stacks')")
    g.add_argument("--coverage", type=_coverage, default=COVERAGE, metavar="Q",
                   help="the coverage of the printed range (split-conformal interval), "
                        f"{COVERAGE_MIN:g}–{COVERAGE_MAX:g} or 50–95 (percent); default "
                        f"{COVERAGE:g}")
    for name in FIELDS:
        if field_kind(name) == "switch":
            g.add_argument(flag(name), dest=name, action=argparse.BooleanOptionalAction,
                           default=None, help=HELP[name])
        else:
            g.add_argument(flag(name), dest=name, type=_values(name, searching),
                           metavar=_metavar(name, searching), help=HELP[name])


def execution_from_args(args: argparse.Namespace, searching: bool) -> dict[str, Any] | None:
    """The ``execution`` argument for search/evaluate/plan (None: the default execution)."""
    given: dict[str, Any] = {}
    for name in FIELDS:
        value = getattr(args, name)
        if value is None:
            continue
        if isinstance(value, list) and len(value) > 1 and not searching:
            raise ModelError(f"evaluate takes one {flag(name)} value")
        given[name] = value[0] if isinstance(value, list) and len(value) == 1 else value
    if args.mode == "paper":
        if given or args.stack:
            raise ModelError("--mode paper models one execution with the paper's constants; "
                             "drop the execution options and --stack")
        return None
    if given.get("recompute_layers") and "recompute" not in given:
        given["recompute"] = "selective"  # partial recompute sits on selective, not on full
    return given or None
