"""Importing a graph into a Markdown library: each entity file written once.

The generic import creates a chunk of entities (one file each), then, once every entity
exists, the relations, which rewrites the source entities' files a second time (front matter
`relations:` lives in the source's file). Here a batch is the entities and the relations
going out of them, in one write transaction: a relation whose target is not in the library
yet is a pending link (as a `[[link]]` to a missing note is) and becomes a relation when a
later batch creates the target. The file says the same before and after that: it names the
target either way, so resolving it rewrites nothing.

All or nothing holds per batch as for any write (intent.py: one intent, one sync
for the batch's files). A run killed between batches leaves whole batches, whose relations to
entities not imported yet wait as pending links; running the import again completes it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import PurePosixPath

from memloci.core.errors import InvalidRelationError
from memloci.core.model import EntityInput, GraphBatch, Relation, RelationInput, name_key, now_iso
from memloci.core.schema import LibrarySchema
from memloci.rules import graph as rules
from memloci.store.markdown.files import INDEX_DIR, OLD_MEMORIES
from memloci.store.sqlite.engine import SQLiteStore
from memloci.store.sqlite.graph_tx import SQLiteGraphTx
from memloci.store.sqlite.rows import refresh_fts
from memloci.store.sqlite.vault import link_pending


def rendered_body(text: str) -> str | None:
    """The body parse_document reads from render_document's output, without loading its YAML
    again (a tenth of a millisecond per file: seconds in an import). With no `name:` key the
    front matter plays no part in where the body starts. None: parse the whole text."""
    head, sep, rest = text.partition("\n---\n# ")
    if not sep or not head.startswith("---\n") or "\nname:" in head or "\r" in text:
        return None  # the name is not the title line's (or there is no title line): parse it all
    # The body starts after the title line and the blank lines that follow it, as parse_document reads it.
    at = rest.find("\n") + 1
    if not at:
        return ""
    while True:
        end = rest.find("\n", at)
        line = rest[at:] if end < 0 else rest[at:end + 1]
        if not line or line.strip():
            return rest[at:]
        at += len(line)


def defers_relations(schema: LibrarySchema) -> bool:
    """Whether relations may wait for their target: not under a schema that types relations
    or keeps them acyclic (it checks both ends when the relation is made)."""
    return schema.relation_types is None and not schema.acyclic and not schema.unique_names


def note_paths(paths: Mapping[str, str] | None) -> dict[str, str]:
    """Where new entity files may go, of the `paths` a source gives (`people/anna.md`): a `.md`
    file inside the library, in no hidden folder and not in memloci's own (`.memloci/`,
    `memories/`). Any other is left out, and that entity's file is named after it in the root."""
    kept = {}
    for key, path in (paths or {}).items():
        rel = PurePosixPath(path)
        if (not rel.is_absolute() and rel.suffix.lower() == ".md" and rel.parts[0] not in (INDEX_DIR, OLD_MEMORIES)
                and not any(p in (".", "..") or p.startswith(".") for p in rel.parts)):
            kept[key] = rel.as_posix()
    return kept


def create_graph(index: SQLiteStore, entities: Sequence[EntityInput], relations: Sequence[RelationInput], *,
                 origin: str, paths: Mapping[str, str] | None = None) -> GraphBatch:
    """Create (or merge) `entities` and the `relations` going out of them in one transaction of
    the library's `index` (its files follow); relations deferred are for the caller to create
    once every entity exists. An entity created here gets its file at its path of `paths` (by
    name_key) if it has one and the file is free, else beside it named after the entity; one
    that exists stays where its file is."""
    at = now_iso()
    if not defers_relations(index.schema):
        with index.db.write() as write:  # create_entities, with the paths
            write.paths = note_paths(paths)
            made = rules.create_entities(SQLiteGraphTx(write, at, link_pending=True), index.schema, entities, origin)
        return GraphBatch(tuple(made), (), (), tuple(relations))
    groups = rules.grouped(entities)  # the same name twice merges into the first (as create_entities does)
    created: list[Relation] = []
    existing_rel: list[Relation] = []
    with index.db.write() as write:
        write.paths = note_paths(paths)
        conn = write.conn
        tx = SQLiteGraphTx(write, at)
        existing = tx.resolve([e.name for e, _ in groups.values()])
        results, touched = rules.create_or_merge(tx, index.schema, groups, existing)
        ids = tx.resolve([n for r in relations for n in (r.from_entity, r.to_entity)])
        missing = [r.from_entity for r in relations if name_key(r.from_entity) not in ids]
        if missing:  # the caller passes only relations going out of this batch or the library
            raise InvalidRelationError(f"relation endpoints do not exist: {', '.join(missing[:5])}",
                                       details={"missing": missing})
        seen: set[tuple[int, str, str]] = set()
        for r in relations:
            source = ids[name_key(r.from_entity)]
            target = ids.get(name_key(r.to_entity))
            triple = (source.id, r.relation_type, name_key(r.to_entity))
            if triple in seen:
                continue
            seen.add(triple)
            if target is not None:
                new = tx.insert_relation(source.id, r.relation_type, target.id)
                to_name = target.name
            else:  # its target comes in a later batch: a pending link until then
                new = bool(conn.execute("INSERT OR IGNORE INTO pending_links VALUES (?, ?, ?, ?)",
                                        (source.id, r.relation_type, name_key(r.to_entity), r.to_entity)).rowcount)
                to_name = r.to_entity
            (created if new else existing_rel).append(Relation(source.name, r.relation_type, to_name, at))
        if touched:
            refresh_fts(conn, touched)
        # Links of earlier batches (and of notes) whose targets this batch created become
        # relations. Their files already name these targets: they are not written again.
        dirty = {i for (i,) in conn.execute("SELECT entity_id FROM md_dirty")}
        resolved = link_pending(conn)
        conn.executemany("DELETE FROM md_dirty WHERE entity_id = ?", [(i,) for i in resolved if i not in dirty])
        if touched:
            rules.journal_created(tx, origin, results)
        if created:
            rules.journal_related(tx, origin, created)
    return GraphBatch(tuple(results), tuple(created), tuple(existing_rel), ())
