"""The embedded engine: one SQLite file per library (DESIGN.md §3).

`SQLiteStore` is the facade of the Store protocols (store/protocols.py); each call is one of
its parts': the file's connections and transactions (database.py: WAL, one `BEGIN IMMEDIATE`
per write, a pool of connections), the graph's writes (rules/graph.py over graph_tx.py) and
reads (graph_reads.py), memories (memories.py), passages (passages.py), documents, the manual
and the context (documents.py), renames and merges (rename.py), undo and whole exports and
imports (undo.py), and what `memloci migrate` sets (migratable.py).

A Markdown library keeps one of these as its index, built with its FileSide (tx.py).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from memloci.core.lazy import on_first_use
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
    now_iso,
)
from memloci.core.schema import LibrarySchema
from memloci.markdown.document import EntityDocument
from memloci.rules import graph as rules
from memloci.rules.graph import RelationsCreated
from memloci.store.protocols import EditedDocuments, NameVocabulary
from memloci.store.sqlite import rename
from memloci.store.sqlite.database import Database
from memloci.store.sqlite.documents import SQLiteDocuments
from memloci.store.sqlite.graph_reads import SQLiteGraphReads
from memloci.store.sqlite.graph_tx import SQLiteGraphTx
from memloci.store.sqlite.memories import SQLiteMemories
from memloci.store.sqlite.migratable import SQLiteMigration
from memloci.store.sqlite.passages import SQLitePassages
from memloci.store.sqlite.previews import SQLitePreviews
from memloci.store.sqlite.schema import SCHEMA_VERSION
from memloci.store.sqlite.tx import NO_FILES, FileSide
from memloci.store.sqlite.undo import SQLiteUndo

if TYPE_CHECKING:
    import numpy as np
else:  # imported on first use: the server's start does not need it (core/lazy.py)
    np = on_first_use("numpy", globals(), "np")


class SQLiteStore:
    """A library kept in one SQLite file."""

    kind = "sqlite"

    def __init__(self, path: str | os.PathLike[str], name: str = "default", *, files: FileSide = NO_FILES):
        self.db = Database(path, name, files)
        self.path = self.db.path
        self.name = name
        self._graph = SQLiteGraphReads(self.db)
        self._memories = SQLiteMemories(self.db)
        self._previews = SQLitePreviews(self.db)
        self._passages = SQLitePassages(self.db)
        self._documents = SQLiteDocuments(self.db)
        self._undo = SQLiteUndo(self.db)
        self._migration = SQLiteMigration(self.db)

    @property
    def schema(self) -> LibrarySchema:
        """The library's rules (set per library by the registry)."""
        return self.db.schema

    @schema.setter
    def schema(self, value: LibrarySchema) -> None:
        self.db.schema = value

    # -- connections -------------------------------------------------------------------

    def open(self, *, create: bool = True) -> None:
        """Check the file, create (unless `create` is false) or migrate the schema. Idempotent."""
        self.db.open(create=create)

    def close(self) -> None:
        """Close the idle connections (those still lent out close when returned to a closed store)."""
        self.db.close()

    def checkpoint(self) -> None:
        self.db.checkpoint()

    @contextmanager
    def _read(self) -> Iterator[Any]:
        """A consistent snapshot for several SELECTs (tests and tools reading the tables)."""
        with self.db.read() as conn:
            yield conn

    @contextmanager
    def _write(self) -> Iterator[Any]:
        """One write transaction's connection (tests and tools writing the tables)."""
        with self.db.write() as tx:
            yield tx.conn

    # -- the graph: rules/graph.py's rules over this engine's GraphTx (graph_tx.py) -------

    def create_entities(self, entities: Sequence[EntityInput], *, origin: str) -> list[CreatedEntity]:
        at = now_iso()
        with self.db.write() as tx:
            return rules.create_entities(SQLiteGraphTx(tx, at, link_pending=True), self.schema, entities, origin)

    def create_relations(self, relations: Sequence[RelationInput], *, origin: str) -> RelationsCreated:
        at = now_iso()
        with self.db.write() as tx:
            return rules.create_relations(SQLiteGraphTx(tx, at), self.schema, relations, origin)

    def add_observations(self, batches: Sequence[ObservationBatch], *, origin: str) -> list[AddedObservations]:
        at = now_iso()
        with self.db.write() as tx:
            return rules.add_observations(SQLiteGraphTx(tx, at), self.schema, batches, origin)

    def delete_entities(self, names: Sequence[str], *, origin: str) -> list[str]:
        with self.db.write() as tx:
            return rules.delete_entities(SQLiteGraphTx(tx, now_iso()), self.schema, names, origin)

    def delete_observations(self, batches: Sequence[ObservationBatch], *, origin: str) -> list[RemovedObservations]:
        at = now_iso()
        with self.db.write() as tx:
            return rules.delete_observations(SQLiteGraphTx(tx, at), self.schema, batches, origin)

    def delete_relations(self, relations: Sequence[RelationInput], *, origin: str) -> list[Relation]:
        with self.db.write() as tx:
            return rules.delete_relations(SQLiteGraphTx(tx, now_iso()), self.schema, relations, origin)

    def read_graph(self, *, limit: int, offset: int, summary: bool) -> GraphPage:
        return self._graph.read_graph(limit=limit, offset=offset, summary=summary)

    def open_entities(self, names: Sequence[str]) -> Graph:
        return self._graph.open_entities(names)

    def entity_names(self, names: Sequence[str]) -> dict[str, tuple[str, ...]]:
        return self._graph.entity_names(names)

    def export_graph(self, *, order: str = "id") -> Graph:
        return self._graph.export_graph(order=order)

    def search_entities(self, query: str, *, limit: int, extra: Sequence[tuple[str, float, str]] = (),
                        stop_words: frozenset[str] = frozenset(), names: NameVocabulary | None = None,
                        count_cap: int = 0, pool: int = 0) -> SearchResult:
        return self._graph.search_entities(query, limit=limit, extra=extra, stop_words=stop_words, names=names,
                                          count_cap=count_cap, pool=pool)

    def count_entities(self, query: str, *, cap: int, stop_words: frozenset[str] = frozenset(),
                       names: NameVocabulary | None = None) -> int:
        return self._graph.count_entities(query, cap=cap, stop_words=stop_words, names=names)

    def name_changes(self, since: int) -> NameChanges:
        return self._graph.name_changes(since)

    def journal(self, *, limit: int, internal: bool = True) -> list[JournalEntry]:
        return self._graph.journal(limit=limit, internal=internal)

    # -- memories and their vectors ----------------------------------------------------------

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

    def lexical_memory_candidates(self, terms: list[str], grams: list[str], k: int,
                                  filters: MemoryFilter) -> dict[int, float]:
        return self._memories.lexical_memory_candidates(terms, grams, k, filters)

    def memory_ids(self, filters: MemoryFilter) -> set[int]:
        return self._memories.memory_ids(filters)

    def load_memories(self, ids: Sequence[int]) -> dict[int, Memory]:
        return self._memories.load_memories(ids)

    def touch_memories(self, ids: Sequence[int]) -> None:
        self._memories.touch_memories(ids)

    def pending_embeddings(self, limit: int) -> list[PendingMemory]:
        return self._memories.pending_embeddings(limit)

    def pending_count(self) -> int:
        return self._memories.pending_count()

    def save_vectors(self, items: Sequence[tuple[int, str, np.ndarray]], model: str) -> SavedVectors:
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

    # -- passages of note bodies -------------------------------------------------------------

    def refresh_passages(self, limit: int = 64) -> int:
        return self._passages.refresh_passages(limit)

    def pending_passages(self, limit: int) -> list[PendingPassage]:
        return self._passages.pending_passages(limit)

    def save_passage_vectors(self, items: Sequence[tuple[int, str, np.ndarray]], model: str) -> SavedVectors:
        return self._passages.save_passage_vectors(items, model)

    def load_passage_vectors(self) -> PassageVectors:
        return self._passages.load_passage_vectors()

    def passages_version(self) -> int:
        return self._passages.passages_version()

    def passage_pending_count(self) -> int:
        return self._passages.passage_pending_count()

    def entity_names_by_id(self, ids: Sequence[int]) -> dict[int, str]:
        return self._passages.entity_names_by_id(ids)

    def passages_of(self, name: str) -> list[str]:
        return self._passages.passages_of(name)

    # -- documents, the manual, the context ---------------------------------------------------

    def entity_documents(self, names: Sequence[str]) -> dict[str, EntityDocument]:
        return self._documents.entity_documents(names)

    def list_entities(self, pattern: str = "*") -> list[ListedEntity]:
        return self._documents.list_entities(pattern)

    def find_relations(self, *, to_entity: str | None, relation_type: str | None,
                       from_entity: str | None) -> list[Relation]:
        return self._documents.find_relations(to_entity=to_entity, relation_type=relation_type,
                                             from_entity=from_entity)

    def check_document(self, doc: EntityDocument, field: str) -> None:
        self._documents.check_document(doc, field)

    def apply_documents(self, docs: Sequence[EntityDocument], *, origin: str, action: str,
                        create: bool | None = None, detail: dict[str, Any] | None = None) -> list[str]:
        return self._documents.apply_documents(docs, origin=origin, action=action, create=create, detail=detail)

    def edit_document(self, name: str, change: Callable[[str], str], *, origin: str,
                      detail: dict[str, Any], stamp: str | None = None) -> DocumentEdit:
        return self._documents.edit_document(name, change, origin=origin, detail=detail, stamp=stamp)

    def edit_documents(self, changes: Sequence[tuple[str, Callable[[str], str]]], *, origin: str, action: str,
                       detail: dict[str, Any], absent: Sequence[str] = ()) -> EditedDocuments:
        return self._documents.edit_documents(changes, origin=origin, action=action, detail=detail, absent=absent)

    def rename_entity(self, old: str, new: str, *, origin: str) -> dict[str, Any]:
        return rename.rename_entity(self.db, old, new, origin=origin)

    def merge_entities(self, sources: Sequence[str], target: str, *, origin: str) -> dict[str, Any]:
        return rename.merge_entities(self.db, sources, target, origin=origin)

    def manual_text(self) -> str | None:
        return self._documents.manual_text()

    def edit_manual(self, change: Callable[[str | None], str], *, origin: str, detail: dict[str, Any]) -> str:
        return self._documents.edit_manual(change, origin=origin, detail=detail)

    def read_context(self) -> dict[str, Any]:
        return self._documents.read_context()

    def update_context(self, change: Callable[[dict[str, Any]], dict[str, Any]], *, origin: str) -> dict[str, Any]:
        return self._documents.update_context(change, origin=origin)

    # -- undo, backups, exports and imports ---------------------------------------------------

    def undo_change(self, change_id: int, *, origin: str = "undo") -> dict[str, Any]:
        return self._undo.undo_change(change_id, origin=origin)

    def note_backup(self, at: str, path: str) -> None:
        self._undo.note_backup(at, path)

    def last_backup(self) -> dict[str, str] | None:
        return self._undo.last_backup()

    def note_event(self, action: str, detail: dict[str, Any], *, vectors_floor: int = 0) -> None:
        self._undo.note_event(action, detail, vectors_floor=vectors_floor)

    def holds_data(self) -> int:
        return self._undo.holds_data()

    def free_memories(self) -> list[Memory]:
        return self._undo.free_memories()

    def import_memories(self, items: Sequence[Any], *, origin: str) -> ImportedMemories:
        return self._undo.import_memories(items, origin=origin)

    def restore_dates(self, entities: Mapping[str, tuple[str, str, Sequence[str], Sequence[str]]],
                      relations: Mapping[tuple[str, str, str], str], *, origin: str) -> None:
        self._undo.restore_dates(entities, relations, origin=origin)

    # -- what `memloci migrate` sets ------------------------------------------------------------

    def restore_memory_state(self, items: Sequence[tuple[int, str, str, int, str | None]]) -> None:
        self._migration.restore_memory_state(items)

    def replace_journal(self, entries: Sequence[JournalEntry]) -> None:
        self._migration.replace_journal(entries)

    def finish_copy(self) -> None:
        """Nothing is derived outside the database."""

    # -- maintenance ----------------------------------------------------------------------

    def stats(self) -> LibraryStats:
        with self.db.read() as conn:
            entities, observations, memories, relations, journal = conn.execute(
                """SELECT (SELECT count(*) FROM entities),
                          (SELECT count(*) FROM memories WHERE entity_id IS NOT NULL),
                          (SELECT count(*) FROM memories WHERE entity_id IS NULL),
                          (SELECT count(*) FROM relations),
                          (SELECT count(*) FROM journal)"""
            ).fetchone()
        size = sum(os.path.getsize(p) for p in (self.path, self.path + "-wal") if os.path.exists(p))
        return LibraryStats(self.name, self.kind, self.path, entities, observations, memories, relations,
                            journal, size, SCHEMA_VERSION)
