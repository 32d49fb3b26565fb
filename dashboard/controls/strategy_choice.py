"""Strategies a scenario's model can run, chosen when a preset or a link names the model: the
Design page defaults to 2D SUMMA (the paper's strategy), which has no MoE, MLA or MTP op table,
so every MoE preset (DeepSeek-V3, Mixtral, Qwen3, …) would open on a refusal."""

from __future__ import annotations

from typing import Any

from model import list_models, load_model
from model.physics.strategies import PRODUCTION, STRATEGIES, supports

STRATEGY_KEYS = ("strategy", "design_strategy")


def with_supported_strategies(scn: dict[str, Any], keep: tuple[str, ...] = ()) -> dict[str, Any]:
    """The scenario with strategies its model can run: a design strategy the model's preset
    cannot model (2D SUMMA has no MoE, MLA or MTP op table) becomes the first production one
    it can (1D), a single run strategy becomes "all". Keys in ``keep`` (those a link or a
    file gives) are left as they are: the page then says why it refuses them."""
    name = scn.get("model")
    if not isinstance(name, str) or name not in list_models():
        return scn
    model = load_model(name)
    out = dict(scn)
    if "design_strategy" not in keep and out.get("design_strategy") in STRATEGIES \
            and not supports(out["design_strategy"], model):
        out["design_strategy"] = next(n for n in PRODUCTION if supports(n, model))
    if "strategy" not in keep and out.get("strategy") in STRATEGIES \
            and not supports(out["strategy"], model):
        out["strategy"] = "all"
    return out
