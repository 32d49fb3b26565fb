"""Check the locked versions against the PyPA advisory database, offline.

``.venv/bin/python scripts/audit.py`` reads every ``name==version`` of requirements.lock and
requirements-dev.lock and the advisories of those packages kept in
``security/pypa-advisories.json`` (extracted by ``scripts/advisories`` from
https://github.com/pypa/advisory-database at the commit the file names), and prints each
advisory whose affected ranges contain a locked version. Exit 0 when every hit is listed in
``security/accepted.json`` (with the reason it does not apply or is tolerated), 1 otherwise.
pip-audit needs the network (PyPI's JSON API or OSV); this needs nothing but the repository.

Each lock is checked on its own (the production lock, ``requirements.lock``, is what
``scripts/run`` and ``scripts/serve`` install; the dev lock adds the test tools), against the
extract plus ``security/advisories-supplement.json`` (advisories newer than the extract, from
their projects' release notes). The output's first line dates the data and says how old it is;
past :data:`STALE_DAYS` it says to refresh it: ``scripts/advisories`` (docs/deployment.md).

Ranges are read as OSV defines them (https://ossf.github.io/osv-schema/, "affected[].ranges"):
an ECOSYSTEM range's events, in order, open an interval at ``introduced`` and close it before
``fixed`` or after ``last_affected``; a version is also affected when listed in ``versions``.
Versions are compared as PEP 440 versions (``packaging``).
"""

from __future__ import annotations

import datetime as dt
import json
import re
import sys
from pathlib import Path

from packaging.version import InvalidVersion, Version

ROOT = Path(__file__).resolve().parent.parent
LOCKS = ("requirements.lock", "requirements-dev.lock")
DATABASE = ROOT / "security" / "pypa-advisories.json"
ACCEPTED = ROOT / "security" / "accepted.json"
SUPPLEMENT = ROOT / "security" / "advisories-supplement.json"
STALE_DAYS = 90


def normalize(name: str) -> str:
    """PEP 503's normalized project name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def locked(root: Path = ROOT, locks: tuple[str, ...] = LOCKS) -> dict[str, str]:
    """name → version of every package pinned in ``locks`` (one lock: its pins)."""
    pins: dict[str, str] = {}
    for lock in locks:
        for m in re.finditer(r"^([A-Za-z0-9_.-]+)==([^\s;\\]+)", (root / lock).read_text(),
                             re.M):
            pins[normalize(m.group(1))] = m.group(2)
    return pins


def database() -> dict:
    """The extract with the supplement's advisories added to its packages."""
    data = json.loads(DATABASE.read_text())
    for name, extra in json.loads(SUPPLEMENT.read_text())["packages"].items():
        known = {a["id"] for a in data["packages"].get(name, [])}
        data["packages"].setdefault(name, []).extend(a for a in extra if a["id"] not in known)
    return data


def dated(data: dict, today: dt.date | None = None) -> str:
    """The line that dates the advisory data (and says to refresh it when stale)."""
    committed = dt.date.fromisoformat(data["committed"][:10])
    age = ((today or dt.date.today()) - committed).days
    line = (f"advisory data: pypa/advisory-database {data['commit'][:12]} of {committed} "
            f"({age} days old) + {SUPPLEMENT.name}")
    if age > STALE_DAYS:
        line += f"; older than {STALE_DAYS} days: refresh it with scripts/advisories"
    return line


def _v(text: str) -> Version | None:
    try:
        return Version(text)
    except InvalidVersion:
        return None


def in_range(version: Version, events: list[dict[str, str]]) -> bool:
    """Whether ``version`` lies in an OSV ECOSYSTEM range given by its ``events``."""
    start: Version | None = None
    for event in events:
        if "introduced" in event:
            start = Version("0") if event["introduced"] == "0" else _v(event["introduced"])
        elif start is not None and "fixed" in event:
            end = _v(event["fixed"])
            if end is not None and start <= version < end:
                return True
            start = None
        elif start is not None and "last_affected" in event:
            end = _v(event["last_affected"])
            if end is not None and start <= version <= end:
                return True
            start = None
    return start is not None and start <= version  # introduced, never fixed


def affects(advisory: dict, version: str) -> bool:
    if advisory.get("withdrawn"):
        return False
    if version in advisory.get("versions", []):
        return True
    v = _v(version)
    return v is not None and any(in_range(v, events) for events in advisory.get("ranges", []))


def hits(pins: dict[str, str], database: dict) -> list[dict[str, str]]:
    """Every (package, locked version, advisory) whose ranges contain the locked version."""
    found = []
    for name, version in sorted(pins.items()):
        for adv in database["packages"].get(name, []):
            if affects(adv, version):
                found.append({"package": name, "version": version, "id": adv["id"],
                              "aliases": ", ".join(adv.get("aliases", [])),
                              "summary": adv.get("summary", "")[:120]})
    return found


def main() -> int:
    data = database()
    print(dated(data))
    missing = sorted(set(locked()) - set(data["packages"]))
    if missing:  # the extract predates a lock change: refresh it (scripts/advisories)
        print(f"not in the extract (run scripts/advisories): {', '.join(missing)}")
        return 1
    accepted = {(a["id"], a.get("lock", "requirements-dev.lock")): a["reason"]
                for a in json.loads(ACCEPTED.read_text())}
    bad = 0
    for lock in LOCKS:
        pins = locked(locks=(lock,))
        found = hits(pins, data)
        print(f"{lock}: {len(pins)} locked packages checked against pypa/advisory-database "
              f"{data['commit'][:12]} ({data['committed'][:10]}): {len(found)} hit(s)")
        for h in found:
            note = accepted.get((h["id"], lock))
            bad += note is None
            print(f"  {h['package']} {h['version']}: {h['id']} ({h['aliases']}) "
                  f"{'accepted: ' + note if note else 'NOT ACCEPTED'} — {h['summary']}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
