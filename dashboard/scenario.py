"""A what-if scenario: every input of the dashboard as one flat, validated dict.

The same schema serves the controls, the URL query string (a copied link reproduces the view) and
the scenario JSON download/upload. Keys carry units. Validation uses the estimator's own field
checker (:mod:`model.schema`), so a bad value gets the same clear message everywhere, keyed by the
control it came from.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any
from urllib.parse import parse_qsl, urlencode

from model import ModelError, list_models, list_systems, load_model, load_system
from model.execution import DEFAULT_EXECUTION, resolve_execution
from model.hardware import System
from model.schema import Field, check_field
from model.transformer import Transformer

DEFAULT_EXECUTION_VALUES = {k: getattr(DEFAULT_EXECUTION, k) for k in (
    "recompute", "sequence_parallel", "interleave", "zero", "precision", "tp_overlap",
    "context_attention", "offload", "recompute_layers")}
MAX_SCENARIO_BYTES = 16 * 1024  # an upload is a few hundred bytes; refuse anything larger
STRATEGY_CHOICES = ("all", "1d", "summa", "context")
AXIS_CHOICES = ("tp1", "tp2", "pp", "dp", "microbatch", "nb", "nv_tp1", "nv_tp2", "nv_dp", "nv_pp")

FIELDS: tuple[Field, ...] = (
    # model
    Field("model", str, "model preset the values start from", choices=tuple(list_models())),
    Field("layers", int, "transformer blocks", 1, 10_000),
    Field("hidden", int, "hidden size e", 8, 1_000_000),
    Field("heads", int, "attention heads (must divide hidden)", 1, 100_000),
    Field("kv_heads", int, "key/value heads (GQA; must divide heads)", 1, 100_000),
    Field("ffn", int, "MLP hidden size", 1, 10_000_000),
    Field("mlp", str, "MLP type", choices=("gelu", "swiglu")),
    Field("seq_len", int, "sequence length (tokens or patches)", 1, 100_000_000),
    Field("vocab", int, "vocabulary (0: no embedding/LM head)", 0, 100_000_000),
    Field("global_batch", int, "samples per optimizer step", 1, 100_000_000),
    Field("budget_kind", str, "training budget unit", choices=("tokens", "samples")),
    Field("budget", float, "training budget (tokens or samples)", 1, 1e18),
    # system
    Field("system", str, "system preset the values start from", choices=tuple(list_systems())),
    Field("nvs", int, "GPUs per NVLink domain", 1, 100_000),
    Field("hbm_gb", float, "HBM capacity per GPU, GB", 1, 100_000),
    Field("hbm_tb_per_s", float, "HBM bandwidth per GPU, TB/s", 0.01, 1_000),
    Field("matrix_tflops", float, "dense fp16/bf16 tensor-core peak, TFLOP/s", 0.1, 100_000),
    Field("nvlink_gb_per_s", float, "NVLink bandwidth per GPU per direction, GB/s", 0.1, 1e6),
    Field("nic_gb_per_s", float, "bandwidth per NIC per direction, GB/s", 0.01, 100_000),
    Field("nics_per_gpu", float, "NICs per GPU", 0.01, 64),
    # execution (ignored in the paper mode, which models one execution)
    Field("recompute", str, "activation recompute", choices=("selective", "full", "none")),
    Field("sequence_parallel", bool, "Megatron sequence parallelism (1D, context)"),
    Field("interleave", int, "virtual pipeline stages per GPU (interleaved 1F1B)", 1, 64),
    Field("zero", int, "ZeRO stage: 0 none, 1 optimizer, 2 + gradients, 3 + weights", 0, 3),
    Field("precision", str, "matmul precision", choices=("bf16", "fp16", "fp8")),
    Field("tp_overlap", bool, "overlap TP collectives with the matmuls"),
    Field("context_attention", str, "context-parallel attention", choices=("allgather", "ring")),
    Field("offload", str, "what lives in host memory",
          choices=("none", "optimizer", "activations", "weights", "all")),
    Field("recompute_layers", int, "layers per pipeline stage fully recomputed "
          "(with recompute none or selective)", 0, 10_000),
    # run
    Field("strategy", str, "parallel strategy", choices=STRATEGY_CHOICES),
    Field("gpus_min", int, "smallest GPU count", 1, 10_000_000),
    Field("gpus_max", int, "largest GPU count", 1, 10_000_000),
    Field("compat", str, "model mode", choices=("default", "paper")),
    # views
    Field("gpus", int, "GPU count of the design-space views", 1, 10_000_000),
    Field("design_strategy", str, "strategy of the design-space views",
          choices=("1d", "summa", "context")),
    Field("x_axis", str, "heatmap x axis", choices=AXIS_CHOICES),
    Field("y_axis", str, "heatmap y axis", choices=AXIS_CHOICES),
    Field("presentation", bool, "larger fonts for slides"),
)
KEYS = tuple(f.name for f in FIELDS)
BY_KEY = {f.name: f for f in FIELDS}
MODEL_KEYS = ("layers", "hidden", "heads", "kv_heads", "ffn", "mlp", "seq_len", "vocab",
              "budget_kind", "budget")
SYSTEM_KEYS = ("nvs", "hbm_gb", "hbm_tb_per_s", "matrix_tflops", "nvlink_gb_per_s",
               "nic_gb_per_s", "nics_per_gpu")
EXECUTION_KEYS = ("recompute", "sequence_parallel", "interleave", "zero", "precision",
                  "tp_overlap", "context_attention", "offload", "recompute_layers")
# scenario key → key of the estimator's spec, to attribute its errors to the right control
SPEC_KEY = {"layers": "layers", "hidden": "hidden", "heads": "heads", "kv_heads": "kv_heads",
            "ffn": "ffn", "mlp": "mlp", "seq_len": "seq_len", "vocab": "vocab",
            "nvs": "nvlink_domain_size", "hbm_gb": "hbm_capacity_gb",
            "hbm_tb_per_s": "hbm_bandwidth_gb_per_s", "matrix_tflops": "matrix_tflops_fp16",
            "nvlink_gb_per_s": "nvlink_bandwidth_gb_per_s",
            "nic_gb_per_s": "nic_bandwidth_gb_per_s", "nics_per_gpu": "nics_per_gpu"}


def preset_model(name: Any) -> Transformer:
    """A model preset, by name only: the web app never loads a file a request names."""
    if not isinstance(name, str) or name not in list_models():
        raise ModelError(f"not a model preset; presets: {', '.join(list_models())}")
    return load_model(name)


def preset_system(name: Any) -> System:
    """A system preset, by name only."""
    if not isinstance(name, str) or name not in list_systems():
        raise ModelError(f"not a system preset; presets: {', '.join(list_systems())}")
    return load_system(name)


def model_values(name: str) -> dict[str, Any]:
    """The model-group values of a model preset."""
    m = preset_model(name)
    kind = "tokens" if m.tokens is not None else "samples"
    return {"model": name, "layers": m.layers, "hidden": m.hidden, "heads": m.heads,
            "kv_heads": m.kv_heads, "ffn": m.ffn, "mlp": m.mlp, "seq_len": m.seq_len,
            "vocab": m.vocab, "budget_kind": kind,
            "budget": m.tokens if kind == "tokens" else m.samples}


def system_values(name: str) -> dict[str, Any]:
    """The system-group values of a system preset."""
    s = preset_system(name)
    return {"system": name, "nvs": s.nvlink_domain_size, "hbm_gb": s.hbm_capacity_gb,
            "hbm_tb_per_s": s.hbm_bandwidth_gb_per_s / 1000.0,
            "matrix_tflops": s.matrix_tflops_fp16, "nvlink_gb_per_s": s.nvlink_bandwidth_gb_per_s,
            "nic_gb_per_s": s.nic_bandwidth_gb_per_s, "nics_per_gpu": s.nics_per_gpu}


def default_scenario() -> dict[str, Any]:
    """gpt3-1t on H200 with an NVLink domain of 8, every strategy, 4…16384 GPUs."""
    return {**model_values("gpt3-1t"), "global_batch": 4096, **system_values("h200"), "nvs": 8,
            **DEFAULT_EXECUTION_VALUES,
            "strategy": "all", "gpus_min": 4, "gpus_max": 16384, "compat": "default",
            "gpus": 4096, "design_strategy": "summa", "x_axis": "tp1", "y_axis": "pp",
            "presentation": False}


def _spec_error_key(message: str) -> str | None:
    """The scenario key a model/system error names (its first quoted key), if any."""
    reverse = {v: k for k, v in SPEC_KEY.items()}
    for name in re.findall(r"'([a-z_0-9]+)'", message):
        if name in reverse:
            return reverse[name]
    return None


def build_inputs(scn: dict[str, Any]) -> tuple[Transformer, System]:
    """The estimator's model and system for a (field-valid) scenario. Raises ModelError."""
    base = preset_model(scn["model"])
    budget = {"tokens": None, "samples": None, scn["budget_kind"]: scn["budget"]}
    model = base.with_overrides(**{k: scn[k] for k in MODEL_KEYS[:-2]}, **budget)
    system = preset_system(scn["system"]).with_overrides(
        **{SPEC_KEY[k]: scn[k] for k in SYSTEM_KEYS if k != "hbm_tb_per_s"},
        hbm_bandwidth_gb_per_s=scn["hbm_tb_per_s"] * 1000.0)
    return model, system


