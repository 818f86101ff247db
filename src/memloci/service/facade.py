"""Every memloci operation, once. MCP tools, the CLI and benchmarks all call this API.

Plain synchronous Python: validation (schema.py), the library by name or project (stores.py),
then one store call. Transports run it off their event loop.

MemoryService is one facade over parts it holds: the graph, memories and search are its own;
documents (documents.py), projects (projects.py) and history (history.py) are parts it
delegates to; the vector indexes, embedding workers and access recorder are a part of their
own (vectors.py). Every write path goes through `Stores.writing`, whose exit is the one
post-write hook.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from memloci.app.projects import ProjectRef
from memloci.app.registry import LibraryRegistry
from memloci.core import schema
from memloci.core.errors import ConflictError, InternalError, MemlociError, NotFoundError, ValidationError
from memloci.core.model import (
    AddedObservations,
    CreatedEntity,
    EntityInput,
    Graph,
    GraphPage,
    JournalEntry,
    LibraryStats,
    Memory,
    MemoryFilter,
    MemoryInput,
    ObservationBatch,
    Relation,
    RelationInput,
    RemovedObservations,
    SearchHit,
    SearchResult,
    name_key,
)
from memloci.core.writable import write_problem
from memloci.formats.official import OfficialFile
from memloci.rules import graph as rules
from memloci.rules.graph import RelationsCreated, graph_violations
from memloci.search.embedder import Embedder, EmbedderHandle, understands
from memloci.search.entities import OBSERVATION_WEIGHT, count_entities, find_entities, meaning_signals
from memloci.search.hybrid import CJK_PAIRS, WEAK_MEANING, MemoryHit, retrieve, word_terms
from memloci.search.timephrases import TimeRange, parse_time_phrase, split_time_phrase
from memloci.search.vectors import VectorSearch
from memloci.service.documents import DocumentOperations, NewEntityDocument
from memloci.service.history import HistoryOperations
from memloci.service.projects import EXPORT_TITLE, ProjectOperations
from memloci.service.stores import Stores
from memloci.service.vectors import LibraryVectors
from memloci.store.protocols import FolderLibrary, GraphBatches, Passages, ServerEngine, Store

DEFAULT_GRAPH_LIMIT = 100  # a page that fits a model's context (1,000 entities were ~245 KB)
DEFAULT_SEARCH_LIMIT = 25
IMPORT_CHUNK = 1_000
BODY_WEIGHT = OBSERVATION_WEIGHT  # a note's own text means as much as an observation of it
RECENT_WAIT_S = 10.0  # how long a search waits for memories stored a moment ago to be embedded ...
RECENT_BACKLOG = 2_000  # ... if no more than this many wait (a bulk backlog is searched as it stands)


@dataclass(slots=True)
class ImportReport:
    entities_created: int = 0
    entities_merged: int = 0
    observations_added: int = 0
    relations_created: int = 0
    relations_existing: int = 0
    skipped_relations: list[tuple[int, str]] = field(default_factory=list)  # (line, reason)


@dataclass(frozen=True, slots=True)
class Retrieval:
    hits: list[MemoryHit]
    query: str
    time_range: TimeRange | None
    # a time range was asked for and nothing in it matched the words or meaning of the query:
    # the hits are the range's newest memories
    unmatched: bool = False
    note: str | None = None  # what the reply says about the hits: none matched, the range is empty, ...


class MemoryService:
    def __init__(self, libraries: LibraryRegistry, embedder: EmbedderHandle | None = None,
                 *, embed_pending: bool = True):
        """`embed_pending=False` (read-only commands) searches the stored vectors but never
        computes or writes new ones."""
        self.libraries = libraries
        self.embedder = embedder if embedder is not None else EmbedderHandle("none")
        self.vectors = LibraryVectors(self.embedder, embed_pending=embed_pending)
        self.stores = Stores(libraries, self.vectors, self._project_opened)
        self.documents = DocumentOperations(self.stores)
        self.recovery = HistoryOperations(self.stores, self.import_graph)
        self.projects = ProjectOperations(self.stores, read_graph=self.read_graph, add_observations=self.add_observations,
                                          import_everything=self.recovery.import_everything)

    def _project_opened(self, store: Store, folder: Path, project: ProjectRef) -> None:
        self.projects.carry_over_n2n(store, folder, project)

    def store(self, library: str | ProjectRef | None = None) -> Store:
        return self.stores.store(library)

    def watch_libraries(self) -> None:
        """Markdown libraries index in the background, then rescan their folders every second."""
        self.libraries.watch()

    def close(self) -> None:
        """Finish background work (model load, embedding batch, access counts), then close the libraries."""
        self.vectors.close()
        self.libraries.close()

    def flush_embeddings(self, *, library: str | ProjectRef | None = None, timeout: float = 300.0) -> bool:
        """Wait until every memory and note passage of the library has its vector."""
        return self.vectors.flush(self.store(library), timeout)

    # -- the official graph tools ------------------------------------------------------

    def create_entities(self, entities: Sequence[EntityInput], *, library: str | ProjectRef | None = None,
                        origin: str = "create_entities") -> list[CreatedEntity]:
        clean = schema.validate_entities(entities)
        with self.stores.writing(library) as store:
            for i, e in enumerate(clean):
                store.schema.check_entity(e, f"entities[{i}]")
            return store.create_entities(clean, origin=origin)

    def create_relations(self, relations: Sequence[RelationInput], *, library: str | ProjectRef | None = None,
                         origin: str = "create_relations") -> RelationsCreated:
        """The relations created, and those already there (unpacks as `created, existing`)."""
        clean = schema.validate_relations(relations)
        with self.stores.writing(library) as store:
            for i, r in enumerate(clean):
                store.schema.check_relation(r, f"relations[{i}]")
            return store.create_relations(clean, origin=origin)  # a missing end is named by its field (rules.py)

    def add_observations(self, batches: Sequence[ObservationBatch], *, library: str | ProjectRef | None = None,
                         origin: str = "add_observations") -> list[AddedObservations]:
        clean = schema.validate_observation_batches(batches, "observations", "contents")
        with self.stores.writing(library) as store:
            for i, b in enumerate(clean):
                for j, o in enumerate(b.contents):
                    store.schema.check_observation(o, f"observations[{i}].contents[{j}]")
                rules.check_distinct(store.schema, b.contents, f"observations[{i}].contents")
            return store.add_observations(clean, origin=origin)

    def delete_entities(self, names: Sequence[str], *, library: str | ProjectRef | None = None,
                        origin: str = "delete_entities") -> list[str]:
        clean = schema.validate_names(names, "entityNames")
        with self.stores.writing(library) as store:
            return store.delete_entities(clean, origin=origin)

    def delete_observations(self, batches: Sequence[ObservationBatch], *, library: str | ProjectRef | None = None,
                            origin: str = "delete_observations") -> list[RemovedObservations]:
        clean = schema.validate_observation_batches(batches, "deletions", "observations")
        with self.stores.writing(library) as store:
            return store.delete_observations(clean, origin=origin)

    def delete_relations(self, relations: Sequence[RelationInput], *, library: str | ProjectRef | None = None,
                         origin: str = "delete_relations") -> list[Relation]:
        clean = schema.validate_relations(relations)
        with self.stores.writing(library) as store:
            return store.delete_relations(clean, origin=origin)

    def read_graph(self, *, limit: int | None = None, offset: int = 0, summary: bool = False,
                   library: str | ProjectRef | None = None) -> GraphPage:
        limit = DEFAULT_GRAPH_LIMIT if limit is None else schema.check_int(limit, "limit", 1, schema.PAGE_MAX)
        offset = schema.check_int(offset, "offset", 0, schema.OFFSET_MAX)
        return self.store(library).read_graph(limit=limit, offset=offset, summary=summary)

    def search_nodes(self, query: str, *, limit: int | None = None, offset: int = 0,
                     library: str | ProjectRef | None = None) -> SearchResult:
        """One page of the entities matching `query`, with the total count (up to SEARCH_LIMIT_MAX).
        An empty query lists the graph a page at a time, as the official server lists everything."""
        text = schema.validate_query(query)
        limit = DEFAULT_SEARCH_LIMIT if limit is None else schema.check_int(limit, "limit", 1, schema.SEARCH_LIMIT_MAX)
        offset = schema.check_int(offset, "offset", 0, schema.SEARCH_LIMIT_MAX - 1)
        store = self.store(library)
        if not text:
            page = store.read_graph(limit=limit, offset=offset, summary=False)
            return SearchResult(tuple(SearchHit(e, 0.0, 0, "empty query: every entity") for e in page.entities),
                                page.relations, page.is_truncated, page.total_entity_count, offset)
        if offset == 0:
            found = self._search_nodes(store, text, limit)
        else:  # the page after `offset` of one ranking, so pages never overlap
            found = self._search_nodes(store, text, min(offset + limit, schema.SEARCH_LIMIT_MAX))
        total = len(found.hits)
        if found.is_truncated:  # every match (up to the cap), counted without loading them
            counted = found.total_count if found.total_count is not None else count_entities(store, text, schema.SEARCH_LIMIT_MAX)
            total = max(counted, offset + len(found.hits[offset:]) + 1)
        hits = found.hits[offset:offset + limit]
        names = {h.entity.name for h in hits}
        relations = tuple(r for r in found.relations if r.from_entity in names or r.to_entity in names)
        return SearchResult(hits, relations, offset + len(hits) < total, total, offset)

    def _search_nodes(self, store: Store, text: str, limit: int) -> SearchResult:
        def signals() -> list[tuple[str, float, str]]:
            # Only when the words leave room: entities whose type is a near miss, then those whose
            # observations or bodies mean what the query says (embedding the query costs time).
            pair = self.vectors.of(store)  # observations embedded so far; a search never waits for a backlog
            loaded = self.embedder.get(timeout=0) if pair else None
            # embedded once; not at all if the model cannot read the query
            embedder = _QueryEmbedding(loaded) if loaded is not None and understands(loaded, text) else None
            extra = meaning_signals(store, text, pair[0] if pair else None, embedder)
            return extra + self.vectors.body_signals(store, text, embedder, BODY_WEIGHT)

        # Where note bodies carry meaning, it ranks with the words, not only after them: words
        # alone fill a page for nearly any question asked in a sentence.
        return find_entities(store, text, limit, signals=signals, fuse=self.vectors.bodies_embedded(store))

    def open_nodes(self, names: Sequence[str], *, library: str | ProjectRef | None = None) -> Graph:
        clean = schema.validate_names(names, "names")
        return self.store(library).open_entities(clean)

    # -- free memories (the MCP Memory Service API) -------------------------------------

    def store_memory(self, content: str, *, tags: Sequence[str] = (), memory_type: str = "note",
                     metadata: dict[str, Any] | None = None, importance: str | None = None,
                     entity: str | None = None, library: str | ProjectRef | None = None) -> tuple[Memory, bool]:
        """Store a memory; (the existing one, False) when the same text is already stored."""
        m = schema.validate_memory(MemoryInput(content, tuple(tags), memory_type, metadata or {},
                                               importance or "medium", entity))
        with self.stores.writing(library) as store:
            if m.entity:
                store.schema.check_observation(m.content, "content")
            stored = store.store_memory(m, origin="store_memory")
        memory, created = stored.memory, stored.created
        if not created and m.entity and store.schema.unique_observations:
            raise rules.repeated_observation(store.schema, memory.content, memory.entity or m.entity, "content")
        return memory, created

    def retrieve_memory(self, query: str, *, n_results: int = 5, min_similarity: float = 0.0,
                        tags: Sequence[str] = (), match_all: bool = False, memory_type: str | None = None,
                        entity: str | None = None, after: str | None = None, before: str | None = None,
                        time: str | None = None, library: str | ProjectRef | None = None) -> Retrieval:
        """The best memories for `query`.

        Filters (`time`, `after`, `before`, `tags`, `memory_type`, `entity`) are hard: the query
        ranks within them, and words that match nothing never empty them. With no word match
        and no more than a faint meaning inside, the filtered memories come newest first, and
        the reply's note says so; an empty filter says that too.

        A time phrase inside the query ("last week", 先週) is soft: it ranks its range first and
        its words are neither searched for nor embedded (昨日の決定 is searched as 決定), as long
        as it separates the library (some memories inside, some outside). A phrase whose range
        holds every memory (a conversation imported at once) may be about what the memories say,
        so its words are kept; one whose range holds none is only words. When nothing inside the
        range matches, memories outside it that match the query's words come before the range's
        newest ("bugs two weeks ago" shows the bugs of other days rather than hiding them);
        meaning alone does not push the range aside. A query that is only a phrase (and stop
        words: "what did we work on last week") lists the range newest first.

        With `time` given too, `time` is the range (and the one reported); a relative phrase in
        the query then only loses its words, it ranks nothing within the range."""
        text = schema.validate_query(query)
        n_results = schema.check_int(n_results, "n_results", 1, schema.SEARCH_LIMIT_MAX)
        after, before = schema.validate_time(after, "after"), schema.validate_time(before, "before")
        hard = parse_time_phrase(time) if time is not None else None
        if hard is not None:
            hard_after, hard_before = hard.iso()
            after, before = max(filter(None, [after, hard_after]), default=None), min(filter(None, [before, hard_before]), default=None)
        filters = schema.validate_filter(MemoryFilter(tuple(tags), match_all, memory_type, entity, after, before))
        if filters.after and filters.before and filters.after >= filters.before:
            raise ValidationError(f"after/before: after ({filters.after}) must be earlier than before ({filters.before})")
        store = self.store(library)
        rest, soft = split_time_phrase(text)
        keywords = None  # the text words and meaning come from, when not the whole query
        everything = False  # the query's time range holds every memory the filters allow
        inside: MemoryFilter | None = None  # the query's time range within the filters
        if soft is not None and soft.latest:
            keywords = rest
        elif soft is not None and hard is not None:  # `time` is the range; the phrase is only not searched for
            keywords = None if soft.absolute else rest
            soft = None
        elif soft is not None:
            inside = _narrowed(filters, soft)
            counted = store.list_memories(offset=0, limit=0, filters=inside).total if inside is not None else 0
            everything = counted > 0 and counted == store.list_memories(offset=0, limit=0, filters=filters).total
            if counted == 0:
                soft, inside = None, None  # "what did Melanie do last week" in memories stored all at once
            elif not (everything or soft.absolute):  # "in May" may be what a memory says; "last week" is not
                keywords = rest
        latest = (hard is not None and hard.latest) or (soft is not None and soft.latest)
        filtered = hard is not None or not filters.empty
        shown = hard or soft  # the range the reply reports
        matched = 0
        outside = 0  # hits from outside the query's range put before its newest
        if not text.strip() or (keywords is not None and not _has_words(keywords)):
            if not (latest or filtered or inside is not None):
                raise ValidationError("query: must not be empty", hint="Say what to look for, or use list_memories.")
            listed = store.list_memories(offset=0, limit=n_results, filters=inside or filters, count=False).memories
            hits = [MemoryHit(m, 1.0, "newest" if latest else "in range") for m in listed]
            matched = len(hits)
        else:
            pair = self.vectors.of(store)
            embedder = self.embedder.get(timeout=0) if pair else None
            # memories stored a moment ago (here or by another process) are found by meaning too;
            # with none waiting the worker is not woken, which would read the store for nothing
            if pair and self.vectors.embed_pending and 0 < store.pending_count() <= RECENT_BACKLOG:
                pair[1].flush(timeout=RECENT_WAIT_S, memories_only=True)

            def ranked(where: MemoryFilter, time_range: TimeRange | None, n: int) -> list[MemoryHit]:
                return retrieve(store, pair[0] if pair else None, embedder, text, n, _untimed(store, where),
                                time_range, min_similarity, keywords=keywords, meaning_text=keywords)

            fill = min_similarity <= 0  # a memory that matched nothing has no similarity to keep
            if inside is not None:  # the query's range first, then what matches outside it
                hits = _matches(ranked(inside, soft, n_results))
                matched = len(hits)
                others: list[MemoryHit] | None = None  # the best outside the range, searched only when needed
                if not matched and not everything:  # nothing in the range matches: word matches elsewhere beat its newest
                    others = ranked(filters, None, 2 * n_results)
                    hits = [h for h in others if h.words > 0][:n_results]
                    outside = len(hits)
                if fill:
                    hits += _newest(store, inside, n_results - len(hits), hits)
                if len(hits) < n_results and not everything:
                    seen = {h.memory.id for h in hits}
                    others = others if others is not None else ranked(filters, None, 2 * n_results)
                    hits += [h for h in others if h.memory.id not in seen][: n_results - len(hits)]
            else:  # (a phrase left here is "latest": the best hits, newest first)
                hits = ranked(filters, soft or hard, n_results)
                if filtered:
                    hits = _matches(hits)
                matched = len(hits)
                if filtered and fill:
                    hits += _newest(store, filters, n_results - len(hits), hits)
        unmatched = (filtered or inside is not None) and matched == 0 and len(hits) > outside
        note = None
        if not hits and (filtered or inside is not None):
            note = f"No memories {_scope(shown, filters)}."
        elif unmatched and outside:
            note = (f"Nothing among the memories {_scope(soft, filters)} matched the query by words or meaning; "
                    f"the first {outside} hit(s) match its words outside that range, the rest are the range's "
                    "newest memories.")
        elif unmatched:
            note = (f"Nothing among the memories {_scope(shown, filters)} matched the query by words or meaning; "
                    "these are their newest memories.")
        self.vectors.accesses.record(store, [h.memory.id for h in hits])
        return Retrieval(hits, query, shown, unmatched, note)

    def search_by_tag(self, tags: Sequence[str], *, match_all: bool = False, limit: int = 100,
                      library: str | ProjectRef | None = None) -> list[Memory]:
        return self.search_by_tag_page(tags, match_all=match_all, limit=limit, library=library)[0]

    def search_by_tag_page(self, tags: Sequence[str], *, match_all: bool = False, limit: int = 100,
                           offset: int = 0, library: str | ProjectRef | None = None) -> tuple[list[Memory], int]:
        """One page of the memories carrying the tags, newest first, and how many there are in all."""
        clean = schema.validate_tags(tags, "tags", allow_empty=False)
        limit = schema.check_int(limit, "limit", 1, schema.PAGE_MAX)
        offset = schema.check_int(offset, "offset", 0, schema.OFFSET_MAX)
        page = self.store(library).list_memories(offset=offset, limit=limit, filters=MemoryFilter(tuple(clean), match_all))
        return list(page.memories), page.total

    def _one_memory(self, store: Store, content_hash: str) -> Memory:
        content_hash = schema.clean_label(content_hash, "content_hash", 64)
        found = store.memories_by_hash(content_hash)
        if not found:
            raise NotFoundError(f"content_hash: no memory has hash {content_hash}",
                                hint="Find the memory with retrieve_memory or list_memories; they return content_hash.")
        if len(found) > 1:  # hashes are unique per memory; two means a library from before that rule
            raise ConflictError(f"content_hash: {len(found)} memories share hash {content_hash}",
                                hint="Delete or edit them with delete_observations / add_observations.")
        return found[0]

    def delete_memory(self, content_hash: str, *, library: str | ProjectRef | None = None) -> list[Memory]:
        """Delete the memory with this hash (the free one if an observation has the same text);
        an unknown hash deletes nothing (idempotent)."""
        with self.stores.writing(library) as store:
            try:
                memory = self._one_memory(store, content_hash)
            except NotFoundError:
                return []
            return store.delete_memories([memory.id], origin="delete_memory")

    def update_memory(self, content_hash: str, *, content: str | None = None, tags: Sequence[str] | None = None,
                      metadata: dict[str, Any] | None = None, importance: str | None = None,
                      library: str | ProjectRef | None = None) -> Memory:
        if content is None and tags is None and metadata is None and importance is None:
            raise ValidationError("update_memory: give at least one of content, tags, metadata, importance")
        with self.stores.writing(library) as store:
            return self._update_memory(store, content_hash, content, tags, metadata, importance)

    def _update_memory(self, store: Store, content_hash: str, content: str | None, tags: Sequence[str] | None,
                       metadata: dict[str, Any] | None, importance: str | None) -> Memory:
        memory = self._one_memory(store, content_hash)
        if content is not None:
            content = schema.clean_text(content, "content", schema.MEMORY_MAX)
            if memory.entity:  # an observation keeps the observation rules
                store.schema.check_observation(content, "content")
        if tags is not None:
            tags = schema.validate_tags(tags, "tags")
        if metadata is not None:
            metadata = schema.validate_metadata(metadata, "metadata")
        if importance is not None:
            importance = schema.validate_importance(importance)
        return store.update_memory(memory.id, content=content, tags=tags, metadata=metadata,
                                   importance=importance, origin="update_memory")

    def list_memories(self, *, page: int = 1, page_size: int = 10, filters: MemoryFilter | None = None,
                      library: str | ProjectRef | None = None, time: str | None = None) -> tuple[list[Memory], int]:
        """One page of memories, newest first; `time` ("last week", 昨日) narrows `filters` as
        retrieve_memory's does."""
        page = schema.check_int(page, "page", 1, schema.OFFSET_MAX)
        page_size = schema.check_int(page_size, "page_size", 1, schema.PAGE_MAX)
        filters = schema.validate_filter(filters or MemoryFilter())
        if time is not None:
            narrowed = _narrowed(filters, parse_time_phrase(time))
            if narrowed is None:  # the range and after/before do not overlap: nothing to list
                return [], 0
            filters = narrowed
        found = self.store(library).list_memories(offset=(page - 1) * page_size, limit=page_size, filters=filters)
        return list(found.memories), found.total

    def health(self, *, library: str | ProjectRef | None = None) -> dict[str, Any]:
        try:
            store = self.store(library)
            stats = store.stats()
            state = store.embedding_state()
        except MemlociError as exc:
            unreachable = self._unreachable_health(library, exc)
            if unreachable is None:
                raise
            return unreachable
        status = self.embedder.status()
        pair = self.vectors.known(store)
        worker_error = pair[1].error if pair else None
        mismatch = bool(status.model and state["model"] and state["model"] != status.model)
        server = isinstance(store, ServerEngine)  # a database server's disk is not ours to check
        unwritable = None if server else write_problem(stats.path)  # writes would fail now: say so while it lasts
        problems = [p for p in (f"writes fail: {unwritable}" if unwritable else None, status.error, worker_error,
                                f"library vectors are from {state['model']}; run `memloci reindex`" if mismatch else None) if p]
        # Memories waiting for a vector drain only while an embedder works; otherwise the count would never move.
        pending = state["pending"] if status.state in ("loaded", "loading") else None
        return {
            "status": "healthy" if not problems else "degraded",
            "backend": store.kind,
            "library": store.name,
            **({"engine": store.engine_health()} if isinstance(store, ServerEngine) else {}),
            "statistics": {
                "total_memories": stats.memories + stats.observations,
                "free_memories": stats.memories,
                "observations": stats.observations,
                "total_tags": state["tags"],
                "storage_size": stats.size_bytes,
                "last_backup": self.recovery.last_backup(store),
            },
            "embedder": {
                "model": status.model, "dimension": status.dimension, "loaded": status.loaded,
                "configured": status.spec, "state": status.state, "error": status.error,
                "library_model": state["model"], **({"pending": pending} if pending is not None else {}),
                "search": "hybrid" if status.loaded and not mismatch else "lexical",
            },
            "problems": problems,
        }

    def _unreachable_health(self, library: str | ProjectRef | None, exc: MemlociError) -> dict[str, Any] | None:
        """Health of a database-server library that cannot be opened or read (the server down,
        a login refused, the database missing): `unhealthy` with the reason, since saying so is
        health's job. None for any other library, whose failure stays the call's error."""
        if isinstance(library, ProjectRef):
            return None
        try:
            store = next(s for s in self.libraries.all()
                         if library is None and len(self.libraries.all()) == 1
                         or isinstance(library, str) and s.name.casefold() == library.casefold())
        except StopIteration:
            return None
        if not isinstance(store, ServerEngine):
            return None
        status = self.embedder.status()
        return {
            "status": "unhealthy",
            "backend": store.kind,
            "library": store.name,
            "statistics": {},
            "embedder": {"model": status.model, "dimension": status.dimension, "loaded": status.loaded,
                         "configured": status.spec, "state": status.state, "error": status.error,
                         "library_model": None, "search": "unavailable"},
            "problems": [exc.message],
            **exc.to_dict(),
        }

    def reindex(self, *, library: str | ProjectRef | None = None, progress: Callable[[int, int], None] | None = None,
                files: Callable[[Any], None] | None = None) -> int:
        """Re-embed every memory of the library with the current embedder; returns how many.
        A Markdown library's index is first rebuilt from its files (`files` gets that SyncReport)."""
        store = self.store(library)
        if isinstance(store, FolderLibrary):  # a Markdown library: the files first, then the vectors
            report = store.rebuild_index()
            if files is not None:
                files(report)
            if not self.embedder.enabled:
                return 0
        embedder = self.embedder.get(timeout=None)
        if embedder is None:
            raise ValidationError(f"embedder: '{self.embedder.spec}' is not available: {self.embedder.status().error}",
                                  hint="Set MEMLOCI_EMBEDDER to a working embedder (minilm, onnx:DIR, openai:URL#MODEL).")
        total = store.reset_vectors(embedder.model_id, embedder.dimension)
        pair = self.vectors.of(store)
        assert pair is not None  # the embedder has loaded (above)
        pair[1].error = None  # an error from before the reset (say, the model mismatch) is moot now
        pair[1].start()
        pair[1].poke()
        while (pending := store.pending_count() + (store.passage_pending_count() if isinstance(store, Passages) else 0)) > 0:
            if progress:
                progress(total - pending, total)
            pair[1].flush(timeout=1.0)
            if pair[1].error:
                raise InternalError(f"reindex stopped with {pending} memories left: {pair[1].error}",
                                    hint="Fix the embedder and run memloci reindex again; nothing is lost.")
        if progress:
            progress(total, total)
        return total

    # -- bulk, inspection --------------------------------------------------------------

    def import_graph(self, entities: Sequence[tuple[int, EntityInput]], relations: Sequence[tuple[int, RelationInput]],
                     *, library: str | ProjectRef | None = None, progress: Callable[[int], None] | None = None,
                     where: Callable[[str, int], str] | None = None) -> ImportReport:
        """Load a whole graph (e.g. the official server's memory.jsonl).

        Every item is validated first (errors name the source line), so a bad file changes
        nothing. Writes go in chunks of IMPORT_CHUNK, each its own transaction, so other
        writers are never locked out for the whole import. Relations whose endpoints exist
        neither in the file nor in the library are skipped and reported.
        """
        clean_entities, writable, skipped = self.plan_graph_import(entities, relations, library=library, where=where)
        with self.stores.writing(library) as store:
            return self._write_graph(store, clean_entities, writable, ImportReport(skipped_relations=skipped), progress)

    def _write_graph(self, store: Store, clean_entities: list[EntityInput], writable: list[RelationInput],
                     report: ImportReport, progress: Callable[[int], None] | None) -> ImportReport:
        """import_graph's writes, a chunk (one transaction) at a time."""
        if isinstance(store, GraphBatches):
            return self._import_batches(store, clean_entities, writable, report, progress)
        for i in range(0, len(clean_entities), IMPORT_CHUNK):
            chunk = clean_entities[i : i + IMPORT_CHUNK]
            results = store.create_entities(chunk, origin="import")
            report.entities_merged += len(chunk) - len(results)  # same name twice in the file
            for created in results:
                if created.status == "created":
                    report.entities_created += 1
                else:
                    report.entities_merged += 1
                report.observations_added += len(created.observations)
            if progress:
                progress(len(chunk))
        if progress and report.skipped_relations:
            progress(len(report.skipped_relations))
        return _import_relations(store, writable, report, progress)

    @staticmethod
    def _import_batches(store: Store, entities: list[EntityInput], relations: list[RelationInput],
                        report: ImportReport, progress: Callable[[int], None] | None) -> ImportReport:
        """import_graph for a store that writes entities with their outgoing relations: each
        batch of IMPORT_CHUNK entities goes with the relations going out of them (one file write
        per entity in a Markdown library); relations from entities already in the library, and
        those the store defers, follow once every entity exists."""
        assert isinstance(store, GraphBatches)  # import_graph sends only such stores here
        outgoing: dict[str, list[RelationInput]] = {}
        for r in relations:
            outgoing.setdefault(name_key(r.from_entity), []).append(r)
        imported = {name_key(e.name) for e in entities}
        later = [r for r in relations if name_key(r.from_entity) not in imported]
        for i in range(0, len(entities), IMPORT_CHUNK):
            chunk = entities[i : i + IMPORT_CHUNK]
            going = [r for e in chunk for r in outgoing.pop(name_key(e.name), [])]
            batch = store.create_graph(chunk, going, origin="import")
            report.entities_merged += len(chunk) - len(batch.entities)  # same name twice in the file
            for entity in batch.entities:
                if entity.status == "created":
                    report.entities_created += 1
                else:
                    report.entities_merged += 1
                report.observations_added += len(entity.observations)
            report.relations_created += len(batch.created)
            report.relations_existing += len(batch.existing)
            later += batch.deferred
            if progress:
                progress(len(chunk) + len(going) - len(batch.deferred))
        if progress and report.skipped_relations:
            progress(len(report.skipped_relations))
        return _import_relations(store, later, report, progress)

    def plan_graph_import(self, entities: Sequence[tuple[int, EntityInput]],
                          relations: Sequence[tuple[int, RelationInput]], *, library: str | ProjectRef | None = None,
                          where: Callable[[str, int], str] | None = None
                          ) -> tuple[list[EntityInput], list[RelationInput], list[tuple[int, str]]]:
        """The checks of import_graph, writing nothing, so `--dry-run` and the import itself
        agree: (the entities, the relations it would write, the relations it would skip as
        (line, reason)). A relation is skipped when an endpoint is neither in the source nor in
        the library; an entity or relation breaking a rule refuses the whole import. `where(kind,
        number)` names an item in messages (OfficialFile.where); by default `line N`."""
        where = where or (lambda kind, number: f"line {number}")
        clean_entities = [schema.validate_entity(e, where("entity", line)) for line, e in entities]
        clean_relations = [(line, schema.validate_relation(r, where("relation", line))) for line, r in relations]
        store = self.store(library)
        for (line, _), e in zip(entities, clean_entities):
            store.schema.check_entity(e, where("entity", line))
        for line, r in clean_relations:
            store.schema.check_relation(r, where("relation", line))
        known = {name_key(e.name) for e in clean_entities}
        dangling = [(line, r) for line, r in clean_relations
                    if name_key(r.from_entity) not in known or name_key(r.to_entity) not in known]
        if dangling:
            present = {name_key(e.name) for e in store.open_entities(
                list({n for _, r in dangling for n in (r.from_entity, r.to_entity)})).entities}
            known |= present
        writable, skipped = [], []
        for line, r in clean_relations:
            missing = [n for n in (r.from_entity, r.to_entity) if name_key(n) not in known]
            if missing:
                skipped.append((line, f"endpoint does not exist: {', '.join(missing)}"))
            else:
                writable.append(r)
        return clean_entities, writable, skipped

    def export_graph(self, *, order: str = "id", library: str | ProjectRef | None = None) -> Graph:
        """The whole library from one snapshot: entities in insertion or `name` order, then relations."""
        return self.store(library).export_graph(order=order)

    def check(self, rules: schema.LibrarySchema | None = None, *, library: str | ProjectRef | None = None,
              limit: int | None = 1000) -> list[dict[str, str]]:
        """Every way the library breaks a schema (its own, or `rules`): what, where, value, rule;
        the first `limit` of them (None: all, so a caller can say how many it did not show)."""
        store = self.store(library)
        rules = rules or store.schema
        graph = store.export_graph(order="name")
        found = graph_violations(rules, graph.entities, graph.relations)
        return found if limit is None else found[:limit]

    def flush(self, *, library: str | ProjectRef | None = None) -> LibraryStats:
        """Checkpoint the library's write-ahead log into its main file; every call is durable already."""
        store = self.store(library)
        store.checkpoint()
        return store.stats()

    def stats(self, *, library: str | ProjectRef | None = None) -> LibraryStats:
        return self.store(library).stats()


    # -- documents: the part's methods of the same name (documents.py says what each does) --

    def list_libraries(self) -> list[dict[str, Any]]:
        return self.documents.list_libraries()

    def list_entities(self, entity_glob: str = "*", *, library: str | ProjectRef | None = None) -> list[dict[str, Any]]:
        return self.documents.list_entities(entity_glob, library=library)

    def read_entities(self, names: Sequence[str], *, library: str | ProjectRef | None = None) -> dict[str, Any]:
        return self.documents.read_entities(names, library=library)

    def get_entities_toc(self, names: Sequence[str], *, library: str | ProjectRef | None = None) -> dict[str, Any]:
        return self.documents.get_entities_toc(names, library=library)

    def read_entities_sections(self, names: Sequence[str], section_globs: Sequence[str], *,
                               library: str | ProjectRef | None = None) -> dict[str, Any]:
        return self.documents.read_entities_sections(names, section_globs, library=library)

    def find_relations(self, *, to_entity: str | None = None, relation_type: str | None = None,
                       from_entity: str | None = None, library: str | ProjectRef | None = None) -> list[Any]:
        return self.documents.find_relations(to_entity=to_entity, relation_type=relation_type,
                                             from_entity=from_entity, library=library)

    def add_entities(self, entities: Sequence[NewEntityDocument], *, library: str | ProjectRef | None = None) -> list[str]:
        return self.documents.add_entities(entities, library=library)

    def add_entity_content(self, entity_name: str, in_section: str, new_content: str, *,
                           library: str | ProjectRef | None = None) -> dict[str, Any]:
        return self.documents.add_entity_content(entity_name, in_section, new_content, library=library)

    def delete_entity_content(self, entity_name: str, content_to_delete: str, *,
                              library: str | ProjectRef | None = None) -> dict[str, Any]:
        return self.documents.delete_entity_content(entity_name, content_to_delete, library=library)

    def replace_entity_content(self, entity_name: str, old_content: str, new_content: str, *,
                               library: str | ProjectRef | None = None) -> dict[str, Any]:
        return self.documents.replace_entity_content(entity_name, old_content, new_content, library=library)

    def replace_entity_section(self, entity_name: str, old_heading: str, new_heading: str, new_body_content: str,
                               *, library: str | ProjectRef | None = None) -> dict[str, Any]:
        return self.documents.replace_entity_section(entity_name, old_heading, new_heading, new_body_content,
                                                     library=library)

    def rename_entity(self, old_name: str, new_name: str, *, library: str | ProjectRef | None = None) -> dict[str, Any]:
        return self.documents.rename_entity(old_name, new_name, library=library)

    def merge_entities(self, source_names: Sequence[str], target_name: str, *,
                       library: str | ProjectRef | None = None) -> dict[str, Any]:
        return self.documents.merge_entities(source_names, target_name, library=library)

    def read_manual(self, *, library: str | ProjectRef | None = None) -> dict[str, Any]:
        return self.documents.read_manual(library=library)

    def update_manual_section(self, toc: str, old_content: str, new_content: str, *,
                              library: str | ProjectRef | None = None) -> dict[str, Any]:
        return self.documents.update_manual_section(toc, old_content, new_content, library=library)

    def add_manual_section(self, toc: str, new_content: str, *, library: str | ProjectRef | None = None) -> dict[str, Any]:
        return self.documents.add_manual_section(toc, new_content, library=library)

    def delete_manual_section(self, toc: str, deleting_content: str, *, library: str | ProjectRef | None = None) -> dict[str, Any]:
        return self.documents.delete_manual_section(toc, deleting_content, library=library)

    # -- projects: the part's methods of the same name (projects.py says what each does) --

    def project_info(self, library: str | ProjectRef | None) -> dict[str, str] | None:
        return self.projects.project_info(library)

    def read_context(self, *, library: str | ProjectRef | None = None) -> dict[str, Any]:
        return self.projects.read_context(library=library)

    def update_context(self, *, active_task: str | None = None, status: str | None = None, reason: str | None = None,
                       next_steps: list[str] | None = None, last_commit: str | None = None,
                       library: str | ProjectRef | None = None) -> dict[str, Any]:
        return self.projects.update_context(active_task=active_task, status=status, reason=reason,
                                            next_steps=next_steps, last_commit=last_commit, library=library)

    def graph_summary(self, *, limit: int | None = None, offset: int = 0,
                      library: str | ProjectRef | None = None) -> dict[str, Any]:
        return self.projects.graph_summary(limit=limit, offset=offset, library=library)

    def export_markdown(self, output_path: str = "KNOWLEDGE_GRAPH.md", *,
                        library: str | ProjectRef | None = None) -> dict[str, Any]:
        return self.projects.export_markdown(output_path, library=library)

    def markdown_export(self, *, title: str = EXPORT_TITLE[2:], library: str | ProjectRef | None = None
                        ) -> tuple[str, dict[str, int]]:
        return self.projects.markdown_export(title=title, library=library)

    def add_observations_to_existing(self, batches: list[ObservationBatch], *, library: str | ProjectRef | None = None,
                                     origin: str = "add_observations") -> tuple[list[Any], list[str]]:
        return self.projects.add_observations_to_existing(batches, library=library, origin=origin)

    def carry_over_n2n(self, store: Store, folder: Path, project: ProjectRef) -> None:
        return self.projects.carry_over_n2n(store, folder, project)

    # -- history: the part's methods of the same name (history.py says what each does; held as `recovery`) --

    def history(self, *, limit: int = 50, internal: bool = False, library: str | ProjectRef | None = None) -> list[JournalEntry]:
        return self.recovery.history(limit=limit, internal=internal, library=library)

    def undo(self, change_id: int, *, library: str | ProjectRef | None = None) -> dict[str, Any]:
        return self.recovery.undo(change_id, library=library)

    def export_everything(self, *, library: str | ProjectRef | None = None) -> tuple[Graph, list[Memory]]:
        return self.recovery.export_everything(library=library)

    def import_everything(self, source: OfficialFile, *, library: str | ProjectRef | None = None,
                          progress: Callable[[int], None] | None = None) -> tuple[Any, int, int]:
        return self.recovery.import_everything(source, library=library, progress=progress)

    def backup(self, path: str | Path, *, library: str | ProjectRef | None = None) -> dict[str, Any]:
        return self.recovery.backup(path, library=library)

    def restore(self, path: str | Path, *, force: bool = False, library: str | ProjectRef | None = None) -> dict[str, Any]:
        return self.recovery.restore(path, force=force, library=library)

    def last_backup(self, store: Store) -> str | None:
        return self.recovery.last_backup(store)

