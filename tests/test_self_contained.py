"""The repository needs nothing beside it: code, tests, scripts, documentation and presets refer
only to files inside it, and the published reference data are the files as received.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from model.validation import REFERENCE, reference_dir

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted({*ROOT.glob("*.py"), *ROOT.glob("*.md"), *ROOT.glob("*.toml"),
                  *ROOT.glob("requirements*.txt"), *ROOT.glob("scripts/*"), *ROOT.glob(".ci/*"),
                  *ROOT.glob("model/**/*.py"), *ROOT.glob("dashboard/**/*.py"),
                  *ROOT.glob("tests/**/*.py"), *ROOT.glob("bench/*.py"),
                  *ROOT.glob("docs/*.md"), *ROOT.glob("model/data/systems/*.json"),
                  *ROOT.glob("model/data/workloads/*.json"),
                  ROOT / "model" / "data" / "reference" / "README.md"}
                 - {Path(__file__).resolve()})
# what pointed outside the repository before: the folder beside it, this machine's paths, the
# specification that was never part of the repository, notes beside it
OUTSIDE = ("../shared", "/work/", "shared/reference", "shared/spec", "shared/notes",
           "paper-model.md", "spec §", "notes/hardware.md")
FILE_ANCHOR = re.compile(r"Path\(__file__\)\.resolve\(\)((?:\.parent)+|\.parents\[(\d+)\])")
MARKDOWN_LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
MENTIONED_FILE = re.compile(r"`((?:[\w.-]+/)+[\w.-]+\.(?:py|json|md|txt|toml))`")


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


def test_sources_are_found():
    names = {p.relative_to(ROOT).as_posix() for p in SOURCES}
    assert {"README.md", "model/validation/__init__.py", "tests/test_parity.py", "scripts/test",
            "docs/model.md", "model/data/systems/h100.json"} <= names


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_reference_to_anything_outside_the_repository(path):
    text = _text(path)
    found = [word for word in OUTSIDE if word in text]
    assert not found, f"{path.relative_to(ROOT)} refers outside the repository: {found}"
    for match in FILE_ANCHOR.finditer(text):  # Path(__file__) climbing out of the checkout
        ups = int(match.group(2)) + 1 if match.group(2) else match.group(1).count(".parent")
        target = path.resolve().parents[ups - 1]
        assert target == ROOT or ROOT in target.parents, (path, match.group(0))


@pytest.mark.parametrize("path", [p for p in SOURCES if p.suffix == ".md"],
                         ids=lambda p: p.relative_to(ROOT).as_posix())
def test_documents_link_and_name_only_files_that_exist(path):
    text = _text(path)
    for link in MARKDOWN_LINK.findall(text):
        if "://" in link:
            continue
        assert (path.parent / link).resolve().exists(), (path.name, link)
    for name in MENTIONED_FILE.findall(text):
        candidates = (ROOT / name, path.parent / name, REFERENCE / name)
        assert any(c.exists() for c in candidates), (path.name, name)


def test_validation_reads_the_package_s_reference_data_only():
    assert reference_dir() == ROOT / "model" / "data" / "reference"
    assert REFERENCE.is_relative_to(ROOT)


def test_reference_files_are_the_files_as_received():
    """model/data/reference/README.md lists the SHA-256 of the files copied as received."""
    listed = re.findall(r"^([0-9a-f]{64})  (\S+)$", _text(REFERENCE / "README.md"), re.M)
    assert len(listed) == 3  # moe_measurements.json carries a correction and recipe facts
    for digest, name in listed:
        assert hashlib.sha256((REFERENCE / name).read_bytes()).hexdigest() == digest, name
