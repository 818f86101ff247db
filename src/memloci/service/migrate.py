"""`memloci migrate SOURCE TARGET`: copy one library into an empty one of any engine
(sqlite, markdown, postgres), then check that both hold the same.

Everything goes through the store protocols (store/__init__.py), never an engine's SQL, so
any pair of engines works:
- entities (create_entities; bodies, aliases, tags and metadata as documents where the
  entity has them: DocumentStore), relations (create_relations), the hot context and the
  library manual;
- memories, observations included: plain observations with their entity, the others with
  store_memory (their type, tags, metadata, importance), free memories with import_memories
  (Portable), in the source's order, so conversation threads keep their neighbours;
- then every date and use count as the source has them (Portable.restore_dates for entities
  and relations, Migratable.restore_memory_state for memories), the journal as it was
  (Migratable.replace_journal), and the vectors (VectorStore.save_vectors) when the target's
  embedder is the model that made them; otherwise the target embeds them anew.
- A target that takes memories whole (store.MemoryCopies: PostgreSQL) gets every memory,
  observations included, with its dates, use counts and vector, in one call: one transaction
  of COPYs instead of a write per memory, which on a database server costs a round trip each.

Before any write the whole source graph is checked against the target's schema
(rules.graph_violations, as `memloci check` does): a source the target would refuse is refused
whole, its violations named, nothing written.

A copy is several transactions: a killed migration leaves part of a copy in the target, which
is then refused as not empty (the message says so); the source is only read. Content hashes
are not copied but recomputed by the target from the same text and entity name, and the
verification compares them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from memloci.app.registry import open_store
from memloci.app.specs import LibrarySpec, parse_library_specs
from memloci.core.errors import LibraryMissingError, MemlociError, ValidationError
from memloci.core.model import (
    EVERY_MEMORY,
    Entity,
    EntityInput,
    JournalEntry,
    Memory,
    MemoryEdit,
    MemoryInput,
    RelationInput,
    links_data,
    name_key,
)
from memloci.core.secrets import masked_url
from memloci.formats.official import MemoryLine
from memloci.rules import graph as rules
from memloci.rules.lifecycle import fingerprint
from memloci.store.protocols import MemoryCopies, Migratable, Portable, Store

ORIGIN = "migrate"
BATCH = 500  # items per write transaction
PARTS = ("entities", "relations", "memories", "vectors", "journal")  # one progress bar each
# What each bar counts, as its label says: the "memories" part copies every memory row, the
# observations (which the check table counts on their own row) and the free memories.
PART_LABELS = {"entities": "entities", "relations": "relations", "memories": "observations and memories",
               "vectors": "vectors", "journal": "journal entries"}
JOURNAL_ALL = 2**31  # "every entry" for Maintenance.journal's limit

Progress = Callable[[str, int, int], None]  # (part, done, total)


def parse_spec(text: str, where: str) -> LibrarySpec:
    """One library spec (NAME:PATH, as --libraries takes it); errors name `where` (source, target)."""
    try:
        specs = parse_library_specs(text)
    except ValidationError as exc:
        raise ValidationError(f"{where}: {exc.message}", hint=exc.hint) from exc
    if len(specs) != 1:
        raise ValidationError(f"{where}: give one library, NAME:PATH, got {len(specs)}",
                              hint="Example: memloci migrate old:~/memory/default.db 'team:postgresql://host/db'")
    return specs[0]


def _identity(spec: LibrarySpec) -> tuple[str, str]:
    """What makes two specs one library: the file or folder; on a server, the URL and the name
    (which chooses the schema)."""
    if spec.kind == "postgres":
        return (spec.kind, f"{masked_url(str(spec.path))}#{spec.name.casefold()}")
    return (spec.kind, str(spec.path))


@dataclass
class Census:
    """What one library holds, as the verification compares it: counts, and digests of the
    content hashes, the timestamps and the rest of each item."""

    counts: dict[str, int] = field(default_factory=dict)
    digests: dict[str, str] = field(default_factory=dict)
    vectors: dict[tuple[str, str], Any] = field(default_factory=dict)  # (entity key, hash) -> vector


def _digest(items: Iterable[Any]) -> str:
    lines = sorted(json.dumps(i, ensure_ascii=False, sort_keys=True) for i in items)
    return hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()[:16]


def _key(m: Memory) -> tuple[str, str]:
    """A memory's identity in any library: its owner's name key ('' when free) and content hash."""
    return (name_key(m.entity) if m.entity else "", m.content_hash)


def all_memories(store: Store) -> list[Memory]:
    """Every memory, observations included, in id order."""
    ids = sorted(store.memory_ids(EVERY_MEMORY))
    out: list[Memory] = []
    for start in range(0, len(ids), BATCH):
        out.extend(store.load_memories(ids[start:start + BATCH]).values())
    return out


def census(store: Store, *, with_vectors: bool) -> Census:
    graph = store.export_graph()
    memories = all_memories(store)
    journal = store.journal(limit=JOURNAL_ALL)
    c = Census()
    c.counts = {
        "entities": len(graph.entities),
        "observations": sum(1 for m in memories if m.entity),
        "relations": len(graph.relations),
        "memories": sum(1 for m in memories if not m.entity),
        "journal entries": len(journal),
    }
    from memloci.service.documents import prose  # the Markdown parser only when a migration runs

    c.digests = {
        "entity fields and dates": _digest([e.name, e.entity_type, e.created_at, e.updated_at, sorted(e.aliases),
                                            sorted(e.tags), e.metadata, prose(e.body)] for e in graph.entities),
        "relation dates": _digest([r.from_entity, r.relation_type, r.to_entity, r.created_at] for r in graph.relations),
        "content hashes": _digest(_key(m) for m in memories),
        "memory dates and use counts": _digest([*_key(m), m.created_at, m.updated_at, m.access_count,
                                                m.last_accessed_at] for m in memories),
        "memory fields": _digest([*_key(m), m.memory_type, sorted(m.tags), m.importance, m.metadata] for m in memories),
        "memory lifecycle": _digest([*_key(m), m.superseded_by, m.archived_at, links_data(m.links)]
                                    for m in memories if m.superseded_by or m.archived_at or m.links),
        "journal times and actions": _digest([e.at, e.tool, e.action] for e in journal),
    }
    if with_vectors:
        by_id = {m.id: _key(m) for m in memories}
        loaded = store.load_vectors()
        c.vectors = {by_id[int(i)]: row for i, row in zip(loaded.ids, loaded.matrix) if int(i) in by_id}
        c.counts["vectors"] = len(c.vectors)
    return c


@dataclass
class Report:
    source: str
    target: str
    rows: list[dict[str, Any]]  # {"what", "source", "target", "equal"}
    notes: list[str]
    vectors_copied: bool

    @property
    def ok(self) -> bool:
        return all(r["equal"] for r in self.rows)

    def as_dict(self) -> dict[str, Any]:
        return {"source": self.source, "target": self.target, "ok": self.ok, "vectors_copied": self.vectors_copied,
                "checks": self.rows, "notes": self.notes}


BODY_TAGS = "body_tags"  # entity metadata the engines derive from #tags (store/sqlite/vault.py)


def _has_document(e: Entity) -> bool:
    """Whether the entity holds more than the graph tools write: prose in its body, aliases,
    metadata, tags of its own (not derived from #tags)."""
    from memloci.service.documents import prose

    derived = {t.casefold() for t in e.metadata.get(BODY_TAGS, [])}
    return bool(prose(e.body) or e.aliases or set(e.metadata) - {BODY_TAGS}
                or any(t.casefold() not in derived for t in e.tags))


def _plain(m: Memory) -> bool:
    """An observation as create_entities writes one (the rest go through store_memory)."""
    return m.memory_type == "observation" and not m.tags and m.importance == "medium" and not m.metadata


def _readable(call: Callable[[], Any]) -> tuple[bool, Any]:
    """(True, answer), or (False, None) when the engine refuses the call as unsupported."""
    try:
        return True, call()
    except ValidationError:
        return False, None


def open_pair(source_spec: LibrarySpec, target_spec: LibrarySpec, settings: Any) -> tuple[Store, Store]:
    """The source (which must exist: never created here) and the target (created if missing,
    refused unless empty), each under the schema the settings give it."""
    from memloci.core.schema import schema_from_config

    if _identity(source_spec) == _identity(target_spec):
        raise ValidationError(f"target: '{target_spec.name}' is the source library itself",
                              hint="Give a new file, folder or library name as the target.")
    fallback = schema_from_config(settings.schema, "schema (MEMLOCI_SCHEMA, --schema)") if settings.schema else None
    source, target = open_store(source_spec, settings.home), open_store(target_spec, settings.home)
    for store, spec in ((source, source_spec), (target, target_spec)):
        rules = spec.schema or fallback
        if rules is not None:
            store.schema = rules
    try:
        _check_pair(source, target, target_spec)
    except BaseException:
        source.close()
        target.close()
        raise
    return source, target


def _check_pair(source: Store, target: Store, target_spec: LibrarySpec) -> None:
    try:
        source.open(create=False)
    except LibraryMissingError as exc:
        raise LibraryMissingError(f"source: {exc.message}", hint="Check the source's path; it is never created.") from exc
    try:
        target.open(create=False)
    except LibraryMissingError:
        target.open(create=True)  # (a folder of notes with no index yet is indexed here, then refused below)
    held = target.stats()
    counts = {"entities": held.entities, "observations": held.observations, "memories": held.memories,
              "relations": held.relations}
    if any(counts.values()):
        listed = ", ".join(f"{n} {what}" for what, n in counts.items() if n)
        raise ValidationError(f"target: library '{target_spec.name}' ({target.path}) is not empty: it holds {listed}",
                              hint="Migrate into a new file, folder or library name (a migration that was "
                                   "interrupted leaves part of a copy: remove it and run again).")
    if not isinstance(target, Migratable) or not isinstance(target, Portable):
        raise ValidationError(f"target: the {target.kind} engine cannot take a migration")


SHOWN = 5  # violations named in a refusal's message; the details carry up to SHOWN_DETAILS
SHOWN_DETAILS = 100


def schema_refusal(problems: list[dict[str, str]], target: Store) -> ValidationError:
    """The refusal of a source that breaks the target's schema: how many violations, the first few."""
    named = [f"{p['what']} {p['where']}: {p['rule']}" for p in problems[:SHOWN]]
    more = f"; and {len(problems) - SHOWN} more" if len(problems) > SHOWN else ""
    return ValidationError(
        f"target: the source breaks schema '{target.schema.name}' of library '{target.name}' in "
        f"{len(problems)} place(s), so nothing was written: " + "; ".join(named) + more,
        hint=f"`memloci check --schema {target.schema.name}` on the source lists every violation; fix them there, "
             "or migrate into a library with another schema.",
        details={"count": len(problems), "violations": problems[:SHOWN_DETAILS]})


def migrate(source: Store, target: Store, *, embedder_model: tuple[str, int] | None,
            progress: Progress = lambda part, done, total: None) -> Report:
    """Copy `source` into the empty `target` and verify it. `embedder_model`: (model id,
    dimension) of the embedder the target will be served with (None: no embedder)."""
    assert isinstance(target, Migratable) and isinstance(target, Portable)
    notes: list[str] = []
    graph = source.export_graph()
    memories = all_memories(source)
    journal = list(reversed(source.journal(limit=JOURNAL_ALL)))  # oldest first
    by_entity: dict[str, list[Memory]] = {}
    for m in memories:
        if m.entity:
            by_entity.setdefault(name_key(m.entity), []).append(m)

    # The target's schema first: a copy checked one write at a time would stop half way (a
    # cycle is only seen at the relations, after every entity is written), so the whole source
    # graph is checked against it here, and every violation is reported before any write.
    # (an entity's observations there are every memory it holds, whatever their type)
    problems = rules.graph_violations(target.schema, graph.entities, graph.relations)
    if problems:
        raise schema_refusal(problems, target)

    # What the target must hold beyond the graph; refused before anything is written if it cannot.
    documents = [e.name for e in graph.entities if _has_document(e)]
    docs = source.entity_documents(documents) if documents else {}  # name_key -> document
    for doc in docs.values():  # the target schema's refusal, before any write
        try:
            target.check_document(doc, "entities")
        except ValidationError as exc:
            raise ValidationError(f"target: '{doc.name}' (one of {len(docs)} source entities with a body, aliases, "
                                  f"tags or metadata) cannot be stored: {exc.message}", hint=exc.hint) from exc
    _, manual = _readable(source.manual_text)
    if manual is not None and not _readable(target.manual_text)[0]:
        raise ValidationError(f"target: the {target.kind} engine does not store a library manual, which the source has",
                              hint="Migrate into a SQLite or Markdown library.")
    vectors_model = source.vector_model()
    dimension = source.embedding_state().get("dimension")
    copy_vectors = bool(vectors_model) and embedder_model == (vectors_model, dimension)
    if vectors_model and not copy_vectors:
        told = f"{embedder_model[0]} ({embedder_model[1]} dimensions)" if embedder_model else "no embedder"
        notes.append(f"vectors not copied: the source's are {vectors_model} ({dimension} dimensions), the target "
                     f"is served with {told}; a server with an embedder embeds the target's memories anew")

    try:
        _copy(source, target, graph, by_entity, docs, memories, journal, manual,
              copy_vectors, vectors_model, progress)
    except MemlociError as exc:  # the same error (its code), saying where the copy stands
        exc.message = f"migration stopped: {exc.message}"
        exc.hint = (f"The target '{target.name}' holds part of the copy; remove it ({target.path}) "
                    "and run again once the cause is fixed.")
        raise
    undone = sum(1 for e in journal if e.detail and "undo" in e.detail)
    if source.kind != target.kind and undone:
        notes.append(f"the undo records of {undone} journal entries are the {source.kind} engine's and were left "
                     "out: undo those changes in the source")
    target.checkpoint()

    # verification
    before, after = census(source, with_vectors=copy_vectors), census(target, with_vectors=copy_vectors)
    rows = [{"what": what, "source": n, "target": after.counts.get(what), "equal": n == after.counts.get(what)}
            for what, n in before.counts.items()]
    rows += [{"what": what, "source": d, "target": after.digests.get(what), "equal": d == after.digests.get(what)}
             for what, d in before.digests.items()]
    if copy_vectors:
        import numpy as np

        same = before.vectors.keys() == after.vectors.keys() and all(
            np.allclose(v, after.vectors[k], atol=1e-6) for k, v in before.vectors.items())
        rows.append({"what": "vector values", "source": len(before.vectors), "target": len(after.vectors),
                     "equal": bool(same)})
    return Report(f"{source.name} ({source.kind}: {source.path})", f"{target.name} ({target.kind}: {target.path})",
                  rows, notes, copy_vectors)


def _copy(source: Store, target: Any, graph: Any, by_entity: dict[str, list[Memory]], docs: dict[str, Any],
          memories: list[Memory], journal: list[JournalEntry], manual: str | None,
          copy_vectors: bool, vectors_model: str | None, progress: Progress) -> None:
    # entities, each with its plain observations (the rest come with the memories); one that
    # holds a body, aliases, tags or metadata is written whole as its document. A target that
    # copies memories whole (MemoryCopies) takes every observation with the memories instead.
    bulk = isinstance(target, MemoryCopies)

    def plain(key: str) -> list[str]:
        return [] if bulk else [m.content for m in by_entity.get(key, []) if _plain(m)]

    from dataclasses import replace

    entities = graph.entities
    simple = [e for e in entities if name_key(e.name) not in docs]
    for start in range(0, len(simple), BATCH):
        chunk = simple[start:start + BATCH]
        target.create_entities([EntityInput(e.name, e.entity_type, tuple(plain(name_key(e.name)))) for e in chunk],
                               origin=ORIGIN)
        progress("entities", start + len(chunk), len(entities))
    written = [replace(d, observations=plain(key), dates={}) for key, d in docs.items()]
    for start in range(0, len(written), BATCH):
        target.apply_documents(written[start:start + BATCH], origin=ORIGIN, action="migrate", create=True)
    progress("entities", len(entities), len(entities))
    relations = graph.relations
    for start in range(0, len(relations), BATCH):
        chunk = relations[start:start + BATCH]
        target.create_relations([RelationInput(r.from_entity, r.relation_type, r.to_entity) for r in chunk],
                                origin=ORIGIN)
        progress("relations", start + len(chunk), len(relations))
    progress("relations", len(relations), len(relations))
    context = source.read_context()
    if context:
        target.update_context(lambda _: dict(context), origin=ORIGIN)
    if manual is not None:
        target.edit_manual(lambda _: manual, origin=ORIGIN, detail={})

    if bulk:
        _copy_whole(source, target, memories, copy_vectors, vectors_model, progress)
    else:
        _copy_each(source, target, memories, copy_vectors, vectors_model, progress)
    _copy_lifecycle(target, memories)
    target.restore_dates({name_key(e.name): (e.created_at, e.updated_at, (), ()) for e in entities},
                         {(name_key(r.from_entity), r.relation_type, name_key(r.to_entity)): r.created_at
                          for r in relations}, origin=ORIGIN)
    target.finish_copy()
    # the journal last: every write above journaled itself, and this replaces all of that
    undo_kept = source.kind == target.kind
    copied = [e if undo_kept or not (e.detail and "undo" in e.detail)
              else JournalEntry(e.id, e.at, e.tool, e.action, e.entities,
                                {k: v for k, v in e.detail.items() if k != "undo"})
              for e in journal]
    target.replace_journal(copied)
    progress("journal", len(copied), len(copied))


def _copy_lifecycle(target: Any, memories: list[Memory]) -> None:
    """Superseded, archived and linked free memories as the source has them (one write), their
    dates and use counts put back after it."""
    marked = [m for m in memories if m.entity is None and (m.superseded_by or m.archived_at or m.links)]
    if not marked:
        return
    copied = {m.content_hash: m for m in all_memories(target) if m.entity is None}
    pairs = [(m, copied[m.content_hash]) for m in marked if m.content_hash in copied]
    target.change_memories([MemoryEdit(t.id, fingerprint(t), {"superseded_by": m.superseded_by,
                                                             "archived_at": m.archived_at, "links": m.links})
                            for m, t in pairs], [], origin=ORIGIN, action="migrate", detail={})
    target.restore_memory_state([(t.id, m.created_at, m.updated_at, m.access_count, m.last_accessed_at)
                                 for m, t in pairs])


def _copy_whole(source: Store, target: MemoryCopies, memories: list[Memory], copy_vectors: bool,
                vectors_model: str | None, progress: Progress) -> None:
    """Every memory with its dates, use counts and vectors in one call (one transaction)."""
    vectors: dict[int, Any] = {}
    if copy_vectors:
        loaded = source.load_vectors()
        wanted = {m.id for m in memories}
        vectors = {int(i): row for i, row in zip(loaded.ids, loaded.matrix) if int(i) in wanted}
    done = 0

    def step(n: int) -> None:
        nonlocal done
        done += n
        progress("memories", done, len(memories))

    target.copy_memories(memories, vectors, vectors_model if vectors else None, origin=ORIGIN, on_batch=step)
    progress("memories", len(memories), len(memories))
    progress("vectors", len(vectors), len(vectors))


def _copy_each(source: Store, target: Any, memories: list[Memory], copy_vectors: bool,
               vectors_model: str | None, progress: Progress) -> None:
    """The memories through the calls every engine has: runs of free ones in one transaction
    each, the others one by one; then their dates and use counts, then their vectors."""
    done, run = 0, []
    for m in memories:
        if m.entity is None:
            run.append(MemoryLine(m.content, m.tags, m.memory_type, m.importance, m.metadata, m.created_at, m.updated_at))
            if len(run) < BATCH:
                continue
        if run:
            target.import_memories(run, origin=ORIGIN)
            done, run = done + len(run), []
        if m.entity is not None and not _plain(m):
            target.store_memory(MemoryInput(m.content, m.tags, m.memory_type, m.metadata, m.importance, m.entity),
                                origin=ORIGIN)
        done += m.entity is not None
        progress("memories", done, len(memories))
    if run:
        target.import_memories(run, origin=ORIGIN)
    progress("memories", len(memories), len(memories))

    # dates and use counts, as the source has them
    ids = {_key(m): m.id for m in all_memories(target)}
    state = [(ids[_key(m)], m.created_at, m.updated_at, m.access_count, m.last_accessed_at)
             for m in memories if _key(m) in ids]
    for start in range(0, len(state), BATCH):
        target.restore_memory_state(state[start:start + BATCH])

    if copy_vectors:
        assert vectors_model is not None
        loaded = source.load_vectors()
        keys = {m.id: _key(m) for m in memories}
        items = [(ids[keys[int(i)]], keys[int(i)][1], row) for i, row in zip(loaded.ids, loaded.matrix)
                 if int(i) in keys and keys[int(i)] in ids]
        for start in range(0, len(items), BATCH):
            target.save_vectors(items[start:start + BATCH], vectors_model)
            progress("vectors", min(start + BATCH, len(items)), len(items))
        progress("vectors", len(items), len(items))
    else:
        progress("vectors", 0, 0)


def render_table(report: Report) -> list[list[str]]:
    """The report's rows as table cells: what, source, target, equal."""
    return [[r["what"], str(r["source"]), str(r["target"]), "yes" if r["equal"] else "NO"] for r in report.rows]
