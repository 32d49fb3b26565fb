"""Serving modes and metrics over candidate layouts, as numpy arrays (docs/serving.md).

Per instance (one copy of the model on tp·pp GPUs), with τ_d(B) the decode step of B sequences
(:func:`model.physics.serving_step.step_times`, draft passes included with MTP), a the expected
tokens per step (:attr:`ServingWorkload.tokens_per_step`) and t_p the GPU time of one request's
prefill in full chunks of ``max_num_tokens``:

* aggregated, continuous batching with chunked prefill (Sarathi-Serve, Agrawal et al. 2024):
  each step B·a/O requests finish and as many prompts are prefilled inside the step, so
  τ(B) = τ_d(B) + (B·a/O)·t_p; TPOT = τ/a; output tokens/s = B·a/τ;
  TTFT = t_p0 + ⌈I/N⌉·τ_d(B) (the prompt alone, t_p0, plus the decode work of the steps its
  chunks ride in);
* disaggregated xPyD (DistServe, Zhong et al. 2024): x prefill instances serve 1/t_p
  requests/s each, the KV cache of each prompt crosses the network (its bytes per GPU over the
  GPU's NICs, or NVLink inside one domain), y decode instances step at τ_d(B);
* offline: B the largest batch the KV cache (and the stack's limits) allow;
  concurrency C: B = C/instances, users beyond the KV cache wait (Little's law);
  request rate λ: B solves λ/instances = B·a/(τ·O) (Little's law), and requests wait for the
  batch server as in an M/D/1 queue (Poisson arrivals, deterministic service at μ, the
  saturated rate): W_q = ρ/(2μ(1 − ρ)), ρ = λ/μ (Pollaczek–Khinchine mean-value formula,
  Kleinrock 1975, Queueing Systems vol. 1, eq. 5.73 with C_b² = 0). ρ ≥ 1 is unstable:
  latency grows without bound (reported as infinite, ``stable`` false).

Metrics (defined once, docs/serving.md): TTFT; TPOT = (e2e − TTFT)/(O − 1); ITL = the time
between two emissions, τ (a tokens each with MTP); e2e = TTFT + (O − 1)·TPOT; tokens/s per
user = 1/TPOT (TensorRT-LLM's "per user output speed"); output and total (input + output)
tokens/s, per instance set and per GPU; requests/s.
"""

from __future__ import annotations

import numpy as np

from model.physics import serving_ops as so
from model.physics.serving_step import Engine, step_times

ACTIVATION_TOKENS = 8192  # tokens the activations are sized for when the chunk is tuned
BISECTIONS = 24  # halvings of the batch interval: 2^-24 of B_max, far below one request


def decode_step_s(engine: Engine, lay: so.Layout, batch: np.ndarray, keys) -> np.ndarray:
    """τ_d(B): a decode step verifying K + 1 tokens per sequence plus, with MTP, K draft
    passes of one layer and the head on one token per sequence (the MTP module, or a one-layer
    draft head: DeepSeek-V3 §2.2; EAGLE, Li et al. 2024), plus with KV offload the reload of
    the sequences the HBM pool does not hold (:func:`offload_reload_s`)."""
    k = engine.workload.mtp_depth
    b = np.maximum(batch, 1e-9)
    verify = step_times(engine, lay, b * (k + 1), b, keys, True).total_s
    if engine.workload.kv_offload_gb > 0:
        verify = verify + offload_reload_s(engine, lay, b)
    if not k:
        return verify
    return verify + k * draft_step_s(engine, lay, b, keys)


def draft_step_s(engine: Engine, lay: so.Layout, batch: np.ndarray, keys) -> np.ndarray:
    """One draft pass of B sequences, s: an average layer's ops and collectives (the MTP
    module's transformer block) and the LM head on one token per sequence, taken from a
    one-token step less its pipeline hop and host work (the drafts run inside the step's CUDA
    graph, TensorRT-LLM's MTP worker); with a separate draft model, its whole one-token decode
    step on the same layout less its host work (TensorRT-LLM's one-model draft/target
    speculative decoding: the draft's forward inside the target's step)."""
    if engine.draft is not None:
        d = step_times(engine.draft, lay, batch, batch, decode_keys(engine.draft), True)
        return d.total_s - d.by_op_s["engine/step"]
    one = step_times(engine, lay, batch, batch, keys, True).by_op_s
    head = one["head/norm"] + one["head/lm"]
    fixed = head + one["comm/pipeline"] + one["engine/step"]
    return (sum(one.values()) - fixed) / engine.model.layers + head


def prefix_bytes(engine: Engine, lay: so.Layout) -> np.ndarray:
    """Bytes per GPU of the cached shared prefix (h·I tokens), held once per attention rank
    (each rank with attention DP keeps its own copy; 0 without prefix caching)."""
    cached = engine.workload.cached_prompt_tokens
    if not cached:
        return np.zeros(len(lay.tp))
    return context_kv_bytes(engine, lay, float(cached))


