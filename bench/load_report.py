"""The printed report of ``bench/load.py``: latency percentiles, per-kind lines and the verdict
against the target (50 concurrent clients, 0 errors, p95 < 1 s)."""

from __future__ import annotations

from dataclasses import dataclass

TARGET_CLIENTS, TARGET_ERRORS, TARGET_P95_MS = 50, 0, 1000.0


@dataclass
class Result:
    kind: str  # "hit" (a scenario computed before), "miss" (a new one), "page" (GET /)
    ms: float
    ok: bool
    detail: str  # HTTP status or the exception


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in [0, 100]) of a non-empty list."""
    ordered = sorted(values)
    rank = max(1, int(-(-q * len(ordered) // 100)))
    return ordered[min(rank, len(ordered)) - 1]


def summary_line(label: str, results: list[Result]) -> str:
    ms = [r.ms for r in results]
    if not ms:
        return f"  {label:<28} n=0"
    return (f"  {label:<28} n={len(ms):<5} p50 {percentile(ms, 50):7.0f}  "
            f"p95 {percentile(ms, 95):7.0f}  p99 {percentile(ms, 99):7.0f}  "
            f"max {max(ms):7.0f} ms")


def report(done: list[Result], planned: int, elapsed: float, stuck: int, clients: int,
           think: float, variants: int, duration: float, fresh_input: str) -> bool:
    """Print the run's figures; True when the target is met."""
    errors = [r for r in done if not r.ok]
    kinds = {k: [r for r in done if r.kind == k] for k in ("hit", "miss", "page")}
    print()
    print(f"clients        {clients} (think time {think:g} s)")
    print(f"requests       {len(done)} of {planned} planned: {len(kinds['hit'])} what-if "
          f"hits ({variants} scenarios computed before), "
          f"{len(kinds['miss'])} what-if misses (new scenarios: a new {fresh_input} value), "
          f"{len(kinds['page'])} page loads"
          + (f"; {stuck} clients still waiting" if stuck else ""))
    print(f"duration       {elapsed:.1f} s (cap {duration:g} s)")
    print(f"throughput     {len(done) / elapsed:.1f} req/s")
    if done:
        ms = [r.ms for r in done]
        p50, p95, p99 = (percentile(ms, q) for q in (50, 95, 99))
        print(f"latency        p50 {p50:.0f} ms, p95 {p95:.0f} ms, p99 {p99:.0f} ms, "
              f"max {max(ms):.0f} ms")
    else:
        p95 = float("inf")
    print(summary_line("what-if, cache hit", kinds["hit"]))
    print(summary_line("what-if, cache miss", kinds["miss"]))
    print(summary_line("page load (GET /)", kinds["page"]))
    detail: dict[str, int] = {}
    for r in errors:
        detail[r.detail] = detail.get(r.detail, 0) + 1
    print(f"errors         {len(errors) + stuck}"
          + (f" ({', '.join(f'{k}: {v}' for k, v in sorted(detail.items()))})"
             if detail else ""))
    passed = clients >= TARGET_CLIENTS and not errors and not stuck and p95 < TARGET_P95_MS
    verdict = "PASS" if passed else "FAIL"
    print(f"target         {TARGET_CLIENTS} concurrent clients, {TARGET_ERRORS} errors, "
          f"p95 < {TARGET_P95_MS:.0f} ms: {verdict} ({clients} clients, "
          f"{len(errors) + stuck} errors, p95 {p95:.0f} ms"
          + (f", {p95 / TARGET_P95_MS:.1f}x the target" if p95 >= TARGET_P95_MS else "")
          + ")")
    return passed
