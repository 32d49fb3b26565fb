"""How long a background job takes to start and to answer (issue 29, item 1): the diskcache
manager's ``call_job_fn`` (one host, no Redis) on a job that stores one value, timed from this
process. Prints, in milliseconds, the first job (which starts the forkserver, where there is
one) and the median and 95th percentile of ``N`` more:

* ``start``: ``call_job_fn`` returning (the slot reserved in the job store, the process
  started);
* ``answer``: until the job's result can be read from the store (as a page's poll reads it).

    PYTHONPATH=$PWD .venv/bin/python bench/job_start.py 40

Run it from another checkout (``PYTHONPATH=/path/to/old``) to time that tree's jobs: it uses only
``dashboard.jobs.background.DiskcacheJobs``.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path


def store_done(key, progress_key, store, context) -> None:
    """The job: one value written to the job store."""
    store.set(key, "done")


def one(jobs, key: str) -> tuple[float, float]:
    """(start, answer) of one job, in seconds."""
    start = time.perf_counter()
    pid = jobs.call_job_fn(key, store_done, jobs.handle, {})
    started = time.perf_counter() - start
    while jobs.handle.get(key) is None:
        time.sleep(0.001)
    answered = time.perf_counter() - start
    jobs.terminate_job(pid)  # as Dash does once it has the result
    return started, answered


def p95(values: list[float]) -> float:
    """The 95th percentile (nearest rank)."""
    return sorted(values)[max(0, int(round(0.95 * len(values))) - 1)]


def main(n: int) -> None:
    from dashboard.jobs import background

    background.MAX_JOBS = background.MAX_JOBS_PER_CLIENT = 10**6
    with tempfile.TemporaryDirectory() as tmp:
        jobs = background.DiskcacheJobs(Path(tmp) / "background")
        jobs.handle.set("warm", 1)  # the store exists: only the job is timed
        first = one(jobs, "first")
        times = [one(jobs, f"job-{i}") for i in range(n)]
    starts, answers = ([t[i] * 1e3 for t in times] for i in (0, 1))
    print(f"first job: start {first[0] * 1e3:.0f} ms, answer {first[1] * 1e3:.0f} ms")
    print(f"{n} jobs: start p50 {statistics.median(starts):.1f} ms, p95 {p95(starts):.1f} ms; "
          f"answer p50 {statistics.median(answers):.1f} ms, p95 {p95(answers):.1f} ms")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 40)
