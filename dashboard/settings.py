"""The dashboard's deployment settings, read from the environment once, here and nowhere else.

Every other module takes :data:`SETTINGS` (or a value derived from it at import); a test
(``tests/test_dashboard_edges.py``) checks that no other file of ``model/`` or ``dashboard/`` reads
``os.environ``. ``gunicorn.conf.py`` keeps its own reads: gunicorn's master process executes it
before the app is imported (its ``GUNICORN_*_TIMEOUT`` values are read here as well, for the
worker class that enforces them).

======================================  ==========================================  ===========
variable                                field                                       default
======================================  ==========================================  ===========
``PERF_CACHE_DIR``                      :attr:`Settings.cache_dir`                  ``cache/``
``PERF_CACHE_SIZE_BYTES``               :attr:`Settings.cache_size_bytes`           2**30
``PERF_CACHE_BACKOFF_S``                :attr:`Settings.cache_backoff_s`            30
``PERF_CLIENT_SECRET_FILE``             :attr:`Settings.client_secret_file`         in the cache
``PERF_PUBLIC_HOST``                    :attr:`Settings.public_host`                localhost
``PERF_PUBLIC_SCHEME``                  :attr:`Settings.public_scheme`              http
``PERF_REQUEST_MEMORY_MB``              :attr:`Settings.request_memory_bytes`       1024 MiB
``PERF_REQUEST_TIME_S``                 :attr:`Settings.request_time_s`             10
``PERF_SWEEP_TIME_BUDGET_S``            :attr:`Settings.sweep_time_budget_s`        300
``PERF_JOB_TIMEOUT_S``                  :attr:`Settings.job_timeout_s`              sweep + 30
``PERF_JOB_MEMORY_MB``                  :attr:`Settings.job_memory_bytes`           2 × request
``PERF_MAX_JOBS``                       :attr:`Settings.max_jobs`                   CPU count
``PERF_MAX_JOBS_PER_CLIENT``            :attr:`Settings.max_jobs_per_client`        half, ≥ 1
``REDIS_URL``                           :attr:`Settings.redis_url`                  none
``BROWSER_PATH``                        :attr:`Settings.browser_path`               found
``GUNICORN_READ_TIMEOUT``               :attr:`Settings.read_timeout_s`             10
``GUNICORN_REQUEST_TIMEOUT``            :attr:`Settings.request_timeout_s`          60
``GUNICORN_WRITE_TIMEOUT``              :attr:`Settings.write_timeout_s`            30
``GUNICORN_OUTBOX_MB``                  :attr:`Settings.outbox_bytes`               64 MiB
``PORT``                                :attr:`Settings.port`                       8050
======================================  ==========================================  ===========
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MIB = 2**20


@dataclass(frozen=True)
class Settings:
    """One deployment's settings (SI units: bytes, seconds)."""

    cache_dir: Path
    cache_size_bytes: int
    cache_backoff_s: float
    client_secret_file: Path
    public_host: str
    public_scheme: str  # "http" or "https"
    request_memory_bytes: int
    request_time_s: float
    sweep_time_budget_s: float
    job_timeout_s: float
    job_memory_bytes: int
    max_jobs: int
    max_jobs_per_client: int
    redis_url: str | None
    browser_path: str | None
    read_timeout_s: float
    request_timeout_s: float
    write_timeout_s: float
    outbox_bytes: int
    port: int

    @classmethod
    def from_environ(cls, env: Mapping[str, str]) -> Settings:
        """The settings ``env`` (an environment mapping) gives, defaults for what it lacks."""
        cache_dir = Path(env.get("PERF_CACHE_DIR", ROOT / "cache"))
        request_memory_bytes = int(float(env.get("PERF_REQUEST_MEMORY_MB", 1024)) * MIB)
        sweep_s = float(env.get("PERF_SWEEP_TIME_BUDGET_S", 300))
        max_jobs = int(env.get("PERF_MAX_JOBS", os.cpu_count() or 1))
        return cls(
            cache_dir=cache_dir,
            cache_size_bytes=int(float(env.get("PERF_CACHE_SIZE_BYTES", 2**30))),
            cache_backoff_s=float(env.get("PERF_CACHE_BACKOFF_S", 30)),
            client_secret_file=Path(env.get("PERF_CLIENT_SECRET_FILE")
                                    or cache_dir / "client-secret"),
            public_host=env.get("PERF_PUBLIC_HOST", "localhost"),
            public_scheme="https" if env.get("PERF_PUBLIC_SCHEME") == "https" else "http",
            request_memory_bytes=request_memory_bytes,
            request_time_s=float(env.get("PERF_REQUEST_TIME_S", 10)),
            sweep_time_budget_s=sweep_s,
            job_timeout_s=float(env.get("PERF_JOB_TIMEOUT_S", sweep_s + 30)),
            job_memory_bytes=int(float(env.get("PERF_JOB_MEMORY_MB",
                                               2 * request_memory_bytes / MIB)) * MIB),
            max_jobs=max_jobs,
            max_jobs_per_client=int(env.get("PERF_MAX_JOBS_PER_CLIENT", max(1, max_jobs // 2))),
            redis_url=env.get("REDIS_URL", "").strip() or None,
            browser_path=env.get("BROWSER_PATH") or None,
            read_timeout_s=float(env.get("GUNICORN_READ_TIMEOUT", 10)),
            request_timeout_s=float(env.get("GUNICORN_REQUEST_TIMEOUT", 60)),
            write_timeout_s=float(env.get("GUNICORN_WRITE_TIMEOUT", 30)),
            outbox_bytes=int(env.get("GUNICORN_OUTBOX_MB", 64)) * MIB,
            port=int(env.get("PORT", 8050)),
        )


SETTINGS = Settings.from_environ(os.environ)


def export_to_children(name: str, value: str) -> None:
    """Set ``name`` in this process's environment for the programs it starts (the PNG export's
    ``chromium-offline`` wrapper reads the real browser from ``PERF_CHROMIUM``)."""
    os.environ[name] = value
