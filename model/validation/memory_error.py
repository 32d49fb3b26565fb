"""How far the memory model can be trusted, and whether a configuration fits with it: "fits",
"tight" ("may not fit: X ± Y GB of Z") or "no".

The memory model's residuals are the memory figures of the fit data that measure what the
model computes — the bytes allocated: Korthikanti et al. 2022's per-GPU breakdowns (Table 2 and
§5: parameters + gradients + optimizer state, and activations, with and without sequence
parallelism and selective recompute; ``korthikanti`` cases of :mod:`model.validation`). No
parameter of the memory model is fitted to them, so each figure is already held out. The score
of a figure is |ln(predicted/measured)|; the memory interval at a coverage q is the
split-conformal radius r over those scores (:mod:`model.specs.conformal`), and a
configuration predicted to need M GB of a usable U GB:

* **fits** when M·e^r ≤ U; **no** when M·e^−r > U; else **tight**: "may not fit: M ± Y GB of U".

``python -m model.validation.memory_error --write`` stores the residuals in
``model/data/reference/memory_validation.json`` (``tests/test_memory_error.py`` checks the file
against the code), so a command reads them without predicting the runs again.

TorchTitan's Llama 3.1 H100 table lists ``Memory(GiB)`` as the caching allocator's peak
*reserved* memory (torchtitan's ``max_reserved_gib``, ``reserved_bytes.all.peak``), which holds
every allocated byte: :func:`torchtitan_reserved_rows` sets the model's allocated figure beside
it. Three mechanisms of the peak are modelled from the framework code
(:mod:`model.physics.peak_memory`): the eager FP32 cross-entropy's logit buffers (12 B a local
logit at the start of the backward), FSDP2's root (embedding, head) held gathered and, under
pipelining, FSDP2's gathered stage and its unsharded FP32 gradients (and PyTorch FSDP's FP32
shards counted as the master weights). What is left is not
modelled: the allocator's cached free blocks (torchtitan runs with
``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True``, ``run_llama_train.sh`` at 9dec370, so
whole-segment rounding is small; what it reserves beyond the peak allocation depends on the
order of every allocation and free), the per-stream pools of FSDP2's all-gather and
reduce-scatter buffers, and one block's recompute working set. NCCL's ring buffers
(:mod:`model.physics.runtime_memory`: at most 64 channels × 9.19 MiB per process group, under 2
GiB for these runs) are allocated by NCCL outside the caching allocator; the ``+ NCCL`` column
adds them as a bound.
"""

from __future__ import annotations

import argparse
import json
import math
import re
from pathlib import Path
from typing import Any

from model.engine import tight
from model.physics.runtime_memory import nccl_buffer_bytes
from model.specs import conformal, memo
from model.specs.conformal import COVERAGE
from model.specs.schema import DATA_DIR

STORED = DATA_DIR / "reference" / "memory_validation.json"
TITAN = DATA_DIR / "reference" / "torchtitan_llama3_h100_202412.md"
GIB = 2.0**30
STATES = ("fits", "tight", "no")


def compute_rows() -> list[dict[str, Any]]:
    """Every memory figure of the fit data with its prediction (GiB) and score."""
    from model.validation.published import cases_of, predict, reference_dir
    rows = []
    for c in cases_of(reference_dir(None), ("korthikanti",)):
        if c.skip or c.metric == "iteration_time_s":
            continue
        predicted = predict(c)
        rows.append({"id": c.id, "source": c.source, "metric": c.metric,
                     "measured_gib": round(c.measured, 6), "predicted_gib": round(predicted, 6),
                     "score": round(conformal.score(predicted, c.measured), 9)})
    return rows


@memo.lru("memory validation", 2)
def stored_rows(path: Path = STORED) -> tuple[dict[str, Any], ...]:
    return tuple(json.loads(path.read_text())["rows"])


def memory_radius(coverage: float = COVERAGE) -> float | None:
    """The split-conformal radius of the memory model's scores at ``coverage`` (None: too few
    figures): the one the searches keep tight candidates by (:mod:`model.engine.tight`)."""
    return tight.memory_radius(coverage)