def _narrowed(filters: MemoryFilter, phrase: TimeRange) -> MemoryFilter | None:
    """The filters narrowed to a time phrase's range; None if the two do not overlap."""
    after, before = phrase.iso()
    after = max(filter(None, [filters.after, after]), default=None)
    before = min(filter(None, [filters.before, before]), default=None)
    if after and before and after >= before:
        return None
    return replace(filters, after=after, before=before)


def _untimed(store: Store, filters: MemoryFilter) -> MemoryFilter:
    """The filters without their time bounds when those exclude nothing ("this year" in a library
    started this month): the same memories, searched without first listing every id in range.
    A store that searches its own vectors (VectorSearch) puts the range into its queries, where
    an index answers it: counting both (a million rows each) would cost more than it saves."""
    if not (filters.after or filters.before) or isinstance(store, VectorSearch):
        return filters
    untimed = replace(filters, after=None, before=None)
    counts = [store.list_memories(offset=0, limit=0, filters=f).total for f in (filters, untimed)]
    return untimed if counts[0] == counts[1] else filters


def _has_words(text: str) -> bool:
    """Whether a query left without its time phrase still says what to look for: a word that
    is not a stop word, or a run of Chinese/Japanese ("what did we work on" says nothing)."""
    return bool(word_terms(text, False)) or bool(CJK_PAIRS.search(text))


