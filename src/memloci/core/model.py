"""The concepts of memloci as plain data (DESIGN.md §1). No I/O here."""

from __future__ import annotations

import hashlib
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
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
    # what extraction made of the new observations (service/extraction.py): relations to the
    # entities they mention, and the names they mention that no entity has (offered, never created)
    relations_added: tuple[Relation, ...] = ()
    entities_suggested: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class AddedObservations:
    entity_name: str
    added: tuple[str, ...]
    skipped: tuple[str, ...]
    # what extraction made of the new observations (service/extraction.py): relations to the
    # entities they mention, and the names they mention that no entity has (offered, never created)
    relations_added: tuple[Relation, ...] = ()
    entities_suggested: tuple[str, ...] = ()


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
    library: str | None = None  # the library it was found in, in a search across libraries


@dataclass(frozen=True, slots=True)
class SearchResult:
    hits: tuple[SearchHit, ...]
    relations: tuple[Relation, ...]
    is_truncated: bool
    total_count: int | None = None  # every match, when the caller asked for a page (search_nodes)
    offset: int = 0


IMPORTANCE = ("critical", "high", "medium", "low")


@dataclass(frozen=True, slots=True)
class MemoryLink:
    """A memory's link to an entity that already exists (`entity`: extraction relates a memory
    to what it mentions) or to another memory (`memory`: its content_hash; consolidation's
    associations, a summary's sources), typed as memorix types relations (references, causes,
    fixes, decides, modifies, warns_about; associated, summarizes), with a similarity `score`
    where meaning found it."""

    type: str
    entity: str | None = None
    memory: str | None = None
    score: float | None = None


def links_data(links: Iterable[MemoryLink]) -> list[dict[str, Any]]:
    """Links as JSON data (what the engines store), the unset fields left out."""
    return [{k: v for k, v in (("type", link.type), ("entity", link.entity), ("memory", link.memory),
                               ("score", link.score)) if v is not None} for link in links]


def links_from(data: Any) -> tuple[MemoryLink, ...]:
    """Links from stored JSON data (a list of objects); anything else is no link."""
    if not isinstance(data, list):
        return ()
    return tuple(MemoryLink(str(d.get("type") or "references"), d.get("entity") if isinstance(d.get("entity"), str) else None,
                            d.get("memory") if isinstance(d.get("memory"), str) else None,
                            float(d["score"]) if isinstance(d.get("score"), int | float) else None)
                 for d in data if isinstance(d, dict))


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
    superseded_by: str | None = None  # content_hash of the memory that replaced it (kept, searched only if asked)
    archived_at: str | None = None  # when it was forgotten into the archive (kept, searched only if asked)
    links: tuple[MemoryLink, ...] = ()


@dataclass(frozen=True, slots=True)
class MemoryInput:
    content: str
    tags: tuple[str, ...] = ()
    memory_type: str = "note"
    metadata: dict[str, Any] = field(default_factory=dict)
    importance: str = "medium"
    entity: str | None = None
    links: tuple[MemoryLink, ...] = ()  # a free memory's links to what it mentions (stored with it)


@dataclass(frozen=True, slots=True)
class MemoryFilter:
    """Which memories a search or listing may return. Times are ISO 8601 UTC strings."""

    tags: tuple[str, ...] = ()
    match_all: bool = False
    memory_type: str | None = None
    entity: str | None = None
    after: str | None = None
    before: str | None = None
    include_superseded: bool = False  # memories another one replaced (superseded_by set)
    include_archived: bool = False  # memories forgotten into the archive

    @property
    def empty(self) -> bool:
        return not (self.tags or self.memory_type or self.entity or self.after or self.before)


# Every memory, the superseded and the archived too: what exports, copies and migrations read.
EVERY_MEMORY = MemoryFilter(include_superseded=True, include_archived=True)


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


