"""The engine's scheduler under a closed-loop load, in closed form (docs/serving.md, "Scheduler").

One aggregated instance, ``users`` closed-loop clients (each sends its next request the moment
the last one ends, no think time; all start together, as benchmark clients do), requests of I
prompt and O output tokens, continuous batching with chunked prefill as vLLM V1, SGLang and
TensorRT-LLM schedule it: every step first takes the running decodes (K + 1 tokens each), then
fills what is left of the token budget N with prompt chunks, first come first served, up to
``max_batch`` sequences; a prompt's first token comes out of the step of its last chunk. A step
of D decodes and P prompt tokens takes τ_d(D) + P·c_p (c_p: GPU time of one prompt token).

Prompts arrive in clumps: the users whose previous requests ended in the same step. With fixed
lengths the first wave (all users at once) sets the pattern every later cycle repeats:

* wave (users·I ≤ N): all prompts share one step with no decode; TTFT = τ_d(0) + users·I·c_p,
  TPOT = τ_d(users)/a (the decodes never meet a prompt);
* clumps (users·I > N): a clump is what one step's budget K = N − (K_mtp + 1)·D holds,
  g = ⌊K/I⌋ prompts (1 when I > K, spanning ⌈I/K⌉ steps); the users split into ⌊n/g⌋ clumps of
  g and one of n mod g; a clump of h prompts waits ⌈I/K⌉·τ_d(D) + h·I·c_p; each request's O − 1
  decode steps carry every other clump's prefill once, so
  TPOT = (τ_d(D) + (n − h)·I·c_p/((O − 1)/a))/a;
* chain (I > K: a prompt spans ⌈I/K⌉ steps and, with more than one user, the next prompt
  fills the rest of its last step): TTFT = ⌈I/K⌉·τ_d(D) + min(⌈I/K⌉·K, n·I)·c_p;
* crowded (more prompts per step, m = X·τ, than a step holds whole, g): a share m − g of
  the steps gets g + 1 prompts and spills the last one's excess into the next step
  (:func:`_crowded_ttft`);
* prefill-bound: the budget left after the decodes cannot take the prompts as fast as they
  come (X > K/(I·τ_full), every step full): X = K/(I·τ_full), TPOT = τ_full/a and the prompts
  queue, TTFT = n/X − (O − 1)·TPOT (Little's law on the closed loop);
* users beyond ``max_batch`` wait outside the engine: + (users − max_batch)/X.

D, the decoding sequences, is the fixed point D = X·(O − 1)/a·τ (Little's law on the decode
phase), found by damped iteration. These are the steady state: checked against a
step-by-step simulation of the same scheduler run until one cycle's means repeat the last's
(tests/test_scheduler.py), TTFT, TPOT and throughput within 5 % from 1 to 1,024 users on five
cases. Known gap: prompts of half the budget (I = N/2, 4096/512 with N = 8192) at 384-600
users, where the first wave's clumps of two no longer fit once decodes take budget: TTFT 26-52 %
low (measured). The first wave's pattern takes many cycles to settle where prompts straddle
step boundaries (I > N/8 with users·I > N: 40-80 cycles in the tests); a short benchmark (a few
requests per user) sees a TTFT up to ~1.5 full steps there, above this steady state.

Only the mean is given: with fixed lengths and no jitter the clumps make TTFT take a few
discrete values (a clump's and the remainder's), no distribution to take p90/p99 from.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

ITERATIONS = 12  # damped fixed-point steps on D; converges to < 1 % in the tests' grid
DAMPING = 0.5


@dataclass(frozen=True)
class ClosedLoop:
    """Per candidate (arrays): decoding sequences D, TTFT s, TPOT s, requests/s, step s."""

    decoding: np.ndarray
    ttft_s: np.ndarray
    tpot_s: np.ndarray
    requests_per_s: np.ndarray
    step_s: np.ndarray


def closed_loop(users: np.ndarray, input_tokens: float, output_tokens: float,
                tokens_per_step: float, decode_tokens: float, budget: np.ndarray,
                max_batch: np.ndarray, tau_d: Callable[[np.ndarray], np.ndarray],
                prompt_token_s: np.ndarray) -> ClosedLoop:
    """The closed loop of the module docstring: ``users`` per instance, I and O tokens,
    ``tokens_per_step`` a output tokens per sequence per step, ``decode_tokens`` K + 1 tokens
    a decode takes from the step budget N (``budget``), ``tau_d(D)`` the decode step of D
    sequences, s, and ``prompt_token_s`` c_p, s per prompt token."""
    users = np.asarray(users, dtype=float)
    n = np.maximum(np.minimum(users, max_batch), 1e-9)
    big_i, a = float(input_tokens), float(tokens_per_step)
    if output_tokens <= 1:
        return _prefill_only(users, n, big_i, budget, max_batch, tau_d, prompt_token_s)
    steps = max(output_tokens - 1.0, 1e-9) / a  # decode steps after the first token
    wave = n * big_i <= budget
    tau0 = tau_d(np.full_like(n, 1e-9))
    d = np.where(wave, n, 0.5 * n)
    for _ in range(ITERATIONS):
        left = np.maximum(budget - decode_tokens * d, 1.0)
        g = np.where(wave, n, np.minimum(np.maximum(np.floor(left / big_i), 1.0), n))
        rest = np.mod(n, g)
        span = np.where(wave, np.ceil(big_i / budget), np.ceil(big_i / left))
        ride = np.where(wave, tau0, tau_d(np.maximum(d, 1e-9)))
        clump = (n - rest) * (span * ride + g * big_i * prompt_token_s)
        ttft = (clump + rest * (span * ride + rest * big_i * prompt_token_s)) / n
        chain = ~wave & (span > 1)  # prompts longer than a step: the next one fills its tail
        ttft = np.where(chain, span * ride + np.minimum(span * left, n * big_i)
                        * prompt_token_s, ttft)
        own = ((n - rest) * g + rest * rest) / n
        step = tau_d(np.maximum(np.where(wave, n, d), 1e-9)) + (
            n - own) * big_i * prompt_token_s / steps
        rate = n / (ttft + steps * step)
        crowded = ~wave & (span == 1) & (rate * step > g)
        ttft = np.where(crowded, _crowded_ttft(rate * step, g, big_i, left, ride,
                                               prompt_token_s), ttft)
        rate = n / (ttft + steps * step)
        full = tau_d(np.maximum(d, 1e-9)) + left * prompt_token_s
        bound = left / (big_i * full)
        sat = ~wave & (rate > bound)
        rate = np.where(sat, bound, rate)
        step = np.where(sat, full, step)
        ttft = np.where(sat, n / rate - steps * step, ttft)
        d = np.where(wave, n, (1 - DAMPING) * d + DAMPING * np.minimum(rate * steps * step, n))
    ttft = ttft + np.maximum(users - max_batch, 0.0) / rate
    return ClosedLoop(d, ttft, step / a, rate, step)


def _crowded_ttft(per_step: np.ndarray, g: np.ndarray, big_i: float, left: np.ndarray,
                  ride: np.ndarray, c_p: np.ndarray) -> np.ndarray:
    """Mean TTFT, s, when more prompts arrive per step (m = X·τ) than a step's budget holds
    whole (g = ⌊K/I⌋): a share f = m − g of the steps gets g + 1 prompts, whose last one spills
    s = (g + 1)·I − K tokens into the next step; the first g finish in the full step
    F = τ_d + K·c_p, the spilled one a step later, and the next step's own prompts wait for the
    spill. Pairs of a crowded step and a plain one: min(f, 1 − f) of the steps."""
    f = np.clip(per_step - g, 0.0, 1.0)
    pair = np.minimum(f, 1.0 - f)
    spill = np.maximum((g + 1.0) * big_i - left, 0.0)
    full = ride + left * c_p
    after = ride + (spill + g * big_i) * c_p
    plain = ride + g * big_i * c_p
    total = f * (g * full + full + after) + pair * g * after + (1.0 - f - pair) * g * plain
    return total / np.maximum(g + f, 1e-9)


def _prefill_only(users: np.ndarray, n: np.ndarray, big_i: float, budget: np.ndarray,
                  max_batch: np.ndarray, tau_d: Callable[[np.ndarray], np.ndarray],
                  prompt_token_s: np.ndarray) -> ClosedLoop:
    """O = 1: every request is its prompt alone. The n prompts of a cycle are one wave of
    S = ⌈n·I/N⌉ full steps, prompt k out at step ⌈k·I/N⌉; the mean over the wave is taken as
    the step (S + 1)/2 and the tokens min((S + 1)/2·N, n·I) (exact for S = 1); TPOT is not
    defined (NaN)."""
    tau0 = tau_d(np.full_like(n, 1e-9))
    total = n * big_i
    s = np.ceil(total / budget)
    cycle = s * tau0 + total * prompt_token_s
    mid = 0.5 * (s + 1.0)
    ttft = mid * tau0 + np.minimum(mid * budget, total) * prompt_token_s
    rate = n / cycle
    ttft = ttft + np.maximum(users - max_batch, 0.0) / rate
    nan = np.full_like(n, np.nan)
    return ClosedLoop(np.zeros_like(n), ttft, nan, rate, nan)