def validate_scenario(raw: dict[str, Any]) -> tuple[dict[str, Any] | None, dict[str, str]]:
    """(clean scenario, {}) or (None, {key: message}) — one message per offending control.

    Missing keys take their defaults; unknown keys are an error under ``"_"``.
    """
    if not isinstance(raw, dict):
        return None, {"_": "a scenario is a JSON object"}
    errors: dict[str, str] = {}
    unknown = sorted(set(raw) - set(KEYS), key=str)
    if unknown:
        errors["_"] = f"unknown key '{unknown[0]}'"
    clean = default_scenario()
    for key in KEYS:
        if key not in raw or raw[key] is None or raw[key] == "":
            if key in raw:
                errors[key] = f"'{key}' is empty ({BY_KEY[key].doc})"
            continue
        try:
            clean[key] = check_field("scenario", BY_KEY[key], raw[key])
        except ModelError as exc:
            errors[key] = str(exc).removeprefix("scenario: ")
            if key in ("model", "system"):  # a name, never a path: say only what is allowed
                errors[key] = f"'{key}' is not a {key} preset; presets: " + ", ".join(
                    BY_KEY[key].choices)
    if not errors:
        errors.update(_cross_checks(clean))
    return (None, errors) if errors else (clean, {})


def _cross_checks(scn: dict[str, Any]) -> dict[str, str]:
    """Checks that need several fields: GPU range, heatmap axes, and the specs themselves."""
    errors: dict[str, str] = {}
    if scn["gpus_min"] > scn["gpus_max"]:
        errors["gpus_min"] = "the smallest GPU count is larger than the largest"
    if scn["x_axis"] == scn["y_axis"]:
        errors["y_axis"] = "choose two different axes"
    try:
        _, system = build_inputs(scn)
    except ModelError as exc:
        message = str(exc).removeprefix("model: ").removeprefix("system: ")
        errors[_spec_error_key(str(exc)) or "_"] = message
        return errors
    if scn["precision"] == "fp8" and system.matrix_tflops_fp8 <= 0:
        errors["precision"] = f"{scn['system']} has no FP8 matrix rate; choose bf16 or fp16"
    if scn["offload"] != "none" and system.host_memory_gb <= 0:
        errors["offload"] = f"{scn['system']} has no host memory tier; offload needs one"
    try:  # combinations of execution options (e.g. recomputed layers with full recompute)
        resolve_execution(execution_of(scn))
    except ModelError as exc:
        named = sorted((k for k in EXECUTION_KEYS if k in str(exc)), key=len, reverse=True)
        errors[named[0] if named else "_"] = str(exc)
    return errors


