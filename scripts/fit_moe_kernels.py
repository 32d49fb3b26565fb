"""Fit the grouped MoE kernel model (model/physics/kernels/moe_kernel.py) on NVIDIA
AIConfigurator 0.12.0's measured ``moe`` tables and write its parameters, held-out errors and a
down-sampled validation subset to model/data/reference/kernels/moe_kernels.json.

Dev-only: needs the unpacked wheel (PyPI ``aiconfigurator-core`` 0.12.0, Apache-2.0) and
pyarrow (``.venv/bin/pip install pyarrow``; never a runtime dependency).

    .venv/bin/python scripts/fit_moe_kernels.py [--root /tmp/aic/x] [--rows-per-group 25]

Rows: each table's ``balanced`` rows (AIConfigurator's collector ``balanced_logits``, ai-dynamo/
aiconfigurator collector/helper.py @ 095f58a: token t picks experts ⌊(t + j·⌈E/k⌉)⌋ mod E,
or ⌊t·⌈E/k⌉/T + j·⌈E/k⌉⌋ mod E when T < ⌈E/k⌉, j < k), timed on EP rank 0, which holds experts
0 … E/ep − 1 (collector/trtllm/collect_moe.py: ``Mapping`` with moe_ep_size, one GPU). The
script replays that routing exactly, so each row's touched local experts, routed rows and
per-expert row tiles are known. The ``power_law_*`` rows are random draws (five per timing)
and are not fitted. Held out: one expert configuration (hidden, intermediate, top-k, experts)
at a time, refitted on the others (median and 90th percentile of |t̂ − t|/t per GPU × dtype ×
engine).
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from model.physics.kernels import moe_kernel as mk  # noqa: E402

OUT = Path(__file__).resolve().parent.parent / "model/data/reference/kernels/moe_kernels.json"
PACKAGE, VERSION = "aiconfigurator-core", "0.12.0"
# the newest moe_perf table of each engine per GPU (older versions duplicate the sweep)
TABLES = {
    "h100_sxm": {"trtllm": "1.3.0rc20", "sglang": "0.5.14", "vllm": "0.24.0"},
    "h200_sxm": {"trtllm": "1.3.0rc20", "sglang": "0.5.14", "vllm": "0.24.0"},
    "b200_sxm": {"trtllm": "1.3.0rc20", "sglang": "0.5.14", "vllm": "0.24.0"},
    "gb200": {"trtllm": "1.3.0rc20", "sglang": "0.5.14", "vllm": "0.24.0"},
    "b300_sxm": {"trtllm": "1.3.0rc20", "sglang": "0.5.14", "vllm": "0.24.0"},
    "gb300": {"trtllm": "1.3.0rc20", "sglang": "0.5.14", "vllm": "0.24.0"},
    "a100_sxm": {"trtllm": "1.0.0", "sglang": "0.5.10", "vllm": "0.14.0"},
}
MAX_ROWS = 4000  # rows per group fitted (a seeded uniform sample of larger groups)
COLUMNS = ("kernel_source", "moe_dtype", "num_tokens", "hidden_size", "inter_size", "topk",
           "num_experts", "moe_tp_size", "moe_ep_size", "distribution", "latency")


def balanced_counts(tokens: int, experts: int, top_k: int) -> np.ndarray:
    """Tokens per expert of AIConfigurator's ``balanced_logits`` (module docstring): each
    token's distinct picks counted once."""
    stride = math.ceil(experts / top_k)
    t = np.arange(tokens, dtype=np.float64)[:, None]
    j = np.arange(top_k, dtype=np.float64)[None, :]
    if tokens >= stride:
        picks = (t + j * stride) % experts
    else:
        picks = (t * stride / tokens + j * stride) % experts
    picks = np.floor(picks).astype(np.int64)
    picks = np.sort(picks, axis=1)
    first = np.ones_like(picks, dtype=bool)
    first[:, 1:] = picks[:, 1:] != picks[:, :-1]
    return np.bincount(picks[first], minlength=experts)


