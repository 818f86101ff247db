"""Files of a Markdown library: reserved names, file names for entities, the journal's entries,
and file bytes as an undo record keeps them (writes go through core/confine.py)."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from dataclasses import dataclass, field

INDEX_DIR = ".memloci"  # memloci's own folder in a library: every file of its own but the two below
MANUAL = "meta.md"  # the library manual and the hot context: documents a call asks for, at the root
CONTEXT = "context.md"
JOURNAL = f"{INDEX_DIR}/journal.md"  # layout.py moves a journal.md and memories/ of older libraries here
MEMORIES_DIR = f"{INDEX_DIR}/memories"
OLD_JOURNAL = "journal.md"  # where an older memloci kept them, at the root
OLD_MEMORIES = "memories"
JOURNAL_TITLE = "# Journal\n\nEvery change to this library, newest last.\n"
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


def journal_text(rows: list[tuple[str, str, str, str, str | None]], *, new_file: bool) -> str:
    """journal.md's entries for (at, tool, action, entities JSON, detail JSON) rows, the file's
    title first when it is `new_file` (undo.parse_journal reads them back)."""
    lines = [JOURNAL_TITLE] if new_file else []
    for at, tool, action, entities, detail in rows:
        listed = json.loads(entities)
        names = ", ".join(listed[:5]) + (f" and {len(listed) - 5} more" if len(listed) > 5 else "")
        lines.append(f"\n## {at} · {action}" + (f" · {names}" if names else "") + "\n"
                     + (f"- by: {tool}\n" if tool != action else ""))
        if detail:
            lines.append("```json\n" + json.dumps(json.loads(detail), ensure_ascii=False, indent=1, sort_keys=True)
                         + "\n```\n")
    return "".join(lines)


def encode_kept(data: bytes | None) -> str | dict[str, str] | None:
    """A file's bytes as an undo record keeps them (None: no such file)."""
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:  # not text: kept all the same
        return {"base64": base64.b64encode(data).decode()}


def decode_kept(value: str | dict[str, str] | None) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, dict):
        return base64.b64decode(value["base64"])
    return value.encode("utf-8")
