"""A Hugging Face ``config.json`` dropped on the scenario upload: the model controls filled from
it, as the CLI's ``--model path/config.json`` reads it (:func:`model.specs.transformer.hf_model`,
dense types in :mod:`model.specs.hf_config`, MoE types in :mod:`model.specs.hf_moe`). Before
this the upload took scenario files only and refused a config.json ("unknown key
'architectures'").

The file's bytes are parsed here (size-limited like a scenario file, JSON only); nothing is read
from a path it names. A config does not say the training sequence length, batch or budget: the
scenario's own are kept. The scenario names a model preset and overrides its fields from the
controls, so the uploaded model is every model control set from the config on the preset that gives
the fewest differing fields (those no control sets: tied embeddings, biases, head size, …);
any field that still differs from the config's model is named in the message.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from dashboard.controls.control_table import CONTROLS
from dashboard.controls.presets import control_value, model_values
from dashboard.controls.scenario import MAX_SCENARIO_BYTES, build_inputs, validate_scenario
from model import ModelError, list_models
from model.specs.hf_config import is_hf_config
from model.specs.models import hf_model
from model.specs.transformer import Transformer

# what the scenario keeps from its own values (a config.json does not say them)
KEPT = ("seq_len", "global_batch", "budget_kind", "budget")
MODEL_CONTROLS = tuple(c for c in CONTROLS if c.group == "model" and not c.preset
                       and c.key not in KEPT)
# max_context_tokens: the serving context limit (serve's refusal), no control, unused in training
NOT_COMPARED = {"name", "source", "tokens", "samples", "global_batch", "max_context_tokens"}


def hf_config_of(data: bytes) -> dict[str, Any] | None:
    """The JSON object of an upload when it is a Hugging Face config (None otherwise: a
    scenario file, or not JSON, which the scenario upload reports)."""
    if len(data) > MAX_SCENARIO_BYTES:
        return None
    try:
        config = json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    return config if isinstance(config, dict) and is_hf_config(config) else None


def _differences(a: Transformer, b: Transformer) -> list[str]:
    """The spec fields (other than name, source and budget) where ``a`` and ``b`` differ."""
    return [f.name for f in dataclasses.fields(Transformer)
            if f.name not in NOT_COMPARED and getattr(a, f.name) != getattr(b, f.name)]


def scenario_from_hf(config: dict[str, Any], current: dict[str, Any],
                     name: str = "config.json") -> tuple[dict[str, Any] | None, str]:
    """(the scenario with the config's model, a message saying what was loaded) or (None, why
    the config is refused: the config's own key, from the estimator's reader); the message is
    empty when the loaded model is the config's in every field."""
    try:
        model = hf_model(config, name, seq_len=int(current["seq_len"]))
    except ModelError as exc:
        return None, f"config.json refused — {str(exc).removeprefix('model: ')}"
    tried = [_on_preset(name, model, current) for name in list_models()]
    loaded = [t for t in tried if t[0] is not None]
    if not loaded:
        key, message = next(iter(tried[0][2].items()))
        return None, f"config.json refused — {key}: {message}"
    # the closest preset: fewest fields left different, then fewest controls changed
    scn, left, _ = min(loaded, key=lambda t: (len(t[1]), _changed(t[0])))
    if not left:
        return scn, ""
    built, _ = build_inputs(scn)
    return scn, (f"config.json loaded on preset {scn['model']} ({model.params / 1e9:,.1f}B "
                 f"parameters in the config, {built.params / 1e9:,.1f}B as loaded); no control "
                 f"sets {', '.join(left)}: {scn['model']}'s are used.")


def _changed(scn: dict[str, Any]) -> int:
    """How many model controls differ from the values of the scenario's own preset."""
    own = model_values(scn["model"])
    return sum(1 for c in MODEL_CONTROLS if own.get(c.key) != scn[c.key])


def _on_preset(name: str, model: Transformer, current: dict[str, Any]
               ) -> tuple[dict[str, Any] | None, list[str], dict[str, str]]:
    """(the scenario of ``model`` on preset ``name``, the fields where the model it builds
    differs from ``model``, the validation errors when it is not valid)."""
    raw = {**current, "model": name, **{c.key: control_value(c, model) for c in MODEL_CONTROLS}}
    scn, errors = validate_scenario(raw)
    if scn is None:
        return None, [], errors
    return scn, _differences(build_inputs(scn)[0], model), {}
