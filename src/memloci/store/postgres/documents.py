"""Notes with bodies on the postgres engine: read, list, apply and edit entity documents,
find relations, the library manual.

What a document means (which relations it makes, which tags, what an edit may change, which
relations its front matter shows) is rules/documents.py's, shared with the SQLite engine
(store/sqlite/documents.py); this module reads and writes it in PostgreSQL. Every write is one
transaction under the library's advisory lock (Database.transact), so two servers editing
one note both land, and a refused document leaves nothing behind.

A `[[link]]` (or a typed link) to a name no entity has waits in `pending_links` (migration 3) and
becomes a relation when an entity of that name appears, or one listing it as its only holder's
alias: entities.link_pending, which the graph writes call too for the entities they create
(PostgresGraphTx.entities_changed).

Functions another part of the engine may call inside a transaction: `document(conn, id)`,
`document_text(conn, id)`, `alias_keys(conn, texts)`, `apply_document(tx, schema, doc, stamp=)`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from memloci.core.model import DocumentEdit, ListedEntity, Relation, content_hash, name_key
from memloci.core.schema import LibrarySchema
from memloci.markdown.document import EntityDocument, render_document
from memloci.rules import documents as documents_rules
from memloci.store.postgres.database import Database
from memloci.store.postgres.entities import alias_holders, link_pending, load_entities, relations_where, resolve
from memloci.store.postgres.graph import PostgresGraphTx
from memloci.store.postgres.json_columns import as_json, as_jsonb
from memloci.store.postgres.memory_rows import insert_memory
from memloci.store.postgres.transaction import WriteTx
from memloci.store.postgres.vectors import bump_vectors, drop_memory_vectors, drop_vectors_of
from memloci.store.protocols import EditedDocuments

C = ' COLLATE "C"'  # text in byte order, as SQLite sorts it, whatever the database's collation


def document(conn: Any, entity_id: int) -> EntityDocument:
    entity = load_entities(conn, [entity_id])[entity_id]
    relations = [(t, to) for t, to in conn.execute(
        f"""SELECT r.relation_type, e.name FROM relations r JOIN entities e ON e.id = r.to_id
            WHERE r.from_id = %s ORDER BY r.created_at{C}, r.relation_type{C}, e.name_key{C}""", (entity_id,))]
    relations += [(t, to) for t, to in conn.execute(
        f"""SELECT relation_type, target FROM pending_links WHERE from_id = %s
            ORDER BY relation_type{C}, target_key{C}""", (entity_id,))]
    return documents_rules.document_of(entity, relations, lambda texts: alias_keys(conn, texts))


def document_text(conn: Any, entity_id: int) -> str:
    return render_document(document(conn, entity_id))


def alias_keys(conn: Any, texts: Sequence[str]) -> dict[str, str]:
    """name_key of a link's text -> name_key of the entity it reaches through an alias, for
    the texts no entity is named (so a note's `[[Anna]]` is seen as its relation to Anna Smith)."""
    keys = {name_key(t) for t in texts if t.strip()}
    if not keys:
        return {}
    rest = list(keys - set(resolve(conn, list(keys))))
    holders = alias_holders(conn, rest) if rest else {}
    sole = {key: ids[0] for key, ids in holders.items() if len(ids) == 1}
    if not sole:
        return {}
    names = dict(conn.execute("SELECT id, name FROM entities WHERE id = ANY(%s)", (list(sole.values()),)).fetchall())
    return {key: name_key(names[i]) for key, i in sole.items()}


def apply_document(tx: PostgresGraphTx, schema: LibrarySchema, doc: EntityDocument, *, stamp: str | None = None) -> int:
    """Upsert one entity from its document (`stamp` overrides updated_at); its id."""
    conn, at = tx.conn, tx.at
    key = name_key(doc.name)
    row = conn.execute("SELECT id, metadata FROM entities WHERE name_key = %s", (key,)).fetchone()
    tags, metadata = documents_rules.entity_fields(doc, row[1] if row else {})
    values = (doc.name, doc.entity_type, as_jsonb(list(doc.aliases)), as_jsonb(tags), as_json(metadata), doc.body)
    if row:
        entity_id = int(row[0])
        conn.execute("""UPDATE entities SET name = %s, entity_type = %s, aliases = %s, tags = %s, metadata = %s,
                        body = %s, updated_at = %s WHERE id = %s""", (*values, stamp or at, entity_id))
    else:
        entity_id = int(conn.execute(
            """INSERT INTO entities (name, entity_type, aliases, tags, metadata, body, name_key, created_at, updated_at)
               VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id""",
            (*values, key, doc.created or at, stamp or doc.modified or at)).fetchone()[0])
    # Observations: keep the unchanged ones (their ids, times, vectors), drop and add the rest.
    wanted = list(dict.fromkeys(doc.observations))
    have = dict(conn.execute("SELECT content, id FROM memories WHERE entity_id = %s", (entity_id,)).fetchall())
    gone = [have[c] for c in have if c not in set(wanted)]
    if gone:
        drop_vectors_of(conn, "id = ANY(%s)", (gone,))
        conn.execute("DELETE FROM memories WHERE id = ANY(%s)", (gone,))
    for content in wanted:
        if content not in have:
            insert_memory(conn, entity_id, content, "observation", (), None, {}, doc.dates.get(content) or at)
    # Outgoing relations (documents_rules.wanted_links). A schema that lists its relation
    # types wants both ends to exist and its cycles kept out.
    refusing = schema.relation_types is not None
    wanted_rel = documents_rules.wanted_links(doc, schema)
    targets = resolve(conn, list(wanted_rel.values()))
    resolved = {(rt, targets[k].id) for (rt, k) in wanted_rel if k in targets}
    if refusing:
        documents_rules.check_targets(schema, wanted_rel, targets)
    current = {(rt, int(to)) for rt, to in conn.execute(
        "SELECT relation_type, to_id FROM relations WHERE from_id = %s", (entity_id,))}
    if refusing:
        documents_rules.check_cycles(tx, schema, doc.name, entity_id, resolved - current)
    gone_rel = sorted(current - resolved)
    if gone_rel:
        conn.execute("""DELETE FROM relations r USING unnest(%s::text[], %s::bigint[]) AS g(rt, to_id)
                        WHERE r.from_id = %s AND r.relation_type = g.rt AND r.to_id = g.to_id""",
                     ([rt for rt, _ in gone_rel], [to for _, to in gone_rel], entity_id))
    new_rel = sorted(resolved - current)
    if new_rel:
        conn.execute("""INSERT INTO relations (from_id, relation_type, to_id, created_at)
                        SELECT %s, rt, to_id, %s FROM unnest(%s::text[], %s::bigint[]) AS n(rt, to_id)
                        ON CONFLICT DO NOTHING""",
                     (entity_id, at, [rt for rt, _ in new_rel], [to for _, to in new_rel]))
    conn.execute("DELETE FROM pending_links WHERE from_id = %s", (entity_id,))
    waiting = [(rt, k, t) for (rt, k), t in wanted_rel.items() if k not in targets]
    if waiting:
        conn.execute("""INSERT INTO pending_links (from_id, relation_type, target_key, target)
                        SELECT %s, rt, k, t FROM unnest(%s::text[], %s::text[], %s::text[]) AS w(rt, k, t)
                        ON CONFLICT DO NOTHING""",
                     (entity_id, [w[0] for w in waiting], [w[1] for w in waiting], [w[2] for w in waiting]))
    return entity_id


class PostgresDocuments:
    """Entity documents, relations found by filter, the library manual."""

    def __init__(self, db: Database):
        self.db = db

    # -- reading ---------------------------------------------------------------------

    def entity_documents(self, names: Sequence[str]) -> dict[str, EntityDocument]:
        """name_key -> document, for the names that exist."""
        with self.db.read() as conn:
            return {key: document(conn, ref.id) for key, ref in resolve(conn, names).items()}

    def list_entities(self, pattern: str = "*") -> list[ListedEntity]:
        """The entities whose name matches a glob, case-insensitively, by name."""
        with self.db.read() as conn:
            rows = conn.execute(f"SELECT name, entity_type FROM entities ORDER BY name_key{C}").fetchall()
        return documents_rules.listed(rows, pattern)

    def find_relations(self, *, to_entity: str | None, relation_type: str | None,
                       from_entity: str | None) -> list[Relation]:
        where: list[str] = ["true"]
        params: list[Any] = []
        with self.db.read() as conn:
            for column, field, name in (("r.to_id", "to_entity", to_entity), ("r.from_id", "from_entity", from_entity)):
                if name:
                    found = resolve(conn, [name])
                    if not found:
                        raise documents_rules.relations_filter_missing(field, name)
                    where.append(f"{column} = %s")
                    params.append(next(iter(found.values())).id)
            if relation_type:
                where.append("r.relation_type = %s")
                params.append(relation_type)
            return relations_where(conn, " AND ".join(where), params)

    # -- the library manual (kept in `meta`, as the hot context is) ------------------------

    def manual_text(self) -> str | None:
        with self.db.read() as conn:
            row = conn.execute("SELECT value FROM meta WHERE key = 'manual'").fetchone()
        return row[0] if row else None

    def edit_manual(self, change: Callable[[str | None], str], *, origin: str, detail: dict[str, Any]) -> str:
        """Read, change and write the manual in one transaction (no edit is lost to another writer)."""
        def body(write: WriteTx) -> str:
            conn, tx = write.conn, PostgresGraphTx(write)
            write.keep_meta("manual")  # undo puts it back
            row = conn.execute("SELECT value FROM meta WHERE key = 'manual'").fetchone()
            text = change(row[0] if row else None)
            conn.execute("""INSERT INTO meta VALUES ('manual', %s)
                            ON CONFLICT (key) DO UPDATE SET value = excluded.value""", (text,))
            tx.journal(origin, origin, [], detail)
            return text

        return self.db.transact(body, "manual")

    # -- writing ---------------------------------------------------------------------

    def apply_documents(self, schema: LibrarySchema, docs: Sequence[EntityDocument], *, origin: str, action: str,
                        create: bool | None = None, detail: dict[str, Any] | None = None) -> list[str]:
        """Make each entity what its document says, in one transaction; the stored names.

        `create`: True refuses names that exist, False refuses names that do not, None takes both.
        """
        def body(write: WriteTx) -> list[str]:
            conn, tx = write.conn, PostgresGraphTx(write)
            existing = resolve(conn, [d.name for d in docs])
            documents_rules.check_create(create, docs, {k: ref.name for k, ref in existing.items()})
            tx.before_change([ref.id for ref in existing.values()])
            ids = [apply_document(tx, schema, d) for d in docs]
            link_pending(conn, ids, tx.at)  # links waiting for these names or aliases
            tx.entities_changed(ids)  # the search index
            names = [d.name for d in docs]
            tx.journal(origin, action, names, detail)
            return names

        return self.db.transact(body)

    def edit_document(self, schema: LibrarySchema, name: str, change: Callable[[str], str], *, origin: str,
                      detail: dict[str, Any], stamp: str | None = None) -> DocumentEdit:
        """Read an entity's document, change its text, apply it: one transaction, so two
        writers editing one entity both land. Returns the stored name, and whether anything
        changed. `stamp` dates the change instead of now (an import gives a note its own date)."""
        def body(write: WriteTx) -> DocumentEdit:
            conn = write.conn
            found = resolve(conn, [name])
            if not found:
                raise documents_rules.edit_missing(name)
            ref = next(iter(found.values()))
            tx = PostgresGraphTx(write)
            if not _edit(tx, schema, ref.id, ref.name, change, stamp):
                return DocumentEdit(ref.name, False)
            link_pending(conn, [ref.id], tx.at)  # a new alias may reach links waiting for it
            tx.entities_changed([ref.id])
            tx.journal(origin, origin, [ref.name], {"entity": ref.name, **detail})
            return DocumentEdit(ref.name, True)

        return self.db.transact(body)

    def edit_documents(self, schema: LibrarySchema, changes: Sequence[tuple[str, Callable[[str], str]]], *,
                       origin: str, action: str, detail: dict[str, Any],
                       absent: Sequence[str] = ()) -> EditedDocuments:
        """Several entities' document texts read, changed and applied in one transaction with
        one journal entry (rules/documents.py `check_edits` refuses it all first)."""
        def body(write: WriteTx) -> EditedDocuments:
            conn = write.conn
            found = resolve(conn, [n for n, _ in changes])
            reached = set(resolve(conn, absent)) | set(alias_holders(conn, absent))
            documents_rules.check_edits(action, [n for n, _ in changes], found,
                                        [n for n in absent if name_key(n) in reached])
            tx = PostgresGraphTx(write)
            out, ids = [], []
            for name, change in changes:
                ref = found[name_key(name)]
                changed = _edit(tx, schema, ref.id, ref.name, change, None, in_place=True)
                out.append(DocumentEdit(ref.name, changed))
                ids += [ref.id] if changed else []
            if not ids:
                return EditedDocuments(tuple(out), None)
            link_pending(conn, ids, tx.at)
            tx.entities_changed(ids)
            tx.journal(origin, action, [e.name for e in out if e.changed], detail)
            return EditedDocuments(tuple(out), write.kept["last_row"])

        return self.db.transact(body)


def _edit(tx: PostgresGraphTx, schema: LibrarySchema, entity_id: int, stored: str, change: Callable[[str], str],
          stamp: str | None, in_place: bool = False) -> bool:
    """One entity's document text changed and applied inside `tx`; whether it changed.
    `in_place`: observations the edit only retexts keep their rows (rules/documents.py `retexted`)."""
    text = document_text(tx.conn, entity_id)
    new_text = change(text)
    if new_text == text:
        return False
    doc = documents_rules.edited_document(text, new_text, stored)
    documents_rules.check_document(schema, doc, "entity")
    tx.before_change([entity_id])
    if in_place:
        conn = tx.conn
        before = documents_rules.edited_document(text, text, stored).observations
        for old, new in documents_rules.retexted(before, doc.observations):
            row = conn.execute("SELECT id FROM memories WHERE entity_id = %s AND content = %s", (entity_id, old)).fetchone()
            if row is not None:
                conn.execute("""UPDATE memories SET content = %s, content_hash = %s, embedded = false, updated_at = %s
                                WHERE id = %s""", (new, content_hash(new, stored), tx.at, row[0]))
                if drop_memory_vectors(conn, [row[0]]):
                    bump_vectors(conn)
    apply_document(tx, schema, doc, stamp=stamp)
    return True
