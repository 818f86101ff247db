"""Free-form memories: the MCP Memory Service tools (same names and reply shapes), plus filters.

store_memory, retrieve_memory, search_by_tag, delete_memory, update_memory, list_memories,
check_database_health.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Annotated, Any

from mcp_types import CallToolResult
from pydantic import BaseModel, BeforeValidator, Field, WithJsonSchema

from memloci.app.projects import ProjectRef
from memloci.core import schema
from memloci.core.errors import ValidationError
from memloci.core.model import Memory, MemoryFilter, links_data
from memloci.mcp.arguments import (
    Compact,
    ConfirmRoot,
    Libraries,
    Library,
    LibraryName,
    MaxTokens,
    ProjectPath,
    selected,
    several,
    tool_annotations,
)
from memloci.mcp.budget import MEMORIES, MEMORY_DETAILS, compact_memory, fit
from memloci.mcp.replies import reply
from memloci.mcp.surface import json_object
from memloci.service.facade import MemoryService
from memloci.service.lifecycle import first_line
from memloci.service.memories import Retrieval


class MemoryOut(BaseModel):  # a compact reply's memories carry content_hash and content alone
    content: str
    content_hash: str
    tags: list[str] | None = None
    memory_type: str | None = None
    importance: str | None = None
    metadata: dict[str, Any] | None = None
    created_at: str | None = None
    updated_at: str | None = None
    access_count: int | None = None
    zone: str | None = None  # retention (rules/retention.py): active, stale, archive-candidate; archived, superseded
    entity: str | None = None
    similarity_score: float | None = None
    why: str | None = None
    # (superseded_by, archived_at and links come only with the memories that have them, as
    # `library` with a search of several libraries: keys beyond the schema cost no tools/list)


class StoreOut(BaseModel):
    success: bool
    message: str
    content_hash: str
    duplicate: bool


class RetrieveOut(BaseModel):  # a search of several libraries adds `library` to each memory (as SearchOut)
    memories: list[MemoryOut]
    query: str
    total_results: int
    time_range: dict[str, Any] | None = None
    note: str | None = None


class TagSearchOut(BaseModel):
    memories: list[MemoryOut]
    search_tags: list[str]
    match_all: bool
    total_results: int
    total_count: int
    offset: int
    is_truncated: bool
    next_offset: int | None = None


class DeleteMemoryOut(BaseModel):
    success: bool
    message: str
    content_hash: str
    deleted: int


class UpdateOut(BaseModel):
    success: bool
    message: str
    content_hash: str
    memory: MemoryOut


class ListOut(BaseModel):
    memories: list[MemoryOut]
    page: int
    page_size: int
    total: int
    has_more: bool


class HealthOut(BaseModel):
    status: str
    backend: str
    library: str
    statistics: dict[str, Any]
    embedder: dict[str, Any]
    problems: list[str]
    timestamp: str


def memory_out(m: Memory, zone: str, score: float | None = None, why: str | None = None) -> dict[str, Any]:
    out = {"content": m.content, "content_hash": m.content_hash, "tags": list(m.tags), "memory_type": m.memory_type,
           "importance": m.importance, "metadata": m.metadata, "created_at": m.created_at,
           "updated_at": m.updated_at, "access_count": m.access_count, "entity": m.entity, "zone": zone}
    if m.superseded_by:  # (kept out of search unless asked: shown where a listing asked for them)
        out["superseded_by"] = m.superseded_by
    if m.archived_at:
        out["archived_at"] = m.archived_at
    if m.links:
        out["links"] = links_data(m.links)
    if score is not None:  # in [0, 1] like min_similarity: boosts beyond 1 order the hits but are not shown
        out["similarity_score"] = round(min(1.0, max(0.0, score)), 4)
        out["why"] = why
    return out


def retrieved(service: MemoryService, result: Retrieval, libraries: list[str] | None = None) -> dict[str, Any]:
    """retrieve_memory's structured content, whole (before compact and max_tokens): what the
    tool replies and `memloci recall --json` prints. `libraries`: the search named several,
    and each hit names its library."""
    memories = [memory_out(h.memory, service.zone_of(h.memory), h.score, h.why) for h in result.hits]
    if libraries is not None:
        memories = [{**m, "library": h.library} for m, h in zip(memories, result.hits, strict=True)]
    structured: dict[str, Any] = {"memories": memories, "query": result.query, "total_results": len(result.hits)}
    if libraries is not None:
        structured["libraries"] = libraries
    if result.time_range is not None:
        after_, before_ = result.time_range.iso()
        structured["time_range"] = {"phrase": result.time_range.phrase, "after": after_, "before": before_,
                                    "latest": result.time_range.latest}
    if result.note:  # said in the reply, so a model does not take these for matches
        structured["note"] = result.note
    return structured


def listed(service: MemoryService, memories: list[Memory], page: int, page_size: int, total: int) -> dict[str, Any]:
    """list_memories' structured content for one page, whole: what the tool replies and
    `memloci memories list --json` prints."""
    return {"memories": [memory_out(m, service.zone_of(m)) for m in memories], "page": page,
            "page_size": page_size, "total": total, "has_more": page * page_size < total}


def listed_by_hash(service: MemoryService, content_hashes: list[str], filters_given: list[str],
                   library: str | ProjectRef | None) -> dict[str, Any]:
    """list_memories' structured content for `content_hashes`, whole: the memories found, in the
    order named, and the hashes `missing`; what the tool replies and `memloci memories list --hash`
    prints. `filters_given`: the names of other filters the caller gave, refused with the hashes."""
    if filters_given:
        raise ValidationError(f"{filters_given[0]}: not with content_hashes, which names the memories itself",
                              hint="Leave out the filters, or content_hashes.")
    memories, missing = service.memories_by_hash(content_hashes, library=library)
    structured: dict[str, Any] = {"memories": [memory_out(m, service.zone_of(m)) for m in memories], "page": 1,
                                  "page_size": len(memories), "total": len(memories), "has_more": False}
    if missing:
        structured["missing"] = missing
    return structured


def fitted(structured: dict[str, Any], max_tokens: int | None, compact: bool, rest: str,
           paged: Callable[[dict[str, Any], int], None] | None = None) -> dict[str, Any]:
    """A memory read's reply, compact if asked, fitted to max_tokens (mcp/budget.py); `rest` says
    how to get what is left out (besides a larger max_tokens), `paged` sets the paging fields."""
    memories = structured["memories"]
    if compact:
        memories = [compact_memory(m) for m in memories]
        structured = {**structured, "details": MEMORY_DETAILS}

    def finish(kept: list[dict[str, Any]], omitted: int) -> dict[str, Any]:
        out = {**structured, "memories": kept}
        if "total_results" in out:
            out["total_results"] = len(kept)
        if omitted:
            if paged is not None:
                paged(out, len(kept))
            out["more"] = f"{omitted} more {'memory' if omitted == 1 else 'memories'} left out: {rest}, or a larger max_tokens"
        return out

    return fit(memories, MEMORIES, max_tokens, finish)


TOOLS = ("store_memory", "retrieve_memory", "search_by_tag", "delete_memory", "update_memory", "list_memories",
         "check_database_health")
Tags = list[str] | None
# Calls the embedding worker does not give way to (search/embedder.py REQUESTS): a store's reply
# needs little of the cores, the worker runs at a lower priority, and a client storing turn after
# turn would otherwise leave every vector until it stops.
NOT_WAITED_FOR = frozenset({"store_memory"})


# A free JSON object, advertised as its JSON text: strict converters close every object schema, so
# text is the one form a strict model can fill. An object is accepted too.
Metadata = Annotated[dict[str, Any] | None, BeforeValidator(json_object), WithJsonSchema({
    "type": "string", "description": 'JSON object text kept with the memory: {"source": "chat"}'})]
MetadataMerge = Annotated[dict[str, Any] | None, BeforeValidator(json_object), WithJsonSchema({
    "type": "string", "description": "JSON object text merged into the metadata"})]


def register(server: Any, service: MemoryService) -> None:
    def store_memory(
        content: Annotated[str, Field(description="The text to remember, in your own words")],
        tags: Tags = None,
        memory_type: Annotated[str, Field(description="Kind: note, decision, fact, todo, dialogue, ...")] = "note",
        metadata: Metadata = None,
        importance: Annotated[str | None, Field(description="critical, high, medium (default) or low")] = None,
        entity: Annotated[str | None, Field(description="Entity this memory is an observation of")] = None,
        supersedes: str | None = None,
        library: Library = None, library_name: LibraryName = None,
        project_path: ProjectPath = None, confirm_new_project_root: ConfirmRoot = None,
        client_hostname: str | None = None,
    ) -> Annotated[CallToolResult, StoreOut]:
        if client_hostname:  # what the MCP Memory Service's clients send; it keeps it as a tag
            tags = [*(tags or ()), f"source:{client_hostname}"]
        where = selected(library, library_name, project_path, confirm_new_project_root)
        memory, created = service.store_memory(content, tags=tags or (), memory_type=memory_type, metadata=metadata,
                                               importance=importance, entity=entity, supersedes=supersedes,
                                               library=where)
        added = [t for t in (tags or ()) if t in memory.tags] if not created else []
        message = ("Memory stored successfully" if created else "Duplicate content: this memory is already stored"
                   + (f" (its tags now include {', '.join(added)})" if added else ""))
        similar = service.memories.similar_to(memory, library=where) if created else []
        if similar:  # a near duplicate is said, never merged: cleanup_duplicates(similar=true) merges on request
            n = len(similar)
            message += (f"; {n} similar memor{'y' if n == 1 else 'ies'}: "
                        + "; ".join(f'"{first_line(m.content, 80)}" ({m.content_hash[:12]})' for m, _ in similar))
        structured: dict[str, Any] = {"success": True, "message": message, "content_hash": memory.content_hash,
                                      "duplicate": not created}
        mentions = list(dict.fromkeys(link.entity for link in memory.links if link.entity))
        if mentions:  # the existing entities a free memory mentions (service/extraction.py); a key StoreOut leaves open
            structured["mentions"] = mentions
        if similar:  # (a key StoreOut leaves open, as mentions)
            structured["similar"] = [{"content_hash": m.content_hash, "content": first_line(m.content),
                                      "similarity": score} for m, score in similar]
        return reply(structured)

    def retrieve_memory(
        query: Annotated[str, Field(description="What to recall, in words")],
        n_results: Annotated[int, Field(ge=1, le=schema.SEARCH_LIMIT_MAX, description="How many memories")] = 5,
        min_similarity: Annotated[float, Field(ge=0, le=1, description="Drop hits whose similarity_score "
                                                                       "is below this")] = 0.0,
        tags: Tags = None,
        match_all: Annotated[bool, Field(description="With tags: require every tag (default: any)")] = False,
        memory_type: str | None = None,
        entity: Annotated[str | None, Field(description="Only observations of this entity")] = None,
        after: Annotated[str | None, Field(description="ISO date: created at or after")] = None,
        before: Annotated[str | None, Field(description="ISO date: created before")] = None,
        time: Annotated[str | None, Field(description="Filter: yesterday, last week, in March, latest, "
                                                       "昨日, ...")] = None,
        max_tokens: MaxTokens = None, compact: Compact = False,
        include_superseded: bool = False,
        library: Libraries = None, library_name: LibraryName = None,
        project_path: ProjectPath = None, confirm_new_project_root: ConfirmRoot = None,
    ) -> Annotated[CallToolResult, RetrieveOut]:
        names = several(library, service.libraries.names(), library_name, project_path, confirm_new_project_root)
        if names is not None:  # each hit names its library
            result = service.retrieve_memory_across(
                query, libraries=names, n_results=n_results, min_similarity=min_similarity, tags=tags or (),
                match_all=match_all, memory_type=memory_type, entity=entity, after=after, before=before, time=time,
                include_superseded=include_superseded)
        else:
            assert not isinstance(library, list)  # several() took every list
            result = service.retrieve_memory(query, n_results=n_results, min_similarity=min_similarity, tags=tags or (),
                                             match_all=match_all, memory_type=memory_type, entity=entity, after=after,
                                             before=before, time=time, include_superseded=include_superseded,
                                             library=selected(library, library_name, project_path, confirm_new_project_root))
        return reply(fitted(retrieved(service, result, names), max_tokens, compact,
                            "fewer n_results or a narrower query"))

    def search_by_tag(
        tags: Annotated[list[str], Field(description="Tags to look for")],
        match_all: Annotated[bool, Field(description="Require every tag (default: any)")] = False,
        limit: Annotated[int, Field(ge=1, le=schema.PAGE_MAX, description="Memories per page")] = 100,
        offset: Annotated[int, Field(ge=0, le=schema.OFFSET_MAX, description="Memories to skip (the next page)")] = 0,
        max_tokens: MaxTokens = None, compact: Compact = False,
        library: Library = None, library_name: LibraryName = None,
        project_path: ProjectPath = None, confirm_new_project_root: ConfirmRoot = None,
    ) -> Annotated[CallToolResult, TagSearchOut]:
        found, total = service.search_by_tag_page(
            tags, match_all=match_all, limit=limit, offset=offset,
            library=selected(library, library_name, project_path, confirm_new_project_root))
        structured: dict[str, Any] = {"memories": [memory_out(m, service.zone_of(m)) for m in found], "search_tags": tags,
                                      "match_all": match_all, "total_results": len(found), "total_count": total,
                                      "offset": offset, "is_truncated": offset + len(found) < total}

        def paged(out: dict[str, Any], kept: int) -> None:
            out["is_truncated"] = offset + kept < total
            if out["is_truncated"]:
                out["next_offset"] = offset + kept

        paged(structured, len(found))
        return reply(fitted(structured, max_tokens, compact, "the next page (next_offset)", paged))

    def delete_memory(
        content_hash: Annotated[str, Field(description="The content_hash a store or search returned")],
        library: Library = None, library_name: LibraryName = None,
        project_path: ProjectPath = None, confirm_new_project_root: ConfirmRoot = None,
    ) -> Annotated[CallToolResult, DeleteMemoryOut]:
        removed = service.delete_memory(content_hash, library=selected(library, library_name, project_path, confirm_new_project_root))
        message = "Memory deleted successfully" if removed else "No memory with this hash (nothing to delete)"
        return reply({"success": bool(removed), "message": message, "content_hash": content_hash, "deleted": len(removed)})

    def update_memory(
        content_hash: Annotated[str, Field(description="The memory to change")],
        content: Annotated[str | None, Field(description="New text (the hash changes)")] = None,
        tags: Annotated[list[str] | None, Field(description="New tags, replacing the old ones")] = None,
        metadata: MetadataMerge = None,
        importance: Annotated[str | None, Field(description="critical, high, medium or low")] = None,
        supersedes: str | None = None,
        library: Library = None, library_name: LibraryName = None,
        project_path: ProjectPath = None, confirm_new_project_root: ConfirmRoot = None,
    ) -> Annotated[CallToolResult, UpdateOut]:
        memory = service.update_memory(content_hash, content=content, tags=tags, metadata=metadata,
                                       importance=importance, supersedes=supersedes, library=selected(library, library_name, project_path, confirm_new_project_root))
        return reply({"success": True, "message": "Memory updated successfully", "content_hash": memory.content_hash,
                      "memory": memory_out(memory, service.zone_of(memory))})

    def list_memories(
        page: Annotated[int, Field(ge=1, le=schema.OFFSET_MAX)] = 1,
        page_size: Annotated[int, Field(ge=1, le=schema.PAGE_MAX)] = 10,
        tags: Tags = None,
        memory_type: str | None = None,
        entity: str | None = None,
        after: Annotated[str | None, Field(description="ISO date: created at or after")] = None,
        before: Annotated[str | None, Field(description="ISO date: created before")] = None,
        time: Annotated[str | None, Field(description="Only this time: last week, November, "
                                                       "2026-10, 先週, ...")] = None,
        content_hashes: Annotated[list[str] | None, Field(description="Only these, whole (after compact)")] = None,
        max_tokens: MaxTokens = None, compact: Compact = False,
        include_superseded: bool = False, include_archived: bool = False,
        library: Library = None, library_name: LibraryName = None,
        project_path: ProjectPath = None, confirm_new_project_root: ConfirmRoot = None,
    ) -> Annotated[CallToolResult, ListOut]:
        where = selected(library, library_name, project_path, confirm_new_project_root)
        if content_hashes is not None:
            given = [n for n, v in (("tags", tags), ("memory_type", memory_type), ("entity", entity), ("after", after),
                                    ("before", before), ("time", time)) if v] + (["page"] if page != 1 else [])
            return reply(fitted(listed_by_hash(service, content_hashes, given, where), max_tokens, compact,
                                "fewer content_hashes"))
        memories, total = service.list_memories(
            page=page, page_size=page_size,
            filters=MemoryFilter(tuple(tags or ()), False, memory_type, entity, after, before, include_superseded,
                                 include_archived), time=time,
            library=where)
        return reply(fitted(listed(service, memories, page, page_size, total), max_tokens, compact,
                            "a smaller page_size"))

    def check_database_health(library: Library = None, library_name: LibraryName = None,
        project_path: ProjectPath = None, confirm_new_project_root: ConfirmRoot = None) -> Annotated[CallToolResult, HealthOut]:
        health = service.health(library=selected(library, library_name, project_path, confirm_new_project_root))
        health["timestamp"] = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return reply(health)

    server.add_tool(store_memory, title="Store Memory", annotations=tool_annotations("Store Memory", idempotent=True), description=(
        "Remember a text with optional tags, type, importance and metadata; the same text again (spacing aside) "
        "is kept once and reported a duplicate. Returns its content_hash.\n"
        'Example: {"content": "We chose OAuth with PKCE", "tags": ["auth"], "memory_type": "decision"}'))
    # read-only for the user's data: a recall only counts accesses (which drive ranking), so clients may auto-approve it
    server.add_tool(retrieve_memory, title="Retrieve Memory",
                    annotations=tool_annotations("Retrieve Memory", read_only=True), description=(
        "Recall memories by meaning and keywords, newest and most used ranked up. A time phrase in "
        "the query (\"last week\") ranks that range first; a date (\"on 8 May, 2023\"), memories whose metadata.date "
        "falls in it or up to 8 days after. Filters (time, tags, type, entity) are strict: if nothing in them matches, "
        "the reply lists what they hold, newest first, with a `note`. Each hit has why and a similarity_score in "
        "[0, 1].\n"
        'Example: {"query": "what did we decide about OAuth?"}'))
    server.add_tool(search_by_tag, title="Search By Tag", annotations=tool_annotations("Search By Tag", read_only=True, idempotent=True), description=(
        "Memories carrying any of the tags, newest first, a page at a time (next_offset).\n"
        'Example: {"tags": ["auth", "refactor"], "match_all": true}'))
    server.add_tool(delete_memory, title="Delete Memory", annotations=tool_annotations("Delete Memory", destructive=True, idempotent=True), description=(
        "Delete the memory with this content_hash (the journal keeps its text).\n"
        'Example: {"content_hash": "3f2a..."}'))
    server.add_tool(update_memory, title="Update Memory", annotations=tool_annotations("Update Memory", destructive=True, idempotent=True), description=(
        "Change a memory's text, tags, metadata or importance; the journal keeps the old version.\n"
        'Example: {"content_hash": "3f2a...", "tags": ["auth", "done"], "importance": "low"}'))
    server.add_tool(list_memories, title="List Memories", annotations=tool_annotations("List Memories", read_only=True, idempotent=True), description=(
        "Page through memories, newest first, optionally filtered by tags, type, entity or date.\n"
        'Example: {"page": 1, "page_size": 20, "tags": ["decision"]}'))
    server.add_tool(check_database_health, title="Check Database Health",
                    annotations=tool_annotations("Check Database Health", read_only=True, idempotent=True), description=(
        "Library statistics, retention zones, and the embedder: which model is loaded, whether search is "
        "hybrid or lexical only, and why."))
