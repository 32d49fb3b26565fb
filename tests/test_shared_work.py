"""Work shared to save time gives what doing it again gives: collectives priced once per op
list (``model.physics.block._comm_key``), ops equal but for their name counted and priced once
(``Strategy.twins``), the remembered text columns of result frames and remembered System
copies."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from model import ModelError, load_model, load_system, search
from model.engine.evaluate import ShapeCounts, evaluate_ops, shards_of
from model.engine.frontier import CACHE
from model.engine.rules import Problem
from model.engine.space import build_space
from model.physics.block import evaluate_op, op_counts
from model.physics.context import Ctx
from model.physics.strategies import build_strategy

# (model, system, strategy, mode, execution, GPUs, global batch): dense and MoE, the paper's
# and the default model, SUMMA panels, context parallelism, FP8 and TP overlap
CASES = [
    ("gpt3-1t", "paper-h200", "1d", "paper", None, 512, 4096),
    ("vit-era5", "paper-h200", "summa", "paper", None, 256, 4096),
    ("gpt3-1t", "paper-h200", "context", "paper", None, 512, 4096),
    ("gpt3-175b", "h100", "1d", None, None, 256, 1536),
    ("gpt3-175b", "h100", "summa", None, None, 256, 1536),
    ("llama3-70b", "b200", "context", None, {"precision": "fp8", "tp_overlap": True}, 128, 512),
    ("deepseek-v3", "gb200-nvl72", "1d", None, None, 512, 4096),
    ("mixtral-8x7b", "h100", "context", None, None, 64, 512),
]

PHASE_FIELDS = ("t", "t_comp", "t_mem_exposed", "t_comm", "comm_bytes")


def _priced_alone(ops, sh, ctx):
    """Each op counted and priced on its own (its own collective memo)."""
    return [evaluate_op(spec, sh, ctx, op_counts(spec, sh, ctx)) for spec in ops]


def _same(a, b) -> None:
    assert a.spec == b.spec
    for name in vars(a.counts):
        np.testing.assert_array_equal(getattr(a.counts, name), getattr(b.counts, name))
    for way in ("fwd", "bwd"):
        for name in PHASE_FIELDS:
            np.testing.assert_array_equal(getattr(getattr(a, way), name),
                                          getattr(getattr(b, way), name))


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[2]}-{c[3] or 'default'}")
@pytest.mark.parametrize("bounded", [False, True], ids=["exact", "bound"])
def test_ops_priced_together_match_ops_priced_alone(case, bounded):
    name, system_name, strategy, mode, execution, gpus, batch = case
    model, system = load_model(name), load_system(system_name)
    ctx = Ctx.make(model, system, mode, execution)
    ctx = ctx.bounded() if bounded else ctx
    strat = build_strategy(strategy, model, mode, ctx.execution)
    space = build_space(Problem(model, strat, gpus, batch, ctx.execution.interleave,
                                ctx.mode.equal_pipeline_stages, nvs=system.nvlink_domain_size,
                                exact_domain_fill=ctx.mode.exact_domain_fill))
    cols = {k: v[:400] for k, v in space.cols.items()}
    sh = shards_of(cols)
    counts = ShapeCounts.of(strat, cols, ctx)
    for which in ("block", "pre", "post"):
        ops = getattr(strat, which)
        shared = evaluate_ops(ops, sh, ctx, counts.take(which, counts.inverse),
                              strat.twins[which])
        for got, want in zip(shared, _priced_alone(ops, sh, ctx), strict=True):
            _same(got, want)


def test_twins_are_equal_but_for_their_name():
    strat = build_strategy("1d", load_model("gpt3-1t"), "paper")
    twins = strat.twins["block"]
    shared = [i for i, first in enumerate(twins) if first != i]
    assert shared  # the attention's and the MLP's dropouts, biases and norms
    for i, first in enumerate(twins):
        a, b = strat.block[i], strat.block[first]
        assert first <= i and (a.name == b.name) == (first == i)
        assert {k: v for k, v in vars(a).items() if k != "name"} == {
            k: v for k, v in vars(b).items() if k != "name"}


def test_result_frame_text_columns_are_the_frames_own():
    model, system = load_model("gpt3-1t"), load_system("paper-h200")
    first = search(model, system, 4096, 4096, "1d", mode="paper", nvs=8).top
    assert first["strategy"].dtype == pd.Series(["1d"]).dtype  # what pandas infers for text
    first.loc[0, "strategy"] = "changed"
    first.loc[1, "precision"] = "changed"
    CACHE.clear()
    again = search(model, system, 4096, 4096, "1d", mode="paper", nvs=8).top
    assert (again["strategy"] == "1d").all() and (again["precision"] == "bf16").all()


def test_remembered_system_copies_still_check_their_values():
    h200 = load_system("h200")
    assert h200.with_overrides(nvlink_domain_size=4) is h200.with_overrides(nvlink_domain_size=4)
    assert h200.with_overrides(nvlink_domain_size=1).nvlink_domain_size == 1
    with pytest.raises(ModelError, match="nvlink_domain_size"):
        h200.with_overrides(nvlink_domain_size=True)  # equal to 1, but not a number
    with pytest.raises(ModelError, match="nvlink_domain_size"):
        h200.with_overrides(nvlink_domain_size=[4])  # unhashable: checked all the same
