"""Renaming and merging entities on the postgres engine.

What a rename or a merge changes, folds and refuses is rules/rename.py's, shared with the
SQLite and Markdown engines; PostgresRenameTx gives those rules their primitives over one
write transaction under the library's advisory lock (Database.transact), so a rename
on one server and a write on another never interleave, and a refused merge leaves nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from memloci.core.model import content_hash, name_key, now_iso
from memloci.core.schema import LibrarySchema
from memloci.markdown.document import EntityDocument
from memloci.rules import rename as rename_rules
from memloci.rules.graph import EntityRef, GraphTx
from memloci.store.postgres.database import Database
from memloci.store.postgres.documents import document
from memloci.store.postgres.entities import BODY_TAGS, link_pending, reindex, resolve
from memloci.store.postgres.graph import PostgresGraphTx
from memloci.store.postgres.json_columns import as_json, as_jsonb
from memloci.store.postgres.transaction import WriteTx
from memloci.store.postgres.vectors import bump_vectors, drop_memory_vectors

EXTRA_KEY = "frontmatter_extra"  # entity metadata: front matter keys memloci does not know (rules/documents.py)
C = ' COLLATE "C"'  # names in byte order, as SQLite sorts them

# the entities with a links_to relation to the target: their text names it even where ILIKE misses
_LINKERS = "id IN (SELECT from_id FROM relations WHERE to_id = %s AND relation_type = 'links_to')"


def _like(old: str) -> str:
    """An ILIKE pattern for text holding `[[...old` (a superset: the rule compares exactly)."""
    return "%[[%" + old.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


class PostgresRenameTx:
    """rename_rules.RenameTx over one psycopg connection inside a write transaction."""

    def __init__(self, tx: WriteTx):
        self.conn = tx.conn
        self.g = PostgresGraphTx(tx)  # its before_change keeps undo records, as every write's

    def resolve(self, names: Iterable[str]) -> dict[str, EntityRef]:
        return resolve(self.conn, names)

    def graph(self) -> GraphTx:
        return self.g

    def before_change(self, ids: Sequence[int]) -> None:
        self.g.before_change(ids)

    def set_name(self, entity_id: int, name: str) -> None:
        self.conn.execute("UPDATE entities SET name = %s, name_key = %s, updated_at = %s WHERE id = %s",
                          (name, name_key(name), now_iso(), entity_id))
        # An observation's hash covers its entity's name (PostgreSQL has no such function: hashed here).
        rows = self.conn.execute("SELECT id, content FROM memories WHERE entity_id = %s", (entity_id,)).fetchall()
        if rows:
            self.conn.execute("""UPDATE memories m SET content_hash = x.h FROM unnest(%s::bigint[], %s::text[]) AS x(id, h)
                                 WHERE m.id = x.id""",
                              ([i for i, _ in rows], [content_hash(c, name) for _, c in rows]))

    def note_rename(self, old: str, new: str) -> None:
        """Nothing to do: no files."""

    def extra_holders(self, old: str) -> list[tuple[int, str, list[str]]]:
        rows = self.conn.execute("SELECT id, name, metadata FROM entities WHERE strpos(metadata::text, '[[') > 0 "
                                 "ORDER BY id").fetchall()
        return [(int(i), name, list(meta.get(EXTRA_KEY, []))) for i, name, meta in rows if meta.get(EXTRA_KEY)]

    def set_extra(self, entity_id: int, blocks: list[str]) -> None:
        (meta,) = self.conn.execute("SELECT metadata FROM entities WHERE id = %s", (entity_id,)).fetchone()
        meta = dict(meta)
        meta[EXTRA_KEY] = blocks
        self.conn.execute("UPDATE entities SET metadata = %s WHERE id = %s", (as_json(meta), entity_id))

    def body_holders(self, old: str, target_id: int) -> list[tuple[int, str, str]]:
        return [(int(i), n, b) for i, n, b in self.conn.execute(
            f"SELECT id, name, body FROM entities WHERE body ILIKE %s OR {_LINKERS} ORDER BY id",
            (_like(old), target_id))]

    def set_body(self, entity_id: int, body: str) -> None:
        self.conn.execute("UPDATE entities SET body = %s, updated_at = %s WHERE id = %s", (body, now_iso(), entity_id))

    def observation_holders(self, old: str, target_id: int) -> list[tuple[int, int, str, str]]:
        return [(int(m), int(e), n, c) for m, e, n, c in self.conn.execute(
            f"""SELECT m.id, m.entity_id, e.name, m.content FROM memories m JOIN entities e ON e.id = m.entity_id
                WHERE m.content ILIKE %s OR (m.entity_id IN (SELECT id FROM entities WHERE {_LINKERS})
                      AND strpos(m.content, '[[') > 0)
                ORDER BY m.id""", (_like(old), target_id))]

    def holds_observation(self, entity_id: int, content_hash: str) -> bool:
        return self.conn.execute("SELECT 1 FROM memories WHERE entity_id = %s AND content_hash = %s",
                                 (entity_id, content_hash)).fetchone() is not None

    def delete_observation(self, memory_id: int) -> None:
        if drop_memory_vectors(self.conn, [memory_id]):
            bump_vectors(self.conn)
        self.conn.execute("DELETE FROM memories WHERE id = %s", (memory_id,))

    def set_observation(self, memory_id: int, entity_id: int, content: str, content_hash: str) -> None:
        self.conn.execute("""UPDATE memories SET content = %s, content_hash = %s, embedded = false, updated_at = %s
                             WHERE id = %s""", (content, content_hash, now_iso(), memory_id))
        if drop_memory_vectors(self.conn, [memory_id]):
            bump_vectors(self.conn)
        reindex(self.conn, [entity_id])

    def pointing_at(self, ids: Sequence[int]) -> list[str]:
        return [n for (n,) in self.conn.execute(
            f"""SELECT DISTINCT e.name{C} AS name FROM relations r JOIN entities e ON e.id = r.from_id
                WHERE r.to_id = ANY(%s) AND NOT r.from_id = ANY(%s) ORDER BY 1""", (list(ids), list(ids)))]

    def link_pending(self, ids: Sequence[int]) -> None:
        link_pending(self.conn, ids, self.g.at)

    def document(self, entity_id: int) -> EntityDocument:
        return document(self.conn, entity_id)

    def observations(self, entity_id: int) -> list[tuple[int, str]]:
        return [(int(i), c) for i, c in self.conn.execute(
            "SELECT id, content FROM memories WHERE entity_id = %s ORDER BY id", (entity_id,))]

    def move_observation(self, memory_id: int, entity_id: int, content_hash: str) -> None:
        self.conn.execute("UPDATE memories SET entity_id = %s, content_hash = %s WHERE id = %s",
                          (entity_id, content_hash, memory_id))

    def relations_of(self, entity_id: int) -> list[tuple[int, str, int, str]]:
        return [(int(f), rt, int(t), c) for f, rt, t, c in self.conn.execute(
            f"""SELECT from_id, relation_type, to_id, created_at FROM relations WHERE from_id = %s OR to_id = %s
                ORDER BY from_id, relation_type{C}, to_id""", (entity_id, entity_id))]

    def add_relation(self, from_id: int, relation_type: str, to_id: int, created_at: str) -> None:
        self.conn.execute("""INSERT INTO relations (from_id, relation_type, to_id, created_at) VALUES (%s, %s, %s, %s)
                             ON CONFLICT DO NOTHING""", (from_id, relation_type, to_id, created_at))

    def pending_of(self, entity_id: int) -> list[tuple[str, str, str]]:
        return [(rt, k, t) for rt, k, t in self.conn.execute(
            f"""SELECT relation_type, target_key, target FROM pending_links WHERE from_id = %s
                ORDER BY relation_type{C}, target_key{C}""", (entity_id,))]

    def add_pending(self, entity_id: int, relation_type: str, target_key: str, target: str) -> None:
        self.conn.execute("""INSERT INTO pending_links (from_id, relation_type, target_key, target)
                             VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING""",
                          (entity_id, relation_type, target_key, target))

    def note_tail(self, key: str, tail: str) -> None:
        """Nothing to do: no files."""

    def set_folded(self, entity_id: int, aliases: list[str], tags: list[str], body_tags: list[str], body: str) -> None:
        (meta,) = self.conn.execute("SELECT metadata FROM entities WHERE id = %s", (entity_id,)).fetchone()
        meta = dict(meta)
        meta.pop(BODY_TAGS, None)
        meta.update({BODY_TAGS: body_tags} if body_tags else {})
        self.conn.execute("""UPDATE entities SET aliases = %s, tags = %s, metadata = %s, body = %s, updated_at = %s
                             WHERE id = %s""", (as_jsonb(aliases), as_jsonb(tags), as_json(meta), body, now_iso(), entity_id))

    def delete_entities(self, ids: Sequence[int]) -> None:
        self.g.delete_entities(ids)  # observations, relations and waiting links go with them

    def entities_changed(self, ids: Sequence[int]) -> None:
        reindex(self.conn, ids)

    def journal(self, tool: str, action: str, entities: Sequence[str], detail: dict[str, Any]) -> None:
        self.g.journal(tool, action, entities, detail)


class PostgresRename:
    """rename_entity and merge_entities: each one transaction over rename_rules."""

    def __init__(self, db: Database):
        self.db = db

    def rename_entity(self, old: str, new: str, *, origin: str) -> dict[str, Any]:
        """Rename an entity and rewrite every link to it: {old_name, new_name, links_rewritten_in}."""
        return self.db.transact(lambda tx: rename_rules.rename_entity(PostgresRenameTx(tx), old, new, origin))

    def merge_entities(self, schema: LibrarySchema, sources: Sequence[str], target: str, *, origin: str) -> dict[str, Any]:
        """Fold `sources` into `target` (observations, relations, links) and delete them."""
        rename_rules.check_merge_names(sources, target)
        return self.db.transact(lambda tx: rename_rules.merge_entities(PostgresRenameTx(tx), schema, sources, target,
                                                                       origin))
