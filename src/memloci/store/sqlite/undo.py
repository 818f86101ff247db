"""Undo and the library's own upkeep in a SQLite library: undoing a journal entry, backups'
notes, and whole exports and imports of free memories and dates (the rows undo keeps are
undo_rows.py's)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from memloci.core.model import ImportedMemories
from memloci.rules import undo
from memloci.store.sqlite.database import Database
from memloci.store.sqlite.memory_rows import insert_memory, select_memories
from memloci.store.sqlite.rows import journal
from memloci.store.sqlite.tx import WriteTx
from memloci.store.sqlite.undo_rows import SQLiteUndoRows


class SQLiteUndo:
    """Undo, backups' notes, and exports and imports of everything, over one library's Database."""

    def __init__(self, db: Database):
        self.db = db

    # -- undo ------------------------------------------------------------------------

    def undo_change(self, change_id: int, *, origin: str = "undo") -> dict[str, Any]:
        """Revert journal entry `change_id`; refused (CONFLICT, nothing changed) if a later change stands in the way."""
        with self.db.write() as tx:
            action, names, detail = undo.revert(SQLiteUndoRows(tx.conn), tx.record, change_id)
            journal(tx, origin, "undo", names, detail)
        return {"undid": change_id, "action": action, "entities": names}

    # -- backups ---------------------------------------------------------------------------

    def note_backup(self, at: str, path: str) -> None:
        """Remember the last successful backup (health reports it)."""
        with self.db.write() as tx:
            conn = tx.conn
            conn.execute("INSERT OR REPLACE INTO library_meta VALUES ('last_backup', ?)",
                         (json.dumps({"at": at, "path": path}, ensure_ascii=False),))

    def last_backup(self) -> dict[str, str] | None:
        with self.db.read() as conn:
            row = conn.execute("SELECT value FROM library_meta WHERE key = 'last_backup'").fetchone()
        return json.loads(row[0]) if row else None

    def note_event(self, action: str, detail: dict[str, Any], *, vectors_floor: int = 0) -> None:
        """A journal entry for a change made outside the tools (a restore). `vectors_floor`: the
        vectors' version before it; the new one is higher, so running servers reload their vectors."""
        with self.db.write() as tx:
            journal(tx, action, action, [], detail)
            tx.conn.execute("UPDATE library_meta SET value = max(CAST(value AS INTEGER), ?) + 1 WHERE key = 'vectors_version'",
                         (vectors_floor,))

    def holds_data(self) -> int:
        """How many entities, memories and relations the library holds."""
        with self.db.read() as conn:
            return conn.execute("SELECT (SELECT count(*) FROM entities) + (SELECT count(*) FROM memories) "
                                "+ (SELECT count(*) FROM relations)").fetchone()[0]

    # -- exports and imports of everything -------------------------------------------------

    def free_memories(self) -> list[Any]:
        """Every free memory (no entity), oldest first by id: what an export writes."""
        with self.db.read() as conn:
            return select_memories(conn, "m.entity_id IS NULL", (), order="m.id")

    def import_memories(self, items: Sequence[Any], *, origin: str) -> ImportedMemories:
        """Free memories with their own timestamps (MemoryLine-like items): how many added, how many there already."""
        added = 0
        with self.db.write() as tx:
            conn = tx.conn
            for m in items:
                memory_id = insert_memory(conn, None, m.content, m.memory_type, m.tags,
                                          None if m.importance == "medium" else m.importance, m.metadata, m.created_at)
                if memory_id is not None:
                    conn.execute("UPDATE memories SET updated_at = ? WHERE id = ?", (m.updated_at, memory_id))
                    added += 1
            if added:
                journal(tx, origin, "import_memories", [], {"added": added})
        return ImportedMemories(added, len(items) - added)

    def restore_dates(self, entities: Mapping[str, tuple[str, str, Sequence[str], Sequence[str]]],
                      relations: Mapping[tuple[str, str, str], str], *, origin: str) -> None:
        """Give entities (name_key -> created, updated, observations, their dates) and relations
        ((from key, type, to key) -> created) the times a file says they have."""
        with self.db.write() as tx:
            restore_dates_in(tx, entities, relations, origin)


def restore_dates_in(tx: WriteTx, entities: Mapping[str, tuple[str, str, Sequence[str], Sequence[str]]],
                 relations: Mapping[tuple[str, str, str], str], origin: str) -> None:
    """restore_dates inside an open write transaction (a Markdown library renders its files in the same one)."""
    conn = tx.conn
    for key, (created, updated, contents, dates) in entities.items():
        row = conn.execute("SELECT id FROM entities WHERE name_key = ?", (key,)).fetchone()
        if row is None:
            continue
        for content, at in zip(contents, dates):
            conn.execute("UPDATE memories SET created_at = ?, updated_at = ? WHERE entity_id = ? AND content = ?",
                         (at, at, row[0], content))
        conn.execute("UPDATE entities SET created_at = ?, updated_at = ? WHERE id = ?", (created, updated, row[0]))
    for (f, rt, t), at in relations.items():
        conn.execute("""UPDATE relations SET created_at = ? WHERE relation_type = ?
                        AND from_id = (SELECT id FROM entities WHERE name_key = ?)
                        AND to_id = (SELECT id FROM entities WHERE name_key = ?)""", (at, rt, f, t))
    if entities or relations:
        journal(tx, origin, "restore_dates", [], {"entities": len(entities), "relations": len(relations)})
