"""Load benchmark: concurrent what-if clients against ``gunicorn -w 2 app:server`` (prints
figures; not a test).

Run: python bench/load.py [--clients 50] [--requests 20] [--duration 60] [--think 0]
                          [--fresh 0.1] [--fresh-input hbm|nic]

The benchmark starts its own server on loopback — ``gunicorn -w 2 -b 127.0.0.1:<free port>
app:server`` from the repository's root, so ``gunicorn.conf.py`` supplies the rest (worker class,
threads, timeouts) — with ``PERF_CACHE_DIR`` in a temporary directory, waits until it serves, and
stops it at the end (also on an error or Ctrl-C).

Each client is a thread with its own keep-alive HTTP connection. It does what the browser does
when a control changes: a POST to ``/_dash-update-component`` for the scaling page's callback
(``dashboard.pages.scaling.update``: its outputs and inputs are read from
``/_dash-dependencies``, the callback whose inputs include the ``scenario`` store and whose
outputs include ``scaling-summary``), with the scenario as the store holds it; every
``--index-every``-th request is a page load (``GET /``) instead. Scenarios: the default
(gpt3-1t on H200, NVLink domain 8, three strategies × 13 GPU counts) with ``hbm_gb`` set to one
of ``--variants`` values, computed once before the run (so these requests are cache hits), or —
for a ``--fresh`` fraction of the requests — a scenario no one asked for before (a cache miss: the
estimator's sweep and five figures). ``--fresh-input`` says what such a new scenario changes:
``hbm`` (default) a new HBM capacity, which each worker's search cache
(``model/engine/frontier.py``) answers without evaluating candidates after its first evaluation;
``nic`` a new NIC bandwidth per GPU (``nic_gb_per_s``, the system's ``nic_bandwidth_gb_per_s``), a
cold search every time. All clients start together and send their next request ``--think`` seconds
after the previous answer (0: always one request in flight per client).

Bounded: at most ``--clients`` × ``--requests`` requests, no new request after ``--duration``
seconds, each request at most ``--timeout`` seconds. Prints (``bench/load_report.py``) clients,
requests, duration, throughput, latency percentiles (all, and per kind), errors (non-200, a wrong
answer, or no answer) and PASS/FAIL against the target: 50 concurrent clients, 0 errors,
p95 < 1 s.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.load_report import Result, report  # noqa: E402

HOST = "127.0.0.1"  # loopback only
HOT_HBM_GB = (141.0, 120.0, 96.0, 80.0, 192.0, 64.0, 160.0, 141.5, 100.0, 256.0)
STARTUP_S = 90.0  # the workers import the app (pandas, plotly, Dash pages) before they serve
# what a new scenario changes: --fresh-input → (scenario key, first never-used value)
FRESH_INPUTS = {"hbm": ("hbm_gb", 140.0), "nic": ("nic_gb_per_s", 50.0)}


# --------------------------------------------------------------------------- the server


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


class Server:
    """``gunicorn -w N -b 127.0.0.1:<port> app:server`` in its own process group."""

    def __init__(self, workers: int, work: Path) -> None:
        self.port = free_port()
        self.log_path = work / "gunicorn.log"
        env = {**os.environ, "PERF_CACHE_DIR": str(work / "cache"), "HOST": HOST}
        env.pop("REDIS_URL", None)  # one host: the embedded diskcache background manager
        env.pop("GUNICORN_BIND", None)
        self.cmd = [sys.executable, "-m", "gunicorn", "-w", str(workers), "-b",
                    f"{HOST}:{self.port}", "app:server"]
        self.log = open(self.log_path, "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(self.cmd, cwd=ROOT, env=env, stdout=self.log,
                                     stderr=subprocess.STDOUT, start_new_session=True)

    def wait_ready(self, timeout_s: float = STARTUP_S) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"gunicorn exited with {self.proc.returncode}:\n"
                                   + self.log_tail())
            try:
                status, _ = request(self.port, "GET", "/", timeout=5)
                if status == 200:
                    return
            except (OSError, http.client.HTTPException):
                pass
            time.sleep(0.2)
        raise RuntimeError(f"gunicorn did not serve within {timeout_s:.0f} s:\n"
                           + self.log_tail())

    def log_tail(self, lines: int = 30) -> str:
        self.log.flush()
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def describe(self) -> str:
        text = self.log_path.read_text(errors="replace")
        worker = re.search(r"Using worker: (\S+)", text)
        booted = len(re.findall(r"Booting worker", text))
        config = " (+ gunicorn.conf.py)" if (ROOT / "gunicorn.conf.py").is_file() else ""
        return (f"{' '.join(self.cmd[2:])}{config}: worker class "
                f"{worker.group(1) if worker else '?'}, {booted} workers booted")

    def stop(self) -> None:
        """SIGTERM to the master (graceful), then SIGKILL to its process group if it lingers."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)  # our child's own group only
                except ProcessLookupError:
                    pass
                self.proc.wait(timeout=10)
        self.log.close()


