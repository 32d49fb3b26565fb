"""Presets in model/data/systems/ and model/data/workloads/ validate, match the published figures
(model/data/reference/); bad specs fail."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from model.errors import ModelError
from model.specs.hardware import FIELDS as SYSTEM_FIELDS
from model.specs.hardware import SYSTEMS_DIR, list_systems, load_system, system_from_dict
from model.specs.models import load_model
from model.specs.transformer import FIELDS as MODEL_FIELDS
from model.specs.transformer import WORKLOADS_DIR, list_models, transformer_from_dict
from model.validation import REFERENCE

DIRS = {"systems": SYSTEMS_DIR, "workloads": WORKLOADS_DIR}
PAPER = REFERENCE / "paper_results.json"
KORTHIKANTI = REFERENCE / "korthikanti_validation.json"

PAPER_SYSTEMS = {
    "paper-a100": "A100",
    "paper-h200": "H200",
    "paper-b200": "B200",
    "paper-b200-next": "B200-next",
}
REAL_SYSTEMS = {"a100", "h100", "h200", "b200", "gb200-nvl72", "gb300-nvl72", "mi300x"}
MODELS = {
    "gpt3-175b",
    "gpt3-1t",
    "vit-era5",
    "megatron-22b",
    "turing-530b",
    "megatron-1t",
    "llama3-8b",
    "llama3-70b",
    "llama3-405b",
}
# paper JSON key -> our field
PAPER_KEYS = {
    "matrix_flops_fp16": "matrix_tflops_fp16",
    "vector_flops_fp16": "vector_tflops_fp16",
    "vector_flops_fp32": "vector_tflops_fp32",
    "hbm_bandwidth": "hbm_bandwidth_gb_per_s",
    "hbm_capacity": "hbm_capacity_gb",
    "nvlink_bandwidth": "nvlink_bandwidth_gb_per_s",
    "nvlink_eff": "nvlink_efficiency",
    "nvlink_latency": "nvlink_latency_s",
    "ib_bandwidth": "nic_bandwidth_gb_per_s",
    "ib_eff": "network_efficiency",
    "ib_latency": "network_latency_s",
    "nvlink_size": "nvlink_domain_size",
    "nic_factor": "nics_per_gpu",
}


def _reference(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _raw(folder: str, name: str) -> dict:
    return json.loads((DIRS[folder] / f"{name}.json").read_text(encoding="utf-8"))


# --- every preset loads ----------------------------------------------------------------------


def test_expected_presets_exist():
    assert set(PAPER_SYSTEMS) | REAL_SYSTEMS <= set(list_systems())
    assert MODELS <= set(list_models())


@pytest.mark.parametrize("name", list_systems())
def test_system_preset_validates(name):
    system = load_system(name)
    assert system.name == name  # file stem == "name"
    assert system.source.strip()
    raw = _raw("systems", name)
    assert set(raw) <= {f.name for f in SYSTEM_FIELDS}
    # loading by path gives the same object as loading by name
    assert load_system(SYSTEMS_DIR / f"{name}.json") == system
    # round trip through to_dict
    assert system_from_dict(system.to_dict()) == system


@pytest.mark.parametrize("name", list_models())
def test_model_preset_validates(name):
    model = load_model(name)
    assert model.name == name
    assert model.source.strip()
    assert set(_raw("workloads", name)) <= {f.name for f in MODEL_FIELDS}
    assert load_model(WORKLOADS_DIR / f"{name}.json") == model
    assert transformer_from_dict(model.to_dict()) == model
    assert model.training_samples > 0
    assert model.params > 0


# --- paper systems equal the published JSON --------------------------------------------------


@pytest.mark.parametrize("name", sorted(PAPER_SYSTEMS))
def test_paper_system_matches_reference(name):
    ref = _reference(PAPER)["systems"][PAPER_SYSTEMS[name]]
    system = load_system(name)
    for paper_key, field in PAPER_KEYS.items():
        assert getattr(system, field) == ref[paper_key], (
            f"{name}.{field} != paper {paper_key}"
        )
    # the paper's fixed roofline constants: t = 20e-6 + F / (0.8 P); no HBM efficiency, no fp8
    assert system.flop_efficiency == 0.8
    assert system.kernel_overhead_s == 20e-6
    assert system.hbm_efficiency == 1.0
    assert system.matrix_tflops_fp8 == 0
    assert (
        ref["element_size"] == 2e-9 and ref["mask_element_size"] == 1e-9
    )  # 2-byte fp16, 1-byte masks


@pytest.mark.parametrize("name", sorted(REAL_SYSTEMS))
def test_real_system_is_plausible(name):
    s = load_system(name)
    assert s.vector_tflops_fp16 < s.matrix_tflops_fp16
    assert s.matrix_tflops_fp8 in (0, pytest.approx(2 * s.matrix_tflops_fp16, rel=0.01))
    assert s.nvlink_bandwidth_gb_per_s > s.nic_bandwidth_gb_per_s
    assert s.nvlink_domain_size == (72 if name.endswith("-nvl72") else 8)
    nic = {"a100": 25, "gb300-nvl72": 100}  # HDR 200 Gb/s; ConnectX-8 800 Gb/s
    assert s.nic_bandwidth_gb_per_s == nic.get(name, 50)
    assert 0 <= s.overlap_slowdown < 0.5


# --- paper models equal the published dimensions ---------------------------------------------


@pytest.mark.parametrize(
    "name, key", [("gpt3-1t", "gpt3_1T"), ("vit-era5", "vit_era5")]
)
def test_paper_model_matches_reference(name, key):
    ref = _reference(PAPER)
    dims, data = ref["models"][key], ref["dataset"][key]
    m = load_model(name)
    assert (m.seq_len, m.hidden, m.heads, m.layers, m.ffn) == (
        dims["l"],
        dims["e"],
        dims["h"],
        dims["depth"],
        dims["f"],
    )
    assert m.kv_heads == m.heads and m.mlp == "gelu"
    assert m.training_samples == pytest.approx(data["num_samples"], rel=1e-12)
    if "total_tokens" in data:
        assert m.tokens == data["total_tokens"]


def test_vit_has_no_vocabulary():
    assert load_model("vit-era5").vocab == 0


def test_paper_gpt3_1t_block_params():
    """The paper's count (docs/model.md §3 for its model): 12e^2 + 10e per block, about
    1.007e12 for 128 blocks (no embedding)."""
    m = load_model("gpt3-1t")
    e = m.hidden
    assert m.layers * m.params_per_block == m.layers * (12 * e * e + 10 * e)
    assert m.layers * m.params_per_block == pytest.approx(1.007e12, rel=1e-3)


def test_megatron_models_match_korthikanti():
    ref = _reference(KORTHIKANTI)
    presets = {
        "megatron-22B": "megatron-22b",
        "gpt3-175B": "gpt3-175b",
        "turing-530B": "turing-530b",
        "megatron-1T": "megatron-1t",
    }
    seen = set()
    for run in ref["end_to_end_time"]:
        m = load_model(presets[run["model"]])
        assert (m.hidden, m.layers, m.heads, m.seq_len) == (
            run["hidden"],
            run["layers"],
            run["heads"],
            run["seq_len"],
        ), run["model"]
        # parameter count (with tied 51200-entry embeddings; no position embedding) within 0.5%
        assert m.params == pytest.approx(run["params_billion"] * 1e9, rel=5e-3), run[
            "model"
        ]
        seen.add(run["model"])
    assert seen == set(presets)


@pytest.mark.parametrize(
    "name, billions",
    [("llama3-8b", 8.03), ("llama3-70b", 70.55), ("llama3-405b", 405.85)],
)
def test_llama3_params(name, billions):
    m = load_model(name)
    assert (m.kv_heads, m.mlp, m.vocab, m.bias, m.tied_embeddings) == (
        8,
        "swiglu",
        128256,
        False,
        False,
    )
    assert m.params == pytest.approx(billions * 1e9, rel=2e-3)


# --- bad input fails with a message naming the field -----------------------------------------


def _model(**changes):
    data = _raw("workloads", "gpt3-175b")
    data.update(changes)
    return {k: v for k, v in data.items() if v is not ...}


def _system(**changes):
    data = _raw("systems", "h100")
    data.update(changes)
    return {k: v for k, v in data.items() if v is not ...}


@pytest.mark.parametrize(
    "data, field",
    [
        (_model(hidden=-1), "hidden"),
        (_model(hidden=12288.5), "hidden"),
        (_model(layers=0), "layers"),
        (_model(heads=100), "heads"),  # 100 does not divide 12288
        (_model(kv_heads=7), "kv_heads"),  # does not divide 96 heads
        (_model(hidden="12288"), "hidden"),
        (_model(hidden=True), "hidden"),
        (_model(bias="yes"), "bias"),
        (_model(mlp="relu"), "mlp"),
        (_model(hiden=12288), "hiden"),
        (_model(layers=...), "layers"),
        (_model(samples=1e6), "samples"),  # two budgets
        (_model(vocab=0), "tied_embeddings"),  # tied embeddings need a vocabulary
        (_model(tokens=float("inf")), "tokens"),
    ],
)
def test_bad_model_names_field(data, field):
    with pytest.raises(ModelError, match=f"'{field}'"):
        transformer_from_dict(data)


@pytest.mark.parametrize(
    "data, field",
    [
        (_system(hbm_capacity_gb=-1), "hbm_capacity_gb"),
        (_system(hbm_efficiency=1.5), "hbm_efficiency"),
        (_system(nvlink_domain_size=8.5), "nvlink_domain_size"),
        (_system(matrix_tflops_fp16="989.4"), "matrix_tflops_fp16"),
        (_system(nvlink_bandwidth_gbps=450), "nvlink_bandwidth_gbps"),
        (_system(nic_bandwidth_gb_per_s=...), "nic_bandwidth_gb_per_s"),
        (_system(source=...), "source"),
        (_system(source="x" * 8001), "source"),  # sources cite every figure: 8000 chars
    ],
)
def test_bad_system_names_field(data, field):
    with pytest.raises(ModelError, match=f"'{field}'"):
        system_from_dict(data)


@pytest.mark.parametrize("data", [[], "gpt3-175b", None, 3])
def test_non_object_rejected(data):
    with pytest.raises(ModelError, match="JSON object"):
        transformer_from_dict(data)
    with pytest.raises(ModelError, match="JSON object"):
        system_from_dict(data)


def test_unknown_preset_names_it_and_lists_presets():
    with pytest.raises(ModelError, match="unknown model 'gpt-5'.*gpt3-175b"):
        load_model("gpt-5")
    with pytest.raises(ModelError, match="unknown system 'tpu-v9'.*h100"):
        load_system("tpu-v9")


def test_bad_files(tmp_path):
    not_json = tmp_path / "broken.json"
    not_json.write_text("{ this is not json", encoding="utf-8")
    with pytest.raises(ModelError, match="not valid JSON"):
        load_model(not_json)
    with pytest.raises(ModelError, match="not valid JSON"):
        load_system(not_json)

    missing = tmp_path / "missing.json"
    with pytest.raises(ModelError, match="no such file"):
        load_model(missing)
    with pytest.raises(ModelError, match="no such file"):
        load_system(missing)

    text_file = tmp_path / "model.txt"  # not a .json path: treated as a preset name
    text_file.write_text("{}", encoding="utf-8")
    with pytest.raises(ModelError, match="unknown model"):
        load_model(text_file)

    bad_value = tmp_path / "bad.json"
    bad_value.write_text(json.dumps(_model(heads=7)), encoding="utf-8")
    with pytest.raises(ModelError, match="'heads'"):
        load_model(bad_value)


def test_domain_size_override():
    assert load_system("paper-h200", nvlink_domain_size=8).nvlink_domain_size == 8
    with pytest.raises(ModelError, match="'nvlink_domain_size'"):
        load_system("h100", nvlink_domain_size=0)
