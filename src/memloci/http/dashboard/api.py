"""The dashboard's JSON API under /api/: one function per endpoint, each calling the service and
shaping its answer with the tools' own functions (mcp/memory.py, mcp/maintenance.py), and the
route table (ROUTES) that endpoint.py serves and openapi.py documents. Entities, the graph and
the lifecycle's previews are in entities.py; the session and the libraries here."""

from __future__ import annotations

from typing import Any

import anyio.from_thread

from memloci import __version__
from memloci.core.errors import MemlociError
from memloci.core.model import JournalEntry, Memory, MemoryFilter
from memloci.http.dashboard import models as m
from memloci.http.dashboard.auth import SESSION_SECONDS, UnauthorizedError, Who, session_cookie
from memloci.http.dashboard.endpoint import Context, Endpoint, sign_in_key
from memloci.http.dashboard.found import search
from memloci.http.scopes import TokenCaller
from memloci.mcp.memory import listed, memory_out
from memloci.service import browse
from memloci.service.history import memory_text, names_memory, undoable

# -- session and libraries -----------------------------------------------------------------


def _libraries(ctx: Context, with_paths: bool = False) -> list[dict[str, Any]]:
    who = ctx.who
    rows = []
    for row in ctx.service.list_libraries():
        name = str(row["name"])
        if who is None or not who.may(name, "read"):
            continue
        out = {"name": name, "engine": row.get("kind"), "read": True, "write": who.may(name, "write")}
        if with_paths and who.may(name, "admin") and row.get("path"):
            out["path"] = row["path"]
        rows.append(out)
    return rows


def get_session(ctx: Context, query: Any, body: Any) -> dict[str, Any]:
    who = ctx.who
    return {"signed_in": who is not None, "open": who is not None and who.via == "open",
            "name": who.name if who else None, "scopes": who.scopes if who else [],
            "csrf": who.csrf if who else None, "libraries": _libraries(ctx) if who else []}


def sign_in(ctx: Context, query: Any, body: m.SignIn) -> dict[str, Any]:
    cookie = session_cookie(ctx.request)
    started = anyio.from_thread.run(ctx.access.sign_in, body.token, ctx.request.cookies.get(cookie))
    if started is None:
        ctx.limiter.take(sign_in_key(ctx.request))  # only failures count: see endpoint.check_rate
        raise UnauthorizedError("token: not a valid token (unknown, revoked or expired)",
                                hint="Create one with memloci token create NAME --scope LIBRARY:read")
    session_id, session, grant = started
    # Secure over https, also behind a proxy on this machine that says so (X-Forwarded-Proto:
    # uvicorn takes it from 127.0.0.1 only, its forwarded_allow_ips default)
    ctx.set_cookies.append({"key": cookie, "value": session_id, "max_age": SESSION_SECONDS, "path": "/",
                            "httponly": True, "samesite": "strict", "secure": ctx.request.url.scheme == "https"})
    ctx.who = Who(TokenCaller(grant), "cookie", session.csrf)  # the answer is the new session's
    ctx.request.scope["memloci.who"] = ctx.who
    return get_session(ctx, query, body)


def sign_out(ctx: Context, query: Any, body: Any) -> dict[str, Any]:
    anyio.from_thread.run_sync(ctx.access.sign_out, ctx.request)  # the sessions are kept on the event loop only
    ctx.delete_cookies.append(session_cookie(ctx.request))
    return {"signed_in": False}


def libraries(ctx: Context, query: Any, body: Any) -> dict[str, Any]:
    return {"libraries": _libraries(ctx, with_paths=True)}


# -- search and memories -------------------------------------------------------------------


def with_library(memory: dict[str, Any], library: str) -> dict[str, Any]:
    return {**memory, "library": library}


def find(ctx: Context, q: m.SearchQuery, body: Any) -> dict[str, Any]:
    if q.library is not None and q.library.strip() == "*":
        names = ctx.libraries()
        found = search(ctx.service, q.q, kind=q.kind, limit=q.limit, libraries=names, count_use=False) if names else {}
    else:
        library = ctx.library(q.library, "read", "search")
        found = {kind: [with_library(hit, library) for hit in hits]
                 for kind, hits in search(ctx.service, q.q, kind=q.kind, limit=q.limit, library=library,
                                                      count_use=False).items()}
    return {"query": q.q, "kind": q.kind, **{k: found.get(k, []) for k in ("memories", "entities", "notes")}}


