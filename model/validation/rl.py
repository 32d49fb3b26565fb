"""RL post-training predicted against NeMo-RL's published GRPO step times.

``model/data/reference/nemo_rl_performance.json`` holds every BF16 GRPO row of NeMo-RL's
performance summary (v0.5 section, at the commit in its ``source``) whose model and GPU have
presets, with what each row's recipe runs (its ``recipes`` and ``lengths``): prompts per step,
samples per prompt, the mean answer length as published, the prompt length derived from the
row's own throughput, the longest answer the recipe allows, colocated (on-policy) or split
(one step off-policy, the recipe's generation GPUs).

Each row is predicted as ``tperf rl`` answers it: :func:`model.studies.rl.rl_step` with the
layouts searched (not pinned to the published ones) and the default training stack. Nothing
is fitted to these rows, so the in-sample and leave-one-out errors are the same number: the
error of a model that never saw them.

A population is (algorithm, placement, GPU generation): GRPO colocated or split one step off,
on Hopper (the H100 rows) or Blackwell (the GB200 rows), BF16 generation and training, a
Megatron-family training stack. :func:`accuracy` gives an answer its population's error, and
"not validated" outside every scored population (PPO, split on-policy, FP8 generation,
another GPU generation, another training stack).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from model.specs import memo
from model.specs.hardware import load_system
from model.specs.models import load_model
from model.studies.rl import RlStep, rl_step

DATA = Path(__file__).resolve().parents[1] / "data" / "reference" / "nemo_rl_performance.json"
PHASES = ("generation_s", "tail_s", "reference_s", "training_s", "sync_s", "offload_s")
GPU_NAMES = {"hopper": "Hopper (H100 runs)", "blackwell": "Blackwell (GB200 runs)"}


def reference() -> dict:
    """The published rows, the rows left out and their source."""
    return json.loads(DATA.read_text())


def placement_label(placement: str, off_policy: bool) -> str:
    """The population's placement in words."""
    if placement == "colocated":
        return "colocated"
    return "split, 1-step off-policy" if off_policy else "split, on-policy"


def population(generation: str, placement: str, off_policy: bool) -> str:
    """The population key of an answer: its placement on its GPU generation."""
    return f"{placement_label(placement, off_policy)} on {generation}"


def _population_of(run: dict) -> str:
    return population(load_system(run["system"]).generation, run["placement"],
                      run["off_policy"])


@memo.lru("RL validation runs", 32)
def _predicted(run_id: str) -> dict:
    """:func:`predict` of the published run ``run_id``, computed once per process."""
    return predict(next(r for r in reference()["runs"] if r["id"] == run_id))


def predict(run: dict) -> dict:
    """The ``tperf rl`` answer (summary dict) for one published run."""
    step = RlStep(run["prompts"], run["samples"], run["input_tokens"],
                  run["mean_output_tokens"], run["max_output_tokens"], run["placement"],
                  run["algorithm"], run["off_policy"], "bf16")
    with np.errstate(invalid="ignore"):  # the serving table's NaN TPOT of a 1-token request
        res = rl_step(load_model(run["model"]), load_system(run["system"]), run["gpus"], step,
                      generation_gpus=run["generation_gpus"])
    return res.summary()


@memo.lru("RL validation", 8)
def records(only: str | None = None) -> pd.DataFrame:
    """One row per published run (of population ``only``, or all): measured and predicted step
    seconds, the error 100·(predicted/measured − 1), the predicted phases and the run's
    population."""
    rows = []
    for run in reference()["runs"]:
        if only is not None and _population_of(run) != only:
            continue
        out = _predicted(run["id"])
        measured = float(run["step_s"])
        rows.append({"id": run["id"], "model": run["model"], "system": run["system"],
                     "gpus": run["gpus"], "placement": placement_label(
                         run["placement"], run["off_policy"]),
                     "generation_gpus": run["generation_gpus"] or run["gpus"],
                     "population": _population_of(run),
                     "measured_step_s": measured, "predicted_step_s": float(out["step_s"]),
                     "error_pct": 100.0 * (float(out["step_s"]) / measured - 1.0),
                     **{k: float(out[k]) for k in PHASES}})
    return pd.DataFrame(rows)


def _stats(part: pd.DataFrame) -> dict:
    err = part["error_pct"].to_numpy()
    return {"runs": int(len(part)), "mean_abs_error_pct": float(np.abs(err).mean()),
            "max_abs_error_pct": float(np.abs(err).max()),
            "mean_error_pct": float(err.mean())}


