"""The left control panel: every scenario input, grouped, with its unit, a tooltip and a slot for
its error message. Component ids are ``ctl-<key>`` and ``err-<key>`` for the scenario keys of
:mod:`dashboard.scenario`, so callbacks address them by key."""

from __future__ import annotations

from typing import Any

from dash import dcc, html

from model import list_models, list_systems

from .scenario import AXIS_CHOICES, BY_KEY

CONTROL_KEYS = ("model", "layers", "hidden", "heads", "kv_heads", "ffn", "mlp", "seq_len",
                "vocab", "global_batch", "budget_kind", "budget", "system", "nvs", "hbm_gb",
                "hbm_tb_per_s", "matrix_tflops", "nvlink_gb_per_s", "nic_gb_per_s",
                "nics_per_gpu", "recompute", "sequence_parallel", "interleave", "zero",
                "precision", "tp_overlap", "context_attention", "offload", "recompute_layers",
                "strategy",
                "gpus_min", "gpus_max", "compat", "gpus",
                "design_strategy", "x_axis", "y_axis")
NVS_CHOICES = (4, 8, 16, 32, 64, 72)
GPU_CHOICES = tuple(2 ** k for k in range(0, 18))

TIPS = {
    "model": "Model preset: loads its dimensions and training budget into the fields below.",
    "layers": "Number of transformer blocks (depth).",
    "hidden": "Hidden (embedding) size e.",
    "heads": "Attention heads h; must divide the hidden size.",
    "kv_heads": "Key/value heads for grouped-query attention; must divide the heads "
                "(= heads: plain multi-head attention; 1: multi-query).",
    "ffn": "Hidden size of the MLP (4·hidden for GPT; SwiGLU models use about 8/3·hidden).",
    "mlp": "MLP activation: GELU (two matrices) or SwiGLU (three matrices).",
    "seq_len": "Tokens per sequence (or patches per image for a ViT).",
    "vocab": "Vocabulary size; 0 means no embedding, LM head or loss (a ViT).",
    "global_batch": "Samples (sequences) per optimizer step, across all GPUs.",
    "budget_kind": "Whether the training budget counts tokens or samples.",
    "budget": "Training budget, in tokens or samples: turns throughput into days.",
    "system": "Hardware preset: loads its GPU, HBM and network figures below.",
    "nvs": "GPUs per NVLink/NVSwitch domain (fast network); the rest talk over NICs.",
    "hbm_gb": "HBM capacity per GPU in GB: what a configuration must fit into.",
    "hbm_tb_per_s": "HBM bandwidth per GPU in TB/s: bounds memory-bound ops.",
    "matrix_tflops": "Dense fp16/bf16 tensor-core peak per GPU, TFLOP/s.",
    "nvlink_gb_per_s": "NVLink bandwidth per GPU per direction, GB/s.",
    "nic_gb_per_s": "Bandwidth of one NIC per direction, GB/s (400 Gb/s = 50 GB/s).",
    "nics_per_gpu": "NICs per GPU: rings across domains scale with them.",
    "strategy": "Tensor-parallel strategy to search (data and pipeline parallelism, microbatch "
                "and NVLink placement are always searched).",
    "gpus_min": "Smallest GPU count of the scaling views (powers of two, whatever the NVLink "
                "domain; in the paper mode, multiples of a domain that is not a power of two).",
    "gpus_max": "Largest GPU count of the scaling views.",
    "compat": "Default: the fixed model with embedding and head. Paper: reproduces arXiv "
              "2410.00273's published figures, bugs included.",
    "recompute": "Activation recompute: selective (flash attention recomputes its scores), "
                 "full (keep only each block's input, rerun its forward in the backward) or none "
                 "(keep the attention scores, unfused attention).",
    "sequence_parallel": "Megatron sequence parallelism: norms and dropouts on l/tp rows with "
                         "reduce-scatter + all-gather instead of all-reduce (1D and context).",
    "recompute_layers": "Partial (block) recompute: this many layers of each pipeline stage "
                        "recompute fully, the others as Recompute says (Megatron's "
                        "--recompute-num-layers); 0: none. Not with full recompute.",
    "interleave": "Virtual pipeline stages per GPU (interleaved 1F1B): a V× smaller bubble, V× "
                  "the stage-to-stage messages, more activations in flight.",
    "zero": "ZeRO stage: 0 replicated optimizer, 1 distributed optimizer, 2 + gradients, "
            "3 + weights (FSDP: weights gathered per block, every microbatch).",
    "precision": "Matmul precision: bf16/fp16, or fp8 (linear layers at the FP8 rate and "
                 "efficiency; attention stays bf16).",
    "tp_overlap": "Overlap tensor-parallel collectives with the matmuls next to them.",
    "context_attention": "Context parallelism (tp2 of the context strategy): all-gather K/V "
                         "before attending, or ring attention (K/V blocks passed around the "
                         "ring under the attention compute).",
    "offload": "Keep these in host memory (the system's host tier): the optimizer (Adam on the "
               "CPU), activations or weights, streamed over the host link.",
    "gpus": "GPU count of the design-space heatmap, the table of top configurations and the "
            "HBM sweep.",
    "design_strategy": "Strategy of the design-space heatmap and the table.",
    "x_axis": "Parallel dimension on the heatmap's x axis (the best over all the others is "
              "shown in each cell).",
    "y_axis": "Parallel dimension on the heatmap's y axis.",
}
LABELS = {
    "model": "Model preset", "layers": "Layers", "hidden": "Hidden size", "heads": "Heads",
    "kv_heads": "KV heads", "ffn": "FFN size", "mlp": "MLP", "seq_len": "Sequence length",
    "vocab": "Vocabulary", "global_batch": "Global batch (samples)", "budget_kind": "Budget in",
    "budget": "Training budget", "system": "GPU / system preset",
    "nvs": "NVLink domain (GPUs)", "hbm_gb": "HBM capacity (GB)",
    "hbm_tb_per_s": "HBM bandwidth (TB/s)", "matrix_tflops": "Peak TFLOP/s (bf16)",
    "nvlink_gb_per_s": "NVLink (GB/s per direction)", "nic_gb_per_s": "NIC (GB/s)",
    "nics_per_gpu": "NICs per GPU", "strategy": "Strategy", "gpus_min": "GPUs from",
    "gpus_max": "GPUs to", "compat": "Model", "gpus": "GPUs", "design_strategy": "Strategy",
    "x_axis": "Heatmap x axis", "y_axis": "Heatmap y axis", "recompute": "Recompute",
    "sequence_parallel": "Sequence parallelism", "interleave": "Interleaved stages (V)",
    "zero": "ZeRO stage", "precision": "Precision", "tp_overlap": "TP comm overlap",
    "context_attention": "Context attention", "offload": "Offload to host",
    "recompute_layers": "Recomputed layers per stage",
}