def _scope(time_range: TimeRange | None, filters: MemoryFilter) -> str:
    """The filtered memories, named for a note: "in 'last week' (2026-11-09T00:00:00Z to ...), tagged bug"."""
    parts = []
    if time_range is not None and not time_range.latest:
        after, before = time_range.iso()
        parts.append(f"in '{time_range.phrase}' ({after or 'the start'} to {before or 'now'})")
    elif filters.after or filters.before:
        parts.append(f"in the time range {filters.after or 'the start'} to {filters.before or 'now'}")
    if filters.tags:
        parts.append("tagged " + (" and " if filters.match_all else " or ").join(filters.tags))
    if filters.memory_type:
        parts.append(f"of type {filters.memory_type}")
    if filters.entity:
        parts.append(f"about {filters.entity}")
    return ", ".join(parts) or "in the library"


def _matches(hits: list[MemoryHit]) -> list[MemoryHit]:
    """The hits, unless none of them is more than a guess (no word, only a faint meaning): then
    none, and a time range answers with its newest memories rather than with noise."""
    if any(h.words > 0 or h.meaning >= WEAK_MEANING for h in hits):
        return hits
    return []


def _newest(store: Store, filters: MemoryFilter, n: int, hits: list[MemoryHit]) -> list[MemoryHit]:
    """Up to `n` of the newest memories within `filters` that are not among `hits`: a time range
    is answered with its memories even when the query's words and meaning find none of them."""
    if n <= 0:
        return []
    seen = {h.memory.id for h in hits}
    listed = store.list_memories(offset=0, limit=n + len(seen), filters=filters, count=False).memories
    return [MemoryHit(m, 0.0, "in range, newest (no word or meaning match)") for m in listed if m.id not in seen][:n]


class _QueryEmbedding:
    """An embedder that embeds each text once: one search asks for the query's vector for
    observations and for note bodies."""

    def __init__(self, embedder: Embedder):
        self.embedder = embedder
        self.model_id, self.dimension = embedder.model_id, embedder.dimension
        self.multilingual = embedder.multilingual  # what understands() reads
        self._done: dict[tuple[str, ...], Any] = {}

    def embed(self, texts: list[str]):
        key = tuple(texts)
        if key not in self._done:
            self._done[key] = self.embedder.embed(list(texts))
        return self._done[key]


def _import_relations(store: Store, relations: list[RelationInput], report: ImportReport,
                      progress: Callable[[int], None] | None) -> ImportReport:
    """Create `relations` a chunk (one transaction) at a time, counting them in `report`."""
    for i in range(0, len(relations), IMPORT_CHUNK):
        chunk = relations[i : i + IMPORT_CHUNK]
        created, existing = store.create_relations(chunk, origin="import")
        report.relations_created += len(created)
        report.relations_existing += len(existing)
        if progress:
            progress(len(chunk))
    return report
