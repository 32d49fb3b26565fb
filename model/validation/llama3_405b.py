"""Llama 3 405B on 8,192 and 16,384 H100s: the default search given only the published layout
(:func:`predict`; tests/test_held_out.py checks the 12 % target, ``python bench/llama3_405b.py
[--stack NAME]`` prints the figures).

Published (Grattafiori et al. 2024, 'The Llama 3 Herd of Models', arXiv 2407.21783, Table 4):
TP 8, CP 1, PP 16, DP 64 / 128, global batch 16M tokens of 8,192-token sequences (2,048
samples), BF16, 430 / 400 TFLOP/s per GPU. These runs were never used to fit anything: the
prediction is the default search (every interleaving, the fewest recomputed layers that fit,
the newest software stack) with tp1 and pp pinned; the search picks the microbatch, the
interleaving and the recompute itself.
"""

from __future__ import annotations

from model.engine.api import search_request
from model.engine.request import Request
from model.specs.hardware import load_system
from model.specs.models import load_model
from model.validation.case import FITTING_DEPTH, fastest_fitting

PUBLISHED = ((8192, 430.0), (16384, 400.0))  # (H100 GPUs, TFLOP/s per GPU), Table 4
GLOBAL_BATCH = 2048  # 16M tokens / 8,192 tokens per sample


def predict(gpus: int, stack: str | None = None):
    """The best row of the default search with the published TP and PP pinned (BF16)."""
    model, system = load_model("llama3-405b"), load_system("h100")
    return search_request(Request.build(
        model, system, global_batch=GLOBAL_BATCH, gpus=gpus, pins={"tp1": 8, "pp": 16},
        execution={"precision": "bf16"}, stack=stack,
        top_k=FITTING_DEPTH)).top.pipe(fastest_fitting)
