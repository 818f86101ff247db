"""Storage engines behind narrow protocols. The service talks to these, never to SQL.

An engine's store implements `Store`: the union of the narrow protocols below (the graph,
free memories, their vectors, documents, the hot context, upkeep). Whatever an engine may
or may not offer is a `runtime_checkable` capability protocol (Undoable, Passages,
GraphBatches, Portable, FolderLibrary), tested with isinstance, never with hasattr: the
contract is read here, not guessed from attribute names.

Every mutating method is one transaction: all or nothing. Results are the frozen
dataclasses of core/model.py, never bare tuples.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from memloci.core.model import (
    AddedObservations,
    ChangedMemories,
    CreatedEntity,
    DocumentEdit,
    EntityInput,
    Graph,
    GraphBatch,
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

if TYPE_CHECKING:  # annotations only: neither module needs the other to load
    from memloci.core.schema import LibrarySchema
    from memloci.markdown.document import EntityDocument
    from memloci.rules.graph import RelationsCreated


class NameVocabulary(Protocol):
    """The words of a library's names, types and aliases, as entity search uses them."""

    def complete(self, prefix: str) -> list[str]:
        """Words that `prefix` begins, unless it is a word itself ("ali" -> ["alice"])."""
        ...
    def respell(self, word: str) -> tuple[list[str], str] | None:
        """Words a misspelled `word` may mean, and how to say so ("alcie" -> (["alice"], "alcie→alice"))."""
        ...


class StoreBase(Protocol):
    """What every store is: one named library of some kind, opened before use."""

    name: str  # the library's name as mounted
    kind: str  # the engine: "sqlite", "markdown", "postgres"
    path: str  # where it lives: a file, a Markdown library's index file, a URL (password masked)
    schema: LibrarySchema  # the library's rules; set by the registry when it mounts the library

    def open(self, *, create: bool = True) -> None:
        """Check, create (unless `create` is false) or migrate the library. Idempotent."""
        ...
    def close(self) -> None:
        """Release connections and threads; the store may be opened again."""
        ...


class GraphStore(StoreBase, Protocol):
    """Entities, relations and observations: the nine official tools' data (the rules in rules/graph.py)."""

    def create_entities(self, entities: Sequence[EntityInput], *, origin: str) -> list[CreatedEntity]:
        """Create each entity, or merge it into the one of that name (its new observations added)."""
        ...
    def create_relations(self, relations: Sequence[RelationInput], *, origin: str) -> RelationsCreated:
        """Create relations between existing entities; those already there come back as `existing`."""
        ...
    def add_observations(self, batches: Sequence[ObservationBatch], *, origin: str) -> list[AddedObservations]:
        """Add observations to existing entities; one an entity holds already is skipped."""
        ...
    def delete_entities(self, names: Sequence[str], *, origin: str) -> list[str]:
        """Delete entities with their observations and relations; the names deleted (missing ones are no error)."""
        ...
    def delete_observations(self, batches: Sequence[ObservationBatch], *, origin: str) -> list[RemovedObservations]:
        """Remove observations by exact text; what each entity lost."""
        ...
    def delete_relations(self, relations: Sequence[RelationInput], *, origin: str) -> list[Relation]:
        """Delete relations; the ones that were there."""
        ...

    def read_graph(self, *, limit: int, offset: int, summary: bool) -> GraphPage:
        """A page of entities by insertion order, with the relations among them (`summary`: no observations)."""
        ...
    def open_entities(self, names: Sequence[str]) -> Graph:
        """The named entities (by name or alias) and the relations touching them."""
        ...
    def entity_names(self, names: Sequence[str]) -> dict[str, tuple[str, ...]]:
        """name_key(name) -> the stored names it reaches: the entity of that name, or else every
        entity listing it among its aliases (oldest first). Names that reach nothing are left out.
        rules/graph.py's `named` turns this into one entity per name."""
        ...
    def export_graph(self, *, order: str = "id") -> Graph:
        """Every entity (insertion or `name` order) and relation, from one snapshot."""
        ...
    def search_entities(self, query: str, *, limit: int, extra: Sequence[tuple[str, float, str]] = (),
                        stop_words: frozenset[str] = frozenset(),
                        names: NameVocabulary | None = None, count_cap: int = 0, pool: int = 0) -> SearchResult:
        """Entities ranked by BM25 over the query's words (less `stop_words`; `names` completes a
        word that begins words of names, and respells one found nowhere), substring matches after
        them, `extra` (name, score 0..1, why) fused in; with `count_cap`, a truncated result's
        total_count counts the matches up to it. `pool`: how many word matches keep their word
        score for the fusion (at least limit + 1), so that `extra` can lift one the words alone
        rank below the page without it losing what its words are worth."""
        ...
    def count_entities(self, query: str, *, cap: int, stop_words: frozenset[str] = frozenset(),
                       names: NameVocabulary | None = None) -> int:
        """How many entities search_entities would find for `query` by words and substrings, up to `cap`."""
        ...
    def name_changes(self, since: int) -> NameChanges:
        """The entities created, retyped or renamed after log position `since`: every entity when
        `since` is -1 or older than the log kept."""
        ...


