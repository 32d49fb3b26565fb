"""The offline dependency check (issue 26): the locked versions against the PyPA advisory
database extract in ``security/`` (``scripts/audit.py``; docs/deployment.md)."""

from __future__ import annotations

import json
import runpy

import pytest
from test_server import ROOT

audit = runpy.run_path(str(ROOT / "scripts" / "audit.py"))
DATABASE = json.loads((ROOT / "security" / "pypa-advisories.json").read_text())


def test_no_locked_version_has_an_unaccepted_advisory(capsys):
    assert audit["main"]() == 0, capsys.readouterr().out
    out = capsys.readouterr().out
    assert f"pypa/advisory-database {DATABASE['commit'][:12]}" in out


def test_the_extract_covers_every_locked_package_and_names_its_commit():
    assert set(audit["locked"]()) <= set(DATABASE["packages"])
    assert len(DATABASE["commit"]) == 40 and DATABASE["source"].endswith("advisory-database")


def test_an_old_version_is_caught_by_the_real_extract():
    """gunicorn 19.4.5 had HTTP header splitting (PYSEC-2018-55, fixed in 19.5.0)."""
    found = audit["hits"]({"gunicorn": "19.4.5"}, DATABASE)
    assert "PYSEC-2018-55" in {h["id"] for h in found}
    assert "PYSEC-2018-55" not in {h["id"] for h in audit["hits"]({"gunicorn": "19.5.0"},
                                                                   DATABASE)}


@pytest.mark.parametrize("version,affected", [
    ("0.9", False), ("1.0", True), ("1.4.9", True), ("1.5", False), ("2.0", True),
    ("2.3", True), ("2.3.1", False), ("3.0", True), ("9.9", True)])
def test_osv_range_semantics(version, affected):
    """[1.0, 1.5) by 'fixed', [2.0, 2.3] by 'last_affected', 3.0 onwards never fixed."""
    advisory = {"ranges": [[{"introduced": "1.0"}, {"fixed": "1.5"}],
                           [{"introduced": "2.0"}, {"last_affected": "2.3"}],
                           [{"introduced": "3.0"}]], "versions": []}
    assert audit["affects"](advisory, version) is affected


def test_listed_versions_and_withdrawn_advisories():
    assert audit["affects"]({"ranges": [], "versions": ["1.2.3"]}, "1.2.3")
    assert not audit["affects"]({"ranges": [[{"introduced": "0"}]], "versions": [],
                                 "withdrawn": "2024-01-01"}, "1.0")


# --------------------------------------------------------------------------- issue 29, finding 11


def test_each_lock_is_audited_on_its_own_and_production_has_urllib3_2_5(capsys):
    """The production lock is resolved apart from the dev lock (whose selenium 4.2.0 holds
    urllib3 at 1.26): urllib3 >= 2.5.0 there, so CVE-2025-50181 (GHSA-pq67-6m6q-mj2v), which
    the supplement lets the audit see, hits the dev lock only (accepted, with its reason)."""
    from packaging.version import Version

    data = audit["database"]()
    prod = audit["locked"](locks=("requirements.lock",))
    dev = audit["locked"](locks=("requirements-dev.lock",))
    assert Version(prod["urllib3"]) >= Version("2.5.0")
    assert not [h for h in audit["hits"](prod, data) if h["package"] == "urllib3"]
    assert "GHSA-pq67-6m6q-mj2v" in {h["id"] for h in audit["hits"](dev, data)}
    assert audit["main"]() == 0
    out = capsys.readouterr().out
    assert "requirements.lock: " in out and "requirements-dev.lock: " in out


def test_the_output_dates_the_advisory_data_and_says_when_to_refresh():
    import datetime as dt

    data = {"commit": "3ccb612573e2511ab5cad7dafecd838605c80cda",
            "committed": "2024-10-10T17:35:05+00:00"}
    old = audit["dated"](data, dt.date(2026, 11, 27))
    assert "of 2024-10-10 (778 days old)" in old and "refresh it with scripts/advisories" in old
    fresh = audit["dated"](data, dt.date(2024, 11, 1))
    assert "(22 days old)" in fresh and "refresh" not in fresh