# --------------------------------------------------------------------------- requests


def request(port: int, method: str, path: str, body: bytes | None = None,
            timeout: float = 30.0, conn: http.client.HTTPConnection | None = None
            ) -> tuple[int, bytes]:
    own = conn is None
    conn = conn or http.client.HTTPConnection(HOST, port, timeout=timeout)
    try:
        headers = {"Content-Type": "application/json", "Accept": "application/json"} if body \
            else {}
        conn.request(method, path, body=body, headers=headers)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        if own:
            conn.close()


def outputs_of(spec: str) -> list[dict[str, Any]]:
    """Dash's output string ("..a.children...{"name":"b"}.figure..") as the renderer's list."""
    parts = spec[2:-2].split("...") if spec.startswith("..") else [spec]
    out = []
    for part in parts:
        cid, prop = part.rsplit(".", 1)
        out.append({"id": json.loads(cid) if cid.startswith("{") else cid, "property": prop})
    return out


# the scaling callback's other inputs, as the page loads them (dashboard/pages/scaling.py)
PAGE_INPUTS = {"scaling-threshold": 50, "scaling-breakdown-scale": "log"}


class WhatIf:
    """The scaling page's callback request, built from the server's own dependency list."""

    def __init__(self, port: int) -> None:
        status, data = request(port, "GET", "/_dash-dependencies")
        if status != 200:
            raise RuntimeError(f"/_dash-dependencies answered HTTP {status}")
        deps = json.loads(data)
        found = [d for d in deps
                 if any(i["id"] == "scenario" and i["property"] == "data" for i in d["inputs"])
                 and "scaling-summary" in d["output"]]
        if len(found) != 1:
            raise RuntimeError(f"expected one scaling callback, found {len(found)}")
        self.dep = found[0]
        status, page = request(port, "GET", "/")
        config = re.search(rb'<script id="_dash-config" type="application/json">(.*?)</script>',
                           page, re.S)
        end_id = json.loads(config.group(1)).get("end_id") if config else None
        # the renderer adds the page's signed endId to every callback request
        self.path = "/_dash-update-component" + (f"?endId={end_id}" if end_id else "")
        from dashboard.controls.scenario import default_scenario  # the store's value at page load
        self.base = default_scenario()

    def body(self, changes: dict[str, float]) -> bytes:
        """The request for the default scenario with ``changes`` (scenario key → value)."""
        scn = {**self.base, **changes}
        inputs = [{**i, "value": scn if i["id"] == "scenario" else PAGE_INPUTS[i["id"]]}
                  for i in self.dep["inputs"]]
        payload: dict[str, Any] = {
            "output": self.dep["output"], "outputs": outputs_of(self.dep["output"]),
            "inputs": inputs, "changedPropIds": ["scenario.data"]}
        if self.dep["state"]:
            payload["state"] = [{**s, "value": None} for s in self.dep["state"]]
        return json.dumps(payload).encode()


