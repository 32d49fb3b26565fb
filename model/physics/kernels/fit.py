"""Least squares on log latency for the kernel models (:mod:`model.physics.kernels`), in
plain numpy (no SciPy at run time): Levenberg–Marquardt over the logarithms of positive
parameters, so every efficiency, floor and bandwidth stays positive, with a few starts
because a roofline's max/min makes the error surface piecewise smooth.

Minimises Σ (ln t̂(θ) − ln t)² — the relative error, symmetric in over- and under-estimates,
so a 5 µs kernel counts as much as a 50 ms one."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

Array = np.ndarray
Model = Callable[[Array], Array]  # parameters → predicted latency (same shape as the data)

_ITERATIONS = 60
_STEP = 1e-4  # finite-difference step in log parameter space


def _residual(model: Model, log_theta: Array, log_t: Array) -> Array:
    pred = model(np.exp(log_theta))
    return np.log(np.maximum(pred, 1e-30)) - log_t


def _lm(model: Model, log_theta: Array, log_t: Array) -> tuple[Array, float]:
    """Levenberg–Marquardt from one start; returns (log θ, sum of squares)."""
    r = _residual(model, log_theta, log_t)
    cost, lam = float(r @ r), 1e-2
    for _ in range(_ITERATIONS):
        jac = np.empty((r.size, log_theta.size))
        for j in range(log_theta.size):
            step = np.zeros_like(log_theta)
            step[j] = _STEP
            jac[:, j] = (_residual(model, log_theta + step, log_t) - r) / _STEP
        jtj, jtr = jac.T @ jac, jac.T @ r
        improved = False
        for _ in range(8):  # raise the damping until a step lowers the cost
            try:
                delta = np.linalg.solve(jtj + lam * np.diag(np.diag(jtj) + 1e-9), -jtr)
            except np.linalg.LinAlgError:
                lam *= 10.0
                continue
            trial = log_theta + np.clip(delta, -3.0, 3.0)
            r_new = _residual(model, trial, log_t)
            new_cost = float(r_new @ r_new)
            if new_cost < cost:
                improved = cost - new_cost > 1e-10 * max(cost, 1e-30)
                log_theta, r, cost, lam = trial, r_new, new_cost, max(lam / 3.0, 1e-7)
                break
            lam *= 10.0
        if not improved:
            break
    return log_theta, cost


def fit_log_latency(model: Model, latency: Array, starts: Sequence[Sequence[float]]) -> Array:
    """θ (positive) minimising Σ (ln model(θ) − ln latency)² over the rows, the best of the
    given starting points."""
    log_t = np.log(np.asarray(latency, dtype=float))
    best, best_cost = None, np.inf
    for start in starts:
        theta, cost = _lm(model, np.log(np.asarray(start, dtype=float)), log_t)
        if cost < best_cost:
            best, best_cost = theta, cost
    return np.exp(best)


def relative_errors_pct(predicted: Array, measured: Array) -> Array:
    """|t̂ − t| / t in percent."""
    measured = np.asarray(measured, dtype=float)
    return 100.0 * np.abs(np.asarray(predicted, dtype=float) - measured) / measured


__all__ = ["fit_log_latency", "relative_errors_pct"]
