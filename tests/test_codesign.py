"""Co-design under a budget (model/studies/codesign.py, model/specs/prices.py, the codesign
command): prices, the GPUs a budget buys, the best cluster size against searches of its own,
offload where a design has host memory, the shared evaluation of HBM variants, bad input."""

from __future__ import annotations

import json

import pytest

from model import ModelError, load_model, load_system, search
from model.api import codesign
from model.cli.commands import main
from model.specs.prices import MAX_PRICE_BYTES, check_vary, load_prices
from model.studies.codesign import designs

PRICES = {"base_usd": 20000, "hbm_capacity_gb": {"40": 5000, "80": 10000},
          "host_memory_gb": {"0": 0, "256": 2500}}
VARY = {"hbm_capacity_gb": [40, 80], "host_memory_gb": [0, 256]}
BUDGET = 4e6  # 100 to 160 GPUs: small enough to check against searches of single counts


@pytest.fixture(scope="module")
def result():
    model = load_model("gpt3-175b").with_overrides(layers=24)
    return model, codesign([model], load_system("h100"), BUDGET, VARY, PRICES, 768)


def test_rows_price_and_buy_whole_nodes(result):
    _, res = result
    rows = res.rows
    assert len(rows) == 4 and list(res.varied) == ["hbm_capacity_gb", "host_memory_gb"]
    for _, r in rows.iterrows():
        price = 20000 + {40: 5000, 80: 10000}[r["hbm_capacity_gb"]] + {0: 0, 256: 2500}[
            r["host_memory_gb"]]
        assert r["price_per_gpu_usd"] == price
        assert r["max_gpus"] == int(BUDGET // price // 8 * 8)
        assert 0 < r["gpus"] <= r["max_gpus"] and r["gpus"] % 8 == 0
        assert r["samples_per_s_per_musd"] == pytest.approx(
            r["samples_per_s"] / (r["gpus"] * price / 1e6))
    assert rows["best"].sum() >= 1
    assert rows.loc[rows["best"], "samples_per_s"].iloc[0] == rows["samples_per_s"].max()


def test_the_best_cluster_size_is_the_best_of_every_node_multiple(result):
    """Each row equals a search of at most max_gpus GPUs (steps of 8) with the same choices."""
    model, res = result
    h100 = load_system("h100")
    for _, r in res.rows.iterrows():
        design = h100.with_overrides(hbm_capacity_gb=float(r["hbm_capacity_gb"]),
                                     host_memory_gb=float(r["host_memory_gb"]))
        ex = {"recompute": ["selective", "full"], "recompute_layers": 0, "interleave": 0}
        if r["host_memory_gb"] > 0:
            ex["offload"] = ["none", "optimizer", "activations", "weights", "all"]
        best = search(model, design, None, 768, "1d", max_gpus=int(r["max_gpus"]), gpu_step=8,
                      execution=ex, top_k=1).best
        assert r["samples_per_s"] == pytest.approx(best["samples_per_s"], rel=1e-12)


def test_offload_is_searched_only_with_host_memory(result):
    _, res = result
    rows = res.rows
    assert (rows.loc[rows["host_memory_gb"] == 0, "offload"] == "none").all()
    assert (rows.loc[rows["host_memory_gb"] == 0, "host_memory_used_gb"] == 0).all()
    tight = codesign([load_model("gpt3-175b").with_overrides(layers=24)], load_system("h100"),
                     BUDGET, {"hbm_capacity_gb": [20], "host_memory_gb": [256]},
                     {"base_usd": 2e4, "hbm_capacity_gb": {"20": 0},
                      "host_memory_gb": {"256": 0}}, 768).rows.iloc[0]
    assert tight["offload"] != "none" and tight["host_memory_used_gb"] > 0  # 20 GB needs it


def test_designs_vary_hbm_fastest_and_largest_first():
    out = designs({"hbm_capacity_gb": [20, 80, 40], "host_memory_gb": [0, 256]})
    assert [d["hbm_capacity_gb"] for d in out[:3]] == [80, 40, 20]
    assert [d["host_memory_gb"] for d in out] == [0, 0, 0, 256, 256, 256]


def test_hbm_variants_share_one_evaluation(monkeypatch):
    import model.engine.variant as search_module  # where a search evaluates

    evaluated = []
    real = search_module._evaluate_variant
    monkeypatch.setattr(search_module, "_evaluate_variant",
                        lambda *a, **k: evaluated.append(a[0].system.hbm_capacity_gb)
                        or real(*a, **k))
    search_module.CACHE.clear()
    codesign([load_model("gpt3-175b").with_overrides(layers=24)], load_system("h100"), BUDGET,
             {"hbm_capacity_gb": [40, 80, 120]},
             {"base_usd": 2e4, "hbm_capacity_gb": {"40": 0, "80": 0, "120": 0}}, 768)
    # the h100 preset has 256 GB of host memory: offload none (selective and full recompute)
    # and the four offloads (each with both), every one evaluated once, at the largest HBM
    assert evaluated == [120.0] * 10


@pytest.mark.parametrize("prices, vary, words", [
    ({"hbm_capacity_gb": {"40": 1}}, {"hbm_capacity_gb": [40]}, "base_usd"),
    ({"base_usd": -1, "hbm_capacity_gb": {"40": 1}}, {"hbm_capacity_gb": [40]}, "base_usd"),
    ({"base_usd": 1, "hbm_capacity_gb": {"forty": 1}}, {"hbm_capacity_gb": [40]}, "number"),
    ({"base_usd": 1, "hbm_capacity_gb": {"40": "1"}}, {"hbm_capacity_gb": [40]}, "price"),
    ({"base_usd": 1, "hbm": {"40": 1}}, {"hbm_capacity_gb": [40]}, "unknown key"),
    ({"base_usd": 1, "hbm_capacity_gb": {"40": 1}}, {"hbm_capacity_gb": [40, 80]},
     "no price for hbm_capacity_gb = 80"),
    ({"base_usd": 1, "hbm_capacity_gb": {"40": 1}}, {"name": [1]}, "numeric system field"),
    ({"base_usd": 1, "hbm_capacity_gb": {"40": 1}, "host_memory_gb": {"0": 0}},
     {"hbm_capacity_gb": [40]}, "priced but not varied"),
    ({"base_usd": 1, "hbm_capacity_gb": {"0.5": 1}}, {"hbm_capacity_gb": [0.5]}, "out of range"),
    ([1, 2], {"hbm_capacity_gb": [40]}, "JSON object"),
])
def test_bad_prices_and_vary_are_refused_by_name(prices, vary, words):
    with pytest.raises(ModelError, match=words):
        check_vary(vary, load_prices(prices))


def test_price_files_are_size_limited_json(tmp_path):
    big = tmp_path / "big.json"
    big.write_text(json.dumps({"base_usd": 1, "hbm_capacity_gb": {str(i): 1 for i in range(
        MAX_PRICE_BYTES // 8)}}))
    with pytest.raises(ModelError, match="larger than"):
        load_prices(big)
    pickle_like = tmp_path / "p.json"
    pickle_like.write_bytes(b"\x80\x04\x95\x00")  # a pickle header: not JSON, not unpickled
    with pytest.raises(ModelError, match="not valid JSON"):
        load_prices(pickle_like)
    with pytest.raises(ModelError, match="no such file"):
        load_prices(tmp_path / "missing.json")


def test_codesign_command_json(tmp_path, capsys):
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps(PRICES))
    argv = ["codesign", "--model", "gpt3-175b", "--system", "h100", "--budget-usd", "4e6",
            "--vary", "hbm_capacity_gb=40,80", "--vary", "host_memory_gb=0,256",
            "--prices", str(prices), "--global-batch", "768", "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["varied"] == ["hbm_capacity_gb", "host_memory_gb"] and len(out["rows"]) == 4
    for row in out["rows"]:
        assert {"model", "hbm_capacity_gb", "host_memory_gb", "price_per_gpu_usd", "max_gpus",
                "gpus", "samples_per_s", "samples_per_s_per_musd"} <= set(row)


@pytest.mark.parametrize("extra, words", [
    (["--vary", "hbm_capacity_gb"], "KEY=V1,V2"),
    (["--vary", "hbm_capacity_gb=a,b"], "numbers"),
    (["--vary", "hbm_capacity_gb=40", "--vary", "hbm_capacity_gb=80"], "twice"),
    (["--vary", "hbm_capacity_gb=40", "--global-batch", "8,16"], "one per model"),
])
def test_codesign_command_errors_are_one_line(tmp_path, capsys, extra, words):
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"base_usd": 1, "hbm_capacity_gb": {"40": 1, "80": 1}}))
    argv = ["codesign", "--model", "gpt3-175b", "--system", "h100", "--budget-usd", "1e6",
            "--prices", str(prices), *extra]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and words in err and err.count("\n") == 1
