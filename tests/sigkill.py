"""SIGKILL rounds for the tests, through `memloci bench crash` (its writer process, its kills and
its all-or-nothing checks), and the checks a test makes itself on a Markdown library a killed
process left: files and index agree, no temp file is left."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

from memloci.store.markdown.files import sha256_hex

KINDS = ("create", "rename", "merge", "delete", "add_observations", "reindex")  # `memloci bench crash --kinds`
RESERVED = {"meta.md", "journal.md", "context.md"}  # the library's own files, not entities'


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


def markdown_files(root: Path) -> dict[str, bytes]:
    """The entity files of a Markdown library, by path (hidden and reserved files left out)."""
    found = {}
    for p in root.rglob("*.md"):
        rel = p.relative_to(root).as_posix()
        if any(part.startswith(".") for part in Path(rel).parts) or rel in RESERVED:
            continue
        found[rel] = p.read_bytes()
    return found


def assert_no_temp_files(root: Path) -> None:
    staging = root / ".memloci" / "staging"
    left = sorted(os.listdir(staging)) if staging.exists() else []
    assert not left, f"temp files left in {staging}: {left[:5]}"
    stray = [p.relative_to(root).as_posix() for p in root.rglob("*") if p.name.endswith((".tmp", ".memloci-tmp"))]
    assert not stray, f"temp files left: {stray[:5]}"


def assert_files_agree(root: Path, index: sqlite3.Connection) -> None:
    """Every file as the index records it, and no record without its file."""
    disk = {rel: sha256_hex(data) for rel, data in markdown_files(root).items()}
    rows = {p: h for p, h in index.execute("SELECT path, sha256 FROM md_files") if p not in RESERVED}
    missing = sorted(set(rows) - set(disk))
    unknown = sorted(set(disk) - set(rows))
    differ = sorted(p for p in set(disk) & set(rows) if disk[p] != rows[p])
    assert not (missing or unknown or differ), (
        f"files and index disagree: indexed but missing {missing[:5]}, on disk but not indexed {unknown[:5]}, "
        f"different bytes {differ[:5]}")
