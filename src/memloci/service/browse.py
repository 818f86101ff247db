"""What a person browsing a library asks that no tool asks: memories by retention zone and in
other orders than newest first, an entity's neighbourhood a few relations deep, one preview
with its items, the journal entries of this call's changes. The dashboard (http/dashboard/)
calls these; each reads through MemoryService, so its rules are the tools'."""

from __future__ import annotations

import heapq
import json
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from memloci.core import schema
from memloci.core.errors import NotFoundError, ValidationError
from memloci.core.model import Entity, JournalEntry, Memory, MemoryFilter, Relation
from memloci.service.facade import MemoryService
from memloci.service.history import own_changes

SORTS = ("newest", "oldest", "importance", "uses")
ZONES = ("active", "stale", "archive_candidate")
IMPORTANCE_RANK = {"critical": 0, "high": 1, "medium": 2, "low": 3}
READ_PAGE = 1_000  # memories read at a time when a zone or an order needs more than one page
SCAN_MAX = 50_000  # memories within the filters a zone or an order other than newest reads at most


def memory_page(service: MemoryService, *, filters: MemoryFilter, time: str | None = None, zone: str | None = None,
                sort: str = "newest", page: int = 1, page_size: int = 25,
                library: str | None = None) -> tuple[list[Memory], int]:
    """One page of memories within `filters` (and `time`, a phrase), of retention `zone` if
    given, in `sort` order: newest, oldest, importance (critical first, then newest) or uses
    (most used first, then newest). Newest first is the store's own page; oldest first without
    a zone reads the one or two pages it needs; a zone, importance or uses read the memories a
    page at a time keeping only the page asked for (memory bounded by page x page_size), and
    are refused beyond SCAN_MAX memories within the filters (narrow them)."""
    if sort not in SORTS:
        raise ValidationError(f"sort: must be one of {', '.join(SORTS)}, got {sort!r}")
    if zone is not None and zone not in ZONES:
        raise ValidationError(f"zone: must be one of {', '.join(ZONES)}, got {zone!r}")
    page = schema.check_int(page, "page", 1, schema.OFFSET_MAX)
    page_size = schema.check_int(page_size, "page_size", 1, schema.PAGE_MAX)
    if sort == "newest" and zone is None:
        return service.list_memories(page=page, page_size=page_size, filters=filters, time=time, library=library)
    start, wanted = (page - 1) * page_size, page * page_size

    def newest_first(first: int = 1) -> Iterator[tuple[int, Memory]]:
        """(position newest first, memory), from page `first` of READ_PAGE on."""
        at, seen = first, (first - 1) * READ_PAGE
        while True:
            found, total = service.list_memories(page=at, page_size=READ_PAGE, filters=filters, time=time,
                                                 library=library)
            if zone is not None or sort not in ("newest", "oldest"):
                if total > SCAN_MAX:
                    raise ValidationError(f"{'zone' if zone is not None else 'sort'}: at most {SCAN_MAX} memories "
                                          f"are read for it, and {total} are within these filters",
                                          hint="Narrow the list by tag, type or dates, or sort by newest.")
            for memory in found:
                yield seen, memory
                seen += 1
            if not found or seen >= total:
                return
            at += 1

    if sort == "oldest" and zone is None:  # newest-first positions [total - wanted, total - start), reversed
        _, total = service.list_memories(page=1, page_size=1, filters=filters, time=time, library=library)
        low, high = max(0, total - wanted), max(0, total - start)
        window = []
        for position, memory in newest_first(low // READ_PAGE + 1):
            if position >= high:
                break
            if position >= low:
                window.append(memory)
        return window[::-1], total
    matching = ((i, m) for i, m in newest_first() if zone is None or service.zone_of(m).replace("-", "_") == zone)
    count = 0

    def counted() -> Iterator[tuple[int, Memory]]:
        nonlocal count
        for item in matching:
            count += 1
            yield item

    if sort == "newest":
        kept = [m for i, (_, m) in enumerate(counted()) if start <= i < wanted]
    elif sort == "oldest":
        last = deque(counted(), maxlen=wanted)  # the oldest `wanted`, newest first
        kept = [m for _, m in reversed(last)][start:wanted]
    else:
        def key(item: tuple[int, Memory]) -> tuple[int, int]:
            position, m = item
            first = IMPORTANCE_RANK.get(m.importance, len(IMPORTANCE_RANK)) if sort == "importance" else -m.access_count
            return first, position  # ties: newest first

        kept = [m for _, m in heapq.nsmallest(wanted, counted(), key=key)][start:]
    return kept, count


def one_memory(service: MemoryService, content_hash: str, library: str | None = None) -> Memory:
    """The memory with this hash (archived and superseded ones too), or NOT_FOUND."""
    found, _ = service.memories_by_hash([content_hash], library=library)
    if not found:
        raise NotFoundError(f"content_hash: no memory has hash {content_hash.strip()}",
                            hint="Find it by search or in the memory list; they show each hash.")
    return found[0]


def entries_naming(service: MemoryService, content_hash: str, *, limit: int = 20, scan: int = 500,
                   library: str | None = None) -> list[JournalEntry]:
    """The newest journal entries (of the last `scan`) whose record names the memory's hash."""
    return [e for e in service.history(limit=scan, library=library)
            if e.detail and content_hash in json.dumps(e.detail, ensure_ascii=False)][:limit]


def newest_change(service: MemoryService, library: str | None) -> int:
    entries = service.history(limit=1, library=library)
    return entries[0].id if entries else 0


def changes_since(service: MemoryService, since: int, actions: Sequence[str], library: str | None,
                  names: Callable[[JournalEntry], bool]) -> list[int]:
    """The ids of the journal entries after `since` of these actions that `names` (service/history.py
    names_memory, names_observations: what the call changed), oldest first: the call's own,
    never another writer's change of the same moment."""
    return own_changes(service.history(limit=50, library=library), since, actions, names)


@dataclass(frozen=True)
class Neighbourhood:
    center: str
    entities: list[Entity]
    relations: list[Relation]
    truncated: bool


def neighbourhood(service: MemoryService, name: str, *, depth: int = 1, limit: int = 200,
                  library: str | None = None) -> Neighbourhood:
    """The entity `name` and those up to `depth` relations away (either direction), at most
    `limit` entities, nearest first; the relations among them."""
    depth = schema.check_int(depth, "depth", 1, 3)
    limit = schema.check_int(limit, "limit", 1, schema.PAGE_MAX)
    opened = service.open_nodes([name], library=library)
    if not opened.entities:
        raise NotFoundError(f"name: no entity is named {name!r}", hint="Find it by search or in the entity list.")
    center = opened.entities[0]
    entities: dict[str, Entity] = {center.name: center}
    relations: dict[tuple[str, str, str], Relation] = {}
    truncated = False
    touching = list(opened.relations)
    for _ in range(depth):
        for r in touching:
            relations[(r.from_entity, r.relation_type, r.to_entity)] = r
        wanted = list(dict.fromkeys(n for r in touching for n in (r.from_entity, r.to_entity) if n not in entities))
        if not wanted:
            break
        room = limit - len(entities)
        if len(wanted) > room:
            wanted, truncated = wanted[:room], True
        if not wanted:
            break
        graph = service.open_nodes(wanted, library=library)
        for e in graph.entities:
            entities.setdefault(e.name, e)
        frontier = [e.name for e in graph.entities]
        touching = [r for r in graph.relations if r.from_entity in frontier or r.to_entity in frontier]
    for r in touching:  # the last ring's relations among the entities kept
        relations[(r.from_entity, r.relation_type, r.to_entity)] = r
    kept = [r for r in relations.values() if r.from_entity in entities and r.to_entity in entities]
    return Neighbourhood(center.name, list(entities.values()), kept, truncated)


def preview(service: MemoryService, preview_id: int, library: str | None = None) -> dict[str, Any]:
    """A lifecycle preview as kept: its kind, dates, arguments, items and what it offered."""
    preview_id = schema.check_int(preview_id, "preview_id", 1, 2**62)
    store = service.store(library)
    kept = store.load_preview(preview_id)
    if kept is None:
        raise NotFoundError(f"preview_id: library '{store.name}' has no preview #{preview_id}",
                            hint="List the previews (GET /api/previews) or make one.")
    plan = kept["plan"]
    return {"id": preview_id, "operation": kept["kind"], "created_at": kept.get("created_at"),
            "executed": bool(kept["executed_at"]), "executed_at": kept["executed_at"], "change_id": kept["change_id"],
            "arguments": plan.get("args", {}), "items": plan.get("items", []), "offered": plan.get("offered", [])}
