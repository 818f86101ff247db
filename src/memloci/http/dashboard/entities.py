"""The dashboard API's entities, graph and lifecycle previews: one function per endpoint, each
calling the service, and their rows of the route table (ROUTES)."""

from __future__ import annotations

from typing import Any

from memloci.core.errors import NotFoundError
from memloci.core.model import Entity, ObservationBatch
from memloci.http.dashboard import models as m
from memloci.http.dashboard.endpoint import Context, Endpoint, checked
from memloci.http.dashboard.render import body_html
from memloci.mcp.maintenance import ITEMS_SHOWN, listed
from memloci.service import browse
from memloci.service.documents import prose
from memloci.service.history import names_observations
from memloci.service.lifecycle import Outcome, older_than_cutoff

# -- entities ----------------------------------------------------------------------------------


def entity_row(entity: Entity) -> dict[str, Any]:
    return {"name": entity.name, "entity_type": entity.entity_type, "observations": len(entity.observations)}


def list_entities(ctx: Context, q: m.EntitiesQuery, body: Any) -> dict[str, Any]:
    library = ctx.library(q.library, "read", "listing entities")
    if q.q and q.q.strip():
        entities = [h.entity for h in ctx.service.search_nodes(q.q, limit=q.limit, library=library).hits]
    else:
        entities = list(ctx.service.read_graph(limit=q.limit, library=library).entities)
    return {"library": library, "entities": [entity_row(e) for e in entities]}


def get_entity(ctx: Context, q: m.LibraryQuery, body: Any) -> dict[str, Any]:
    library = ctx.library(q.library, "read", "reading an entity")
    name = ctx.params["name"]
    graph = ctx.service.open_nodes([name], library=library)
    if not graph.entities:
        raise NotFoundError(f"name: library '{library}' has no entity named {name!r}",
                            hint="Find it by search or in the entity list.")
    entity = graph.entities[0]
    return {"name": entity.name, "entity_type": entity.entity_type, "aliases": list(entity.aliases),
            "observations": [{"content": o.content, **({"created_at": o.created_at} if o.created_at else {})}
                             for o in entity.observations],
            "relations": {"outgoing": [{"to": r.to_entity, "relation_type": r.relation_type}
                                       for r in graph.relations if r.from_entity == entity.name],
                          "incoming": [{"from": r.from_entity, "relation_type": r.relation_type}
                                       for r in graph.relations if r.to_entity == entity.name]},
            "body_html": body_html(prose(entity.body)), "library": library}  # the observations are listed above


def add_observations(ctx: Context, q: Any, b: m.Observations) -> dict[str, Any]:
    library = ctx.library(b.library, "write", "add_observations")
    since = browse.newest_change(ctx.service, library)
    done = ctx.service.add_observations([ObservationBatch(ctx.params["name"], tuple(b.contents))], library=library)
    added = [o for d in done for o in d.added]
    return {"added": added, "change_ids": browse.changes_since(
        ctx.service, since, ("add_observations",), library,
        lambda e: bool(done) and names_observations(e, done[0].entity_name, added, "added"))}


def delete_observations(ctx: Context, q: Any, b: m.Observations) -> dict[str, Any]:
    library = ctx.library(b.library, "write", "delete_observations")
    since = browse.newest_change(ctx.service, library)
    done = ctx.service.delete_observations([ObservationBatch(ctx.params["name"], tuple(b.contents))], library=library)
    deleted = [o for d in done for o in d.removed]
    return {"deleted": deleted, "change_ids": browse.changes_since(
        ctx.service, since, ("delete_observations",), library,
        lambda e: bool(done) and names_observations(e, done[0].entity_name, deleted, "removed"))}


def correct_observation(ctx: Context, q: Any, b: m.ObservationFix) -> dict[str, Any]:
    """The observation itself changes, in place: one journal entry (none when the text is the same)."""
    library = ctx.library(b.library, "write", "correcting an observation")
    done = ctx.service.correct_observation(ctx.params["name"], b.old, b.new, library=library)
    return {"change_ids": [done["change_id"]] if done["change_id"] is not None else []}


def neighbourhood(ctx: Context, q: m.GraphQuery, body: Any) -> dict[str, Any]:
    library = ctx.library(q.library, "read", "the graph")
    found = browse.neighbourhood(ctx.service, q.name, depth=q.depth, limit=q.limit, library=library)
    return {"library": library, "center": found.center, "nodes": [entity_row(e) for e in found.entities],
            "edges": [{"from": r.from_entity, "to": r.to_entity, "relation_type": r.relation_type}
                      for r in found.relations], "truncated": found.truncated}


# -- the lifecycle's previews ---------------------------------------------------------------------


def list_previews(ctx: Context, q: m.LibraryQuery, body: Any) -> dict[str, Any]:
    library = ctx.library(q.library, "read", "list_previews")
    rows = ctx.service.lifecycle.previews(pending=False, limit=100, library=library)
    return {"library": library, "previews": [
        {"id": p["preview_id"], "operation": p["kind"], "created_at": p["created_at"],
         "executed": bool(p["executed_at"]), "change_id": p["change_id"], "arguments": p["args"],
         "count": p["items"], "summary": f"{p['kind']}: {p['items']} item{'s' if p['items'] != 1 else ''}"
                                         + (f", {p['offered']} offered" if p["offered"] else "")} for p in rows]}