def fit_status(memory_gb: float, usable_gb: float, coverage: float = COVERAGE
               ) -> tuple[str, str]:
    """("fits" | "tight" | "no", the words) for a configuration predicted to need
    ``memory_gb`` of a usable ``usable_gb``."""
    r = memory_radius(coverage)
    if r is None:  # no interval: the point estimate alone, said so
        state = "fits" if memory_gb <= usable_gb else "no"
        return state, f"{memory_gb:.1f} GB of {usable_gb:.1f} (memory interval not stated)"
    low, high = memory_gb * math.exp(-r), memory_gb * math.exp(r)
    half = (high - low) / 2
    if high <= usable_gb:
        return "fits", f"fits: {memory_gb:.1f} ± {half:.1f} GB of {usable_gb:.1f}"
    if low > usable_gb:
        return "no", f"does not fit: {memory_gb:.1f} ± {half:.1f} GB of {usable_gb:.1f}"
    return "tight", f"may not fit: {memory_gb:.1f} ± {half:.1f} GB of {usable_gb:.1f}"


def torchtitan_reserved_rows() -> list[dict[str, Any]]:
    """TorchTitan's published peak reserved memory per run (GiB, in table order), read from the
    copied table (for the comparison with the model's allocated figure)."""
    out = []
    for table, body in re.findall(r"\*\*Table (\d)\*\*(.*?)(?=\*\*Table|\Z)", TITAN.read_text(),
                                  re.S):
        for line in body.splitlines():
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) >= 3 and re.fullmatch(r"[\d.]+", cells[-1]):
                out.append({"table": int(table), "row": cells[0],
                            "reserved_gib": float(cells[-1])})
    return out


def compute_reserved_rows() -> list[dict[str, Any]]:
    """TorchTitan's runs of the fit data: the published peak reserved memory (GiB) beside the
    model's allocated prediction (GiB) — matched by table and row order."""
    from model.validation.published import PYTORCH_RUNS, predict_row, pytorch_cases
    published = torchtitan_reserved_rows()
    tables = {r["id"]: int(re.search(r"Table (\d)", r["source"]).group(1))
              for r in json.loads(PYTORCH_RUNS.read_text())["records"]
              if r["id"].startswith("torchtitan")}
    cases = [c for c in pytorch_cases() if c.id in tables
             and c.metric == "iteration_time_s" and not c.skip]
    out = []
    for table in sorted({tables[c.id] for c in cases}):
        mine = [c for c in cases if tables[c.id] == table]
        rows = [p for p in published if p["table"] == table]
        for c, p in zip(mine, rows, strict=False):
            row = predict_row(c)
            allocated = float(row["memory_gb"]) * 1e9 / GIB
            nccl = float(nccl_buffer_bytes(communicators(row))) / GIB
            out.append({"id": c.id, "table": table, "row": p["row"],
                        "reserved_gib": p["reserved_gib"],
                        "predicted_allocated_gib": round(allocated, 4),
                        "gap_pct": round(100 * (allocated / p["reserved_gib"] - 1), 2),
                        "nccl_rings_max_gib": round(nccl, 4),
                        "gap_with_nccl_pct": round(
                            100 * ((allocated + nccl) / p["reserved_gib"] - 1), 2)})
    return out


def communicators(row: Any) -> list[int]:
    """The sizes of a result row's process groups: TP (tp1·tp2, or tp1 and cp for the context
    strategy), DP, PP and EP."""
    second = int(row.get("tp2", 1))
    tp = [int(row["tp1"]), second] if row.get("strategy") == "context" else [
        int(row["tp1"]) * second]
    return [*tp, int(row["dp"]), int(row["pp"]), int(row.get("ep", 1))]


@memo.lru("torchtitan reserved", 2)
def stored_reserved_rows(path: Path = STORED) -> tuple[dict[str, Any], ...]:
    return tuple(json.loads(path.read_text())["torchtitan_reserved"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="the memory model's residuals")
    parser.add_argument("--write", action="store_true", help=f"write {STORED.name}")
    args = parser.parse_args(argv)
    rows = compute_rows()
    if args.write:
        STORED.write_text(json.dumps({"method": __doc__.split("\n\n")[1], "rows": rows,
                                      "torchtitan_reserved": compute_reserved_rows()},
                                     indent=1) + "\n")
    r = conformal.radius([x["score"] for x in rows], COVERAGE)
    print(f"{len(rows)} memory figures; 80 % radius {r if r is None else round(r, 4)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