def answered(data: bytes) -> bool:
    """A real answer: Dash's response object with the page's outputs, the summary among them
    (checked on the bytes: parsing a few hundred kB of figures would load the client, which
    shares the machine with the server)."""
    head = data[:200]
    return (data.startswith(b"{") and b'"response"' in head and b'"scaling-summary"' in data
            and data.rstrip().endswith(b"}"))


# --------------------------------------------------------------------------- clients


Item = tuple[str, dict[str, float]]  # (kind, the scenario's changes from the default)


def plan(args: argparse.Namespace) -> list[list[Item]]:
    """Each client's requests: (kind, changes); a "hit" sets ``hbm_gb`` to a hot value, a "miss"
    sets the ``--fresh-input`` key to a value never used before (start + 0.001, + 0.002, …)."""
    rng = random.Random(args.seed)
    hot = HOT_HBM_GB[:args.variants]
    key, start = FRESH_INPUTS[args.fresh_input]
    fresh = iter(i * 0.001 for i in range(1, 10**7))  # never repeated
    plans = []
    for _ in range(args.clients):
        items: list[Item] = []
        for k in range(args.requests):
            if args.index_every and k % args.index_every == args.index_every - 1:
                items.append(("page", {}))
            elif rng.random() < args.fresh:
                items.append(("miss", {key: round(start + next(fresh), 3)}))
            else:
                items.append(("hit", {"hbm_gb": rng.choice(hot)}))
        plans.append(items)
    return plans


def run_client(port: int, whatif: WhatIf, items: list[Item], start: threading.Barrier,
               stop_at: list[float], args: argparse.Namespace, out: list[Result],
               lock: threading.Lock) -> None:
    conn = http.client.HTTPConnection(HOST, port, timeout=args.timeout)
    rng = random.Random()
    start.wait()
    try:
        for kind, changes in items:
            if time.monotonic() >= stop_at[0]:
                break
            body = None if kind == "page" else whatif.body(changes)
            t0 = time.perf_counter()
            try:
                if kind == "page":
                    status, data = request(port, "GET", "/", conn=conn)
                    ok = status == 200 and b"_dash-config" in data
                else:
                    status, data = request(port, "POST", whatif.path, body, conn=conn)
                    ok = status == 200 and answered(data)
                detail = str(status)
            except (OSError, http.client.HTTPException) as exc:
                ok, detail = False, type(exc).__name__
                conn.close()
                conn = http.client.HTTPConnection(HOST, port, timeout=args.timeout)
            ms = (time.perf_counter() - t0) * 1e3
            with lock:
                out.append(Result(kind, ms, ok, detail))
            if args.think:
                time.sleep(args.think * rng.uniform(0.5, 1.5))
    finally:
        conn.close()



def single_client(port: int, whatif: WhatIf, args: argparse.Namespace) -> dict[str, float]:
    """Latency of one request alone (warm server): a hit, a miss and a page load, median of 3.
    Also computes every hot variant once, so that they are hits in the run."""
    conn = http.client.HTTPConnection(HOST, port, timeout=args.timeout)
    times: dict[str, list[float]] = {"hit": [], "miss": [], "page": []}
    try:
        for hbm in HOT_HBM_GB[:args.variants]:
            status, data = request(port, "POST", whatif.path, whatif.body({"hbm_gb": hbm}),
                                   conn=conn)
            if status != 200 or not answered(data):
                raise RuntimeError(f"the warm-up what-if answered HTTP {status}: {data[:300]!r}")
        key, start = FRESH_INPUTS[args.fresh_input]
        for i in range(3):  # new values below the run's (start - 1 - 0.001·i): never repeated
            for kind, path, body in (
                    ("hit", whatif.path, whatif.body({"hbm_gb": HOT_HBM_GB[0]})),
                    ("miss", whatif.path, whatif.body({key: start - 1.0 - 0.001 * (i + 1)})),
                    ("page", "/", None)):
                t0 = time.perf_counter()
                request(port, "POST" if body else "GET", path, body, conn=conn)
                times[kind].append((time.perf_counter() - t0) * 1e3)
    finally:
        conn.close()
    return {k: sorted(v)[1] for k, v in times.items()}


