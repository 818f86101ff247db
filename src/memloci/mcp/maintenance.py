"""The maintenance tool group (`--tools ...,maintenance`; not in the default surface): the MCP
Memory Service's maintenance tools under their names and argument shapes, and the lifecycle's
own. Every change is a preview (`dry_run: true`, kept with an id that execute_preview takes) or
executed at once, one journal entry each, undone with `memloci undo`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp_types import CallToolResult
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema

from memloci.core.errors import ValidationError
from memloci.mcp.arguments import Library, LibraryName, selected, tool_annotations
from memloci.mcp.replies import reply
from memloci.mcp.surface import json_object
from memloci.service.facade import MemoryService
from memloci.service.lifecycle import Outcome, older_than_cutoff

TOOLS = ("delete_by_tag", "delete_by_timeframe", "delete_before_date", "cleanup_duplicates", "update_memory_metadata",
         "memory_cleanup", "list_tags", "knowledge_analysis", "knowledge_export", "archive_memories", "unarchive_memories",
         "consolidate", "garbage_collect_relations", "execute_preview", "list_previews")


class Out(BaseModel):
    model_config = ConfigDict(extra="allow")


Tags = Annotated[list[str] | str, Field(description="Tags (a list, or comma-separated text)")]
DryRun = Annotated[bool, Field(description="true: a preview (changes nothing; execute_preview applies it)")]
Updates = Annotated[dict[str, Any], BeforeValidator(json_object), WithJsonSchema({
    "type": "string", "description": 'JSON object text: {"tags": [...], "memory_type": "...", "metadata": {...}, '
                                     '"importance": "high"}'})]
Filters = Annotated[dict[str, Any] | None, BeforeValidator(json_object), WithJsonSchema({
    "type": "string", "description": 'JSON object text: {"tags": [...], "query": "...", "include_archived": false}'})]


ITEMS_SHOWN = 200  # items a reply lists (the preview keeps them all): 10,000 overflow a client's 1 MB event


def listed(data: dict[str, Any]) -> dict[str, Any]:
    """An outcome's data (Outcome.to_data, or a consolidation run's answer) as a tool's reply:
    how to execute a preview, the first ITEMS_SHOWN items, `offered` and `report` only when
    there is something in them."""
    items = data["items"]
    how = f" Execute it with execute_preview(preview_id={data['preview_id']})." if data.get("preview_id") else ""
    return {"success": True, **{k: v for k, v in data.items() if k not in ("offered", "report") or v},
            "message": data["message"] + how, "items": items[:ITEMS_SHOWN],
            **({"items_not_shown": len(items) - ITEMS_SHOWN} if len(items) > ITEMS_SHOWN else {})}


def outcome(o: Outcome) -> dict[str, Any]:
    return listed(o.to_data())


def register(server: Any, service: MemoryService) -> None:
    life = service.lifecycle

    def delete_by_tag(tags: Tags, match_all: bool = False, dry_run: DryRun = False,
                      library: Library = None, library_name: LibraryName = None) -> Annotated[CallToolResult, Out]:
        return reply(outcome(life.delete_by_tag(tags, match_all=match_all, dry_run=dry_run,
                                                library=selected(library, library_name))))

    def delete_by_timeframe(start_date: Annotated[str, Field(description="YYYY-MM-DD (inclusive)")],
                            end_date: Annotated[str | None, Field(description="YYYY-MM-DD (exclusive)")] = None,
                            tag: str | None = None, dry_run: DryRun = False,
                            library: Library = None, library_name: LibraryName = None) -> Annotated[CallToolResult, Out]:
        return reply(outcome(life.delete_by_time(start=start_date, end=end_date, tag=tag, dry_run=dry_run,
                                                 library=selected(library, library_name))))

    def delete_before_date(before_date: Annotated[str, Field(description="YYYY-MM-DD")], tag: str | None = None,
                           dry_run: DryRun = False,
                           library: Library = None, library_name: LibraryName = None) -> Annotated[CallToolResult, Out]:
        return reply(outcome(life.delete_by_time(start=None, end=before_date, tag=tag, dry_run=dry_run,
                                                 library=selected(library, library_name),
                                                 kind_args={"before_date": before_date, "tag": tag},
                                                 names=("start_date", "before_date"))))

    def cleanup_duplicates(similar: Annotated[bool, Field(description="merge near duplicates too (else offered)")] = False,
                           dry_run: DryRun = False,
                           library: Library = None, library_name: LibraryName = None) -> Annotated[CallToolResult, Out]:
        return reply(outcome(service.cleanup_duplicates(similar=similar, dry_run=dry_run,
                                                        library=selected(library, library_name))))

    def update_memory_metadata(content_hash: str, updates: Updates,
                               preserve_timestamps: bool = True, dry_run: DryRun = False,
                               library: Library = None, library_name: LibraryName = None) -> Annotated[CallToolResult, Out]:
        return reply(outcome(life.update_metadata(content_hash, updates, preserve_timestamps=preserve_timestamps,
                                                  dry_run=dry_run, library=selected(library, library_name))))

    def memory_cleanup(older_than: Annotated[str | None, Field(description='archive older: "6 months", "1 year"')] = None,
                       similarity_threshold: Annotated[float | None, Field(ge=0.5, le=1.0)] = None,
                       library: Library = None, library_name: LibraryName = None) -> Annotated[CallToolResult, Out]:
        cutoff = older_than_cutoff(older_than, service.clock()) if older_than else None
        return reply(outcome(service.memory_cleanup(cutoff=cutoff, threshold=similarity_threshold,
                                                    library=selected(library, library_name))))

    def list_tags(library: Library = None, library_name: LibraryName = None) -> Annotated[CallToolResult, Out]:
        tags = life.tags(library=selected(library, library_name))
        return reply({"tags": [{"tag": t, "count": n} for t, n in tags], "total_tags": len(tags)})

    def knowledge_analysis(tags: list[str] | None = None,
                           time_range: Annotated[str | None, Field(description='"last month", "2026"...')] = None,
                           library: Library = None, library_name: LibraryName = None) -> Annotated[CallToolResult, Out]:
        after = before = None
        if time_range and time_range.strip().casefold() != "all time":
            after, before = service.time_range(time_range, field="time_range")
        return reply(life.analysis(tags=tags or (), after=after, before=before, library=selected(library, library_name)))

    def knowledge_export(format: Literal["json", "markdown", "text"] = "json", filters: Filters = None,
                         library: Library = None, library_name: LibraryName = None) -> Annotated[CallToolResult, Out]:
        f = filters or {}
        unknown = set(f) - {"tags", "query", "include_archived"}
        if unknown:
            raise ValidationError(f"filters: unknown key(s) {', '.join(sorted(unknown))} "
                                  "(allowed: tags, query, include_archived)")
        text = service.knowledge_export(format, tags=f.get("tags") or [], query=f.get("query"),
                                        include_archived=f.get("include_archived", False),
                                        library=selected(library, library_name))
        return reply({"format": format, "export": text})

    def archive_memories(dry_run: Annotated[bool, Field(description="false: archive now")] = True,
                         library: Library = None, library_name: LibraryName = None) -> Annotated[CallToolResult, Out]:
        return reply(outcome(service.archive_memories(dry_run=dry_run, library=selected(library, library_name))))

    def unarchive_memories(content_hashes: list[str], dry_run: DryRun = False,
                           library: Library = None, library_name: LibraryName = None) -> Annotated[CallToolResult, Out]:
        return reply(outcome(life.unarchive(content_hashes, dry_run=dry_run, library=selected(library, library_name))))

    def consolidate(time_horizon: Literal["daily", "weekly", "monthly", "quarterly", "yearly"] = "weekly",
                    dry_run: Annotated[bool, Field(description="false: apply (supersessions stay offered)")] = True,
                    library: Library = None, library_name: LibraryName = None) -> Annotated[CallToolResult, Out]:
        return reply(listed(service.consolidate_off_path(time_horizon, dry_run=dry_run,
                                                          library=selected(library, library_name))))

    def garbage_collect_relations(dry_run: Annotated[bool, Field(description="true: list them (a preview)")] = True,
                                  library: Library = None,
                                  library_name: LibraryName = None) -> Annotated[CallToolResult, Out]:
        return reply(outcome(life.garbage_collect_relations(dry_run=dry_run, library=selected(library, library_name))))

    def execute_preview(preview_id: int, library: Library = None,
                        library_name: LibraryName = None) -> Annotated[CallToolResult, Out]:
        return reply(outcome(life.execute_preview(preview_id, library=selected(library, library_name))))

    def list_previews(pending: bool = True, library: Library = None,
                      library_name: LibraryName = None) -> Annotated[CallToolResult, Out]:
        return reply({"previews": life.previews(pending=pending, library=selected(library, library_name))})

    destructive = tool_annotations
    server.add_tool(delete_by_tag, title="Delete By Tag", annotations=destructive("Delete By Tag", destructive=True),
                    description="Delete the memories with any of the tags (match_all: all of them). Undoable.")
    server.add_tool(delete_by_timeframe, title="Delete By Timeframe",
                    annotations=destructive("Delete By Timeframe", destructive=True),
                    description="Delete the memories created from start_date up to end_date, with tag if given.")
    server.add_tool(delete_before_date, title="Delete Before Date",
                    annotations=destructive("Delete Before Date", destructive=True),
                    description="Delete the memories created before before_date, with tag if given.")
    server.add_tool(cleanup_duplicates, title="Cleanup Duplicates",
                    annotations=destructive("Cleanup Duplicates", destructive=True),
                    description="Merge duplicate memories into the oldest (tags and uses kept); near duplicates "
                                "by meaning are offered.")
    server.add_tool(update_memory_metadata, title="Update Memory Metadata",
                    annotations=destructive("Update Memory Metadata", idempotent=True),
                    description="Change a memory's tags, memory_type, metadata or importance; its text stays.")
    server.add_tool(memory_cleanup, title="Memory Cleanup", annotations=destructive("Memory Cleanup"),
                    description="Preview a cleanup: duplicates to merge, memories older_than to archive.")
    server.add_tool(list_tags, title="List Tags", annotations=destructive("List Tags", read_only=True, idempotent=True),
                    description="Every tag with how many memories carry it.")
    server.add_tool(knowledge_analysis, title="Knowledge Analysis",
                    annotations=destructive("Knowledge Analysis", read_only=True, idempotent=True),
                    description="Counts by tag, type, importance, month and state; duplicates.")
    server.add_tool(knowledge_export, title="Knowledge Export",
                    annotations=destructive("Knowledge Export", read_only=True, idempotent=True),
                    description="The memories as json, markdown or text.")
    server.add_tool(archive_memories, title="Archive Memories", annotations=destructive("Archive Memories"),
                    description="Move memories past their retention (not important, used or pinned) into the "
                                "archive, out of search; a preview by default.")
    server.add_tool(unarchive_memories, title="Unarchive Memories", annotations=destructive("Unarchive Memories"),
                    description="Bring archived memories back into search.")
    server.add_tool(consolidate, title="Consolidate", annotations=destructive("Consolidate"),
                    description="Link related memories, summarize clusters, propose supersessions of contradicted "
                                "ones, archive stale ones; runs at low priority.")
    server.add_tool(garbage_collect_relations, title="Garbage Collect Relations",
                    annotations=destructive("Garbage Collect Relations", destructive=True),
                    description="Links to entities that no longer exist, with where each is. dry_run=false cleans "
                                "them: relations entries removed, [[links]] made plain text.")
    server.add_tool(execute_preview, title="Execute Preview", annotations=destructive("Execute Preview", destructive=True),
                    description="Apply a preview exactly; refused if its memories changed since.")
    server.add_tool(list_previews, title="List Previews",
                    annotations=destructive("List Previews", read_only=True, idempotent=True),
                    description="The previews waiting to be executed (pending=false: all).")