def _input(key: str, value: Any, step: Any = "any", datalist: str | None = None) -> Any:
    f = BY_KEY[key]
    return dcc.Input(id=f"ctl-{key}", type="number", value=value, min=f.lo, max=f.hi, step=step,
                     debounce=True, list=datalist, className="ctl-input")


def _control(key: str, scn: dict[str, Any]) -> Any:
    """The component that edits scenario key ``key``."""
    value = scn[key]
    if key == "model":
        return dcc.Dropdown(id="ctl-model", options=list_models(), value=value, clearable=False)
    if key == "system":
        return dcc.Dropdown(id="ctl-system", options=list_systems(), value=value,
                            clearable=False)
    if key == "mlp":
        return dcc.Dropdown(id="ctl-mlp", options=["gelu", "swiglu"], value=value,
                            clearable=False)
    if key == "budget_kind":
        return dcc.RadioItems(id="ctl-budget_kind", options=["tokens", "samples"], value=value,
                              inline=True)
    if key == "strategy":
        return dcc.RadioItems(id="ctl-strategy", inline=True, value=value, options=[
            {"label": "all", "value": "all"}, {"label": "1D", "value": "1d"},
            {"label": "SUMMA", "value": "summa"}, {"label": "context", "value": "context"}])
    if key == "compat":
        return dcc.RadioItems(id="ctl-compat", inline=True, value=value, options=[
            {"label": "default", "value": "default"}, {"label": "paper", "value": "paper"}])
    if key == "hbm_gb":
        return dcc.Slider(id="ctl-hbm_gb", min=16, max=1024, step=1, value=value,
                          marks={v: str(v) for v in (16, 256, 512, 768, 1024)},
                          tooltip={"placement": "bottom", "always_visible": False},
                          allow_direct_input=True, updatemode="mouseup")
    if key == "hbm_tb_per_s":
        return dcc.Slider(id="ctl-hbm_tb_per_s", min=0.5, max=32, step=0.1, value=value,
                          marks={v: str(v) for v in (1, 8, 16, 24, 32)},
                          tooltip={"placement": "bottom", "always_visible": False},
                          allow_direct_input=True, updatemode="mouseup")
    if key in ("sequence_parallel", "tp_overlap"):
        return dcc.RadioItems(id=f"ctl-{key}", inline=True, value=value, options=[
            {"label": "on", "value": True}, {"label": "off", "value": False}])
    if key in ("recompute", "precision", "context_attention", "offload"):
        return dcc.Dropdown(id=f"ctl-{key}", options=list(BY_KEY[key].choices), value=value,
                            clearable=False)
    if key == "zero":
        return dcc.RadioItems(id="ctl-zero", inline=True, value=value,
                              options=[{"label": str(z), "value": z} for z in range(4)])
    if key == "design_strategy":
        return dcc.RadioItems(id="ctl-design_strategy", inline=True, value=value, options=[
            {"label": "1D", "value": "1d"}, {"label": "SUMMA", "value": "summa"},
            {"label": "context", "value": "context"}])
    if key in ("x_axis", "y_axis"):
        return dcc.Dropdown(id=f"ctl-{key}", options=list(AXIS_CHOICES), value=value,
                            clearable=False)
    if key == "nvs":
        return _input("nvs", value, 1, "nvs-choices")
    if key in ("gpus_min", "gpus_max", "gpus"):
        return _input(key, value, 1, "gpu-choices")
    integer = BY_KEY[key].kind is int
    return _input(key, value, 1 if integer else "any")


