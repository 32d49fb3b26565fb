"""Every dashboard control declared once: one :class:`Control` record per scenario key.

The scenario schema (:mod:`dashboard.controls.scenario`: fields, defaults, validation messages, the
URL and JSON keys, what the estimator receives), the control panel (:mod:`dashboard.controls.panel`)
and the callbacks that connect them (:mod:`dashboard.state`) are generated from :data:`CONTROLS`:
adding a control is adding one record here. Choices come from the estimator's own tables
(strategies, precisions, execution literals, presets, stacks), never retyped.

A group with a *preset* control (model, system, software stack) is filled from the chosen
preset: a record of that group reads its value from the preset's object — its ``spec`` field
divided by ``scale`` unless it has its own ``read``.

The record (:class:`Control`, :class:`When`) is :mod:`dashboard.controls.control_record`; the
attention and mixture-of-experts records are :mod:`dashboard.controls.control_moe`, the kernel,
schedule and FSDP records :mod:`dashboard.controls.control_stack`, placed in the table below.
Records of a group may form a *section*
(:data:`~dashboard.controls.control_moe.SECTIONS`: attention, mixture of experts, kernels, FSDP),
drawn collapsed while its condition does not hold (a dense model's MoE controls, FSDP's without
ZeRO-3). A record with a ``when`` condition is shown only while it holds; hidden, it keeps its
value in the scenario (the URL and JSON round-trip it) but the estimator receives its ``off``
value instead (a dense model gets no experts whatever the hidden boxes say).
"""

from __future__ import annotations

from typing import Any

from dashboard.controls.control_moe import (
    ATTENTION_CONTROLS,
    MOE_CONTROLS,
    MOE_EXECUTION_CONTROLS,
)
from dashboard.controls.control_record import ON_OFF, Control, When
from dashboard.controls.control_stack import FSDP_CONTROLS, KERNEL_CONTROLS
from model import list_models, list_systems
from model.engine.design import AXES
from model.physics.strategies import SHORT_LABELS, STRATEGIES
from model.specs.cost import DEFAULT_COSTS
from model.specs.precision import NAMES as PRECISIONS
from model.specs.precision import PRECISIONS as PRECISION_TABLE
from model.specs.stack import NONE as NO_STACK
from model.specs.stack import default_stack_name, list_stacks
from model.studies.plan import DEFAULT_MAX_GPUS

# groups of the panel, in order, with their titles; "header" controls sit in the page header
GROUPS = {"model": "Model", "system": "System", "execution": "Execution", "run": "Run",
          "design": "Design space", "plan": "Plan & cost", "header": ""}
DEFAULT_GLOBAL_BATCH = 4096  # sequences, when a model preset publishes none
POWERS_OF_TWO = tuple(2 ** k for k in range(0, 18))


def _budget_kind(m: Any) -> str:
    return "tokens" if m.tokens is not None else "samples"


def _budget(m: Any) -> float:
    return m.tokens if m.tokens is not None else m.samples


def _published_batch(m: Any) -> int:
    return m.global_batch or DEFAULT_GLOBAL_BATCH


def _cost(key: str, label: str, widget: str = "number") -> Control:
    """A site, pricing or failure input (model.specs.cost), its default the estimator's."""
    return Control(key, label, "plan", widget, spec=key, default=getattr(DEFAULT_COSTS, key))


STACKS = (*list_stacks(), NO_STACK)

