"""The GraphTx of a SQLite (or Markdown) library: the primitives rules/graph.py writes the graph with,
over one connection inside one `BEGIN IMMEDIATE` transaction of the store.

A Markdown library needs nothing more here: its triggers note every changed entity in
md_dirty, and its FileSide writes those files before the transaction commits (store/markdown/writeback.py).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

from memloci.core.model import Entity, Relation, content_hash
from memloci.rules.graph import EntityHead, EntityRef, walk_path
from memloci.store.sqlite.memory_rows import insert_memory
from memloci.store.sqlite.rows import journal, load_entities, refresh_fts, relations_touching, resolve
from memloci.store.sqlite.sql import chunks, marks
from memloci.store.sqlite.tx import WriteTx
from memloci.store.sqlite.undo_rows import keep_before
from memloci.store.sqlite.vault import drop_property_link, link_pending, resolve_names, retag


class SQLiteGraphTx:
    def __init__(self, tx: WriteTx, at: str, *, link_pending: bool = False):
        self.tx = tx
        self.conn = tx.conn
        self.at = at
        # create_entities turns links waiting for a name into relations (documents that linked
        # to it before it existed); the other graph writes make no names.
        self.link_pending = link_pending
        self._names: dict[int, str] = {}  # id -> stored name, of the entities this transaction met

    def resolve(self, names: Iterable[str], *, aliases: bool = False) -> dict[str, EntityRef]:
        names = list(names)
        found = resolve_names(self.conn, names) if aliases else resolve(self.conn, names)
        self._names.update(found.values())
        return {key: EntityRef(id_, name) for key, (id_, name) in found.items()}

    def _name(self, entity_id: int) -> str:
        if entity_id not in self._names:
            self._names[entity_id] = self.conn.execute("SELECT name FROM entities WHERE id = ?",
                                                       (entity_id,)).fetchone()[0]
        return self._names[entity_id]

    def head(self, entity_id: int) -> EntityHead:
        name, entity_type, created_at = self.conn.execute(
            "SELECT name, entity_type, created_at FROM entities WHERE id = ?", (entity_id,)).fetchone()
        return EntityHead(entity_id, name, entity_type, created_at)

    def insert_entity(self, name: str, key: str, entity_type: str) -> int:
        entity_id = self.conn.execute(
            "INSERT INTO entities (name, name_key, entity_type, created_at, updated_at) VALUES (?, ?, ?, ?, ?)",
            (name, key, entity_type, self.at, self.at)).lastrowid
        assert entity_id is not None
        self._names[entity_id] = name
        return entity_id

    def insert_observation(self, entity_id: int, content: str) -> bool:
        return insert_memory(self.conn, entity_id, content, "observation", (), None, {}, self.at) is not None

    def delete_observation(self, entity_id: int, content: str) -> str | None:
        row = self.conn.execute("DELETE FROM memories WHERE entity_id = ? AND content_hash = ? RETURNING content",
                                (entity_id, content_hash(content, self._name(entity_id)))).fetchone()
        return row[0] if row else None

    def touch(self, entity_ids: Sequence[int]) -> None:
        self.conn.executemany("UPDATE entities SET updated_at = ? WHERE id = ?", [(self.at, i) for i in entity_ids])

    def reachable(self, start: int, goal: int, types: tuple[str, ...]) -> list[str]:
        return path(self.conn, start, goal, types)

    def insert_relation(self, from_id: int, relation_type: str, to_id: int) -> bool:
        cur = self.conn.execute(
            "INSERT OR IGNORE INTO relations (from_id, relation_type, to_id, created_at) VALUES (?, ?, ?, ?)",
            (from_id, relation_type, to_id, self.at))
        return bool(cur.rowcount)

    def delete_relation(self, from_id: int, relation_type: str, to_id: int) -> bool:
        cur = self.conn.execute("DELETE FROM relations WHERE from_id = ? AND relation_type = ? AND to_id = ?",
                                (from_id, relation_type, to_id))
        if not cur.rowcount:
            return False
        # `key: "[[to]]"` in the source's front matter holds this relation too: it goes with it
        drop_property_link(self.conn, from_id, relation_type, self._name(to_id))
        return True

    def load_entities(self, ids: Sequence[int]) -> dict[int, Entity]:
        return load_entities(self.conn, ids)

    def relations_touching(self, ids: Sequence[int]) -> list[Relation]:
        return relations_touching(self.conn, ids)

    def delete_entities(self, ids: Sequence[int]) -> None:
        for chunk in chunks(list(ids)):  # memories and relations go by ON DELETE CASCADE
            self.conn.execute(f"DELETE FROM entities WHERE id IN ({marks(len(chunk))})", chunk)
        self.conn.executemany("DELETE FROM entity_fts WHERE rowid = ?", [(i,) for i in ids])

    def before_change(self, ids: Sequence[int]) -> None:
        keep_before(self.tx, ids)

    def entities_changed(self, ids: Sequence[int]) -> None:
        retag(self.conn, ids)  # observations' #tags are the entity's tags
        refresh_fts(self.conn, ids)
        if self.link_pending:
            link_pending(self.conn)

    def journal(self, tool: str, action: str, entities: Sequence[str], detail: dict[str, Any] | None) -> None:
        journal(self.tx, tool, action, entities, detail)


def path(conn: sqlite3.Connection, start: int, goal: int, types: tuple[str, ...]) -> list[str]:
    """Names along relations (of `types`; () for all) from start to goal; [] if goal is not reachable."""
    where = f"AND r.relation_type IN ({marks(len(types))})" if types else ""
    if start == goal:
        return [conn.execute("SELECT name FROM entities WHERE id = ?", (start,)).fetchone()[0]]
    reach = conn.execute(
        f"""WITH RECURSIVE reach(id) AS (SELECT ? UNION SELECT r.to_id FROM relations r JOIN reach ON r.from_id = reach.id
            {where}) SELECT 1 FROM reach WHERE id = ? LIMIT 1""", (start, *types, goal)).fetchone()
    if not reach:
        return []
    # rare (an error): walk again for a readable path
    ids = walk_path(start, goal, lambda frontier: conn.execute(
        f"""SELECT r.from_id, r.to_id FROM relations r WHERE r.from_id IN (SELECT value FROM json_each(?)) {where}
            ORDER BY r.from_id, r.relation_type, r.to_id""", (json.dumps(list(frontier)), *types)).fetchall())
    names = dict(conn.execute(f"SELECT id, name FROM entities WHERE id IN ({marks(len(ids))})", ids).fetchall())
    return [names[i] for i in ids]
