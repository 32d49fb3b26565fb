"""What the Serving page computes: its form checked into a serving workload and layout, and
every view built from the scenario's model and system (so the control panel's hardware
what-ifs — HBM capacity and bandwidth, NVLink domain — and the form's FP4 rate move it) with
the numbers :func:`dashboard.jobs.serving.serving` asks ``model.serving.serve`` for. Pure: no
Dash."""

from __future__ import annotations

import math
from typing import Any

from dashboard import figures
from dashboard.controls.scenario import build_inputs
from dashboard.figures import serve as fs
from dashboard.jobs.serving import serving
from dashboard.views.page_form import (
    FormFields,
    FormInput,
    default_form,
    fields_of,
    query_of,
    whole,
)
from model import ModelError, ServingLayout, ServingWorkload
from model.cli.numbers import count, integer, money, number, share
from model.cli.serve import DEFAULT_MTP_ACCEPTANCE
from model.specs.serving import (
    KV_PRECISIONS,
    LAYOUT_FIELDS,
    MODES,
    MTP_DEPTH,
    WEIGHT_PRECISIONS,
    WORKLOAD_FIELD,
)
from model.specs.serving_stack import DEFAULT as DEFAULT_STACK
from model.specs.serving_stack import NONE as NO_STACK
from model.specs.serving_stack import list_serving_stacks, load_serving_stack
from model.specs.transformer import list_models

ADP = {"auto": None, "on": True, "off": False}  # the attention-DP pin: searched, on, off

MAX_GPUS = 1024  # the page's search stays well under its latency budget
PINS = ("tp", "pp", "ep")
# whole-number layout pins typed in (empty: searched, or the stack's limit for the batch)
COUNTS = {"replicas": "replicas", "prefill_instances": "prefill instances",
          "decode_instances": "decode instances", "max_batch": "the largest batch"}
_AUTO = (("search", "auto"),)
ENGINES = tuple(s for s in list_serving_stacks() if s != NO_STACK)  # every preset but 'none'
_POWERS = {"tp": 8, "pp": 6, "ep": 8}  # the pins offered: 1, 2, 4, … 2^(n − 1)
# the form, one record per input in the page's order (dashboard/views/page_form.py: FormInput)
INPUTS: tuple[FormInput, ...] = (
    FormInput("gpus", "GPUs", 8, step="1"),
    FormInput("input_tokens", "Input tokens", 1000, "input_tokens", step="1"),
    FormInput("output_tokens", "Output tokens", 1000, "output_tokens", step="1"),
    FormInput("mode", "Mode", "concurrency", "mode", "choice", options=(
        ("offline (max throughput)", "offline"), ("concurrent users", "concurrency"),
        ("request rate (Poisson)", "request-rate"))),
    FormInput("load", "Users or requests/s", 64),
    FormInput("precision", "Weights", "fp8", "weight_precision", "choice",
              options=tuple((p, p) for p in WEIGHT_PRECISIONS)),
    FormInput("kv_precision", "KV cache", "auto", "kv_precision", "choice",
              options=(("auto", "auto"), *((p, p) for p in KV_PRECISIONS))),
    FormInput("ttft_max_s", "TTFT limit (s)", None, "ttft_max_s"),
    FormInput("tpot_max_s", "TPOT limit (s)", None, "tpot_max_s"),
    *(FormInput(pin, pin.upper(), "auto", pin, "choice", options=(
        *_AUTO, *((str(2**i), 2**i) for i in range(n)))) for pin, n in _POWERS.items()),
    FormInput("replicas", "Replicas (empty: searched)", None, "replicas", step="1"),
    FormInput("prefill_instances", "Prefill instances (xPyD)", None, "prefill_instances",
              step="1"),
    FormInput("decode_instances", "Decode instances (xPyD)", None, "decode_instances",
              step="1"),
    FormInput("max_batch", "Largest batch per instance", None, "max_batch", step="1"),
    FormInput("mtp", "MTP depth", 0, "mtp_depth", "choice", options=tuple(
        (str(k), k) for k in range(int(MTP_DEPTH.lo), int(MTP_DEPTH.hi) + 1))),
    FormInput("mtp_acceptance", "MTP acceptance per draft", DEFAULT_MTP_ACCEPTANCE,
              "mtp_acceptance"),
    FormInput("draft_model", "Draft model", "none", "draft_model", "choice", options=(
        ("none (MTP head)", "none"), *((m, m) for m in list_models()))),
    FormInput("engine", "Engine", DEFAULT_STACK, None, "choice",
              options=tuple((e, e) for e in ENGINES)),
    FormInput("attention_dp", "Attention DP", "auto", "attention_dp", "choice",
              options=(("search", "auto"), ("on", "on"), ("off", "off"))),
    FormInput("prefix_hit", "Prefix-cache hit share", 0, "prefix_hit"),
    FormInput("kv_offload_gb", "Host KV pool per GPU (GB)", 0, "kv_offload_gb"),
)
DEFAULT_FORM: dict[str, Any] = default_form(INPUTS)
CARDS = ("serve-pareto", "serve-load", "serve-memory", "serve-step", "serve-cost")
# Each number of the form is its field's (model/specs/serving.py: WORKLOAD_FIELDS,
# LAYOUT_FIELDS): the page reads its range there, and narrows it (never widens it) only here,
# with the reason. TPOT = (e2e − TTFT)/(O − 1): the page's answer and its figures need a second
# output token (the serve command answers O = 1 with the TTFT alone); the GPUs and the layout
# pins stay under MAX_GPUS, the page's latency budget.
FIELDS = {**WORKLOAD_FIELD, **{f.name: f for f in LAYOUT_FIELDS}}
NARROWED: dict[str, dict[str, float]] = {"output_tokens": {"lo": 2},
                                         **{k: {"hi": MAX_GPUS} for k in PINS}}