def bounded(lo: float, hi: float, kind: type = int):
    def parse(text: str):
        value = kind(text)
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"must be in [{lo}, {hi}], got {text}")
        return value
    return parse


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", type=bounded(1, 500), default=50,
                    help="concurrent clients (default %(default)s)")
    ap.add_argument("--requests", type=bounded(1, 1000), default=20,
                    help="requests per client (default %(default)s)")
    ap.add_argument("--duration", type=bounded(1, 600, float), default=60.0,
                    help="no new request after this many seconds (default %(default)s)")
    ap.add_argument("--timeout", type=bounded(1, 300, float), default=60.0,
                    help="seconds one request may take (default %(default)s)")
    ap.add_argument("--think", type=bounded(0, 60, float), default=0.0,
                    help="seconds a client waits between requests, ±50%% (default %(default)s)")
    ap.add_argument("--fresh", type=bounded(0, 1, float), default=0.1,
                    help="fraction of what-ifs with a scenario never seen (cache misses; "
                         "default %(default)s)")
    ap.add_argument("--fresh-input", choices=sorted(FRESH_INPUTS), default="hbm",
                    help="what a new scenario changes: hbm (the HBM capacity, answered by the "
                         "search cache) or nic (the NIC bandwidth per GPU: a cold search); "
                         "default %(default)s")
    ap.add_argument("--variants", type=bounded(1, len(HOT_HBM_GB)), default=4,
                    help="HBM capacities the other what-ifs choose from (cache hits)")
    ap.add_argument("--index-every", type=bounded(0, 1000), default=10,
                    help="every N-th request of a client is a page load GET / (0: none)")
    ap.add_argument("--workers", type=bounded(1, 16), default=2,
                    help="gunicorn workers (default %(default)s)")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)

    def interrupt(signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)
    # Ctrl-C (even if the shell started us with SIGINT ignored) and kill: stop the server too
    signal.signal(signal.SIGINT, interrupt)
    signal.signal(signal.SIGTERM, interrupt)
    work = Path(tempfile.mkdtemp(prefix="perf-load-"))
    server = None
    try:
        t_start = time.perf_counter()
        server = Server(args.workers, work)
        server.wait_ready()
        whatif = WhatIf(server.port)
        print(f"server: {server.describe()} on {HOST}:{server.port}; started in "
              f"{time.perf_counter() - t_start:.1f} s")
        print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
              f"Python {platform.python_version()}")
        alone = single_client(server.port, whatif, args)
        print(f"one request alone (warm server, median of 3): what-if hit {alone['hit']:.0f} ms,"
              f" miss {alone['miss']:.0f} ms, page load {alone['page']:.0f} ms")

        plans = plan(args)
        results: list[Result] = []
        lock = threading.Lock()
        start = threading.Barrier(args.clients + 1)
        stop_at = [float("inf")]
        threads = [threading.Thread(target=run_client, daemon=True,
                                    args=(server.port, whatif, items, start, stop_at, args,
                                          results, lock))
                   for items in plans]
        for t in threads:
            t.start()
        start.wait()
        t0 = time.perf_counter()
        stop_at[0] = time.monotonic() + args.duration
        for t in threads:
            t.join(timeout=args.duration + args.timeout + 30)
        elapsed = time.perf_counter() - t0
        stuck = sum(t.is_alive() for t in threads)

        with lock:
            done = list(results)
        passed = report(done, sum(len(p) for p in plans), elapsed, stuck, args.clients,
                        args.think, args.variants, args.duration, args.fresh_input)
        return 0 if passed else 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
