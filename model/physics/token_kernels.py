"""The MoE layer's token kernels: memory-bound passes over tokens × hidden × top-k, plus launches.

Besides its logits GEMM, a router runs a score function, a top-k and a load-balancing loss over
the [T, E] logits; the dispatch permutes the T local tokens into their T·k routed copies in
expert order, and the combine unpermutes them back, weighting each copy by its routing
probability. None of these does arithmetic to speak of: each kernel reads and writes HBM once
and pays a launch. ``reference/moe_token_kernels.json`` lists them per path — ``fused``
(Transformer Engine's fused router and permutation kernels: Megatron-Core
``moe_router_fusion`` / ``moe_permute_fusion``) or ``unfused`` (Megatron-Core's PyTorch ops,
one kernel each) — and direction, each kernel's bytes as coefficients of three sizes

    M = c_logits·4·T·E + c_hidden·s·T·e + c_routed·s·T·k·e          (one kernel)

(fp32 [T, E] arrays; the tokens once; their routed copies once), counted from the framework
code at the commits the table names. An op's bytes are the sum over its kernels, its launches
their number; :func:`model.physics.roofline.kernel_times` prices the bytes at the HBM roofline
(times the MoE token-kernel efficiency η_t, the one fitted MoE parameter) and each launch at
the system's ``kernel_overhead_s``.

With Megatron-Core's all-to-all dispatcher and more than one local expert, the received
chunks are sorted by local expert after the dispatch and back before the combine
(``sort_chunks_by_idxs``): one more pass over the routed copies each way (``sort_chunks``).
The flex dispatcher (DeepEP, HybridEP) permutes the received tokens instead of the sent ones:
the same bytes, no chunk sort.
"""

from __future__ import annotations

import json

import numpy as np

from model.specs import memo
from model.specs.schema import DATA_DIR

TABLE = DATA_DIR / "reference" / "moe_token_kernels.json"
OPS = ("router", "permute", "unpermute", "sort_chunks")
UNITS = ("logits", "hidden", "routed")
FP32 = 4.0  # bytes of a logit, score or probability (Megatron's router runs in fp32)


@memo.lru("moe token kernel table", 1)
def _table() -> dict:
    return json.loads(TABLE.read_text())


@memo.lru("moe token kernel passes", 16)
def passes(op: str, fused: bool, way: str) -> tuple[float, float, float, float]:
    """(launches, c_logits, c_hidden, c_routed) of ``op``'s kernels in one direction
    (``way``: fwd or bwd) on the ``fused`` or unfused path: the kernel count and the summed
    byte coefficients of the table (module docstring)."""
    kernels = _table()["ops"][op]["fused" if fused else "unfused"][way]
    return (float(len(kernels)),) + tuple(
        float(sum(k.get(unit, 0.0) for k in kernels)) for unit in UNITS)


def pass_bytes(coeffs: tuple[float, float, float], tokens, e, top_k, experts, s: float):
    """HBM bytes of kernels with byte coefficients ``coeffs`` = (c_logits, c_hidden,
    c_routed) on ``tokens`` = T local tokens: c_logits·4·T·E + c_hidden·s·T·e +
    c_routed·s·T·k·e."""
    c_logits, c_hidden, c_routed = coeffs
    t = np.asarray(tokens, dtype=float)
    return t * (c_logits * FP32 * experts + s * e * (c_hidden + c_routed * top_k))


def token_kernels(op: str, fused: bool, tokens, e, top_k, experts, s: float):
    """(bytes_fwd, bytes_bwd, launches_fwd, launches_bwd) of ``op`` (router, permute,
    unpermute, sort_chunks) on ``tokens`` local tokens of hidden ``e``, ``top_k`` routed
    copies each, over ``experts`` experts: :func:`pass_bytes` of its kernels per direction
    and their number."""
    if op not in OPS:
        raise AssertionError(f"unknown token kernel op {op}")
    fwd, bwd = passes(op, fused, "fwd"), passes(op, fused, "bwd")
    return (pass_bytes(fwd[1:], tokens, e, top_k, experts, s),
            pass_bytes(bwd[1:], tokens, e, top_k, experts, s), fwd[0], bwd[0])


__all__ = ["OPS", "pass_bytes", "passes", "token_kernels"]
