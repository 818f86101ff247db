"""Undo records of a SQLite library (mixed into SQLiteStore): the engine's rows for the rules
of undo.py, which say what a destructive change keeps in its journal entry, when an undo is
refused, and how the kept rows come back.

A destructive write calls `_before(conn, entity_ids, memory_ids)` before it changes anything
(`_before_meta` for the manual and the context); `_write` seals the record into the journal
entry just before the commit (`_seal_journal`). A Markdown library adds its files to the same
record (markdown_undo.py).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from memloci.core.model import ImportedMemories, name_key
from memloci.rules import undo
from memloci.store.sqlite.host import SQLiteHost
from memloci.store.sqlite.memories import insert_memory, select_memories

_MEMORY_COLUMNS = ", ".join(undo.MEMORY_FIELDS)


def _memory_row(row: tuple) -> dict[str, Any]:
    state = dict(zip(undo.MEMORY_FIELDS, row))
    state["tags"], state["metadata"] = json.loads(state["tags"]), json.loads(state["metadata"])
    return state


def entity_snapshot(conn: sqlite3.Connection, entity_id: int) -> dict[str, Any] | None:
    """Everything the library holds about one entity, as JSON-able data (None: no such entity)."""
    row = conn.execute(f"SELECT {', '.join(undo.ENTITY_FIELDS)} FROM entities WHERE id = ?", (entity_id,)).fetchone()
    if row is None:
        return None
    state = dict(zip(undo.ENTITY_FIELDS, row))
    for field in ("aliases", "tags", "metadata"):
        state[field] = json.loads(state[field])
    state["observations"] = [_memory_row(r) for r in conn.execute(
        f"SELECT {_MEMORY_COLUMNS} FROM memories WHERE entity_id = ? ORDER BY id", (entity_id,))]
    state["relations"] = [list(r) for r in conn.execute(
        """SELECT f.name, r.relation_type, t.name, r.created_at FROM relations r
           JOIN entities f ON f.id = r.from_id JOIN entities t ON t.id = r.to_id
           WHERE r.from_id = ? OR r.to_id = ? ORDER BY f.name_key, r.relation_type, t.name_key""",
        (entity_id, entity_id))]
    state["pending_links"] = [list(r) for r in conn.execute(
        "SELECT relation_type, target FROM pending_links WHERE from_id = ? ORDER BY relation_type, target_key",
        (entity_id,))]
    return state


def memory_snapshot(conn: sqlite3.Connection, memory_id: int) -> dict[str, Any] | None:
    row = conn.execute(f"SELECT {_MEMORY_COLUMNS} FROM memories WHERE id = ? AND entity_id IS NULL",
                       (memory_id,)).fetchone()
    return _memory_row(row) if row else None


class SQLiteUndoRows:
    """undo.UndoRows over one SQLite connection inside a write transaction (`store`: for the
    upkeep after entities come back; reading needs only the connection)."""

    def __init__(self, conn: sqlite3.Connection, store: Any = None):
        self.conn = conn
        self.store = store

    def entity_state(self, entity_id: int) -> dict[str, Any] | None:
        return entity_snapshot(self.conn, entity_id)

    def free_memory_state(self, memory_id: int) -> dict[str, Any] | None:
        return memory_snapshot(self.conn, memory_id)

    def memory_owner(self, memory_id: int) -> tuple[int | None] | None:
        row = self.conn.execute("SELECT entity_id FROM memories WHERE id = ?", (memory_id,)).fetchone()
        return (row[0],) if row else None

    def entities(self, names: Iterable[str]) -> dict[str, tuple[int, str]]:
        keys = list(dict.fromkeys(name_key(n) for n in names))
        found: dict[str, tuple[int, str]] = {}
        for start in range(0, len(keys), 500):
            chunk = keys[start:start + 500]
            for id_, name, key in self.conn.execute(
                    f"SELECT id, name, name_key FROM entities WHERE name_key IN ({','.join('?' * len(chunk))})", chunk):
                found[key] = (id_, name)
        return found

    def entity_key(self, entity_id: int) -> str | None:
        row = self.conn.execute("SELECT name_key FROM entities WHERE id = ?", (entity_id,)).fetchone()
        return row[0] if row else None

    def free_memories(self, hashes: Iterable[str]) -> dict[str, int]:
        hashes = sorted(set(hashes))
        if not hashes:
            return {}
        return {h: i for i, h in self.conn.execute(
            f"SELECT id, content_hash FROM memories WHERE entity_id IS NULL AND content_hash IN "
            f"({','.join('?' * len(hashes))})", hashes)}

    def memory_hash(self, memory_id: int) -> str | None:
        row = self.conn.execute("SELECT content_hash FROM memories WHERE id = ?", (memory_id,)).fetchone()
        return row[0] if row else None

    def meta_value(self, key: str) -> str | None:
        row = self.conn.execute("SELECT value FROM library_meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def journal_row(self, change_id: int) -> tuple[str, list[str], dict[str, Any] | None] | None:
        row = self.conn.execute("SELECT action, entities, detail FROM journal WHERE id = ?", (change_id,)).fetchone()
        return (row[0], json.loads(row[1]), json.loads(row[2]) if row[2] else None) if row else None

    def later_changes(self, change_id: int) -> Iterable[tuple[int, str, list[str]]]:
        for later_id, action, entities in self.conn.execute(
                "SELECT id, action, entities FROM journal WHERE id > ? ORDER BY id DESC", (change_id,)):
            yield later_id, action, json.loads(entities)

    def delete_entity(self, entity_id: int) -> None:
        self.conn.execute("DELETE FROM entities WHERE id = ?", (entity_id,))
        self.conn.execute("DELETE FROM entity_fts WHERE rowid = ?", (entity_id,))

    def delete_free_memory(self, memory_id: int) -> None:
        self.conn.execute("DELETE FROM memories WHERE id = ?", (memory_id,))

    def insert_entity(self, state: dict[str, Any]) -> int:
        conn = self.conn
        free = conn.execute("SELECT 1 FROM entities WHERE id = ?", (state["id"],)).fetchone() is None
        values = (state["name"], name_key(state["name"]), state["entity_type"],
                  json.dumps(state["aliases"], ensure_ascii=False), json.dumps(state["tags"], ensure_ascii=False),
                  json.dumps(state["metadata"], ensure_ascii=False), state["body"], state["created_at"],
                  state["updated_at"])
        if free:
            conn.execute("""INSERT INTO entities (id, name, name_key, entity_type, aliases, tags, metadata, body,
                            created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""", (state["id"], *values))
            entity_id = int(state["id"])
        else:
            cur = conn.execute("""INSERT INTO entities (name, name_key, entity_type, aliases, tags, metadata, body,
                                  created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)""", values)
            assert cur.lastrowid is not None  # an INSERT's row
            entity_id = cur.lastrowid
        for o in state["observations"]:
            _insert_kept_memory(conn, entity_id, o)
        conn.executemany("INSERT OR IGNORE INTO pending_links VALUES (?, ?, ?, ?)",
                         [(entity_id, rt, name_key(t), t) for rt, t in state["pending_links"]])
        return entity_id

    def insert_relation(self, from_id: int, relation_type: str, to_id: int, created_at: str) -> None:
        self.conn.execute("INSERT OR IGNORE INTO relations (from_id, relation_type, to_id, created_at) "
                          "VALUES (?, ?, ?, ?)", (from_id, relation_type, to_id, created_at))

    def insert_free_memory(self, state: dict[str, Any]) -> None:
        _insert_kept_memory(self.conn, None, state)

    def set_meta(self, key: str, value: str | None) -> None:
        if value is None:
            self.conn.execute("DELETE FROM library_meta WHERE key = ?", (key,))
        else:
            self.conn.execute("INSERT OR REPLACE INTO library_meta VALUES (?, ?)", (key, value))

    def restored(self, entity_ids: Sequence[int]) -> None:
        self.store._link_pending(self.conn)
        self.store._refresh_fts(self.conn, entity_ids)


class SQLiteUndo(undo.KeptRecords, SQLiteHost):
    """Undo records of SQLiteStore (uses its _write, _read, _resolve, _refresh_fts, _journal)."""

    def _before(self, conn: sqlite3.Connection, entity_ids: Iterable[int] = (), memory_ids: Iterable[int] = ()) -> None:
        """Keep the state of these entities and memories before this transaction changes them."""
        undo.keep_before(SQLiteUndoRows(conn, self), self._kept_now(), entity_ids, memory_ids)

    def _before_meta(self, conn: sqlite3.Connection, key: str) -> None:
        """Keep a library-wide value (the manual, the context) before this transaction changes it."""
        undo.keep_meta(SQLiteUndoRows(conn, self), self._kept_now(), key)

    def _note_journal_row(self, row_id: int) -> None:
        undo.note_row(self._kept_now(), row_id)

    def _seal_journal(self, conn: sqlite3.Connection) -> dict[str, Any] | None:
        """Write the kept rows and the after-fingerprints into this transaction's journal entry."""
        kept = self._kept_now()
        record = undo.seal(SQLiteUndoRows(conn, self), kept)
        if record is None:
            return None
        detail = conn.execute("SELECT detail FROM journal WHERE id = ?", (kept["row"],)).fetchone()[0]
        detail = json.loads(detail) if detail else {}
        detail["undo"] = record
        conn.execute("UPDATE journal SET detail = ? WHERE id = ?", (json.dumps(detail, ensure_ascii=False), kept["row"]))
        kept["row"] = None
        return detail

    # -- undo ------------------------------------------------------------------------

    @staticmethod
    def _journal_entry(conn: sqlite3.Connection, change_id: int) -> tuple[str, list[str], dict[str, Any]]:
        return undo.entry(SQLiteUndoRows(conn), change_id)

    @staticmethod
    def _later(conn: sqlite3.Connection, change_id: int, name: str) -> str:
        """'by change #M' for the latest later change naming the entity, if any."""
        return undo.later(SQLiteUndoRows(conn), change_id, name)

    def undo_change(self, change_id: int, *, origin: str = "undo") -> dict[str, Any]:
        """Revert journal entry `change_id`; refused (CONFLICT, nothing changed) if a later change stands in the way."""
        with self._write() as conn:
            action, names = undo.revert(SQLiteUndoRows(conn, self), self._kept_now(), change_id)
            self._journal(conn, origin, "undo", names, {"undid": change_id, "action": action})
        return {"undid": change_id, "action": action, "entities": names}

    # -- backups ---------------------------------------------------------------------------

    def note_backup(self, at: str, path: str) -> None:
        """Remember the last successful backup (health reports it)."""
        with self._write() as conn:
            conn.execute("INSERT OR REPLACE INTO library_meta VALUES ('last_backup', ?)",
                         (json.dumps({"at": at, "path": path}, ensure_ascii=False),))

    def last_backup(self) -> dict[str, str] | None:
        with self._read() as conn:
            row = conn.execute("SELECT value FROM library_meta WHERE key = 'last_backup'").fetchone()
        return json.loads(row[0]) if row else None

    def note_event(self, action: str, detail: dict[str, Any], *, vectors_floor: int = 0) -> None:
        """A journal entry for a change made outside the tools (a restore). `vectors_floor`: the
        vectors' version before it; the new one is higher, so running servers reload their vectors."""
        with self._write() as conn:
            self._journal(conn, action, action, [], detail)
            conn.execute("UPDATE library_meta SET value = max(CAST(value AS INTEGER), ?) + 1 WHERE key = 'vectors_version'",
                         (vectors_floor,))

    def holds_data(self) -> int:
        """How many entities, memories and relations the library holds."""
        with self._read() as conn:
            return conn.execute("SELECT (SELECT count(*) FROM entities) + (SELECT count(*) FROM memories) "
                                "+ (SELECT count(*) FROM relations)").fetchone()[0]

    # -- exports and imports of everything -------------------------------------------------

    def free_memories(self) -> list[Any]:
        """Every free memory (no entity), oldest first by id: what an export writes."""
        with self._read() as conn:
            return select_memories(conn, "m.entity_id IS NULL", (), order="m.id")

    def import_memories(self, items: Sequence[Any], *, origin: str) -> ImportedMemories:
        """Free memories with their own timestamps (MemoryLine-like items): how many added, how many there already."""
        added = 0
        with self._write() as conn:
            for m in items:
                memory_id = insert_memory(conn, None, m.content, m.memory_type, m.tags,
                                          None if m.importance == "medium" else m.importance, m.metadata, m.created_at)
                if memory_id is not None:
                    conn.execute("UPDATE memories SET updated_at = ? WHERE id = ?", (m.updated_at, memory_id))
                    added += 1
            if added:
                self._journal(conn, origin, "import_memories", [], {"added": added})
        return ImportedMemories(added, len(items) - added)

    def restore_dates(self, entities: Mapping[str, tuple[str, str, Sequence[str], Sequence[str]]],
                      relations: Mapping[tuple[str, str, str], str], *, origin: str) -> None:
        """Give entities (name_key -> created, updated, observations, their dates) and relations
        ((from key, type, to key) -> created) the times a file says they have."""
        with self._write() as conn:
            self._restore_dates_in(conn, entities, relations, origin)

    def _restore_dates_in(self, conn: sqlite3.Connection, entities: Mapping[str, tuple[str, str, Sequence[str], Sequence[str]]],
                          relations: Mapping[tuple[str, str, str], str], origin: str) -> None:
        """restore_dates inside an open write transaction (a Markdown library renders its files in the same one)."""
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
            self._journal(conn, origin, "restore_dates", [], {"entities": len(entities), "relations": len(relations)})


def _insert_kept_memory(conn: sqlite3.Connection, entity_id: int | None, kept: dict[str, Any]) -> None:
    """A memory (an observation when `entity_id` is given) back as the undo record kept it:
    its dates and use count too."""
    memory_id = insert_memory(conn, entity_id, kept["content"], kept["memory_type"], kept["tags"], kept["importance"],
                              kept["metadata"], kept["created_at"])
    if memory_id is not None:
        conn.execute("UPDATE memories SET updated_at = ?, access_count = ?, last_accessed_at = ? WHERE id = ?",
                     (kept["updated_at"], kept["access_count"], kept["last_accessed_at"], memory_id))