# the form's numbers in their fields' ranges, narrowed as NARROWED says
FORM_FIELDS = FormFields(FIELDS, NARROWED)
page_range = FORM_FIELDS.range
_whole = FORM_FIELDS.whole


def _optional(form: dict, key: str, what: str) -> float | None:
    value = form.get(key)
    if value in (None, ""):
        return None
    lo, hi = page_range(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
            math.isfinite(value) and lo <= value <= hi):
        raise ModelError(f"{what} must be a positive number of seconds in [{lo:g}, {hi:g}] (or "
                         "empty: no limit)")
    return float(value)


def _share(form: dict, key: str, below: float, what: str, words: str) -> float:
    """A number in [0, ``below``) (empty: 0), or a ModelError naming ``what``."""
    value = form.get(key)
    if value in (None, ""):
        return 0.0
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
            math.isfinite(value) and 0 <= value < below):
        raise ModelError(f"{what} must be a number in {words}")
    return float(value)


def _pool(form: dict) -> float:
    """The host KV pool per GPU, GB, in its field's range (empty: 0)."""
    value = form.get("kv_offload_gb")
    if value in (None, ""):
        return 0.0
    lo, hi = page_range("kv_offload_gb")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
            math.isfinite(value) and lo <= value <= hi):
        raise ModelError(f"the host KV pool must be a number in GB in [{lo:g}, {hi:g}]")
    return float(value)


def _acceptance(form: dict) -> float:
    """The MTP acceptance of each drafted token, in (0, 1] (empty: DeepSeek-V3's,
    :data:`DEFAULT_MTP_ACCEPTANCE`)."""
    value = form.get("mtp_acceptance")
    if value in (None, ""):
        return DEFAULT_MTP_ACCEPTANCE
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
            math.isfinite(value) and 0 < value <= 1):
        raise ModelError("the MTP acceptance must be a number in (0, 1]")
    return float(value)


def _draft(form: dict) -> str | None:
    """The form's draft model: a model preset, or none (the model's own MTP head)."""
    name = form.get("draft_model", "none")
    if name in (None, "", "none"):
        return None
    if name not in list_models():
        raise ModelError("the draft model must be none or a model preset")
    return str(name)


