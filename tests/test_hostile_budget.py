"""Finding 4 of the probe (tests/test_hostile_requests.py): a scenario the form accepts but
whose design space would take 9 GB is counted first and refused with a message saying how to
narrow it (dashboard/jobs/budget.py) — checked in a process limited to 3 GB of address
space."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from test_hostile_requests import ROOT

FINDING4 = {"hidden": 98304, "heads": 768, "kv_heads": 768, "layers": 7560,
            "global_batch": 887040, "gpus": 887040, "nvs": 72, "design_strategy": "summa"}
MEMORY_SCRIPT = textwrap.dedent('''
    """The design page's callback for a memory-heavy scenario, in 3 GB of address space."""
    import json, resource, sys, time
    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, resource.RLIM_INFINITY))
    sys.path[:0] = [sys.argv[1], sys.argv[1] + "/tests"]
    import app
    from callbacks import Callbacks
    from dashboard.controls.scenario import default_scenario
    cbs = Callbacks.of_client(app.server.test_client())
    scn = {**default_scenario(), **json.loads(sys.argv[2])}
    out = {}
    for name in ("design-heatmap", "scaling-summary.children"):
        start = time.perf_counter()
        status, text = cbs.post(cbs.body(cbs.find(name), {
            "scenario": scn, "design-top": [], "scaling-threshold": 50,
            "scaling-breakdown-scale": "log"}))
        out[name] = [status, time.perf_counter() - start, text[:3000]]
    print("RESULT " + json.dumps(out))
''')


def test_finding4_a_memory_heavy_scenario_is_refused_by_budget(tmp_path):
    """Finding 4 (high): a scenario the form accepts (hidden 98,304, 7,560 layers, 887,040
    GPUs, NVLink 72, SUMMA) built 11.2 M design candidates: 9.1 GB. Now the size is counted
    first and the request refused with a message saying how to narrow it — here in a process
    limited to 3 GB of address space, where building it would fail."""
    script = tmp_path / "memory.py"
    script.write_text(MEMORY_SCRIPT)
    env = {**os.environ, "PERF_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, str(script), str(ROOT), json.dumps(FINDING4)],
                          env=env, capture_output=True, text=True, timeout=240)
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
    assert line, f"exit {proc.returncode}\n{proc.stderr[-3000:]}"
    out = json.loads(line.removeprefix("RESULT "))
    status, seconds, text = out["design-heatmap"]
    assert status == 200, text
    message = json.loads(text)["response"]["design-infeasible"]["children"]
    assert "configurations" in message and "GB" in message and "GPU" in message, message
    assert seconds < 30
    status, _, text = out["scaling-summary.children"]
    assert status == 200, text