def execution_of(scn: dict[str, Any]) -> dict[str, Any] | None:
    """The estimator's execution options (None in the paper mode: it models one execution)."""
    if scn.get("compat") == "paper":
        return None
    return {k: scn[k] for k in EXECUTION_KEYS}


MAX_COUNTS = 24


def gpu_counts(scn: dict[str, Any]) -> list[int]:
    """The GPU counts of the scaling views: powers of two in [gpus_min, gpus_max], or multiples
    NVS·2^k when the NVLink domain is not a power of two (e.g. 72). At most 24 counts.

    Bounded for any input (the loop runs at most 64 times): ModelError unless nvs, gpus_min
    and gpus_max are positive integers."""
    nvs, lo, hi = (scn.get(k) for k in ("nvs", "gpus_min", "gpus_max"))
    for key, value in (("nvs", nvs), ("gpus_min", lo), ("gpus_max", hi)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ModelError(f"'{key}' must be a positive integer, got {value!r:.40}")
    unit = 1 if nvs & (nvs - 1) == 0 else nvs
    counts = []
    for k in range(64):
        n = unit * 2**k
        if n > hi or len(counts) == MAX_COUNTS:
            break
        if n >= lo:
            counts.append(n)
    return counts


def to_query(scn: dict[str, Any]) -> str:
    """The scenario as a URL query ("layers=128&..."), keys in schema order. The app puts it in
    the URL's fragment (after #), which Dash's page router does not listen to."""
    def text(v: Any) -> str:
        if isinstance(v, bool):
            return "1" if v else "0"
        if isinstance(v, float) and v.is_integer() and abs(v) < 1e15:
            return str(int(v))
        return str(v)
    return urlencode([(k, text(scn[k])) for k in KEYS])


def from_query(search: str) -> dict[str, Any]:
    """Raw scenario values from a URL query or fragment (typed where the text parses; the
    validator reports the rest). Unknown keys are ignored: old links keep working."""
    raw: dict[str, Any] = {}
    for key, value in parse_qsl((search or "").lstrip("?#"), keep_blank_values=True)[:200]:
        if key not in BY_KEY or len(value) > 200:
            continue
        raw[key] = _parse(BY_KEY[key], value)
    return raw


def _parse(field: Field, value: str) -> Any:
    kinds = field.kind if isinstance(field.kind, tuple) else (field.kind,)
    if bool in kinds:
        return value.lower() in ("1", "true", "yes", "on")
    if int in kinds or float in kinds:
        try:
            number = float(value)
        except ValueError:
            return value  # the validator says it is not a number
        if int in kinds and math.isfinite(number) and number.is_integer():
            return int(number)
        return number
    return value


def to_json(scn: dict[str, Any]) -> str:
    """The scenario as pretty JSON (for download)."""
    return json.dumps({k: scn[k] for k in KEYS}, indent=2)


def from_json(text: str | bytes) -> tuple[dict[str, Any] | None, dict[str, str]]:
    """Parse and validate an uploaded scenario (size-limited; JSON only, never pickle)."""
    if len(text) > MAX_SCENARIO_BYTES:
        return None, {"_": f"the file is larger than {MAX_SCENARIO_BYTES // 1024} KB"}
    try:
        data = json.loads(text)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:  # incl. huge numbers, depth
        return None, {"_": f"not valid JSON ({type(exc).__name__})"}
    return validate_scenario(data)
