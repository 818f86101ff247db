"""Entity documents over the SQLite tables: read, apply, rename, merge (mixed into SQLiteStore).

A document (front matter + Markdown body, see markdown/document.py) is one more view of an
entity. Applying one replaces the entity's type, aliases, tags, body, observations and
outgoing relations with the document's; `[[wikilinks]]` in the body are `links_to`
relations. A link to a name that does not exist yet waits in `pending_links` and becomes a
relation when that entity appears. What a document means is documents_rules.py's (shared with
the postgres engine); this module reads and writes it in SQLite.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any

from memloci.core.model import DocumentEdit, ListedEntity, Relation, name_key, now_iso
from memloci.markdown.document import EntityDocument, render_document
from memloci.rules import documents as documents_rules
from memloci.rules import rename as rename_rules
from memloci.store.sqlite.memories import insert_memory
from memloci.store.sqlite.rename import SQLiteRenameTx
from memloci.store.sqlite.vault import SQLiteVaultLinks

LINKS_TO = documents_rules.LINKS_TO


def _marks(n: int) -> str:
    return ",".join("?" * n)


class SQLiteDocuments(SQLiteVaultLinks):
    """The document half of SQLiteStore (uses its _write, _read, _resolve, _refresh_fts, _journal)."""

    # -- reading ---------------------------------------------------------------------

    def entity_documents(self, names: Sequence[str]) -> dict[str, EntityDocument]:
        """name_key -> document, for the names that exist."""
        with self._read() as conn:
            found = self._resolve(conn, names)
            return {key: self._document(conn, entity_id) for key, (entity_id, _) in found.items()}

    def list_entities(self, pattern: str = "*") -> list[ListedEntity]:
        """The entities whose name matches a glob, case-insensitively, by name."""
        with self._read() as conn:
            rows = conn.execute("SELECT name, entity_type FROM entities ORDER BY name_key").fetchall()
        return documents_rules.listed(rows, pattern)

    def find_relations(self, *, to_entity: str | None, relation_type: str | None,
                       from_entity: str | None) -> list[Relation]:
        where: list[str] = ["1"]
        params: list[Any] = []
        with self._read() as conn:
            for column, name in (("r.to_id", to_entity), ("r.from_id", from_entity)):
                if name:
                    found = self._resolve(conn, [name])
                    if not found:
                        field = "to_entity" if column == "r.to_id" else "from_entity"
                        raise documents_rules.relations_filter_missing(field, name)
                    where.append(f"{column} = ?")
                    params.append(next(iter(found.values()))[0])
            if relation_type:
                where.append("r.relation_type = ?")
                params.append(relation_type)
            return self._relations_where(conn, " AND ".join(where), params)

    def _document(self, conn: sqlite3.Connection, entity_id: int) -> EntityDocument:
        entity = self._load_entities(conn, [entity_id])[entity_id]
        relations = [(t, to) for t, to in conn.execute(
            """SELECT r.relation_type, e.name FROM relations r JOIN entities e ON e.id = r.to_id
               WHERE r.from_id = ? ORDER BY r.created_at, r.relation_type, e.name_key""", (entity_id,))]
        relations += conn.execute("SELECT relation_type, target FROM pending_links WHERE from_id = ? "
                                  "ORDER BY relation_type, target_key", (entity_id,)).fetchall()
        return documents_rules.document_of(entity, relations, lambda texts: self._alias_keys(conn, texts))

    def check_document(self, doc: EntityDocument, field: str) -> None:
        """The library schema's rules, for a document about to be applied."""
        documents_rules.check_document(self.schema, doc, field)

    # -- the library manual --------------------------------------------------------------

    def manual_text(self) -> str | None:
        with self._read() as conn:
            row = conn.execute("SELECT value FROM library_meta WHERE key = 'manual'").fetchone()
        return row[0] if row else None

    def edit_manual(self, change: Callable[[str | None], str], *, origin: str, detail: dict[str, Any]) -> str:
        """Read, change and write the manual in one transaction (no edit is lost to another writer)."""
        with self._write() as conn:
            self._before_meta(conn, "manual")
            row = conn.execute("SELECT value FROM library_meta WHERE key = 'manual'").fetchone()
            text = change(row[0] if row else None)
            conn.execute("INSERT OR REPLACE INTO library_meta VALUES ('manual', ?)", (text,))
            self._journal(conn, origin, origin, [], detail)
        return text

    def edit_document(self, name: str, change: Callable[[str], str], *, origin: str,
                      detail: dict[str, Any], stamp: str | None = None) -> DocumentEdit:
        """Read an entity's document, change its text, apply it: one transaction, so two
        writers editing one entity both land. Returns the stored name, and whether anything changed.
        `stamp` dates the change instead of now (an import gives a note its own date), in the
        index and in the `modified:` of a file memloci created, so the two agree."""
        with self._write() as conn:
            found = self._resolve(conn, [name])
            if not found:
                raise documents_rules.edit_missing(name)
            entity_id, stored = next(iter(found.values()))
            text = self._document_text(conn, entity_id)
            new_text = change(text)
            if new_text == text:
                return DocumentEdit(stored, False)
            doc = documents_rules.edited_document(text, new_text, stored)
            self.check_document(doc, "entity")
            self._before(conn, [entity_id])
            at = now_iso()
            self._keep_text(name_key(stored), new_text, stamp)
            self._apply_document(conn, doc, at, stamp=stamp)
            self._link_pending(conn)
            self._refresh_fts(conn, [entity_id])
            self._journal(conn, origin, origin, [stored], {"entity": stored, **detail})
        return DocumentEdit(stored, True)

    def _document_text(self, conn: sqlite3.Connection, entity_id: int) -> str:
        return render_document(self._document(conn, entity_id))

    def _keep_text(self, key: str, text: str, stamp: str | None = None) -> None:
        """A Markdown library writes this exact text for the entity (SQLite: nothing to do)."""

    def _note_rename(self, old: str, new: str) -> None:
        """A Markdown library rewrites links to `old` in the files it writes (SQLite: nothing to do)."""

    def _note_tail(self, key: str, tail: str) -> None:
        """A Markdown library appends `tail` to the entity's file as it is (SQLite: nothing to do)."""

    # -- the hot context ---------------------------------------------------------------

    def read_context(self) -> dict[str, Any]:
        with self._read() as conn:
            row = conn.execute("SELECT value FROM library_meta WHERE key = 'context'").fetchone()
        return json.loads(row[0]) if row else {}

    def update_context(self, change: Callable[[dict[str, Any]], dict[str, Any]], *, origin: str) -> dict[str, Any]:
        """Read, merge and write the context in one transaction."""
        with self._write() as conn:
            self._before_meta(conn, "context")
            row = conn.execute("SELECT value FROM library_meta WHERE key = 'context'").fetchone()
            before = json.loads(row[0]) if row else {}
            ctx = change(before)
            conn.execute("INSERT OR REPLACE INTO library_meta VALUES ('context', ?)", (json.dumps(ctx, ensure_ascii=False),))
            self._journal(conn, origin, origin, [], {k: {"before": before.get(k), "after": v}
                                                      for k, v in ctx.items() if before.get(k) != v and k != "updated_at"})
        return ctx

    # -- writing ---------------------------------------------------------------------

    def apply_documents(self, docs: Sequence[EntityDocument], *, origin: str, action: str,
                        create: bool | None = None, detail: dict[str, Any] | None = None) -> list[str]:
        """Make each entity what its document says, in one transaction; the stored names.

        `create`: True refuses names that exist, False refuses names that do not, None takes both.
        """
        at = now_iso()
        with self._write() as conn:
            existing = self._resolve(conn, [d.name for d in docs])
            documents_rules.check_create(create, docs, {k: name for k, (_, name) in existing.items()})
            self._before(conn, [i for i, _ in existing.values()])
            ids = [self._apply_document(conn, d, at) for d in docs]
            self._link_pending(conn)
            self._refresh_fts(conn, ids)
            names = [d.name for d in docs]
            self._journal(conn, origin, action, names, detail)
        return names

    def _apply_document(self, conn: sqlite3.Connection, doc: EntityDocument, at: str,
                        stamp: str | None = None, file_time: str | None = None) -> int:
        """Upsert one entity from its document; `stamp` overrides updated_at (a file's own time).

        `file_time` (a file's mtime) dates what the file itself does not: the entity's creation
        when it has no `created:`, and observation lines without memloci's date comment. A date
        is read, never invented into the file."""
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
            conn.execute(f"DELETE FROM memories WHERE id IN ({_marks(len(gone))})", gone)
        for content in wanted:
            if content not in have:
                insert_memory(conn, entity_id, content, "observation", (), None, {},
                              doc.dates.get(content) or file_time or at)
        # Outgoing relations (documents_rules.wanted_links). A schema that lists its relation
        # types (unless the text comes from files being read, which are never refused) wants
        # both ends to exist and its cycles kept out.
        typed = self.schema.relation_types is not None
        refusing = typed and not self._reading_files()
        wanted_rel = documents_rules.wanted_links(doc, self.schema)
        targets = self._resolve(conn, [t for t in wanted_rel.values()])
        resolved = {(rt, targets[k][0]) for (rt, k) in wanted_rel if k in targets}
        if refusing:
            documents_rules.check_targets(self.schema, wanted_rel, targets)
        current = set(conn.execute("SELECT relation_type, to_id FROM relations WHERE from_id = ?", (entity_id,)).fetchall())
        if refusing:
            documents_rules.check_cycles(self._graph_tx(conn, at), self.schema, doc.name, entity_id, resolved - current)
        conn.executemany("DELETE FROM relations WHERE from_id = ? AND relation_type = ? AND to_id = ?",
                         [(entity_id, rt, to) for rt, to in current - resolved])
        conn.executemany("INSERT OR IGNORE INTO relations (from_id, relation_type, to_id, created_at) VALUES (?, ?, ?, ?)",
                         [(entity_id, rt, to, at) for rt, to in resolved - current])
        conn.execute("DELETE FROM pending_links WHERE from_id = ?", (entity_id,))
        conn.executemany("INSERT OR IGNORE INTO pending_links VALUES (?, ?, ?, ?)",
                         [(entity_id, rt, k, t) for (rt, k), t in wanted_rel.items() if k not in targets])
        waiting = [t for (rt, k), t in wanted_rel.items() if k not in targets]
        if doc.aliases or waiting:
            self._alias_work(conn, entity_id if doc.aliases else None, waiting)
        return entity_id

    def _link_pending(self, conn: sqlite3.Connection) -> list[int]:
        """Links whose target now exists become relations; the ids of their sources."""
        rows = conn.execute("""SELECT p.from_id, p.relation_type, e.id, p.target_key FROM pending_links p
                               JOIN entities e ON e.name_key = p.target_key""").fetchall()
        rows += self._link_aliases(conn)
        if not rows:
            return []
        at = now_iso()
        conn.executemany("INSERT OR IGNORE INTO relations (from_id, relation_type, to_id, created_at) VALUES (?, ?, ?, ?)",
                         [(f, rt, to, at) for f, rt, to, _ in rows])
        conn.executemany("DELETE FROM pending_links WHERE from_id = ? AND relation_type = ? AND target_key = ?",
                         [(f, rt, k) for f, rt, _, k in rows])
        return list({f for f, *_ in rows})

    def rename_entity(self, old: str, new: str, *, origin: str) -> dict[str, Any]:
        with self._write() as conn:
            return rename_rules.rename_entity(SQLiteRenameTx(self, conn), old, new, origin)

    def merge_entities(self, sources: Sequence[str], target: str, *, origin: str) -> dict[str, Any]:
        rename_rules.check_merge_names(sources, target)
        with self._write() as conn:
            return rename_rules.merge_entities(SQLiteRenameTx(self, conn), self.schema, sources, target, origin)