class MemoryStore(StoreBase, Protocol):
    """Free memories (and observations read as memories), their filters and access counts."""

    def store_memory(self, m: MemoryInput, *, origin: str) -> StoredMemory:
        """Store one memory; `created` False when its owner holds the same text already."""
        ...
    def memories_by_hash(self, content_hash: str) -> list[Memory]:
        """The memories with this content hash (one per owner at most)."""
        ...
    def update_memory(self, memory_id: int, *, content: str | None, tags: Sequence[str] | None,
                      metadata: dict[str, Any] | None, importance: str | None, origin: str) -> Memory:
        """Change what is given (metadata merged), keep the rest; new text waits for a new vector."""
        ...
    def delete_memories(self, ids: Sequence[int], *, origin: str) -> list[Memory]:
        """Delete memories by id; the ones that were there."""
        ...
    def change_memories(self, edits: Sequence[MemoryEdit], new: Sequence[NewMemory], *, origin: str, action: str,
                        detail: dict[str, Any], expect: Sequence[MemoryEdit] = (),
                        preview_id: int | None = None) -> ChangedMemories:
        """A lifecycle change of free memories (edits, deletes, new summaries) in one transaction
        with one journal entry `action` (undoable); CONFLICT with nothing changed if a memory
        differs from the fingerprint its edit expects, or one of `expect` (memories the change
        reads but leaves: a summary's sources) does (rules/lifecycle.py), or if preview
        `preview_id`, marked executed in the same transaction, already was."""
        ...
    def list_memories(self, *, offset: int, limit: int, filters: MemoryFilter, count: bool = True) -> MemoryPage:
        """A page of the memories within `filters`, newest first, with their total (-1 when
        `count` is False: a search filling its page with the newest needs no total)."""
        ...
    def memory_ids(self, filters: MemoryFilter) -> set[int]:
        """Every memory id within `filters` (what a vector search may return)."""
        ...
    def load_memories(self, ids: Sequence[int]) -> dict[int, Memory]:
        """id -> memory for the ids that exist."""
        ...
    def touch_memories(self, ids: Sequence[int]) -> None:
        """Count one retrieval of each id (access_count, last_accessed_at), repeats included."""
        ...


