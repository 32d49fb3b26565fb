"""Published runs that nothing was fitted to, checked against the targets of the accuracy work.

Llama 3 405B pre-training on 8,192 and 16,384 H100s (arXiv 2407.21783, Table 4: TP 8, PP 16,
DP 64 / 128, 2,048 sequences of 8,192 tokens, BF16, 430 / 400 TFLOP/s per GPU): the default
search, given only the published TP and PP, lands within 12 % (bench/llama3_405b.py prints it).
The paper says 8K pre-training ran without activation checkpointing: the search must keep
selective recompute (not fall back to full) and use interleaving, as the published schedule does.
It still recomputes one or two whole layers per stage (of 8) to fit: the memory model is that
close to, and still slightly above, what the run needed.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

from llama3_405b import PUBLISHED, predict  # noqa: E402


@pytest.mark.parametrize(("gpus", "published_tflops"), PUBLISHED)
def test_llama3_405b_default_search_is_within_12_percent(gpus, published_tflops):
    best = predict(gpus)
    assert int(best["tp1"]) == 8 and int(best["pp"]) == 16 and int(best["dp"]) == gpus // 128
    assert abs(float(best["tflops_per_gpu"]) / published_tflops - 1) <= 0.12
    assert best["recompute"] == "selective" and best["precision"] == "bf16"
    assert int(best["interleave"]) > 1
