"""Serving stacks as inputs: the engine a serving estimate assumes (docs/serving.md, "Stack").

A preset (``model/data/serving_stacks/*.json``) names an engine release and holds its
scheduler limits (``max_batch`` requests and ``max_num_tokens`` tokens per step, the share of
free HBM given to the KV cache), the launch overhead of one kernel inside a CUDA graph, and per
GPU generation the five values fitted on that engine's published offline throughput
(:mod:`model.validation.serving`): ``gemm`` (fraction of the matmul peak of every precision in
the dense matmuls), ``expert_gemm`` (… in the routed experts' grouped GEMMs, many small GEMMs
of a few tokens each), ``hbm`` (fraction of the HBM bandwidth), ``step_overhead_s`` (host work
per step) and ``sequence_overhead_s`` (host work per sequence in the step: the PyTorch
executor's scheduling, sampling and detokenising of each request, which bounds short requests
at large batches). A generation the preset does not list keeps the system's own fields and no
host overhead. The stack ``none`` applies nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from model.errors import ModelError
from model.specs.hardware import GENERATIONS, System
from model.specs.schema import DATA_DIR, Field, preset_names, preset_path, read_json, validate

SERVING_STACKS_DIR = DATA_DIR / "serving_stacks"
NONE = "none"
DEFAULT = "trtllm-1.0"

GEMM_SHAPES = ("tiles", "kernel-tables")
# whose measured kernel tables a stack's kernel switches use (model.physics.kernels.params)
KERNEL_ENGINES = ("trtllm", "vllm", "sglang")
# One kernel launched eagerly from the host: 11.0 us for a one-element add_ on an H100 with
# PyTorch 2.11 / CUDA 13.0, against 1.0 us per node of a 100-node CUDA graph (measured on the lent
# GPU: model/data/reference/kernels/h100_torch_measured.json, rows of kind "launch"). A stack
# without CUDA graphs pays at least this per kernel of a step.
EAGER_LAUNCH_S = 11.0e-6

FIELDS = (
    Field("name", str, "stack name (default: the file name)"),
    Field("source", str, "where the limits and the fitted values come from", required=True,
          max_len=8000),
    Field("engine", str, "serving engine and version", default=""),
    Field("max_batch", int, "largest batch of one attention rank, requests (divided by the "
          "pipeline stages, as trtllm-bench does)", 1, 10_000_000, default=2048),
    Field("max_num_tokens", int, "largest tokens of one step per attention rank (prefill "
          "chunk plus decode tokens); 0: trtllm-bench's tuning, B·(1 + I/O) within [2048, "
          "32768] for the batch B (tensorrt_llm/bench/build/tuning.py: finetune_setting)",
          0, 10_000_000, default=8192),
    Field("kv_cache_memory_fraction", float, "share of the HBM left after weights and "
          "activations that the KV cache takes", 0.01, 1, default=0.9),
    Field("kernel_overhead_s", float, "launch overhead of one kernel, s", 0, 1e-2,
          default=20e-6),
    Field("hbm_utilization", float, "share of the whole HBM that weights, activations and KV "
          "cache may take (vLLM's gpu_memory_utilization, SGLang's mem_fraction_static); 0: "
          "the KV cache takes kv_cache_memory_fraction of what is left instead", 0, 1,
          default=0.0),
    Field("kv_block_tokens", int, "tokens of one KV-cache block (a sequence holds whole "
          "blocks)", 1, 4096, default=1),
    Field("cuda_graphs", bool, "decode steps replayed as CUDA graphs: each kernel costs "
          "kernel_overhead_s (a graph node); off, each is launched from the host and costs at "
          "least an eager launch (EAGER_LAUNCH_S)", default=True),
    Field("overlap_scheduler", bool, "the host work of a step (scheduling, sampling, "
          "detokenising) runs while the GPU runs the previous step, so a step takes the longer "
          "of the two, not their sum (TensorRT-LLM's overlap scheduler, SGLang's overlap "
          "schedule, vLLM's async scheduling)", default=False),
    Field("validated", bool, "true only where the stack's end-to-end constants were fitted "
          "on published measurements of that engine", default=False),
    Field("moe_kernel", str, "how the routed experts are priced: 'roofline' (the op roofline at "
          "the fitted expert_gemm) or 'measured' (the fused-MoE kernel fitted on "
          "AIConfigurator's tables, model/physics/kernels/moe_kernel.py, where one exists)",
          default="roofline", choices=("roofline", "measured")),
    Field("efficiency", dict, "per GPU generation: gemm, hbm, step_overhead_s", default=None),
    Field("gemm_shapes", str, "shape terms of a dense GEMM's efficiency: 'tiles' (128-row "
          "tile waves and DeepGEMM's depth, model.physics.gemm) or 'kernel-tables' (the "
          "measured kernel tables' fit, model.physics.kernels)", default="tiles",
          choices=GEMM_SHAPES),
    Field("decode_attention", str, "how an MHA/GQA decode step's attention is priced: "
          "'roofline' (the op roofline at the fitted hbm) or 'kernel-tables' (the decode kernel "
          "fitted on AIConfigurator's measured tables, model.physics.kernels.attention_kernel, "
          "where the GPU and KV precision have one)", default="roofline",
          choices=("roofline", "kernel-tables")),
    Field("fit", dict, "what the fit reports (errors, data, commit)", default=None),
    Field("kernels", str, "whose measured kernel tables the kernel switches (gemm_shapes "
          "'kernel-tables', moe_kernel 'measured') use: 'trtllm', 'vllm' or 'sglang' "
          "(model/physics/kernels/params.py, engine_kernels.json)", default="trtllm",
          choices=KERNEL_ENGINES),
)
EFFICIENCY_KEYS = ("gemm", "expert_gemm", "hbm", "step_overhead_s", "sequence_overhead_s")


@dataclass(frozen=True)
class ServingStack:
    """A validated serving-stack preset (see the module docstring)."""

    name: str
    source: str
    engine: str = ""
    max_batch: int = 2048
    max_num_tokens: int = 8192
    kv_cache_memory_fraction: float = 0.9
    kernel_overhead_s: float = 20e-6
    hbm_utilization: float = 0.0
    kv_block_tokens: int = 1
    cuda_graphs: bool = True
    overlap_scheduler: bool = False
    validated: bool = False
    moe_kernel: str = "roofline"
    efficiency: dict[str, dict[str, float]] = field(default_factory=dict, compare=False)
    fit: dict[str, Any] = field(default_factory=dict, compare=False)
    gemm_shapes: str = "tiles"
    kernels: str = "trtllm"
    decode_attention: str = "roofline"

    def __hash__(self) -> int:
        return hash((self.name, self.max_batch, self.max_num_tokens, self.gemm_shapes,
                     self.moe_kernel, self.kernels, self.overlap_scheduler,
                     self.decode_attention,
                     tuple(sorted((g, tuple(sorted(v.items())))
                                  for g, v in self.efficiency.items()))))

    def values_for(self, system: System) -> dict[str, float] | None:
        """The fitted efficiencies of the system's generation (or name), None without."""
        return self.efficiency.get(system.name) or self.efficiency.get(system.generation)

    def apply(self, system: System) -> System:
        """The system with this stack's kernel overhead and, where fitted, its GEMM and HBM
        efficiencies (every precision's dense GEMM efficiency set to ``gemm``, the grouped
        expert GEMMs' to ``expert_gemm``)."""
        if self.name == NONE:
            return system
        launch = self.kernel_overhead_s if self.cuda_graphs else max(self.kernel_overhead_s,
                                                                         EAGER_LAUNCH_S)
        changes: dict[str, Any] = {"kernel_overhead_s": launch}
        values = self.values_for(system)
        if values:
            gemm = values["gemm"]
            changes.update(hbm_efficiency=values["hbm"], flop_efficiency=gemm,
                           flop_efficiency_fp8=gemm, flop_efficiency_mxfp8=gemm,
                           flop_efficiency_fp4=gemm,
                           expert_flop_efficiency=values["expert_gemm"],
                           expert_flop_efficiency_fp8=values["expert_gemm"])
        return system.with_overrides(**changes)

    def overheads_s(self, system: System) -> tuple[float, float]:
        """Host time per engine step and per sequence in a step on this system (0 where the
        stack has no fit)."""
        values = self.values_for(system)
        if not values:
            return 0.0, 0.0
        return float(values["step_overhead_s"]), float(values["sequence_overhead_s"])

    def with_efficiency(self, table: dict[str, dict[str, float]]) -> ServingStack:
        """A copy with other per-generation efficiencies (the fit tries candidates)."""
        return replace(self, efficiency=table)


