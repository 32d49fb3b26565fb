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
    with pytest.raises(Exception, match="over 64 kB"):
        runs_upload.fit_upload(_contents(huge), "torchtitan-2025")
