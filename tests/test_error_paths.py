"""Issue 26, finding 4: valid inputs gave a 500 with a traceback — the Plan & cost callback had
no error path (node size larger than "plan up to", a target of 3,650 days or more, the host's
job limit reached) — and two request shapes (a clientside callback's output, a deeply nested
JSON body) still answered 500 with a full traceback logged (655 per second from one client).
Now every such case is an inline message, or a 400 with one log line."""

from __future__ import annotations

import json
import logging
import time

import pytest
from test_server import callback_body, dash_app, gunicorn, http

from dashboard.controls.scenario import default_scenario, validate_scenario
from dashboard.jobs import planner
from dashboard.pages import plan as page
from dashboard.server import guard

SCN = {**default_scenario(), "strategy": "1d"}


def outputs(**over) -> dict:
    scn, errors = validate_scenario({**SCN, **over})
    assert scn is not None, errors  # valid inputs: the form accepts them
    names = ["headline", "message", *(k for k, _ in page.ANSWER), *page.INPUTS, "sources",
             "pareto", "lost"]
    return dict(zip(names, page.update(scn), strict=True))


def test_finding4_a_node_larger_than_plan_up_to_is_an_inline_message():
    out = outputs(node_gpus=16, plan_max_gpus=8)
    assert out["message"] == ("the largest GPU count to plan (8) is smaller than one node "
                              "(16 GPUs): nothing to search")
    assert out["gpus"] == "–"


@pytest.mark.parametrize("days", [3650.0, 36_500.0])
def test_finding4_a_target_of_ten_years_or_more_is_answered(days):
    """It failed writing the lost-node frame (a numpy bool the JSON cache could not write)."""
    out = outputs(target_days=days, plan_goal="days", plan_max_gpus=4096)
    assert out["message"] == "" and out["gpus"] != "–", out["message"]
    assert out["lost"]["data"]  # the lost-node view drawn


def test_finding4_any_failure_in_a_page_callback_is_an_inline_message(monkeypatch, caplog):
    def broken(_scn):
        raise KeyError("a bug")

    monkeypatch.setattr(planner, "answer", broken)
    guard._logged.clear()
    with caplog.at_level(logging.ERROR, logger="dashboard.server.guard"):
        first, second = outputs(budget=1.23e12), outputs(budget=1.24e12)
    assert first["message"].startswith("The server could not compute this view (KeyError)")
    assert second["message"] == first["message"]
    lines = [r for r in caplog.records if r.name == "dashboard.server.guard"]
    assert len(lines) == 2 and lines[0].exc_info and not lines[1].exc_info  # traceback once


def test_finding4_a_refused_plan_job_is_an_inline_message_over_http(tmp_path):
    """The host's job limit reached (here 0 jobs allowed): the Plan & cost page's job is
    refused and the poll answers its outputs with the reason, not a 500."""
    server = gunicorn(tmp_path / "cache", tmp_path / "gunicorn.log", "-w", "1",
                      env={"PERF_MAX_JOBS": "0"})
    try:
        deps = json.loads(http(server.url + "/_dash-dependencies")[2])
        # the page's job (the callback the request hands a plan to: dashboard/pages/plan.py)
        data = json.dumps(callback_body(deps, "plan-ready.data", {"plan-job": SCN})).encode()
        status, _, raw = http(server.url + "/_dash-update-component", data)
        assert status == 200, raw[:300]
        job = last = json.loads(raw)
        deadline = time.monotonic() + 30
        while "response" not in last and time.monotonic() < deadline:
            time.sleep(0.2)
            status, _, raw = http(server.url + "/_dash-update-component?cacheKey="
                                  f"{job['cacheKey']}&job={job['job']}", data)
            assert status == 200, raw[:300]
            last = json.loads(raw) if raw.strip() else {}  # empty or progress while it runs
        message = last["response"]["plan-ready"]["data"]["failed"]  # shown by plan.ready
        assert message.startswith("Planning failed: the server is running its limit of 0")
        assert "Traceback" not in server.log.read_text()
    finally:
        server.stop()


def _body_for(output: str) -> bytes:
    client = dash_app.server.test_client()
    deps = client.get("/_dash-dependencies").get_json()
    body = callback_body(deps, "root.className", {"scenario": SCN})
    body.update(output=output, outputs={"id": output.split(".")[0],
                                        "property": output.split(".")[1]})
    return json.dumps(body).encode()


@pytest.mark.parametrize("shape", ["clientside", "nested-parser", "nested-walk"])
def test_finding4_malformed_shapes_are_400_with_one_log_line(shape, caplog):
    data = {"clientside": lambda: _body_for("_pages_dummy.children"),
            "nested-parser": lambda: b"[" * 100_000 + b"]" * 100_000,
            "nested-walk": lambda: b'{"output": ' + b"[" * 500 + b"]" * 500 + b"}"}[shape]()
    client = dash_app.server.test_client()
    with caplog.at_level(logging.INFO):
        res = client.post("/_dash-update-component", data=data,
                          content_type="application/json")
    assert res.status_code == 400, res.data[:300]
    loud = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(loud) == 1 and loud[0].exc_info is None, loud
    assert "Traceback" not in caplog.text
