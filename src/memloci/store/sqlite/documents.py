"""Entity documents over the SQLite tables: read, apply (renames and merges: rename.py).

A document (front matter + Markdown body, see markdown/document.py) is one more view of an
entity. Applying one replaces the entity's type, aliases, tags, body, observations and
outgoing relations with the document's; `[[wikilinks]]` in the body are `links_to`
relations. A link to a name that does not exist yet waits in `pending_links` and becomes a
relation when that entity appears. What a document means is rules/documents.py's (shared with
the postgres engine); this module reads and writes it in SQLite.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any

from memloci.core.model import DocumentEdit, ListedEntity, Relation, content_hash, name_key, now_iso
from memloci.core.schema import LibrarySchema
from memloci.markdown.document import EntityDocument, render_document
from memloci.rules import documents as documents_rules
from memloci.store.protocols import EditedDocuments
from memloci.store.sqlite.database import Database
from memloci.store.sqlite.graph_tx import SQLiteGraphTx
from memloci.store.sqlite.memory_rows import insert_memory, reindex_content
from memloci.store.sqlite.rows import alias_holders, journal, load_entities, refresh_fts, relations_where, resolve
from memloci.store.sqlite.sql import marks
from memloci.store.sqlite.tx import WriteTx
from memloci.store.sqlite.undo_rows import keep_before, keep_meta
from memloci.store.sqlite.vault import alias_keys, alias_work, link_pending

LINKS_TO = documents_rules.LINKS_TO


def document(conn: sqlite3.Connection, entity_id: int) -> EntityDocument:
    """The entity's document as the index holds it."""
    entity = load_entities(conn, [entity_id])[entity_id]
    relations = [(t, to) for t, to in conn.execute(
        """SELECT r.relation_type, e.name FROM relations r JOIN entities e ON e.id = r.to_id
           WHERE r.from_id = ? ORDER BY r.created_at, r.relation_type, e.name_key""", (entity_id,))]
    relations += conn.execute("SELECT relation_type, target FROM pending_links WHERE from_id = ? "
                              "ORDER BY relation_type, target_key", (entity_id,)).fetchall()
    return documents_rules.document_of(entity, relations, lambda texts: alias_keys(conn, texts))


