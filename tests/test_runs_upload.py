"""The Validation page's runs upload (dashboard/views/runs_upload.py): fitted like the CLI, refused
inline when bad or too large."""

from __future__ import annotations

import base64
import json

import pytest

from dashboard.views import runs_upload
from model.specs.stack import stack_from_dict
from model.validation.user_runs import calibrate_runs, runs_from_text
from tests.test_stacks import _synthetic_runs


def _contents(raw: bytes) -> str:
    return "data:application/json;base64," + base64.b64encode(raw).decode()


def test_upload_fits_like_the_command_line(tmp_path):
    raw = _synthetic_runs(tmp_path, 0.55).read_bytes()
    shown, fitted = runs_upload.fit_upload(_contents(raw), "torchtitan-2025")
    want = calibrate_runs(runs_from_text(raw, "torchtitan-2025"))["efficiency"]["h100"]
    assert want == pytest.approx(0.55, abs=0.002)
    assert stack_from_dict(fitted["stack"]).gemm_efficiency["h100"]["bf16"] == pytest.approx(
        want, abs=1e-4)
    assert fitted["fit"]["h100"]["runs"] == 3  # with its leave-one-out errors (test_fitted_stack)
    text = json.dumps(shown.to_plotly_json(), default=str)
    assert f"h100: {want:.3f}" in text and "leave-one-out" in text


def test_bad_or_large_uploads_are_refused_inline(tmp_path):
    scn = {"stack": "torchtitan-2025"}
    refused = runs_upload.upload_runs.__wrapped__(_contents(b'{"runs": 3}'), scn)
    assert "Runs refused" in str(refused[0].children) and refused[1] is None and refused[2]
    big = json.dumps({"runs": [{}] * (runs_upload.MAX_RUNS + 1)}).encode()
    refused = runs_upload.upload_runs.__wrapped__(_contents(big), scn)
    assert f"at most {runs_upload.MAX_RUNS}" in str(refused[0].children)
    huge = b" " * (runs_upload.MAX_BYTES + 1)
    with pytest.raises(Exception, match="over the 64 kB limit"):
        runs_upload.fit_upload(_contents(huge), "torchtitan-2025")


def test_every_refusal_names_the_file_and_why_and_clears_the_fit(tmp_path):
    """Issue 29, item 7: a 101 kB file or a .txt one was dropped silently in the browser and
    the previous fit stayed on screen as if it were the new file's."""
    scn = {"stack": "torchtitan-2025"}
    raw = _synthetic_runs(tmp_path, 0.55).read_bytes()
    for contents, name, why in (
            (_contents(b" " * (101 * 1024)), "runs.json", "101.0 kB, over the 64 kB limit"),
            (_contents(raw), "runs.txt", "not a JSON file (.txt)"),
            (_contents(b'{"runs": 3}'), "mine.json", "expected {\"runs\"")):
        shown, stored, disabled = runs_upload.upload_runs.__wrapped__(contents, scn, name)
        text = str(shown.children)
        assert text.startswith(f"Runs refused — {name}: ") and why in text, text
        assert "previous fit is cleared" in text and stored is None and disabled is True
    # the browser no longer drops a file over a size: a guard answers it (test_upload_guard)
    card = json.dumps(runs_upload.runs_card().to_plotly_json(), default=str)
    assert '"accept"' not in card  # a .txt is sent, then refused in words


def test_fit_rows_are_named_by_model_gpus_and_system(tmp_path):
    raw = _synthetic_runs(tmp_path, 0.55).read_bytes()
    shown, _ = runs_upload.upload_runs.__wrapped__(_contents(raw), {"stack": "torchtitan-2025"},
                                                   "mine.json")[:2]
    text = json.dumps(shown.to_plotly_json(), default=str, ensure_ascii=False)
    cases = runs_from_text(raw, "torchtitan-2025")
    for case in cases:
        assert f"{case.model.name} · {case.gpus:,} × {case.system.name}" in text
    assert '"run0"' not in text and "(mine.json)" in text