CONTROLS: tuple[Control, ...] = (
    # --- model ----------------------------------------------------------------------------
    Control("model", "Model preset", "model", "dropdown", str,
            "Model preset: loads its dimensions, training budget and published global batch "
            "into the fields below.", choices=tuple(list_models()), preset=True,
            default="gpt3-1t"),
    Control("layers", "Layers", "model", "number", spec="layers"),
    Control("hidden", "Hidden size", "model", "number", spec="hidden"),
    Control("heads", "Heads", "model", "number", spec="heads"),
    Control("ffn", "FFN size", "model", "number", spec="ffn"),
    Control("mlp", "MLP", "model", "dropdown", spec="mlp"),
    Control("seq_len", "Sequence length", "model", "number", spec="seq_len"),
    Control("vocab", "Vocabulary", "model", "number", spec="vocab"),
    Control("global_batch", "Global batch", "model", "number", int,
            "Sequences (samples) per optimizer step across all GPUs; the box below sets it in "
            "tokens (sequences × sequence length). A preset sets its published batch.",
            unit="sequences", lo=1, hi=100_000_000, read=_published_batch,
            per_token="seq_len"),
    Control("budget_kind", "Budget in", "model", "radio", str,
            "Whether the training budget counts tokens or samples.",
            choices=("tokens", "samples"), read=_budget_kind),
    Control("budget", "Training budget", "model", "number", float,
            "Training budget, in tokens or samples: turns throughput into days.", lo=1, hi=1e18,
            read=_budget),
    *ATTENTION_CONTROLS,
    *MOE_CONTROLS,
    # --- system ---------------------------------------------------------------------------
    Control("system", "GPU / system preset", "system", "dropdown", str,
            "Hardware preset: loads its GPU, HBM and network figures below.",
            choices=tuple(list_systems()), preset=True, default="h200"),
    Control("nvs", "NVLink domain", "system", "number", suggest=(4, 8, 16, 32, 64, 72),
            spec="nvlink_domain_size"),
    Control("hbm_gb", "HBM capacity", "system", "slider",
            slider=(16, 1024, 1, (16, 256, 512, 768, 1024)), spec="hbm_capacity_gb"),
    Control("hbm_tb_per_s", "HBM bandwidth", "system", "slider", unit="TB/s",
            slider=(0.5, 32, 0.1, (1, 8, 16, 24, 32)), spec="hbm_bandwidth_gb_per_s",
            scale=1000.0),
    Control("matrix_tflops", "Peak bf16 matmul", "system", "number", spec="matrix_tflops_fp16"),
    Control("matrix_tflops_fp4", "Peak FP4 matmul", "system", "number", spec="matrix_tflops_fp4"),
    Control("nvlink_gb_per_s", "NVLink bandwidth", "system", "number",
            spec="nvlink_bandwidth_gb_per_s"),
    Control("nic_gb_per_s", "NIC bandwidth", "system", "number", spec="nic_bandwidth_gb_per_s"),
    Control("nics_per_gpu", "NICs per GPU", "system", "number", spec="nics_per_gpu"),
    Control("node_gpus", "Node size", "system", "number", spec="node_gpus"),
    Control("tdp_w", "GPU power", "system", "number", spec="tdp_w"),
    Control("node_power_factor", "Node power share", "system", "number", spec="node_power_factor"),
    Control("usd_per_gpu_hour", "Rental price", "system", "number", spec="usd_per_gpu_hour"),
    Control("purchase_usd_per_gpu", "Purchase price", "system", "number",
            spec="purchase_usd_per_gpu"),
    # --- execution (ignored in the paper mode, which models one execution) -----------------
    Control("stack", "Software stack", "execution", "dropdown", str,
            "The training framework release whose calibrated kernel efficiencies and default "
            "execution apply (loads its defaults into the fields below); every prediction "
            "carries its cross-validated error bar. 'none': the system's own efficiencies, "
            "no error bar. 'fitted: <name>': the stack fitted to your runs on the Validation "
            "page and applied to this session, with its own leave-one-out error.",
            choices=STACKS, preset=True, default=default_stack_name()),
    Control("recompute", "Recompute", "execution", "dropdown", spec="recompute"),
    Control("recompute_layers", "Recomputed layers per stage", "execution", "number",
            spec="recompute_layers"),
    Control("sequence_parallel", "Sequence parallelism", "execution", "switch", names=ON_OFF[1],
            spec="sequence_parallel"),
    Control("interleave", "Interleaved stages (V)", "execution", "number", lo=1,
            spec="interleave"),
    Control("zero", "ZeRO stage", "execution", "radio", spec="zero"),
    Control("precision", "Precision", "execution", "dropdown",
            names=tuple(PRECISION_TABLE[p].label for p in PRECISIONS), spec="precision"),
    Control("tp_overlap", "TP comm overlap", "execution", "switch", names=ON_OFF[1],
            spec="tp_overlap"),
    Control("fp8_param_gather", "FP8 parameter gather", "execution", "switch", names=ON_OFF[1],
            spec="fp8_param_gather"),
    Control("trainable", "Trained weights", "execution", "radio", spec="trainable"),
    Control("lora_rank", "LoRA rank", "execution", "number", suggest=(8, 16, 64),
            spec="lora_rank", when=When("trainable", lambda v: v != "all")),
    Control("lora_targets", "LoRA targets", "execution", "radio", spec="lora_targets",
            when=When("trainable", lambda v: v != "all")),
    Control("production_layout", "Production layouts", "execution", "switch", names=ON_OFF[1],
            spec="production_layout"),
    Control("context_attention", "Context attention", "execution", "dropdown",
            spec="context_attention"),
    Control("offload", "Offload to host", "execution", "dropdown", spec="offload"),
    Control("offload_layers", "Offloaded layers per stage", "execution", "number",
            spec="offload_layers"),
    Control("flash_attention", "Flash attention", "execution", "switch", names=ON_OFF[1],
            spec="flash_attention"),
    Control("fp32_gradients", "FP32 gradients", "execution", "switch", names=ON_OFF[1],
            spec="fp32_gradients"),
    Control("ends_count_as_layers", "Embedding and loss as layers", "execution", "switch",
            names=ON_OFF[1], spec="ends_count_as_layers"),
    Control("dp_overlap", "DP comm overlap", "execution", "switch", names=ON_OFF[1],
            spec="dp_overlap"),
    Control("dp_bucket_mb", "DP bucket size", "execution", "number", spec="dp_bucket_mb"),
    *KERNEL_CONTROLS,
    *FSDP_CONTROLS,
    *MOE_EXECUTION_CONTROLS,
    # --- run ------------------------------------------------------------------------------
    Control("strategy", "Strategy", "run", "radio", str,
            "Tensor-parallel strategy to search (data and pipeline parallelism, microbatch and "
            "NVLink placement are always searched).", choices=("all", *STRATEGIES),
            names=("all", *(SHORT_LABELS[s] for s in STRATEGIES)), default="all"),
    Control("gpus_min", "GPUs (from)", "run", "number", int,
            "Smallest GPU count of the scaling views (powers of two, whatever the NVLink "
            "domain; in the paper mode, multiples of a domain that is not a power of two).",
            lo=1, hi=10_000_000, suggest=POWERS_OF_TWO,
            default=4),
    Control("gpus_max", "GPUs (to)", "run", "number", int,
            "Largest GPU count of the scaling views.", lo=1, hi=10_000_000,
            suggest=POWERS_OF_TWO, default=16384),
    Control("mode", "Model mode", "run", "radio", str,
            "Default: the fixed model with embedding and head. Paper: reproduces arXiv "
            "2410.00273's published figures, bugs included (no stack, no error bars).",
            choices=("default", "paper"), default="default"),
    # --- design-space views ---------------------------------------------------------------
    Control("gpus", "Design GPUs", "design", "number", int,
            "GPU count of the design-space heatmap, the table of top configurations and the "
            "HBM sweep.", lo=1, hi=10_000_000, suggest=POWERS_OF_TWO, default=4096),
    Control("design_strategy", "Design strategy", "design", "radio", str,
            "Strategy of the design-space heatmap and the table.", choices=STRATEGIES,
            names=tuple(SHORT_LABELS[s] for s in STRATEGIES), default="summa"),
    Control("x_axis", "Heatmap x axis", "design", "dropdown", str,
            "Parallel dimension on the heatmap's x axis (the best over all the others is shown "
            "in each cell); ep and etp: expert parallel and expert tensor parallel of a "
            "mixture of experts (1 for a dense model).", choices=AXES, default="tp1"),
    Control("y_axis", "Heatmap y axis", "design", "dropdown", str,
            "Parallel dimension on the heatmap's y axis.", choices=AXES, default="pp"),
    # --- plan & cost (the Plan & cost page; the site inputs are model.specs.cost's) ----------
    Control("plan_goal", "Plan for", "plan", "radio", str,
            "Within days: the fewest GPUs (whole nodes) that train the budget within the target "
            "days. Within budget: the fastest whose cost is at most the budget. Both: the "
            "fewest GPUs meeting both.", choices=("days", "budget", "both"),
            names=("within days", "within budget", "both"), default="days"),
    Control("target_days", "Target days", "plan", "number", float,
            "Train the model's budget within this many days.", unit="days", lo=0.01,
            hi=36_500, default=30.0),
    Control("budget_usd", "Budget", "plan", "number", float,
            "What the run may cost (rental, or amortized purchase plus electricity).",
            unit="USD", lo=1, hi=1e13, default=25e6),
    Control("plan_failures", "Count failures", "plan", "switch", bool,
            "On: the days with failures (checkpoints every Young/Daly interval, restarts) must "
            "meet the target, and GPU-hours, cost and energy are the expected wall time's.",
            choices=ON_OFF[0], names=ON_OFF[1], default=True),  # as tperf plan
    Control("plan_max_gpus", "Plan up to", "plan", "number", int,
            "The largest GPU count the plan searches (every multiple of the node size up to "
            "it); the Pareto figure samples at most 256 counts per system up to it.",
            unit="GPUs", lo=1, hi=DEFAULT_MAX_GPUS, suggest=POWERS_OF_TWO,
            default=DEFAULT_MAX_GPUS),  # as tperf plan
    Control("lost_nodes", "Nodes lost", "plan", "number", int,
            "The lost-node view: the planned job after losing 1, 2, … this many nodes.",
            lo=0, hi=64, default=8),
    _cost("pricing", "Pricing", widget="radio"),
    _cost("pue", "PUE"),
    _cost("usd_per_kwh", "Electricity price"),
    _cost("amortization_years", "Amortized over"),
    _cost("failures_per_gpu_hour", "Failures per GPU-hour"),
    # --- header ---------------------------------------------------------------------------
    Control("presentation", "Presentation mode", "header", "checkbox", bool,
            "Larger fonts for slides.", default=False),
)
BY_KEY: dict[str, Control] = {c.key: c for c in CONTROLS}
