"""Tokens per expert under top-k routing, and what a grouped GEMM pays for them: the experts a
step's tokens touch and the row tiles each touched expert's tokens are padded to.

A fused MoE kernel (TensorRT-LLM's CUTLASS grouped GEMM, ``cpp/tensorrt_llm/kernels/
cutlass_kernels/moe_gemm``; SGLang/vLLM's Triton ``fused_moe``; DeepGEMM's M-grouped layout)
runs, per local expert that received tokens, its rows padded to whole tiles of B rows: an
expert with m tokens costs ⌈m/B⌉ row tiles, an expert with none costs nothing and its weights
are not read (the Triton kernel's ``moe_align_block_size`` pads each expert's segment to the
block size and launches blocks only for the padded segments; CUTLASS's grouped problem list
holds only experts with rows).

Balanced top-k routing (uniform over E experts, each token picking k distinct ones): an
expert's count among T tokens is m ~ Binomial(T, p), p = k/E, so

* touched experts: E·P(m > 0) = E·(1 − (1 − p)^T);
* row tiles: E·E[⌈m/B⌉] = E·Σ_{j≥0} P(m > j·B).

The j = 0 term is exact; the others use the normal approximation of the binomial (mean μ = T·p,
σ² = T·p·(1 − p), continuity-corrected) over a window of :data:`WINDOW` terms from μ − 4σ, and,
once σ ≥ B/2 (the wrapped normal is then uniform over a tile within 1 %), the mean padding of
half a tile: E[⌈m/B⌉] = μ/B + (B − 1)/(2B). One token with top-k gives exactly k touched
experts and k row tiles (tests/test_moe_routing.py).
"""

from __future__ import annotations

import numpy as np

Array = np.ndarray
UNIQUE_ABOVE = 1024  # entries beyond which the distinct token counts are evaluated once each
WINDOW = 6  # terms j ≥ 1 summed around μ/B (σ < B/2: ±4σ, tails < 4e-5, within 6 tiles)


def _normal_sf(x: Array) -> Array:
    """P(Z > x) of a standard normal, the logistic-cubic approximation of Bowling et al.
    (J. Industrial Eng. & Management 2009, eq. 11: |error| < 1.4e-4)."""
    return 1.0 / (1.0 + np.exp(np.minimum(x * (0.07056 * x * x + 1.5976), 700.0)))


def touched_share(tokens: Array | float, top_k: float, experts: float) -> Array:
    """P(m > 0): the share of the experts at least one of ``tokens`` tokens picks (each token
    top_k of ``experts``): 1 − (1 − k/E)^T."""
    if top_k >= experts:
        return np.where(np.asarray(tokens, dtype=float) > 0, 1.0, 0.0)
    return -np.expm1(np.log1p(-top_k / experts) * np.asarray(tokens, dtype=float))


def row_tiles_per_expert(tokens: Array | float, top_k: float, experts: float,
                         tile: float) -> Array:
    """E[⌈m/B⌉], m ~ Binomial(T, k/E): the expected row tiles of one expert (module
    docstring), 0 for an untouched expert. Vectorised over ``tokens``, evaluated once per
    distinct T of a large array (a search's candidates share a few token counts)."""
    t = np.asarray(tokens, dtype=float)
    if t.size > UNIQUE_ABOVE:
        distinct, where = np.unique(t, return_inverse=True)
        return _row_tiles(distinct, top_k, experts, tile)[where].reshape(t.shape)
    return _row_tiles(t, top_k, experts, tile)


def _row_tiles(t: Array, top_k: float, experts: float, tile: float) -> Array:
    """:func:`row_tiles_per_expert` on every entry: only the T > B entries go past the j = 0
    term, and only those with σ < B/2 through the window sum."""
    p = min(top_k / experts, 1.0)
    out = touched_share(t, top_k, experts)
    many = t > tile
    if not np.any(many):  # nobody can fill a second tile: the j = 0 term is all
        return out
    tm = t[many]
    mu = tm * p
    sigma = np.sqrt(mu * (1.0 - p))
    value = mu / tile + (tile - 1.0) / (2.0 * tile)  # σ ≥ B/2: the mean padding
    narrow = sigma < 0.5 * tile
    if np.any(narrow):
        tn, mn, sn = tm[narrow], mu[narrow], sigma[narrow]
        lo = np.maximum(np.floor((mn - 4.0 * sn) / tile), 1.0)  # tiles j < lo full: P ≈ 1
        edge = (lo[:, None] + np.arange(WINDOW)) * tile
        z = (edge + 0.5 - mn[:, None]) / np.maximum(sn[:, None], 1e-12)
        tail = np.where(edge < tn[:, None], _normal_sf(z), 0.0).sum(axis=1)
        value[narrow] = out[many][narrow] + (lo - 1.0) + tail
    out = np.array(out, dtype=float)
    out[many] = value
    return out


def padded_wave_efficiency(rows: Array, row_tiles: Array, cols: Array, tile: float,
                           units: float) -> Array:
    """Busy fraction of a grouped GEMM of ``rows`` routed rows in ``row_tiles`` row tiles (each
    touched expert's rows padded to whole tiles) over ``cols`` output columns, its
    row_tiles·⌈cols/B⌉ tiles run in waves of ``units`` SMs: rows/(row_tiles·B) ·
    tiles/(⌈tiles/units⌉·units), at most 1 each (``rows`` > 0: callers floor them)."""
    rows = np.asarray(rows, dtype=float)
    rt = np.maximum(np.asarray(row_tiles, dtype=float), 1e-12)
    fill = np.minimum(rows / (rt * tile), 1.0)
    if units <= 0:
        return fill
    tiles = rt * np.ceil(np.asarray(cols, dtype=float) / tile)
    waves = np.maximum(np.ceil(tiles / units - 1e-9), 1.0) * units
    return fill * np.minimum(tiles / waves, 1.0)


__all__ = ["WINDOW", "padded_wave_efficiency", "row_tiles_per_expert",
           "touched_share"]