class VectorStore(StoreBase, Protocol):
    """The memories' vectors and the model that made them."""

    def pending_embeddings(self, limit: int) -> list[PendingMemory]:
        """Up to `limit` memories waiting for a vector, in id order."""
        ...
    def pending_count(self) -> int:
        """How many memories wait for a vector."""
        ...
    def save_vectors(self, items: Sequence[tuple[int, str, Any]], model: str) -> SavedVectors:
        """Store (memory id, content hash it was computed from, vector) items made by `model`."""
        ...
    def load_vectors(self) -> MemoryVectors:
        """Every stored memory vector, for an in-process index."""
        ...
    def vectors_version(self) -> int:
        """A counter that moves whenever the stored vectors change (any process)."""
        ...
    def vector_model(self) -> str | None:
        """The model of the library's vectors (None before the first one)."""
        ...
    def reset_vectors(self, model: str, dimension: int) -> int:
        """Forget every vector (the library switches to `model`); how many memories and passages wait."""
        ...
    def embedding_state(self) -> dict[str, Any]:
        """{"model", "dimension", "pending", "tags"}: what health reports of the vectors."""
        ...


class DocumentStore(StoreBase, Protocol):
    """Entities as Markdown documents (front matter and body): read, edit, rename, merge; the manual."""

    def entity_documents(self, names: Sequence[str]) -> dict[str, EntityDocument]:
        """name_key -> document, for the names that exist."""
        ...
    def list_entities(self, pattern: str = "*") -> list[ListedEntity]:
        """The entities whose name matches a glob, case-insensitively, by name."""
        ...
    def find_relations(self, *, to_entity: str | None, relation_type: str | None,
                       from_entity: str | None) -> list[Relation]:
        """Relations by any of their endpoints and type (None: any)."""
        ...
    def check_document(self, doc: EntityDocument, field: str) -> None:
        """Raise if the library schema refuses `doc` (errors name `field`)."""
        ...
    def apply_documents(self, docs: Sequence[EntityDocument], *, origin: str, action: str,
                        create: bool | None = None, detail: dict[str, Any] | None = None) -> list[str]:
        """Make each entity what its document says, in one transaction; the stored names.
        `create`: True refuses names that exist, False names that do not, None takes both."""
        ...
    def edit_document(self, name: str, change: Callable[[str], str], *, origin: str,
                      detail: dict[str, Any], stamp: str | None = None) -> DocumentEdit:
        """Read an entity's document text, `change` it, apply it: one transaction (`stamp` dates it)."""
        ...
    def edit_documents(self, changes: Sequence[tuple[str, Callable[[str], str]]], *, origin: str, action: str,
                       detail: dict[str, Any], absent: Sequence[str] = ()) -> EditedDocuments:
        """Several entities' document texts read, changed and applied in one transaction with one
        journal entry `action` (undoable); CONFLICT with nothing changed if an entity named is gone
        or a name of `absent` now reaches an entity (by name or alias). A `change` that raises
        refuses it all."""
        ...
    def rename_entity(self, old: str, new: str, *, origin: str) -> dict[str, Any]:
        """Rename an entity and rewrite every link to it: {old_name, new_name, links_rewritten_in}."""
        ...
    def merge_entities(self, sources: Sequence[str], target: str, *, origin: str) -> dict[str, Any]:
        """Fold `sources` into `target` (observations, relations, links) and delete them."""
        ...
    def manual_text(self) -> str | None:
        """The library manual (None: there is none yet)."""
        ...
    def edit_manual(self, change: Callable[[str | None], str], *, origin: str, detail: dict[str, Any]) -> str:
        """Read, change and write the manual in one transaction; the new text."""
        ...


class ContextStore(StoreBase, Protocol):
    """The library's hot context: active task, status, next steps."""

    def read_context(self) -> dict[str, Any]:
        """The context as stored ({} before the first update)."""
        ...
    def update_context(self, change: Callable[[dict[str, Any]], dict[str, Any]], *, origin: str) -> dict[str, Any]:
        """Read, `change` and write the context in one transaction; the new context."""
        ...


