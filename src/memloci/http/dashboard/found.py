"""Search across memories, entities and notes: one function for `memloci search` and the
dashboard's `GET /api/search`.

Memories are found as retrieve_memory finds them, entities and notes as search_nodes does; a
note is an entity with prose in its body (not only the observations list a Markdown library
writes there), listed once (under notes) when every kind is asked for. Each hit
says why it matched."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memloci.mcp.memory import retrieved
from memloci.service.documents import prose
from memloci.service.facade import MemoryService
from memloci.service.lifecycle import first_line

KINDS = ("all", "memories", "entities", "notes")
NOTE_POOL = 50  # entity hits read to find `limit` notes among them (entities with a body)


def search(service: MemoryService, query: str, *, kind: str = "all", limit: int = 10, library: str | None = None,
           libraries: Sequence[str] | None = None, count_use: bool = True) -> dict[str, list[dict[str, Any]]]:
    """The hits of each kind asked for (`memories`, `entities`, `notes`), best first, at most
    `limit` of each. `libraries`: search these (each hit names its `library`); else `library`.
    `count_use=False`: the memories found are not counted as used (the dashboard's browsing)."""
    found: dict[str, list[dict[str, Any]]] = {}
    names = list(libraries) if libraries is not None else None
    if kind in ("all", "memories"):
        if names is not None:
            result = service.retrieve_memory_across(query, libraries=names, n_results=limit, count_use=count_use)
        else:
            result = service.retrieve_memory(query, n_results=limit, library=library, count_use=count_use)
        found["memories"] = retrieved(service, result, names)["memories"]
    if kind != "memories":
        pool = limit if kind == "entities" else min(max(limit * 5, NOTE_POOL), 1_000)
        if names is not None:
            hits: Sequence[Any] = service.search_nodes_across(query, libraries=names, limit=pool).hits
        else:
            hits = service.search_nodes(query, limit=pool, library=library).hits
        own = [(h, prose(h.entity.body)) for h in hits]  # a Markdown body holds the observations too: not prose
        entities = [entity_hit(h, names is not None) for h, text in own if kind == "entities" or not text]
        notes = [note_hit(h, query, names is not None, text) for h, text in own if text]
        if kind != "notes":
            found["entities"] = entities[:limit]
        if kind != "entities":
            found["notes"] = notes[:limit]
    return found


def entity_hit(hit: Any, with_library: bool = False) -> dict[str, Any]:
    """An entity's hit: its name, type, why, and its observations' texts."""
    out = {"name": hit.entity.name, "entity_type": hit.entity.entity_type, "why": hit.why,
           "observations": [o.content for o in hit.entity.observations]}
    return {**out, "library": hit.library} if with_library else out


def note_hit(hit: Any, query: str, with_library: bool = False, text: str | None = None) -> dict[str, Any]:
    """A note's hit: its name, why, and the line of its prose (`text`, else its body's) holding
    most of the query's words."""
    words = {w.casefold() for w in query.split() if len(w) > 2}
    lines = [line.strip() for line in (prose(hit.entity.body) if text is None else text).splitlines() if line.strip()]
    best = max(lines, key=lambda line: sum(w in line.casefold() for w in words), default="")
    out = {"name": hit.entity.name, "entity_type": hit.entity.entity_type, "why": hit.why, "line": first_line(best, 120)}
    return {**out, "library": hit.library} if with_library else out
