"""The executions a search tries: the product of an option given several choices (at most
:data:`MAX_VARIANTS`), the options a search varies unless told otherwise
(:data:`DEFAULT_SEARCH`), and each execution as the constant columns of its result rows and in
words. One :class:`~model.specs.execution.Execution` is one evaluation's.
"""

from __future__ import annotations

import itertools
from typing import Any

from model.errors import ModelError
from model.specs.execution import FIELDS, Execution, resolve_execution
from model.specs.execution_fields import AUTO

# What a search tries unless told otherwise (over a stack's defaults; explicit options win):
# every interleaving the stages allow and, per configuration, the fewest fully recomputed
# layers that make it fit (selective recompute, i.e. flash attention, on the others)
DEFAULT_SEARCH: dict[str, Any] = {"interleave": 0, "recompute_layers": AUTO}

MAX_VARIANTS = 64
# every choice, so that a result row says exactly how it was executed (the interleaving and
# the recomputed layers are columns of each configuration: model.engine.report)
COLUMNS = tuple(f for f in FIELDS if f not in ("interleave", "recompute_layers"))
CHOICES = ("interleave", "recompute_layers", *COLUMNS)  # every choice a result row carries


def execution_variants(value: object) -> list[Execution]:
    """Every execution to search: a dict whose values may be lists (their product) — e.g.
    ``{"recompute": ["selective", "full"], "interleave": [1, 2, 4]}`` — else just one."""
    if not isinstance(value, dict) or not any(isinstance(v, (list, tuple)) for v in value.values()):
        return [resolve_execution(value)]
    keys = list(value)
    choices = [v if isinstance(v, (list, tuple)) else [v] for v in value.values()]
    if any(len(c) == 0 for c in choices):
        raise ModelError("an execution option was given an empty list of choices")
    combos = list(itertools.islice(itertools.product(*choices), MAX_VARIANTS + 1))
    if len(combos) > MAX_VARIANTS:
        raise ModelError(f"more than {MAX_VARIANTS} execution combinations; pin some options")
    return [resolve_execution(dict(zip(keys, combo))) for combo in combos]


def execution_columns(ex: Execution) -> dict[str, Any]:
    """The execution's choices, as the constant columns of its result rows."""
    return {k: getattr(ex, k) for k in COLUMNS}


def _word(value: Any, key: str = "") -> str:
    if key == "interleave" and value == 0:
        return "every"  # each configuration's row says which
    return ("on" if value else "off") if isinstance(value, bool) else str(value)


def describe_executions(executions: list[Execution]) -> str:
    """What a search tried, in words: the choices that vary (a × b) and those fixed."""
    varied = [k for k in CHOICES if len({getattr(ex, k) for ex in executions}) > 1]
    parts = [k + " " + "|".join(dict.fromkeys(_word(getattr(ex, k), k) for ex in executions))
             for k in varied]
    head = (f"{len(executions)} executions: {' × '.join(parts)}; fixed: " if varied
            else "one execution: ")
    return head + ", ".join(f"{k} {_word(getattr(executions[0], k), k)}"
                            for k in CHOICES if k not in varied)
