"""The critical batch size: past it, a larger global batch buys fewer optimizer steps at the price
of more training tokens for the same loss.

Kaplan et al. 2020, "Scaling Laws for Neural Language Models" (arXiv 2001.08361), following the
gradient-noise-scale analysis of McCandlish et al. 2018 (arXiv 1812.06162):

* the critical batch depends on the loss only (§5.1, eq. 5.3):
  B_crit(L) ≈ B* / L^(1/α_B), with B* ≈ 2·10⁸ tokens and α_B ≈ 0.21 (Table 1);
* the loss reached by a model of N non-embedding parameters after D tokens (§4, eq. 4.1, with
  the fit of Table 2): L(N, D) = [(N_c / N)^(α_N/α_D) + D_c / D]^α_D, in nats per token, with
  α_N = 0.076, α_D = 0.103, N_c = 6.4·10¹³ parameters, D_c = 1.8·10¹³ tokens; without a token
  budget (D → ∞), L = (N_c / N)^α_N;
* at a batch of B tokens, reaching a given loss takes E ≈ E_min·(1 + B / B_crit) tokens and
  S ≈ S_min·(1 + B_crit / B) steps (§5.1, after McCandlish et al. 2018).

The critical batch grows as the loss falls, so its value at the end of the budget is the largest
of the run: a batch above it is above the critical batch for the whole run. The fits are for
autoregressive language models (cross-entropy on WebText2 with GPT-2's tokenizer) and give an
order of magnitude, not a tuned hyper-parameter; a model without a vocabulary (a ViT) has none.
"""

from __future__ import annotations

from dataclasses import dataclass

from model.specs.transformer import Transformer

B_STAR_TOKENS = 2e8  # Kaplan et al. 2020, Table 1
ALPHA_B = 0.21
ALPHA_N = 0.076  # Kaplan et al. 2020, Table 2 (the L(N, D) fit)
ALPHA_D = 0.103
N_C_PARAMS = 6.4e13
D_C_TOKENS = 1.8e13


def loss_nats(non_embedding_params: float, tokens: float | None) -> float:
    """Kaplan's L(N, D) in nats per token (L(N) without a token budget)."""
    ratio = (N_C_PARAMS / non_embedding_params) ** (ALPHA_N / ALPHA_D)
    data = D_C_TOKENS / tokens if tokens else 0.0
    return (ratio + data) ** ALPHA_D


def critical_batch_tokens(loss: float) -> float:
    """Kaplan's B_crit(L) = B* / L^(1/α_B), tokens per optimizer step."""
    return B_STAR_TOKENS / loss ** (1.0 / ALPHA_B)


@dataclass(frozen=True)
class CriticalBatch:
    """The critical batch of a model at the end of its training budget."""

    loss_nats: float  # the loss Kaplan's fit predicts at the end of the budget
    tokens: float  # B_crit at that loss, tokens per optimizer step

    def samples(self, seq_len: int) -> float:
        """B_crit in samples (sequences) of ``seq_len`` tokens."""
        return self.tokens / seq_len

    def token_cost(self, batch_tokens: float) -> float:
        """E / E_min = 1 + B / B_crit: the tokens a batch of ``batch_tokens`` needs to reach the
        same loss, relative to the fewest any batch needs."""
        return 1.0 + batch_tokens / self.tokens


def critical_batch(model: Transformer) -> CriticalBatch | None:
    """The critical batch at the loss the model reaches at the end of its budget (tokens, or
    samples × seq_len; none: the converged loss); None for a model without a vocabulary."""
    if model.vocab == 0:
        return None
    samples = model.training_samples
    tokens = samples * model.seq_len if samples is not None else None
    loss = loss_nats(model.layers * model.params_per_block, tokens)
    return CriticalBatch(loss, critical_batch_tokens(loss))


def _tokens_text(tokens: float) -> str:
    """12,582,912 → '12.6M'."""
    for size, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
        if tokens >= size:
            return f"{tokens / size:.3g}{suffix}"
    return f"{tokens:,.0f}"


def critical_batch_warning(model: Transformer, global_batch: int) -> str:
    """The warning every front end shows (CLI text and JSON, dashboard) when a global batch of
    ``global_batch`` samples exceeds the critical batch at the end of the model's budget;
    '' below it or without an estimate (no vocabulary)."""
    crit = critical_batch(model)
    batch_tokens = global_batch * model.seq_len
    if crit is None or batch_tokens <= crit.tokens:
        return ""
    return (f"⚠ The global batch ({_tokens_text(batch_tokens)} tokens) exceeds the critical "
            f"batch estimated for this model at the end of its budget, about "
            f"{_tokens_text(crit.tokens)} tokens ({round(crit.samples(model.seq_len)):,}"
            f" sequences): past it a larger batch costs training tokens for the same loss, "
            f"about {crit.token_cost(batch_tokens):.1f}× the fewest (Kaplan et al. 2020, "
            f"§5.1: B_crit = 2·10⁸ tokens / L^(1/0.21) at their L(N, D) = "
            f"{crit.loss_nats:.2f} nats; an order of magnitude). The speed shown is not "
            "affected.")
