"""Everything in and out with its timestamps, and notes of backups (store.Portable), for the
postgres engine: what `memloci export`, `memloci import` and `memloci backup` use. The same
answers as the SQLite engine's (store/sqlite_undo.py), each one transaction."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ...model import ImportedMemories, Memory, now_iso
from .memories import bump_vectors, insert_memory, select_memories


class PostgresPortable:
    """(mixed into PostgresStore; uses its _read, _write and _journal)"""

    def free_memories(self) -> list[Memory]:
        """Every free memory (no entity), oldest first by id: what an export writes."""
        with self._read() as conn:  # type: ignore[attr-defined]
            return select_memories(conn, "m.entity_id IS NULL", (), order="m.id")

    def import_memories(self, items: Sequence[Any], *, origin: str) -> ImportedMemories:
        """Free memories with their own timestamps (MemoryLine-like items): how many added, how many there already."""
        added = 0
        with self._write("memories") as conn:  # type: ignore[attr-defined]
            for m in items:
                memory_id = insert_memory(conn, None, m.content, m.memory_type, m.tags,
                                          None if m.importance == "medium" else m.importance, m.metadata, m.created_at)
                if memory_id is not None:
                    conn.execute("UPDATE memories SET updated_at = %s WHERE id = %s", (m.updated_at, memory_id))
                    added += 1
            if added:
                self._journal(conn, origin, "import_memories", [], {"added": added}, now_iso())  # type: ignore[attr-defined]
        return ImportedMemories(added, len(items) - added)

    def restore_dates(self, entities: Mapping[str, tuple[str, str, Sequence[str], Sequence[str]]],
                      relations: Mapping[tuple[str, str, str], str], *, origin: str) -> None:
        """Give entities (name_key -> created, updated, observations, their dates) and relations
        ((from key, type, to key) -> created) the times a file says they have."""
        with self._write() as conn:  # type: ignore[attr-defined]
            for key, (created, updated, contents, dates) in entities.items():
                row = conn.execute("SELECT id FROM entities WHERE name_key = %s", (key,)).fetchone()
                if row is None:
                    continue
                for content, at in zip(contents, dates):
                    conn.execute("""UPDATE memories SET created_at = %s, updated_at = %s
                                    WHERE entity_id = %s AND content = %s""", (at, at, row[0], content))
                conn.execute("UPDATE entities SET created_at = %s, updated_at = %s WHERE id = %s",
                             (created, updated, row[0]))
            for (f, rt, t), at in relations.items():
                conn.execute("""UPDATE relations SET created_at = %s WHERE relation_type = %s
                                AND from_id = (SELECT id FROM entities WHERE name_key = %s)
                                AND to_id = (SELECT id FROM entities WHERE name_key = %s)""", (at, rt, f, t))
            if entities or relations:
                self._journal(conn, origin, "restore_dates", [],  # type: ignore[attr-defined]
                              {"entities": len(entities), "relations": len(relations)}, now_iso())

    # -- backups ---------------------------------------------------------------------------

    def note_backup(self, at: str, path: str) -> None:
        """Remember the last successful backup (health reports it)."""
        with self._write("meta") as conn:  # type: ignore[attr-defined]
            conn.execute("""INSERT INTO meta VALUES ('last_backup', %s)
                            ON CONFLICT (key) DO UPDATE SET value = excluded.value""",
                         (json.dumps({"at": at, "path": path}, ensure_ascii=False),))

    def last_backup(self) -> dict[str, str] | None:
        with self._read() as conn:  # type: ignore[attr-defined]
            row = conn.execute("SELECT value FROM meta WHERE key = 'last_backup'").fetchone()
        return json.loads(row[0]) if row else None

    def note_event(self, action: str, detail: dict[str, Any], *, vectors_floor: int = 0) -> None:
        """A journal entry for a change made outside the tools (a restore). `vectors_floor`: the
        vectors' version before it; the new one is higher, so running servers reload their vectors."""
        with self._write("vectors") as conn:  # type: ignore[attr-defined]
            self._journal(conn, action, action, [], detail, now_iso())  # type: ignore[attr-defined]
            current = bump_vectors(conn)
            if current <= vectors_floor:
                bump_vectors(conn, vectors_floor + 1 - current)

    def holds_data(self) -> int:
        """How many entities, memories and relations the library holds."""
        with self._read() as conn:  # type: ignore[attr-defined]
            return conn.execute("SELECT (SELECT count(*) FROM entities) + (SELECT count(*) FROM memories) "
                                "+ (SELECT count(*) FROM relations)").fetchone()[0]
