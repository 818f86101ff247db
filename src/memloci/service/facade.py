"""Every memloci operation, once. MCP tools, the CLI and benchmarks all call this API.

Plain synchronous Python: validation (core/schema.py), the library by name or project (stores.py),
then one store call. Transports run it off their event loop.

MemoryService is one facade over parts it holds: the graph tools, entity search, health,
reindex and graph import are its own; free memories (memories.py), documents (documents.py),
projects (projects.py) and history (history.py) are parts it delegates to, and graph writes
and free memories pass their text to extraction (extraction.py: auto-relations); the vector
indexes, embedding workers and access recorder are a part of their own (vectors.py). Every
write path goes through `Stores.writing`, whose exit is the one post-write hook.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

from memloci.app.projects import ProjectRef
from memloci.app.registry import LibraryRegistry
from memloci.core import model, schema
from memloci.core.errors import InternalError, MemlociError, NotFoundError, ValidationError
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
    utc_now,
)
from memloci.core.writable import write_problem
from memloci.formats.official import OfficialFile
from memloci.rules import graph as rules
from memloci.rules.graph import RelationsCreated, graph_violations
from memloci.rules.retention import immunity, retention, zone
from memloci.search.clusters import HORIZONS
from memloci.search.embedder import Embedder, EmbedderHandle, understands
from memloci.search.entities import count_entities, find_entities, meaning_signals
from memloci.search.hybrid import MemoryHit
from memloci.search.similar import NEAR_DUPLICATE_MIN
from memloci.search.timephrases import parse_time_phrase
from memloci.service.across import AcrossSearch, fuse, lacks_entity, naming, selection
from memloci.service.background import Schedule, consolidate_elsewhere
from memloci.service.consolidation import ConsolidationOperations, near_pairs
from memloci.service.documents import DocumentOperations, NewEntityDocument
from memloci.service.extraction import Extraction
from memloci.service.history import HistoryOperations, ImportReport
from memloci.service.lifecycle import LifecycleOperations, Outcome
from memloci.service.memories import MemoryOperations, Retrieval
from memloci.service.names import entity_names
from memloci.service.projects import EXPORT_TITLE, ProjectOperations
from memloci.service.stores import Stores
from memloci.service.vectors import LibraryVectors
from memloci.store.protocols import FolderLibrary, Passages, ServerEngine, Store

DEFAULT_GRAPH_LIMIT = 100  # a page that fits a model's context (1,000 entities were ~245 KB)
DEFAULT_SEARCH_LIMIT = 25
# A note's closest passage adds weight × its cosine to the note's word score (0..1]. Five folds
# over the questions of three note sets (`memloci bench notes --folds`: LoCoMo sessions, their
# summaries, technical docstrings) chose 1.2 with floor 0.2 four times and 1.0 with 0.25 once;
# 1.0 with the floor kept at 0.3 scores within 0.004 of them, and a floor of 0.2 would list
# unrelated notes for a query nothing matches.
BODY_WEIGHT = 1.0


class MemoryService:
    def __init__(self, libraries: LibraryRegistry, embedder: EmbedderHandle | None = None,
                 *, embed_pending: bool = True, clock: Callable[[], datetime] = utc_now, extract: bool = True):
        """`embed_pending=False` (read-only commands) searches the stored vectors but never
        computes or writes new ones. `clock`: what "now" is for ages, zones and time phrases
        (a test or a bench sets it; stored dates are the engines' own). `extract=False`: no
        auto-relations and no memory links (extraction.py)."""
        self.clock = clock
        self.libraries = libraries
        self.schedule: Schedule | None = None  # consolidation on a schedule (background.py), when configured
        self.embedder = embedder if embedder is not None else EmbedderHandle("none")
        self.vectors = LibraryVectors(self.embedder, embed_pending=embed_pending)
        self.stores = Stores(libraries, self.vectors, self._project_opened)
        self.memories = MemoryOperations(self.stores, self.vectors, lambda: self.clock())
        self.lifecycle = LifecycleOperations(self.stores, lambda: self.clock())
        self.consolidation = ConsolidationOperations(self.stores, self.lifecycle, lambda: self.clock())
        self.documents = DocumentOperations(self.stores)
        self.recovery = HistoryOperations(self.stores)
        self.extraction = Extraction(self.stores, self.create_relations, enabled=extract)
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
        if self.schedule is not None:
            self.schedule.stop()
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
            # an alias names its entity here too: its observations merge into it, no entity is made under it
            names = entity_names(store, [e.name for e in clean], [f"entities[{i}].name" for i in range(len(clean))])
            results = store.create_entities([replace(e, name=n) for e, n in zip(clean, names)], origin=origin)
        return self.extraction.after_entities(results, library=library)  # relations to what they mention

    def create_relations(self, relations: Sequence[RelationInput], *, library: str | ProjectRef | None = None,
                         origin: str = "create_relations") -> RelationsCreated:
        """The relations created, and those already there (unpacks as `created, existing`)."""
        clean = schema.validate_relations(relations)
        with self.stores.writing(library, new_text=False) as store:
            for i, r in enumerate(clean):
                store.schema.check_relation(r, f"relations[{i}]")
            # a missing end is named by its field (rules/graph.py)
            return store.create_relations(_relations_named(store, clean), origin=origin)

    def add_observations(self, batches: Sequence[ObservationBatch], *, library: str | ProjectRef | None = None,
                         origin: str = "add_observations") -> list[AddedObservations]:
        clean = schema.validate_observation_batches(batches, "observations", "contents")
        with self.stores.writing(library) as store:
            for i, b in enumerate(clean):
                for j, o in enumerate(b.contents):
                    store.schema.check_observation(o, f"observations[{i}].contents[{j}]")
                rules.check_distinct(store.schema, b.contents, f"observations[{i}].contents")
            results = store.add_observations(_batches_named(store, clean, "observations"), origin=origin)
        return self.extraction.after_observations(results, library=library)  # relations to what they mention

    def delete_entities(self, names: Sequence[str], *, library: str | ProjectRef | None = None,
                        origin: str = "delete_entities") -> list[str]:
        clean = schema.validate_names(names, "entityNames")
        with self.stores.writing(library, new_text=False) as store:
            return store.delete_entities(entity_names(store, clean, "entityNames"), origin=origin)

    def delete_observations(self, batches: Sequence[ObservationBatch], *, library: str | ProjectRef | None = None,
                            origin: str = "delete_observations") -> list[RemovedObservations]:
        clean = schema.validate_observation_batches(batches, "deletions", "observations")
        with self.stores.writing(library, new_text=False) as store:
            return store.delete_observations(_batches_named(store, clean, "deletions"), origin=origin)

    def delete_relations(self, relations: Sequence[RelationInput], *, library: str | ProjectRef | None = None,
                         origin: str = "delete_relations") -> list[Relation]:
        clean = schema.validate_relations(relations)
        with self.stores.writing(library, new_text=False) as store:
            return store.delete_relations(_relations_named(store, clean), origin=origin)

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

    def search_nodes_across(self, query: str, *, libraries: Sequence[str], limit: int | None = None,
                            offset: int = 0) -> AcrossSearch:
        """search_nodes over several mounted libraries (`library: "*"` or a list): one ranking
        (across.py: reciprocal rank fusion), `limit` and `offset` over it, each hit and relation
        naming its library; total_count is the sum of the libraries' counts."""
        schema.validate_query(query)
        limit = DEFAULT_SEARCH_LIMIT if limit is None else schema.check_int(limit, "limit", 1, schema.SEARCH_LIMIT_MAX)
        offset = schema.check_int(offset, "offset", 0, schema.SEARCH_LIMIT_MAX - 1)
        names = selection(libraries, self.libraries.names())
        ranked: list[tuple[str, Sequence[SearchHit]]] = []
        relations: dict[str, tuple[Relation, ...]] = {}
        total = 0
        for name in names:  # each library's best offset + limit: the merged page lies among them
            try:
                found = self.search_nodes(query, limit=min(offset + limit, schema.SEARCH_LIMIT_MAX), library=name)
            except MemlociError as exc:
                naming(name, exc)
                raise
            ranked.append((name, found.hits))
            relations[name] = found.relations
            total += found.total_count if found.total_count is not None else len(found.hits)
        page = fuse(ranked, lambda hit: hit.score)[offset:offset + limit]
        shown: dict[str, set[str]] = {}
        for name, hit in page:
            shown.setdefault(name, set()).add(hit.entity.name)
        return AcrossSearch(tuple(replace(hit, library=name) for name, hit in page),
                            tuple((name, r) for name in names for r in relations[name]
                                  if r.from_entity in shown.get(name, ()) or r.to_entity in shown.get(name, ())),
                            offset + len(page) < total, total, offset, tuple(names))

    def open_nodes(self, names: Sequence[str], *, library: str | ProjectRef | None = None) -> Graph:
        clean = schema.validate_names(names, "names")
        return self.store(library).open_entities(clean)

    # -- free memories (the MCP Memory Service API): the part's methods of the same name (memories.py) --

    def store_memory(self, content: str, *, tags: Sequence[str] = (), memory_type: str = "note",
                     metadata: dict[str, Any] | None = None, importance: str | None = None,
                     entity: str | None = None, supersedes: str | None = None,
                     library: str | ProjectRef | None = None) -> tuple[Memory, bool]:
        """Store a memory. A free one is stored with its links to the entities it mentions; an
        observation relates its entity to them, as add_observations does (extraction.py).
        `supersedes` (a content_hash) marks the older memory it replaces, in the same
        transaction (lifecycle.py)."""
        links = () if entity else self.extraction.memory_links(content, memory_type, library=library).links
        if supersedes is not None:
            m = schema.validate_memory(MemoryInput(content, tuple(tags), memory_type, metadata or {},
                                                   importance or "medium", entity))
            return self.lifecycle.store_superseding(m, supersedes, links=links, library=library)
        memory, created = self.memories.store_memory(content, tags=tags, memory_type=memory_type, metadata=metadata,
                                                     importance=importance, entity=entity, links=links, library=library)
        if memory.entity is not None and created:
            self.extraction.relate([(memory.entity, [memory.content])], memory_type=memory.memory_type, library=library)
        return memory, created

    def retrieve_memory(self, query: str, *, n_results: int = 5, min_similarity: float = 0.0,
                        tags: Sequence[str] = (), match_all: bool = False, memory_type: str | None = None,
                        entity: str | None = None, after: str | None = None, before: str | None = None,
                        time: str | None = None, include_superseded: bool = False, include_archived: bool = False,
                        library: str | ProjectRef | None = None, count_use: bool = True) -> Retrieval:
        """`count_use=False`: a person browsing; the hits' use counts (ranking, archive immunity) stay."""
        return self.memories.retrieve_memory(query, n_results=n_results, min_similarity=min_similarity, tags=tags,
                                             match_all=match_all, memory_type=memory_type, entity=entity,
                                             after=after, before=before, time=time,
                                             include_superseded=include_superseded, include_archived=include_archived,
                                             library=library, count_use=count_use)

    def retrieve_memory_across(self, query: str, *, libraries: Sequence[str], n_results: int = 5,
                               min_similarity: float = 0.0, tags: Sequence[str] = (), match_all: bool = False,
                               memory_type: str | None = None, entity: str | None = None, after: str | None = None,
                               before: str | None = None, time: str | None = None, include_superseded: bool = False,
                               include_archived: bool = False, count_use: bool = True) -> Retrieval:
        """retrieve_memory over several mounted libraries (`library: "*"` or a list): each library
        ranks its best `n_results`, one ranking keeps the best `n_results` of all (across.py: by
        reciprocal rank, every library's matches before any library's newest-in-range fillers),
        and each hit names its library. Only the hits kept count as retrieved (none: `count_use=False`)."""
        n_results = schema.check_int(n_results, "n_results", 1, schema.SEARCH_LIMIT_MAX)
        names = selection(libraries, self.libraries.names())
        results: list[tuple[str, Retrieval]] = []
        lacking: list[MemlociError] = []  # libraries without the `entity` filtered on: none of their memories
        for name in names:
            try:
                results.append((name, self.memories.retrieve_memory(
                    query, n_results=n_results, min_similarity=min_similarity, tags=tags, match_all=match_all,
                    memory_type=memory_type, entity=entity, after=after, before=before, time=time,
                    include_superseded=include_superseded, include_archived=include_archived, library=name,
                    count_use=False)))
            except MemlociError as exc:
                naming(name, exc)
                if not lacks_entity(exc, entity):
                    raise
                lacking.append(exc)
        if not results:  # the entity is in none of them
            raise NotFoundError(f"entity: '{entity}' does not exist in any of the libraries "
                                + ", ".join(f"'{name}'" for name in names), hint=lacking[0].hint)
        # Newest-first listings (a time phrase alone, a range's fillers) merge by date, newest
        # first, after every library's matches, which merge by rank.
        best = fuse([(name, [h for h in r.hits if not _listed(h)]) for name, r in results], lambda hit: hit.score)
        listed = [(name, h) for name, r in results for h in r.hits if _listed(h)]
        listed.sort(key=lambda item: item[1].memory.created_at, reverse=True)
        best = (best + listed)[:n_results]
        for name in names:
            kept = [hit.memory.id for library, hit in best if library == name]
            if kept and count_use:
                self.vectors.accesses.record(self.store(name), kept)
        said = {r.note for _, r in results if r.note}
        notes = list(said) if len(said) == 1 and all(r.note for _, r in results) else \
            [f"library '{name}': {r.note}" for name, r in results if r.note]
        time_range = next((r.time_range for _, r in results if r.time_range is not None), None)
        return Retrieval([replace(hit, library=name) for name, hit in best], query, time_range,
                         all(r.unmatched for _, r in results), " ".join(notes) or None)

    def search_by_tag(self, tags: Sequence[str], *, match_all: bool = False, limit: int = 100,
                      library: str | ProjectRef | None = None) -> list[Memory]:
        return self.memories.search_by_tag(tags, match_all=match_all, limit=limit, library=library)

    def search_by_tag_page(self, tags: Sequence[str], *, match_all: bool = False, limit: int = 100,
                           offset: int = 0, include_superseded: bool = False,
                           library: str | ProjectRef | None = None) -> tuple[list[Memory], int]:
        return self.memories.search_by_tag_page(tags, match_all=match_all, limit=limit, offset=offset,
                                                include_superseded=include_superseded, library=library)

    def delete_memory(self, content_hash: str, *, library: str | ProjectRef | None = None) -> list[Memory]:
        return self.memories.delete_memory(content_hash, library=library)

    def update_memory(self, content_hash: str, *, content: str | None = None, tags: Sequence[str] | None = None,
                      metadata: dict[str, Any] | None = None, importance: str | None = None,
                      supersedes: str | None = None, library: str | ProjectRef | None = None) -> Memory:
        """Change a memory; `supersedes` (a content_hash) marks an older one this memory replaces."""
        if supersedes is not None:  # checked before anything is written: a refused supersession changes nothing
            current = self.memories.one_memory(content_hash, library=library)
            self.lifecycle.check_supersedes(supersedes, current.content_hash, library=library)
            if content is not None and model.content_hash(content, current.entity) == supersedes:
                raise ValidationError("supersedes: a memory cannot supersede itself (the new text is that memory's)")
        if supersedes is not None and content is None and tags is None and metadata is None and importance is None:
            memory = self.memories.one_memory(content_hash, library=library)
        else:
            memory = self.memories.update_memory(content_hash, content=content, tags=tags, metadata=metadata,
                                                 importance=importance, library=library)
        if supersedes is not None:
            self.lifecycle.supersede(supersedes, memory.content_hash, library=library)
        return memory

    # -- the lifecycle (lifecycle.py holds the operations; these add what ranks and finds) ----

    def cleanup_duplicates(self, *, similar: bool = False, dry_run: bool = False,
                           library: str | ProjectRef | None = None) -> Outcome:
        return self.lifecycle.cleanup_duplicates(similar=similar, dry_run=dry_run, library=library, near=near_pairs)

    def memory_cleanup(self, *, cutoff: str | None, threshold: float | None = None,
                       library: str | ProjectRef | None = None) -> Outcome:
        def near(store: Store, memories: list[Memory]) -> list[tuple[Memory, Memory, float]]:
            return near_pairs(store, memories, threshold if threshold is not None else NEAR_DUPLICATE_MIN)

        return self.lifecycle.memory_cleanup(cutoff=cutoff, near=near, immune=lambda m: immunity(m) is not None,
                                             library=library)

    def consolidate(self, time_horizon: str, *, dry_run: bool = True, max_cluster: int | None = None,
                    library: str | ProjectRef | None = None) -> Outcome:
        return self.consolidation.consolidate(time_horizon, dry_run=dry_run, max_cluster=max_cluster, library=library)

    def consolidate_off_path(self, time_horizon: str, *, dry_run: bool = True,
                             library: str | ProjectRef | None = None) -> dict[str, Any]:
        """consolidate, run where it cannot slow this process's requests: a mounted library in a
        child process at low priority (background.py); a project's library here. Its outcome as data."""
        if time_horizon not in HORIZONS:
            raise ValidationError(f"time_horizon: must be one of {', '.join(HORIZONS)}, got {time_horizon!r}")
        if isinstance(library, ProjectRef):
            return self.consolidate(time_horizon, dry_run=dry_run, library=library).to_data()
        name = self.store(library).name
        spec = next(s for s in self.libraries.specs if s.name == name)
        settings = self.libraries.settings
        return consolidate_elsewhere(spec, settings.home, time_horizon, dry_run=dry_run,
                                     config=Path(settings.config) if settings.config else None)

    def archive_memories(self, *, dry_run: bool = True, library: str | ProjectRef | None = None) -> Outcome:
        """Move the archive candidates (past their retention, not immune: rules/retention.py) into
        the archive, previewed."""
        now = self.clock()
        return self.lifecycle.archive(self.memories.archive_candidates(library), self.store(library), dry_run=dry_run,
                                      why=lambda m: _archive_reason(m, now), args={})

    def time_range(self, phrase: str, *, field: str = "time") -> tuple[str | None, str | None]:
        """The (after, before) a time phrase names, as of the service's clock (errors name `field`)."""
        try:
            return parse_time_phrase(phrase, self.clock()).iso()
        except ValidationError as exc:
            raise ValidationError(exc.message.replace("time:", f"{field}:", 1), hint=exc.hint) from None

    def knowledge_export(self, fmt: str, *, tags: Sequence[str] = (), query: str | None = None,
                         include_archived: bool = False, library: str | ProjectRef | None = None) -> str:
        def search(q: str, store: Store) -> list[Memory]:
            return [h.memory for h in self.memories.retrieve_memory(q, n_results=100, library=library,
                                                                    count_use=False).hits]
        return self.lifecycle.export(fmt, tags=tags, query=query, include_archived=include_archived,
                                     library=library, search=search)

    def list_memories(self, *, page: int = 1, page_size: int = 10, filters: MemoryFilter | None = None,
                      library: str | ProjectRef | None = None, time: str | None = None) -> tuple[list[Memory], int]:
        return self.memories.list_memories(page=page, page_size=page_size, filters=filters, library=library, time=time)

    def archive_candidates(self, library: str | ProjectRef | None = None) -> list[Memory]:
        return self.memories.archive_candidates(library)

    def zone_counts(self, *, library: str | ProjectRef | None = None) -> dict[str, int]:
        """The library's free memories by retention zone now (active, stale, archive_candidate),
        and how many of them are immune; what health reports as `zones`."""
        return self.memories.zone_counts(self.store(library))

    def zone_of(self, memory: Memory) -> str:
        """The memory's retention zone now (rules/retention.py): active, stale,
        archive-candidate, archived or superseded."""
        return zone(memory, self.clock())

    def memories_by_hash(self, content_hashes: Sequence[str], *,
                         library: str | ProjectRef | None = None) -> tuple[list[Memory], list[str]]:
        return self.memories.memories_by_hash(content_hashes, library=library)

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
                "zones": self.memories.zone_counts(store),  # free memories by retention zone, as of the clock
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

    # -- bulk import: the history part's methods of the same name (history.py) ----------

    def import_graph(self, entities: Sequence[tuple[int, EntityInput]], relations: Sequence[tuple[int, RelationInput]],
                     *, library: str | ProjectRef | None = None, progress: Callable[[int], None] | None = None,
                     where: Callable[[str, int], str] | None = None) -> ImportReport:
        return self.recovery.import_graph(entities, relations, library=library, progress=progress, where=where)

    def plan_graph_import(self, entities: Sequence[tuple[int, EntityInput]],
                          relations: Sequence[tuple[int, RelationInput]], *, library: str | ProjectRef | None = None,
                          where: Callable[[str, int], str] | None = None
                          ) -> tuple[list[EntityInput], list[RelationInput], list[tuple[int, str]]]:
        return self.recovery.plan_graph_import(entities, relations, library=library, where=where)

    # -- inspection ----------------------------------------------------------------------

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

    def unreachable_libraries(self) -> list[str]:
        """The mounted libraries whose database server the last call could not reach; no
        database is asked (the HTTP server's /healthz says so to anyone, cheaply)."""
        return [s.name for s in self.libraries.all() if isinstance(s, ServerEngine) and s.outage() is not None]

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

    def correct_observation(self, entity_name: str, old: str, new: str, *,
                            library: str | ProjectRef | None = None) -> dict[str, Any]:
        return self.documents.correct_observation(entity_name, old, new, library=library)

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

def _batches_named(store: Store, batches: Sequence[ObservationBatch], field: str) -> list[ObservationBatch]:
    """The batches with each entity as its stored name (an alias reaches its entity: names.py)."""
    names = entity_names(store, [b.entity_name for b in batches],
                         [f"{field}[{i}].entityName" for i in range(len(batches))])
    return [replace(b, entity_name=n) for b, n in zip(batches, names)]


def _archive_reason(m: Memory, now: datetime) -> str:
    kept = retention(m, now)
    return f"{kept.age_days:.0f} days old, retention {kept.retention_days:.0f} days, relevance {kept.score:.2f}"


def _relations_named(store: Store, relations: Sequence[RelationInput]) -> list[RelationInput]:
    """The relations with both ends as stored names (an alias reaches its entity: names.py)."""
    ends = entity_names(store, [n for r in relations for n in (r.from_entity, r.to_entity)],
                        [f"relations[{i}].{end}" for i in range(len(relations)) for end in ("from", "to")])
    return [replace(r, from_entity=ends[2 * i], to_entity=ends[2 * i + 1]) for i, r in enumerate(relations)]


def _listed(hit: MemoryHit) -> bool:
    """A hit of a newest-first listing (retrieve_memory's fillers and time-phrase listings), not a match."""
    return hit.score <= 0 or hit.why in ("newest", "in range")


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