class SQLiteDocuments:
    """Entity documents, the manual and the context of one library's Database."""

    def __init__(self, db: Database):
        self.db = db

    # -- reading ---------------------------------------------------------------------

    def entity_documents(self, names: Sequence[str]) -> dict[str, EntityDocument]:
        """name_key -> document, for the names that exist."""
        with self.db.read() as conn:
            found = resolve(conn, names)
            return {key: document(conn, entity_id) for key, (entity_id, _) in found.items()}

    def list_entities(self, pattern: str = "*") -> list[ListedEntity]:
        """The entities whose name matches a glob, case-insensitively, by name."""
        with self.db.read() as conn:
            rows = conn.execute("SELECT name, entity_type FROM entities ORDER BY name_key").fetchall()
        return documents_rules.listed(rows, pattern)

    def find_relations(self, *, to_entity: str | None, relation_type: str | None,
                       from_entity: str | None) -> list[Relation]:
        where: list[str] = ["1"]
        params: list[Any] = []
        with self.db.read() as conn:
            for column, name in (("r.to_id", to_entity), ("r.from_id", from_entity)):
                if name:
                    found = resolve(conn, [name])
                    if not found:
                        field = "to_entity" if column == "r.to_id" else "from_entity"
                        raise documents_rules.relations_filter_missing(field, name)
                    where.append(f"{column} = ?")
                    params.append(next(iter(found.values()))[0])
            if relation_type:
                where.append("r.relation_type = ?")
                params.append(relation_type)
            return relations_where(conn, " AND ".join(where), params)

    def check_document(self, doc: EntityDocument, field: str) -> None:
        """The library schema's rules, for a document about to be applied."""
        documents_rules.check_document(self.db.schema, doc, field)

    # -- the library manual --------------------------------------------------------------

    def manual_text(self) -> str | None:
        with self.db.read() as conn:
            row = conn.execute("SELECT value FROM library_meta WHERE key = 'manual'").fetchone()
        return row[0] if row else None

    def edit_manual(self, change: Callable[[str | None], str], *, origin: str, detail: dict[str, Any]) -> str:
        """Read, change and write the manual in one transaction (no edit is lost to another writer)."""
        with self.db.write() as tx:
            conn = tx.conn
            keep_meta(tx, "manual")
            row = conn.execute("SELECT value FROM library_meta WHERE key = 'manual'").fetchone()
            text = change(row[0] if row else None)
            conn.execute("INSERT OR REPLACE INTO library_meta VALUES ('manual', ?)", (text,))
            journal(tx, origin, origin, [], detail)
        return text

    def edit_document(self, name: str, change: Callable[[str], str], *, origin: str,
                      detail: dict[str, Any], stamp: str | None = None) -> DocumentEdit:
        """Read an entity's document, change its text, apply it: one transaction, so two
        writers editing one entity both land. Returns the stored name, and whether anything changed.
        `stamp` dates the change instead of now (an import gives a note its own date), in the
        index and in the `modified:` of a file memloci created, so the two agree."""
        with self.db.write() as tx:
            found = resolve(tx.conn, [name])
            if not found:
                raise documents_rules.edit_missing(name)
            entity_id, stored = next(iter(found.values()))
            if not self._edit(tx, entity_id, stored, change, stamp):
                return DocumentEdit(stored, False)
            link_pending(tx.conn)
            refresh_fts(tx.conn, [entity_id])
            journal(tx, origin, origin, [stored], {"entity": stored, **detail})
        return DocumentEdit(stored, True)

    def edit_documents(self, changes: Sequence[tuple[str, Callable[[str], str]]], *, origin: str, action: str,
                       detail: dict[str, Any], absent: Sequence[str] = ()) -> EditedDocuments:
        """Several entities' document texts read, changed and applied in one transaction with
        one journal entry (rules/documents.py `edits_refused`: an entity gone, a name of
        `absent` that now reaches one, refuse it all)."""
        with self.db.write() as tx:
            conn = tx.conn
            found = resolve(conn, [n for n, _ in changes])
            reached = set(resolve(conn, absent)) | set(alias_holders(conn, absent))
            documents_rules.check_edits(action, [n for n, _ in changes], found, [n for n in absent if name_key(n) in reached])
            out, ids = [], []
            for name, change in changes:
                entity_id, stored = found[name_key(name)]
                changed = self._edit(tx, entity_id, stored, change, None, in_place=True)
                out.append(DocumentEdit(stored, changed))
                ids += [entity_id] if changed else []
            if not ids:
                return EditedDocuments(tuple(out), None)
            link_pending(conn)
            refresh_fts(conn, ids)
            journal(tx, origin, action, [e.name for e in out if e.changed], detail)
            change_id = tx.record["last_row"]
        return EditedDocuments(tuple(out), change_id)

    def _edit(self, tx: WriteTx, entity_id: int, stored: str, change: Callable[[str], str], stamp: str | None,
              in_place: bool = False) -> bool:
        """One entity's document text changed and applied inside `tx`; whether it changed.
        `in_place`: observations the edit only retexts keep their rows (rules/documents.py `retexted`)."""
        conn = tx.conn
        text = self.db.files.document_text(tx, entity_id)
        if text is None:  # no file: the document as the index holds it
            text = render_document(document(conn, entity_id))
        new_text = change(text)
        if new_text == text:
            return False
        doc = documents_rules.edited_document(text, new_text, stored)
        self.check_document(doc, "entity")
        keep_before(tx, [entity_id])
        if in_place:
            before = documents_rules.edited_document(text, text, stored).observations
            for old, new in documents_rules.retexted(before, doc.observations):
                row = conn.execute("SELECT id FROM memories WHERE entity_id = ? AND content = ?",
                                   (entity_id, old)).fetchone()
                if row is not None:
                    conn.execute("""UPDATE memories SET content = ?, content_hash = ?, embedded = 0, updated_at = ?
                                    WHERE id = ?""", (new, content_hash(new, stored), now_iso(), row[0]))
                    conn.execute("DELETE FROM memory_vectors WHERE memory_id = ?", (row[0],))
                    reindex_content(conn, row[0], new)
        tx.keep_text(name_key(stored), new_text, stamp)
        apply_document(tx, self.db.schema, doc, now_iso(), stamp=stamp)
        return True

    # -- the hot context ---------------------------------------------------------------

    def read_context(self) -> dict[str, Any]:
        with self.db.read() as conn:
            row = conn.execute("SELECT value FROM library_meta WHERE key = 'context'").fetchone()
        return json.loads(row[0]) if row else {}

    def update_context(self, change: Callable[[dict[str, Any]], dict[str, Any]], *, origin: str) -> dict[str, Any]:
        """Read, merge and write the context in one transaction."""
        with self.db.write() as tx:
            conn = tx.conn
            keep_meta(tx, "context")
            row = conn.execute("SELECT value FROM library_meta WHERE key = 'context'").fetchone()
            before = json.loads(row[0]) if row else {}
            ctx = change(before)
            conn.execute("INSERT OR REPLACE INTO library_meta VALUES ('context', ?)", (json.dumps(ctx, ensure_ascii=False),))
            journal(tx, origin, origin, [], {k: {"before": before.get(k), "after": v}
                                                      for k, v in ctx.items() if before.get(k) != v and k != "updated_at"})
        return ctx

    # -- writing ---------------------------------------------------------------------

    def apply_documents(self, docs: Sequence[EntityDocument], *, origin: str, action: str,
                        create: bool | None = None, detail: dict[str, Any] | None = None) -> list[str]:
        """Make each entity what its document says, in one transaction; the stored names.

        `create`: True refuses names that exist, False refuses names that do not, None takes both.
        """
        at = now_iso()
        with self.db.write() as tx:
            conn = tx.conn
            existing = resolve(conn, [d.name for d in docs])
            documents_rules.check_create(create, docs, {k: name for k, (_, name) in existing.items()})
            keep_before(tx, [i for i, _ in existing.values()])
            ids = [apply_document(tx, self.db.schema, d, at) for d in docs]
            link_pending(conn)
            refresh_fts(conn, ids)
            names = [d.name for d in docs]
            journal(tx, origin, action, names, detail)
        return names


