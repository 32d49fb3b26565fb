"""The cost columns of every result row: GPU-hours, energy, dollars and days with failures.

From a row's GPU count and training days, the system's power and prices (``tdp_w``,
``node_power_factor``, ``usd_per_gpu_hour``, ``purchase_usd_per_gpu``) and its site, pricing and
failure inputs (``system.costs``, :mod:`model.specs.cost`); formulas in
:mod:`model.physics.energy` and :mod:`model.physics.goodput` (docs/model.md §15). Without a
training budget (no days) the columns are NaN, as ``train_days`` is.
"""

from __future__ import annotations

import numpy as np

from model.physics import energy, goodput
from model.specs.hardware import System
from model.specs.transformer import Transformer

COLUMNS = ("gpu_hours", "energy_mwh", "cost_usd", "pricing", "train_days_with_failures",
           "checkpoint_interval_s", "checkpoint_write_s")


def power_and_prices(system: System) -> dict[str, float]:
    """The system's GPU power, node share and prices, with the cost inputs' overrides."""
    c = system.costs
    pick = {name: getattr(c, name) if getattr(c, name) is not None else getattr(system, name)
            for name in ("tdp_w", "node_power_factor", "usd_per_gpu_hour",
                         "purchase_usd_per_gpu")}
    return pick


def cost_columns(model: Transformer, system: System, gpus, train_days) -> dict[str, object]:
    """Columns (arrays over rows, ``pricing`` one value) for rows of ``gpus`` GPUs training
    ``train_days`` days each: see the module docstring and :data:`COLUMNS`."""
    c = system.costs
    p = power_and_prices(system)
    days = np.asarray(train_days, dtype=float)
    n = np.asarray(gpus, dtype=float)
    write_s = goodput.checkpoint_write_s(model.params, c.checkpoint_bytes_per_param,
                                         c.checkpoint_gb_per_s)
    mtbf = goodput.job_mtbf_s(n, c.failures_per_gpu_hour)
    interval = goodput.daly_interval_s(write_s, mtbf)
    wall_days = goodput.expected_wall_s(days * 86400.0, interval, write_s, c.restart_s,
                                        mtbf) / 86400.0
    hours = energy.gpu_hours(n, days)
    mwh = energy.energy_mwh(hours, p["tdp_w"] or np.nan, p["node_power_factor"], c.pue)
    if c.pricing == "rental":
        usd = energy.rental_usd(hours, p["usd_per_gpu_hour"])
    else:
        usd = energy.purchase_usd(hours, p["purchase_usd_per_gpu"], c.amortization_years, mwh,
                                  c.usd_per_kwh)
    return {"gpu_hours": hours, "energy_mwh": mwh, "cost_usd": usd, "pricing": c.pricing,
            "train_days_with_failures": wall_days,
            "checkpoint_interval_s": np.where(np.isfinite(mtbf), interval, np.nan),
            "checkpoint_write_s": np.full(n.shape, write_s)}
