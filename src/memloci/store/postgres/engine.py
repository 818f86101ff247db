"""The shared engine: a library kept in PostgreSQL (DESIGN.md §3), for teams whose agents on
several machines share one memory.

A library spec whose path is a `postgresql://` URL (any libpq URL, a socket `?host=/path`
included) selects it; the library's name chooses its schema (`memloci_<name>`, see
connection.schema_for), so several libraries share one database. Connections come from a
small psycopg 3 pool; the schema is created and migrated on open (schema.py).

How it is built. PostgresStore is a facade: each public method is a Store protocol's
(store/protocols.py), or one of the few this engine adds (changes, on_change,
bulk_load_memories, passages_of), and hands the call to one part it holds, each part a small
class over one Database (database.py: the pool, the library's advisory write lock and its
locking scheme, LISTEN/NOTIFY of other servers' writes). A write runs in a
transaction.WriteTx (its connection, its time, its undo record), which every function writing
inside it is given. Rows are read and written by plain functions over a connection
(entities.py, memory_rows.py, vectors.py, undo_rows.py), which the parts share.

Notes with bodies (documents.py) are stored as in SQLite: body, front matter, `[[links]]` as
relations and links waiting for their target; renamed and merged with every link repaired
(rename.py, the rules in rules/rename.py). Undo works as in SQLite (undo.py, the rules in
rules/undo.py): a destructive write keeps what it removed in its journal entry, sealed
under the library's lock just before the commit. Note bodies carry meaning as in SQLite
(passages.py): cut into passages, kept in step with every body by triggers, embedded by the
background worker into pgvector columns, and searched by meaning through search_nodes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from memloci.core.errors import LibraryUnreadableError
from memloci.core.model import (
    AddedObservations,
    ChangedMemories,
    CreatedEntity,
    DocumentEdit,
    EntityInput,
    Graph,
    GraphPage,
    ImportedMemories,
    JournalEntry,
    LibraryStats,
    ListedEntity,
    Memory,
    MemoryEdit,
    MemoryFilter,
    MemoryInput,
    MemoryPage,
    MemoryVectors,
    NameChanges,
    NewMemory,
    ObservationBatch,
    PassageVectors,
    PendingMemory,
    PendingPassage,
    Relation,
    RelationInput,
    RemovedObservations,
    SavedVectors,
    SearchResult,
    StoredMemory,
)
from memloci.core.schema import DEFAULT_SCHEMA, LibrarySchema
from memloci.markdown.document import EntityDocument
from memloci.rules import documents as documents_rules
from memloci.rules.graph import RelationsCreated
from memloci.store.postgres.database import LOCK_TIMEOUT, POOL_SIZE, POOL_TIMEOUT, Database
from memloci.store.postgres.documents import PostgresDocuments
from memloci.store.postgres.graph import PostgresGraphWrites
from memloci.store.postgres.graph_reads import PostgresGraphReads
from memloci.store.postgres.memories import PostgresMemories
from memloci.store.postgres.memory_rows import BulkMemory
from memloci.store.postgres.migratable import PostgresMigratable
from memloci.store.postgres.passages import PostgresPassages
from memloci.store.postgres.portable import PostgresPortable
from memloci.store.postgres.previews import PostgresPreviews
from memloci.store.postgres.rename import PostgresRename
from memloci.store.postgres.search import PostgresSearch
from memloci.store.postgres.undo import PostgresUndo
from memloci.store.postgres.upkeep import PostgresContext, PostgresUpkeep
from memloci.store.protocols import EditedDocuments, MemoryWordCounts, NameVocabulary, VectorCandidates


class PostgresStore:
    """A library kept in a schema of a PostgreSQL database."""

    kind = "postgres"
    schema: LibrarySchema = DEFAULT_SCHEMA  # set per library by the registry

    def __init__(self, url: str, name: str = "default", *, pool_size: int = POOL_SIZE,
                 pool_timeout: float = POOL_TIMEOUT, lock_timeout: float = LOCK_TIMEOUT):
        db = Database(url, name, pool_size=pool_size, pool_timeout=pool_timeout, lock_timeout=lock_timeout)
        self.db = db
        self.url = url  # never shown: it may hold a password
        self.name = name
        self.schema_id = db.schema_id  # unquoted
        self.schema_name = db.schema_name  # as SQL text
        self.path = db.path  # the URL without its password, and the schema
        self._graph = PostgresGraphWrites(db)
        self._reads = PostgresGraphReads(db)
        self._search = PostgresSearch(db)
        self._memories = PostgresMemories(db)
        self._previews = PostgresPreviews(db)
        self._passages = PostgresPassages(db)
        self._documents = PostgresDocuments(db)
        self._rename = PostgresRename(db)
        self._undo = PostgresUndo(db)
        self._portable = PostgresPortable(db)
        self._migratable = PostgresMigratable(db)
        self._context = PostgresContext(db)
        self._upkeep = PostgresUpkeep(db)

    # -- connections -------------------------------------------------------------------

    def open(self, *, create: bool = True) -> None:
        """Connect, create (unless `create` is false) or migrate the library's schema, start
        listening for other servers' writes. Idempotent."""
        self.db.open(create=create)

    def close(self) -> None:
        self.db.close()

    def changes(self) -> int:
        """How many change notices this process has heard on the library's channel (its own
        writes', other servers', and reconnections of the listener)."""
        return self.db.changes()

    def change_mark(self) -> int | None:
        """A number that moves whenever the library may have changed (a write of this store,
        at once; another server's, once its notice arrives); None while no listener is
        connected, when nothing can be known without asking the database."""
        return self.db.change_mark()

    def on_change(self, callback: Any) -> None:
        """Call `callback(what)` on the listener's thread whenever a change notice arrives."""
        self.db.on_change(callback)

    # For tests and benchmarks that run SQL of their own on the library.

    def _read(self) -> Any:
        """A read snapshot's connection (database.Database.read)."""
        return self.db.read()

    @contextmanager
    def _write(self, what: str = "graph") -> Iterator[Any]:
        """A write transaction's connection, under the library's lock (database.Database.write)."""
        with self.db.write(what) as tx:
            yield tx.conn

    @property
    def _pool(self) -> Any:
        return self.db.pool

    @property
    def _lock_key(self) -> int:
        return self.db.lock_key

    @property
    def _search_path(self) -> str:
        return self.db.search_path

    # -- the graph ---------------------------------------------------------------------

    def create_entities(self, entities: Sequence[EntityInput], *, origin: str) -> list[CreatedEntity]:
        return self._graph.create_entities(self.schema, entities, origin)

    def create_relations(self, relations: Sequence[RelationInput], *, origin: str) -> RelationsCreated:
        return self._graph.create_relations(self.schema, relations, origin)

    def add_observations(self, batches: Sequence[ObservationBatch], *, origin: str) -> list[AddedObservations]:
        return self._graph.add_observations(self.schema, batches, origin)

    def delete_entities(self, names: Sequence[str], *, origin: str) -> list[str]:
        return self._graph.delete_entities(self.schema, names, origin)

    def delete_observations(self, batches: Sequence[ObservationBatch], *, origin: str) -> list[RemovedObservations]:
        return self._graph.delete_observations(self.schema, batches, origin)

    def delete_relations(self, relations: Sequence[RelationInput], *, origin: str) -> list[Relation]:
        return self._graph.delete_relations(self.schema, relations, origin)

    def read_graph(self, *, limit: int, offset: int, summary: bool) -> GraphPage:
        return self._reads.read_graph(limit=limit, offset=offset, summary=summary)

    def open_entities(self, names: Sequence[str]) -> Graph:
        return self._reads.open_entities(names)

    def entity_names(self, names: Sequence[str]) -> dict[str, tuple[str, ...]]:
        return self._reads.entity_names(names)

    def export_graph(self, *, order: str = "id") -> Graph:
        return self._reads.export_graph(order=order)

    def name_changes(self, since: int) -> NameChanges:
        return self._reads.name_changes(since)

    def entity_names_by_id(self, ids: Sequence[int]) -> dict[int, str]:
        return self._reads.entity_names_by_id(ids)

    def search_entities(self, query: str, *, limit: int, extra: Sequence[tuple[str, float, str]] = (),
                        stop_words: frozenset[str] = frozenset(), names: NameVocabulary | None = None,
                        count_cap: int = 0, pool: int = 0) -> SearchResult:
        return self._search.search_entities(query, limit=limit, extra=extra, stop_words=stop_words, names=names,
                                            count_cap=count_cap, pool=pool)

    def count_entities(self, query: str, *, cap: int, stop_words: frozenset[str] = frozenset(),
                       names: NameVocabulary | None = None) -> int:
        return self._search.count_entities(query, cap=cap, stop_words=stop_words, names=names)

    # -- memories ----------------------------------------------------------------------

    def store_memory(self, m: MemoryInput, *, origin: str) -> StoredMemory:
        return self._memories.store_memory(m, origin=origin)

    def memories_by_hash(self, content_hash: str) -> list[Memory]:
        return self._memories.memories_by_hash(content_hash)

    def update_memory(self, memory_id: int, *, content: str | None, tags: Sequence[str] | None,
                      metadata: dict[str, Any] | None, importance: str | None, origin: str) -> Memory:
        return self._memories.update_memory(memory_id, content=content, tags=tags, metadata=metadata,
                                            importance=importance, origin=origin)

    def delete_memories(self, ids: Sequence[int], *, origin: str) -> list[Memory]:
        return self._memories.delete_memories(ids, origin=origin)

    def change_memories(self, edits: Sequence[MemoryEdit], new: Sequence[NewMemory], *, origin: str, action: str,
                        detail: dict[str, Any], expect: Sequence[MemoryEdit] = (),
                        preview_id: int | None = None) -> ChangedMemories:
        return self._memories.change_memories(edits, new, origin=origin, action=action, detail=detail, expect=expect,
                                              preview_id=preview_id)

    def save_preview(self, kind: str, plan: dict[str, Any]) -> int:
        return self._previews.save_preview(kind, plan)

    def load_preview(self, preview_id: int) -> dict[str, Any] | None:
        return self._previews.load_preview(preview_id)

    def list_previews(self, *, pending: bool, limit: int) -> list[dict[str, Any]]:
        return self._previews.list_previews(pending=pending, limit=limit)

    def mark_executed(self, preview_id: int, change_id: int) -> bool:
        return self._previews.mark_executed(preview_id, change_id)

    def list_memories(self, *, offset: int, limit: int, filters: MemoryFilter, count: bool = True) -> MemoryPage:
        return self._memories.list_memories(offset=offset, limit=limit, filters=filters, count=count)

    def memory_ids(self, filters: MemoryFilter) -> set[int]:
        return self._memories.memory_ids(filters)

    def load_memories(self, ids: Sequence[int]) -> dict[int, Memory]:
        return self._memories.load_memories(ids)

    def touch_memories(self, ids: Sequence[int]) -> None:
        self._memories.touch_memories(ids)

    def lexical_memory_candidates(self, terms: list[str], grams: list[str], k: int,
                                  filters: MemoryFilter) -> dict[int, float]:
        return self._search.lexical_memory_candidates(terms, grams, k, filters)

    def memory_word_counts(self, terms: list[str], grams: list[str], k: int,
                           filters: MemoryFilter) -> MemoryWordCounts:
        return self._search.memory_word_counts(terms, grams, k, filters)

    def bulk_load_memories(self, batches: Iterable[Sequence[BulkMemory]], model: str | None,
                           on_batch: Callable[[int], None] | None = None,
                           timings: dict[str, float] | None = None) -> int:
        """Many free memories at once by COPY, for benchmarks and large loads (memories.py)."""
        return self._memories.bulk_load_memories(batches, model, on_batch, timings)

    # -- vectors -----------------------------------------------------------------------

    def pending_embeddings(self, limit: int) -> list[PendingMemory]:
        return self._memories.pending_embeddings(limit)

    def pending_count(self) -> int:
        return self._memories.pending_count()

    def save_vectors(self, items: Sequence[tuple[int, str, Any]], model: str) -> SavedVectors:
        return self._memories.save_vectors(items, model)

    def load_vectors(self) -> MemoryVectors:
        return self._memories.load_vectors()

    def vectors_version(self) -> int:
        return self._memories.vectors_version()

    def vector_model(self) -> str | None:
        return self._memories.vector_model()

    def reset_vectors(self, model: str, dimension: int) -> int:
        return self._memories.reset_vectors(model, dimension)

    def embedding_state(self) -> dict[str, Any]:
        return self._memories.embedding_state()

    def vector_candidates(self, query: Any, k: int, filters: MemoryFilter, *, model: str | None = None,
                          also: Sequence[int] = ()) -> VectorCandidates:
        return self._search.vector_candidates(query, k, filters, model=model, also=also)

    # -- passages of note bodies -------------------------------------------------------

    def refresh_passages(self, limit: int = 64) -> int:
        return self._passages.refresh_passages(limit)

    def pending_passages(self, limit: int) -> list[PendingPassage]:
        return self._passages.pending_passages(limit)

    def save_passage_vectors(self, items: Sequence[tuple[int, str, Any]], model: str) -> SavedVectors:
        return self._passages.save_passage_vectors(items, model)

    def load_passage_vectors(self) -> PassageVectors:
        return self._passages.load_passage_vectors()

    def passages_version(self) -> int:
        return self._passages.passages_version()

    def passage_pending_count(self) -> int:
        return self._passages.passage_pending_count()

    def passages_of(self, name: str) -> list[str]:
        """The passages of an entity as they stand (for tests: a body just changed may not be split yet)."""
        return self._passages.passages_of(name)

    # -- documents ---------------------------------------------------------------------

    def entity_documents(self, names: Sequence[str]) -> dict[str, EntityDocument]:
        return self._documents.entity_documents(names)

    def list_entities(self, pattern: str = "*") -> list[ListedEntity]:
        return self._documents.list_entities(pattern)

    def find_relations(self, *, to_entity: str | None, relation_type: str | None,
                       from_entity: str | None) -> list[Relation]:
        return self._documents.find_relations(to_entity=to_entity, relation_type=relation_type,
                                              from_entity=from_entity)

    def check_document(self, doc: EntityDocument, field: str) -> None:
        """The library schema's rules, for a document about to be applied."""
        documents_rules.check_document(self.schema, doc, field)

    def apply_documents(self, docs: Sequence[EntityDocument], *, origin: str, action: str,
                        create: bool | None = None, detail: dict[str, Any] | None = None) -> list[str]:
        return self._documents.apply_documents(self.schema, docs, origin=origin, action=action, create=create,
                                               detail=detail)

    def edit_document(self, name: str, change: Callable[[str], str], *, origin: str,
                      detail: dict[str, Any], stamp: str | None = None) -> DocumentEdit:
        return self._documents.edit_document(self.schema, name, change, origin=origin, detail=detail, stamp=stamp)

    def edit_documents(self, changes: Sequence[tuple[str, Callable[[str], str]]], *, origin: str, action: str,
                       detail: dict[str, Any], absent: Sequence[str] = ()) -> EditedDocuments:
        return self._documents.edit_documents(self.schema, changes, origin=origin, action=action, detail=detail,
                                              absent=absent)

    def rename_entity(self, old: str, new: str, *, origin: str) -> dict[str, Any]:
        return self._rename.rename_entity(old, new, origin=origin)

    def merge_entities(self, sources: Sequence[str], target: str, *, origin: str) -> dict[str, Any]:
        return self._rename.merge_entities(self.schema, sources, target, origin=origin)

    def manual_text(self) -> str | None:
        return self._documents.manual_text()

    def edit_manual(self, change: Callable[[str | None], str], *, origin: str, detail: dict[str, Any]) -> str:
        return self._documents.edit_manual(change, origin=origin, detail=detail)

    # -- the hot context ---------------------------------------------------------------

    def read_context(self) -> dict[str, Any]:
        return self._context.read_context()

    def update_context(self, change: Callable[[dict[str, Any]], dict[str, Any]], *, origin: str) -> dict[str, Any]:
        return self._context.update_context(change, origin=origin)

    # -- undo, export and import, copies -----------------------------------------------

    def undo_change(self, change_id: int, *, origin: str = "undo") -> dict[str, Any]:
        return self._undo.undo_change(change_id, origin=origin)

    def free_memories(self) -> list[Memory]:
        return self._portable.free_memories()

    def import_memories(self, items: Sequence[Any], *, origin: str) -> ImportedMemories:
        return self._portable.import_memories(items, origin=origin)

    def restore_dates(self, entities: Mapping[str, tuple[str, str, Sequence[str], Sequence[str]]],
                      relations: Mapping[tuple[str, str, str], str], *, origin: str) -> None:
        self._portable.restore_dates(entities, relations, origin=origin)

    def copy_memories(self, memories: Sequence[Memory], vectors: Mapping[int, Any], model: str | None,
                      *, origin: str, on_batch: Callable[[int], None] | None = None) -> int:
        return self._portable.copy_memories(memories, vectors, model, origin=origin, on_batch=on_batch)

    def note_backup(self, at: str, path: str) -> None:
        self._portable.note_backup(at, path)

    def last_backup(self) -> dict[str, str] | None:
        return self._portable.last_backup()

    def note_event(self, action: str, detail: dict[str, Any], *, vectors_floor: int = 0) -> None:
        self._portable.note_event(action, detail, vectors_floor=vectors_floor)

    def holds_data(self) -> int:
        return self._portable.holds_data()

    def restore_memory_state(self, items: Sequence[tuple[int, str, str, int, str | None]]) -> None:
        self._migratable.restore_memory_state(items)

    def replace_journal(self, entries: Sequence[JournalEntry]) -> None:
        self._migratable.replace_journal(entries)

    def finish_copy(self) -> None:
        self._migratable.finish_copy()

    # -- upkeep ------------------------------------------------------------------------

    def checkpoint(self) -> None:
        """Every commit is durable on the server already; nothing to flush."""

    def stats(self) -> LibraryStats:
        return self._upkeep.stats(self.kind)

    def engine_health(self) -> dict[str, Any]:
        return self._upkeep.engine_health()

    def outage(self) -> str | None:
        return self.db.reach.error().message if self.db.reach.down else None

    def journal(self, *, limit: int, internal: bool = True) -> list[JournalEntry]:
        return self._reads.journal(limit=limit, internal=internal)


__all__ = ["PostgresStore", "LibraryUnreadableError"]