# -- what store methods return ---------------------------------------------------------
# Small records instead of bare tuples: a reader sees `page.total`, not `result[1]`. Each
# still unpacks as the tuple it replaced (`memory, created = store.store_memory(...)`), so
# code written against the tuple keeps working while new code reads the fields by name.


class Unpacks:
    """Iterates over a dataclass's fields in order (shallow: a Memory inside stays a Memory)."""

    __slots__ = ()

    def __iter__(self) -> Iterator[Any]:
        return iter([getattr(self, f.name) for f in fields(self)])  # type: ignore[arg-type]


# What a lifecycle edit may set on a free memory (MemoryEdit.fields).
EDITABLE_FIELDS = ("tags", "metadata", "memory_type", "importance", "superseded_by", "archived_at", "links",
                   "access_count", "absorb")  # absorb: ids whose uses, as they are at the write, are added


@dataclass(frozen=True, slots=True)
class MemoryEdit:
    """One free memory changed by a lifecycle operation, if it is still as the preview saw it:
    `expect` is its fingerprint then (rules/lifecycle.py). `fields` (EDITABLE_FIELDS) replace the
    stored values (metadata whole, links as MemoryLink tuples); `delete` removes the memory."""

    memory_id: int
    expect: str
    fields: dict[str, Any] = field(default_factory=dict)
    delete: bool = False


@dataclass(frozen=True, slots=True)
class NewMemory:
    """A free memory a lifecycle operation adds (a cluster's summary), with its links."""

    memory: MemoryInput
    links: tuple[MemoryLink, ...] = ()


@dataclass(frozen=True, slots=True)
class ChangedMemories:
    """What change_memories did, in one transaction with one journal entry (`change_id`)."""

    changed: tuple[Memory, ...]
    deleted: tuple[Memory, ...]
    created: tuple[Memory, ...]
    change_id: int


@dataclass(frozen=True, slots=True)
class StoredMemory(Unpacks):
    """What store_memory did: the memory as stored, and whether this call created it (False:
    its owner held the same text already; tags told anew were added to that one)."""

    memory: Memory
    created: bool


@dataclass(frozen=True, slots=True)
class MemoryPage(Unpacks):
    """One page of a listing, newest first, and how many memories the filters let through in all."""

    memories: tuple[Memory, ...]
    total: int


@dataclass(frozen=True, slots=True)
class NamedEntity(Unpacks):
    """An entity's words as entity search completes and respells them."""

    name: str
    entity_type: str
    aliases: str  # the aliases as a JSON list ("[]" for none)


@dataclass(frozen=True, slots=True)
class NameChanges(Unpacks):
    """What the name log holds after a position: the entities created, retyped or renamed since."""

    position: int  # pass it to the next name_changes call
    names: tuple[NamedEntity, ...]
    complete: bool  # True: `names` is every entity (the position asked for was -1 or too old)


@dataclass(frozen=True, slots=True)
class PendingMemory(Unpacks):
    """A memory waiting for its vector."""

    id: int
    content: str
    content_hash: str  # the vector is saved only if the text still has this hash
    thread: str  # its conversation ('' for none): neighbours lift each other's similarity


@dataclass(frozen=True, slots=True)
class PendingPassage(Unpacks):
    """A passage of a note body waiting for its vector."""

    id: int
    text: str
    text_hash: str  # the vector is saved only if the passage still has this hash
    entity_id: int  # the note it was cut from


@dataclass(frozen=True, slots=True)
class SavedVectors(Unpacks):
    """Which vectors a save kept (an item whose text changed meanwhile is skipped), and the
    vectors' version after it (an in-process index compares it to tell others' writes apart)."""

    ids: tuple[int, ...]
    version: int


@dataclass(frozen=True, slots=True)
class MemoryVectors(Unpacks):
    """Every stored memory vector of a library, in id order (numpy arrays; no import here)."""

    ids: Any  # int64 array
    threads: list[str]  # each row's thread ('' for none)
    matrix: Any  # float32 array, one row per id
    version: int
    model: str | None  # None before the first vector


