"""Which source and which software stack a published run belongs to.

A *source* is what leave-one-source-out cross-validation leaves out: one paper, or one release of
a framework's published performance table. A run's *stack* (``stacks/*.json``) says what its
software did by default and carries the efficiencies calibrated on that stack's runs.

A run's memory strategy, where its published recipe states one (``reference/recipes.json``),
replaces the "not stated" of its performance table (:func:`recipe_memory`).

Runs of this repository's reference data name their source in their id (``korthikanti22…``,
``narayanan21…``, ``mbridge2511…``); a record of another source maps by the year of its
``source`` text to the newest stack released by then (a 2023–2025 record before the first
Megatron-Bridge stack to that one: flash attention, sequence parallelism and the distributed
optimizer were standard by 2023).
"""

from __future__ import annotations

import json
import re
from typing import Any

from model.specs import memo
from model.specs.schema import DATA_DIR
from model.specs.stack import list_stacks, load_stack

RECIPES = DATA_DIR / "reference" / "recipes.json"

_PREFIXES = (("llmfoundry-a100-80gb", "llm-foundry-a100-80gb", "pytorch-fsdp-2023"),
             ("llmfoundry-a100-40gb", "llm-foundry-a100-40gb", "pytorch-fsdp-2023"),
             ("torchtitan2412", "torchtitan-2024-12", "torchtitan-2025"),
             ("korthikanti22", "korthikanti-2022", "megatron-lm-2022"),
             ("narayanan21", "narayanan-2021", "megatron-lm-2021"),
             ("bloom", "bloom-2022", "megatron-lm-2021"))
_RELEASE = re.compile(r"^mbridge(\d\d)(\d\d)")


def source_and_stack(record: dict[str, Any]) -> tuple[str, str]:
    """(source, stack) of a run record (``id`` and ``source`` keys)."""
    rid = str(record.get("id", ""))
    if rid.startswith("narayanan21") and "ZeRO-3" in rid:  # DeepSpeed, the same paper
        return "narayanan-2021", "deepspeed-zero3-2021"
    for prefix, source, stack in _PREFIXES:
        if rid.startswith(prefix):
            return source, stack
    release = _RELEASE.match(rid)
    if release:
        name = f"megatron-bridge-{release.group(1)}.{release.group(2)}"
        return name, _known(name) or stack_by_date(f"20{release.group(1)}-{release.group(2)}")
    text = str(record.get("source", ""))
    years = [int(y) for y in re.findall(r"\b(20[1-3]\d)\b", text)]
    date = f"{max(years)}-12" if years else None
    return (text[:60] or rid), stack_by_date(date)


def _known(name: str) -> str | None:
    return name if name in list_stacks() else None


def stack_by_date(date: str | None) -> str:
    """The newest stack released by ``date`` (YYYY-MM); a date between the last Megatron-LM
    paper stack and the first Megatron-Bridge one maps to the latter; None: the newest."""
    stacks = [s for s in (load_stack(n) for n in list_stacks()) if s.family == "megatron"]
    if date is None:
        return stacks[-1].name
    before = [s for s in stacks if s.released <= date]
    if not before:
        return stacks[0].name
    if date >= "2023-01" and not before[-1].name.startswith("megatron-bridge"):
        modern = [s for s in stacks if s.name.startswith("megatron-bridge")]
        if modern:
            return modern[0].name
    return before[-1].name


@memo.lru("published recipes", 1)
def _recipes() -> dict[str, dict[str, Any]]:
    return json.loads(RECIPES.read_text())["records"]


def recipe_memory(run_id: str) -> dict[str, Any]:
    """The execution options a run's published recipe sets for memory (``recipes.json``):
    ``offload_layers`` and/or ``recompute_layers``, with selective recompute and nothing else
    offloaded; {} when its recipe states none (the run's memory strategy is then unstated)."""
    entry = _recipes().get(run_id)
    if entry is None:
        return {}
    return {"recompute": "selective", "offload": "none",
            "recompute_layers": int(entry.get("recompute_layers", 0)),
            "offload_layers": int(entry.get("offload_layers", 0))}
