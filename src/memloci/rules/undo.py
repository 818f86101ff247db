"""Undo, the same on every engine: what a destructive change keeps in its journal entry, when
an undo of it is refused, and how the kept rows are put back.

A destructive write calls `keep_before(rows, kept, entity_ids, memory_ids)` before it changes
anything: the state of those entities (their fields, observations with dates and use counts,
the relations touching them, their pending links) and of those free memories is copied into
`kept`, the transaction's record. Just before the commit, `seal` turns it into the journal
entry's `detail["undo"]`: the kept states, plus fingerprints of the same entities and memories
*after* the change (and of library-wide values such as the context, `keep_meta`).

Undoing entry N (`revert`) compares today's fingerprints with the sealed ones: if anything
named there changed since (a later edit, a deletion, a new entity that took the name), the undo
is refused with what stands in the way, and nothing changes. Otherwise the current rows are
replaced by the kept ones in the same transaction, which keeps its own record, so an undo is
undone like any change.

Each engine gives an `UndoRows` over one open write transaction (SQLite: store/sqlite/undo.py;
PostgreSQL: store/postgres/undo.py): reading an entity or memory as plain data, and putting
one back. A Markdown library keeps files on top of these rows (store/markdown/undo.py).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from memloci.core.errors import ConflictError, NotFoundError, ValidationError
from memloci.core.model import name_key
from memloci.rules import lifecycle

UNDOABLE = {"delete_entities", "delete_observations", "delete_relations", "rename_entity", "merge_entities",
            "store_memory", "update_memory", "delete_memory", "undo", "update_manual_section", "delete_manual_section",
            "add_manual_section", "update_context", *lifecycle.ACTIONS}

# A kept memory (free, or an observation of a kept entity), field by field, as every engine reads it.
MEMORY_FIELDS = ("content", "content_hash", "memory_type", "tags", "importance", "metadata", "created_at",
                 "updated_at", "access_count", "last_accessed_at", "superseded_by", "archived_at", "links")
# Fields a memory gained with the lifecycle: left out of a fingerprint while unset, so the
# fingerprints sealed before them still match a memory that never used them.
_LIFECYCLE_FIELDS = ("superseded_by", "archived_at", "links")
# A kept entity's own fields; `observations`, `relations` ([from, type, to, created_at], ordered by
# the ends' name keys and the type, byte order) and `pending_links` ([type, target]) follow.
ENTITY_FIELDS = ("id", "name", "entity_type", "aliases", "tags", "metadata", "body", "created_at", "updated_at")
# Left out of fingerprints: a row id (an entity put back may get another) and use counts (a
# search changes them; that is no reason to refuse an undo).
_UNSEALED = ("id", "access_count", "last_accessed_at")

ROWS_HINT = "Undo the later changes first (newest first), or make the change by hand."


class UndoRows(Protocol):
    """An engine's rows inside one open write transaction, as undo reads and writes them."""

    def entity_state(self, entity_id: int) -> dict[str, Any] | None:
        """Everything held about one entity (ENTITY_FIELDS, observations, relations, pending_links); None: none."""
        ...
    def free_memory_state(self, memory_id: int) -> dict[str, Any] | None:
        """A free memory (MEMORY_FIELDS); None if there is no free memory of that id."""
        ...
    def memory_owner(self, memory_id: int) -> tuple[int | None] | None:
        """(entity id,) of a memory ((None,) for a free one); None if there is no such memory."""
        ...
    def entities(self, names: Iterable[str]) -> dict[str, tuple[int, str]]:
        """name_key -> (id, stored name) for the names (or name keys) that exist."""
        ...
    def entity_key(self, entity_id: int) -> str | None:
        """The name_key an entity has now (a rename moves it)."""
        ...
    def free_memories(self, hashes: Iterable[str]) -> dict[str, int]:
        """content_hash -> id of the free memory holding it, for those that exist."""
        ...
    def memory_hash(self, memory_id: int) -> str | None:
        ...
    def meta_value(self, key: str) -> str | None:
        """A library-wide value (the manual, the context) as stored text."""
        ...
    def journal_row(self, change_id: int) -> tuple[str, list[str], dict[str, Any] | None] | None:
        """(action, entity names, detail) of journal entry `change_id`; None if there is none."""
        ...
    def later_changes(self, change_id: int) -> Iterable[tuple[int, str, list[str]]]:
        """(id, action, entity names) of the entries after `change_id`, newest first."""
        ...
    def delete_entity(self, entity_id: int) -> None:
        """Remove an entity with its observations, relations and pending links."""
        ...
    def delete_free_memory(self, memory_id: int) -> None:
        ...
    def insert_entity(self, state: dict[str, Any]) -> int:
        """A kept entity back (under its old id when that id is free) with its observations
        (dates and use counts too) and pending links, not its relations; its id."""
        ...
    def insert_relation(self, from_id: int, relation_type: str, to_id: int, created_at: str) -> None:
        """A relation back with its date (nothing if it is there)."""
        ...
    def insert_free_memory(self, state: dict[str, Any]) -> None:
        """A kept free memory back, with its dates and use count."""
        ...
    def set_meta(self, key: str, value: str | None) -> None:
        """A library-wide value back (None: removed)."""
        ...
    def restored(self, entity_ids: Sequence[int]) -> None:
        """Upkeep once entities came back: pending links to them become relations, search indexes."""
        ...


