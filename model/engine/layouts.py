"""The layouts a software stack runs, applied to a request once (:class:`~model.engine.request.
Request` calls :func:`stack_layouts` when it is built): every search, sweep, plan and evaluation
then stays inside them.

A stack lists the parallelisms it runs (:attr:`model.specs.stack.Stack.parallelism`): Composer/
llm-foundry on PyTorch FSDP1 runs data parallelism only (FULL_SHARD, no tensor, context or
pipeline parallelism: mosaicml/composer composer/trainer/dist_strategy.py, 2023), Megatron-LM,
NeMo, Megatron-Bridge and torchtitan all of them. A strategy is run by a stack when the axes it
adds to data parallelism are: 1D needs only tp1 (1 without tensor parallelism, which is plain
FSDP/DP), 2D SUMMA's second axis is tensor parallelism, the context strategy's second axis is
context parallelism. A search over every strategy ("all", or several) keeps those the stack
runs; a strategy or pin named alone that the stack does not run is refused in words.
"""

from __future__ import annotations

from collections.abc import Mapping

from model.errors import ModelError
from model.physics.strategies import LABELS, STRATEGIES
from model.specs.stack import Stack, load_stack

# the parallelism each strategy's second axis (tp2) needs; 1D has none
_SECOND_AXIS = {"1d": None, "summa": "tp", "context": "cp"}
NAMES = {"dp": "data", "tp": "tensor", "cp": "context", "pp": "pipeline", "ep": "expert"}
# the parallelism a pin other than 1 needs (tp2: its strategy's second axis)
_PIN_NEEDS = {"tp1": "tp", "pp": "pp", "ep": "ep", "etp": "ep"}


def stack_strategies(stack: Stack) -> tuple[str, ...]:
    """The strategies (in :data:`STRATEGIES` order) whose axes ``stack`` runs."""
    runs = set(stack.parallelism)
    return tuple(s for s in STRATEGIES if _SECOND_AXIS[s] is None or _SECOND_AXIS[s] in runs)


def runs_words(stack: Stack) -> str:
    """'pytorch-fsdp-2023 runs data parallelism only' / '… runs data and pipeline parallelism'."""
    names = [NAMES[p] for p in stack.parallelism]
    only = " only" if len(names) == 1 else ""
    listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    return f"the stack {stack.name} runs {listed} parallelism{only}"


def _strategy(stack: Stack, strategy: str | tuple[str, ...]) -> str | tuple[str, ...]:
    runs = stack_strategies(stack)
    if runs == STRATEGIES:
        return strategy
    asked = STRATEGIES if strategy == "all" else (strategy,) if isinstance(strategy, str) \
        else strategy
    kept = tuple(s for s in asked if s in runs)
    if not kept:
        what = (f"the {asked[0]} strategy ({LABELS[asked[0]]})" if len(asked) == 1 else
                f"the strategies {', '.join(asked)}")
        raise ModelError(f"{runs_words(stack)}: it does not run {what}; choose "
                         f"{', '.join(runs)} or another stack")
    return strategy if isinstance(strategy, str) and strategy != "all" else kept


def _pins(stack: Stack, strategy: str | tuple[str, ...],
          pins: Mapping[str, int | None]) -> dict[str, int | None]:
    layout = stack.layout_pins()
    for key, value in pins.items():
        if value is None or value == 1 or key not in layout:
            continue
        axis = _SECOND_AXIS.get(strategy) if isinstance(strategy, str) else None
        need = _PIN_NEEDS.get(key) if key != "tp2" else axis
        words = NAMES[need] if need else "tensor or context"
        name = "cp" if key == "tp2" and strategy == "context" else key
        raise ModelError(f"{runs_words(stack)}: {name} {value} needs {words} parallelism; "
                         "leave it at 1 or choose another stack")
    return {**layout, **{k: v for k, v in pins.items() if v is not None}}


def stack_layouts(stack: str | Stack | None, strategy: str | tuple[str, ...],
                  pins: Mapping[str, int | None]
                  ) -> tuple[str | tuple[str, ...], Mapping[str, int | None]]:
    """(strategy, pins) inside the layouts ``stack`` runs: a search over several strategies
    keeps those it runs, the dimensions it does not run pinned to 1 (:meth:`Stack.layout_pins`);
    ModelError in words for a strategy or a pin (other than 1) it does not run. A stack that
    runs every parallelism, or one that cannot be loaded (its own error comes later), changes
    nothing."""
    try:
        found = load_stack(stack)
    except ModelError:
        return strategy, pins
    if not found.layout_pins():
        return strategy, pins
    strategy = _strategy(found, strategy)
    return strategy, _pins(found, strategy, pins)