def context_kv_bytes(engine: Engine, lay: so.Layout, context: float) -> np.ndarray:
    """Bytes per GPU of ``context`` tokens of one sequence, the draft model's cache included."""
    out = so.kv_bytes_per_sequence(engine.model, engine.workload, lay, context)
    if engine.draft is not None:
        out = out + so.kv_bytes_per_sequence(engine.draft.model, engine.workload, lay, context)
    return out


def sequence_kv_bytes(engine: Engine, lay: so.Layout) -> np.ndarray:
    """Bytes per GPU one sequence holds in whole blocks: its own I − ⌊h·I⌋ + O tokens (the
    cached prefix is shared, :func:`prefix_bytes`)."""
    wl, block = engine.workload, engine.stack.kv_block_tokens
    context = -(-(wl.computed_prompt_tokens + wl.output_tokens) // block) * block
    return context_kv_bytes(engine, lay, float(context))


def offload_reload_s(engine: Engine, lay: so.Layout, batch: np.ndarray) -> np.ndarray:
    """KV offload to host memory: the KV bytes per GPU of B sequences beyond what the HBM
    pool holds (after the shared prefix) live in host memory and cross the GPU's host link
    (PCIe, or NVLink-C2C on Grace systems: ``host_bandwidth_gb_per_s``) once per decode step,
    s: max(B/g·S_seq − (KV_hbm − S_prefix), 0)/BW_host, not overlapped with the step's
    compute (an upper bound; vLLM's KV-offload connector and TensorRT-LLM's host KV pool load
    blocks back before the forward that reads them)."""
    resident = memory(engine, lay)["kv"] - prefix_bytes(engine, lay)
    held = batch / lay.attention_groups * sequence_kv_bytes(engine, lay)
    bw = engine.system.host_bandwidth_gb_per_s * 1e9
    return np.maximum(held - np.maximum(resident, 0.0), 0.0) / bw


def chunk_tokens(engine: Engine, b_max: np.ndarray, lay: so.Layout) -> np.ndarray:
    """Tokens of one step per attention rank: the stack's ``max_num_tokens``, or with 0
    trtllm-bench's tuning B·(1 + I/O) within [2048, 32768] for the batch B of a rank
    (tensorrt_llm/bench/build/tuning.py: finetune_setting)."""
    wl = engine.workload
    if engine.stack.max_num_tokens:
        return np.full(len(b_max), float(engine.stack.max_num_tokens))
    per_rank = b_max / lay.attention_groups
    return np.clip(per_rank * (1 + wl.input_tokens / wl.output_tokens), 2048.0, 32768.0)


def prefill_s(engine: Engine, lay: so.Layout, tokens: np.ndarray,
              ) -> tuple[np.ndarray, np.ndarray]:
    """(t_p, t_p0): GPU time per request of prefill in full chunks of ``tokens`` per
    attention rank, and the time of one prompt alone (its TTFT on an idle instance). With
    prefix caching only the I − ⌊h·I⌋ uncached tokens are computed, attending to the cached
    ones too (:func:`model.physics.serving_ops.layer_ops`). A separate draft model prefills
    the prompt too (its own KV cache)."""
    prompt = float(engine.workload.computed_prompt_tokens)
    cached = float(engine.workload.cached_prompt_tokens)
    groups = lay.attention_groups
    chunk = groups * np.maximum(tokens, prompt)
    t_chunk = alone = 0.0
    for e in (engine,) if engine.draft is None else (engine, engine.draft):
        t_chunk = t_chunk + step_times(e, lay, chunk, chunk / prompt, cached, False, prompt,
                                       head_rows=chunk / prompt).total_s
        alone = alone + step_times(e, lay, prompt * groups, groups, cached, False, prompt,
                                   head_rows=groups).total_s
    return t_chunk * prompt / chunk, alone


def memory(engine: Engine, lay: so.Layout) -> dict[str, np.ndarray]:
    """Bytes per GPU: weights, activations (the largest live set of one layer for a chunk
    of N tokens: its input, Q/K/V, MLP hidden, plus FP32 logits of up to N rows), KV cache
    (the stack's share of what is left, or with ``hbm_utilization`` that share of the whole HBM
    less weights and activations, as vLLM and SGLang size it), and free."""
    m, wl, st = engine.model, engine.workload, engine.stack
    g = lay.attention_shards
    weights = so.weight_bytes_per_gpu(m, wl, lay)
    if engine.draft is not None:  # a separate draft model's weights on the same GPUs
        weights = weights + so.weight_bytes_per_gpu(engine.draft.model, wl, lay)
    width = 3.0 * m.hidden + (m.heads + 2 * m.kv_heads) * m.head_dim / g
    mlp = m.ffn if m.layers > m.moe_layers else 0
    hidden = max(mlp, m.top_k * m.expert_ffn + m.shared_ffn) * (3 if m.mlp == "swiglu" else 2)
    n = float(st.max_num_tokens or ACTIVATION_TOKENS)
    act = so.ACT_BYTES * n * (width + hidden / g) + so.LOGIT_BYTES * min(
        n, st.max_batch) * m.vocab / g
    usable = engine.system.usable_hbm_bytes
    left = usable - weights - act
    kv = np.maximum(left, 0.0) * st.kv_cache_memory_fraction
    if st.hbm_utilization > 0:  # vLLM / SGLang: a share of the whole HBM for all three
        kv = np.clip(st.hbm_utilization * engine.system.hbm_capacity_bytes - weights - act,
                     0.0, np.maximum(left, 0.0))
    return {"weights": weights, "activations": np.broadcast_to(act, weights.shape),
            "kv": kv, "free": np.maximum(left - kv, 0.0), "fits": left > 0}


def max_batch(engine: Engine, lay: so.Layout, kv_bytes: np.ndarray,
              pinned: np.ndarray | None = None) -> np.ndarray:
    """The largest batch of one instance: sequences whose own I − ⌊h·I⌋ + O tokens
    (:func:`sequence_kv_bytes`) the cache holds beside the shared prefix (per attention rank
    with attention DP), the host KV pool added with offload, at most ``max_batch``/pp per rank
    and ``max_num_tokens`` / (K + 1) decode tokens per rank, or the pinned batch if smaller."""
    wl, st = engine.workload, engine.stack
    pool = kv_bytes
    if wl.kv_offload_gb:  # the host pool; no zeros added on the hot path
        pool = pool + wl.kv_offload_gb * 1e9
    if wl.cached_prompt_tokens:
        pool = pool - prefix_bytes(engine, lay)
    per_rank = np.floor(np.maximum(pool, 0.0) / sequence_kv_bytes(engine, lay))
    limit = np.floor(st.max_batch / lay.pp)
    if st.max_num_tokens:
        limit = np.minimum(limit, st.max_num_tokens // (wl.mtp_depth + 1))
    out = np.minimum(per_rank, limit) * lay.attention_groups
    return out if pinned is None else np.minimum(out, pinned)


def decode_keys(engine: Engine) -> np.ndarray:
    """Mean keys a decode query attends to over a request's life: context I + (O − 1)/2
    (after the window cut)."""
    wl = engine.workload
    return so.cached_tokens_per_layer(engine.model, wl.input_tokens + (wl.output_tokens - 1) / 2)


def solve_batch(rate_of, target: np.ndarray, b_max: np.ndarray) -> np.ndarray:
    """The batch B ∈ [0, B_max] at which ``rate_of(B)`` (requests/s, increasing in B) equals
    ``target``, by bisection on arrays (B_max where even B_max falls short)."""
    lo, hi = np.zeros_like(b_max), b_max.astype(float).copy()
    for _ in range(BISECTIONS):
        mid = 0.5 * (lo + hi)
        short = rate_of(mid) < target
        lo, hi = np.where(short, mid, lo), np.where(short, hi, mid)
    return hi


def md1_wait_s(rate: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """Mean wait of an M/D/1 queue, s: ρ/(2μ(1 − ρ)) with ρ = λ/μ (module docstring); inf
    when ρ ≥ 1."""
    rho = rate / np.maximum(capacity, 1e-300)
    with np.errstate(divide="ignore", invalid="ignore"):
        wait = rho / (2.0 * capacity * (1.0 - rho))
    return np.where(rho < 1.0, wait, np.inf)


def md1_wait_quantile_s(rate: np.ndarray, capacity: np.ndarray, q: float) -> np.ndarray:
    """The q-quantile of the M/D/1 wait, s, by the Cramér–Lundberg approximation of the M/G/1
    waiting time (Asmussen 2003, Applied Probability and Queues, XIII.5): P(W > t) ≈ C·e^(−γt),
    γ the positive root of λ(e^(γ/μ) − 1) = γ (deterministic service 1/μ) and
    C = (1 − ρ)/(ρ·e^(γ/μ) − 1); so t_q = ln(C/(1 − q))/γ, 0 when C ≤ 1 − q. Checked against a
    Lindley-recursion simulation (tests/test_scheduler.py): within 6 % at ρ 0.3-0.95 for
    q = 0.9 and 0.99. inf when ρ ≥ 1."""
    mu = np.maximum(np.asarray(capacity, dtype=float), 1e-300)
    rho = np.asarray(rate, dtype=float) / mu
    ok = rho < 1.0
    r = np.where(ok, np.maximum(rho, 1e-12), 0.5)
    lo, hi = np.full_like(r, 1e-12), np.full_like(r, 60.0)  # γ/μ: the root lies below 60
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        below = r * (np.exp(mid) - 1.0) < mid
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    g = 0.5 * (lo + hi)
    c = (1.0 - r) / np.maximum(r * np.exp(g) - 1.0, 1e-300)
    t = np.log(np.maximum(c / (1.0 - q), 1.0)) / (g * mu)
    return np.where(ok, t, np.inf)