class Maintenance(StoreBase, Protocol):
    """Upkeep: figures, the journal, durability."""

    def stats(self) -> LibraryStats:
        """Counts and size of the library."""
        ...
    def journal(self, *, limit: int, internal: bool = True) -> list[JournalEntry]:
        """The newest `limit` changes; `internal=False` leaves out rescans and vector resets."""
        ...
    def save_preview(self, kind: str, plan: dict[str, Any]) -> int:
        """Keep a lifecycle preview (JSON data) until it is executed; its id."""
        ...
    def load_preview(self, preview_id: int) -> dict[str, Any] | None:
        """{id, kind, created_at, plan, executed_at, change_id}; None if there is no such preview."""
        ...
    def list_previews(self, *, pending: bool, limit: int) -> list[dict[str, Any]]:
        """The newest previews (`pending`: only those not executed yet), newest first."""
        ...
    def mark_executed(self, preview_id: int, change_id: int) -> bool:
        """Record that journal entry `change_id` executed the preview; False if one already had."""
        ...
    def checkpoint(self) -> None:
        """Make everything written so far durable in the library's main storage (a no-op where it is)."""
        ...


class Store(GraphStore, MemoryStore, VectorStore, DocumentStore, ContextStore, Maintenance, Protocol):
    """One library's storage: everything the service may ask of any engine."""


# -- optional capabilities: test with isinstance(store, X) -------------------------------

# Words: an engine either scores memories by BM25 itself (WordScores: SQLite's FTS5 computes
# the formula of core/bm25.py, PostgreSQL the same formula in SQL) or hands search/ the
# statistics BM25 needs (WordStatistics: PostgreSQL offers these too, the same numbers), so all
# rank alike. Every store offers one of the two; search/ asks for scores when it can.


@runtime_checkable
class WordScores(Protocol):
    """A store whose full-text index scores memories by BM25 as core/bm25.py defines it."""

    def lexical_memory_candidates(self, terms: list[str], grams: list[str], k: int,
                                  filters: MemoryFilter) -> dict[int, float]:
        """The best `k` memory ids within `filters` by words (`terms`, BM25) and CJK runs (`grams`)."""
        ...


@dataclass(frozen=True, slots=True)
class MemoryWordCounts:
    """What BM25 needs to score memories by a query's words (core/bm25.py scores them).

    `documents` and `tokens`: the library's memories and their tokens in all columns;
    `holders[i]`: how many memories hold term i (exact, or for a term in very many
    memories an estimate); `counts[id][i]`: how often term i occurs in each column of memory
    `id` (content, context, labels), for the candidates only; `lengths[id]`: their tokens in
    all columns; `grams`: the candidates found by CJK pieces, with their own score."""

    documents: int
    tokens: int
    holders: tuple[int, ...]
    counts: Mapping[int, Mapping[int, tuple[int, ...]]]
    lengths: Mapping[int, int]
    grams: Mapping[int, float]


@runtime_checkable
class WordStatistics(Protocol):
    """A store that hands search/ the statistics BM25 needs, for core/bm25.py to score."""

    def memory_word_counts(self, terms: list[str], grams: list[str], k: int,
                           filters: MemoryFilter) -> MemoryWordCounts:
        """Candidates within `filters` holding any of `terms` (every holder of a term few memories
        hold, the newest holders of a common one), with their counts; CJK runs' best `k`."""
        ...



@runtime_checkable
class Undoable(Protocol):
    """A store whose journal keeps what each destructive change removed, and can put it back."""

    def undo_change(self, change_id: int, *, origin: str = "undo") -> dict[str, Any]:
        """Revert journal entry `change_id` in one transaction (itself journaled); CONFLICT, with
        what stands in the way and nothing changed, if a later change depends on it."""
        ...