def checked_form(form: Any) -> tuple[int, ServingWorkload, ServingLayout]:
    """(GPUs, workload, layout pins) of the page's form, or ModelError in the form's words."""
    if not isinstance(form, dict):
        raise ModelError("the serving form is missing")
    gpus = whole(form, "gpus", 1, MAX_GPUS, "GPUs")
    mode = form.get("mode")
    if mode not in MODES:
        raise ModelError(f"mode must be one of {', '.join(MODES)}")
    load = form.get("load")
    if mode == "concurrency":
        concurrency, rate = _whole(form, "load", "concurrent users", "concurrency"), None
    elif mode == "request-rate":
        lo, hi = page_range("request_rate_per_s")
        if isinstance(load, bool) or not isinstance(load, (int, float)) or not (
                math.isfinite(load) and lo <= load <= hi):
            raise ModelError(f"the request rate must be a number of requests/s in [{lo:g}, "
                             f"{hi:g}]")
        concurrency, rate = None, float(load)
    else:
        concurrency = rate = None
    if form.get("precision") not in WEIGHT_PRECISIONS:
        raise ModelError(f"precision must be one of {', '.join(WEIGHT_PRECISIONS)}")
    kv = form.get("kv_precision")
    if kv != "auto" and kv not in KV_PRECISIONS:
        raise ModelError(f"KV precision must be auto or one of {', '.join(KV_PRECISIONS)}")
    mtp = _whole(form, "mtp", "MTP depth", MTP_DEPTH.name)
    workload = ServingWorkload(
        _whole(form, "input_tokens", "input tokens"),
        _whole(form, "output_tokens", "output tokens"), mode=mode,
        concurrency=concurrency, request_rate_per_s=rate, weight_precision=form["precision"],
        kv_precision=None if kv == "auto" else kv, mtp_depth=mtp,
        mtp_acceptance=_acceptance(form) if mtp else 0.0,
        draft_model=_draft(form) if mtp else None,
        prefix_hit=_share(form, "prefix_hit", 1.0, "the prefix-cache hit share", "[0, 1)"),
        kv_offload_gb=_pool(form),
        ttft_max_s=_optional(form, "ttft_max_s", "the TTFT limit"),
        tpot_max_s=_optional(form, "tpot_max_s", "the TPOT limit"))
    return gpus, workload, _layout(form)


def _layout(form: dict) -> ServingLayout:
    """The form's layout pins: tp, pp, ep ("auto": searched), the typed counts (empty:
    searched) and attention DP."""
    pins = {}
    for key in PINS:
        value = form.get(key, "auto")
        if value != "auto":
            pins[key] = _whole(form, key, key)
    for key, what in COUNTS.items():
        if form.get(key) not in (None, ""):
            pins[key] = _whole(form, key, what)
    return ServingLayout(**pins, **_adp_pin(form))


def _adp_pin(form: dict) -> dict[str, bool]:
    """The attention-DP pin of the form: none (searched), on or off."""
    adp = form.get("attention_dp", "auto")
    if adp not in ADP:
        raise ModelError("attention DP must be search, on or off")
    return {} if ADP[adp] is None else {"attention_dp": ADP[adp]}


def engines() -> list[str]:
    """The serving stacks the page offers (every preset; not the bare 'none')."""
    return list(ENGINES)


def form_stack(form: Any) -> str:
    """The serving stack (engine and version) the form names, or ModelError."""
    name = form.get("engine", DEFAULT_STACK) if isinstance(form, dict) else DEFAULT_STACK
    if name not in engines():
        raise ModelError(f"engine must be one of {', '.join(engines())}")
    return name


def form_query(form: dict[str, Any]) -> str:
    """The form as a URL query (empty fields left out), so a copied link reproduces the page."""
    return query_of(form, DEFAULT_FORM)


def form_from_query(search: Any) -> dict[str, Any]:
    """The form's fields a URL query gives (checked as typed ones are, by
    :func:`checked_form`)."""
    return fields_of(search, DEFAULT_FORM)


