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
from typing import Any, Protocol

from memloci.core.errors import ConflictError, ValidationError
from memloci.core.model import EDITABLE_FIELDS, ChangedMemories, Memory, MemoryEdit, NewMemory, links_data
from memloci.rules.graph import memory_text_taken

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


class LifecycleTx(Protocol):
    """An engine's rows of free memories inside one open write transaction, as `apply` uses them."""

    def load(self, ids: Sequence[int]) -> dict[int, Memory]:
        ...
    def claim_preview(self, preview_id: int, at: str) -> bool:
        """Mark the preview executed; False if it already was."""
        ...
    def keep(self, ids: Sequence[int]) -> None:
        """Keep these memories' state for undo (before anything changes)."""
        ...
    def absorb(self, keeper: int, ids: Sequence[int]) -> None:
        """Add the uses these memories have now to the keeper's."""
        ...
    def delete(self, ids: Sequence[int]) -> None:
        ...
    def update(self, memory_id: int, fields: Mapping[str, Any], at: str) -> None:
        """Set these stored fields (as `stored_value` gives them) and updated_at."""
        ...
    def insert(self, new: NewMemory, at: str) -> int | None:
        """A new free memory with its links; None if its text is stored already."""
        ...
    def created(self, content_hash: str) -> None:
        """A memory this transaction made: undo removes it."""
        ...
    def journal(self, origin: str, action: str, detail: dict[str, Any], at: str) -> int:
        """The change's journal entry; its id."""
        ...
    def record_change(self, preview_id: int, change_id: int) -> None:
        ...


def apply(tx: LifecycleTx, edits: Sequence[MemoryEdit], new: Sequence[NewMemory], *, origin: str, action: str,
          detail: dict[str, Any], expect: Sequence[MemoryEdit], preview_id: int | None, at: str) -> ChangedMemories:
    """A lifecycle change inside the caller's write transaction, the same on every engine: refused
    with nothing changed if a memory differs from what the preview saw (`edits` and `expect`) or
    the preview ran already; else its uses absorbed, deletions, field updates, new memories, and
    one journal entry (with the texts it added, for history and undo)."""
    check_edits(edits)
    ids = [e.memory_id for e in edits]
    before = tx.load([*ids, *(e.memory_id for e in expect)])
    found = stale([*edits, *expect], before, {i: m.content_hash for i, m in before.items()})
    if found:
        raise refused(action, found)
    if preview_id is not None and not tx.claim_preview(preview_id, at):
        raise executed_already(preview_id)
    tx.keep(ids)
    for e in edits:  # uses of merged duplicates, as they are now, go to their keeper
        if e.fields.get("absorb"):
            tx.absorb(e.memory_id, list(e.fields["absorb"]))
    gone = [e.memory_id for e in edits if e.delete]
    tx.delete(gone)
    for e in edits:
        fields = {k: stored_value(k, v) for k, v in e.fields.items() if k != "absorb"}
        if not e.delete and fields:
            tx.update(e.memory_id, fields, at)
    made = []
    for n in new:
        memory_id = tx.insert(n, at)
        if memory_id is None:
            raise memory_text_taken()
        made.append(memory_id)
    after = tx.load(made)
    for memory in after.values():
        tx.created(memory.content_hash)
    texts = {"texts_added": [m.content for m in after.values()]} if after else {}
    change_id = tx.journal(origin, action, {**detail, **texts}, at)
    if preview_id is not None:
        tx.record_change(preview_id, change_id)
    changed = tx.load([e.memory_id for e in edits if not e.delete])
    return ChangedMemories(tuple(changed.values()), tuple(before[i] for i in gone if i in before), tuple(after.values()),
                           change_id)
