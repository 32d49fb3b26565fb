"""What a training run costs beyond its time: the site, the pricing and the failure inputs.

A :class:`Costs` record rides on a :class:`~model.specs.hardware.System` (``system.costs``) and
turns each result row's time into GPU-hours, energy, dollars and the expected time with failures
(docs/model.md §15; formulas in :mod:`model.physics.energy` and :mod:`model.physics.goodput`).
The GPU's own figures (``tdp_w``, ``node_power_factor``, ``usd_per_gpu_hour``,
``purchase_usd_per_gpu``) are fields of the system spec, with their sources in its
``cost_source``; a field of the same name here, when set, overrides the system's.

Defaults, each with its source and date (docs/model.md §15 lists them all):

* ``pue`` 1.58 — Uptime Institute's industry-average annual PUE for 2023 (Uptime Intelligence,
  23 Nov 2023; 1.55–1.59 since about 2020).
* ``usd_per_kwh`` 0.0806 — EIA, US average retail electricity price to industry, 2023 (released
  March 2024).
* ``amortization_years`` 5 — the useful life Amazon gave a subset of its AI servers in its 2024
  10-K (February 2025, shortened from six years); CoreWeave's S-1 (March 2025) uses six,
  Nebius four.
* ``failures_per_gpu_hour`` 1.97e-5 — Llama 3 405B pre-training (Dubey et al. 2024, arXiv
  2407.21783, §3.3.4): 419 unexpected interruptions in 54 days on 16,384 H100s.
* ``checkpoint_gb_per_s`` 2000 — Llama 3's Tectonic storage: 2 TB/s sustained (7 TB/s peak)
  for its 16K-GPU run (same paper, §3.3.1), written by every GPU at once.
* ``restart_s`` 600 — an assumption (10 minutes to detect, reschedule, reload and rebuild
  communicators): with Llama 3's interruption rate it gives the >90 % effective training time
  Llama 3 reports, and it is the restart time of Daly's (2006) worked examples.
* ``checkpoint_bytes_per_param`` 14 — what a restart needs: bf16 weights (2 B) plus the fp32
  master copy and Adam's two moments (12 B), as the memory model counts them (§9).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from model.errors import ModelError
from model.specs.schema import Field, validate

HOURS_PER_YEAR = 8766.0  # 365.25 days
# Llama 3 405B: 419 unexpected interruptions in 54 days on 16,384 H100s (arXiv 2407.21783)
LLAMA3_FAILURES_PER_GPU_HOUR = 419 / (54 * 24 * 16384)
PRICINGS = ("rental", "purchase")

FIELDS = (
    Field("pricing", str, "what a GPU-hour costs: 'rental' (the rental price, power included) "
          "or 'purchase' (the purchase price amortized over its useful life, plus electricity)",
          default="rental", choices=PRICINGS),
    Field("pue", float, "power usage effectiveness of the site: facility energy / IT energy "
          "(default 1.58, Uptime Institute's 2023 industry average)", 1, 5, default=1.58),
    Field("usd_per_kwh", float, "electricity price, USD per kWh, of purchase pricing "
          "(default 0.0806, EIA's 2023 US average to industry)", 0, 10, default=0.0806,
          unit="USD/kWh"),
    Field("amortization_years", float, "useful life a purchase is amortized over, years "
          "(default 5, the five years of Amazon's 2024 10-K)", 0.1, 50, default=5.0,
          unit="years"),
    Field("failures_per_gpu_hour", float, "job-stopping failures per GPU-hour (0: none; default: "
          "Llama 3 405B's 419 interruptions in 54 days on 16,384 H100s)", 0, 1,
          default=LLAMA3_FAILURES_PER_GPU_HOUR),
    Field("checkpoint_gb_per_s", float, "storage bandwidth a checkpoint is written at (the "
          "whole job's), GB/s", 1e-3, 1e7, default=2000.0),
    Field("restart_s", float, "time from a failure to training again (detect, reschedule, "
          "reload), s", 0, 1e7, default=600.0),
    Field("checkpoint_bytes_per_param", float, "checkpoint bytes per parameter (weights and "
          "optimizer state), B", 0.1, 100, default=14.0),
    Field("tdp_w", float, "override of the system's GPU power, W", 0, 1e5),
    Field("node_power_factor", float, "override of the system's node share of power", 1, 10),
    Field("usd_per_gpu_hour", float, "override of the system's rental price, USD/GPU-hour",
          0, 1e5),
    Field("purchase_usd_per_gpu", float, "override of the system's purchase price per GPU, USD",
          0, 1e9),
)
NAMES = tuple(f.name for f in FIELDS)


@dataclass(frozen=True)
class Costs:
    """Site, pricing and failure inputs (see the module docstring for units and defaults).
    The last four fields override the system's own figures when set (None: the system's)."""

    pricing: str = "rental"
    pue: float = 1.58
    usd_per_kwh: float = 0.0806
    amortization_years: float = 5.0
    failures_per_gpu_hour: float = LLAMA3_FAILURES_PER_GPU_HOUR
    checkpoint_gb_per_s: float = 2000.0
    restart_s: float = 600.0
    checkpoint_bytes_per_param: float = 14.0
    tdp_w: float | None = None
    node_power_factor: float | None = None
    usd_per_gpu_hour: float | None = None
    purchase_usd_per_gpu: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def with_overrides(self, **changes: Any) -> Costs:
        """A copy with some inputs changed (validated like a new record)."""
        return resolve_costs({**self.to_dict(), **changes})


DEFAULT_COSTS = Costs()


def resolve_costs(value: object) -> Costs:
    """A :class:`Costs` from None (the defaults), a dict of inputs, or a Costs record."""
    if value is None:
        return DEFAULT_COSTS
    if isinstance(value, Costs):
        return value
    if not isinstance(value, dict):
        raise ModelError(f"costs must be a dict of inputs, got {type(value).__name__}")
    return Costs(**validate("costs", value, FIELDS))
