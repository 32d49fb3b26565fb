"""A Hugging Face config.json uploaded in the browser fills the model controls (issue 21: the
upload refused it with "unknown key 'architectures'" though the CLI reads it): the upload
callback called directly, with configs transcribed from published models (tests/data)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from dashboard import state
from dashboard.controls import scenario as S
from dashboard.controls.panel import CONTROL_KEYS
from model.specs.models import hf_model

DATA = Path(__file__).resolve().parent / "data"
N = len(CONTROL_KEYS)


def _upload(config: dict, current: dict | None = None) -> tuple[dict, str]:
    """(the control values the upload sets, its message)."""
    url = "data:application/json;base64," + base64.b64encode(json.dumps(config).encode()).decode()
    out = state.upload(url, current or S.default_scenario())
    return dict(zip(CONTROL_KEYS, out[:N])), out[-1]


def _moe(repo_part: str) -> dict:
    entries = json.loads((DATA / "hf_moe_configs.json").read_text())["entries"]
    return next(e["config"] for e in entries if repo_part in e["repo"])


def _loaded(values: dict) -> S.Transformer:
    scn, errors = S.validate_scenario({**S.default_scenario(), **values})
    assert scn is not None, errors
    return S.build_inputs(scn)[0]


def test_a_llama_config_fills_the_model_controls_exactly():
    config = json.loads((DATA / "hf" / "Meta-Llama-3-8B" / "config.json").read_text())
    values, message = _upload(config)
    assert (values["layers"], values["hidden"], values["heads"], values["kv_heads"],
            values["ffn"], values["vocab"]) == (32, 4096, 32, 8, 14336, 128256)
    assert values["attention"] == "gqa" and values["mlp"] == "swiglu"
    assert values["seq_len"] == S.default_scenario()["seq_len"]  # a config does not say it
    assert message == ""  # every field of the config's model, none left over from the preset
    assert values["model"] == "llama3-8b"  # on the closest preset (the caption names it)
    expected = hf_model(config, "x", seq_len=values["seq_len"])
    assert _loaded(values).params == expected.params


def test_a_deepseek_v3_config_fills_the_moe_and_mla_controls():
    config = _moe("DeepSeek-V3")
    values, message = _upload(config)
    expected = hf_model(config, "x", seq_len=values["seq_len"])
    assert values["experts"] == 256 and values["top_k"] == 8 and values["attention"] == "mla"
    assert values["kv_lora_rank"] == 512
    loaded = _loaded(values)
    assert loaded.params == pytest.approx(expected.params, rel=1e-9), message
    assert 660e9 < loaded.params < 690e9  # DeepSeek-V3: 671B (its model card)


@pytest.mark.parametrize("config,needle", [
    ({"model_type": "bert", "hidden_size": 768}, "bert"),
    ({"architectures": ["../../etc/passwd"]}, "architectures"),
    ({**json.loads((DATA / "hf" / "Qwen3-8B" / "config.json").read_text()),
      "num_hidden_layers": "many"}, "num_hidden_layers"),
])
def test_a_refused_config_changes_nothing_and_names_why(config, needle):
    url = "data:application/json;base64," + base64.b64encode(json.dumps(config).encode()).decode()
    out = state.upload(url, S.default_scenario())
    assert all(state.no_update == v for v in out[:-1])
    assert out[-1].startswith("config.json refused") and needle in out[-1], out[-1]


def test_an_oversized_config_is_refused_as_any_upload():
    config = {**json.loads((DATA / "hf" / "Qwen3-8B" / "config.json").read_text()),
              "pad": "x" * 20_000}
    url = "data:application/json;base64," + base64.b64encode(json.dumps(config).encode()).decode()
    out = state.upload(url, S.default_scenario())
    assert "16 KB" in out[-1]


def test_a_config_with_fields_no_control_sets_says_which():
    """Gemma 2 9B: head size 256 (not hidden / heads = 224) and tied embeddings, which no
    control sets: loaded on the closest preset, and the message names both."""
    config = json.loads((DATA / "hf" / "gemma-2-9b" / "config.json").read_text())
    values, message = _upload(config)
    assert values["hidden"] == 3584 and values["layers"] == 42
    assert "head_dim" in message and "tied_embeddings" in message and "9.2B" in message


@pytest.mark.parametrize("repo,preset", [("Mixtral-8x7B", "mixtral-8x7b"),
                                         ("Qwen3-30B-A3B", "qwen3-30b-a3b"),
                                         ("Kimi-K2", "kimi-k2")])
def test_moe_configs_load_exactly_on_their_family_s_preset(repo, preset):
    config = _moe(repo)
    values, message = _upload(config)
    assert values["model"] == preset and message == ""
    assert _loaded(values).params == hf_model(config, "x", seq_len=values["seq_len"]).params
