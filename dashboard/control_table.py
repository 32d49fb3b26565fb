"""Every dashboard control declared once: one :class:`Control` record per scenario key.

The scenario schema (:mod:`dashboard.scenario`: fields, defaults, validation messages, the URL
and JSON keys, what the estimator receives), the control panel (:mod:`dashboard.controls`) and
the callbacks that connect them (:mod:`dashboard.state`) are generated from :data:`CONTROLS`:
adding a control is adding one record here. Choices come from the estimator's own tables
(strategies, precisions, execution literals, presets, stacks), never retyped.

A group with a *preset* control (model, system, software stack) is filled from the chosen
preset: a record of that group reads its value from the preset's object — its ``spec`` field
divided by ``scale`` unless it has its own ``read``.

Records of a group may form a *section* (:data:`SECTIONS`: attention, mixture of experts), drawn
collapsed while its condition does not hold (a dense model's MoE controls). A record with a
``when`` condition is shown only while it holds; hidden, it keeps its value in the scenario (the
URL and JSON round-trip it) but the estimator receives its ``off`` value instead (a dense model
gets no experts whatever the hidden boxes say).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from model import list_models, list_systems
from model.explore.design import AXES
from model.explore.plan import DEFAULT_MAX_GPUS
from model.physics.strategies import SHORT_LABELS, STRATEGIES
from model.specs import execution as ex
from model.specs.cost import DEFAULT_COSTS
from model.specs.cost import FIELDS as COST_FIELDS
from model.specs.precision import NAMES as PRECISIONS
from model.specs.precision import PRECISIONS as PRECISION_TABLE
from model.specs.schema import Field
from model.specs.stack import NONE as NO_STACK
from model.specs.stack import default_stack_name, list_stacks
from model.specs.transformer import FIELDS as MODEL_FIELDS

# widget kinds (dashboard.controls builds each): a number box (debounced: applies on Enter or
# blur); a number box with a slider beside it (the box holds the value, the slider only sets
# it); a dropdown; radio items; on/off radio items; a checkbox (the header's presentation mode)
WIDGETS = ("number", "slider", "dropdown", "radio", "switch", "checkbox")
# groups of the panel, in order, with their titles; "header" controls sit in the page header
GROUPS = {"model": "Model", "system": "System", "execution": "Execution", "run": "Run",
          "design": "Design space", "plan": "Plan & cost", "header": ""}
DEFAULT_GLOBAL_BATCH = 4096  # sequences, when a model preset publishes none
POWERS_OF_TWO = tuple(2 ** k for k in range(0, 18))


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


MOE = When("experts", lambda v: v != 0)  # a mixture of experts (routed experts > 0)
GQA = When("attention", lambda v: v == "gqa")
MLA = When("attention", lambda v: v == "mla")
NO_ACTIVATION_OFFLOAD = When("offload", lambda v: v not in ("activations", "all"))
# sections of a group: (title, condition for being drawn open; None: always open)
SECTIONS: dict[str, tuple[str, When | None]] = {
    "attention": ("Attention", None),
    "moe": ("Mixture of experts", MOE),
    "moe_execution": ("Mixture of experts", MOE),
}


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


def _model_choice(text: str) -> Field:
    return next(f for f in MODEL_FIELDS if f.name == text)


def _budget_kind(m: Any) -> str:
    return "tokens" if m.tokens is not None else "samples"


def _budget(m: Any) -> float:
    return m.tokens if m.tokens is not None else m.samples


def _published_batch(m: Any) -> int:
    return m.global_batch or DEFAULT_GLOBAL_BATCH


def _attention_kind(m: Any) -> str:
    """MLA with low-rank keys/values, MHA with one K/V head per head, else GQA (MQA: 1)."""
    return "mla" if m.mla else ("mha" if m.kv_heads == m.heads else "gqa")


def _zero(_: dict[str, Any]) -> int:
    return 0


def _heads(scn: dict[str, Any]) -> Any:
    return scn["heads"]


ON_OFF = ((True, False), ("on", "off"))
_COST_FIELD = {f.name: f for f in COST_FIELDS}


def _cost(key: str, label: str, unit: str, tip: str, widget: str = "number") -> Control:
    """A site, pricing or failure input: range, choices and default from model.specs.cost."""
    f = _COST_FIELD[key]
    return Control(key, label, "plan", widget, f.kind, tip, unit=unit, lo=f.lo, hi=f.hi,
                   choices=tuple(f.choices or ()), spec=key, default=getattr(DEFAULT_COSTS, key))
STACKS = (*list_stacks(), NO_STACK)

# attention: the kind decides which of its sizes apply (MHA: K/V heads = heads; MLA: its ranks)
ATTENTION_CONTROLS = (
    Control("attention", "Attention type", "model", "radio", str,
            "MHA: one key/value head per query head; GQA/MQA: fewer key/value heads shared by "
            "groups of heads (1: multi-query); MLA: multi-head latent attention (DeepSeek-V2/"
            "V3), keys and values (and queries) through low-rank latents.",
            choices=("mha", "gqa", "mla"), names=("MHA", "GQA / MQA", "MLA"),
            read=_attention_kind, section="attention"),
    Control("kv_heads", "KV heads", "model", "number", int,
            "Key/value heads of grouped-query attention; must divide the heads (1: "
            "multi-query).", lo=1, hi=100_000, spec="kv_heads", section="attention", when=GQA,
            off=_heads),
    Control("q_lora_rank", "Query compression rank", "model", "number", int,
            "MLA: rank of the query latent (0: queries projected directly from the hidden "
            "state, as DeepSeek-V2-Lite).", lo=0, hi=1_000_000, spec="q_lora_rank",
            section="attention", when=MLA, off=_zero),
    Control("kv_lora_rank", "KV compression rank", "model", "number", int,
            "MLA: rank of the key/value latent, what the KV cache keeps per token (512 in "
            "DeepSeek-V3).", lo=0, hi=1_000_000, spec="kv_lora_rank", section="attention",
            when=MLA, off=_zero),
    Control("qk_nope_head_dim", "Q/K head dim (no rotary)", "model", "number", int,
            "MLA: query/key dimension per head without rotary embedding.", lo=0, hi=100_000,
            spec="qk_nope_head_dim", section="attention", when=MLA, off=_zero),
    Control("qk_rope_head_dim", "Q/K rotary head dim", "model", "number", int,
            "MLA: query/key dimension per head that carries the rotary embedding (the key's "
            "is shared by the heads).", lo=0, hi=100_000, spec="qk_rope_head_dim",
            section="attention", when=MLA, off=_zero),
    Control("v_head_dim", "Value head dim", "model", "number", int,
            "MLA: value (and attention output) dimension per head.", lo=0, hi=100_000,
            spec="v_head_dim", section="attention", when=MLA, off=_zero),
)
# mixture of experts: routed experts 0 is a dense model, whatever the hidden sizes say
MOE_CONTROLS = (
    Control("experts", "Routed experts", "model", "number", int,
            "Routed experts E per MoE layer; 0: a dense model (the MoE sizes below do not "
            "apply).", lo=0, hi=100_000, spec="experts", section="moe"),
    Control("top_k", "Experts per token (top-k)", "model", "number", int,
            "Routed experts each token is sent to: k copies of each token cross the "
            "expert-parallel all-to-all and k expert MLPs run per token.", lo=0, hi=100_000,
            spec="top_k", section="moe", when=MOE, off=_zero),
    Control("expert_ffn", "Expert FFN size", "model", "number", int,
            "Hidden size f_e of one routed expert's MLP (2048 in DeepSeek-V3).", lo=0,
            hi=10_000_000, spec="expert_ffn", section="moe", when=MOE, off=_zero),
    Control("shared_experts", "Shared experts", "model", "number", int,
            "Experts every token passes through besides its routed ones (no all-to-all).",
            lo=0, hi=1_000, spec="shared_experts", section="moe", when=MOE, off=_zero),
    Control("dense_layers", "Dense layers", "model", "number", int,
            "Layers with a dense MLP of the FFN size instead of experts (DeepSeek-V3's first "
            "3); the others are MoE layers.", unit="layers", lo=0, hi=10_000,
            spec="dense_layers", section="moe", when=MOE, off=_zero),
)
# how a mixture of experts executes (the software stack's defaults; shown for a MoE model)
MOE_EXECUTION_CONTROLS = (
    Control("ep_dispatcher", "EP dispatcher", "execution", "dropdown", str,
            "How tokens travel to their experts: alltoall (NCCL all-to-all, one copy per "
            "routed expert) or flex (DeepEP / HybridEP: each token crosses to another NVLink "
            "domain once, then fans out over NVLink).", choices=ex.EP_DISPATCHERS,
            spec="ep_dispatcher", section="moe_execution", when=MOE),
    Control("ep_overlap", "EP all-to-all overlap", "execution", "switch", bool,
            "Overlap the expert-parallel all-to-alls of one microbatch with the compute of "
            "another (Megatron-Core's --overlap-moe-expert-parallel-comm); off: exposed.",
            choices=ON_OFF[0], names=ON_OFF[1], spec="ep_overlap", section="moe_execution",
            when=MOE),
    Control("moe_capacity_factor", "Capacity factor", "execution", "number", float,
            "0: dropless routing. c > 0: every expert takes c × the mean tokens per expert, "
            "dropping beyond and padding below (the token-drop recipes); it then sets the "
            "busiest GPU's load instead of the imbalance.", unit="× mean", lo=0, hi=64,
            spec="moe_capacity_factor", section="moe_execution", when=MOE),
    Control("moe_imbalance", "Load imbalance", "execution", "number", float,
            "Dropless routing: tokens of the busiest GPU's experts over the mean (1.0: "
            "force-balanced, as published benchmarks run; real routing is not); the step "
            "waits for that GPU's expert GEMMs and all-to-alls.", unit="× mean", lo=1, hi=64,
            spec="moe_imbalance", section="moe_execution", when=MOE),
)

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
            "no error bar.", choices=STACKS, preset=True, default=default_stack_name()),
    Control("recompute", "Recompute", "execution", "dropdown", str,
            "Activation recompute: selective (flash attention recomputes its scores), full "
            "(keep only each block's input, rerun its forward in the backward) or none (keep "
            "the attention scores, unfused attention).", choices=ex.RECOMPUTE, spec="recompute"),
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
            "Matmul precision: bf16/fp16, FP8 with current or delayed scaling, or Blackwell's "
            "block-scaled MXFP8 and NVFP4 (linear layers at that rate, with their quantisation "
            "kernels; attention stays bf16).", choices=PRECISIONS,
            names=tuple(PRECISION_TABLE[p].label for p in PRECISIONS), spec="precision"),
    Control("tp_overlap", "TP comm overlap", "execution", "switch", bool,
            "Overlap tensor-parallel collectives with the matmuls next to them.",
            choices=ON_OFF[0], names=ON_OFF[1], spec="tp_overlap"),
    Control("context_attention", "Context attention", "execution", "dropdown", str,
            "Context parallelism (tp2 of the context strategy): all-gather K/V before "
            "attending, or ring attention (K/V blocks passed around the ring under the "
            "attention compute).", choices=ex.CONTEXT_ATTENTION, spec="context_attention"),
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
            choices=ON_OFF[0], names=ON_OFF[1], default=False),
    Control("plan_max_gpus", "Plan up to", "plan", "number", int,
            "The largest GPU count the plan searches (every multiple of the node size up to "
            "it); the Pareto figure samples at most 256 counts per system up to it.",
            unit="GPUs", lo=1, hi=DEFAULT_MAX_GPUS, suggest=POWERS_OF_TWO, default=65_536),
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