def new_record() -> dict[str, Any]:
    """The undo record of a transaction just begun. `entities`/`memories`: id -> kept state;
    `new_ids`: entities this transaction made (nothing to keep of them); `row`: the journal
    entry that gets the record, once something was kept (`armed`)."""
    return {"entities": {}, "memories": {}, "new_ids": set(), "row": None}


def keep_before(rows: UndoRows, kept: dict[str, Any], entity_ids: Iterable[int] = (),
                memory_ids: Iterable[int] = ()) -> None:
    """Keep the state of these entities and memories before this transaction changes them
    (the first state seen wins: it is what the transaction started from)."""
    entity_ids, memory_ids = list(entity_ids), list(memory_ids)
    if entity_ids or memory_ids:
        kept["armed"] = True
    for entity_id in entity_ids:
        if entity_id not in kept["entities"] and entity_id not in kept["new_ids"]:
            state = rows.entity_state(entity_id)
            if state is not None:
                kept["entities"][entity_id] = state
    for memory_id in memory_ids:
        owner = rows.memory_owner(memory_id)
        if owner is None:
            continue
        if owner[0] is not None:  # an observation: its entity is what changes
            keep_before(rows, kept, [owner[0]])
        elif memory_id not in kept["memories"]:
            kept["memories"][memory_id] = rows.free_memory_state(memory_id)


def keep_new_memory(kept: dict[str, Any], content_hash: str) -> None:
    """A free memory this transaction stores: nothing was there to keep, and its fingerprint
    after the change is sealed, so an undo removes it again (unless it changed since)."""
    kept["armed"] = True
    kept.setdefault("hashes", set()).add(content_hash)


def keep_meta(rows: UndoRows, kept: dict[str, Any], key: str) -> None:
    """Keep a library-wide value (the manual, the context) before this transaction changes it."""
    kept["armed"] = True
    if key not in kept.setdefault("meta", {}):
        kept["meta"][key] = rows.meta_value(key)


def note_row(kept: dict[str, Any], row_id: int) -> None:
    """A journal entry was written: a transaction that kept something gets its record there."""
    kept["last_row"] = row_id
    if kept.get("armed"):
        kept["row"] = row_id