def memory_data(ctx: Context, memory: Memory, library: str) -> dict[str, Any]:
    return with_library(memory_out(memory, ctx.service.zone_of(memory)), library)


def list_memories(ctx: Context, q: m.MemoriesQuery, body: Any) -> dict[str, Any]:
    library = ctx.library(q.library, "read", "listing memories")
    filters = MemoryFilter(tuple(q.tag), q.all_tags, q.type, None, q.after, q.before, q.superseded, q.archived)
    memories, total = browse.memory_page(ctx.service, filters=filters, time=q.time, zone=q.zone, sort=q.sort,
                                         page=q.page, page_size=q.page_size, library=library)
    out = listed(ctx.service, memories, q.page, q.page_size, total)
    out["memories"] = [with_library(x, library) for x in out["memories"]]
    out["tags"] = [{"tag": t, "count": n} for t, n in ctx.service.lifecycle.tags(library=library)]
    return out


def entry_data(entry: JournalEntry) -> dict[str, Any]:
    """A journal entry as the history page lists it: what it did, in one line."""
    text = memory_text(entry)
    names = ", ".join(entry.entities[:5]) + (f" (+{len(entry.entities) - 5})" if len(entry.entities) > 5 else "")
    summary = (f"{names}: " if names and text else names) + (f'"{text}"' if text else "")
    return {"id": entry.id, "at": entry.at, "tool": entry.tool, "action": entry.action,
            "entities": list(entry.entities), "summary": summary or entry.action,
            "undoable": undoable(entry)}


def get_memory(ctx: Context, q: m.LibraryQuery, body: Any) -> dict[str, Any]:
    library = ctx.library(q.library, "read", "reading a memory")
    memory = browse.one_memory(ctx.service, ctx.params["hash"], library)
    return {"memory": memory_data(ctx, memory, library),
            "history": [entry_data(e) for e in browse.entries_naming(ctx.service, memory.content_hash,
                                                                     library=library)]}


def store_memory(ctx: Context, q: Any, b: m.NewMemory) -> dict[str, Any]:
    library = ctx.library(b.library, "write", "store_memory")
    since = browse.newest_change(ctx.service, library)
    memory, _ = ctx.service.store_memory(b.content, tags=b.tags, memory_type=b.memory_type, metadata=b.metadata,
                                         importance=b.importance, library=library)
    ids = browse.changes_since(ctx.service, since, ("store_memory",), library,
                               lambda e: names_memory(e, memory.content_hash))
    return {"memory": memory_data(ctx, memory, library), "change_id": ids[-1] if ids else None}


def update_memory(ctx: Context, q: Any, b: m.MemoryChange) -> dict[str, Any]:
    library = ctx.library(b.library, "write", "update_memory")
    since = browse.newest_change(ctx.service, library)
    old_hash = browse.one_memory(ctx.service, ctx.params["hash"], library).content_hash
    memory = ctx.service.update_memory(old_hash, content=b.content, tags=b.tags, metadata=b.metadata,
                                       importance=b.importance, library=library)
    return {"memory": memory_data(ctx, memory, library),
            "change_ids": browse.changes_since(ctx.service, since, ("update_memory",), library,
                                               lambda e: names_memory(e, old_hash))}


def delete_memory(ctx: Context, q: m.LibraryQuery, body: Any) -> dict[str, Any]:
    library = ctx.library(q.library, "write", "delete_memory")
    memory = browse.one_memory(ctx.service, ctx.params["hash"], library)
    since = browse.newest_change(ctx.service, library)
    removed = ctx.service.delete_memory(memory.content_hash, library=library)
    return {"deleted": [x.content_hash for x in removed],
            "change_ids": browse.changes_since(ctx.service, since, ("delete_memory",), library,
                                               lambda e: names_memory(e, memory.content_hash))}


# -- history and health ---------------------------------------------------------------------


def history(ctx: Context, q: m.HistoryQuery, body: Any) -> dict[str, Any]:
    library = ctx.library(q.library, "read", "history")
    return {"library": library, "entries": [entry_data(e) for e in ctx.service.history(limit=q.limit, library=library)]}


