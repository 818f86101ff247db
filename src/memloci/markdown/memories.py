"""Free memories (those of no entity) as day files a person can read: `memories/2026-11-21.md`.

```markdown
# Memories of 2026-11-21

## 07:40:12Z · decision · #auth #mobile
We use OAuth with PKCE in the mobile app.
<!-- memloci {"importance": "high", "metadata": {"source": "standup"}} -->
```

Each memory is a `##` block headed by its time and type (and tags, for reading); fields that
do not read well (importance, metadata, tags with spaces) sit in one trailing comment, so
the file stays the whole truth. New memories are appended, so storing never rewrites a file.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

_HEADER = re.compile(r"^## (\d\d:\d\d:\d\d(?:\.\d+)?)Z · ([^·\n]+?)(?: · (.*))?$")
_COMMENT = re.compile(r"^<!-- memloci (\{.*\}) -->$")
_DAY = re.compile(r"^\d{4}-\d\d-\d\d$")
# A content line that would read as a block header or as the trailing comment gets one more
# leading backslash when written, and loses one when read.
_LOOKALIKE = re.compile(r"^(\\*)(## \d\d:\d\d:\d\d|<!-- memloci )")


def _escape(content: str) -> str:
    return "\n".join(_LOOKALIKE.sub(r"\\\1\2", line) for line in content.split("\n"))


def _unescape(line: str) -> str:
    m = _LOOKALIKE.match(line)
    return line[1:] if m and m.group(1) else line


@dataclass
class MemoryBlock:
    content: str
    created_at: str
    memory_type: str = "note"
    tags: list[str] = field(default_factory=list)
    importance: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    # the memory lifecycle (core/model.py Memory): kept in the block's comment when set
    superseded_by: str | None = None
    archived_at: str | None = None
    links: list[dict[str, Any]] = field(default_factory=list)


def is_day(stem: str) -> bool:
    return bool(_DAY.match(stem))


def day_header(day: str) -> str:
    return f"# Memories of {day}\n"


def render_block(m: MemoryBlock) -> str:
    """One memory as a block (starting with a blank line, ending with a newline)."""
    time = m.created_at[11:].rstrip("Z") or "00:00:00"
    readable = all(t and not any(c.isspace() or c == "#" for c in t) for t in m.tags)
    head = f"## {time}Z · {m.memory_type}" + (" · " + " ".join("#" + t for t in m.tags) if m.tags and readable else "")
    extra: dict[str, Any] = {}
    if m.tags and not readable:
        extra["tags"] = m.tags
    if m.importance:
        extra["importance"] = m.importance
    if m.metadata:
        extra["metadata"] = m.metadata
    if m.superseded_by:
        extra["superseded_by"] = m.superseded_by
    if m.archived_at:
        extra["archived_at"] = m.archived_at
    if m.links:
        extra["links"] = m.links
    comment = f"<!-- memloci {json.dumps(extra, ensure_ascii=False, sort_keys=True)} -->\n" if extra else ""
    return f"\n{head}\n{_escape(m.content.rstrip())}\n{comment}"


def render_day(day: str, blocks: list[MemoryBlock], preamble: str | None = None) -> str:
    """The whole day file; `preamble` is what precedes the first block (kept as a person wrote it)."""
    return (preamble if preamble is not None else day_header(day)) + "".join(render_block(b) for b in blocks)


def preamble(text: str) -> str:
    """The text before the first memory block (the title, and whatever a person added there)."""
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if _HEADER.match(line):
            return "\n".join(lines[:i]).rstrip("\n") + "\n"
    return text.rstrip("\n") + "\n"


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def parse_day(text: str, day: str) -> list[MemoryBlock]:
    """The memories of a day file; a block without a valid header line is part of the one before."""
    blocks: list[MemoryBlock] = []
    current: list[str] | None = None
    header: re.Match[str] | None = None

    def close() -> None:
        if header is None or current is None:
            return
        lines = list(current)
        extra: dict[str, Any] = {}
        while lines and not lines[-1].strip():
            lines.pop()
        if lines and (m := _COMMENT.match(lines[-1].strip())):
            try:
                extra = json.loads(m.group(1))
            except json.JSONDecodeError:
                extra = {}
            else:
                lines.pop()
        content = "\n".join(_unescape(line) for line in lines).strip("\n")
        if not content.strip():
            return
        tags = extra.get("tags") or [t[1:] for t in (header.group(3) or "").split() if t.startswith("#") and len(t) > 1]
        blocks.append(MemoryBlock(content=content, created_at=f"{day}T{header.group(1)}Z",
                                  memory_type=header.group(2).strip(), tags=list(tags),
                                  importance=extra.get("importance"), metadata=dict(extra.get("metadata") or {}),
                                  superseded_by=_text(extra.get("superseded_by")),
                                  archived_at=_text(extra.get("archived_at")),
                                  links=[link for link in extra.get("links") or [] if isinstance(link, dict)]))

    for line in text.replace("\r\n", "\n").split("\n"):
        m = _HEADER.match(line)
        if m:
            close()
            header, current = m, []
        elif current is not None:
            current.append(line)
    close()
    return blocks
