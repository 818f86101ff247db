"""Every memloci operation, once. MCP tools, the CLI and benchmarks all call this API.

Plain synchronous Python: validation (schema.py), the library by name (libraries.py),
then one store call. Transports run it off their event loop.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from . import schema
from .errors import ValidationError
from .libraries import LibraryRegistry
from .model import (
    AddedObservations,
    CreatedEntity,
    EntityInput,
    Graph,
    GraphPage,
    JournalEntry,
    LibraryStats,
    ObservationBatch,
    Relation,
    RelationInput,
    RemovedObservations,
    SearchResult,
    name_key,
)
from .store import Store

DEFAULT_GRAPH_LIMIT = 1_000
DEFAULT_SEARCH_LIMIT = 25
IMPORT_CHUNK = 1_000


@dataclass(slots=True)
class ImportReport:
    entities_created: int = 0
    entities_merged: int = 0
    observations_added: int = 0
    relations_created: int = 0
    relations_existing: int = 0
    skipped_relations: list[tuple[int, str]] = field(default_factory=list)  # (line, reason)


class MemoryService:
    def __init__(self, libraries: LibraryRegistry):
        self.libraries = libraries

    def store(self, library: str | None = None) -> Store:
        return self.libraries.get(library)

    # -- the official graph tools ------------------------------------------------------

    def create_entities(self, entities: Sequence[EntityInput], *, library: str | None = None,
                        origin: str = "create_entities") -> list[CreatedEntity]:
        clean = schema.validate_entities(entities)
        return self.store(library).create_entities(clean, origin=origin)

    def create_relations(self, relations: Sequence[RelationInput], *, library: str | None = None,
                         origin: str = "create_relations") -> tuple[list[Relation], list[Relation]]:
        """Returns (created, already existing)."""
        clean = schema.validate_relations(relations)
        return self.store(library).create_relations(clean, origin=origin)

    def add_observations(self, batches: Sequence[ObservationBatch], *, library: str | None = None,
                         origin: str = "add_observations") -> list[AddedObservations]:
        clean = schema.validate_observation_batches(batches, "observations", "contents")
        return self.store(library).add_observations(clean, origin=origin)

    def delete_entities(self, names: Sequence[str], *, library: str | None = None,
                        origin: str = "delete_entities") -> list[str]:
        clean = schema.validate_names(names, "entityNames")
        return self.store(library).delete_entities(clean, origin=origin)

    def delete_observations(self, batches: Sequence[ObservationBatch], *, library: str | None = None,
                            origin: str = "delete_observations") -> list[RemovedObservations]:
        clean = schema.validate_observation_batches(batches, "deletions", "observations")
        return self.store(library).delete_observations(clean, origin=origin)

    def delete_relations(self, relations: Sequence[RelationInput], *, library: str | None = None,
                         origin: str = "delete_relations") -> list[Relation]:
        clean = schema.validate_relations(relations)
        return self.store(library).delete_relations(clean, origin=origin)

    def read_graph(self, *, limit: int | None = None, offset: int = 0, summary: bool = False,
                   library: str | None = None) -> GraphPage:
        limit = DEFAULT_GRAPH_LIMIT if limit is None else schema.check_int(limit, "limit", 1, schema.PAGE_MAX)
        offset = schema.check_int(offset, "offset", 0, schema.OFFSET_MAX)
        return self.store(library).read_graph(limit=limit, offset=offset, summary=summary)

    def search_nodes(self, query: str, *, limit: int | None = None, library: str | None = None) -> SearchResult:
        text = schema.validate_query(query)
        if not text:
            raise ValidationError("query: must not be empty", hint="To list entities, page through read_graph.")
        limit = DEFAULT_SEARCH_LIMIT if limit is None else schema.check_int(limit, "limit", 1, schema.SEARCH_LIMIT_MAX)
        return self.store(library).search_entities(text, limit=limit)

    def open_nodes(self, names: Sequence[str], *, library: str | None = None) -> Graph:
        clean = schema.validate_names(names, "names")
        return self.store(library).open_entities(clean)

    # -- bulk, inspection --------------------------------------------------------------

    def import_graph(self, entities: Sequence[tuple[int, EntityInput]], relations: Sequence[tuple[int, RelationInput]],
                     *, library: str | None = None, progress: Callable[[int], None] | None = None) -> ImportReport:
        """Load a whole graph (e.g. the official server's memory.jsonl).

        Every item is validated first (errors name the source line), so a bad file changes
        nothing. Writes go in chunks of IMPORT_CHUNK, each its own transaction, so other
        writers are never locked out for the whole import. Relations whose endpoints exist
        neither in the file nor in the library are skipped and reported.
        """
        clean_entities = [schema.validate_entity(e, f"line {line}") for line, e in entities]
        clean_relations = [(line, schema.validate_relation(r, f"line {line}")) for line, r in relations]
        store = self.store(library)
        report = ImportReport()
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
        known = {name_key(e.name) for e in clean_entities}
        dangling = [(line, r) for line, r in clean_relations
                    if name_key(r.from_entity) not in known or name_key(r.to_entity) not in known]
        if dangling:
            present = {name_key(e.name) for e in store.open_entities(
                list({n for _, r in dangling for n in (r.from_entity, r.to_entity)})).entities}
            known |= present
        writable = []
        for line, r in clean_relations:
            missing = [n for n in (r.from_entity, r.to_entity) if name_key(n) not in known]
            if missing:
                report.skipped_relations.append((line, f"endpoint does not exist: {', '.join(missing)}"))
            else:
                writable.append(r)
        if progress and report.skipped_relations:
            progress(len(report.skipped_relations))
        for i in range(0, len(writable), IMPORT_CHUNK):
            chunk = writable[i : i + IMPORT_CHUNK]
            created, existing = store.create_relations(chunk, origin="import")
            report.relations_created += len(created)
            report.relations_existing += len(existing)
            if progress:
                progress(len(chunk))
        return report

    def export_graph(self, *, order: str = "id", library: str | None = None) -> Graph:
        """The whole library from one snapshot: entities in insertion or `name` order, then relations."""
        return self.store(library).export_graph(order=order)

    def history(self, *, limit: int = 50, library: str | None = None) -> list[JournalEntry]:
        return self.store(library).journal(limit=schema.check_int(limit, "limit", 1, schema.PAGE_MAX))

    def stats(self, *, library: str | None = None) -> LibraryStats:
        return self.store(library).stats()

    def all_stats(self) -> Iterable[LibraryStats]:
        return [self.stats(library=name) for name in self.libraries.names()]