def undo(ctx: Context, q: Any, b: m.LibraryBody) -> dict[str, Any]:
    library = ctx.library(b.library, "write", "undo")
    change_id = ctx.params["id"]
    return {**ctx.service.undo(change_id, library=library), "undone": change_id}


def health(ctx: Context, q: Any, body: Any) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    for library in ctx.libraries():
        try:
            h = ctx.service.health(library=library)
            stats = ctx.service.stats(library=library)
        except MemlociError as exc:
            rows.append({"name": library, "status": "unhealthy", "problems": [exc.message]})
            continue
        s = h.get("statistics", {})
        rows.append({"name": library, "engine": h.get("backend"), "status": h.get("status"),
                     "entities": stats.entities, "observations": stats.observations, "memories": stats.memories,
                     "relations": stats.relations, "size_bytes": stats.size_bytes, "last_backup": s.get("last_backup"),
                     "embedder": h.get("embedder", {}), "backlog": h.get("embedder", {}).get("pending") or 0,
                     "zones": s.get("zones", {}), "problems": h.get("problems", [])})
    return {"libraries": rows, "version": __version__}


SESSION_ANSWER = '{"signed_in", "open", "name", "scopes", "csrf", "libraries": [{"name", "engine", "read", "write"}]}'
MEMORY = "memory_out of mcp/memory.py plus `library`"
ROUTES: list[Endpoint] = [
    Endpoint("GET", "/api/session", get_session, "Who is signed in, the CSRF token, the libraries",
             answer=SESSION_ANSWER, signed_in=False, tags=("session",)),
    Endpoint("POST", "/api/session", sign_in, "Sign in with a token: sets the HttpOnly, SameSite=Strict cookie",
             body=m.SignIn, answer=SESSION_ANSWER, signed_in=False, tags=("session",)),
    Endpoint("DELETE", "/api/session", sign_out, "Sign out", answer='{"signed_in": false}', signed_in=False,
             tags=("session",)),
    Endpoint("GET", "/api/libraries", libraries, "The libraries the caller may read",
             answer='{"libraries": [{"name", "engine", "path" (admins), "read", "write"}]}', tags=("libraries",)),
    Endpoint("GET", "/api/search", find, "Search memories, entities and notes, each hit with why",
             query=m.SearchQuery, answer='{"query", "kind", "memories", "entities", "notes"}', tags=("search",)),
    Endpoint("GET", "/api/memories", list_memories, "A page of memories, filtered and sorted",
             query=m.MemoriesQuery, answer='{"memories", "page", "page_size", "total", "has_more", "tags"}',
             tags=("memories",)),
    Endpoint("POST", "/api/memories", store_memory, "Store a memory (as store_memory)", body=m.NewMemory,
             answer='{"memory": ' + MEMORY + ', "change_id"}', status=201, writes=True, tags=("memories",)),
    Endpoint("GET", "/api/memories/{hash}", get_memory, "One memory and the journal entries naming it",
             query=m.LibraryQuery, answer='{"memory", "history"}', tags=("memories",)),
    Endpoint("PATCH", "/api/memories/{hash}", update_memory, "Change a memory (as update_memory)",
             body=m.MemoryChange, answer='{"memory", "change_ids"}', writes=True, tags=("memories",)),
    Endpoint("DELETE", "/api/memories/{hash}", delete_memory, "Delete a memory (as delete_memory; undoable)",
             query=m.LibraryQuery, answer='{"deleted": [hash], "change_ids"}', writes=True, tags=("memories",)),
    Endpoint("GET", "/api/history", history, "The library's journal, newest first", query=m.HistoryQuery,
             answer='{"entries": [{"id", "at", "tool", "action", "entities", "summary", "undoable"}]}',
             tags=("history",)),
    Endpoint("POST", "/api/history/{id:int}/undo", undo, "Undo a journal entry (as memloci undo)",
             body=m.LibraryBody, answer='{"undone", ...the undo\'s answer}', writes=True, tags=("history",)),
    Endpoint("GET", "/api/health", health, "Libraries, engines, the embedder and its backlog, sizes, last backup",
             answer='{"libraries": [...], "version"}', tags=("health",)),
]
