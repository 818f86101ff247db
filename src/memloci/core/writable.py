"""Can a library be written right now? A check on the file system, the same for every engine.

Used to give a failed write the right error code (a full disk is not a permission problem)
and by health, which says `degraded` with the reason while writes would fail.
"""

from __future__ import annotations

import os
from pathlib import Path

DISK_FULL = "the disk is full"
# Below this, a batch (a transaction with its -wal frames, or a Markdown file, its temp copy and
# the index) may no longer fit: writes fail or soon will.
LOW_SPACE_BYTES = 1024 * 1024


def write_problem(path: str | os.PathLike[str]) -> str | None:
    """Why a write to the library at `path` (a file or a folder) would fail now, or None.

    Returns a sentence starting with DISK_FULL, or one about a read-only file system or missing
    write permission.
    """
    target = Path(path)
    folder = target if target.is_dir() else target.parent
    while not folder.exists() and folder != folder.parent:  # not created yet: its first existing parent
        folder = folder.parent
    try:
        fs = os.statvfs(folder)
    except OSError:
        return None
    if fs.f_flag & os.ST_RDONLY:
        return f"the file system of {folder} is mounted read-only"
    if not os.access(folder, os.W_OK) or (target.is_file() and not os.access(target, os.W_OK)):
        return f"no permission to write {target if target.is_file() else folder}"
    free = fs.f_bavail * fs.f_frsize
    if free < LOW_SPACE_BYTES:
        return f"{DISK_FULL} ({free // 1024} KiB free on {folder})"
    return None
