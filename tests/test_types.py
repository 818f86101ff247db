"""The type checker runs over the packages pyproject's [tool.mypy] lists, and finds nothing.

mypy is a test dependency (`pip install -e '.[test]'`); it reads its configuration (the files
to check, per-module options) from pyproject.toml, so this test and a plain `mypy` in the
project agree."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# The packages that must stay checked: the engines, rules, search, service and protocol layers.
CORE = ["core", "rules", "formats", "app", "service", "store", "search", "markdown", "mcp", "http", "cli"]


def _config() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]


def test_core_packages_are_listed():
    """Dropping a core package from the checked files would make the clean run below meaningless."""
    files = [Path(f) for f in _config()["files"]]
    pkg = Path("src/memloci")
    for name in CORE:
        target = pkg / name
        assert any(target == f or f in target.parents for f in files), f"[tool.mypy] files does not cover {target}"
        assert (ROOT / target).exists(), target


@pytest.mark.timeout(900)  # a first run, with no cache, checks every module
def test_mypy_finds_no_errors():
    proc = subprocess.run([sys.executable, "-m", "mypy", "--config-file", "pyproject.toml"],
                          cwd=ROOT, capture_output=True, text=True, timeout=900)
    errors = [line for line in proc.stdout.splitlines() if ": error:" in line]
    assert proc.returncode == 0 and not errors, (
        f"mypy (exit {proc.returncode}) found {len(errors)} error(s):\n" + proc.stdout + proc.stderr)
    assert "Success: no issues found" in proc.stdout, proc.stdout + proc.stderr