def rank0_features(tokens, experts, top_k, ep, cache: dict) -> dict[str, float]:
    """Touched local experts, routed rows and row tiles of each height on EP rank 0."""
    key = (tokens, experts, top_k, ep)
    if key not in cache:
        counts = balanced_counts(tokens, experts, top_k)[: experts // ep]
        cache[key] = {"touched": float(np.count_nonzero(counts)), "routed": float(counts.sum()),
                      **{f"tiles_{int(b)}": float(np.ceil(counts / b).sum()) for b in mk.TILES}}
    return cache[key]


def read_table(path: Path) -> dict[str, np.ndarray]:
    import pyarrow.parquet as pq  # dev-only

    table = pq.read_table(path, columns=list(COLUMNS)).to_pydict()
    return {k: np.asarray(v) for k, v in table.items()}


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def group_rows(root: Path) -> tuple[dict, list[dict]]:
    """Rows per (gpu, engine, dtype) as column arrays, and each table's provenance."""
    cache: dict = {}
    groups: dict[tuple[str, str, str], dict[str, list]] = {}
    sources = []
    for gpu, engines in TABLES.items():
        for framework, version in engines.items():
            rel = (f"aiconfigurator_core/systems/data/{gpu}/moe/{framework}/{version}/"
                   "moe_perf.parquet")
            path = root / rel
            if not path.exists():
                continue
            sources.append({"path": rel, "sha256": sha256(path)})
            d = read_table(path)
            keep = d["distribution"] == "balanced"
            for i in np.flatnonzero(keep):
                engine = mk.engine_of(framework, str(d["kernel_source"][i]))
                dtype = str(d["moe_dtype"][i])
                if dtype not in mk.MOE_DTYPES:
                    continue
                t, e, k, ep = (int(d[c][i]) for c in ("num_tokens", "num_experts", "topk",
                                                        "moe_ep_size"))
                row = {"tokens": t, "hidden": int(d["hidden_size"][i]),
                       "inter": int(d["inter_size"][i]), "top_k": k, "experts": e,
                       "tp": int(d["moe_tp_size"][i]), "ep": ep,
                       "gated": int("nongated" not in str(d["kernel_source"][i])),
                       **rank0_features(t, e, k, ep, cache),
                       "latency_s": float(d["latency"][i]) * 1e-3}
                cols = groups.setdefault((gpu, engine, dtype), {})
                for name, value in row.items():
                    cols.setdefault(name, []).append(value)
    return {g: {k: np.asarray(v, dtype=float) for k, v in c.items()}
            for g, c in groups.items()}, sources


def summarise(groups: dict, per_group: int) -> tuple[list[dict], list[dict]]:
    """Fitted parameters and held-out errors per group; a down-sampled subset of rows."""
    rng, pick_rng = np.random.default_rng(0), np.random.default_rng(1)
    fits, subset = [], []
    for (gpu, engine, dtype), cols in sorted(groups.items()):
        if len(cols["latency_s"]) < 30:
            continue
        if len(cols["latency_s"]) > MAX_ROWS:  # a uniform sample keeps the fits quick
            pick = np.sort(rng.choice(len(cols["latency_s"]), MAX_ROWS, replace=False))
            cols = {k: v[pick] for k, v in cols.items()}
        theta, tile = mk.fit_group(cols, gpu, dtype)
        held = mk.held_out_errors_pct(cols, gpu, dtype, (theta, tile))
        inside = mk.relative_errors_pct(cols, gpu, dtype, theta, tile)
        if len(held) == 0:  # one configuration: nothing to hold it out against
            continue
        fits.append({"gpu": gpu, "engine": engine, "dtype": dtype,
                     "params": dict(zip(mk.PARAMS, (float(x) for x in theta))), "tile": tile,
                     "rows": int(len(inside)), "configs": int(len(np.unique(mk.config_id(cols)))),
                     "in_sample_median_pct": float(np.median(inside)),
                     "held_out_median_pct": float(np.median(held)),
                     "held_out_p90_pct": float(np.percentile(held, 90))})
        take = pick_rng.choice(len(inside), size=min(per_group, len(inside)), replace=False)
        for i in np.sort(take):
            subset.append({"gpu": gpu, "engine": engine, "dtype": dtype,
                           **{k: float(f"{v[i]:.6g}") for k, v in cols.items()}})
        print(f"{gpu:9s} {engine:16s} {dtype:18s} rows {len(inside):6d} held-out median "
              f"{fits[-1]['held_out_median_pct']:5.1f} % p90 {fits[-1]['held_out_p90_pct']:5.1f} %"
              f"  {fits[-1]['params']}", flush=True)
    return fits, subset


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default="/tmp/aic/x", help="the unpacked wheel")
    ap.add_argument("--rows-per-group", type=int, default=25)
    args = ap.parse_args()
    groups, sources = group_rows(Path(args.root))
    fits, subset = summarise(groups, args.rows_per_group)
    for f in fits:
        f["params"] = {k: float(f"{v:.6g}") for k, v in f["params"].items()}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    data = {"provenance": {"package": PACKAGE, "version": VERSION, "license": "Apache-2.0",
                           "tables": sources, "rows": "distribution == balanced",
                           "date": datetime.date.today().isoformat(),
                           "script": "scripts/fit_moe_kernels.py"},
            "model": "model/physics/kernels/moe_kernel.py", "params": list(mk.PARAMS),
            "fits": fits, "subset": subset}
    text = json.dumps({k: v for k, v in data.items() if k != "subset"}, indent=1)[:-2]
    rows = ",\n".join(json.dumps(r, separators=(",", ":")) for r in subset)
    OUT.write_text(f'{text},\n "subset": [\n{rows}\n]\n}}\n', encoding="utf-8")
    print(f"wrote {OUT} ({OUT.stat().st_size / 1e3:.0f} kB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
