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
Records of a group may form a
*section* (:data:`SECTIONS`: attention, mixture of experts, kernels, FSDP), drawn collapsed while
its condition does not hold (a dense model's MoE controls, FSDP's without ZeRO-3). A record with a
``when`` condition is shown only while it holds; hidden, it keeps its value in the scenario (the
URL and JSON round-trip it) but the estimator receives its ``off`` value instead (a dense model
gets no experts whatever the hidden boxes say).
"""

from __future__ import annotations

from typing import Any

from dashboard.controls.control_moe import (  # noqa: F401 - SECTIONS re-exported with the table
    ATTENTION_CONTROLS,
    MOE_CONTROLS,
    MOE_EXECUTION_CONTROLS,
    SECTIONS,
)
from dashboard.controls.control_record import ON_OFF, WIDGETS, Control, When  # noqa: F401 - re-exported
from dashboard.controls.control_stack import FSDP_CONTROLS, KERNEL_CONTROLS
from model import list_models, list_systems
from model.engine.design import AXES
from model.physics.strategies import SHORT_LABELS, STRATEGIES
from model.specs import execution as ex
from model.specs.cost import DEFAULT_COSTS
from model.specs.cost import FIELDS as COST_FIELDS
from model.specs.execution_fields import LORA_TARGETS, TRAINABLE
from model.specs.precision import NAMES as PRECISIONS
from model.specs.precision import PRECISIONS as PRECISION_TABLE
from model.specs.schema import Field
from model.specs.stack import NONE as NO_STACK
from model.specs.stack import default_stack_name, list_stacks
from model.specs.transformer import FIELDS as MODEL_FIELDS
from model.studies.plan import DEFAULT_MAX_GPUS

# groups of the panel, in order, with their titles; "header" controls sit in the page header
GROUPS = {"model": "Model", "system": "System", "execution": "Execution", "run": "Run",
          "design": "Design space", "plan": "Plan & cost", "header": ""}
DEFAULT_GLOBAL_BATCH = 4096  # sequences, when a model preset publishes none
POWERS_OF_TWO = tuple(2 ** k for k in range(0, 18))


def _model_choice(text: str) -> Field:
    return next(f for f in MODEL_FIELDS if f.name == text)


def _budget_kind(m: Any) -> str:
    return "tokens" if m.tokens is not None else "samples"


def _budget(m: Any) -> float:
    return m.tokens if m.tokens is not None else m.samples


def _published_batch(m: Any) -> int:
    return m.global_batch or DEFAULT_GLOBAL_BATCH


_COST_FIELD = {f.name: f for f in COST_FIELDS}


def _cost(key: str, label: str, unit: str, tip: str, widget: str = "number") -> Control:
    """A site, pricing or failure input: range, choices and default from model.specs.cost."""
    f = _COST_FIELD[key]
    return Control(key, label, "plan", widget, f.kind, tip, unit=unit, lo=f.lo, hi=f.hi,
                   choices=tuple(f.choices or ()), spec=key, default=getattr(DEFAULT_COSTS, key))
STACKS = (*list_stacks(), NO_STACK)

CONTROLS: tuple[Control, ...] = (
    # --- model ----------------------------------------------------------------------------
    Control("model", "Model preset", "model", "dropdown", str,
            "Model preset: loads its dimensions, training budget and published global batch "
            "into the fields below.", choices=tuple(list_models()), preset=True,
            default="gpt3-1t"),
    Control("layers", "Layers", "model", "number", int, "Number of transformer blocks (depth).",
            lo=1, hi=10_000, spec="layers"),
    Control("hidden", "Hidden size", "model", "number", int, "Hidden (embedding) size e.",
            lo=8, hi=1_000_000, spec="hidden"),
    Control("heads", "Heads", "model", "number", int,
            "Attention heads h; must divide the hidden size.", lo=1, hi=100_000, spec="heads"),
    Control("ffn", "FFN size", "model", "number", int,
            "Hidden size of the dense MLP (4·hidden for GPT; SwiGLU models use about "
            "8/3·hidden); in a mixture of experts, that of its dense layers.",
            lo=1, hi=10_000_000, spec="ffn"),
    Control("mlp", "MLP", "model", "dropdown", str,
            "MLP activation: GELU (two matrices) or SwiGLU (three matrices).",
            choices=_model_choice("mlp").choices, spec="mlp"),
    Control("seq_len", "Sequence length", "model", "number", int,
            "Tokens per sequence (or patches per image for a ViT).", unit="tokens", lo=1,
            hi=100_000_000, spec="seq_len"),
    Control("vocab", "Vocabulary", "model", "number", int,
            "Vocabulary size; 0 means no embedding, LM head or loss (a ViT).", unit="tokens",
            lo=0, hi=100_000_000, spec="vocab"),
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
    Control("nvs", "NVLink domain", "system", "number", int,
            "GPUs per NVLink/NVSwitch domain (fast network); the rest talk over NICs.",
            unit="GPUs", lo=1, hi=100_000, suggest=(4, 8, 16, 32, 64, 72),
            spec="nvlink_domain_size"),
    Control("hbm_gb", "HBM capacity", "system", "slider", float,
            "HBM capacity per GPU: what a configuration must fit into. Type any value; the "
            "slider moves in 1 GB steps.", unit="GB", lo=1, hi=100_000,
            slider=(16, 1024, 1, (16, 256, 512, 768, 1024)), spec="hbm_capacity_gb"),
    Control("hbm_tb_per_s", "HBM bandwidth", "system", "slider", float,
            "HBM bandwidth per GPU: bounds memory-bound ops. Type any value; the slider moves "
            "in 0.1 TB/s steps.", unit="TB/s", lo=0.01, hi=1_000,
            slider=(0.5, 32, 0.1, (1, 8, 16, 24, 32)), spec="hbm_bandwidth_gb_per_s",
            scale=1000.0),
    Control("matrix_tflops", "Peak bf16 matmul", "system", "number", float,
            "Dense fp16/bf16 tensor-core peak per GPU.", unit="TFLOP/s", lo=0.1, hi=100_000,
            spec="matrix_tflops_fp16"),
    Control("matrix_tflops_fp4", "Peak FP4 matmul", "system", "number", float,
            "Dense FP4 (NVFP4) tensor-core peak per GPU, what NVFP4 weights run at on the "
            "Serving page; 0: no FP4 units (Hopper), and NVFP4 is refused.", unit="TFLOP/s",
            lo=0, hi=100_000, spec="matrix_tflops_fp4"),
    Control("nvlink_gb_per_s", "NVLink bandwidth", "system", "number", float,
            "NVLink bandwidth per GPU per direction.", unit="GB/s", lo=0.1, hi=1e6,
            spec="nvlink_bandwidth_gb_per_s"),
    Control("nic_gb_per_s", "NIC bandwidth", "system", "number", float,
            "Bandwidth of one NIC per direction (400 Gb/s = 50 GB/s).", unit="GB/s", lo=0.01,
            hi=100_000, spec="nic_bandwidth_gb_per_s"),
    Control("nics_per_gpu", "NICs per GPU", "system", "number", float,
            "NICs per GPU: rings across domains scale with them.", lo=0.01, hi=64,
            spec="nics_per_gpu"),
    Control("node_gpus", "Node size", "system", "number", int,
            "GPUs a job gains or loses at once: a server, or a rack-scale system's compute "
            "tray (4 in an NVL72 rack); 0: the NVLink domain. The plan steps by it.",
            unit="GPUs", lo=0, hi=1_000_000, spec="node_gpus"),
    Control("tdp_w", "GPU power", "system", "number", float,
            "Rated power of one GPU (TDP) from the preset's sources (Plan & cost shows them); "
            "0: unknown, no energy.", unit="W", lo=0, hi=1e5, spec="tdp_w"),
    Control("node_power_factor", "Node power share", "system", "number", float,
            "A node's (or rack's) maximum power per GPU over the GPU's TDP: CPUs, NICs, "
            "switches, fans, power supplies (1: the GPU alone).", lo=1, hi=10,
            spec="node_power_factor"),
    Control("usd_per_gpu_hour", "Rental price", "system", "number", float,
            "What one GPU-hour rents for, power included (the preset's source and date are on "
            "the Plan & cost page); 0: unknown.", unit="USD/GPU-hour", lo=0, hi=1e5,
            spec="usd_per_gpu_hour"),
    Control("purchase_usd_per_gpu", "Purchase price", "system", "number", float,
            "Purchase price of one GPU with its share of the system; 0: unknown.",
            unit="USD/GPU", lo=0, hi=1e9, spec="purchase_usd_per_gpu"),
    # --- execution (ignored in the paper mode, which models one execution) -----------------
    Control("stack", "Software stack", "execution", "dropdown", str,
            "The training framework release whose calibrated kernel efficiencies and default "
            "execution apply (loads its defaults into the fields below); every prediction "
            "carries its cross-validated error bar. 'none': the system's own efficiencies, "
            "no error bar. 'fitted: <name>': the stack fitted to your runs on the Validation "
            "page and applied to this session, with its own leave-one-out error.",
            choices=STACKS, preset=True, default=default_stack_name()),
    Control("recompute", "Recompute", "execution", "dropdown", str,
            "Activation recompute: selective (Megatron: the attention core reruns), op-sac "
            "(TorchTitan's per-op policy: every second matmul and the element-wise ops rerun; "
            "Llama-style dense blocks), full (keep only each block's input, rerun its forward "
            "in the backward) or none (keep everything; the attention scores only with "
            "unfused attention: the kernel is the Flash attention control's).",
            choices=ex.RECOMPUTE, spec="recompute"),
    Control("recompute_layers", "Recomputed layers per stage", "execution", "number", int,
            "Partial (block) recompute: this many layers of each pipeline stage recompute "
            "fully, the others as Recompute says (Megatron's --recompute-num-layers); 0: none. "
            "Not with full recompute.", lo=0, hi=10_000, spec="recompute_layers"),
    Control("sequence_parallel", "Sequence parallelism", "execution", "switch", bool,
            "Megatron sequence parallelism: norms and dropouts on l/tp rows with "
            "reduce-scatter + all-gather instead of all-reduce (1D and context).",
            choices=ON_OFF[0], names=ON_OFF[1], spec="sequence_parallel"),
    Control("interleave", "Interleaved stages (V)", "execution", "number", int,
            "Virtual pipeline stages per GPU (interleaved 1F1B): a V× smaller bubble, V× the "
            "stage-to-stage messages, more activations in flight.", lo=1, hi=64,
            spec="interleave"),
    Control("zero", "ZeRO stage", "execution", "radio", int,
            "ZeRO stage: 0 replicated optimizer, 1 distributed optimizer, 2 + gradients, "
            "3 + weights (FSDP: weights gathered per block, every microbatch).",
            choices=ex.ZERO_STAGES, spec="zero"),
    Control("precision", "Precision", "execution", "dropdown", str,
            "Matmul precision: bf16/fp16, FP8 with current, delayed or 128-element block "
            "scaling, or Blackwell's block-scaled MXFP8 and NVFP4 (linear layers at that "
            "rate, with their quantisation kernels; attention stays bf16).", choices=PRECISIONS,
            names=tuple(PRECISION_TABLE[p].label for p in PRECISIONS), spec="precision"),
    Control("tp_overlap", "TP comm overlap", "execution", "switch", bool,
            "Overlap tensor-parallel collectives with the matmuls next to them.",
            choices=ON_OFF[0], names=ON_OFF[1], spec="tp_overlap"),
    Control("fp8_param_gather", "FP8 parameter gather", "execution", "switch", bool,
            "With an FP8 precision, the data-parallel all-gather of the updated parameters "
            "moves FP8 bytes, about half of BF16 (Megatron's --fp8-param-gather, on in "
            "Megatron-Bridge's FP8 recipes).", choices=ON_OFF[0], names=ON_OFF[1],
            spec="fp8_param_gather"),
    Control("trainable", "Trained weights", "execution", "radio", str,
            "Which weights train: all (pre-training, full fine-tuning), or LoRA adapters on "
            "frozen BF16 (lora) or 4-bit NF4 (qlora) base weights: no weight gradients for the "
            "base, gradients and optimizer state for the adapters only (model/physics/lora.py).",
            choices=TRAINABLE, spec="trainable"),
    Control("lora_rank", "LoRA rank", "execution", "number", int,
            "Rank r of each adapter (A: k×r, B: r×n); ignored when every weight trains.",
            lo=1, hi=65_536, suggest=(8, 16, 64), spec="lora_rank",
            when=When("trainable", lambda v: v != "all")),
    Control("lora_targets", "LoRA targets", "execution", "radio", str,
            "The matmuls that carry adapters: attention, MLP (the experts too), all, or the "
            "fused QKV matmul alone (Megatron-Bridge's performance recipes).",
            choices=LORA_TARGETS, spec="lora_targets",
            when=When("trainable", lambda v: v != "all")),
    Control("production_layout", "Production layouts", "execution", "switch", bool,
            "Only layouts a production stack runs: tensor parallelism inside one NVLink "
            "domain and jobs of whole nodes (model/engine/production.py). Off: also TP "
            "groups across domains and partial nodes, which no production run uses.",
            choices=ON_OFF[0], names=ON_OFF[1], spec="production_layout"),
    Control("context_attention", "Context attention", "execution", "dropdown", str,
            "Context parallelism (cp, the context strategy's second axis): all-gather K/V before "
            "attending, or ring attention (K/V blocks passed around the ring under the "
            "attention compute), or PyTorch's context_parallel as torchtitan runs it (one "
            "K/V all-gather, FP32 dK/dV ring and merges).", choices=ex.CONTEXT_ATTENTION,
            spec="context_attention"),
    Control("offload", "Offload to host", "execution", "dropdown", str,
            "Keep these in host memory (the system's host tier): the optimizer (Adam on the "
            "CPU), activations or weights, streamed over the host link.", choices=ex.OFFLOAD,
            spec="offload"),
    Control("offload_layers", "Offloaded layers per stage", "execution", "number", int,
            "Partial activation offload: the activations of this many layers of each pipeline "
            "stage go to host memory after their forward and come back for their backward, "
            "under the compute of other layers (Megatron-Core's cpu_offloading_num_layers); "
            "0: none. Not with activation offload, which moves every layer's.", unit="layers",
            lo=0, hi=10_000, spec="offload_layers"),
    Control("flash_attention", "Flash attention", "execution", "switch", bool,
            "Fused attention; off: the score matrices go through HBM (QKᵀ out, softmax, "
            "dropout, PV in), as in Megatron-LM before flash attention.",
            choices=ON_OFF[0], names=ON_OFF[1], spec="flash_attention"),
    Control("fp32_gradients", "FP32 gradients", "execution", "switch", bool,
            "Accumulate and reduce gradients in fp32 (Megatron's main_grad): 4 bytes per "
            "parameter and twice the data-parallel reduce-scatter volume.",
            choices=ON_OFF[0], names=ON_OFF[1], spec="fp32_gradients"),
    Control("ends_count_as_layers", "Embedding and loss as layers", "execution", "switch",
            bool, "The embedding and the loss each count as one layer in the pipeline split: "
            "the first and last stages hold one layer fewer (Megatron's "
            "account_for_embedding/loss_in_pipeline_split).",
            choices=ON_OFF[0], names=ON_OFF[1], spec="ends_count_as_layers"),
    Control("dp_overlap", "DP comm overlap", "execution", "switch", bool,
            "Overlap each block's data-parallel gradient reduction (and parameter gather) with "
            "the next block's compute; off: after the backward pass, exposed (Megatron-LM "
            "2021).", choices=ON_OFF[0], names=ON_OFF[1], spec="dp_overlap"),
    Control("dp_bucket_mb", "DP bucket size", "execution", "number", float,
            "Data-parallel (and FSDP) collectives issued in buckets of at most this many MB, "
            "each paying the ring's latency again; 0: one per block.", unit="MB",
            lo=ex.RANGES["dp_bucket_mb"][0], hi=ex.RANGES["dp_bucket_mb"][1],
            spec="dp_bucket_mb"),
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
    Control("compat", "Model mode", "run", "radio", str,
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
    _cost("pricing", "Pricing", "", "Rental: the rental price per GPU-hour (power included). "
          "Purchase: the purchase price amortized over its useful life, plus electricity.",
          widget="radio"),
    _cost("pue", "PUE", "", "Power usage effectiveness of the site (facility / IT energy); "
          "default: Uptime Institute's 2023 industry average."),
    _cost("usd_per_kwh", "Electricity price", "USD/kWh", "Electricity price (purchase "
          "pricing); default: EIA's 2023 US average to industry."),
    _cost("amortization_years", "Amortized over", "years", "Useful life a purchase is "
          "amortized over; default: the five years of Amazon's 2024 10-K."),
    _cost("failures_per_gpu_hour", "Failures per GPU-hour", "", "Job-stopping failures per "
          "GPU-hour (0: none); default: Llama 3 405B's 419 interruptions in 54 days on 16,384 "
          "H100s."),
    # --- header ---------------------------------------------------------------------------
    Control("presentation", "Presentation mode", "header", "checkbox", bool,
            "Larger fonts for slides.", default=False),
)
BY_KEY: dict[str, Control] = {c.key: c for c in CONTROLS}
