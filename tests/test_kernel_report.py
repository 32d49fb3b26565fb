"""The per-op kernel time and the efficiencies it implies (model/engine/kernel_report.py):
closed forms on single ops priced without launch overhead, the columns of an evaluation's
ops frame, and ``tperf evaluate --explain``."""

from __future__ import annotations

import json

import numpy as np
import pytest

from model import evaluate, load_model, load_system
from model.cli import main
from model.engine.evaluate import shards_of
from model.engine.kernel_report import KERNEL_COLUMNS
from model.engine.report import op_table
from model.physics import gemm, ops
from model.physics.block import evaluate_op
from model.physics.context import Ctx
from model.physics.strategies import build_strategy
from model.specs.execution import resolve_execution

MODEL = "llama3-8b"


def _one_op(name: str, **execution: object):
    """(result, its one-row ops frame, ctx) of block op ``name`` of llama3-8b on an H100 without
    launch overhead, tp 1, microbatch 1."""
    model = load_model(MODEL)
    system = load_system("h100").with_overrides(kernel_overhead_s=0.0)
    ex = resolve_execution(execution or None)
    ctx = Ctx.make(model, system, None, ex)
    [spec] = [s for s in build_strategy("1d", model, None, ex).block if s.name == name]
    one = np.array([1])
    sh = shards_of({"microbatch": one, "tp1": one, "tp2": one, "nb": one})
    r = evaluate_op(spec, sh, ctx)
    return r, op_table([("block", r)], 1, 1, sh, ctx).iloc[0], ctx


def test_a_compute_bound_matmul_implies_its_efficiency_times_its_shape():
    r, row, ctx = _one_op("mlp/fc1")
    assert row["bound"] == "compute"
    for way in ("fwd", "bwd"):
        wave = float(np.ravel(getattr(r.counts, f"wave_{way}"))[0])
        assert wave < 1.0  # the shape term is in play
        assert row[f"implied_flop_efficiency_{way}"] == pytest.approx(
            ctx.linear_efficiency * wave, rel=1e-12)
        assert row[f"kernel_time_{way}_s"] == pytest.approx(row[f"t_{way}_s"], rel=1e-12)
    assert row["matrix_peak_tflops"] == pytest.approx(989.4)
    # the forward GEMM Y [b·l, n] = [8192, 28672] with reduction k = 4096: waves × depth
    system = ctx.system
    shape = (ops.wave_efficiency(8192.0, 28672.0, system.gemm_tile, system.sm_count)
             * gemm.depth_efficiency(4096.0, gemm.depth_overhead("matrix_tflops_fp16")))
    assert row["implied_flop_efficiency_fwd"] == pytest.approx(
        system.flop_efficiency * float(shape), rel=1e-12)


def test_a_memory_bound_op_implies_the_achievable_bandwidth():
    _, row, ctx = _one_op("mlp/act")
    assert row["bound"] == "memory"
    for way in ("fwd", "bwd"):
        assert row[f"implied_hbm_efficiency_{way}"] == pytest.approx(
            ctx.system.hbm_efficiency, rel=1e-12)
        assert 0.0 < row[f"implied_flop_efficiency_{way}"] < 0.1


def test_a_benchmarked_attention_implies_its_kernels_rate():
    _, row, ctx = _one_op("attn/flash", attention_kernel="fa2")
    assert ctx.attention_passes is not None and row["bound"] == "compute"
    for i, way in enumerate(("fwd", "bwd")):
        assert row[f"implied_flop_efficiency_{way}"] == pytest.approx(
            ctx.attention_passes[i], rel=1e-12)


def test_fp8_matmuls_are_measured_against_the_fp8_peak():
    _, matmul, ctx = _one_op("mlp/fc1", precision="fp8")
    _, attention, _ = _one_op("attn/flash", precision="fp8")
    assert matmul["matrix_peak_tflops"] == pytest.approx(ctx.system.matrix_tflops_fp8)
    assert attention["matrix_peak_tflops"] == pytest.approx(ctx.system.matrix_tflops_fp16)
    assert ctx.system.matrix_tflops_fp8 > 1.5 * ctx.system.matrix_tflops_fp16


def test_an_evaluations_ops_carry_the_kernel_columns():
    ev = evaluate(load_model(MODEL), load_system("h100"), 8, 8, "1d", tp1=2, pp=1, dp=4,
                  microbatch=1)
    ops = ev.ops
    assert set(KERNEL_COLUMNS) <= set(ops.columns)
    busy = ops["kernel_time_fwd_s"] + ops["kernel_time_bwd_s"]
    np.testing.assert_allclose(busy, ops["t_compute_s"] + ops["t_memory_exposed_s"], rtol=1e-12)
    for col in KERNEL_COLUMNS[2:6]:
        assert ((ops[col] >= 0) & (ops[col] <= 1)).all(), col


ARGS = ["evaluate", "--model", MODEL, "--system", "h100", "--gpus", "8", "--global-batch", "8",
        "--strategy", "1d", "--tp", "1", "--pp", "1", "--dp", "8", "--microbatch", "1"]


def test_evaluate_explain_prints_the_kernel_table(capsys):
    assert main(ARGS, prog="tperf") == 0
    plain = capsys.readouterr().out
    assert main([*ARGS, "--explain"], prog="tperf") == 0
    explained = capsys.readouterr().out
    assert "fwd FLOP eff" not in plain and "per op kernel" not in plain
    assert explained.startswith(plain)  # the rest as it was, then the kernel table
    rest = explained[len(plain):]
    assert rest.lstrip("\n").startswith("per op kernel")
    lines = rest.splitlines()
    header = next(line for line in lines if line.lstrip().startswith("where"))
    assert all(label in header for label in ("fwd kernel ms", "fwd FLOP eff", "bwd HBM eff",
                                             "matrix peak TFLOP/s"))
    fc1 = next(line for line in lines if " mlp/fc1 " in line)
    assert fc1.count("%") == 4


def test_evaluate_json_ops_records_carry_the_kernel_columns(capsys):
    assert main([*ARGS, "--json", "--explain"], prog="tperf") == 0
    ops = json.loads(capsys.readouterr().out)["ops"]
    assert all(set(KERNEL_COLUMNS) <= set(op) for op in ops)
    fc1 = next(op for op in ops if op["op"] == "mlp/fc1")
    assert 0.3 < fc1["implied_flop_efficiency_fwd"] < 1.0
