"""The leave-one-source-out cross-validation table as frames, for reports and the dashboard.

``scripts/calibrate --write`` stores it in ``model/data/reference/cross_validation.json``
(:data:`model.validation.error_bars.CROSS_VALIDATION`): per source (a paper, a framework
release) the mean and max |error| of its runs predicted in sample (efficiencies fitted on every
source) and cross-validated (fitted without that source), and every run's measured and predicted
iteration times. Errors are 100·(1 − predicted / measured), as everywhere in the validation.

The mixture-of-experts runs have a table of their own (``part="moe"``: the ``moe`` entry of
the file, one source per Megatron-Bridge release, its MoE token-kernel efficiency fitted on the
other releases' MoE runs), read by the same functions.

Two readings the numbers need, derived here from the data:

* **releases of the same recipes** — sources named ``<family>-YY.MM`` (e.g.
  ``megatron-bridge-25.09``, ``-25.11``, ``-26.02``) are releases of one framework's published
  table, largely the same models on the same systems: holding one out and fitting on the others
  tests repeatability across releases, not generalisation to an unseen recipe;
* **never fitted** — a source whose in-sample and cross-validated predictions coincide for every
  run was not used by any fit (the uncertain transcriptions): its error is held-out already.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd

from model.specs import memo
from model.validation.error_bars import CROSS_VALIDATION

SUMMARY = "all firm"  # the summary rows start so (a family's runs; ALL_FIRM last)
ALL_FIRM = "all firm runs"  # the summary row of the table (calibrate_presets: error_table)
_RELEASE = re.compile(r"^(?P<family>.+)-(?P<release>\d{2}\.\d{2})$")


def release_family(source: str) -> str | None:
    """The framework whose release ``source`` is ('megatron-bridge' for
    'megatron-bridge-25.11'), or None when the name is not ``<family>-YY.MM``."""
    match = _RELEASE.match(str(source))
    return match.group("family") if match else None


PARTS = ("dense", "moe")  # the dense runs' table, the mixture-of-experts runs' table


def _load(path: Path | None, part: str = "dense") -> dict:
    if part not in PARTS:
        raise ValueError(f"unknown cross-validation part {part!r}; one of {', '.join(PARTS)}")
    data = json.loads(Path(path or CROSS_VALIDATION).read_text())
    return data["moe"] if part == "moe" else data


def cross_validation_runs(path: Path | None = None, part: str = "dense") -> pd.DataFrame:
    """One row per run: ``id``, ``source``, ``stack``, ``system``, ``uncertain``,
    ``measured_s``, ``in_sample_s``, ``cross_validated_s`` and the signed errors
    ``in_sample_error_pct`` and ``cross_validated_error_pct``."""
    runs = pd.DataFrame(_load(path, part)["runs"])
    if runs.empty:
        return runs
    measured = runs["measured_s"].to_numpy(dtype=float)
    for kind in ("in_sample", "cross_validated"):
        runs[f"{kind}_error_pct"] = 100.0 * (1.0 - runs[f"{kind}_s"].to_numpy(float) / measured)
    return runs


def cross_validation_sources(path: Path | None = None, part: str = "dense") -> pd.DataFrame:
    """The per-source table as stored (``source``, ``runs``, ``uncertain``,
    ``in_sample_mean_pct`` … ``cross_validated_max_pct``: mean and max |error| in percent),
    plus ``family`` (the framework of a release, else ''), ``same_recipes`` (the other
    releases of that family in the table), ``fitted`` (whether any fit used the source) and
    ``reading`` (what its cross-validated error measures, in words). The summary row
    (:data:`ALL_FIRM`) comes last."""
    data = _load(path, part)
    table = pd.DataFrame(data["sources"])
    runs = pd.DataFrame(data["runs"])
    families = {s: release_family(s) for s in table["source"]}
    fitted = {}
    for source, part in runs.groupby("source"):
        fitted[source] = bool(np.any(np.abs(part["in_sample_s"].to_numpy(float)
                                            - part["cross_validated_s"].to_numpy(float))
                                     > 1e-12 * part["measured_s"].to_numpy(float)))
    table["family"] = [families[s] or "" for s in table["source"]]
    table["same_recipes"] = [
        [o for o, f in families.items() if f is not None and f == families[s] and o != s]
        for s in table["source"]]
    table["fitted"] = [fitted.get(s, s.startswith(SUMMARY)) for s in table["source"]]
    table["reading"] = [_reading(row) for row in table.to_dict("records")]
    rest = table[table["source"] != ALL_FIRM]
    return pd.concat([rest, table[table["source"] == ALL_FIRM]], ignore_index=True)


@memo.lru("fitted run ids", 1)
def fitted_run_ids() -> frozenset[str]:
    """The runs some fit used (scripts/calibrate fits each stack's η on its firm runs of each
    GPU, and its MoE token-kernel efficiency on its MoE runs): the firm runs of both tables."""
    runs = [r for part in PARTS for r in _load(None, part)["runs"]]
    return frozenset(r["id"] for r in runs if not r["uncertain"])


def _reading(row: dict) -> str:
    """What a source's cross-validated error measures."""
    if row["source"] == ALL_FIRM:
        return "every firm run, each predicted without its own source"
    if row["source"].startswith(SUMMARY):
        return "every firm run of the PyTorch-family stacks, each without its own source"
    parts = []
    if row["uncertain"]:
        parts.append("uncertain transcriptions (layout or measurement partly inferred)")
    if not row["fitted"]:
        parts.append("never fitted: held out in both columns")
    elif row["same_recipes"]:
        parts.append("repeatability, not generalisation: "
                     f"{', '.join(row['same_recipes'])} are releases of the same recipes")
    else:
        parts.append("generalisation: predicted with efficiencies fitted on other sources")
    return "; ".join(parts)