def summary(frame: pd.DataFrame) -> dict:
    """Mean, max |error| and the mean signed error (%) per population and over all runs;
    nothing is fitted, so these are out-of-sample errors."""
    return {"source": reference()["source"], "fitted": "nothing",
            "all": _stats(frame),
            "populations": {pop: _stats(part) for pop, part in frame.groupby("population")}}


def accuracy(generation: str, placement: str, off_policy: bool, algorithm: str = "grpo",
             precision: str = "bf16", stack: str | None = None) -> str:
    """The error the answer's population (GPU ``generation``, e.g. ``System.generation``)
    showed on NeMo-RL's rows, never fitted to them, or "not validated" outside every scored
    population (module docstring). Only that population's runs are predicted."""
    if algorithm != "grpo":
        return f"not validated: no published {algorithm.upper()} step time was scored"
    if precision != "bf16":
        return f"not validated: only BF16 generation was scored, not {precision.upper()}"
    if stack and not stack.startswith("megatron"):
        return f"not validated: the scored runs trained on Megatron Core, not {stack}"
    key = population(generation, placement, off_policy)
    if not any(_population_of(run) == key for run in reference()["runs"]):
        where = placement_label(placement, off_policy)
        return f"not validated: no published GRPO step time {where} on {generation} was scored"
    stats = _stats(records(key))
    return (f"GRPO {placement_label(placement, off_policy)} on "
            f"{GPU_NAMES.get(generation, generation)}: {stats['mean_abs_error_pct']:.1f} % "
            f"mean |error| (max {stats['max_abs_error_pct']:.1f} %, mean signed "
            f"{stats['mean_error_pct']:+.1f} %) on {stats['runs']} NeMo-RL v0.5 step times, "
            "nothing fitted to them")


def one_scale(frame: pd.DataFrame) -> dict:
    """What fitting one constant would buy (a diagnostic, not shipped): the factor c on every
    predicted step that minimises the squared log error, c = exp(mean log(measured/predicted)),
    and the mean |error| (%) of c·predicted in sample and left one run out."""
    ratio = np.log(frame["measured_step_s"].to_numpy() / frame["predicted_step_s"].to_numpy())
    c = float(np.exp(ratio.mean()))
    loo = np.exp((ratio.sum() - ratio) / (len(ratio) - 1))  # each run's factor without it
    return {"factor": c, "in_sample_mean_abs_error_pct": float(
                100 * np.abs(np.exp(-ratio) * c - 1).mean()),
            "leave_one_out_mean_abs_error_pct": float(100 * np.abs(np.exp(-ratio) * loo - 1)
                                                      .mean()),
            "leave_one_out_max_abs_error_pct": float(100 * np.abs(np.exp(-ratio) * loo - 1)
                                                     .max())}


def doc_block() -> str:
    """docs/accuracy.md's ``rl`` block: every scored run, predicted vs measured step time and
    the predicted phases, then the error per population."""
    frame = records()
    lines = ["| run (NeMo-RL v0.5 row) | GPUs (generating) | measured step | predicted step | "
             "error | predicted generation (tail) · forwards · update · sync |",
             "| --- | ---: | ---: | ---: | ---: | --- |"]
    for r in frame.to_dict("records"):
        lines.append(
            f"| {r['id']} | {r['gpus']} ({r['generation_gpus']}) | {r['measured_step_s']:.1f} s "
            f"| {r['predicted_step_s']:.1f} s | {r['error_pct']:+.1f} % | "
            f"{r['generation_s']:.1f} ({r['tail_s']:.1f}) · {r['reference_s']:.1f} · "
            f"{r['training_s']:.1f} · {r['sync_s']:.1f} s |")
    stats = summary(frame)
    lines += ["", "| population (GRPO, BF16) | runs | mean \\|error\\| | max \\|error\\| | "
              "mean signed error |", "| --- | ---: | ---: | ---: | ---: |"]
    for name, s in [*stats["populations"].items(), ("**all**", stats["all"])]:
        lines.append(f"| {name} | {s['runs']} | {s['mean_abs_error_pct']:.1f} % | "
                     f"{s['max_abs_error_pct']:.1f} % | {s['mean_error_pct']:+.1f} % |")
    one = one_scale(frame)
    lines += ["", f"Not shipped: one factor on every predicted step, fitted to these runs, would "
              f"be {one['factor']:.2f}, with {one['in_sample_mean_abs_error_pct']:.1f} % mean "
              f"\\|error\\| in sample and {one['leave_one_out_mean_abs_error_pct']:.1f} % left "
              f"one run out (max {one['leave_one_out_max_abs_error_pct']:.1f} %)."]
    return "\n".join(lines) + "\n"