@runtime_checkable
class Passages(Protocol):
    """A store that cuts note bodies into passages for the embedder (the rule: rules/passages.py;
    kept by store/sqlite/passages.py, and postgres/passages.py in pgvector columns)."""

    def refresh_passages(self, limit: int = 64) -> int:
        """Split again up to `limit` bodies changed since their passages were made; how many."""
        ...
    def pending_passages(self, limit: int) -> list[PendingPassage]:
        """Up to `limit` passages waiting for a vector, in id order."""
        ...
    def save_passage_vectors(self, items: Sequence[tuple[int, str, Any]], model: str) -> SavedVectors:
        """Store (passage id, text hash it was computed from, vector) items made by `model`."""
        ...
    def load_passage_vectors(self) -> PassageVectors:
        """Every embedded passage, for an in-process index."""
        ...
    def passages_version(self) -> int:
        """A counter that moves whenever passages or their vectors change."""
        ...
    def passage_pending_count(self) -> int:
        """Passages waiting for a vector, plus bodies waiting to be split."""
        ...
    def entity_names_by_id(self, ids: Sequence[int]) -> dict[int, str]:
        """entity id -> name, for the passages' owners that exist."""
        ...


@runtime_checkable
class GraphBatches(Protocol):
    """A store that writes a batch of entities and the relations going out of them in one
    transaction (a Markdown library: each entity file is written once per import, not once
    for the entity and again for its relations)."""

    def create_graph(self, entities: Sequence[EntityInput], relations: Sequence[RelationInput], *, origin: str,
                     paths: Mapping[str, str] | None = None) -> GraphBatch:
        """Create or merge `entities` (as create_entities does) and `relations`, whose sources are
        among them or in the library; a relation whose target comes in a later batch waits for
        it. Relations `deferred` are for the caller to create once every entity exists (a schema
        that relates existing entities only defers them all). `paths`: where the file of an entity
        created here goes, by name_key (a source's own path, `people/anna.md`), where files are kept."""
        ...


@runtime_checkable
class Portable(Protocol):
    """A store that exports and imports everything it holds, timestamps included, and keeps
    note of its backups."""

    def free_memories(self) -> list[Memory]:
        """Every free memory (no entity), oldest first: what an export writes."""
        ...
    def import_memories(self, items: Sequence[Any], *, origin: str) -> ImportedMemories:
        """Free memories with their own timestamps (MemoryLine-like items)."""
        ...
    def restore_dates(self, entities: Mapping[str, tuple[str, str, Sequence[str], Sequence[str]]],
                      relations: Mapping[tuple[str, str, str], str], *, origin: str) -> None:
        """Give entities (name_key -> created, updated, observations, their dates) and relations
        ((from key, type, to key) -> created) the times a file says they have."""
        ...
    # backups (service/backup.py): when the last one was made, whether there is data a restore would replace
    def note_backup(self, at: str, path: str) -> None:
        """Remember the last successful backup (health reports it)."""
        ...
    def last_backup(self) -> dict[str, str] | None:
        """{"at", "path"} of the last backup (None: never)."""
        ...
    def holds_data(self) -> int:
        """How many entities, memories and relations the library holds."""
        ...
    def note_event(self, action: str, detail: dict[str, Any], *, vectors_floor: int = 0) -> None:
        """Journal a change made outside the tools (a restore); vectors_version ends above `vectors_floor`."""
        ...


@runtime_checkable
class MemoryCopies(Protocol):
    """A store that takes every memory of a library in one transaction, as the source holds
    them (service/migrate.py): far faster than a write per memory on a database server."""

    def copy_memories(self, memories: Sequence[Memory], vectors: Mapping[int, Any], model: str | None,
                      *, origin: str, on_batch: Callable[[int], None] | None = None) -> int:
        """Copy `memories` (observations included, their entities already here; dates, use
        counts and fields as given, in this order) and their vectors (source memory id ->
        vector of `model`) into a library holding no memories; returns how many."""
        ...