def apply_document(tx: WriteTx, schema: LibrarySchema, doc: EntityDocument, at: str,
                   stamp: str | None = None, file_time: str | None = None) -> int:
    """Upsert one entity from its document; `stamp` overrides updated_at (a file's own time).

    `file_time` (a file's mtime) dates what the file itself does not: the entity's creation
    when it has no `created:`, and observation lines without memloci's date comment. A date
    is read, never invented into the file."""
    conn = tx.conn
    key = name_key(doc.name)
    row = conn.execute("SELECT id, metadata FROM entities WHERE name_key = ?", (key,)).fetchone()
    tags, metadata = documents_rules.entity_fields(doc, json.loads(row[1]) if row else {})
    values = (doc.name, doc.entity_type, json.dumps(list(doc.aliases), ensure_ascii=False),
              json.dumps(tags, ensure_ascii=False), json.dumps(metadata, ensure_ascii=False), doc.body)
    if row:
        entity_id = row[0]
        conn.execute("""UPDATE entities SET name = ?, entity_type = ?, aliases = ?, tags = ?, metadata = ?,
                        body = ?, updated_at = ? WHERE id = ?""", (*values, stamp or at, entity_id))
    else:
        entity_id = conn.execute(
            """INSERT INTO entities (name, entity_type, aliases, tags, metadata, body, name_key, created_at, updated_at)
               VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)""",
            (*values, key, doc.created or file_time or at, stamp or doc.modified or file_time or at),
        ).lastrowid
    # Observations: keep the unchanged ones (their ids, times, vectors), drop and add the rest.
    wanted = list(dict.fromkeys(doc.observations))
    have = dict(conn.execute("SELECT content, id FROM memories WHERE entity_id = ?", (entity_id,)).fetchall())
    gone = [have[c] for c in have if c not in set(wanted)]
    if gone:
        conn.execute(f"DELETE FROM memories WHERE id IN ({marks(len(gone))})", gone)
    for content in wanted:
        if content not in have:
            insert_memory(conn, entity_id, content, "observation", (), None, {},
                          doc.dates.get(content) or file_time or at)
    # Outgoing relations (documents_rules.wanted_links). A schema that lists its relation
    # types (unless the text comes from files being read, which are never refused) wants
    # both ends to exist and its cycles kept out.
    typed = schema.relation_types is not None
    refusing = typed and not tx.reading_files
    wanted_rel = documents_rules.wanted_links(doc, schema)
    targets = resolve(conn, [t for t in wanted_rel.values()])
    resolved = {(rt, targets[k][0]) for (rt, k) in wanted_rel if k in targets}
    if refusing:
        documents_rules.check_targets(schema, wanted_rel, targets)
    current = set(conn.execute("SELECT relation_type, to_id FROM relations WHERE from_id = ?", (entity_id,)).fetchall())
    if refusing:
        documents_rules.check_cycles(SQLiteGraphTx(tx, at), schema, doc.name, entity_id, resolved - current)
    conn.executemany("DELETE FROM relations WHERE from_id = ? AND relation_type = ? AND to_id = ?",
                     [(entity_id, rt, to) for rt, to in current - resolved])
    conn.executemany("INSERT OR IGNORE INTO relations (from_id, relation_type, to_id, created_at) VALUES (?, ?, ?, ?)",
                     [(entity_id, rt, to, at) for rt, to in resolved - current])
    conn.execute("DELETE FROM pending_links WHERE from_id = ?", (entity_id,))
    conn.executemany("INSERT OR IGNORE INTO pending_links VALUES (?, ?, ?, ?)",
                     [(entity_id, rt, k, t) for (rt, k), t in wanted_rel.items() if k not in targets])
    waiting = [t for (rt, k), t in wanted_rel.items() if k not in targets]
    if doc.aliases or waiting:
        alias_work(conn, entity_id if doc.aliases else None, waiting)
    return entity_id
