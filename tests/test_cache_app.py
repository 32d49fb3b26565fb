"""The background-callback cache (``$PERF_CACHE_DIR/background``) deleted while the app runs:
pages and what-if callbacks are still served, and a background sweep still completes
(checked in a subprocess, so this session's app keeps its own directory). Split from
tests/test_cache_faults.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from typing import Any

import pytest
import test_cache_faults
from test_cache_faults import ROOT

cache_dir = test_cache_faults.cache_dir  # its autouse fixture: a private cache per test


# --------------------------------------------------------------------------- the running app

APP_SCRIPT = textwrap.dedent('''
    """Start the app, delete its whole cache directory, then use it like a browser."""
    import json, os, re, shutil, sys, time
    from pathlib import Path
    sys.path.insert(0, sys.argv[1])
    import app
    from dashboard.controls.scenario import default_scenario

    client = app.server.test_client()
    html = client.get("/").get_data(as_text=True)
    config = re.search(r'<script id="_dash-config" type="application/json">(.*?)</script>',
                       html, re.S)
    end_id = json.loads(config.group(1)).get("end_id") if config else None
    deps = client.get("/_dash-dependencies").get_json()

    def outputs_of(spec):
        parts = spec[2:-2].split("...") if spec.startswith("..") else [spec]
        out = []
        for part in parts:
            cid, prop = part.rsplit(".", 1)
            out.append({"id": json.loads(cid) if cid.startswith("{") else cid,
                        "property": prop})
        return out

    def body(match, inputs, state):
        dep = next(d for d in deps if match in d["output"])
        return {"output": dep["output"], "outputs": outputs_of(dep["output"]),
                "inputs": [{**i, "value": inputs[i["id"]]} for i in dep["inputs"]],
                "state": [{**s, "value": state[s["id"]]} for s in dep["state"]],
                "changedPropIds": [f"{i['id']}.{i['property']}" for i in dep["inputs"]]}

    def update(data, query=""):
        q = f"?endId={end_id}" if end_id else ""
        return client.post("/_dash-update-component" + q + query, json=data)

    def sweep(clicks):
        """The HBM page's background sweep (2 x 2 systems), polled like the renderer does."""
        scn = dict(default_scenario(), strategy="1d", gpus=512)
        data = body("hbm-contour", {"hbm-run": clicks},
                    {"hbm-cap-min": 40, "hbm-cap-max": 400, "hbm-bw-min": 1,
                     "hbm-bw-max": 16, "hbm-steps": 2, "scenario": scn})
        first = update(data)
        if first.status_code != 200:
            return f"start: HTTP {first.status_code}"
        handle = first.get_json()
        if "response" in handle:
            return "done"
        for _ in range(120):
            time.sleep(0.25)
            res = update(data, f"&cacheKey={handle['cacheKey']}&job={handle['job']}")
            text = res.get_data(as_text=True)
            if res.status_code != 200:
                return f"poll: HTTP {res.status_code}"
            if '"response"' in text:
                return "done" if "hbm-contour" in text else "response without the figure"
        return "timeout"

    def scaling(hbm_gb):
        scn = dict(default_scenario(), strategy="1d", gpus_min=64, gpus_max=1024,
                   hbm_gb=hbm_gb)
        res = update(body("scaling-summary", {"scenario": scn, "scaling-threshold": 50,
                                              "scaling-breakdown-scale": "log"}, {}))
        return res.status_code, "Fastest" in res.get_data(as_text=True)

    out = {"before_sweep": sweep(1)}
    shutil.rmtree(os.environ["PERF_CACHE_DIR"])
    out["index"] = client.get("/").status_code
    out["layout"] = client.get("/_dash-layout").status_code
    out["scaling"] = [scaling(141.0), scaling(141.0), scaling(120.5)]
    out["results_dir"] = (Path(os.environ["PERF_CACHE_DIR"]) / "results").is_dir()
    out["after_sweep"] = [sweep(2), sweep(3)]
    print("RESULT " + json.dumps(out))
''')


@pytest.fixture(scope="module")
def app_after_deletion(tmp_path_factory) -> dict[str, Any]:
    """The app in a subprocess, its cache directory deleted after one background sweep."""
    work = tmp_path_factory.mktemp("app")
    script = work / "app_faults.py"
    script.write_text(APP_SCRIPT)
    env = {**os.environ, "PERF_CACHE_DIR": str(work / "cache")}
    env.pop("REDIS_URL", None)  # the default, one-host background manager
    proc = subprocess.run([sys.executable, str(script), str(ROOT)], cwd=work, env=env,
                          capture_output=True, text=True, timeout=300)
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
    assert line, f"exit {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    return json.loads(line.removeprefix("RESULT "))


def test_app_serves_after_its_cache_directory_is_deleted(app_after_deletion):
    out = app_after_deletion
    assert out["before_sweep"] == "done"
    assert out["index"] == 200 and out["layout"] == 200
    assert out["scaling"] == [[200, True]] * 3
    assert out["results_dir"]  # the results cache was re-created


def test_background_sweep_works_after_its_directory_is_deleted(app_after_deletion):
    """The background manager re-creates its diskcache directory: later sweeps complete. (A
    manager that kept the deleted directory — "unable to open database file" — reported every
    later sweep lost, and its poll answered HTTP 500, until the server restarted.)"""
    assert app_after_deletion["after_sweep"] == ["done", "done"]
