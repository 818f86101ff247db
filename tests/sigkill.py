"""SIGKILL rounds for the tests, through `memloci bench crash` (its writer process, its kills and
its all-or-nothing checks), and the checks of store/markdown/audit.py as assertions, for a test
that kills a process itself: files and index agree, no temp file is left."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

from memloci.store.markdown.audit import index_disagreements, temp_files_left

KINDS = ("create", "rename", "merge", "delete", "add_observations", "reindex", "duplicates")  # `memloci bench crash --kinds`


def kill_rounds(kind: str, engine: str, rounds: int, work: Path, size: int | None = None,
                url: str | None = None) -> dict[str, Any]:
    """`memloci bench crash` on one write kind and engine: its result for them ({all, none,
    failures, ...}). The bench exits 1 when a round failed; the failures are in its JSON."""
    work.mkdir(parents=True, exist_ok=True)
    out = work / "crash.json"
    argv = [sys.executable, "-m", "memloci", "bench", "crash", "--rounds", str(rounds), "--kinds", kind,
            "--engines", engine, "--out", str(out), *(["--size", str(size)] if size else []),
            *(["--url", url] if url else [])]
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMLOCI_")} | {"MEMLOCI_EMBEDDER": "none"}
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=1800)
    assert out.exists(), f"memloci bench crash exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    (result,) = json.loads(out.read_text())["results"]
    assert result["kind"] == kind and result["engine"] == engine and result["rounds"] == rounds
    return result


def assert_no_temp_files(root: Path) -> None:
    left = temp_files_left(root)
    assert not left, f"temp files left: {left[:5]}"


def assert_files_agree(root: Path, index: sqlite3.Connection) -> None:
    """Every file as the index records it, and no record without its file."""
    differ = index_disagreements(root, index)
    assert differ is None, differ
