"""``python -m model serve``: the contract's JSON keys, a pinned layout evaluated as given, a
search within SLAs, and bad input as one line with exit 2."""

from __future__ import annotations

import json

import pytest

from model import ServingLayout, ServingWorkload, load_model, load_system, serve
from model.cli.commands import main

BASE = ["serve", "--model", "llama3-70b", "--system", "h200", "--gpus", "8", "--precision",
        "fp8", "--input-tokens", "1000", "--output-tokens", "1000"]
CONTRACT = ("output_tokens_per_s", "output_tokens_per_s_per_gpu", "tokens_per_s_per_user",
            "ttft_s", "tpot_s", "batch", "kv_cache_gb", "memory_gb", "fits",
            "usd_per_million_output_tokens")


def _json(capsys, argv, code=0):
    assert main(argv) == code
    return json.loads(capsys.readouterr().out)


def test_contract_keys_and_pinned_layout(capsys):
    out = _json(capsys, BASE + ["--tp", "2", "--pp", "1", "--offline", "--json"])
    for key in CONTRACT:
        assert key in out, key
    assert (out["tp"], out["pp"], out["replicas"]) == (2, 1, 4)
    assert out["output_tokens_per_s"] == pytest.approx(8 * out["output_tokens_per_s_per_gpu"])
    assert out["tpot_s"] == pytest.approx(1 / out["tokens_per_s_per_user"])
    assert out["fits"] is True and out["memory_gb"] < 150.75


def test_search_meets_the_slas(capsys):
    out = _json(capsys, BASE + ["--concurrency", "256", "--tpot-max", "0.03", "--json"])
    assert out["meets_sla"] is True and out["tpot_s"] <= 0.03
    loose = _json(capsys, BASE + ["--concurrency", "256", "--json"])
    assert loose["output_tokens_per_s_per_gpu"] >= out["output_tokens_per_s_per_gpu"]


def test_api_matches_cli(capsys):
    out = _json(capsys, BASE + ["--tp", "4", "--request-rate", "2", "--json"])
    r = serve(load_model("llama3-70b"), load_system("h200"), 8,
              ServingWorkload(1000, 1000, mode="request-rate", request_rate_per_s=2.0,
                              weight_precision="fp8"), ServingLayout(tp=4))
    assert r.best["ttft_s"] == pytest.approx(out["ttft_s"])
    assert out["output_tokens_per_s"] == pytest.approx(2.0 * 1000)


@pytest.mark.parametrize("extra, words", [
    (["--tp", "3", "--offline"], "no serving layout of 8 GPUs"),
    (["--offline", "--tp", "2", "--replicas", "3"], "replicas 3"),
    (["--concurrency", "0"], "expected a positive integer"),
    (["--offline", "--mtp-acceptance", "0.5"], "--mtp-acceptance needs --mtp"),
    (["--offline", "--ep", "2"], "ep"),
    ([], "one of the arguments --offline --concurrency --request-rate is required"),
])
def test_bad_input_one_line_exit_2(capsys, extra, words):
    assert main(BASE + extra) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("error: ") and words in err


def test_nvfp4_needs_an_fp4_gpu(capsys):
    argv = [a if a != "fp8" else "nvfp4" for a in BASE] + ["--offline"]
    assert main(argv) == 2
    assert "NVFP4" in capsys.readouterr().err


def test_saturated_and_unfit_are_said_and_exit_3(capsys):
    """Valid input with no answer: the report, the reason on stderr, exit 3 (docs/cli.md)."""
    assert main(BASE + ["--tp", "8", "--request-rate", "1e6", "--json"]) == 3
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert out["stable"] is False and out["ttft_s"] is None and "saturated" in out["message"]
    assert captured.err.startswith("no answer: ") and "saturated" in captured.err
    big = _json(capsys, ["serve", "--model", "llama3-405b", "--system", "h100", "--gpus", "1",
                         "--precision", "bf16", "--input-tokens", "100", "--output-tokens",
                         "100", "--offline", "--json"], code=3)
    assert big["fits"] is False and big["message"] == "no layout fits in memory"