def digest(state: dict[str, Any] | None) -> str | None:
    """A fingerprint of an entity's or memory's kept state (None: there is none)."""
    if state is None:
        return None
    state = _sealed(state)
    if "observations" in state:
        state["observations"] = [_sealed(o) for o in state["observations"]]
    return hashlib.sha256(json.dumps(state, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:16]


def _sealed(state: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in state.items() if k not in _UNSEALED and not (k in _LIFECYCLE_FIELDS and not v)}


def meta_digest(value: str | None) -> str | None:
    return hashlib.sha256(value.encode()).hexdigest()[:16] if value is not None else None


def entity_fingerprint(rows: UndoRows, key: str) -> str | None:
    found = rows.entities([key]).get(key)
    return digest(rows.entity_state(found[0])) if found else None


def memory_fingerprint(rows: UndoRows, content_hash: str) -> str | None:
    found = rows.free_memories([content_hash]).get(content_hash)
    return digest(rows.free_memory_state(found)) if found is not None else None


def seal(rows: UndoRows, kept: dict[str, Any]) -> dict[str, Any] | None:
    """The transaction's undo record for its journal entry (kept["row"]), with the fingerprints
    of what it names as the change leaves them; None if it kept nothing. Called just before the commit."""
    if kept["row"] is None:
        return None
    entities = list(kept["entities"].values())
    memories = list(kept["memories"].values())
    keys = {name_key(s["name"]) for s in entities} | kept.get("keys", set())
    for entity_id in kept["entities"]:  # a renamed entity is found under its new name
        key = rows.entity_key(entity_id)
        if key is not None:
            keys.add(key)
    hashes = {m["content_hash"] for m in memories} | kept.get("hashes", set())
    for memory_id in kept["memories"]:
        chash = rows.memory_hash(memory_id)
        if chash is not None:
            hashes.add(chash)
    record: dict[str, Any] = {"entities": entities, "memories": memories,
                              "after": {"entities": {k: entity_fingerprint(rows, k) for k in sorted(keys)},
                                        "memories": {h: memory_fingerprint(rows, h) for h in sorted(hashes)}}}
    if kept.get("meta"):
        record["meta"] = dict(kept["meta"])
        record["after"]["meta"] = {k: meta_digest(rows.meta_value(k)) for k in kept["meta"]}
    return record


# -- undoing -------------------------------------------------------------------------------

def entry(rows: UndoRows, change_id: int) -> tuple[str, list[str], dict[str, Any]]:
    """(action, entity names, detail) of a journal entry that kept an undo record; else the error saying why not."""
    row = rows.journal_row(change_id)
    if row is None:
        raise NotFoundError(f"id: the journal has no change #{change_id}", hint="List changes with `memloci history`.")
    action, entities, detail = row
    if not detail or "undo" not in detail:
        why = ("was recorded before memloci kept undo records" if action in UNDOABLE
               else "removed nothing, so there is nothing to undo")
        raise ValidationError(f"id: change #{change_id} ({action}) {why}",
                              hint="Undo works on deletes, edits, renames, merges, free memories stored or "
                                   "changed, relations extraction made (auto_relations), and undos; take back "
                                   "another addition with a delete.")
    return action, entities, detail


def later(rows: UndoRows, change_id: int, name: str) -> str:
    """' by change #M (action)' for the latest change after `change_id` naming the entity, if any."""
    for later_id, action, entities in rows.later_changes(change_id):
        if name_key(name) in {name_key(n) for n in entities}:
            return f" by change #{later_id} ({action})"
    return ""


def blockers(rows: UndoRows, change_id: int, record: dict[str, Any]) -> list[str]:
    """What stands in the way of putting `record` back: everything it names that changed since."""
    found = []
    after = record.get("after", {})
    names = {name_key(s["name"]): s["name"] for s in record["entities"]}
    for key, expected in after.get("entities", {}).items():
        if entity_fingerprint(rows, key) == expected:
            continue
        now = rows.entities([key]).get(key)
        name = now[1] if now else names.get(key, key)
        if expected is None:
            found.append(f"a new entity took the name '{name}'{later(rows, change_id, name)}")
        elif now is None:
            found.append(f"'{name}' was deleted since{later(rows, change_id, name)}")
        else:
            found.append(f"'{name}' was changed since{later(rows, change_id, name)}")
    for key, expected in after.get("meta", {}).items():
        if meta_digest(rows.meta_value(key)) != expected:
            found.append(f"the library's {key} was changed since")
    for chash, expected in after.get("memories", {}).items():
        if memory_fingerprint(rows, chash) != expected:
            found.append(f"the memory {chash[:12]} was " + (
                "stored again since" if expected is None else "changed or deleted since"))
    restored = set(names)
    for state in record["entities"]:  # relations to entities outside the change need those entities
        for f, _, t, _ in state["relations"]:
            for other in (f, t):
                if name_key(other) not in restored and not rows.entities([other]):
                    found.append(f"'{other}', related to '{state['name']}', no longer exists")
    return list(dict.fromkeys(found))


def refused(change_id: int, action: str, found: Sequence[str], hint: str = ROWS_HINT) -> ConflictError:
    return ConflictError(f"change #{change_id} ({action}) cannot be undone: " + "; ".join(found)
                         + "; nothing was changed", hint=hint, details={"blocked_by": list(found)})


def put_back(rows: UndoRows, kept: dict[str, Any], record: dict[str, Any]) -> list[str]:
    """Replace the current rows of what `record` names with the kept ones; the names of the
    entities touched. What is replaced is kept in turn, so this undo can be undone too."""
    keys = set(record.get("after", {}).get("entities", {})) | {name_key(s["name"]) for s in record["entities"]}
    current = rows.entities(sorted(keys))
    ids_now = [i for i, _ in current.values()]
    hashes = set(record.get("after", {}).get("memories", {})) | {m["content_hash"] for m in record["memories"]}
    memories_now = sorted(rows.free_memories(sorted(hashes)).values())
    keep_before(rows, kept, ids_now, memories_now)
    kept.update(armed=True, keys=set(keys), hashes=set(hashes))  # what comes back is what an undo of this removes
    for entity_id in ids_now:
        rows.delete_entity(entity_id)
    for memory_id in memories_now:
        rows.delete_free_memory(memory_id)
    back = [rows.insert_entity(state) for state in record["entities"]]
    for state in record["entities"]:
        for f, relation_type, t, at in state["relations"]:
            ends = rows.entities([f, t])
            if name_key(f) in ends and name_key(t) in ends:
                rows.insert_relation(ends[name_key(f)][0], relation_type, ends[name_key(t)][0], at)
    for m in record["memories"]:
        rows.insert_free_memory(m)
    for key, value in record.get("meta", {}).items():
        keep_meta(rows, kept, key)
        rows.set_meta(key, value)
    kept["new_ids"].update(back)
    rows.restored(back)
    return list(dict.fromkeys([n for _, n in current.values()] + [s["name"] for s in record["entities"]]))


def undo_detail(change_id: int, action: str, detail: dict[str, Any]) -> dict[str, Any]:
    """The journal detail of the undo of entry `change_id` (`action`, `detail`: that entry's):
    which change it undid, and the texts of the free memories it takes away (`texts_removed`: those
    the change stored or rewrote) and puts back (`texts_restored`: as the change found them), so
    `memloci history` shows them on every engine. An undo of an undo swaps its two lists."""
    if action == "undo":
        removed, restored = list(detail.get("texts_restored", ())), list(detail.get("texts_removed", ()))
    else:
        removed = [detail["content"]] if action in ("store_memory", "update_memory") \
            and isinstance(detail.get("content"), str) else []
        if action in lifecycle.ACTIONS:  # a summary a consolidation added goes with its undo
            removed = [t for t in detail.get("texts_added", ()) if isinstance(t, str)]
        restored = [m["content"] for m in detail["undo"].get("memories", ()) if isinstance(m, dict) and "content" in m]
    return {"undid": change_id, "action": action, **({"texts_removed": removed} if removed else {}),
            **({"texts_restored": restored} if restored else {})}


def revert(rows: UndoRows, kept: dict[str, Any], change_id: int) -> tuple[str, list[str], dict[str, Any]]:
    """Undo journal entry `change_id` inside the caller's write transaction: (its action, the
    entities touched, the undo's journal detail: undo_detail); CONFLICT, with nothing changed,
    if a later change stands in the way. The caller journals the undo (its record is `kept`)."""
    action, _, detail = entry(rows, change_id)
    record = detail["undo"]
    found = blockers(rows, change_id, record)
    if found:
        raise refused(change_id, action, found)
    return action, put_back(rows, kept, record), undo_detail(change_id, action, detail)
