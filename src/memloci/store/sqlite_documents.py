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

from .. import documents_rules
from ..errors import (
    AlreadyExistsError,
    InvalidRelationError,
    NotFoundError,
    ValidationError,
)
from ..markdown.document import (
    EntityDocument,
    normalize_heading,
    render_document,
    rewrite_wikilinks,
)
from ..markdown.frontmatter import check_renamed_links
from ..markdown.obsidian import all_tags, block_links, block_links_or_none
from ..model import DocumentEdit, ListedEntity, Relation, content_hash, name_key, now_iso
from ..rules import cycle_path
from .sqlite_memories import insert_memory, reindex_content
from .sqlite_vault import BODY_TAGS, EXTRA_KEY, SQLiteVaultLinks

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
        refusing = typed and not getattr(getattr(self, "_syncing", None), "on", False)
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

    def _rewrite_links(self, conn: sqlite3.Connection, old: str, new: str, target_id: int) -> list[str]:
        """Point every body's [[old]] at new; the names of the entities whose body changed.

        Candidates: the sources of links_to relations to the target, plus a LIKE match (which
        folds ASCII case only; rewrite_wikilinks itself compares case-folded)."""
        changed = []
        self._note_rename(old, new)
        pattern = "%[[%" + old.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        # Front matter keys memloci does not know (`company: "[[Acme]]"`) hold links as text too.
        for entity_id, name, metadata in conn.execute(
                "SELECT id, name, metadata FROM entities WHERE metadata LIKE ? ESCAPE '\\'", (pattern,)).fetchall():
            meta = json.loads(metadata)
            blocks = [rewrite_wikilinks(b, old, new) for b in meta.get(EXTRA_KEY, [])]
            if blocks != meta.get(EXTRA_KEY, []):  # read back: the same links, old -> new, or refused
                check_renamed_links(block_links(meta[EXTRA_KEY]), block_links_or_none(blocks), old, new, name_key)
                self._before(conn, [entity_id])
                meta[EXTRA_KEY] = blocks
                conn.execute("UPDATE entities SET metadata = ? WHERE id = ?", (json.dumps(meta, ensure_ascii=False), entity_id))
                changed.append(name)
        sources = """id IN (SELECT from_id FROM relations WHERE to_id = ? AND relation_type = 'links_to')"""
        for entity_id, name, body in conn.execute(
                f"SELECT id, name, body FROM entities WHERE body LIKE ? ESCAPE '\\' OR {sources}",
                (pattern, target_id)).fetchall():
            rewritten = rewrite_wikilinks(body, old, new)
            if rewritten != body:
                self._before(conn, [entity_id])
                conn.execute("UPDATE entities SET body = ?, updated_at = ? WHERE id = ?", (rewritten, now_iso(), entity_id))
                changed.append(name)
        # Observations are list items of the body too: their links move with it.
        for memory_id, entity_id, name, content in conn.execute(
                f"""SELECT m.id, m.entity_id, e.name, m.content FROM memories m JOIN entities e ON e.id = m.entity_id
                   WHERE m.content LIKE ? ESCAPE '\\' OR (m.entity_id IN (SELECT id FROM entities WHERE {sources})
                         AND instr(m.content, '[[') > 0)""", (pattern, target_id)).fetchall():
            rewritten = rewrite_wikilinks(content, old, new)
            if rewritten != content:
                self._before(conn, [entity_id])
                h = content_hash(rewritten, name)
                if conn.execute("SELECT 1 FROM memories WHERE entity_id = ? AND content_hash = ?", (entity_id, h)).fetchone():
                    conn.execute("DELETE FROM memories WHERE id = ?", (memory_id,))  # now the same as another
                    changed.append(name)
                    continue
                conn.execute("UPDATE memories SET content = ?, content_hash = ?, embedded = 0, updated_at = ? WHERE id = ?",
                             (rewritten, h, now_iso(), memory_id))
                conn.execute("DELETE FROM memory_vectors WHERE memory_id = ?", (memory_id,))
                reindex_content(conn, memory_id, rewritten)
                self._refresh_fts(conn, [entity_id])
                changed.append(name)
        return list(dict.fromkeys(changed))

    def _pointing_at(self, conn: sqlite3.Connection, ids: list[int]) -> list[str]:
        """Names of the other entities with a relation to one of `ids` (their documents name it)."""
        marks = _marks(len(ids))
        return [n for (n,) in conn.execute(
            f"""SELECT DISTINCT e.name FROM relations r JOIN entities e ON e.id = r.from_id
                WHERE r.to_id IN ({marks}) AND r.from_id NOT IN ({marks}) ORDER BY e.name""", (*ids, *ids))]

    def rename_entity(self, old: str, new: str, *, origin: str) -> dict[str, Any]:
        with self._write() as conn:
            found = self._resolve(conn, [old, new])
            if name_key(old) not in found:
                raise NotFoundError(f"old_name: entity '{old}' does not exist", hint="Check the name with list_entities.")
            entity_id, stored = found[name_key(old)]
            clash = found.get(name_key(new))
            if clash and clash[0] != entity_id:
                raise AlreadyExistsError(f"new_name: '{clash[1]}' is taken",
                                         hint="Pick another name, or merge the two with merge_entities.")
            self._before(conn, [entity_id])
            conn.execute("UPDATE entities SET name = ?, name_key = ?, updated_at = ? WHERE id = ?",
                         (new, name_key(new), now_iso(), entity_id))
            # An observation's hash covers its entity's name: the renamed entity's follow it.
            conn.execute("UPDATE memories SET content_hash = memloci_content_hash(content, ?) WHERE entity_id = ?",
                         (new, entity_id))
            rewritten = self._rewrite_links(conn, stored, new, entity_id)
            # Relations follow the entity by id, but the documents of their sources name it in their
            # front matter (`to:`): those are rewritten too, and the reply lists every one.
            rewritten = list(dict.fromkeys(rewritten + self._pointing_at(conn, [entity_id])))
            # Pending links to the new name resolve.
            self._link_pending(conn)
            self._refresh_fts(conn, [entity_id])
            self._journal(conn, origin, "rename_entity", [stored, new],
                          {"old_name": stored, "new_name": new, "links_rewritten_in": rewritten})
        return {"old_name": stored, "new_name": new, "links_rewritten_in": rewritten}

    def merge_entities(self, sources: Sequence[str], target: str, *, origin: str) -> dict[str, Any]:
        if name_key(target) in {name_key(s) for s in sources}:
            raise ValidationError("source_names: the target cannot also be a source")
        with self._write() as conn:
            found = self._resolve(conn, [*sources, target])
            missing = [f"source_names: '{n}'" for n in sources if name_key(n) not in found]
            missing += [f"target_name: '{target}'"] if name_key(target) not in found else []
            if missing:
                raise NotFoundError(f"not found: {', '.join(missing)}",
                                    hint="Every source and the target must exist; nothing was merged.")
            target_id, target_name = found[name_key(target)]
            source_ids = list(dict.fromkeys(found[name_key(s)][0] for s in sources))
            pointing = self._pointing_at(conn, source_ids)  # their front matter will name the target instead
            self._before(conn, [target_id, *source_ids])
            docs = {i: self._document(conn, i) for i in [target_id, *source_ids]}
            into = docs[target_id]
            aliases = list(into.aliases)
            tags = list(into.tags)
            body = into.body.rstrip("\n")
            for sid in source_ids:
                src = docs[sid]
                for a in [src.name, *src.aliases]:
                    if name_key(a) != name_key(target_name) and name_key(a) not in {name_key(x) for x in aliases}:
                        aliases.append(a)
                tags += [t for t in src.tags if t not in tags]
                rest = _demote(_without_observations(src.body)).strip("\n")
                body = body.rstrip("\n") + f"\n\n---\n\n## Merged from {src.name}\n" + (f"\n{rest}\n" if rest.strip() else "")
                # Observations move (one copy of a text the target already holds).
                held = {h for (h,) in conn.execute("SELECT content_hash FROM memories WHERE entity_id = ?", (target_id,))}
                for mid, content in conn.execute("SELECT id, content FROM memories WHERE entity_id = ? ORDER BY id",
                                                 (sid,)).fetchall():
                    h = content_hash(content, target_name)
                    if h in held:
                        conn.execute("DELETE FROM memories WHERE id = ?", (mid,))
                    else:
                        conn.execute("UPDATE memories SET entity_id = ?, content_hash = ? WHERE id = ?", (target_id, h, mid))
                        held.add(h)
                # Relations to and from the source now touch the target (no self-loops).
                conn.execute("""INSERT OR IGNORE INTO relations (from_id, relation_type, to_id, created_at)
                                SELECT ?, relation_type, to_id, created_at FROM relations
                                WHERE from_id = ? AND to_id NOT IN (?, ?)""", (target_id, sid, target_id, sid))
                conn.execute("""INSERT OR IGNORE INTO relations (from_id, relation_type, to_id, created_at)
                                SELECT from_id, relation_type, ?, created_at FROM relations
                                WHERE to_id = ? AND from_id NOT IN (?, ?)""", (target_id, sid, target_id, sid))
                conn.execute("""INSERT OR IGNORE INTO pending_links SELECT ?, relation_type, target_key, target
                                FROM pending_links WHERE from_id = ?""", (target_id, sid))
            self._note_tail(name_key(target_name), body[len(into.body.rstrip("\n")):])
            every_tag, body_only = all_tags(EntityDocument(target_name, tags=tags, body=body))
            meta = json.loads(conn.execute("SELECT metadata FROM entities WHERE id = ?", (target_id,)).fetchone()[0])
            meta.pop(BODY_TAGS, None)
            meta.update({BODY_TAGS: body_only} if body_only else {})
            conn.execute("UPDATE entities SET aliases = ?, tags = ?, metadata = ?, body = ?, updated_at = ? WHERE id = ?",
                         (json.dumps(aliases, ensure_ascii=False), json.dumps(every_tag, ensure_ascii=False),
                          json.dumps(meta, ensure_ascii=False), body, now_iso(), target_id))
            if self.schema.acyclic:  # relations moved onto the target may close a cycle through it
                for rt, to in conn.execute("SELECT relation_type, to_id FROM relations WHERE from_id = ? "
                                           f"AND to_id NOT IN ({_marks(len(source_ids))})",
                                           (target_id, *source_ids)).fetchall():
                    path = cycle_path(self._graph_tx(conn), self.schema, target_id, rt, to)
                    if path and not set(path) & {docs[i].name for i in source_ids}:
                        raise InvalidRelationError(
                            f"source_names: merging into '{target_name}' would close a cycle "
                            f"({' -> '.join([target_name, *path])}); schema '{self.schema.name}' keeps relations "
                            "acyclic (nothing was merged)", hint="Delete one relation of the cycle first.")
            rewritten: list[str] = [n for n in pointing if n != target_name]
            for sid in source_ids:  # while the sources' links_to relations still name them
                rewritten += self._rewrite_links(conn, docs[sid].name, target_name, sid)
            conn.execute(f"DELETE FROM entities WHERE id IN ({_marks(len(source_ids))})", source_ids)
            conn.executemany("DELETE FROM entity_fts WHERE rowid = ?", [(i,) for i in source_ids])
            self._refresh_fts(conn, [target_id])
            merged = [docs[i].name for i in source_ids]
            self._journal(conn, origin, "merge_entities", [target_name, *merged], {
                "target": target_name,
                "sources": [{"name": d.name, "entityType": d.entity_type, "aliases": d.aliases, "tags": d.tags,
                             "relations": d.relations, "observations": d.observations, "body": d.body}
                            for d in (docs[i] for i in source_ids)],
                "links_rewritten_in": sorted(set(rewritten)),
            })
        return {"target": target_name, "merged": merged, "aliases": aliases,
                "links_rewritten_in": sorted(set(rewritten) - set(merged))}


def _demote(body: str) -> str:
    """Headings one level down (a merged source's sections sit under `## Merged from ...`)."""
    out, fence = [], ""
    for line in body.split("\n"):
        stripped = line.lstrip()
        if stripped.startswith(("```", "~~~")):
            mark = stripped[:3]
            fence = "" if fence == mark else (fence or mark)
        elif not fence and line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            if 0 < level < 6 and line[level:level + 1] == " ":
                line = "#" + line
        out.append(line)
    return "\n".join(out)


def _without_observations(body: str) -> str:
    """The body without its Observations section (the observations themselves move separately)."""
    lines = body.split("\n")
    out, skip_level = [], 0
    for line in lines:
        stripped = line.lstrip()
        level = len(stripped) - len(stripped.lstrip("#")) if stripped.startswith("#") else 0
        is_heading = 0 < level <= 6 and stripped[level:level + 1] in (" ", "")
        if skip_level and is_heading and level <= skip_level:
            skip_level = 0
        if not skip_level and is_heading and normalize_heading(stripped) == "observations":
            skip_level = level
            continue
        if not skip_level:
            out.append(line)
    return "\n".join(out)
