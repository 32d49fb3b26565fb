"""Loading a model: a preset by name, a workload spec file, or a Hugging Face ``config.json``
(dense types: :mod:`model.specs.hf_config`; mixture-of-experts types: :mod:`model.specs.hf_moe`).

It sits above :mod:`model.specs.transformer` and both config readers, so the spec module
imports neither (one way: transformer → hf_moe → models).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from model.errors import ModelError
from model.specs.hf_config import is_hf_config, name_hf_key, spec_from_hf_config
from model.specs.hf_moe import is_moe_config, model_from_hf
from model.specs.schema import preset_path, read_json
from model.specs.transformer import WORKLOADS_DIR, Transformer, default_name, transformer_from_dict


def load_model(name_or_path: str | Path, *, seq_len: int | None = None,
               tokens: float | None = None, samples: float | None = None) -> Transformer:
    """Load a preset by name (``gpt3-1t``), a workload spec file, or a Hugging Face
    ``config.json`` (which does not say the training sequence length: give ``seq_len``).

    ``seq_len``, ``tokens`` and ``samples`` replace the file's values (a budget given as tokens
    replaces one given as samples). Without a budget the results give throughput and days per
    1T tokens, not days to train.
    """
    path = preset_path(name_or_path, WORKLOADS_DIR, "model")
    data = read_json(path, "model")
    given = {k: v for k, v in (("seq_len", seq_len), ("tokens", tokens), ("samples", samples))
             if v is not None}
    if isinstance(data, dict) and is_hf_config(data):
        return hf_model(data, default_name(path), **given)
    if isinstance(data, dict) and given:
        data = {**data, **given}
        if "tokens" in given and "samples" not in given:
            data.pop("samples", None)
        if "samples" in given and "tokens" not in given:
            data.pop("tokens", None)
    return transformer_from_dict(data, default_name(path))


def hf_model(config: dict[str, Any], name: str, **given: Any) -> Transformer:
    """A :class:`Transformer` from a Hugging Face config (``given``: seq_len, tokens, samples).

    Errors name the config's own key where the value came from one."""
    if given.get("seq_len") is None:
        raise ModelError("model: a Hugging Face config.json does not say the training sequence "
                         "length (max_position_embeddings is the longest it supports); give it: "
                         "--seq-len N (command line) or load_model(path, seq_len=N)")
    if is_moe_config(config):
        return model_from_hf(config, name=name, **given)
    spec, keys = spec_from_hf_config(config, name)
    try:
        return transformer_from_dict({**spec, **given}, name)
    except ModelError as exc:
        raise ModelError(name_hf_key(str(exc), keys)) from None
