"""Every dashboard control declared once: one :class:`Control` record per scenario key.

The scenario schema (:mod:`dashboard.scenario`: fields, defaults, validation messages, the URL
and JSON keys, what the estimator receives), the control panel (:mod:`dashboard.controls`) and
the callbacks that connect them (:mod:`dashboard.state`) are generated from :data:`CONTROLS`:
adding a control is adding one record here. Choices come from the estimator's own tables
(strategies, precisions, execution literals, presets, stacks), never retyped.

A group with a *preset* control (model, system, software stack) is filled from the chosen
preset: a record of that group reads its value from the preset's object — its ``spec`` field
divided by ``scale`` unless it has its own ``read``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from model import list_models, list_systems
from model.explore.design import AXES
from model.physics.strategies import SHORT_LABELS, STRATEGIES
from model.specs import execution as ex
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
          "design": "Design space", "header": ""}
DEFAULT_GLOBAL_BATCH = 4096  # sequences, when a model preset publishes none
POWERS_OF_TWO = tuple(2 ** k for k in range(0, 18))


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
    spec: str | None = None  # the estimator's key: a model/system spec field, or Execution
    scale: float = 1.0  # estimator value = scenario value × scale
    preset: bool = False  # this control names its group's preset
    default: Any = None  # the default; None: read from the group's default preset
    read: Callable[[Any], Any] | None = None  # value from the preset's object (else spec)
    per_token: str | None = None  # also shown and set in tokens: value × scenario[per_token]

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


ON_OFF = ((True, False), ("on", "off"))
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
    Control("kv_heads", "KV heads", "model", "number", int,
            "Key/value heads for grouped-query attention; must divide the heads (= heads: "
            "plain multi-head attention; 1: multi-query).", lo=1, hi=100_000, spec="kv_heads"),
    Control("ffn", "FFN size", "model", "number", int,
            "Hidden size of the MLP (4·hidden for GPT; SwiGLU models use about 8/3·hidden).",
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
            "in each cell).", choices=AXES, default="tp1"),
    Control("y_axis", "Heatmap y axis", "design", "dropdown", str,
            "Parallel dimension on the heatmap's y axis.", choices=AXES, default="pp"),
    # --- header ---------------------------------------------------------------------------
    Control("presentation", "Presentation mode", "header", "checkbox", bool,
            "Larger fonts for slides.", default=False),
)
BY_KEY: dict[str, Control] = {c.key: c for c in CONTROLS}
