"""Explanations in words when a view has nothing to show, shared by the pages."""

from __future__ import annotations

from typing import Any

from dashboard.controls.scenario import build_inputs
from model.engine.rules import why_no_candidates
from model.physics.strategies import build_strategy


def no_configuration_text(scn: dict[str, Any], gpus: int, strategy: str) -> str:
    """Why no parallel configuration of ``strategy`` exists on ``gpus`` GPUs (the rule the
    closest factorisation breaks, ``model.engine.rules.why_no_candidates``) and what to do."""
    model, system = build_inputs(scn)
    mode = "paper" if scn["mode"] == "paper" else None
    reason = why_no_candidates(model, build_strategy(strategy, model, mode), gpus,
                               scn["global_batch"], system.nvlink_domain_size, mode)
    return (f"{reason[:1].upper()}{reason[1:]}. Choose a GPU count or a global batch with "
            "matching factors (e.g. a power-of-two GPU count, or a global batch that is a "
            "multiple of the GPU count's odd factors).")
