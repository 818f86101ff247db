"""The concepts of memloci as plain data (DESIGN.md §1). No I/O here."""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Observation:
    """A memory attached to an entity, as the graph tools show it."""

    content: str
    created_at: str


@dataclass(frozen=True, slots=True)
class Entity:
    name: str
    entity_type: str
    observations: tuple[Observation, ...] = ()
    aliases: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)
    body: str = ""
    created_at: str = ""
    updated_at: str = ""


@dataclass(frozen=True, slots=True)
class Relation:
    from_entity: str
    relation_type: str
    to_entity: str
    created_at: str = ""


@dataclass(frozen=True, slots=True)
class EntityInput:
    """An entity as a caller asks to create it (already validated)."""

    name: str
    entity_type: str
    observations: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class RelationInput:
    from_entity: str
    relation_type: str
    to_entity: str


@dataclass(frozen=True, slots=True)
class ObservationBatch:
    """Observations to add to (or delete from) one entity."""

    entity_name: str
    contents: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class CreatedEntity:
    """One entity of a create_entities call: newly created, or merged into an existing one.

    `observations` are the ones this call stored; a merge keeps the stored name and type.
    """

    name: str
    entity_type: str
    status: str  # "created" | "merged"
    observations: tuple[str, ...]
    skipped_observations: tuple[str, ...]
    created_at: str
    ignored_type: str | None = None  # a merge keeps the stored type; this is the one asked for instead


@dataclass(frozen=True, slots=True)
class AddedObservations:
    entity_name: str
    added: tuple[str, ...]
    skipped: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class RemovedObservations:
    entity_name: str
    removed: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Graph:
    entities: tuple[Entity, ...]
    relations: tuple[Relation, ...]


@dataclass(frozen=True, slots=True)
class GraphPage:
    entities: tuple[Entity, ...]
    relations: tuple[Relation, ...]
    total_entity_count: int
    offset: int
    is_truncated: bool


@dataclass(frozen=True, slots=True)
class SearchHit:
    entity: Entity
    score: float
    matched_terms: int
    why: str


@dataclass(frozen=True, slots=True)
class SearchResult:
    hits: tuple[SearchHit, ...]
    relations: tuple[Relation, ...]
    is_truncated: bool
    total_count: int | None = None  # every match, when the caller asked for a page (search_nodes)
    offset: int = 0


IMPORTANCE = ("critical", "high", "medium", "low")


@dataclass(frozen=True, slots=True)
class Memory:
    id: int
    content: str
    content_hash: str
    tags: tuple[str, ...]
    memory_type: str
    importance: str
    metadata: dict[str, Any]
    created_at: str
    updated_at: str
    access_count: int
    last_accessed_at: str | None
    entity: str | None  # the entity it is an observation of, if any


@dataclass(frozen=True, slots=True)
class MemoryInput:
    content: str
    tags: tuple[str, ...] = ()
    memory_type: str = "note"
    metadata: dict[str, Any] = field(default_factory=dict)
    importance: str = "medium"
    entity: str | None = None


@dataclass(frozen=True, slots=True)
class MemoryFilter:
    """Which memories a search or listing may return. Times are ISO 8601 UTC strings."""

    tags: tuple[str, ...] = ()
    match_all: bool = False
    memory_type: str | None = None
    entity: str | None = None
    after: str | None = None
    before: str | None = None

    @property
    def empty(self) -> bool:
        return not (self.tags or self.memory_type or self.entity or self.after or self.before)


@dataclass(frozen=True, slots=True)
class JournalEntry:
    id: int
    at: str
    tool: str
    action: str
    entities: tuple[str, ...]
    detail: dict[str, Any] | None


@dataclass(frozen=True, slots=True)
class LibraryStats:
    name: str
    kind: str
    path: str
    entities: int
    observations: int
    memories: int
    relations: int
    journal_entries: int
    size_bytes: int
    schema_version: int


def now_iso() -> str:
    """The current UTC time as memloci stores it: `2026-11-21T04:50:00Z`."""
    from datetime import datetime, timezone

    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def name_key(name: str) -> str:
    """The form under which entity names are compared: case-insensitive, and in NFC, so a
    name typed composed (`résumé`) and one read from a decomposed file name are one name."""
    return unicodedata.normalize("NFC", unicodedata.normalize("NFC", name).casefold())