def headline(best: dict, message: str) -> str:
    """The page's answer in one sentence (numbers as :mod:`model.cli.numbers` writes them)."""
    if not best.get("fits"):
        return message or "No layout fits in memory."
    disaggregated = bool(best["prefill_instances"])
    layout = (f"{best['prefill_instances']:.0f}P{best['decode_instances']:.0f}D"
              if disaggregated else count(best["replicas"], "replica"))
    text = (f"tp {best['tp']:.0f} × pp {best['pp']:.0f}, {layout}, batch "
            f"{share(best['batch'], fs.batch_unit(best['prefill_instances']))}: "
            f"{integer(best['output_tokens_per_s_per_gpu'])} output tokens/s per GPU, "
            f"{number(best['tokens_per_s_per_user'])} tokens/s per user, TTFT "
            f"{number(best['ttft_s'] * 1e3)} ms, TPOT {number(best['tpot_s'] * 1e3)} ms, "
            f"{money(best['usd_per_million_output_tokens'])} per million output tokens")
    return text + (f" ({message})" if message else "")


def workload_caption(scn: dict[str, Any], gpus: int, workload: ServingWorkload) -> str:
    """What the page's figures show, for an exported figure's caption: the model, the GPUs,
    the precisions, the tokens of a request and the load."""
    load = {"offline": "offline (all requests queued)",
            "concurrency": count(workload.concurrency, "concurrent user"),
            "request-rate": f"{number(workload.request_rate_per_s)} requests/s (Poisson)"}
    kv = workload.kv_precision or "auto"
    return (f"serving {scn['model']} on {count(gpus, scn['system'] + ' GPU')} · "
            f"{workload.weight_precision} weights, KV {kv} · "
            f"{integer(workload.input_tokens)} input / {integer(workload.output_tokens)} output "
            f"tokens per request · {load[workload.mode]}")


def _captioned(fig: Any, text: str) -> Any:
    """The figure with ``text`` as its export caption (``layout.meta``, read by
    :func:`dashboard.server.export.caption`)."""
    if isinstance(fig, dict):
        fig["layout"]["meta"] = {"caption": text}
    else:
        fig.layout.meta = {"caption": text}
    return fig


def build(scn: dict[str, Any], form: Any) -> tuple[dict[str, Any], str]:
    """(figures by card name, headline) of the page for a validated scenario and the form."""
    gpus, workload, pins = checked_form(form)
    _, system = build_inputs(scn)
    pres = bool(scn.get("presentation"))
    stack = form_stack(form)
    answer = serving(scn, gpus, workload, pins, stack)
    result, best = answer.result, answer.result.best
    out = {"serve-pareto": fs.pareto_figure(answer.offline.pareto, best, pres),
           "serve-memory": fs.memory_figure(best, system.hbm_capacity_gb, pres),
           "serve-step": fs.step_figure(result.step_by_op_s, pres),
           "serve-cost": fs.cost_figure(answer.cost, pres)}
    if answer.curve is not None:
        out["serve-load"] = fs.load_figure(answer.curve, answer.knee_rate_per_s, pres)
    else:
        out["serve-load"] = figures.empty_figure("No layout fits: no load curve.", pres)
    text = workload_caption(scn, gpus, workload)
    why = not_fitted(system, best.get("stack"))
    out = {k: figures.mark_not_validated(_captioned(v, text), why, pres) for k, v in out.items()}
    words = headline(best, result.message)
    if not best.get("validated", True):  # vLLM, SGLang: say it with the answer
        words += f" — {stack}: not validated end to end"
    return out, words


def not_fitted(system: Any, stack: Any = None) -> str:
    """'not validated: …' when the serving stack has no fit for the system's GPU (its
    efficiencies are then the system's own, never compared with a measurement), else ''."""
    try:
        found = load_serving_stack(stack if isinstance(stack, str) and stack else None)
    except ModelError:
        return ""
    if found.name == "none" or found.values_for(system):
        return ""
    return (f"not validated: the {found.name} serving stack has no fit on "
            f"{system.name} (no published serving run on it was scored)")
