"""A Hugging Face config.json as a model input (model/hf_config.py, load_model, --model).

The configs in tests/data/hf/ are transcribed from the models' published config.json files;
their parameter counts are checked against the totals the publishers give.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from model import ModelError, evaluate, load_model, load_system, search, transformer_from_dict
from model.cli import main
from model.specs.hf_config import spec_from_hf_config
from model.validation import REFERENCE

HF = Path(__file__).resolve().parent / "data" / "hf"
# folder → (published parameter total, hidden, layers, heads, kv heads, head dim, ffn, vocab, tied)
PUBLISHED = {
    "Meta-Llama-3-8B": (8.03e9, 4096, 32, 32, 8, 128, 14336, 128256, False),
    "Mistral-7B-v0.1": (7.24e9, 4096, 32, 32, 8, 128, 14336, 32000, False),
    "Qwen2-7B": (7.62e9, 3584, 28, 28, 4, 128, 18944, 152064, False),
    "Qwen3-8B": (8.19e9, 4096, 36, 32, 8, 128, 12288, 151936, False),
    "gemma-2-9b": (9.24e9, 3584, 42, 16, 8, 256, 14336, 256000, True),
}


def config(name: str) -> dict:
    return json.loads((HF / name / "config.json").read_text(encoding="utf-8"))


def write(tmp_path: Path, data: dict, name: str = "config.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_published_configs_map_and_count_their_parameters(name):
    total, hidden, layers, heads, kv, head_dim, ffn, vocab, tied = PUBLISHED[name]
    m = load_model(HF / name / "config.json", seq_len=4096)
    assert m.name == name  # a config.json is named after its folder
    assert (m.hidden, m.layers, m.heads, m.kv_heads, m.head_dim, m.ffn, m.vocab) == (
        hidden, layers, heads, kv, head_dim, ffn, vocab)
    assert (m.tied_embeddings, m.mlp, m.dropout, m.causal, m.bias) == (
        tied, "swiglu", False, True, False)
    assert (m.seq_len, m.tokens, m.samples) == (4096, None, None)
    assert m.params == pytest.approx(total, rel=0.01)
    assert m.source.startswith("Hugging Face config.json, model_type ")


def test_head_dim_apart_from_hidden_over_heads_shapes_attention_and_projection():
    """Gemma 2 9B: 16 heads of 256 = 4096 ≠ hidden 3584. Q, K, V are [e, (h + 2k)·q] and the
    output projection [h·q, e]: the per-op FLOPs follow those shapes."""
    m = load_model(HF / "gemma-2-9b" / "config.json", seq_len=2048)
    assert m.heads * m.head_dim == 4096 != m.hidden
    ev = evaluate(m, load_system("h100"), 8, 8, "1d", tp1=1, pp=1, dp=8, microbatch=1)
    ops = ev.ops.set_index("op")
    rows, e = 2048, m.hidden
    assert ops.loc["attn/qkv", "flop_fwd"] == rows * (16 + 2 * 8) * 256 * (2 * e - 1)
    assert ops.loc["attn/proj", "flop_fwd"] == rows * e * (2 * 4096 - 1)
    per_block = e * (16 + 2 * 8) * 256 + 4096 * e + 3 * e * m.ffn + 4 * e
    assert m.params_per_block == per_block


def test_gemma_ties_embeddings_unless_the_config_says_otherwise(tmp_path):
    data = config("gemma-2-9b")
    assert load_model(write(tmp_path, data), seq_len=8).tied_embeddings is True
    untied = write(tmp_path, {**data, "tie_word_embeddings": False}, "untied.json")
    assert load_model(untied, seq_len=8).tied_embeddings is False


def test_a_config_needs_the_training_sequence_length():
    with pytest.raises(ModelError, match="sequence length") as info:
        load_model(HF / "Qwen3-8B" / "config.json")
    assert "--seq-len" in str(info.value) and "seq_len=" in str(info.value)


def test_seq_len_and_tokens_complete_a_config():
    m = load_model(HF / "Qwen3-8B" / "config.json", seq_len=8192, tokens=36e12)
    assert (m.seq_len, m.tokens, m.training_samples) == (8192, 36e12, 36e12 / 8192)
    res = search(m, load_system("h100"), 64, 512, "1d", top_k=1)
    assert res.best is not None and res.best["train_days"] > 0


def test_command_line_takes_a_config_with_seq_len(capsys):
    path = str(HF / "Meta-Llama-3-8B" / "config.json")
    argv = ["search", "--model", path, "--system", "h100", "--gpus", "64", "--global-batch",
            "512", "--strategy", "1d", "--seq-len", "8192", "--top", "1"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "Meta-Llama-3-8B on h100" in out and "--seq-len 8192" in out
    assert main(argv[:-4] + ["--top", "1"]) == 2
    assert "--seq-len" in capsys.readouterr().err


def _moe_configs() -> dict[str, dict]:
    data = json.loads((REFERENCE / "moe_measurements.json").read_text(encoding="utf-8"))
    return {r["hf_config"]["model_type"]: r["hf_config"] for r in data["records"]}


@pytest.mark.parametrize("kind", ["deepseek_v3", "qwen3_moe"])
def test_mixture_of_experts_configs_load_through_the_moe_parser(kind, tmp_path):
    """A published MoE config.json loads like a dense one (load_model, --model PATH): the MoE
    fields come from model.specs.hf_moe, and without a budget there is none."""
    cfg = _moe_configs()[kind]
    m = load_model(write(tmp_path, cfg), seq_len=4096)
    assert m.moe and m.experts == cfg.get("n_routed_experts", cfg.get("num_experts"))
    assert m.seq_len == 4096 and m.tokens is None and m.samples is None
    assert load_model(write(tmp_path, cfg), seq_len=4096, tokens=1e12).tokens == 1e12


def test_a_mixture_of_experts_type_it_cannot_read_is_refused_by_name(tmp_path):
    path = write(tmp_path, {**config("Mistral-7B-v0.1"), "model_type": "dbrx"})
    with pytest.raises(ModelError, match="'model_type' 'dbrx' is a mixture-of-experts type"):
        load_model(path, seq_len=4096)


def test_experts_in_a_dense_model_type_are_refused_by_key(tmp_path):
    path = write(tmp_path, {**config("Mistral-7B-v0.1"), "num_local_experts": 8})
    with pytest.raises(ModelError, match="'num_local_experts'"):
        load_model(path, seq_len=4096)


@pytest.mark.parametrize("change, words", [
    ({"model_type": "phi3"}, ["'model_type' 'phi3'", "llama", "qwen3"]),
    ({"model_type": "gemma3"}, ["'text_config'"]),
    ({"model_type": None, "architectures": ["GPT2LMHeadModel"]}, ["'architectures'"]),
    ({"hidden_size": None}, ["lacks 'hidden_size'"]),
    ({"num_hidden_layers": "32"}, ["'num_hidden_layers' must be an integer"]),
    ({"num_key_value_heads": 3}, ["'kv_heads' (config.json 'num_key_value_heads')"]),
    ({"hidden_act": "relu"}, ["'hidden_act'", "relu"]),
    ({"tie_word_embeddings": "no"}, ["'tie_word_embeddings'"]),
    ({"attention_dropout": "0.1"}, ["'attention_dropout'"]),
])
def test_unsupported_or_wrong_configs_name_the_key(change, words, tmp_path):
    data = {k: v for k, v in {**config("Meta-Llama-3-8B"), **change}.items() if v is not None}
    with pytest.raises(ModelError) as info:
        load_model(write(tmp_path, data), seq_len=4096)
    assert all(w in str(info.value) for w in words), str(info.value)


def test_architectures_alone_identify_the_model(tmp_path):
    data = {k: v for k, v in config("Qwen2-7B").items() if k != "model_type"}
    assert load_model(write(tmp_path, data), seq_len=4096).params == pytest.approx(7.62e9,
                                                                                   rel=0.01)


def test_a_config_passed_as_a_spec_dict_points_to_load_model():
    with pytest.raises(ModelError, match="load_model"):
        transformer_from_dict(config("Meta-Llama-3-8B"))


def test_spec_records_what_is_counted_differently():
    spec, keys = spec_from_hf_config(config("gemma-2-9b"), "g")
    assert "gated GELU counted as SwiGLU" in spec["source"]
    assert "sliding-window (4096)" in spec["source"]
    assert keys["hidden"] == "hidden_size" and keys["head_dim"] == "head_dim"
    qwen2, _ = spec_from_hf_config(config("Qwen2-7B"), "q")
    assert "QKV biases not counted" in qwen2["source"] and "sliding" not in qwen2["source"]
