"""Per-op counts for one microbatch on one GPU: FLOPs, HBM bytes, activation and weight bytes.

Each function takes *local* (already sharded) shapes as numpy arrays (or scalars) and returns an
:class:`OpCounts`. Which dimension is sharded by which parallel axis, and which collective an op
needs, is decided by the strategy tables in :mod:`model.physics.strategies`, not here.

Symbols (docs/model.md §1, §6): b microbatch, r = rows = b·(local sequence), k / n local input /
output features, s bytes per element, s_m bytes per dropout-mask element. A multiply and an add
each count as one FLOP. FLOPs are split into matrix (tensor-core) and vector parts so that time is
F_mat / P_mat + F_vec / P_vec; the paper multiplies the vector FLOPs inside flash attention by
ρ = P_mat / P_vec and runs them at P_mat, which is the same time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

Array = np.ndarray


@dataclass
class OpCounts:
    """Counts of one op, forward and backward, per GPU per microbatch (FLOP and bytes)."""

    flop_mat_fwd: Array | float = 0.0
    flop_vec_fwd: Array | float = 0.0
    flop_mat_bwd: Array | float = 0.0  # includes recomputation (flash attention)
    flop_vec_bwd: Array | float = 0.0
    flop_recompute: Array | float = 0.0  # the part of the backward FLOPs that recomputes
    bytes_fwd: Array | float = 0.0  # HBM traffic
    bytes_bwd: Array | float = 0.0
    act_bytes: Array | float = 0.0  # kept for the backward pass
    weight_bytes: Array | float = 0.0  # weights held (gradients have the same size)
    wave_fwd: Array | float = 1.0  # GEMM wave-quantisation efficiency of the forward matmuls
    wave_bwd: Array | float = 1.0  # … and of the backward ones
    # HBM traffic of separate memory-bound kernels that belong to the op but cannot overlap its
    # matmuls (FP8 quantisation of the op's inputs): their time adds to the op's roofline time
    extra_bytes_fwd: Array | float = 0.0
    extra_bytes_bwd: Array | float = 0.0
    # exponentials (softmax) issued to the special-function units, not the tensor cores
    exp_fwd: Array | float = 0.0
    exp_bwd: Array | float = 0.0
    # FLOPs of the busiest GPU's experts beyond the mean load (imbalance, capacity padding):
    # hardware work, not model FLOPs
    flop_padding: Array | float = 0.0
    # kernels the op launches in each direction, each paying the system's fixed kernel_overhead_s
    # (one for a plain op; a grouped GEMM launches one per local expert:
    # model.physics.moe.expert_launches)
    launches_fwd: Array | float = 1.0
    launches_bwd: Array | float = 1.0


def wave_efficiency(rows: Array, cols: Array, tile: float, units: float) -> Array:
    """Fraction of the GPU a GEMM output of rows × cols keeps busy: its tile×tile output tiles
    run in waves of ``units`` (SMs); the last wave is partly empty:
    t = ⌈rows/tile⌉·⌈cols/tile⌉, efficiency = t / (⌈t/units⌉·units). 1 when units = 0."""
    if units <= 0:
        return 1.0
    tiles = np.ceil(np.asarray(rows, dtype=float) / tile) * np.ceil(
        np.asarray(cols, dtype=float) / tile)
    return np.where(tiles > 0, tiles / np.maximum(np.ceil(tiles / units) * units, 1.0), 1.0)


def quantisation(counts: OpCounts, b: Array, rows: Array, k: Array, n: Array,
                 bytes_per_element: float) -> OpCounts:
    """Add the quantisation kernels of Y[b·rows, n] = X[b·rows, k]·W[k, n] under an FP8/FP4
    recipe to ``counts``: the forward quantises X (b·rows·k elements), the backward dY
    (b·rows·n), each ``bytes_per_element`` of HBM traffic (model.specs.precision: 6 B for FP8
    current scaling). Weights are cast once per iteration (Transformer Engine caches them across
    microbatches), so only activations and activation gradients pay it per microbatch."""
    counts.extra_bytes_fwd = counts.extra_bytes_fwd + bytes_per_element * b * rows * k
    counts.extra_bytes_bwd = counts.extra_bytes_bwd + bytes_per_element * b * rows * n
    return counts


def linear(b: Array, rows: Array, k: Array, n: Array, s: float) -> OpCounts:
    """Y[b·rows, n] = X[b·rows, k] · W[k, n], no bias (docs/model.md §6, Linear).

    fwd: F = b·r·n·(2k − 1), M = s(b·r·k + b·r·n + k·n);
    bwd: F = b·r·k·(2n − 1) [dX] + k·n·(2·b·r − 1) [dW], M = s(2k·n + 2·b·r·k + 2·b·r·n);
    act = s·b·r·k (X), W = s·k·n.
    """
    br = b * rows
    return OpCounts(
        flop_mat_fwd=br * n * (2 * k - 1),
        flop_mat_bwd=br * k * (2 * n - 1) + k * n * (2 * br - 1),
        bytes_fwd=s * (br * k + br * n + k * n),
        bytes_bwd=s * (2 * k * n + 2 * br * k + 2 * br * n),
        act_bytes=s * br * k,
        weight_bytes=s * k * n,
    )


def linear_summa(
    b: Array, rows: Array, k_full: float, k_rows: Array, k_cols: Array, n: Array, panels: Array,
    s: float, two_k: bool = False,
) -> OpCounts:
    """SUMMA matmul on a tp2 × tp1 grid (docs/model.md §6, SUMMA linear), nb = ``panels``.

    X is [b·r, k] with r = l // tp2 rows and k split over tp1 (k_cols = k // tp1); W is [k // tp2,
    n] with n = F // tp1. Panels of X are broadcast along tp1 and panels of W along tp2.
    fwd: F = b·r·n·(2k − 1) — each output sums k products, panel by panel: nb partial sums of
    k/nb products (2k/nb − 1 FLOPs) and nb − 1 additions, as one GEMM of :func:`linear` — or
    2·b·r·n·k with ``two_k`` (the paper's code); M = s(b·r·k + k·n + nb·b·r·n);
    bwd: F = b·r·k·(2n − 1) + k·n·(2·b·r − 1), M = s(2n·k + 2·nb·b·r·n + 2·b·r·k);
    act = s·b·r·k_cols, W = s·k_rows·n. With tp1 = tp2 = nb = 1 every count equals
    :func:`linear`'s for the same GEMM.
    """
    br = b * rows
    return OpCounts(
        flop_mat_fwd=br * n * (2 * k_full - (0 if two_k else 1)),
        flop_mat_bwd=br * k_full * (2 * n - 1) + k_full * n * (2 * br - 1),
        bytes_fwd=s * (br * k_full + k_full * n + panels * br * n),
        bytes_bwd=s * (2 * n * k_full + 2 * panels * br * n + 2 * br * k_full),
        act_bytes=s * br * k_cols,
        weight_bytes=s * k_rows * n,
    )


def bias(b: Array, rows: Array, cols: Array, s: float) -> OpCounts:
    """Y = X + β on N = b·r·c elements: F = N each way, M = s(N + c), W = s·c, no activation."""
    size = b * rows * cols
    return OpCounts(
        flop_vec_fwd=size,
        flop_vec_bwd=size,
        bytes_fwd=s * (size + cols),
        bytes_bwd=s * (size + cols),
        weight_bytes=s * cols,
    )


def gelu(elements: Array, s: float) -> OpCounts:
    """GELU on n elements (tanh): F_fwd = 8n, F_bwd = 13n, M_fwd = 2sn, M_bwd = 3sn, act = sn."""
    return OpCounts(
        flop_vec_fwd=8 * elements,
        flop_vec_bwd=13 * elements,
        bytes_fwd=2 * s * elements,
        bytes_bwd=3 * s * elements,
        act_bytes=s * elements,
    )


def swiglu(elements: Array, s: float) -> OpCounts:
    """SwiGLU gate, Y = SiLU(G) ⊙ U with n output elements (G, U each n).

    SiLU(x) = x·σ(x) ≈ 5 FLOP, times U 1 FLOP: F_fwd = 6n; backward of both branches ≈ 12n.
    M_fwd = s(2n read + n write) = 3sn; act = 2sn (G and U); M_bwd = s(2n + n + 2n) = 5sn.
    """
    return OpCounts(
        flop_vec_fwd=6 * elements,
        flop_vec_bwd=12 * elements,
        bytes_fwd=3 * s * elements,
        bytes_bwd=5 * s * elements,
        act_bytes=2 * s * elements,
    )


def dropout(elements: Array, s: float, s_mask: float) -> OpCounts:
    """Dropout on n elements: F = n each way, M = (2s + s_m)·n each way, act = s_m·n (the mask)."""
    return OpCounts(
        flop_vec_fwd=elements,
        flop_vec_bwd=elements,
        bytes_fwd=(2 * s + s_mask) * elements,
        bytes_bwd=(2 * s + s_mask) * elements,
        act_bytes=s_mask * elements,
    )


def layer_norm(b: Array, rows: Array, cols: Array, s: float) -> OpCounts:
    """LayerNorm over c features of b·r rows, N = b·r·c (docs/model.md §6).

    fwd: F = 9N, M = s(2N + 2·b·r + 2c); bwd: F = 8N + 4·b·r·(c − 1), M = s(5N + 2c);
    act = sN, W = 2sc (γ and β).
    """
    br = b * rows
    size = br * cols
    return OpCounts(
        flop_vec_fwd=9 * size,
        flop_vec_bwd=8 * size + 4 * br * (cols - 1),
        bytes_fwd=s * (2 * size + 2 * br + 2 * cols),
        bytes_bwd=s * (5 * size + 2 * cols),
        act_bytes=s * size,
        weight_bytes=2 * s * cols,
    )


def flash_attention(
    b: Array, heads: Array, kv_heads: Array, rows: Array, seq: float, q: float, s: float,
    dropout_on: bool = True, keep_scores: bool = False, fused: bool = True,
    keep_output: bool = False, v: float | None = None,
) -> OpCounts:
    """Fused (flash) attention of r local query rows over a sequence of L (docs/model.md §6).

    With H = b·heads, S = QKᵀ is [r, L] per head; q is the query/key head dimension and v the
    value/output one (v = q unless given: MLA's are 192 and 128, DeepSeek-V3):
    fwd matrix: H·r·L·(2q − 1) [QKᵀ] + H·r·v·(2L − 1) [PV];
    fwd vector: 2·H·r·L + H·r·(L − 1) [softmax] + H·r·L [dropout];
    bwd matrix: H·r·q(2L − 1) [dQ] + H·L·(q + v)(2r − 1) [dK, dV] + H·r·L(2v − 1) [dP], plus
    the recomputed QKᵀ H·r·L(2q − 1); bwd vector: 3·H·r·L + H·r(L − 1) + H·r·L, plus the
    recomputed softmax/dropout.
    Bytes with K, V of ``kv_heads`` (GQA) over the full L, w = q + v:
    M_fwd = s(H·r·w + b·kv·L·w + H·r); M_bwd = s(b·kv·L·w + H·r·w) + A_io with
    A_io = s(H·r·w + b·kv·r·w + 2·H·r) (Q, O, K, V, statistics); kept for the backward:
    act = s(H·r·q + b·kv·r·w) + 4·H·r (Q, K, V and the fp32 log-sum-exp; O is the
    projection's input, counted there; the paper counts it here too: ``keep_output``).
    r = L gives the unsharded FusedLA.

    ``keep_scores`` (no recompute, unfused attention as in Megatron before flash attention): the
    softmax output (s), dropout mask (1 B) and dropout output (s) per score are kept — the
    5·a·s²·b bytes of Korthikanti et al. 2022 — written in the forward and read in the backward,
    and nothing is recomputed (no log-sum-exp is kept then). Each score takes one exponential in
    the forward (``exp_fwd``) and one more where the backward recomputes the softmax.

    ``fused=False`` (no flash attention): every pass over the H·r·L scores goes through HBM — in
    the forward write S (s), softmax read S / write P (2s), dropout read P / write P' and its
    mask (2s + 1), PV read P' (s); the backward about twice that, plus the forward again when the
    scores are recomputed.
    """
    v = q if v is None else v
    w = q + v
    hh = b * heads
    drop = 1.0 if dropout_on else 0.0
    qk = hh * rows * seq * (2 * q - 1)
    pv = hh * rows * v * (2 * seq - 1)
    grads = hh * rows * q * (2 * seq - 1) + hh * seq * w * (2 * rows - 1) + (
        hh * rows * seq * (2 * v - 1))
    softmax_fwd = 2 * hh * rows * seq + hh * rows * (seq - 1) + drop * hh * rows * seq
    softmax_bwd = 3 * hh * rows * seq + hh * rows * (seq - 1) + drop * hh * rows * seq
    # read again by the backward: Q, O, K, V and the fp32 log-sum-exp per row and head
    act = s * (hh * rows * w + b * kv_heads * rows * w + 2 * hh * rows)
    # kept for it: Q, K, V — O is the output projection's input, kept there once (Korthikanti
    # et al. 2022, §4.1) — and, in a fused kernel, the log-sum-exp (FlashAttention-2, §3.1)
    kept = s * (hh * rows * q + (hh * rows * v if keep_output else 0.0)
                + b * kv_heads * rows * w) + (4.0 * hh * rows if fused and not keep_scores
                                              else 0.0)
    score_pass = 0.0 if fused else (4 * s + drop * (2 * s + 1.0)) * hh * rows * seq
    io_fwd = s * (hh * rows * w + b * kv_heads * seq * w + hh * rows)
    io_bwd = s * (b * kv_heads * seq * w + hh * rows * w) + act
    exps = hh * rows * seq  # one exponential per score, again where the backward recomputes
    if keep_scores:
        scores = (s + drop * (1.0 + s)) * hh * rows * seq  # bytes of the kept score tensors
        return OpCounts(
            flop_mat_fwd=qk + pv, flop_vec_fwd=softmax_fwd, flop_mat_bwd=grads,
            flop_vec_bwd=softmax_bwd, bytes_fwd=io_fwd + scores + score_pass,
            bytes_bwd=io_bwd + scores + 2 * score_pass, act_bytes=kept + scores, exp_fwd=exps,
        )
    return OpCounts(
        flop_mat_fwd=qk + pv,
        flop_vec_fwd=softmax_fwd,
        flop_mat_bwd=grads + qk,
        flop_vec_bwd=softmax_bwd + softmax_fwd,
        flop_recompute=qk + softmax_fwd,
        bytes_fwd=io_fwd + score_pass,
        bytes_bwd=io_bwd + 3 * score_pass,
        act_bytes=kept,
        exp_fwd=exps,
        exp_bwd=exps,
    )


def alibi_bias(c: OpCounts, scores: Array | float) -> OpCounts:
    """ALiBi (Press et al. 2022, arXiv 2108.12409): a per-head linear bias added to each of the
    H·r·L ``scores`` before the softmax, inside the fused kernel (FlashAttention-2 ≥ 2.4,
    the Triton kernel's bias input): one vector FLOP per score forward, and again in the
    backward's recomputed scores. No parameters, no HBM traffic beyond the per-head slopes."""
    c.flop_vec_fwd = c.flop_vec_fwd + scores
    c.flop_vec_bwd = c.flop_vec_bwd + scores
    return c


def skip_masked_half(c: OpCounts) -> OpCounts:
    """Causal flash attention skips the key blocks above the diagonal: about half the score
    FLOPs, forward and backward (the diagonal blocks are ignored); memory traffic is unchanged."""
    return OpCounts(flop_mat_fwd=0.5 * c.flop_mat_fwd, flop_vec_fwd=0.5 * c.flop_vec_fwd,
                    flop_mat_bwd=0.5 * c.flop_mat_bwd, flop_vec_bwd=0.5 * c.flop_vec_bwd,
                    flop_recompute=0.5 * c.flop_recompute, bytes_fwd=c.bytes_fwd,
                    bytes_bwd=c.bytes_bwd, act_bytes=c.act_bytes, weight_bytes=c.weight_bytes,
                    exp_fwd=0.5 * c.exp_fwd, exp_bwd=0.5 * c.exp_bwd)


def score_share(c: OpCounts, share: Array | float) -> OpCounts:
    """Attention whose queries see only ``share`` of the keys of causal attention (sliding or
    chunked windows: the flash kernel skips the key blocks outside the window): its score
    FLOPs and exponentials scale by the share; memory traffic is unchanged."""
    for name in ("flop_mat_fwd", "flop_vec_fwd", "flop_mat_bwd", "flop_vec_bwd",
                 "flop_recompute", "exp_fwd", "exp_bwd"):
        setattr(c, name, getattr(c, name) * share)
    return c


def embedding(b: Array, rows: Array, cols: Array, vocab_local: Array, s: float) -> OpCounts:
    """Token-embedding lookup of b·r tokens into c features, table [V_local, c] (vocab-parallel).

    No FLOPs to speak of (a gather); M_fwd = s·2·b·r·c (read rows, write output); bwd scatter-adds
    the output gradient: M_bwd = s·2·b·r·c; W = s·V_local·c. Token ids are not counted.
    """
    size = b * rows * cols
    return OpCounts(
        flop_vec_bwd=size,
        bytes_fwd=2 * s * size,
        bytes_bwd=2 * s * size,
        weight_bytes=s * vocab_local * cols,
    )


def learned_positions(c: OpCounts, b: Array, rows: Array, cols: Array, seq: float,
                      s: float) -> OpCounts:
    """Learned position embeddings (GPT-2, MPT) added to a token embedding of b·r rows × c:
    the table [l, c] is a weight (s·l·c); forward one add, reading both and writing the sum,
    3s·b·r·c; backward the table's gradient summed over the batch, reading the output gradient
    and writing the table's, s·(b·r·c + l·c)."""
    size = b * rows * cols
    c.weight_bytes = c.weight_bytes + s * seq * cols
    c.flop_vec_fwd = c.flop_vec_fwd + size
    c.flop_vec_bwd = c.flop_vec_bwd + size
    c.bytes_fwd = c.bytes_fwd + 3 * s * size
    c.bytes_bwd = c.bytes_bwd + s * (size + seq * cols)
    return c


def cross_entropy(b: Array, rows: Array, vocab_local: Array, s: float) -> OpCounts:
    """Softmax cross-entropy over local logits [b·r, V_local].

    fwd: max, subtract, exp, sum, log ≈ 5 FLOP per logit; bwd: softmax − one-hot ≈ 3 FLOP per logit.
    M_fwd = 2s per logit (read, write probabilities), M_bwd = 2s per logit; act = s per logit.
    """
    size = b * rows * vocab_local
    return OpCounts(
        flop_vec_fwd=5 * size,
        flop_vec_bwd=3 * size,
        bytes_fwd=2 * s * size,
        bytes_bwd=2 * s * size,
        act_bytes=s * size,
    )