@dataclass(frozen=True, slots=True)
class PassageVectors(Unpacks):
    """Every embedded passage of a library, in id order."""

    ids: Any  # int64 array of passage ids
    owners: Any  # int64 array: the entity each passage belongs to
    matrix: Any  # float32 array
    version: int
    model: str | None


@dataclass(frozen=True, slots=True)
class ImportedMemories(Unpacks):
    """What import_memories did with the free memories it was given."""

    added: int
    existing: int  # the same text was there already


@dataclass(frozen=True, slots=True)
class GraphBatch(Unpacks):
    """What create_graph wrote of one batch of entities and the relations going out of them."""

    entities: tuple[CreatedEntity, ...]  # as create_entities reports them
    created: tuple[Relation, ...]  # relations made
    existing: tuple[Relation, ...]  # relations that were there already
    deferred: tuple[RelationInput, ...]  # relations for the caller to create once every entity exists


@dataclass(frozen=True, slots=True)
class DocumentEdit(Unpacks):
    """What edit_document did: the entity's stored name, and whether its document changed."""

    name: str
    changed: bool


@dataclass(frozen=True, slots=True)
class ListedEntity(Unpacks):
    """One line of an entity listing; `path` is its file in a Markdown library (None elsewhere,
    or for an entity without a file yet)."""

    name: str
    entity_type: str
    path: str | None = None


def utc_now() -> datetime:
    """The service's default clock (a test or a bench gives MemoryService another one)."""
    return datetime.now(UTC)


def now_iso() -> str:
    """The current UTC time as memloci stores it: `2026-11-21T04:50:00Z`."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def name_key(name: str) -> str:
    """The form under which entity names are compared: case-insensitive, and in NFC, so a
    name typed composed (`résumé`) and one read from a decomposed file name are one name."""
    return unicodedata.normalize("NFC", unicodedata.normalize("NFC", name).casefold())


# -- content identity: when two texts are the same memory (every engine's, and the check tool's) --

def normalize_content(text: str) -> str:
    """The form under which two texts count as the same: trimmed and single-spaced.

    Case is kept: "Uses Postgres" corrects "uses postgres" rather than duplicating it, and
    deleting one must never remove the other."""
    return " ".join(text.split())


def owner_key(entity_name: str) -> str:
    """The form of an entity's name an observation's hash covers: NFC, case-folded (so the
    same name typed in another case or Unicode form gives the same hash)."""
    return unicodedata.normalize("NFC", unicodedata.normalize("NFC", entity_name).casefold())


def content_hash(text: str, entity_name: str | None = None) -> str:
    """sha256 of the normalized text (as the MCP Memory Service does); an observation's hash also
    covers its entity's name, so every memory has its own hash, even when two entities share a
    fact. Never a row id: the hash of a memory is the same in a fresh clone, after a reindex and
    on another engine (the handle update_memory and delete_memory take)."""
    if entity_name is not None and not isinstance(entity_name, str):
        raise TypeError("content_hash: the owner is the entity's name, not its row id")
    owner = f"entity-name:{owner_key(entity_name)}\n" if entity_name is not None else ""
    return hashlib.sha256((owner + normalize_content(text)).encode("utf-8")).hexdigest()


def tag_keys(tags: Iterable[str]) -> list[str]:
    """The keys under which memory_tags finds tags: "Decision" and "decision" are one tag."""
    return list(dict.fromkeys(name_key(t) for t in tags))


def thread_key(entity_id: int | None, memory_type: str, metadata: dict[str, Any]) -> str:
    """Free memories of one type and one conversation (`metadata.session`, `conversation` or
    `thread`) form a thread whose neighbours lend each other context; '' is no thread."""
    session = metadata.get("session", metadata.get("conversation", metadata.get("thread")))
    if entity_id is not None or session in (None, ""):
        return ""
    return f"m:{memory_type}:{session}"
