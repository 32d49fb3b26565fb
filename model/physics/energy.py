"""GPU-hours, energy and dollars of a training run (docs/model.md §15).

For n GPUs training for d days (the model's time, or the expected time with failures):

* GPU-hours H = n · d · 24;
* energy E = H · P_gpu · k_node · PUE, with P_gpu the GPU's rated power (TDP), k_node the node
  share (a node's maximum power per GPU over the GPU's TDP: CPUs, NICs, switches, fans, power
  supplies) and PUE the site's facility/IT energy ratio — rated, not measured, power: an upper
  estimate of what the run draws;
* rental cost C = H · p_rent (the rental price includes power);
* purchase cost C = H · p_buy / (Y · 8766 h) + E · p_kWh: the GPUs' purchase price amortized
  straight-line over Y years of use, plus the electricity.

Every function takes numpy arrays or scalars; units are in the names.
"""

from __future__ import annotations

import numpy as np

from model.specs.cost import HOURS_PER_YEAR


def gpu_hours(gpus, days):
    """GPU-hours of ``gpus`` GPUs busy for ``days`` days."""
    return np.asarray(gpus, dtype=float) * np.asarray(days, dtype=float) * 24.0


def energy_mwh(gpu_hours_, tdp_w: float, node_power_factor: float, pue: float):
    """Site energy (MWh) of ``gpu_hours_`` at the rated power per GPU with its node share."""
    return np.asarray(gpu_hours_, dtype=float) * tdp_w * node_power_factor * pue / 1e6


def rental_usd(gpu_hours_, usd_per_gpu_hour: float):
    """Rental cost (USD) of ``gpu_hours_``; NaN when the price is unknown (0)."""
    price = usd_per_gpu_hour if usd_per_gpu_hour > 0 else np.nan
    return np.asarray(gpu_hours_, dtype=float) * price


def purchase_usd(gpu_hours_, purchase_usd_per_gpu: float, amortization_years: float,
                 energy_mwh_, usd_per_kwh: float):
    """Amortized purchase (straight-line over ``amortization_years``) plus electricity, USD;
    NaN when the purchase price is unknown (0)."""
    price = purchase_usd_per_gpu if purchase_usd_per_gpu > 0 else np.nan
    hours = np.asarray(gpu_hours_, dtype=float)
    return (hours * price / (amortization_years * HOURS_PER_YEAR)
            + np.asarray(energy_mwh_, dtype=float) * 1000.0 * usd_per_kwh)