def _efficiency_table(data: Any) -> dict[str, dict[str, float]]:
    """Check the per-generation table: known keys, fractions in (0, 1], overhead ≥ 0."""
    if data is None:
        return {}
    out: dict[str, dict[str, float]] = {}
    for gen, values in data.items():
        if gen not in GENERATIONS and not isinstance(gen, str):
            raise ModelError(f"serving stack: unknown generation {gen!r}")
        if not isinstance(values, dict) or set(values) != set(EFFICIENCY_KEYS):
            raise ModelError(f"serving stack: efficiency of '{gen}' needs exactly "
                             f"{', '.join(EFFICIENCY_KEYS)}")
        gemm, expert, hbm, step, seq = (float(values[k]) for k in EFFICIENCY_KEYS)
        if not (0 < gemm <= 1 and 0 < expert <= 1 and 0 < hbm <= 1 and 0 <= step < 1
                and 0 <= seq < 1):
            raise ModelError(f"serving stack: efficiency of '{gen}' out of range "
                             "(gemm, expert_gemm, hbm in (0, 1], overheads in [0, 1) s)")
        out[gen] = {"gemm": gemm, "expert_gemm": expert, "hbm": hbm, "step_overhead_s": step,
                    "sequence_overhead_s": seq}
    return out


def serving_stack_from_dict(data: Any, default_name: str = "stack") -> ServingStack:
    clean = validate("serving stack", data, FIELDS)
    clean["name"] = clean["name"] or default_name
    clean["efficiency"] = _efficiency_table(clean["efficiency"])
    clean["fit"] = clean["fit"] or {}
    return ServingStack(**clean)


def list_serving_stacks() -> list[str]:
    return preset_names(SERVING_STACKS_DIR) + [NONE]


def load_serving_stack(name: str | Path | ServingStack | None = None) -> ServingStack:
    """A preset by name (default :data:`DEFAULT`), a JSON file, or ``none``."""
    if isinstance(name, ServingStack):
        return name
    name = DEFAULT if name is None else name
    if str(name) == NONE:
        return ServingStack(NONE, "no stack: the system's own efficiencies", kernel_overhead_s=0.0)
    path = preset_path(name, SERVING_STACKS_DIR, "serving stack")
    return serving_stack_from_dict(read_json(path, "serving stack"), Path(path).stem)
