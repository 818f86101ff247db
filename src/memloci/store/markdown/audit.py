"""What a Markdown library on disk is whenever no process is writing to it, however the last one
stopped (a SIGKILL included), once the next opening has recovered: every note file as the index
records it, no record without its file, and no temp file left. Read only: nothing here changes a
file. `memloci bench crash` checks it after each kill, and so do the tests."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from memloci.store.markdown.files import CONTEXT, INDEX_DIR, JOURNAL, MANUAL, MEMORIES_DIR, sha256_hex
from memloci.store.markdown.intent import STAGING

RESERVED = frozenset({MANUAL, JOURNAL, CONTEXT})  # the library's own files: not notes
TEMP_SUFFIXES = (".tmp", ".memloci-tmp")


def note_files(root: Path) -> dict[str, bytes]:
    """The note files of the library under `root`, by path (hidden and reserved files left out),
    and the day files of its free memories (`.memloci/memories/`)."""
    found = {}
    for p in root.rglob("*.md"):  # hidden folders too: the day files are in .memloci/memories/
        rel = p.relative_to(root).as_posix()
        if (any(part.startswith(".") for part in Path(rel).parts) and Path(rel).parent.as_posix() != MEMORIES_DIR) \
                or rel in RESERVED:
            continue
        found[rel] = p.read_bytes()
    return found


def temp_files_left(root: Path) -> list[str]:
    """What a change left behind: anything in the staging folder, and temp files anywhere."""
    staging = root / INDEX_DIR / STAGING
    left = [f"{INDEX_DIR}/{STAGING}/{name}" for name in sorted(os.listdir(staging))] if staging.exists() else []
    return left + sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.name.endswith(TEMP_SUFFIXES))


def index_disagreements(root: Path, index: sqlite3.Connection) -> str | None:
    """How the note files and the index (`index`, a connection to the library's index.db) differ,
    or None when every file is as the index records it and no record lacks its file."""
    disk = {rel: sha256_hex(data) for rel, data in note_files(root).items()}
    rows = {path: digest for path, digest in index.execute("SELECT path, sha256 FROM md_files") if path not in RESERVED}
    missing = sorted(set(rows) - set(disk))
    unknown = sorted(set(disk) - set(rows))
    differ = sorted(p for p in set(disk) & set(rows) if disk[p] != rows[p])
    if not (missing or unknown or differ):
        return None
    return (f"files and index disagree: indexed but missing {missing[:5]}, on disk but not indexed {unknown[:5]}, "
            f"different bytes {differ[:5]}")
