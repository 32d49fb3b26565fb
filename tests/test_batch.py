"""The published global batches of the presets and the critical-batch estimate
(model/specs/batch.py: Kaplan et al. 2020, §4 and §5.1)."""

from __future__ import annotations

import math

import pytest

from model import list_models, load_model
from model.specs import batch


def test_kaplan_closed_forms():
    # B_crit(L) = 2e8 / L^(1/0.21): at L = 1 nat the critical batch is B* itself
    assert batch.critical_batch_tokens(1.0) == pytest.approx(2e8)
    assert batch.critical_batch_tokens(2.0) == pytest.approx(2e8 / 2 ** (1 / 0.21))
    # L(N, D) → (N_c/N)^α_N without a budget; at N = N_c and D = D_c: 2^α_D
    assert batch.loss_nats(1e9, None) == pytest.approx((6.4e13 / 1e9) ** 0.076)
    assert batch.loss_nats(6.4e13, 1.8e13) == pytest.approx(2 ** 0.103)


def test_critical_batch_grows_as_the_loss_falls():
    small, large = load_model("llama3-8b"), load_model("llama3-405b")
    assert batch.critical_batch(small).loss_nats > batch.critical_batch(large).loss_nats
    assert batch.critical_batch(small).tokens < batch.critical_batch(large).tokens
    longer = small.with_overrides(tokens=small.tokens * 10)
    assert batch.critical_batch(longer).tokens > batch.critical_batch(small).tokens


def test_the_published_batches_are_below_the_critical_batch():
    """Runs that trained well stayed below Kaplan's estimate (an order-of-magnitude check)."""
    for name in ("gpt3-175b", "llama3-405b", "turing-530b", "megatron-1t"):
        m = load_model(name)
        crit = batch.critical_batch(m)
        assert m.global_batch * m.seq_len < crit.tokens, name
        assert 1 < crit.token_cost(m.global_batch * m.seq_len) < 2


def test_llama3_8b_with_4096_sequences_is_past_the_critical_batch():
    m = load_model("llama3-8b")
    crit = batch.critical_batch(m)
    assert 5e6 < crit.tokens < 10e6  # about 7.4M tokens at L ≈ 2.0 nats
    assert crit.samples(m.seq_len) == pytest.approx(crit.tokens / 8192)
    assert crit.token_cost(4096 * 8192) > 4


def test_no_estimate_without_a_vocabulary():
    assert batch.critical_batch(load_model("vit-era5")) is None


def test_presets_state_where_their_batch_comes_from():
    for name in list_models():
        m = load_model(name)
        if m.global_batch is None:
            assert m.global_batch_source == "", name
            continue
        assert m.global_batch_source and math.isfinite(m.global_batch), name
    m = load_model("llama3-405b")
    assert m.global_batch * m.seq_len == 16 * 2**20  # "16M tokens" of 8,192-token sequences
    assert "3.4.1" in m.global_batch_source
    assert load_model("llama3-8b").global_batch is None  # not published: no batch
