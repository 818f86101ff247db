"""What holds for every lifecycle change on every engine: the fingerprint a preview records of
each memory it would change, the check an execute makes before it changes anything, and the
journal actions the lifecycle writes (each one entry, undoable like any other change).

A preview reads memories and records `fingerprint(memory)` for each one it would change. An
execute hands the engine those fingerprints (MemoryEdit.expect); inside its write transaction
the engine reads the memories again and calls `stale(...)`: any memory deleted or changed
since the preview refuses the whole execute, naming what changed, with nothing written.
A fingerprint leaves out use counts and dates, so a search between preview and execute (which
counts a use) is no reason to refuse.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from memloci.core.errors import ConflictError, ValidationError
from memloci.core.model import EDITABLE_FIELDS, Memory, MemoryEdit, links_data

# The journal actions of lifecycle changes: each undoable (rules/undo.py), each one entry.
ACTIONS = ("delete_by_tag", "delete_by_time", "cleanup_duplicates", "update_memory_metadata", "supersede",
           "archive", "unarchive", "memory_cleanup", "consolidate", "link_memories", "garbage_collect_relations")

PREVIEW_HINT = "Run the preview again and execute the new one."


def fingerprint(m: Memory) -> str:
    """What a preview saw of a memory: every field a person or a tool may change."""
    state = [m.content_hash, m.entity or "", m.content, sorted(m.tags), m.memory_type, m.importance, m.metadata,
             m.superseded_by, m.archived_at, links_data(m.links)]
    return hashlib.sha256(json.dumps(state, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:16]


def stale(edits: Sequence[MemoryEdit], found: Mapping[int, Memory], hashes: Mapping[int, str]) -> list[str]:
    """What changed since the preview, for each edit whose memory is gone or differs (`found`:
    the memories as the transaction reads them; `hashes`: each edit's content_hash as the
    preview recorded it, for the message)."""
    out = []
    for e in edits:
        label = hashes.get(e.memory_id, str(e.memory_id))[:12]
        now = found.get(e.memory_id)
        if now is None:
            out.append(f"memory {label} was deleted since the preview")
        elif now.entity is not None:
            out.append(f"memory {label} is an observation of '{now.entity}' (lifecycle changes take free memories)")
        elif fingerprint(now) != e.expect:
            out.append(f"memory {label} was changed since the preview")
    return out


def refused(kind: str, found: Sequence[str]) -> ConflictError:
    return ConflictError(f"{kind}: the library changed since the preview: " + "; ".join(found[:10])
                         + (f"; and {len(found) - 10} more" if len(found) > 10 else "") + "; nothing was changed",
                         hint=PREVIEW_HINT, details={"changed": list(found)})


def executed_already(preview_id: int) -> ConflictError:
    return ConflictError(f"preview_id: preview #{preview_id} was executed already", hint="Make a new preview to change more.")


def check_edits(edits: Sequence[MemoryEdit]) -> None:
    """An engine's guard: only the editable fields, each memory once."""
    seen: set[int] = set()
    for e in edits:
        if e.memory_id in seen:
            raise ValidationError(f"edits: memory {e.memory_id} is named twice")
        seen.add(e.memory_id)
        unknown = set(e.fields) - set(EDITABLE_FIELDS)
        if unknown:
            raise ValidationError(f"edits: cannot set {', '.join(sorted(unknown))} (settable: {', '.join(EDITABLE_FIELDS)})")
        if e.delete and e.fields:
            raise ValidationError(f"edits: memory {e.memory_id} is both deleted and changed")


def stored_value(field: str, value: Any) -> Any:
    """A field's value as the engines store it (links as JSON data)."""
    return links_data(value) if field == "links" else value
