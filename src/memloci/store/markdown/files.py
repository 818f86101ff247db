"""Files of a Markdown library: reserved names, file names for entities (writes go through confine.py)."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

INDEX_DIR = ".memloci"
MANUAL = "meta.md"
JOURNAL = "journal.md"
CONTEXT = "context.md"
MEMORIES_DIR = "memories"
WATCH_INTERVAL_S = 1.0
_UNSAFE = re.compile(r'[\\/:*?"<>|\x00-\x1f]')


@dataclass
class SyncReport:
    indexed: int = 0
    removed: int = 0
    skipped: int = 0  # read, but changed again before they could be applied (the next scan takes them)
    problems: dict[str, str] = field(default_factory=dict)  # path -> why it is not indexed
    index_moved_to: str | None = None  # a corrupt index was moved here before this rebuild


def file_stem(name: str) -> str:
    """A file name for an entity name: the name itself, minus characters file systems refuse,
    at most 150 bytes (file systems count bytes, and a temp name needs room beside it)."""
    stem = _UNSAFE.sub("-", name).strip(" .") or "entity"
    if len(stem.encode("utf-8")) > 150:
        stem = stem.encode("utf-8")[:140].decode("utf-8", "ignore").rstrip(" .") + "-" + sha256_hex(name.encode())[:8]
    return stem


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class FileStat:
    """The two stat fields `_record` keeps, for files stat'ed during the scan."""

    def __init__(self, mtime_ns: int, size: int):
        self.st_mtime_ns, self.st_size = mtime_ns, size
