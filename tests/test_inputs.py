"""What a new user writes first: a model spec with only its dimensions, a system that changes one
field of a preset, a file with a typo. Defaults are those docs/model.md lists; errors say where.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from model import ModelError, evaluate, load_model, load_system, search, system_from_dict
from model.cli import main
from model.specs.hardware import FIELDS as SYSTEM_FIELDS
from model.specs.transformer import FIELDS as MODEL_FIELDS

DOCS = Path(__file__).resolve().parent.parent / "docs" / "model.md"
DIMENSIONS = {"layers": 24, "hidden": 2048, "heads": 16, "seq_len": 2048}


def write(tmp_path: Path, data: object, name: str) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


# --- a model spec needs only its dimensions --------------------------------------------------
def test_dimensions_alone_make_a_model_named_after_its_file(tmp_path):
    m = load_model(write(tmp_path, DIMENSIONS, "my-gpt.json"))
    assert m.name == "my-gpt"
    assert (m.kv_heads, m.head_dim, m.ffn) == (16, 128, 4 * 2048)
    assert (m.mlp, m.bias, m.dropout, m.causal, m.vocab, m.tied_embeddings) == (
        "gelu", True, True, True, 0, False)
    assert (m.tokens, m.samples, m.training_samples) == (None, None, None)


def test_without_a_budget_results_give_days_per_1t_tokens(tmp_path):
    m = load_model(write(tmp_path, {**DIMENSIONS, "vocab": 50257}, "nobudget.json"))
    best = search(m, load_system("h100"), 64, 512, "1d", top_k=3).best
    assert math.isnan(best["train_days"])
    assert best["days_per_1t_tokens"] == pytest.approx(1e12 / best["tokens_per_s"] / 86400)
    budget = search(m.with_overrides(tokens=3e11), load_system("h100"), 64, 512, "1d").best
    assert budget["train_days"] == pytest.approx(0.3 * best["days_per_1t_tokens"], rel=1e-12)


def test_command_line_without_a_budget_stays_valid_json_and_says_so(tmp_path, capsys):
    path = str(write(tmp_path, {**DIMENSIONS, "vocab": 50257}, "nobudget.json"))
    argv = ["search", "--model", path, "--system", "h100", "--gpus", "64", "--global-batch",
            "512", "--strategy", "1d", "--top", "2"]
    assert main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)  # strict JSON: NaN would not parse as null
    best = out["results"][0]["best"]
    assert best["train_days"] is None and best["days_per_1t_tokens"] > 0
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "days per 1T tokens (no training budget)" in text and "days/1T tokens" in text
    assert main([*argv, "--tokens", "2e12"]) == 0
    assert "days to train" in capsys.readouterr().out


def test_seq_len_and_tokens_replace_a_spec_s(tmp_path):
    path = write(tmp_path, {**DIMENSIONS, "samples": 1e6}, "s.json")
    m = load_model(path, seq_len=4096, tokens=1e12)
    assert (m.seq_len, m.tokens, m.samples) == (4096, 1e12, None)
    assert load_model("gpt3-1t", seq_len=4096).seq_len == 4096


def test_head_dim_given_as_hidden_over_heads_changes_nothing():
    m = load_model("llama3-8b")
    same = m.with_overrides(head_dim=m.hidden // m.heads)
    s = load_system("h100")
    for strategy in ("1d", "summa", "context"):
        a = search(m, s, 256, 512, strategy, top_k=3).top
        b = search(same, s, 256, 512, strategy, top_k=3).top
        assert np.array_equal(a["iteration_time_s"], b["iteration_time_s"]), strategy
        assert np.array_equal(a["memory_gb"], b["memory_gb"]), strategy


def test_head_dim_follows_hidden_and_heads_unless_given():
    m = load_model("gpt3-175b")
    assert m.with_overrides(hidden=4096, heads=32).head_dim == 128
    assert m.with_overrides(heads=48).head_dim == 256
    wide = m.with_overrides(head_dim=256)
    assert wide.with_overrides(layers=2).head_dim == 256
    with pytest.raises(ModelError, match="'heads' = 7 must divide 'hidden'"):
        m.with_overrides(heads=7, kv_heads=7)
    assert m.with_overrides(heads=7, kv_heads=7, head_dim=128).heads == 7


# --- a system may start from a preset ---------------------------------------------------------
def test_system_from_a_preset_with_a_few_changes(tmp_path):
    spec = {"base": "h100", "hbm_capacity_gb": 141, "hbm_bandwidth_gb_per_s": 4800}
    s = load_system(write(tmp_path, spec, "h100-141.json"))
    h100 = load_system("h100")
    assert s.name == "h100-141" and (s.hbm_capacity_gb, s.hbm_bandwidth_gb_per_s) == (141, 4800)
    same = {k: v for k, v in h100.to_dict().items()
            if k not in ("name", "source", "hbm_capacity_gb", "hbm_bandwidth_gb_per_s")}
    assert {k: getattr(s, k) for k in same} == same
    assert "h100 preset" in s.source and "hbm_capacity_gb" in s.source
    assert system_from_dict({"base": "b200", "name": "mine", "source": "own"}).source == "own"


@pytest.mark.parametrize("spec, words", [
    ({"base": "h900"}, ["'base'", "h100"]),
    ({"base": 5}, ["'base'"]),
    ({"base": "h100", "hbm_capacity": 10}, ["unknown key 'hbm_capacity'"]),
    ({"base": "h100", "hbm_capacity_gb": -1}, ["'hbm_capacity_gb'"]),
])
def test_bad_base_specs_name_the_key(spec, words):
    with pytest.raises(ModelError) as info:
        system_from_dict(spec)
    assert all(w in str(info.value) for w in words), str(info.value)


# --- a JSON syntax error says where --------------------------------------------------------------
@pytest.mark.parametrize("loader", [load_model, load_system])
def test_json_syntax_error_gives_line_and_column(tmp_path, loader):
    path = tmp_path / "typo.json"
    path.write_text('{\n  "layers": 2,\n  "hidden": 64\n  "heads": 4\n}\n', encoding="utf-8")
    with pytest.raises(ModelError, match="line 4, column 3"):
        loader(path)


def test_command_line_json_error_is_one_line_with_the_place(tmp_path, capsys):
    path = tmp_path / "typo.json"
    path.write_text('{"layers": 2,,}', encoding="utf-8")
    assert main(["models"]) == 0
    capsys.readouterr()
    assert main(["evaluate", "--model", str(path), "--system", "h100", "--gpus", "1",
                 "--strategy", "1d", "--tp", "1", "--pp", "1", "--dp", "1",
                 "--microbatch", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "line 1, column 14" in err


# --- every default is documented ----------------------------------------------------------------
def _section(title: str) -> str:
    """The text of the docs/model.md section whose heading starts with ``title``."""
    text = DOCS.read_text(encoding="utf-8")
    start = text.index(f"\n### {title}")
    return text[start:text.index("\n#", start + 1)]


def _shown(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return f"{value:g}" if isinstance(value, float) else str(value)


@pytest.mark.parametrize("section, field", [("2.1", f) for f in MODEL_FIELDS]
                         + [("2.3", f) for f in SYSTEM_FIELDS],
                         ids=lambda v: v if isinstance(v, str) else v.name)
def test_every_spec_key_is_documented_with_its_default(section, field):
    """docs/model.md §2.1 (model) and §2.3 (system) have a row `key` | default for each key."""
    rows = [line for line in _section(section).splitlines()
            if line.startswith(f"| `{field.name}` |")]
    assert len(rows) == 1, f"docs/model.md §{section}: no single row for `{field.name}`"
    default = rows[0].split("|")[2].strip().replace("`", "")
    if field.required:
        assert default == "required", (field.name, default)
    elif field.default not in (None, ""):
        assert _shown(field.default) in default, (field.name, default)


def test_evaluate_reports_the_same_defaults_as_the_spec(tmp_path):
    m = load_model(write(tmp_path, DIMENSIONS, "d.json"))
    ev = evaluate(m, load_system("a100"), 8, 8, "1d", tp1=8, pp=1, dp=1, microbatch=1)
    names = set(ev.ops["op"])
    assert {"mlp/fc1_bias", "mlp/dropout", "attn/flash"} <= names  # bias and dropout on
    assert not {"embed/lookup", "head/logits"} & names  # vocab 0: no embedding or head
