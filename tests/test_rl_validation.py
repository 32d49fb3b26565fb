"""RL validation on NeMo-RL's published GRPO step times (model/validation/rl.py): the data file's
schema and provenance against the row it copies, ``validate --set rl``, and the accuracy an RL
answer carries inside and outside the scored populations."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from model.cli.commands import main
from model.specs.hardware import list_systems, load_system
from model.specs.transformer import list_models
from model.validation import rl as rlv

RUN_FIELDS = {"id": str, "model": str, "published_model": str, "system": str, "gpus": int,
              "algorithm": str, "placement": str, "off_policy": bool, "prompts": int,
              "samples": int, "mean_output_tokens": int, "input_tokens": int,
              "input_tokens_row": int, "max_sequence_tokens": int, "max_output_tokens": int,
              "train_global_batch": int, "tokens_per_s_per_gpu": float, "step_s": float}


def _cli(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def _cells(row: str) -> list[str]:
    return [c.strip() for c in row.strip().strip("|").split("|")]


def _number(cell: str) -> float:
    return float(cell.replace(",", ""))


def test_every_run_has_its_fields_and_a_preset_model_and_gpu():
    data = rlv.reference()
    assert len(data["runs"]) == 16
    assert len({r["id"] for r in data["runs"]}) == 16
    for run in data["runs"]:
        for key, kind in RUN_FIELDS.items():
            assert isinstance(run[key], kind), (run["id"], key)
        assert run["model"] in list_models() and run["system"] in list_systems()
        assert run["algorithm"] == "grpo"
        split = run["placement"] == "split"
        assert run["off_policy"] == split  # the published split rows are one step off
        assert (run["generation_gpus"] is None) != split
        if split:
            assert 1 <= run["generation_gpus"] < run["gpus"]
        assert run["input_tokens"] + run["max_output_tokens"] == run["max_sequence_tokens"]
        assert run["max_output_tokens"] >= run["mean_output_tokens"]


def test_each_run_is_the_published_row_it_cites():
    """Provenance: repository, path, one commit for rows and recipes, and the row's own cells
    give the GPUs, the rollouts per step, the mean answer, the step time and the throughput."""
    data = rlv.reference()
    commit = data["runs"][0]["provenance"]["commit"]
    assert re.fullmatch(r"[0-9a-f]{40}", commit) and commit in data["source"]
    for run in data["runs"]:
        prov = run["provenance"]
        assert prov["repo"] == "NVIDIA-NeMo/RL"
        assert prov["path"] == "docs/about/performance-summary.md"
        assert prov["commit"] == commit and run["recipe"]["commit"] == commit
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", prov["date"])
        assert run["recipe"]["path"].endswith(".yaml")
        cells = _cells(prov["row"])
        assert cells[0] == "GRPO" and cells[1] == run["published_model"]
        assert (cells[2] == "1-step Off") == run["off_policy"]
        assert _number(cells[3]) == run["max_sequence_tokens"]
        assert _number(cells[4]) == run["mean_output_tokens"]
        assert _number(cells[5]) == run["gpus"]
        assert _number(cells[6]) == run["prompts"] * run["samples"]
        assert _number(cells[7]) == run["train_global_batch"]
        assert _number(cells[10]) == run["tokens_per_s_per_gpu"]
        assert _number(cells[11]) == run["step_s"]
        assert ("GB200" in prov["section"]) == (run["system"] == "gb200-nvl72")
        # the prompt length the row implies: its tokens/s/GPU counts prompt + answer tokens
        total = run["tokens_per_s_per_gpu"] * run["step_s"] * run["gpus"] / _number(cells[6])
        assert run["input_tokens_row"] == round(total - run["mean_output_tokens"])
        same = [r["input_tokens_row"] for r in data["runs"] if r["model"] == run["model"]]
        assert run["input_tokens"] == round(float(np.median(same)))


def test_the_rows_left_out_say_why():
    excluded = rlv.reference()["excluded"]
    assert len(excluded) == 7
    for entry in excluded:
        assert entry["why"] and entry["provenance"]["row"].startswith("|")
    whys = " ".join(e["why"] for e in excluded)
    assert "DAPO" in whys and "Qwen3-32B" in whys and "FP8" in whys


def test_validate_rl_prints_every_run_and_the_out_of_sample_error(capsys):
    code, out, _ = _cli(capsys, "validate", "--set", "rl", "--json")
    assert code == 0
    data = json.loads(out)
    records, stats = data["records"], data["summary"]
    assert len(records) == 16 and stats["fitted"] == "nothing"
    for r in records:
        assert r["error_pct"] == pytest.approx(
            100 * (r["predicted_step_s"] / r["measured_step_s"] - 1))
        assert r["predicted_step_s"] > 0
    errors = np.array([r["error_pct"] for r in records])
    assert stats["all"]["mean_abs_error_pct"] == pytest.approx(np.abs(errors).mean())
    assert set(stats["populations"]) == {
        "colocated on hopper", "colocated on blackwell",
        "split, 1-step off-policy on hopper", "split, 1-step off-policy on blackwell"}
    assert all(p["runs"] == 4 for p in stats["populations"].values())
    # where it was measured when written (42.0 % mean |error|, predictions short by 36 %)
    assert stats["all"]["mean_abs_error_pct"] < 50.0
    code, text, _ = _cli(capsys, "validate", "--set", "rl")
    assert code == 0
    for r in records:
        assert r["id"] in text
    assert "fitted: nothing (out-of-sample)" in text
    assert f"all: mean |error| {stats['all']['mean_abs_error_pct']:.1f} %" in text


def test_an_answer_inside_a_population_carries_that_populations_error_only():
    frame = rlv.records()
    for gen, name in (("hopper", "Hopper"), ("blackwell", "Blackwell")):
        for placement, off in (("colocated", False), ("split", True)):
            part = frame[frame["population"] == rlv.population(gen, placement, off)]
            text = rlv.accuracy(gen, placement, off)
            mean = np.abs(part["error_pct"]).mean()
            assert text.startswith(f"GRPO {rlv.placement_label(placement, off)} on {name}")
            assert f"{mean:.1f} % mean |error|" in text and "4 NeMo-RL v0.5" in text


@pytest.mark.parametrize("args, why", [
    (("hopper", "colocated", False, "ppo"), "no published PPO step time"),
    (("hopper", "split", False), "split, on-policy on hopper"),
    (("ampere", "colocated", False), "colocated on ampere"),
    (("blackwell-ultra", "split", True), "on blackwell-ultra"),
    (("hopper", "colocated", False, "grpo", "fp8"), "only BF16 generation"),
    (("hopper", "colocated", False, "grpo", "bf16", "torchtitan-2025"), "Megatron Core"),
])
def test_an_answer_outside_every_population_is_not_validated(args, why):
    text = rlv.accuracy(*args)
    assert text.startswith("not validated: ") and why in text
    assert "%" not in text  # no other population's bar


def test_tperf_rl_json_accuracy_follows_the_gpu_generation(capsys):
    argv = ("rl", "--model", "llama3-8b", "--gpus", "16", "--prompts-per-step", "8",
            "--samples-per-prompt", "4", "--input-tokens", "128", "--output-tokens", "256",
            "--placement", "colocated", "--json")
    assert load_system("h200").generation == "hopper"
    code, out, _ = _cli(capsys, *argv, "--system", "h200")
    assert code == 0
    assert json.loads(out)["accuracy"] == rlv.accuracy("hopper", "colocated", False)
    code, out, _ = _cli(capsys, *argv, "--system", "a100")
    assert code == 0
    assert json.loads(out)["accuracy"].startswith("not validated")


def test_the_docs_rl_accuracy_table_is_what_validate_prints():
    """docs/post_training.md's RL errors per population are the ones computed now."""
    from pathlib import Path

    stats = rlv.summary(rlv.records())
    text = (Path(__file__).resolve().parents[1] / "docs" / "post_training.md").read_text()
    labels = {"hopper": "Hopper", "blackwell": "Blackwell"}
    for name, row in stats["populations"].items():
        gen = name.rsplit(" on ", 1)[1]
        expected = (f"| {labels[gen]} | {row['mean_abs_error_pct']:.1f} % mean \\|error\\|, "
                    f"max {row['max_abs_error_pct']:.1f} % ({row['runs']} runs)")
        assert expected in text, expected
    assert f"{stats['all']['mean_abs_error_pct']:.1f} % mean" in text


def test_the_one_factor_diagnostic_is_why_nothing_is_fitted():
    """docs/accuracy.md's reasons for fitting nothing: 15 of 16 predictions short, and one
    factor fitted to the step loses more on its worst left-out run than the unfitted
    estimate's worst; the factor is the least-squares one in log space."""
    frame = rlv.records()
    assert int((frame["error_pct"] < 0).sum()) == 15
    one = rlv.one_scale(frame)
    ratio = frame["measured_step_s"] / frame["predicted_step_s"]
    assert one["factor"] == pytest.approx(float(np.exp(np.log(ratio).mean())))
    assert one["leave_one_out_max_abs_error_pct"] > np.abs(frame["error_pct"]).max()
    assert (one["leave_one_out_mean_abs_error_pct"]
            >= one["in_sample_mean_abs_error_pct"])