def _row(key: str, scn: dict[str, Any]) -> html.Div:
    return html.Div(className="ctl-row", children=[
        html.Label([LABELS[key], html.Span(" ?", className="tip", title=TIPS[key])],
                   htmlFor=f"ctl-{key}", title=TIPS[key]),
        _control(key, scn),
        html.Div(id=f"err-{key}", className="ctl-error", role="alert"),
    ])


def _group(title: str, keys: tuple[str, ...], scn: dict[str, Any], extra: Any = None) -> Any:
    return html.Details(open=True, className="ctl-group", children=[
        html.Summary(title), *[_row(k, scn) for k in keys], *([extra] if extra else [])])


def panel(scn: dict[str, Any]) -> html.Div:
    """The whole control panel, filled with scenario ``scn``."""
    return html.Div(id="controls", className="controls", children=[
        html.Datalist(id="nvs-choices", children=[html.Option(value=v) for v in NVS_CHOICES]),
        html.Datalist(id="gpu-choices", children=[html.Option(value=v) for v in GPU_CHOICES]),
        _group("Model", ("model", "layers", "hidden", "heads", "kv_heads", "ffn", "mlp",
                         "seq_len", "vocab", "global_batch", "budget_kind", "budget"), scn,
               html.Button("Reset model to preset", id="reset-model", className="btn-link")),
        _group("System", ("system", "nvs", "hbm_gb", "hbm_tb_per_s", "matrix_tflops",
                          "nvlink_gb_per_s", "nic_gb_per_s", "nics_per_gpu"), scn,
               html.Button("Reset system to preset", id="reset-system", className="btn-link")),
        _group("Execution", ("recompute", "recompute_layers", "sequence_parallel", "interleave",
                             "zero", "precision", "tp_overlap", "context_attention", "offload"),
               scn),
        _group("Run", ("strategy", "gpus_min", "gpus_max", "compat"), scn),
        _group("Design space", ("gpus", "design_strategy", "x_axis", "y_axis"), scn),
        html.Div(id="err-_", className="ctl-error", role="alert"),
        html.Div(className="scenario-io", children=[
            html.Button("Download scenario (JSON)", id="scenario-download-btn"),
            dcc.Download(id="scenario-download"),
            dcc.Upload(id="scenario-upload", max_size=16 * 1024, accept=".json,application/json",
                       children=html.Button("Upload scenario (JSON)")),
        ]),
    ])
