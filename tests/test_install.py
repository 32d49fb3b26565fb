"""The package installs: ``pip install .`` gives the ``tperf`` command and ``import model`` with
its presets and reference data, used from a folder that is not the checkout.

The wheel is built from a copy of what pyproject.toml packages (so the checkout gets no build/
or egg-info) and installed with ``--no-deps`` into a prefix; the interpreter running the tests
provides numpy and pandas. Building needs setuptools from the package index pip is set up with.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import tomllib

import model

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Build and install the package into a fresh prefix; where its script and modules are."""
    tmp = tmp_path_factory.mktemp("install")
    src = tmp / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "model", src / "model",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    prefix = tmp / "prefix"
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-cache-dir",
         "--prefix", str(prefix), str(src)],
        capture_output=True, text=True, timeout=600, check=False, cwd=tmp)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    site = Path(sysconfig.get_path("purelib", vars={"base": str(prefix)}))
    elsewhere = tmp / "elsewhere"  # neither the checkout nor the source copy
    elsewhere.mkdir()
    return {"prefix": prefix, "site": site, "cwd": elsewhere}


def _run(installed: dict[str, Path], argv: list[str]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(installed["site"])}
    return subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False,
                          cwd=installed["cwd"], env=env)


def test_console_command_lists_the_presets(installed):
    script = installed["prefix"] / "bin" / "tperf"
    assert script.is_file()
    proc = _run(installed, [str(script), "models", "--json"])
    assert proc.returncode == 0, proc.stderr
    names = [m["name"] for m in json.loads(proc.stdout)]
    assert names == model.list_models() and "llama3-8b" in names
    usage = _run(installed, [str(script), "--help"])
    assert usage.returncode == 0 and usage.stdout.startswith("usage: tperf")


def test_console_command_validates_from_the_installed_reference_data(installed):
    proc = _run(installed, [str(installed["prefix"] / "bin" / "tperf"), "validate", "--json"])
    assert proc.returncode == 0, proc.stderr
    records = json.loads(proc.stdout)["records"]
    assert {r["set"] for r in records} >= {"korthikanti", "measurements", "megatron-bridge-extra"}
    assert sum(r["skipped"] == "" for r in records) > 50


def test_import_model_from_another_folder_uses_the_installed_copy(installed):
    code = ("import model, json; "
            "m = model.load_model('llama3-8b'); s = model.load_system('h100'); "
            "r = model.search(m, s, 64, 256, '1d', top_k=1); "
            "print(json.dumps([model.__file__, model.__version__, bool(r.best['fits'])]))")
    proc = _run(installed, [sys.executable, "-c", code])
    assert proc.returncode == 0, proc.stderr
    where, version, fits = json.loads(proc.stdout)
    assert Path(where).resolve().is_relative_to(installed["site"].resolve())
    assert version == model.__version__ and fits


def test_python_dash_m_model_still_runs_from_the_checkout():
    proc = subprocess.run([sys.executable, "-m", "model", "systems"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0 and "h100" in proc.stdout, proc.stderr


def _requirement_lines(path: Path) -> set[str]:
    lines = (line.split("#")[0].strip() for line in path.read_text(encoding="utf-8").splitlines())
    return {line for line in lines if line and not line.startswith("-")}


def test_pyproject_dependencies_are_requirements_txt():
    """pip install . (estimator) plus [dashboard] pins exactly what requirements.txt pins."""
    project = PYPROJECT["project"]
    declared = set(project["dependencies"]) | set(project["optional-dependencies"]["dashboard"])
    wanted = _requirement_lines(ROOT / "requirements.txt")
    assert declared == wanted, ("pyproject.toml and requirements.txt differ: "
                                f"only in pyproject {sorted(declared - wanted)}, "
                                f"only in requirements.txt {sorted(wanted - declared)}")
    assert set(project["dependencies"]) == {"numpy>=2.0,<3", "pandas>=2.2,<4"}


def test_package_data_covers_every_data_file():
    """Every file under model/data matches a package-data pattern (else an install lacks it)."""
    patterns = PYPROJECT["tool"]["setuptools"]["package-data"]["model"]
    data = ROOT / "model" / "data"
    files = [p.relative_to(ROOT / "model") for p in data.rglob("*") if p.is_file()]
    assert files
    unmatched = [str(f) for f in files if not any(f.match(pat) for pat in patterns)]
    assert unmatched == []


def _setup_venv_install_line() -> list[str]:
    """The pip arguments scripts/setup-venv installs the checkout with (after the lock)."""
    lines = (ROOT / "scripts" / "setup-venv").read_text(encoding="utf-8").splitlines()
    [line] = [ln for ln in lines if " -e ." in ln and "pip install" in ln]
    words = line.split()
    return words[words.index("install"):]


def test_setup_venv_puts_tperf_in_the_venv(tmp_path):
    """scripts/setup-venv's editable install gives ``.venv/bin/tperf``, usable from any folder.

    Run with the same pip arguments in a fresh venv (no pip of its own) that sees this
    interpreter's packages (numpy, pandas, pip, setuptools: what the lock installed) through a
    .pth file, on a copy of the checkout.
    """
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=120)
    [site] = (venv / "lib").glob("python*/site-packages")
    (site / "shared.pth").write_text(sysconfig.get_path("purelib") + "\n", encoding="utf-8")
    src = tmp_path / "checkout"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "model", src / "model",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    args = _setup_venv_install_line()
    assert args[-2:] == ["-e", "."] and "--no-deps" in args
    proc = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", *args[:-1], str(src)],
                          capture_output=True, text=True, timeout=300, check=False, cwd=src)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = subprocess.run([str(venv / "bin" / "tperf"), "systems", "--json"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    assert "h100" in {s["name"] for s in json.loads(out.stdout)}
