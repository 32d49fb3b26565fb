"""Hardware: one GPU type in a two-tier network (NVLink domain + NIC-scaled slow network).

A system spec is a JSON object whose keys carry their unit (``_tflops``, ``_gb``, ``_gb_per_s``,
``_s``); presets live in ``model/data/systems/*.json`` with a ``source``. Inside the model
everything is SI: FLOP/s, bytes, bytes/s, seconds (see the properties of :class:`System`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from model.errors import ModelError
from model.specs import memo
from model.specs.cost import DEFAULT_COSTS, Costs, resolve_costs
from model.specs.precision import PRECISIONS, unsupported
from model.specs.schema import DATA_DIR, Field, preset_names, preset_path, read_json, validate

SYSTEMS_DIR = DATA_DIR / "systems"
GENERATIONS = ("ampere", "hopper", "blackwell", "blackwell-ultra", "cdna3")

FIELDS = (
    Field("name", str, "system name (default: the file name)"),
    Field("source", str, "where the figures come from", required=True, max_len=8000),
    Field("gpu", str, "GPU model", default=""),
    Field("generation", str, "GPU generation (which calibrated efficiencies of a software stack "
          "apply)", default="", choices=("",) + GENERATIONS),
    Field(
        "matrix_tflops_fp16",
        float,
        "dense tensor-core peak per GPU, fp16/bf16, TFLOP/s",
        0.1,
        1e5,
        required=True,
        unit="TFLOP/s",
    ),
    Field(
        "matrix_tflops_fp8",
        float,
        "dense tensor-core peak, fp8, TFLOP/s (0 = none)",
        0,
        1e5,
        default=0.0,
    ),
    Field("exp_tera_per_s", float, "exponentials per second of the special-function units, "
          "10^12 exp/s (unset: not modelled)", 0.01, 1e4),
    Field("matrix_tflops_fp4", float, "dense tensor-core peak per GPU, fp4 (NVFP4), TFLOP/s, "
          "what NVFP4 weights run at (0: no FP4 units, as Hopper: NVFP4 is refused)",
          0, 1e5, default=0.0, unit="TFLOP/s"),
    Field(
        "vector_tflops_fp16", float, "non-tensor-core peak, fp16, TFLOP/s", 0.01, 1e5, required=True
    ),
    Field(
        "vector_tflops_fp32", float, "non-tensor-core peak, fp32, TFLOP/s", 0.01, 1e5, required=True
    ),
    Field("hbm_capacity_gb", float, "HBM per GPU, GB (1e9 bytes): what a configuration must "
          "fit into", 1, 1e5, required=True, unit="GB"),
    Field("memory_reserve_gb", float,
          "HBM not available to the model: CUDA context, workspaces, communication buffers, "
          "fragmentation, GB", 0, 1e4, default=0.0),
    Field("nvlink_half_message_bytes", float,
          "ring-step message size at which NVLink reaches half its bandwidth (0: no fall-off)",
          0, 1e12, default=0.0),
    Field("network_half_message_bytes", float,
          "ring-step message size at which the network reaches half its bandwidth (0: none)",
          0, 1e12, default=0.0),
    Field("host_memory_gb", float, "second memory tier (host DRAM) per GPU for offload, GB "
          "(0: none)", 0, 1e5, default=0.0),
    Field("host_bandwidth_gb_per_s", float,
          "GPU ↔ host link per GPU per direction (PCIe, NVLink-C2C), GB/s", 0, 1e5, default=0.0),
    Field("host_memory_bandwidth_gb_per_s", float,
          "host DRAM bandwidth per GPU for the CPU optimizer step, GB/s", 0, 1e5, default=0.0),
    Field("hbm_bandwidth_gb_per_s", float, "HBM bandwidth per GPU, GB/s: bounds memory-bound "
          "ops", 1, 1e6, required=True, unit="GB/s"),
    Field("hbm_efficiency", float, "achievable fraction of HBM bandwidth", 0.05, 1, default=1.0),
    Field("flop_efficiency", float, "achievable fraction of peak FLOP/s", 0.05, 1, default=0.8),
    Field("flop_efficiency_fp8", float, "achievable fraction of the FP8 peak (default: as bf16)",
          0.05, 1),
    Field("flop_efficiency_mxfp8", float, "achievable fraction of the FP8 peak with MXFP8 "
          "(default: as FP8)", 0.05, 1),
    Field("flop_efficiency_fp4", float, "achievable fraction of the FP4 peak (default: as FP8)",
          0.05, 1),
    Field("attention_efficiency", float,
          "achievable fraction of peak in fused attention (default: as the matmuls)", 0.05, 1),
    Field("expert_flop_efficiency", float, "achievable fraction of the BF16 peak in the grouped "
          "GEMMs of the routed experts (default: as the dense matmuls)", 0.05, 1),
    Field("expert_flop_efficiency_fp8", float, "… of the FP8/FP4 peak in the grouped expert "
          "GEMMs (default: as the dense FP8 matmuls)", 0.05, 1),
    Field("moe_token_efficiency", float, "achievable fraction of the HBM bandwidth in the MoE "
          "layer's token kernels: router, permutation, unpermutation (default: 1)", 0.01, 1),
    Field("sm_count", int, "streaming multiprocessors (GEMM wave quantisation; 0: off)", 0, 10_000,
          default=0),
    Field("gemm_tile", int, "GEMM output tile edge, elements (wave quantisation)", 16, 1024,
          default=128),
    Field("kernel_overhead_s", float, "fixed launch overhead per op, s", 0, 1e-2, default=20e-6),
    Field("overlap_slowdown", float, "fraction of the communication time hidden behind compute "
          "that is still paid: the collective's kernels take SMs and HBM bandwidth from the "
          "compute they overlap (0: perfect overlap)", 0, 1, default=0.0),
    Field(
        "nvlink_domain_size", int, "GPUs in one NVLink/NVSwitch domain (the fast network); the "
        "rest talk over NICs", 1, 1_000_000, required=True, unit="GPUs"
    ),
    Field(
        "nvlink_bandwidth_gb_per_s",
        float,
        "NVLink bandwidth per GPU per direction, GB/s",
        0.1,
        1e6,
        required=True,
        unit="GB/s",
    ),
    Field(
        "nvlink_efficiency", float, "achievable fraction of NVLink bandwidth", 0.05, 1, default=0.7
    ),
    Field(
        "nvlink_latency_s",
        float,
        "latency per ring step inside the domain, s",
        0,
        1e-2,
        default=2.5e-6,
    ),
    Field(
        "nic_bandwidth_gb_per_s",
        float,
        "bandwidth of one NIC per direction, GB/s (400 Gb/s = 50 GB/s)",
        0.01,
        1e5,
        required=True,
        unit="GB/s",
    ),
    Field("nics_per_gpu", float, "NICs per GPU: rings across domains scale with them", 0.01, 64,
          default=1.0),
    Field(
        "network_efficiency", float, "achievable fraction of NIC bandwidth", 0.05, 1, default=0.7
    ),
    Field(
        "network_latency_s", float, "latency per ring step across domains, s", 0, 1e-2, default=5e-6
    ),
    # the unit a job gains or loses, power and prices (docs/model.md §15; sources in cost_source)
    Field("node_gpus", int, "GPUs per node: a server, or a compute tray of a rack-scale system "
          "(4 in an NVL72 rack): what a job gains or loses at once, the plan's step (0: the "
          "NVLink domain is the node)", 0, 1_000_000, default=0, unit="GPUs"),
    Field("tdp_w", float, "rated power of one GPU (TDP, maximum board power), W (0: unknown, no "
          "energy)", 0, 1e5, default=0.0, unit="W"),
    Field("node_power_factor", float, "maximum power of a node (or rack) per GPU over the GPU's "
          "TDP: the share of CPUs, NICs, switches, fans and power supplies (1: the GPU alone)",
          1, 10, default=1.0),
    Field("usd_per_gpu_hour", float, "rental price of one GPU-hour, power included, USD (0: "
          "unknown)", 0, 1e5, default=0.0, unit="USD/GPU-hour"),
    Field("purchase_usd_per_gpu", float, "purchase price of one GPU with its share of the "
          "system, USD (0: unknown)", 0, 1e9, default=0.0, unit="USD/GPU"),
    Field("cost_source", str, "where the node size, power and prices come from, with dates",
          default="", max_len=8000),
)
COST_FIELDS = ("node_gpus", "tdp_w", "node_power_factor", "usd_per_gpu_hour",
               "purchase_usd_per_gpu", "cost_source")  # no influence on a configuration's time


@dataclass(frozen=True)
class System:
    """A validated system spec. Field names carry units; the SI properties feed the formulas."""

    name: str
    source: str
    gpu: str
    generation: str
    matrix_tflops_fp16: float
    matrix_tflops_fp8: float
    matrix_tflops_fp4: float
    exp_tera_per_s: float | None
    vector_tflops_fp16: float
    vector_tflops_fp32: float
    hbm_capacity_gb: float
    hbm_bandwidth_gb_per_s: float
    host_memory_gb: float
    host_bandwidth_gb_per_s: float
    host_memory_bandwidth_gb_per_s: float
    memory_reserve_gb: float
    nvlink_half_message_bytes: float
    network_half_message_bytes: float
    hbm_efficiency: float
    flop_efficiency: float
    sm_count: int
    gemm_tile: int
    flop_efficiency_fp8: float | None
    flop_efficiency_mxfp8: float | None
    flop_efficiency_fp4: float | None
    attention_efficiency: float | None
    expert_flop_efficiency: float | None
    expert_flop_efficiency_fp8: float | None
    moe_token_efficiency: float | None
    kernel_overhead_s: float
    overlap_slowdown: float
    nvlink_domain_size: int
    nvlink_bandwidth_gb_per_s: float
    nvlink_efficiency: float
    nvlink_latency_s: float
    nic_bandwidth_gb_per_s: float
    nics_per_gpu: float
    network_efficiency: float
    network_latency_s: float
    node_gpus: int = 0
    tdp_w: float = 0.0
    node_power_factor: float = 1.0
    usd_per_gpu_hour: float = 0.0
    purchase_usd_per_gpu: float = 0.0
    cost_source: str = ""
    # site, pricing and failure inputs (model.specs.cost): not part of the JSON spec
    costs: Costs = field(default=DEFAULT_COSTS, compare=True)

    @property
    def node_size(self) -> int:
        """GPUs per node, the unit a job gains or loses: ``node_gpus``, or the NVLink domain."""
        return self.node_gpus or self.nvlink_domain_size

    def with_costs(self, costs: Costs | dict | None) -> System:
        """A copy with other site, pricing or failure inputs (None: this system's as they are;
        a dict changes only the inputs it names)."""
        if costs is None:
            return self
        if isinstance(costs, dict):
            costs = self.costs.with_overrides(**costs)
        return replace(self, costs=resolve_costs(costs))

    # --- SI views used by the formulas -------------------------------------------------------
    @property
    def matrix_flop_per_s(self) -> float:
        """Dense fp16/bf16 tensor-core peak, FLOP/s."""
        return self.matrix_tflops_fp16 * 1e12

    def matrix_peak_flop_per_s(self, precision: str) -> float:
        """Dense tensor-core peak of the matmuls in ``precision``, FLOP/s: the field its
        :class:`~model.specs.precision.Precision` names (BF16/FP16 for bf16 and fp16, the FP8
        rate for every FP8 recipe and MXFP8, the FP4 rate for NVFP4; each preset cites its
        datasheet). The rate the matmuls are priced at, so MFU divides by the peak of the
        precision that runs; ModelError when the GPU lacks it (:meth:`precision_problem`)."""
        problem = self.precision_problem(precision)
        if problem:
            raise ModelError(problem)
        return getattr(self, PRECISIONS[precision].peak_field) * 1e12

    def precision_problem(self, precision: str) -> str:
        """Why this GPU cannot run ``precision`` ('' when it can): the format × generation
        table of :mod:`model.specs.precision`, then a peak rate in the spec."""
        if precision not in PRECISIONS:
            return f"unknown precision {precision!r:.40}; choose {', '.join(PRECISIONS)}"
        name = self.gpu or self.name
        return unsupported(precision, self.generation,
                           getattr(self, PRECISIONS[precision].peak_field), name)

    @property
    def vector_flop_per_s(self) -> float:
        """fp16 vector (non-tensor-core) peak, FLOP/s."""
        return self.vector_tflops_fp16 * 1e12

    @property
    def hbm_bytes_per_s(self) -> float:
        """Achievable HBM bandwidth, bytes/s = GB/s · 1e9 · efficiency."""
        return self.hbm_bandwidth_gb_per_s * 1e9 * self.hbm_efficiency

    @property
    def usable_hbm_bytes(self) -> float:
        """What a configuration must fit into: capacity minus the reserve, bytes."""
        return (self.hbm_capacity_gb - self.memory_reserve_gb) * 1e9

    @property
    def hbm_capacity_bytes(self) -> float:
        return self.hbm_capacity_gb * 1e9

    @property
    def fast_bytes_per_s(self) -> float:
        """Effective NVLink bandwidth per direction, bytes/s (b_f in the spec)."""
        return self.nvlink_bandwidth_gb_per_s * 1e9 * self.nvlink_efficiency

    @property
    def slow_bytes_per_s(self) -> float:
        """Effective bandwidth of one NIC per direction, bytes/s (b_s in the spec)."""
        return self.nic_bandwidth_gb_per_s * 1e9 * self.network_efficiency

    def gemm_efficiency(self, key: str) -> float:
        """The achievable fraction of the matmul peak for an efficiency key of
        :mod:`model.specs.precision`: bf16, fp8 (default: as bf16), mxfp8 and nvfp4 (default:
        as fp8)."""
        fp8 = self.flop_efficiency_fp8 or self.flop_efficiency
        return {"bf16": self.flop_efficiency, "fp8": fp8,
                "mxfp8": self.flop_efficiency_mxfp8 or fp8,
                "nvfp4": self.flop_efficiency_fp4 or fp8}[key]

    def with_overrides(self, **changes: Any) -> System:
        """A copy with some fields changed (e.g. ``nvlink_domain_size=64``), re-validated."""
        if all(getattr(self, k, None) == v for k, v in changes.items()):
            return self  # nothing changes (a frequent case: --nvs equal to the preset's)
        typed = tuple((k, type(v), v) for k, v in changes.items())  # True is not 1 here
        return _overridden(self, typed)

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in FIELDS}


@memo.lru("system copies", 64)
def _overridden(system: System, typed: tuple[tuple[str, type, Any], ...]) -> System:
    """:meth:`System.with_overrides` of (name, type, value) changes, remembered per process (a
    search with ``nvs`` asks for the same copy each time; systems are frozen)."""
    changes = {k: v for k, _, v in typed}
    table = tuple(f for f in FIELDS if f.name in changes)
    unknown = set(changes) - {f.name for f in table}
    if unknown:
        raise ModelError(f"system: unknown key '{sorted(unknown)[0]}'")
    return replace(system, **validate("system", changes, table))


def system_from_dict(data: Any, default_name: str = "system") -> System:
    """Validate a system spec (dict) and build a :class:`System`.

    ``"base": "<preset>"`` starts from that preset: the spec's other keys replace its values
    (the ``source`` then says which preset and what changed, unless given). The name defaults
    to ``default_name``.
    """
    if isinstance(data, dict) and "base" in data:
        data = _from_base(data)
    clean = validate("system", data, FIELDS)
    clean["name"] = clean["name"] or default_name
    return System(**clean)



def _from_base(data: dict[Any, Any]) -> dict[Any, Any]:
    """A spec with ``base`` as the preset's values overridden by the spec's own."""
    base = data["base"]
    if not isinstance(base, str) or base not in list_systems():
        raise ModelError(f"system: 'base' must be a system preset ({', '.join(list_systems())}),"
                         f" got {base!r:.80}")
    own = {k: v for k, v in data.items() if k != "base"}
    preset = load_system(base).to_dict()
    changed = sorted(str(k) for k in own if k not in ("name", "source"))
    source = (f"the {base} preset (see its sources)"
              + (f" with {', '.join(changed)} changed" if changed else ""))
    return {**preset, "name": None, "source": source, **own}


def list_systems() -> list[str]:
    """Names of the system presets in ``model/data/systems/``."""
    return preset_names(SYSTEMS_DIR)


def load_system(name_or_path: str | Path, nvlink_domain_size: int | None = None) -> System:
    """Load a preset (``h200``) or a JSON file; optionally override the NVLink domain size."""
    path = preset_path(name_or_path, SYSTEMS_DIR, "system")
    system = system_from_dict(read_json(path, "system"), Path(path).stem)
    if nvlink_domain_size is not None:
        system = system.with_overrides(nvlink_domain_size=nvlink_domain_size)
    return system
