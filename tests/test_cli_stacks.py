"""The command line's software stacks: ``--stack`` reaches the model, ``stacks`` lists every
preset, and every calibrated prediction carries the error bar leave-one-source-out
cross-validation measured (model/data/reference/cross_validation.json)."""

from __future__ import annotations

import json
import math

import pytest

from model import load_model, load_system, search
from model.cli import main
from model.specs.stack import default_stack_name, list_stacks
from model.validation.error_bars import CROSS_VALIDATION, error_bar, scored_runs

LLAMA8 = ["--model", "llama3-8b", "--system", "h100", "--gpus", "64", "--global-batch", "128",
          "--strategy", "1d", "--top", "1"]


def run(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def fail(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and err.startswith("error: ") and err.count("\n") == 1, err
    return err


def firm_errors_pct(stack: str | None, family: str = "megatron") -> list[float]:
    """Firm runs' |cross-validated error| of a stack, or (None) of every stack of a family:
    a stack without enough runs takes its family's (model/validation/error_bars.py)."""
    runs = json.loads(CROSS_VALIDATION.read_text())["runs"]
    return [100 * abs(r["cross_validated_s"] / r["measured_s"] - 1) for r in runs
            if not r["uncertain"] and (r["stack"] == stack if stack is not None
                                       else r.get("family", "megatron") == family)]


def test_stacks_lists_every_preset_with_its_defaults_and_error_bar(capsys):
    listed = json.loads(run(capsys, ["stacks", "--json"]))
    assert [s["name"] for s in listed] == list_stacks()
    assert [s["name"] for s in listed if s["default"]] == [default_stack_name()]
    old = next(s for s in listed if s["name"] == "megatron-lm-2021")
    assert old["execution"]["flash_attention"] is False and old["execution"]["zero"] == 0
    text = run(capsys, ["stacks"])
    for s in listed:
        assert f"{s['name']}{' (default)' if s['default'] else ''}: released {s['released']}" \
            in text
    # each stack: the error bar of dense and of mixture-of-experts predictions, or "not
    # validated" where no firm run of the stack (or of the releases it inherits) was scored
    bars = [b for s in listed for b in (s["error_bar"], s["moe_error_bar"])]
    assert text.count("leave-one-source-out") == sum(b["validated"] for b in bars)
    assert text.count("not validated") == sum(not b["validated"] for b in bars)
    assert text.count("MoE training") == sum(s["moe_error_bar"]["validated"] for s in listed)


def test_the_error_bar_is_the_conformal_interval_of_the_stacks_family():
    """A stack's listing (no system): its family's dense runs on every GPU generation."""
    bar = error_bar("megatron-bridge-25.11")
    dense = sorted(r.score for r in scored_runs() if r.workload == "dense"
                   and r.family == "megatron")
    r = dense[math.ceil((len(dense) + 1) * 0.8) - 1]
    assert (bar.runs, bar.scope) == (len(dense), "megatron") and not bar.borrowed
    assert bar.high_pct == pytest.approx(100 * (math.exp(r) - 1))
    assert "megatron-family dense training on every GPU generation" in bar.text
    # its Narayanan runs are all flagged uncertain: not validated (issue 21), not borrowed
    assert not error_bar("megatron-lm-2021").validated
    low, high = bar.time_range(10.0)
    assert (low, high) == pytest.approx((10 * math.exp(-r), 10 * math.exp(r)))
    assert bar.rate_range(10.0) == pytest.approx((10 * math.exp(-r), 10 * math.exp(r)))


def test_search_json_gives_the_best_row_a_range(capsys):
    out = json.loads(run(capsys, ["search", *LLAMA8, "--json"]))
    assert out["stack"] == default_stack_name()
    bar = error_bar(default_stack_name(), False, "h100")  # its population: dense, hopper
    assert out["error_bar"]["high_pct"] == pytest.approx(bar.high_pct)
    best, rng = out["results"][0]["best"], out["results"][0]["best_range"]
    low, high = rng["iteration_time_s"]
    assert low < best["iteration_time_s"] < high
    assert high / best["iteration_time_s"] - 1 == pytest.approx(bar.high_pct / 100)
    s_low, s_high = rng["samples_per_s"]
    assert s_low == pytest.approx(best["samples_per_s"] * (1 + bar.low_pct / 100))
    assert s_low < best["samples_per_s"] < s_high


def test_search_text_shows_the_range_and_the_stack(capsys):
    text = run(capsys, ["search", *LLAMA8, "--stack", "megatron-bridge-25.09"])
    assert "stack megatron-bridge-25.09" in text.splitlines()[0]
    [line] = [ln for ln in text.splitlines() if ln.strip().startswith("range: ")]
    assert error_bar("megatron-bridge-25.09", False, "h100").text in line


def test_the_stack_changes_the_prediction_as_the_api_does(capsys):
    argv = ["search", *LLAMA8, "--json"]
    model, system = load_model("llama3-8b"), load_system("h100")
    for stack in ("megatron-lm-2021", "megatron-bridge-26.02"):
        cli = json.loads(run(capsys, [*argv, "--stack", stack]))["results"][0]["best"]
        api = search(model, system, 64, 128, "1d", top_k=1, stack=stack).best
        assert cli["iteration_time_s"] == pytest.approx(float(api["iteration_time_s"]),
                                                        rel=1e-12)
        assert cli["flash_attention"] is (stack != "megatron-lm-2021")


def test_an_explicit_option_overrides_the_stack_default(capsys):
    argv = ["search", *LLAMA8, "--json", "--stack", "megatron-lm-2021"]
    best = json.loads(run(capsys, [*argv, "--flash-attention"]))["results"][0]["best"]
    assert best["flash_attention"] is True and best["zero"] == 0  # the rest: the stack's


def test_no_stack_and_the_paper_mode_have_no_error_bar(capsys):
    none = json.loads(run(capsys, ["search", *LLAMA8, "--json", "--stack", "none"]))
    assert none["stack"] == "none" and none["error_bar"] is None
    assert none["results"][0]["best_range"] is None
    text = run(capsys, ["evaluate", "--model", "llama3-8b", "--system", "h100", "--gpus", "8",
                        "--global-batch", "128", "--strategy", "1d", "--tp", "8", "--pp", "1",
                        "--dp", "1", "--microbatch", "1", "--stack", "none"])
    assert "range: " not in text and "cross-validation" not in text
    paper = ["search", "--model", "gpt3-1t", "--system", "paper-h200", "--gpus", "512",
             "--strategy", "1d", "--mode", "paper", "--json"]
    assert json.loads(run(capsys, paper))["error_bar"] is None
    assert "--stack" in fail(capsys, [*paper, "--stack", "megatron-lm-2021"])


def test_evaluate_shows_the_range(capsys):
    argv = ["evaluate", "--model", "llama3-8b", "--system", "h100", "--gpus", "8",
            "--global-batch", "128", "--strategy", "1d", "--tp", "8", "--pp", "1", "--dp", "1",
            "--microbatch", "1"]
    out = json.loads(run(capsys, [*argv, "--json"]))
    low, high = out["range"]["iteration_time_s"]
    assert low < out["iteration_time_s"] < high and out["stack"] == default_stack_name()
    assert "range: " in run(capsys, argv)


def test_an_unknown_stack_is_a_clear_error(capsys):
    err = fail(capsys, ["search", *LLAMA8, "--stack", "megatron-2099"])
    assert "megatron-2099" in err and "megatron-bridge-26.02" in err