@runtime_checkable
class Migratable(Protocol):
    """A store `memloci migrate` can fill exactly (service/migrate.py, store/migratable.py): the parts
    the tools have no call for, set as another library holds them."""

    def restore_memory_state(self, items: Sequence[tuple[int, str, str, int, str | None]]) -> None:
        """Set (memory id, created_at, updated_at, access_count, last_accessed_at) as given, in one
        transaction, journaling nothing (the journal is copied as it was)."""
        ...
    def replace_journal(self, entries: Sequence[JournalEntry]) -> None:
        """The journal becomes `entries`, oldest first, with their ids, times, tools, actions,
        names and details, in one transaction."""
        ...
    def finish_copy(self) -> None:
        """The copy is complete: bring what the engine derives from its data in line with it (a
        Markdown library redraws its day files, whose memories took their dates after them)."""
        ...


@runtime_checkable
class FolderLibrary(Protocol):
    """A library kept as a folder of files with an index beside them (store/markdown/engine.py): the files
    are the truth, edited by people too, rescanned and watched."""

    root: Any  # the folder (a Path)

    def files_frozen(self) -> AbstractContextManager[None]:
        """A context manager holding the library's write lock: nothing changes the folder or index."""
        ...
    def replace_files(self, put: dict[str, bytes], remove: list[str]) -> None:
        """Write and remove files (relative paths) as one all-or-nothing change."""
        ...
    def sync(self) -> Any:
        """Take in what changed in the folder since the last scan; a SyncReport."""
        ...
    def rebuild_index(self) -> Any:
        """Build the index again from the files alone; a SyncReport."""
        ...
    def reload_journal(self) -> int:
        """Read the journal file back into the index; how many entries."""
        ...
    def start_watching(self, interval: float = ...) -> None:
        """Rescan the folder every `interval` seconds on a daemon thread, until close()."""
        ...
    def problems(self) -> dict[str, str]:
        """Files that could not be indexed (relative path -> why)."""
        ...
    def entity_listing(self) -> list[ListedEntity]:
        """Every entity with its file's path, by name (list_entities matches a glob against both)."""
        ...
    def entity_file_text(self, name: str) -> str | None:
        """The entity's file as it is on disk (None if it has none yet)."""
        ...


@runtime_checkable
class ChangeNotices(Protocol):
    """A library that hears of every write to it, other servers' included (postgres: LISTEN/NOTIFY),
    so what a process keeps from it in memory is read again only when something changed."""

    def change_mark(self) -> int | None:
        """A number that moves whenever the library may have changed; None while nothing can be
        known without asking the database (no connection listens)."""
        ...


@runtime_checkable
class ServerEngine(Protocol):
    """A library kept on a database server (postgres): its health is the server's, not a disk's."""

    def engine_health(self) -> dict[str, Any]:
        """The engine, its server's version and its extensions', the connection pool's figures."""
        ...

    def outage(self) -> str | None:
        """Why the server cannot be reached, as this process's last call found it (password
        masked), without asking the server; None while it answers."""
        ...


@dataclass(frozen=True, slots=True)
class EditedDocuments:
    """What edit_documents did: each entity's edit, in the order given, and its journal entry
    (None: no document changed, nothing was journaled)."""

    edits: tuple[DocumentEdit, ...]
    change_id: int | None


@dataclass(frozen=True, slots=True)
class VectorCandidates:
    """What a vector search found: memory id -> similarity (its own, lifted by its thread
    neighbours'), and the lowest and highest similarity over the memories searched (the
    retriever scales by them)."""

    scores: dict[int, float]
    low: float
    high: float


@runtime_checkable
class VectorSearch(Protocol):
    """A store that searches its own vectors (the postgres engine: pgvector, the filter in the
    same SQL query); the others are searched by the in-process VectorIndex below."""

    def vector_candidates(self, query: Any, k: int, filters: MemoryFilter, *, model: str | None = None,
                          also: Sequence[int] = ()) -> VectorCandidates:
        """The best `k` memories within `filters` by cosine similarity to `query`, plus the
        `also` ids'; nothing if the library's vectors are not of `model`."""
        ...
