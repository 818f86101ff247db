"""The postgres engine's rows as the rules of undo (rules/undo.py) read and write them: what
a destructive change keeps in its journal entry, and how the kept rows come back, exactly as
in a SQLite library. Used inside one write transaction (transaction.WriteTx)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from memloci.core.model import name_key, now_iso
from memloci.rules import undo
from memloci.store.postgres.entities import link_pending, reindex
from memloci.store.postgres.json_columns import as_json, as_jsonb
from memloci.store.postgres.memory_rows import insert_memory, neighbours, refresh_context
from memloci.store.postgres.vectors import bump_vectors

_MEMORY_COLUMNS = ", ".join(undo.MEMORY_FIELDS)


def _memory_state(row: Sequence[Any]) -> dict[str, Any]:
    state = dict(zip(undo.MEMORY_FIELDS, row))
    state["tags"], state["metadata"] = list(state["tags"] or []), dict(state["metadata"] or {})
    state["access_count"] = int(state["access_count"] or 0)
    state["links"] = list(state["links"] or [])
    return state


class PostgresUndoRows:
    """undo.UndoRows over one psycopg connection inside a write transaction."""

    def __init__(self, conn: Any):
        self.conn = conn

    def entity_state(self, entity_id: int) -> dict[str, Any] | None:
        conn = self.conn
        row = conn.execute(f"SELECT {', '.join(undo.ENTITY_FIELDS)} FROM entities WHERE id = %s", (entity_id,)).fetchone()
        if row is None:
            return None
        state = dict(zip(undo.ENTITY_FIELDS, row))
        state["id"] = int(state["id"])
        state["aliases"], state["tags"], state["metadata"] = (list(state["aliases"]), list(state["tags"]),
                                                              dict(state["metadata"]))
        state["observations"] = [_memory_state(r) for r in conn.execute(
            f"SELECT {_MEMORY_COLUMNS} FROM memories WHERE entity_id = %s ORDER BY id", (entity_id,))]
        # byte order (COLLATE "C"), as SQLite sorts text: a record reads the same on both engines
        state["relations"] = [list(r) for r in conn.execute(
            """SELECT f.name, r.relation_type, t.name, r.created_at FROM relations r
               JOIN entities f ON f.id = r.from_id JOIN entities t ON t.id = r.to_id
               WHERE r.from_id = %(id)s OR r.to_id = %(id)s
               ORDER BY f.name_key COLLATE "C", r.relation_type COLLATE "C", t.name_key COLLATE "C" """,
            {"id": entity_id})]
        state["pending_links"] = [list(r) for r in conn.execute(
            """SELECT relation_type, target FROM pending_links WHERE from_id = %s
               ORDER BY relation_type COLLATE "C", target_key COLLATE "C" """, (entity_id,))]
        return state

    def free_memory_state(self, memory_id: int) -> dict[str, Any] | None:
        row = self.conn.execute(f"SELECT {_MEMORY_COLUMNS} FROM memories WHERE id = %s AND entity_id IS NULL",
                                (memory_id,)).fetchone()
        return _memory_state(row) if row else None

    def memory_owner(self, memory_id: int) -> tuple[int | None] | None:
        row = self.conn.execute("SELECT entity_id FROM memories WHERE id = %s", (memory_id,)).fetchone()
        return (None if row[0] is None else int(row[0]),) if row else None

    def entities(self, names: Iterable[str]) -> dict[str, tuple[int, str]]:
        keys = list(dict.fromkeys(name_key(n) for n in names))
        if not keys:
            return {}
        return {key: (int(id_), name) for id_, name, key in self.conn.execute(
            "SELECT id, name, name_key FROM entities WHERE name_key = ANY(%s)", (keys,))}

    def entity_key(self, entity_id: int) -> str | None:
        row = self.conn.execute("SELECT name_key FROM entities WHERE id = %s", (entity_id,)).fetchone()
        return row[0] if row else None

    def free_memories(self, hashes: Iterable[str]) -> dict[str, int]:
        hashes = sorted(set(hashes))
        if not hashes:
            return {}
        return {h: int(i) for i, h in self.conn.execute(
            "SELECT id, content_hash FROM memories WHERE entity_id IS NULL AND content_hash = ANY(%s)", (hashes,))}

    def memory_hash(self, memory_id: int) -> str | None:
        row = self.conn.execute("SELECT content_hash FROM memories WHERE id = %s", (memory_id,)).fetchone()
        return row[0] if row else None

    def meta_value(self, key: str) -> str | None:
        # the context (and other library-wide text) lives in `meta` in this engine
        row = self.conn.execute("SELECT value FROM meta WHERE key = %s", (key,)).fetchone()
        return row[0] if row else None

    def journal_row(self, change_id: int) -> tuple[str, list[str], dict[str, Any] | None] | None:
        row = self.conn.execute("SELECT action, entities, detail FROM journal WHERE id = %s", (change_id,)).fetchone()
        return (row[0], list(row[1]), row[2]) if row else None

    def later_changes(self, change_id: int) -> Iterable[tuple[int, str, list[str]]]:
        for later_id, action, entities in self.conn.execute(
                "SELECT id, action, entities FROM journal WHERE id > %s ORDER BY id DESC", (change_id,)).fetchall():
            yield int(later_id), action, list(entities)

    def delete_entity(self, entity_id: int) -> None:
        # observations, their vectors, relations and pending links go with it (ON DELETE CASCADE)
        self.conn.execute("DELETE FROM entities WHERE id = %s", (entity_id,))

    def delete_free_memory(self, memory_id: int) -> None:
        around = [i for i in neighbours(self.conn, memory_id) if i != memory_id]
        if self.conn.execute("DELETE FROM memory_vectors WHERE memory_id = %s", (memory_id,)).rowcount:
            bump_vectors(self.conn)  # an index held elsewhere drops it
        self.conn.execute("DELETE FROM memories WHERE id = %s", (memory_id,))
        refresh_context(self.conn, around)

    def insert_entity(self, state: dict[str, Any]) -> int:
        conn = self.conn
        free = conn.execute("SELECT 1 FROM entities WHERE id = %s", (state["id"],)).fetchone() is None
        values = (state["name"], name_key(state["name"]), state["entity_type"], as_jsonb(list(state["aliases"])),
                  as_jsonb(list(state["tags"])), as_json(state["metadata"]), state["body"], state["created_at"],
                  state["updated_at"])
        if free:  # an id handed out before: below the identity's next value, so never taken again
            conn.execute("""INSERT INTO entities (id, name, name_key, entity_type, aliases, tags, metadata, body,
                            created_at, updated_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)""",
                         (state["id"], *values))
            entity_id = int(state["id"])
        else:
            entity_id = int(conn.execute("""INSERT INTO entities (name, name_key, entity_type, aliases, tags, metadata,
                                            body, created_at, updated_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)
                                            RETURNING id""", values).fetchone()[0])
        for o in state["observations"]:
            self._insert_kept_memory(entity_id, o)
        for relation_type, target in state["pending_links"]:
            conn.execute("INSERT INTO pending_links VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING",
                         (entity_id, relation_type, name_key(target), target))
        return entity_id

    def insert_relation(self, from_id: int, relation_type: str, to_id: int, created_at: str) -> None:
        self.conn.execute("""INSERT INTO relations (from_id, relation_type, to_id, created_at)
                             VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING""", (from_id, relation_type, to_id, created_at))

    def insert_free_memory(self, state: dict[str, Any]) -> None:
        self._insert_kept_memory(None, state)

    def set_meta(self, key: str, value: str | None) -> None:
        if value is None:
            self.conn.execute("DELETE FROM meta WHERE key = %s", (key,))
        else:
            self.conn.execute("INSERT INTO meta VALUES (%s, %s) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                              (key, value))

    def restored(self, entity_ids: Sequence[int]) -> None:
        link_pending(self.conn, list(entity_ids), now_iso())
        # the trigger indexed them before their observations came back (search_schema.py)
        reindex(self.conn, list(entity_ids))

    def _insert_kept_memory(self, entity_id: int | None, kept: dict[str, Any]) -> None:
        """A memory back as the record kept it, its dates and use count too; it waits for a
        vector again (the text's vector went with the row)."""
        memory_id = insert_memory(self.conn, entity_id, kept["content"], kept["memory_type"], kept["tags"],
                                  kept["importance"], kept["metadata"], kept["created_at"])
        if memory_id is not None:
            self.conn.execute("UPDATE memories SET updated_at = %s, access_count = %s, last_accessed_at = %s, "
                              "superseded_by = %s, archived_at = %s, links = %s WHERE id = %s",
                              (kept["updated_at"], kept["access_count"], kept["last_accessed_at"],
                               kept.get("superseded_by"), kept.get("archived_at"), as_jsonb(kept.get("links") or []),
                               memory_id))
