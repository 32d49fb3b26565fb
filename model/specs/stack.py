"""Software stacks as inputs: what a training stack does by default and how fast its kernels run.

A stack preset (``stacks/*.json``) names a framework release (``released``: YYYY-MM) and holds:

* ``execution``: its default execution options (:class:`~model.specs.execution.Execution`
  fields: sequence parallelism, flash attention, TP overlap, distributed optimizer (ZeRO-1),
  data-parallel overlap, gradient precision, lighter pipeline ends …). Options the caller gives
  explicitly override them.
* ``gemm_efficiency``: per GPU generation (``System.generation``) or system preset name (which
  wins) and precision family (bf16, fp8, mxfp8, nvfp4), the achievable fraction of the matmul
  peak, calibrated on the stack's published runs (``scripts/calibrate``, docs/model.md) — or,
  for a stack whose ``calibration`` starts "from kernel benchmarks" (``deepseek-v3-2024``:
  DeepGEMM's published table, docs/moe.md), taken from its kernels' benchmarks and left alone
  by the calibration.
* ``attention_efficiency``: per generation, the fraction of the tensor-core peak its fused
  attention reaches (the exponentials are priced apart at the special-function rate).
* ``expert_gemm_efficiency``: per generation or system and precision family, the fraction of
  the matmul peak the routed experts' grouped GEMMs reach (optional; without it they run at the
  dense GEMM efficiency, as the calibrated releases do).
* ``moe_token_efficiency``: per generation or system, the fraction of the HBM bandwidth the MoE
  layer's token kernels (router, permutation, unpermutation) reach — calibrated on the stack's
  MoE runs, where it absorbs what a MoE layer costs per routed byte outside the GEMMs and the
  all-to-alls (model/validation/calibrate.py).
* ``memory_reserve_gb``: per generation, HBM a process of this stack cannot use.
* ``family``: ``megatron`` (Megatron-LM, NeMo, Megatron-Bridge, DeepSpeed) or ``pytorch``
  (PyTorch FSDP stacks: Composer/llm-foundry, torchtitan): the runs its cross-validation pools
  (model/validation/calibrate.py).
* ``parallelism``: the parallelisms the stack runs, of dp, tp, cp, pp, ep (default all); the
  engine searches only its layouts, for every caller (llm-foundry on FSDP: ``["dp"]``;
  model/engine/layouts.py).
* ``base``: an earlier stack whose values it starts from (a release inherits what it does not
  re-measure).

Where a stack has no value for a system's generation, the system's own fields apply. The stack
``none`` applies nothing: the system's efficiencies and the :class:`Execution` defaults.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from model.errors import ModelError
from model.specs import memo
from model.specs.execution import FIELDS as EXECUTION_FIELDS
from model.specs.execution import resolve_execution
from model.specs.hardware import GENERATIONS, System, list_systems
from model.specs.schema import DATA_DIR, preset_names, preset_path, read_json

STACKS_DIR = DATA_DIR / "stacks"
EFFICIENCY_KEYS = ("bf16", "fp8", "mxfp8", "nvfp4")
NONE = "none"  # no stack: the system's own efficiencies and the Execution defaults
KEYS = ("name", "released", "source", "description", "base", "execution", "gemm_efficiency",
        "attention_efficiency", "memory_reserve_gb", "calibration", "expert_gemm_efficiency",
        "expert_calibration", "moe_token_efficiency", "family", "parallelism")
FAMILIES = ("megatron", "pytorch")  # whose runs a stack's cross-validation pools (calibrate)
# the parallelisms a stack may run: data (FSDP/ZeRO included), tensor, context, pipeline, expert
PARALLELISMS = ("dp", "tp", "cp", "pp", "ep")


@dataclass(frozen=True)
class Stack:
    """A validated stack preset (see the module docstring)."""

    name: str
    released: str
    source: str
    description: str = ""
    execution: dict[str, Any] = field(default_factory=dict)
    gemm_efficiency: dict[str, dict[str, float]] = field(default_factory=dict)
    attention_efficiency: dict[str, float] = field(default_factory=dict)
    memory_reserve_gb: dict[str, float] = field(default_factory=dict)
    expert_gemm_efficiency: dict[str, dict[str, float]] = field(default_factory=dict)
    moe_token_efficiency: dict[str, float] = field(default_factory=dict)
    family: str = "megatron"  # megatron (Megatron-LM, NeMo, Megatron-Bridge, DeepSpeed) | pytorch
    parallelism: tuple[str, ...] = PARALLELISMS  # what it runs (llm-foundry: FSDP, dp only)

    def layout_pins(self) -> dict[str, int]:
        """The search-space pins of the layouts this stack does not run: tp1 1 without tensor
        parallelism, tp2 1 (2D SUMMA's second axis, or the context axis) without tensor and
        context parallelism, pp 1 without pipelining, ep and etp 1 without expert
        parallelism; {} for a stack that runs them all."""
        runs = set(self.parallelism)
        pins = {"tp1": 1} if "tp" not in runs else {}
        if not runs & {"tp", "cp"}:
            pins["tp2"] = 1
        if "pp" not in runs:
            pins["pp"] = 1
        if "ep" not in runs:
            pins.update(ep=1, etp=1)
        return pins

    def apply(self, system: System) -> System:
        """``system`` with this stack's calibrated values for it: those of its preset name where
        the stack has them, else those of its generation."""
        gen = system.generation
        gemm = {**self.gemm_efficiency.get(gen, {}), **self.gemm_efficiency.get(system.name, {})}
        over: dict[str, float] = {}
        for key, name in (("bf16", "flop_efficiency"), ("fp8", "flop_efficiency_fp8"),
                          ("mxfp8", "flop_efficiency_mxfp8"), ("nvfp4", "flop_efficiency_fp4")):
            if key in gemm:
                over[name] = gemm[key]
        expert = {**self.expert_gemm_efficiency.get(gen, {}),
                  **self.expert_gemm_efficiency.get(system.name, {})}
        for key, name in (("bf16", "expert_flop_efficiency"),
                          ("fp8", "expert_flop_efficiency_fp8")):
            if key in expert:
                over[name] = expert[key]
        for table, name in ((self.attention_efficiency, "attention_efficiency"),
                            (self.memory_reserve_gb, "memory_reserve_gb"),
                            (self.moe_token_efficiency, "moe_token_efficiency")):
            value = table.get(system.name, table.get(gen))
            if value is not None:
                over[name] = value
        return system.with_overrides(**over) if over else system

    def execution_for(self, execution: Any) -> Any:
        """The caller's execution with this stack's defaults under it: a dict (of values or
        lists to search) gets the defaults it does not set; None becomes the defaults; an
        :class:`Execution` record is complete and kept as it is."""
        if execution is None:
            return dict(self.execution) or None
        if isinstance(execution, dict):
            return {**self.execution, **execution}
        return execution

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "released": self.released, "source": self.source,
                "description": self.description, "execution": dict(self.execution),
                "gemm_efficiency": {g: dict(v) for g, v in self.gemm_efficiency.items()},
                "attention_efficiency": dict(self.attention_efficiency),
                "memory_reserve_gb": dict(self.memory_reserve_gb),
                "expert_gemm_efficiency": {g: dict(v)
                                           for g, v in self.expert_gemm_efficiency.items()},
                "moe_token_efficiency": dict(self.moe_token_efficiency),
                "family": self.family, "parallelism": list(self.parallelism)}


NO_STACK = Stack(NONE, "", "no stack: the system's own efficiencies, the Execution defaults")


def _fraction_map(what: str, data: Any, keys: tuple[str, ...], lo: float, hi: float
                  ) -> dict[str, float]:
    if not isinstance(data, dict):
        raise ModelError(f"{what} must be an object keyed by {', '.join(keys)}")
    out = {}
    for key, value in data.items():
        if key not in keys:
            raise ModelError(f"{what}: unknown key '{key}'; allowed: {', '.join(keys)}")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
                lo <= value <= hi):
            raise ModelError(f"{what}.{key} must be a number in [{lo}, {hi}], got {value!r}")
        out[key] = float(value)
    return out


def stack_from_dict(data: Any, base: Stack | None = None) -> Stack:
    """Validate a stack spec (dict), starting from ``base`` (its ``base`` stack) if given."""
    if not isinstance(data, dict):
        raise ModelError(f"stack: expected a JSON object, got {type(data).__name__}")
    unknown = sorted(set(data) - set(KEYS), key=str)
    if unknown:
        raise ModelError(f"stack: unknown key '{unknown[0]}'; allowed keys: {', '.join(KEYS)}")
    for key in ("name", "released", "source"):
        if not isinstance(data.get(key), str) or not data[key]:
            raise ModelError(f"stack: '{key}' must be a non-empty string")
    if not re.fullmatch(r"(19|20)\d\d-(0[1-9]|1[0-2])", data["released"]):
        raise ModelError(f"stack: 'released' must be YYYY-MM, got {data['released']!r}")
    base = base or NO_STACK
    execution = {**base.execution, **(data.get("execution") or {})}
    unknown = sorted(set(execution) - set(EXECUTION_FIELDS))
    if unknown:
        raise ModelError(f"stack: unknown execution option '{unknown[0]}'")
    resolve_execution(execution)  # every value valid
    keys = _gpu_keys()
    gemm = _gemm_table(data, "gemm_efficiency", base.gemm_efficiency, keys)
    expert = _gemm_table(data, "expert_gemm_efficiency", base.expert_gemm_efficiency, keys)
    attention = {**base.attention_efficiency, **_fraction_map(
        "stack: attention_efficiency", data.get("attention_efficiency") or {}, keys, 0.05, 1.0)}
    reserve = {**base.memory_reserve_gb, **_fraction_map(
        "stack: memory_reserve_gb", data.get("memory_reserve_gb") or {}, keys, 0.0, 1e4)}
    token = {**base.moe_token_efficiency, **_fraction_map(
        "stack: moe_token_efficiency", data.get("moe_token_efficiency") or {}, keys, 0.01, 1.0)}
    family = data.get("family", base.family if base is not NO_STACK else "megatron")
    if family not in FAMILIES:
        raise ModelError(f"stack: 'family' must be one of {', '.join(FAMILIES)}, got {family!r}")
    return Stack(data["name"], data["released"], data["source"],
                 str(data.get("description", "")), execution, gemm, attention, reserve, expert,
                 token, family, _parallelism(data.get("parallelism", base.parallelism)))


def _parallelism(value: Any) -> tuple[str, ...]:
    """A stack's 'parallelism': a list of :data:`PARALLELISMS` with data parallelism in it."""
    if not isinstance(value, (list, tuple)) or "dp" not in value or any(
            v not in PARALLELISMS for v in value):
        raise ModelError(f"stack: 'parallelism' must list some of {', '.join(PARALLELISMS)} "
                         f"with dp among them, got {value!r}")
    return tuple(p for p in PARALLELISMS if p in value)


def _gemm_table(data: dict, key: str, base: dict[str, dict[str, float]],
                keys: tuple[str, ...]) -> dict[str, dict[str, float]]:
    """A per-GPU table of GEMM efficiencies by precision family, over the base stack's."""
    table = {g: dict(v) for g, v in base.items()}
    raw = data.get(key) or {}
    if not isinstance(raw, dict):
        raise ModelError(f"stack: '{key}' must be an object keyed by generation")
    for gen, values in raw.items():
        if gen not in keys:
            raise ModelError(f"stack: unknown GPU generation or system '{gen}'; allowed: "
                             f"{', '.join(keys)}")
        table[gen] = {**table.get(gen, {}), **_fraction_map(
            f"stack: {key}.{gen}", values, EFFICIENCY_KEYS, 0.05, 1.0)}
    return table


def _gpu_keys() -> tuple[str, ...]:
    """What a stack's tables may be keyed by: a GPU generation or a system preset's name."""
    return GENERATIONS + tuple(list_systems())


def list_stacks() -> list[str]:
    """Names of the stack presets in ``stacks/``, oldest release first."""
    return list(presets())


def default_stack_name() -> str:
    """The newest stack preset (the default of every search)."""
    return list_stacks()[-1]


@memo.lru("stack presets", 1)
def presets() -> dict[str, Stack]:
    """Every preset, oldest release first (read once per process: presets do not change)."""
    stacks = [_read(name) for name in preset_names(STACKS_DIR)]
    return {s.name: s for s in sorted(stacks, key=lambda s: (s.released, s.name))}


def _read(name_or_path: str | Path, depth: int = 0) -> Stack:
    if depth > 8:
        raise ModelError("stack: 'base' chain too long (a cycle?)")
    data = read_json(preset_path(name_or_path, STACKS_DIR, "stack"), "stack")
    base = None
    if isinstance(data, dict) and data.get("base") is not None:
        name = data["base"]
        if not isinstance(name, str) or name not in preset_names(STACKS_DIR):
            raise ModelError(f"stack: 'base' must name a stack preset; presets: "
                             f"{', '.join(preset_names(STACKS_DIR))}")
        base = _read(name, depth + 1)
    return stack_from_dict(data, base)


@memo.lru("stack lineages", 64)
def lineage(name: str) -> tuple[str, ...]:
    """A preset and the presets whose values it inherits, newest first (``base`` after
    ``base``): ``megatron-bridge-26.08`` → (26.08, 26.06, 26.04, 26.02, 25.11, 25.09). A name
    that is no preset: itself alone."""
    chain: list[str] = []
    while name in preset_names(STACKS_DIR) and name not in chain and len(chain) <= 8:
        chain.append(name)
        data = read_json(preset_path(name, STACKS_DIR, "stack"), "stack")
        name = data.get("base") if isinstance(data, dict) else None
        if not isinstance(name, str):
            break
    return tuple(chain) or (name,)


def load_stack(name_or_path: str | Path | Stack | None = None) -> Stack:
    """A stack by preset name or JSON path (its ``base``, a preset, resolved); None: the newest
    preset (the one place a request that names no stack gets its default: the caller passes
    ``"none"`` for none, no module setting changes it); ``"none"``: no stack."""
    if isinstance(name_or_path, Stack):
        return name_or_path
    if name_or_path is None:
        name_or_path = default_stack_name()
    if str(name_or_path) == NONE:
        return NO_STACK
    found = presets().get(str(name_or_path))
    return found if found is not None else _read(name_or_path)
