"""Entity documents over the SQLite tables: read, apply, rename, merge (mixed into SQLiteStore).

A document (front matter + Markdown body, see markdown/document.py) is one more view of an
entity. Applying one replaces the entity's type, aliases, tags, body, observations and
outgoing relations with the document's; `[[wikilinks]]` in the body are `links_to`
relations. A link to a name that does not exist yet waits in `pending_links` and becomes a
relation when that entity appears.
"""

from __future__ import annotations

import fnmatch
import json
import sqlite3
import unicodedata
from collections.abc import Callable, Sequence
from typing import Any

from .. import rename_rules
from ..errors import (
    AlreadyExistsError,
    InvalidRelationError,
    NotFoundError,
    ValidationError,
)
from ..markdown.document import (
    EntityDocument,
    parse_document,
    render_document,
    wikilinks,
)
from ..markdown.obsidian import all_tags, block_links, tag_text
from ..model import DocumentEdit, ListedEntity, Relation, RelationInput, name_key, now_iso
from ..rules import check_distinct, cycle_path
from .sqlite_memories import insert_memory
from .sqlite_rename import SQLiteRenameTx
from .sqlite_vault import BODY_TAGS, EXTRA_KEY, SQLiteVaultLinks

LINKS_TO = "links_to"


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
        glob = unicodedata.normalize("NFC", pattern).casefold() or "*"  # `Café` typed or decomposed is one name
        with self._read() as conn:
            rows = conn.execute("SELECT name, entity_type FROM entities ORDER BY name_key").fetchall()
        return [ListedEntity(n, t) for n, t in rows if fnmatch.fnmatchcase(unicodedata.normalize("NFC", n).casefold(), glob)]

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
                        raise NotFoundError(f"{field}: entity '{name}' does not exist",
                                            hint="Check the name with list_entities or search_nodes.")
                    where.append(f"{column} = ?")
                    params.append(next(iter(found.values()))[0])
            if relation_type:
                where.append("r.relation_type = ?")
                params.append(relation_type)
            return self._relations_where(conn, " AND ".join(where), params)

    def _document(self, conn: sqlite3.Connection, entity_id: int) -> EntityDocument:
        entity = self._load_entities(conn, [entity_id])[entity_id]
        linked = {name_key(t) for t in wikilinks(entity.body)}
        extra = list(entity.metadata.get(EXTRA_KEY, []))
        links = block_links(extra)
        in_values = {(k, name_key(t)) for k, t in links}
        relations = [(t, to) for t, to in conn.execute(
            """SELECT r.relation_type, e.name FROM relations r JOIN entities e ON e.id = r.to_id
               WHERE r.from_id = ? ORDER BY r.created_at, r.relation_type, e.name_key""", (entity_id,))]
        relations += conn.execute("SELECT relation_type, target FROM pending_links WHERE from_id = ? "
                                  "ORDER BY relation_type, target_key", (entity_id,)).fetchall()
        # A link written in the body is not repeated in the front matter.
        # Nor one held by a front-matter value (`company: "[[Acme]]"`): its key's text carries it.
        # A text that reaches its entity through an alias (`[[Anna]]`) counts as that entity's name.
        named = {name_key(to) for _, to in relations}
        texts = [t for t in [*wikilinks(entity.body), *(t for _, t in links)] if name_key(t) not in named]
        alias = self._alias_keys(conn, texts) if texts else {}
        linked |= {alias[k] for k in linked if k in alias}
        in_values |= {(rt, alias[k]) for rt, k in in_values if k in alias}
        relations = [(t, to) for t, to in relations
                     if not (t == LINKS_TO and name_key(to) in linked) and (t, name_key(to)) not in in_values]
        body_only = {t.casefold() for t in entity.metadata.get(BODY_TAGS, [])}
        return EntityDocument(
            name=entity.name, entity_type=entity.entity_type, aliases=list(entity.aliases),
            # (tag_text: an index written before `#` was read off front-matter tags agrees with the file)
            tags=list(dict.fromkeys(tag_text(t) for t in entity.tags if t.casefold() not in body_only)),
            relations=relations, observations=[o.content for o in entity.observations], body=entity.body,
            created=entity.created_at, modified=entity.updated_at, extra=extra, links=links,
        )

    def check_document(self, doc: EntityDocument, field: str) -> None:
        """The library schema's rules, for a document about to be applied."""
        rules = self.schema
        rules.check_name(doc.name, f"{field}.name")
        rules.check_type(doc.entity_type, f"{field}.entity_type")
        for j, o in enumerate(doc.observations):
            rules.check_observation(o, f"{field}.observations[{j}]")
        check_distinct(rules, doc.observations, f"{field}.observations")
        for j, (rt, to) in enumerate(doc.relations):
            rules.check_relation(RelationInput(doc.name, rt, to), f"{field}.relations[{j}]")

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
                raise NotFoundError(f"entity_name: '{name}' does not exist", hint="Check the name with list_entities.")
            entity_id, stored = next(iter(found.values()))
            text = self._document_text(conn, entity_id)
            new_text = change(text)
            if new_text == text:
                return DocumentEdit(stored, False)
            doc = parse_document(new_text, fallback_name="\x00")
            if doc.name == "\x00" and parse_document(text, fallback_name="\x00").name == "\x00":
                doc.name = stored  # the name was never in the text: it is the file's name
            elif doc.name == "\x00":
                raise ValidationError(f"the edit would remove the title line '# {stored}', which holds the entity's name",
                                      hint="Keep the title; rename entities with rename_entity.")
            if name_key(doc.name) != name_key(stored):
                raise ValidationError(f"new_content: the edit would rename '{stored}' to '{doc.name}'",
                                      hint="Rename entities with rename_entity, which also repairs every link.")
            doc.name = stored
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
            if create is True and existing:
                taken = [name for _, name in existing.values()]
                raise AlreadyExistsError(f"entities.name: {', '.join(taken)} already exist(s)",
                                         hint="Edit them with the entity content tools, or pick another name.")
            if create is False:
                missing = [d.name for d in docs if name_key(d.name) not in existing]
                if missing:
                    raise NotFoundError(f"entity not found: {', '.join(missing)}",
                                        hint="Check the name with list_entities.")
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
        metadata = json.loads(row[1]) if row else {}
        # The entity's tags are its front matter's and its body's `#tags`; which came from the body
        # alone is kept, so the document (front matter) is rendered with its own tags only.
        tags, body_only = all_tags(doc)
        for meta_key, value in ((EXTRA_KEY, doc.extra), (BODY_TAGS, body_only)):
            if value:
                metadata[meta_key] = list(value)
            else:
                metadata.pop(meta_key, None)
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
        # Outgoing relations: the front matter's, the body's links and the links in front-matter
        # values (typed by their key). A schema that lists its relation types makes links plain
        # text, and (unless the text comes from files being read, which are never refused) wants
        # both ends to exist and its cycles kept out.
        typed = self.schema.relation_types is not None
        refusing = typed and not getattr(getattr(self, "_syncing", None), "on", False)
        wanted_rel: dict[tuple[str, str], str] = {}
        links = () if typed else [*((LINKS_TO, t) for t in wikilinks(doc.body)), *doc.links]
        for relation_type, target in [*doc.relations, *links]:
            if relation_type == LINKS_TO and name_key(target) == key:
                continue  # a note linking to itself is no relation
            wanted_rel.setdefault((relation_type, name_key(target)), target)
        targets = self._resolve(conn, [t for t in wanted_rel.values()])
        resolved = {(rt, targets[k][0]) for (rt, k) in wanted_rel if k in targets}
        if refusing:
            missing = [t for (rt, k), t in wanted_rel.items() if k not in targets]
            if missing:
                raise InvalidRelationError(f"relations: '{missing[0]}' does not exist; schema '{self.schema.name}' "
                                           "relates existing entities only (nothing was changed)")
        current = set(conn.execute("SELECT relation_type, to_id FROM relations WHERE from_id = ?", (entity_id,)).fetchall())
        if refusing:
            tx = self._graph_tx(conn, at)
            for rt, to in resolved - current:
                path = cycle_path(tx, self.schema, entity_id, rt, to)
                if path:
                    raise InvalidRelationError(f"relations: {doc.name} -{rt}-> {path[0]} would close a cycle "
                                               f"({' -> '.join([doc.name, *path])}); nothing was changed",
                                               hint="Drop or reverse one relation of the cycle.")
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