@pytest.mark.parametrize("extra, words", [
    (["--input-tokens", "1000000", "--offline"],
     ["--input-tokens", "--output-tokens", "llama3-70b's context of 131,072"]),
    (["--input-tokens", "1000000000000", "--offline"], ["--input-tokens", "beyond any model"]),
    (["--mtp", "3", "--offline"], ["--mtp 3", "no MTP head"]),
])
def test_questions_the_model_cannot_answer_are_refused(capsys, extra, words):
    """A prompt beyond the context window names the flags and the limit (not seq_len); MTP on
    a model without an MTP head is refused."""
    assert main(BASE + extra) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("error: ") and "seq_len" not in err
    for word in words:
        assert word in err, (word, err)


def test_one_output_token_is_ttft_only(capsys):
    out = _json(capsys, [a if a != "1000" else "1" for a in BASE[:-1]] + [
        "1", "--concurrency", "8", "--tp", "8", "--json"])
    assert out["ttft_s"] > 0 and out["tpot_s"] is None and out["tokens_per_s_per_user"] is None
    assert main(BASE[:-1] + ["1", "--concurrency", "8", "--tp", "8"]) == 0
    text = capsys.readouterr().out
    assert "tpot_s" in text and "n/a (one output token: TTFT only)" in text


def test_attention_dp_pinned_both_ways(capsys):
    """--attention-dp and --no-attention-dp pin the layout as given (a MoE model, tp 8)."""
    moe = ["serve", "--model", "qwen3-235b-a22b", "--system", "h200", "--gpus", "8",
           "--precision", "fp8", "--input-tokens", "1000", "--output-tokens", "1000",
           "--offline", "--tp", "8", "--json"]
    on = _json(capsys, moe + ["--attention-dp"])
    off = _json(capsys, moe + ["--no-attention-dp"])
    searched = _json(capsys, moe)
    assert on["attention_dp"] is True and off["attention_dp"] is False
    assert on["ep"] == 8 and searched["candidates"] > on["candidates"]
    assert on["output_tokens_per_s"] != off["output_tokens_per_s"]


@pytest.mark.parametrize("engine", ["trtllm-1.0", "vllm-0.x", "sglang-0.5"])
def test_engines_selectable_with_their_error_bars(capsys, engine):
    out = _json(capsys, BASE + ["--tp", "8", "--concurrency", "64", "--engine", engine,
                                "--json"])
    assert out["stack"] == engine and out["ttft_s"] > 0
    bars = out["error_bars"]
    assert set(bars) == {"output_tokens_per_s", "ttft_s", "tpot_s"}
    assert "not validated" in bars["ttft_s"] and "not validated" in bars["tpot_s"]
    if engine == "trtllm-1.0":
        # a split-conformal interval over the held-out (leave-one-model-out) runs (issue 32)
        assert bars["output_tokens_per_s"].startswith("80 % interval -") and (
            "leave-one-model-out runs of dense hopper serving" in bars["output_tokens_per_s"])
    else:
        assert "not validated end to end" in bars["output_tokens_per_s"]


@pytest.mark.parametrize("mode", [{"mode": "concurrency", "concurrency": 64},
                                  {"mode": "offline"},
                                  {"mode": "request-rate", "request_rate_per_s": 50.0}])
@pytest.mark.parametrize("output_tokens", [2, 10, 1000])
def test_token_prices_split_the_gpu_cost_and_are_never_negative(mode, output_tokens):
    """Input tokens pay for the prefill's share of the GPU time and output tokens for the
    rest, so both prices are ≥ 0 and together they recover the GPUs' $ per second (a closed
    loop of short answers once charged prompts more than the whole GPU time: −$78 per million
    output tokens)."""
    wl = ServingWorkload(input_tokens=1024, output_tokens=output_tokens,
                         weight_precision="fp8", kv_precision="fp8", **mode)
    best = serve(load_model("llama3-8b"), load_system("h100"), 8, workload=wl).best
    out_usd, in_usd = best["usd_per_million_output_tokens"], best["usd_per_million_input_tokens"]
    assert out_usd > 0 and in_usd > 0
    usd_per_s = best["usd_per_million_output_tokens_all_in"] * best["output_tokens_per_s"]
    split = (out_usd * best["output_tokens_per_s"]
             + in_usd * best["requests_per_s"] * 1024)
    assert split == pytest.approx(usd_per_s, rel=1e-9)