def make_preview(ctx: Context, q: Any, b: m.NewPreview) -> dict[str, Any]:
    library = ctx.library(b.library, "write", f"a {b.operation} preview")
    args: Any = checked(m.OPERATION_ARGS[b.operation], b.arguments, "argument")
    service, life = ctx.service, ctx.service.lifecycle
    if b.operation == "consolidate":
        data = service.consolidate_off_path(args.time_horizon, dry_run=True, library=library)
        return {"preview": {"id": data.get("preview_id"), **listed(data)}}
    outcome: Outcome
    if b.operation == "cleanup_duplicates":
        outcome = service.cleanup_duplicates(similar=args.similar, dry_run=True, library=library)
    elif b.operation == "memory_cleanup":
        cutoff = older_than_cutoff(args.older_than, service.clock()) if args.older_than else None
        outcome = service.memory_cleanup(cutoff=cutoff, threshold=args.similarity_threshold, library=library)
    elif b.operation == "archive":
        outcome = service.archive_memories(dry_run=True, library=library)
    elif b.operation == "delete_by_tag":
        outcome = life.delete_by_tag(args.tags, match_all=args.match_all, dry_run=True, library=library)
    else:
        outcome = life.delete_by_time(start=args.start_date, end=args.end_date, tag=args.tag, dry_run=True,
                                      library=library)
    return {"preview": {"id": outcome.preview_id, **listed(outcome.to_data())}}


def get_preview(ctx: Context, q: m.LibraryQuery, body: Any) -> dict[str, Any]:
    library = ctx.library(q.library, "read", "reading a preview")
    kept = browse.preview(ctx.service, ctx.params["id"], library)
    items = kept["items"]  # the first ITEMS_SHOWN, as the tools list them; executing acts on every one
    return {"library": library, **kept, "items": items[:ITEMS_SHOWN], "count": len(items),
            **({"items_not_shown": len(items) - ITEMS_SHOWN} if len(items) > ITEMS_SHOWN else {})}


def execute_preview(ctx: Context, q: Any, b: m.LibraryBody) -> dict[str, Any]:
    library = ctx.library(b.library, "write", "execute_preview")
    preview_id = ctx.params["id"]
    done = ctx.service.lifecycle.execute_preview(preview_id, library=library)
    return {**listed(done.to_data()), "executed": preview_id, "change_id": done.change_id}


# `{name:path}`: a name may hold "/" (TCP/IP); the observations' routes come first, so
# /api/entities/A/observations is A's observations, not an entity named "A/observations"
ROUTES: list[Endpoint] = [
    Endpoint("GET", "/api/entities", list_entities, "Entities, or those matching q (as search_nodes)",
             query=m.EntitiesQuery, answer='{"entities": [{"name", "entity_type", "observations": n}]}',
             tags=("entities",)),
    Endpoint("POST", "/api/entities/{name:path}/observations", add_observations, "Add observations",
             body=m.Observations, answer='{"added", "change_ids"}', writes=True, tags=("entities",)),
    Endpoint("DELETE", "/api/entities/{name:path}/observations", delete_observations, "Delete observations",
             body=m.Observations, answer='{"deleted", "change_ids"}', writes=True, tags=("entities",)),
    Endpoint("PATCH", "/api/entities/{name:path}/observations", correct_observation,
             "Correct one observation in place: one journal entry (none when the text is the same)",
             body=m.ObservationFix, answer='{"change_ids"}', writes=True, tags=("entities",)),
    Endpoint("GET", "/api/entities/{name:path}", get_entity, "An entity or note: observations, relations, the body as HTML",
             query=m.LibraryQuery, answer='{"name", "entity_type", "aliases", "observations", "relations", "body_html", '
                                          '"library"}', tags=("entities",)),
    Endpoint("GET", "/api/graph", neighbourhood, "An entity's neighbourhood, up to depth 3", query=m.GraphQuery,
             answer='{"center", "nodes", "edges", "truncated"}', tags=("graph",)),
    Endpoint("GET", "/api/previews", list_previews, "The library's lifecycle previews, newest first",
             query=m.LibraryQuery, answer='{"previews": [{"id", "operation", "created_at", "executed", "summary", '
                                          '"count"}]}', tags=("previews",)),
    Endpoint("POST", "/api/previews", make_preview, "Make a preview of a maintenance operation (changes nothing)",
             body=m.NewPreview, answer='{"preview": {"id", "items", ...as the tool\'s dry_run reply}}', writes=True,
             tags=("previews",)),
    Endpoint("GET", "/api/previews/{id:int}", get_preview, "One preview with its items", query=m.LibraryQuery,
             answer='{"id", "operation", "items" (the first 200), "count", "items_not_shown"?, ...}',
             tags=("previews",)),
    Endpoint("POST", "/api/previews/{id:int}/execute", execute_preview,
             "Execute a preview exactly; 409 when a memory changed since", body=m.LibraryBody,
             answer='{"executed", "change_id", ...}', writes=True, tags=("previews",)),
]
