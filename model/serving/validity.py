"""The error bar every serving answer carries: per metric, what the stack's fit measured on the
answer's own population — engine (the stack) × dense or MoE × GPU generation × metric — or
"not validated" (docs/serving.md, "Validation").

The populations are written by ``bench/serve_fit.py`` into the stack's ``fit.populations``
(:func:`model.validation.serving.population_errors`): for each ``dense/<generation>`` and
``moe/<generation>`` the runs of the fit data in it and their mean and largest
|predicted/measured − 1| per metric. A metric the fit data never measured (TensorRT-LLM's perf
overview gives offline throughput only: no TTFT, no TPOT) has no entry, and a stack that was
never fitted (``validated`` false: vLLM, SGLang) has none at all.

Throughput's bar is a split-conformal interval (:mod:`model.specs.conformal`) at 80 % where
the held-out scores of the stack's fit data are stored
(``model/data/reference/serving_residuals.json``, written by ``python -m
model.validation.serving_residuals --write``: each run predicted by the fit redone without its
model — the data is one source, so the model is what is held out): the ⌈(n+1)·q⌉-th smallest
|ln(predicted/measured)| of the population's n runs, with the in-sample mean |error| beside it.
Its coverage, model left out and run left out, is
:func:`model.validation.serving_residuals.serving_coverage`.
"""

from __future__ import annotations

import json
from pathlib import Path

from model.specs import memo
from model.specs.conformal import COVERAGE, bounds_pct, radius, too_few
from model.specs.schema import DATA_DIR
from model.specs.serving import ServingWorkload
from model.specs.serving_stack import ServingStack

RESIDUALS = DATA_DIR / "reference" / "serving_residuals.json"

METRICS = {"output_tokens_per_s": "throughput", "ttft_s": "TTFT", "tpot_s": "TPOT"}
MIN_RUNS = 3  # fewer runs of a population than this: no bar, "not validated"


def population(moe: bool, generation: str) -> str:
    """The population key of a model (dense or MoE) on a GPU generation."""
    return f"{'moe' if moe else 'dense'}/{generation}"


def unmeasured_mechanisms(wl: ServingWorkload) -> list[str]:
    """The workload's mechanisms no run of the fit data used (its runs are offline, without
    prefix caching, KV offload or MTP): an answer that uses one is outside every population."""
    return [name for name, used in (("prefix caching", wl.prefix_hit > 0),
                                    ("KV offload", wl.kv_offload_gb > 0),
                                    ("MTP", wl.mtp_depth > 0)) if used]


@memo.lru("serving fit layouts", 8)
def fit_layouts(data: str) -> frozenset[tuple[int, int]]:
    """(tp, pp) of every run of a stack's fit data (``fit.data``: a path from the repository
    root; empty when the file is missing)."""
    path = DATA_DIR.parents[1] / data
    if not path.is_file():
        return frozenset()
    runs = json.loads(path.read_text(encoding="utf-8")).get("runs", [])
    return frozenset((int(r["tp"]), int(r.get("pp", 1))) for r in runs)


def unmeasured_layout(stack: ServingStack, moe: bool, row: dict) -> list[str]:
    """The parts of an answer's layout (a :func:`model.serving.serve` row: tp, pp, ep,
    attention_dp, prefill_instances) no run of the stack's fit data used, in words: the fit
    runs are single aggregated instances of their (tp, pp) (TensorRT-LLM's perf overview: tp
    1–8, pp 1), a MoE one with ep = tp and attention DP from tp 2, as
    :func:`model.validation.serving.predict` prices them; an answer outside them borrows no
    population's interval. Nothing for a stack never fitted (already not validated)."""
    data = (stack.fit or {}).get("data")
    layouts = fit_layouts(data) if stack.validated and data else frozenset()
    if not layouts:
        return []
    tp, pp = int(row["tp"]), int(row["pp"])
    out = []
    if pp not in {p for _, p in layouts}:
        out.append(f"pipeline parallelism (pp {pp})")
    if tp not in {t for t, _ in layouts}:
        out.append(f"tensor parallelism tp {tp}")
    if int(row.get("prefill_instances") or 0) > 0:
        out.append("disaggregated prefill and decode instances")
    if moe and (int(row["ep"]) != tp or bool(row["attention_dp"]) != (tp > 1)):
        out.append(f"a MoE layout other than ep = tp with attention DP (ep {int(row['ep'])}, "
                   f"attention DP {'on' if row['attention_dp'] else 'off'})")
    return out


def error_bars(stack: ServingStack, moe: bool, generation: str,
               unmeasured: list[str] | None = None) -> dict[str, str]:
    """Per metric (:data:`METRICS`), the error bar of an answer for a dense or MoE model on a
    GPU generation under ``stack``, in words; "not validated" for every metric when the answer
    uses a mechanism the fit data never measured (``unmeasured``,
    :func:`unmeasured_mechanisms`)."""
    if unmeasured:
        return {m: f"not validated ({', '.join(unmeasured)}: not in the fit data)"
                for m in METRICS}
    key = population(moe, generation)
    if not stack.validated:
        return {m: f"not validated end to end ({stack.engine or stack.name}: no measurement of "
                   "this engine in the fit data)" for m in METRICS}
    table = (stack.fit or {}).get("populations", {}).get(key, {})
    source = (stack.fit or {}).get("data", "the fit data")
    out = {}
    for metric, label in METRICS.items():
        row = table.get(metric)
        if not row or row.get("runs", 0) < MIN_RUNS:
            out[metric] = (f"not validated ({label} of {key.replace('/', ' models on ')} "
                           f"is not measured in {source})")
            continue
        runs = (f"{row['runs']} {key.replace('/', ' ')} runs of {source}, in sample; max "
                f"{row['max_abs_error_pct']:.0f} %")
        scores = held_out_scores(source, key) if metric == "output_tokens_per_s" else ()
        if scores:
            out[metric] = (conformal_text(scores, key, label) + f" (mean |error| "
                           f"{row['mean_abs_error_pct']:.0f} % over {runs})")
        else:
            out[metric] = (f"±{row['mean_abs_error_pct']:.0f} % (offline {label}: mean |error| "
                           f"over {runs})")
    return out


@memo.lru("serving held-out scores", 4)
def _stored(path: Path = RESIDUALS) -> dict:
    return json.loads(path.read_text()) if path.exists() else {}


def held_out_scores(source: str, key: str) -> tuple[float, ...]:
    """The leave-one-model-out scores of population ``key`` when they were computed on the
    fit data ``source`` (else none)."""
    stored = _stored()
    if stored.get("data") != source:
        return ()
    return tuple(r["score"] for r in stored.get("runs", ()) if r["population"] == key)


def conformal_text(scores: tuple[float, ...], key: str, label: str,
                   coverage: float = COVERAGE) -> str:
    """'80 % interval −L % to +H % on offline throughput (split-conformal over n
    leave-one-model-out runs of dense hopper serving)', or why it cannot be stated."""
    pop = f"{len(scores)} leave-one-model-out runs of {key.replace('/', ' ')} serving"
    r = radius(scores, coverage)
    if r is None:
        return f"{100 * coverage:.0f} % interval not stated: {too_few(len(scores), coverage)}"
    low, high = bounds_pct(r)
    return (f"{100 * coverage:.0f} % interval {low:+.1f} % to {high:+.1f} % on offline {label} "
            f"(split-conformal over {pop})")
