"""The RenameTx of a SQLite (or Markdown) library: the primitives rules/rename.py renames and
merges entities with, over one connection inside one `BEGIN IMMEDIATE` transaction.

A Markdown library's files follow through the transaction (tx.py): `tx.note_rename` (every file
this change writes has its links rewritten in place) and `tx.note_tail` (a merge appends to the
target's file as it is); its triggers note every changed entity for writing back.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from memloci.core.model import name_key, now_iso
from memloci.markdown.document import EntityDocument
from memloci.rules import rename as rename_rules
from memloci.rules.documents import BODY_TAGS, EXTRA_KEY
from memloci.rules.graph import EntityRef, GraphTx
from memloci.store.sqlite.database import Database
from memloci.store.sqlite.documents import document
from memloci.store.sqlite.graph_tx import SQLiteGraphTx
from memloci.store.sqlite.memory_rows import reindex_content
from memloci.store.sqlite.rows import journal, refresh_fts, resolve
from memloci.store.sqlite.tx import WriteTx
from memloci.store.sqlite.undo_rows import keep_before
from memloci.store.sqlite.vault import link_pending


def _like(old: str) -> str:
    """A LIKE pattern for text holding `[[...old` (LIKE folds ASCII case only: the rule compares exactly)."""
    return "%[[%" + old.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


# the entities with a links_to relation to the target: their text names it even where LIKE misses
_LINKERS = "id IN (SELECT from_id FROM relations WHERE to_id = ? AND relation_type = 'links_to')"


class SQLiteRenameTx:
    def __init__(self, tx: WriteTx):
        self.tx = tx
        self.conn = tx.conn

    def resolve(self, names: Iterable[str]) -> dict[str, EntityRef]:
        return {key: EntityRef(i, name) for key, (i, name) in resolve(self.conn, names).items()}

    def graph(self) -> GraphTx:
        return SQLiteGraphTx(self.tx, now_iso())

    def before_change(self, ids: Sequence[int]) -> None:
        keep_before(self.tx, ids)

    def set_name(self, entity_id: int, name: str) -> None:
        self.conn.execute("UPDATE entities SET name = ?, name_key = ?, updated_at = ? WHERE id = ?",
                          (name, name_key(name), now_iso(), entity_id))
        self.conn.execute("UPDATE memories SET content_hash = memloci_content_hash(content, ?) WHERE entity_id = ?",
                          (name, entity_id))

    def note_rename(self, old: str, new: str) -> None:
        self.tx.note_rename(old, new)

    def extra_holders(self, old: str) -> list[tuple[int, str, list[str]]]:
        # every value that may hold a link (the name as stored in JSON may be escaped or in
        # another case): the rule reads each and rewrites only the links to `old`
        rows = self.conn.execute("SELECT id, name, metadata FROM entities WHERE instr(metadata, '[[') > 0").fetchall()
        return [(i, name, list(json.loads(meta).get(EXTRA_KEY, []))) for i, name, meta in rows]

    def set_extra(self, entity_id: int, blocks: list[str]) -> None:
        meta = json.loads(self.conn.execute("SELECT metadata FROM entities WHERE id = ?", (entity_id,)).fetchone()[0])
        meta[EXTRA_KEY] = blocks
        self.conn.execute("UPDATE entities SET metadata = ? WHERE id = ?", (json.dumps(meta, ensure_ascii=False), entity_id))

    def body_holders(self, old: str, target_id: int) -> list[tuple[int, str, str]]:
        return self.conn.execute(f"SELECT id, name, body FROM entities WHERE body LIKE ? ESCAPE '\\' OR {_LINKERS}",
                                 (_like(old), target_id)).fetchall()

    def set_body(self, entity_id: int, body: str) -> None:
        self.conn.execute("UPDATE entities SET body = ?, updated_at = ? WHERE id = ?", (body, now_iso(), entity_id))

    def observation_holders(self, old: str, target_id: int) -> list[tuple[int, int, str, str]]:
        return self.conn.execute(
            f"""SELECT m.id, m.entity_id, e.name, m.content FROM memories m JOIN entities e ON e.id = m.entity_id
                WHERE m.content LIKE ? ESCAPE '\\' OR (m.entity_id IN (SELECT id FROM entities WHERE {_LINKERS})
                      AND instr(m.content, '[[') > 0)""", (_like(old), target_id)).fetchall()

    def holds_observation(self, entity_id: int, content_hash: str) -> bool:
        return self.conn.execute("SELECT 1 FROM memories WHERE entity_id = ? AND content_hash = ?",
                                 (entity_id, content_hash)).fetchone() is not None

    def delete_observation(self, memory_id: int) -> None:
        self.conn.execute("DELETE FROM memories WHERE id = ?", (memory_id,))

    def set_observation(self, memory_id: int, entity_id: int, content: str, content_hash: str) -> None:
        self.conn.execute("UPDATE memories SET content = ?, content_hash = ?, embedded = 0, updated_at = ? WHERE id = ?",
                          (content, content_hash, now_iso(), memory_id))
        self.conn.execute("DELETE FROM memory_vectors WHERE memory_id = ?", (memory_id,))
        reindex_content(self.conn, memory_id, content)
        refresh_fts(self.conn, [entity_id])

    def pointing_at(self, ids: Sequence[int]) -> list[str]:
        marks = ",".join("?" * len(ids))
        return [n for (n,) in self.conn.execute(
            f"""SELECT DISTINCT e.name FROM relations r JOIN entities e ON e.id = r.from_id
                WHERE r.to_id IN ({marks}) AND r.from_id NOT IN ({marks}) ORDER BY e.name""", (*ids, *ids))]

    def link_pending(self, ids: Sequence[int]) -> None:
        link_pending(self.conn)  # (every waiting link whose name now exists)

    def document(self, entity_id: int) -> EntityDocument:
        return document(self.conn, entity_id)

    def observations(self, entity_id: int) -> list[tuple[int, str]]:
        return self.conn.execute("SELECT id, content FROM memories WHERE entity_id = ? ORDER BY id",
                                 (entity_id,)).fetchall()

    def move_observation(self, memory_id: int, entity_id: int, content_hash: str) -> None:
        self.conn.execute("UPDATE memories SET entity_id = ?, content_hash = ? WHERE id = ?",
                          (entity_id, content_hash, memory_id))

    def relations_of(self, entity_id: int) -> list[tuple[int, str, int, str]]:
        return self.conn.execute("""SELECT from_id, relation_type, to_id, created_at FROM relations
                                    WHERE from_id = ? OR to_id = ?""", (entity_id, entity_id)).fetchall()

    def add_relation(self, from_id: int, relation_type: str, to_id: int, created_at: str) -> None:
        self.conn.execute("INSERT OR IGNORE INTO relations (from_id, relation_type, to_id, created_at) VALUES (?, ?, ?, ?)",
                          (from_id, relation_type, to_id, created_at))

    def pending_of(self, entity_id: int) -> list[tuple[str, str, str]]:
        return self.conn.execute("SELECT relation_type, target_key, target FROM pending_links WHERE from_id = ?",
                                 (entity_id,)).fetchall()

    def add_pending(self, entity_id: int, relation_type: str, target_key: str, target: str) -> None:
        self.conn.execute("INSERT OR IGNORE INTO pending_links VALUES (?, ?, ?, ?)",
                          (entity_id, relation_type, target_key, target))

    def note_tail(self, key: str, tail: str) -> None:
        self.tx.note_tail(key, tail)

    def set_folded(self, entity_id: int, aliases: list[str], tags: list[str], body_tags: list[str], body: str) -> None:
        meta = json.loads(self.conn.execute("SELECT metadata FROM entities WHERE id = ?", (entity_id,)).fetchone()[0])
        meta.pop(BODY_TAGS, None)
        meta.update({BODY_TAGS: body_tags} if body_tags else {})
        self.conn.execute("UPDATE entities SET aliases = ?, tags = ?, metadata = ?, body = ?, updated_at = ? WHERE id = ?",
                          (json.dumps(aliases, ensure_ascii=False), json.dumps(tags, ensure_ascii=False),
                           json.dumps(meta, ensure_ascii=False), body, now_iso(), entity_id))

    def delete_entities(self, ids: Sequence[int]) -> None:
        self.conn.execute(f"DELETE FROM entities WHERE id IN ({','.join('?' * len(ids))})", list(ids))
        self.conn.executemany("DELETE FROM entity_fts WHERE rowid = ?", [(i,) for i in ids])

    def entities_changed(self, ids: Sequence[int]) -> None:
        refresh_fts(self.conn, ids)

    def journal(self, tool: str, action: str, entities: Sequence[str], detail: dict[str, Any]) -> None:
        journal(self.tx, tool, action, entities, detail)


def rename_entity(db: Database, old: str, new: str, *, origin: str) -> dict[str, Any]:
    with db.write() as tx:
        return rename_rules.rename_entity(SQLiteRenameTx(tx), old, new, origin)


def merge_entities(db: Database, sources: Sequence[str], target: str, *, origin: str) -> dict[str, Any]:
    rename_rules.check_merge_names(sources, target)
    with db.write() as tx:
        return rename_rules.merge_entities(SQLiteRenameTx(tx), db.schema, sources, target, origin)
