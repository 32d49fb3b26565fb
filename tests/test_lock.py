"""The lock files (issue 9, item 7): ``requirements.lock`` and ``requirements-dev.lock`` pin every
package of ``requirements.txt`` / ``requirements-dev.txt`` (dependencies included) to one exact
version inside the declared range, with hashes; the scripts and CI install from them; every
direct requirement has an upper bound on its major version."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
LOCKS = {"requirements.txt": "requirements.lock", "requirements-dev.txt": "requirements-dev.lock"}


def requirements(name: str) -> list[Requirement]:
    """The requirements of a requirements file, ``-r`` includes followed."""
    out = []
    for line in (ROOT / name).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line.startswith("-r "):
            out += requirements(line[3:].strip())
        elif line:
            out.append(Requirement(line))
    return out


def pins(lock: str) -> dict[str, tuple[str, int]]:
    """name → (version, number of hashes) of a lock file."""
    text = (ROOT / lock).read_text()
    found = {}
    entry = r"^([A-Za-z0-9._-]+)==(\S+) \\\n((?:\s+--hash=sha256:[0-9a-f]{64}(?: \\)?\n)+)"
    for m in re.finditer(entry, text, re.M):
        found[canonicalize_name(m.group(1))] = (m.group(2), m.group(3).count("--hash="))
    entries = re.findall(r"^[A-Za-z0-9._-]+==", text, re.M)
    assert len(found) == len(entries), "an entry without hashes"
    return found


@pytest.mark.parametrize("source,lock", LOCKS.items())
def test_lock_pins_every_requirement_inside_its_range_with_hashes(source, lock):
    pinned = pins(lock)
    for req in requirements(source):
        version, hashes = pinned[canonicalize_name(req.name)]
        assert req.specifier.contains(version, prereleases=True), (req, version)
        assert hashes >= 1
    assert len(pinned) > len(requirements(source))  # dependencies are pinned too


@pytest.mark.parametrize("source", LOCKS)
def test_every_requirement_has_an_upper_bound(source):
    for req in requirements(source):
        assert any(s.operator in ("<", "<=", "==", "~=") for s in req.specifier), req


def floors() -> dict[str, Requirement]:
    """The production lock's security floors (security/production-floors.txt)."""
    out = {}
    for line in (ROOT / "security" / "production-floors.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            req = Requirement(line)
            out[canonicalize_name(req.name)] = req
    return out


def test_the_runtime_lock_is_inside_the_dev_lock_but_for_its_security_floors():
    """Same versions in both locks, except a package the production lock raises to a security
    floor the dev lock's test tools cannot take (issue 29, finding 11: urllib3, held at 1.26
    by selenium 4.2.0): the production lock is resolved on its own."""
    dev, floor = pins("requirements-dev.lock"), floors()
    assert "urllib3" in floor
    for name, (version, _) in pins("requirements.lock").items():
        if name in floor:
            assert floor[name].specifier.contains(version), (name, version)
        else:
            assert dev[name][0] == version, name


def test_the_production_lock_is_compiled_apart_with_its_floors():
    script = (ROOT / "scripts" / "lock").read_text()
    assert "compile requirements security/production-floors.txt" in script
    assert 'compile requirements-dev "$tools/tested.txt"' in script


def test_scripts_install_from_the_locks():
    setup = (ROOT / "scripts" / "setup-venv").read_text()
    assert "--require-hashes" in setup
    assert "setup-venv requirements.lock" in (ROOT / "scripts" / "run").read_text()
    assert "setup-venv requirements-dev.lock" in (ROOT / "scripts" / "test").read_text()
    assert "scripts/test" in (ROOT / ".ci" / "run").read_text()
