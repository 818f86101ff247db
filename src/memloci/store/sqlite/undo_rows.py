"""Undo records of a SQLite index: the engine's rows for the rules of rules/undo.py, which say
what a destructive change keeps in its journal entry, when an undo is refused, and how the
kept rows come back.

A destructive write calls `keep_before(tx, entity_ids, memory_ids)` before it changes anything
(`keep_meta` for the manual and the context); `Database.write` seals the transaction's record
into its journal entry just before the commit (`seal_journal`), where a Markdown library's
FileSide adds its files to it.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

from memloci.core.model import name_key
from memloci.rules import undo
from memloci.store.sqlite.memory_rows import insert_memory
from memloci.store.sqlite.rows import refresh_fts
from memloci.store.sqlite.tx import FileSide, WriteTx
from memloci.store.sqlite.vault import link_pending

_MEMORY_COLUMNS = ", ".join(undo.MEMORY_FIELDS)


def _memory_row(row: tuple) -> dict[str, Any]:
    state = dict(zip(undo.MEMORY_FIELDS, row))
    state["tags"], state["metadata"] = json.loads(state["tags"]), json.loads(state["metadata"])
    state["links"] = json.loads(state["links"])
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
    """undo.UndoRows over one SQLite connection (inside a write transaction, to write)."""

    def __init__(self, conn: sqlite3.Connection):
        self.conn = conn

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
            insert_kept_memory(conn, entity_id, o)
        conn.executemany("INSERT OR IGNORE INTO pending_links VALUES (?, ?, ?, ?)",
                         [(entity_id, rt, name_key(t), t) for rt, t in state["pending_links"]])
        return entity_id

    def insert_relation(self, from_id: int, relation_type: str, to_id: int, created_at: str) -> None:
        self.conn.execute("INSERT OR IGNORE INTO relations (from_id, relation_type, to_id, created_at) "
                          "VALUES (?, ?, ?, ?)", (from_id, relation_type, to_id, created_at))

    def insert_free_memory(self, state: dict[str, Any]) -> None:
        insert_kept_memory(self.conn, None, state)

    def set_meta(self, key: str, value: str | None) -> None:
        if value is None:
            self.conn.execute("DELETE FROM library_meta WHERE key = ?", (key,))
        else:
            self.conn.execute("INSERT OR REPLACE INTO library_meta VALUES (?, ?)", (key, value))

    def restored(self, entity_ids: Sequence[int]) -> None:
        link_pending(self.conn)
        refresh_fts(self.conn, entity_ids)


def keep_before(tx: WriteTx, entity_ids: Iterable[int] = (), memory_ids: Iterable[int] = ()) -> None:
    """Keep the state of these entities and memories before this transaction changes them."""
    undo.keep_before(SQLiteUndoRows(tx.conn), tx.record, entity_ids, memory_ids)


def keep_meta(tx: WriteTx, key: str) -> None:
    """Keep a library-wide value (the manual, the context) before this transaction changes it."""
    undo.keep_meta(SQLiteUndoRows(tx.conn), tx.record, key)


def seal_journal(tx: WriteTx, files: FileSide) -> dict[str, Any] | None:
    """Write the kept rows and the after-fingerprints into this transaction's journal entry
    (with what the file side adds: `files.sealing`); the entry's detail, or None if nothing was kept."""
    kept = tx.record
    record = undo.seal(SQLiteUndoRows(tx.conn), kept)
    if record is None:
        return None
    detail = tx.conn.execute("SELECT detail FROM journal WHERE id = ?", (kept["row"],)).fetchone()[0]
    detail = json.loads(detail) if detail else {}
    detail["undo"] = record
    files.sealing(tx, detail)
    tx.conn.execute("UPDATE journal SET detail = ? WHERE id = ?", (json.dumps(detail, ensure_ascii=False), kept["row"]))
    kept["row"] = None
    return detail


def journal_entry(conn: sqlite3.Connection, change_id: int) -> tuple[str, list[str], dict[str, Any]]:
    """(action, entity names, detail) of a journal entry that kept an undo record; else the error saying why not."""
    return undo.entry(SQLiteUndoRows(conn), change_id)


def later(conn: sqlite3.Connection, change_id: int, name: str) -> str:
    """' by change #M (action)' for the latest later change naming the entity, if any."""
    return undo.later(SQLiteUndoRows(conn), change_id, name)


def insert_kept_memory(conn: sqlite3.Connection, entity_id: int | None, kept: dict[str, Any]) -> None:
    """A memory (an observation when `entity_id` is given) back as the undo record kept it:
    its dates and use count too."""
    memory_id = insert_memory(conn, entity_id, kept["content"], kept["memory_type"], kept["tags"], kept["importance"],
                              kept["metadata"], kept["created_at"])
    if memory_id is not None:
        conn.execute("UPDATE memories SET updated_at = ?, access_count = ?, last_accessed_at = ?, superseded_by = ?, "
                     "archived_at = ?, links = ? WHERE id = ?",
                     (kept["updated_at"], kept["access_count"], kept["last_accessed_at"], kept.get("superseded_by"),
                      kept.get("archived_at"), json.dumps(kept.get("links") or [], ensure_ascii=False), memory_id))
