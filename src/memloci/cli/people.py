"""The commands for a person reading and tending memories: `memloci recall`, `memloci memories
list|show|edit|delete` and `memloci search` across memories, entities and notes.

Each answers as its tool does: `recall` is retrieve_memory and `memories list` is list_memories,
with the same filters, order and fields (`--json` prints the tool's structured content, built
by the same functions of mcp/memory.py); a table otherwise. Reads never create a library; an
edit or a delete is one journal entry, undone with `memloci undo ID`."""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import typer

from memloci.cli.common import (
    LibrariesOpt,
    LibraryOpt,
    check_choice,
    counted,
    fail,
    not_created,
    open_console,
    open_service,
)
from memloci.core.errors import MemlociError, NotFoundError, ValidationError
from memloci.core.model import Memory, MemoryFilter
from memloci.service.browse import changes_since, newest_change
from memloci.service.history import names_memory
from memloci.service.lifecycle import first_line

memories_app = typer.Typer(help="Free memories and observations: list, show, edit, delete.",
                           no_args_is_help=True, rich_markup_mode=None)

TagOpt = Annotated[list[str] | None, typer.Option("--tag", "-t", help="Only memories with this tag (repeatable; "
                                                                       "any of them unless --all-tags).")]
TypeOpt = Annotated[str | None, typer.Option("--type", help="Only memories of this type (note, decision, fact, ...).")]
EntityOpt = Annotated[str | None, typer.Option("--entity", help="Only observations of this entity.")]
AfterOpt = Annotated[str | None, typer.Option("--after", help="ISO date: created at or after.")]
BeforeOpt = Annotated[str | None, typer.Option("--before", help="ISO date: created before.")]
TimeOpt = Annotated[str | None, typer.Option("--time", help='A time phrase: "last week", "in March", "2026-10".')]
SupersededOpt = Annotated[bool, typer.Option("--include-superseded", help="Also memories another one replaced.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the tool's structured content as JSON.")]
SearchLibraryOpt = Annotated[str | None, typer.Option(
    "--library", "-l", help="Library to search when several are mounted; a comma list, or '*' for all, searches "
                            "several (each hit names its library), as the tools' library does.")]

# the service's field names as these commands' options, for a refusal
FILTER_OPTIONS = {"tags": "--tag", "memory_type": "--type", "entity": "--entity", "after": "--after",
                  "before": "--before", "time": "--time", "query": "QUERY", "content_hash": "HASH",
                  "content_hashes[0]": "HASH"}


def _memory_table(memories: list[dict[str, Any]], *, scored: bool, title: str | None = None) -> Any:
    from rich.table import Table

    columns = (["score"] if scored else []) + ["when", "type", "tags", "zone", "text", "hash"]
    table = Table(*columns, title=title)
    for m in memories:
        row = [f"{m['similarity_score']:.2f}"] if scored else []
        row += [m["created_at"][:16].replace("T", " "), m["memory_type"], ", ".join(m["tags"]), m["zone"],
                first_line(m["content"], 80), m["content_hash"]]
        table.add_row(*row)
    return table


def several(service: Any, library: str | None) -> list[str] | None:
    """The libraries `-l A,B` or `-l '*'` names (as the tools' list or "*"); None: one library."""
    from memloci.service.across import selection

    if library is None or ("," not in library and library.strip() != "*"):
        return None
    return selection([n.strip() for n in library.split(",")], service.libraries.names())


def _print_json(data: Any) -> None:
    print(json.dumps(data, ensure_ascii=False, indent=2))


def recall(
    query: Annotated[str, typer.Argument(help="What to recall, in words.")],
    limit: Annotated[int, typer.Option("--limit", "-n", help="How many memories.")] = 5,
    tag: TagOpt = None,
    all_tags: Annotated[bool, typer.Option("--all-tags", help="With --tag: require every tag.")] = False,
    memory_type: TypeOpt = None,
    entity: EntityOpt = None,
    after: AfterOpt = None,
    before: BeforeOpt = None,
    time: TimeOpt = None,
    min_similarity: Annotated[float, typer.Option("--min-similarity", help="Drop hits scoring below this (0 to 1).")]
    = 0.0,
    include_superseded: SupersededOpt = False,
    as_json: JsonOpt = False,
    libraries: LibrariesOpt = None,
    library: SearchLibraryOpt = None,
) -> None:
    """Recall memories as the retrieve_memory tool does: the same filters, order and scores."""
    from memloci.mcp.memory import retrieved

    structured: dict[str, Any] | None = None
    try:
        if not 0.0 <= min_similarity <= 1.0:
            raise ValidationError(f"min_similarity: must be between 0 and 1, got {min_similarity}")
        service = open_service(libraries, read_only=True, embedder=True)
        try:
            filters: dict[str, Any] = dict(n_results=limit, min_similarity=min_similarity, tags=tag or (),
                                           match_all=all_tags, memory_type=memory_type, entity=entity, after=after,
                                           before=before, time=time, include_superseded=include_superseded)
            names = several(service, library)
            if names is not None:
                structured = retrieved(service, service.retrieve_memory_across(query, libraries=names, **filters), names)
            else:
                structured = retrieved(service, service.retrieve_memory(query, library=library, **filters))
        finally:
            service.close()  # the retrieval's access counts are written, as the tool's are
    except MemlociError as exc:
        if not not_created(exc):
            fail(exc, {**FILTER_OPTIONS, "n_results": "-n/--limit", "min_similarity": "--min-similarity",
                       "library": "-l/--library"})
    if as_json:
        _print_json(structured or {"memories": [], "query": query, "total_results": 0})
        return
    console = open_console()
    if structured is None or not structured["memories"]:
        console.print(structured["note"] if structured and structured.get("note") else "No memory found.",
                      highlight=False)
        return
    console.print(_memory_table(structured["memories"], scored=True))
    if structured.get("time_range"):
        span = structured["time_range"]
        console.print(f"time: {span['phrase']} ({span['after'] or '…'} to {span['before'] or '…'})", highlight=False)
    if structured.get("note"):
        console.print(structured["note"], highlight=False)


@memories_app.command("list")
def list_cmd(
    page: Annotated[int, typer.Option("--page", help="Which page, from 1.")] = 1,
    page_size: Annotated[int, typer.Option("--page-size", help="Memories per page.")] = 20,
    tag: Annotated[list[str] | None, typer.Option("--tag", "-t", help="Only memories with this tag (repeatable: "
                                                                     "any of them).")] = None,
    memory_type: TypeOpt = None,
    entity: EntityOpt = None,
    after: AfterOpt = None,
    before: BeforeOpt = None,
    time: TimeOpt = None,
    include_superseded: SupersededOpt = False,
    include_archived: Annotated[bool, typer.Option("--include-archived", help="Also the archive.")] = False,
    content_hash: Annotated[list[str] | None, typer.Option("--hash", help="Only the memory with this content_hash "
                                                                          "(repeatable; not with the filters).")]
    = None,
    as_json: JsonOpt = False,
    libraries: LibrariesOpt = None,
    library: LibraryOpt = None,
) -> None:
    """Page through memories, newest first, as the list_memories tool does (`--hash`: as its
    content_hashes, the memories named, in that order)."""
    from memloci.mcp.memory import listed, listed_by_hash

    structured: dict[str, Any] | None = None
    try:
        service = open_service(libraries, read_only=True)
        try:
            if content_hash:
                given = [n for n, v in (("tags", tag), ("memory_type", memory_type), ("entity", entity),
                                        ("after", after), ("before", before), ("time", time)) if v]
                structured = listed_by_hash(service, content_hash, given + (["page"] if page != 1 else []), library)
            else:
                memories, total = service.list_memories(
                    page=page, page_size=page_size,
                    filters=MemoryFilter(tuple(tag or ()), False, memory_type, entity, after, before,
                                         include_superseded, include_archived), time=time, library=library)
                structured = listed(service, memories, page, page_size, total)
        finally:
            service.close()
    except MemlociError as exc:
        if not not_created(exc):
            fail(exc, {**FILTER_OPTIONS, "page": "--page", "page_size": "--page-size", "content_hashes": "--hash"})
    if structured is None:
        structured = {"memories": [], "page": page, "page_size": page_size, "total": 0, "has_more": False}
    if as_json:
        _print_json(structured)
        return
    console = open_console()
    if structured.get("missing"):
        open_console(stderr=True).print(f"No memory has hash {', '.join(structured['missing'])}", highlight=False)
    if not structured["memories"]:
        console.print("No memory." if page == 1 else f"No memory on page {page} ({counted(structured['total'], 'memories')}).",
                      highlight=False)
        return
    first = (page - 1) * page_size + 1
    title = f"{first}-{first + len(structured['memories']) - 1} of {counted(structured['total'], 'memories')}"
    console.print(_memory_table(structured["memories"], scored=False, title=title))
    if structured["has_more"]:
        console.print(f"Next page: --page {page + 1}", highlight=False)


def _one(service: Any, content_hash: str, library: str | None) -> Memory:
    found, _ = service.memories_by_hash([content_hash], library=library)
    if not found:
        raise NotFoundError(f"content_hash: no memory has hash {content_hash.strip()}",
                            hint="Find it with memloci recall or memloci memories list; they show each hash.")
    return found[0]


@memories_app.command("show")
def show(
    content_hash: Annotated[str, typer.Argument(metavar="HASH", help="The memory's content_hash.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print it as list_memories shows a memory.")] = False,
    libraries: LibrariesOpt = None,
    library: LibraryOpt = None,
) -> None:
    """One memory with every field: text, tags, type, importance, metadata, dates, use, zone, links."""
    from rich.table import Table

    from memloci.mcp.memory import memory_out

    try:
        service = open_service(libraries, read_only=True)
        try:
            data = memory_out(memory := _one(service, content_hash, library), service.zone_of(memory))
        finally:
            service.close()
    except MemlociError as exc:
        fail(exc, FILTER_OPTIONS)
    if as_json:
        _print_json(data)
        return
    table = Table("field", "value", show_header=False)
    for key in ("content_hash", "memory_type", "tags", "importance", "zone", "entity", "created_at", "updated_at",
                "access_count", "superseded_by", "archived_at"):
        value = data.get(key)
        if value is None or value == [] or (key == "entity" and not value):
            continue
        table.add_row(key, ", ".join(value) if isinstance(value, list) else str(value))
    if memory.last_accessed_at:
        table.add_row("last_accessed_at", memory.last_accessed_at)
    if data["metadata"]:
        table.add_row("metadata", json.dumps(data["metadata"], ensure_ascii=False))
    for link in data.get("links", []):
        target = link.get("entity") or link.get("memory") or ""
        table.add_row("link", f"{link.get('type', '')} {target}" + (f" ({link['score']})" if "score" in link else ""))
    console = open_console()
    console.print(table)
    console.print(data["content"], highlight=False)


def _undo_hint(ids: list[int]) -> str:
    return "Undo it with: " + "; ".join(f"memloci undo {i}" for i in reversed(ids))


@memories_app.command("edit")
def edit(
    content_hash: Annotated[str, typer.Argument(metavar="HASH", help="The memory's content_hash.")],
    content: Annotated[str | None, typer.Option("--content", help="New text (the hash changes).")] = None,
    tags: Annotated[str | None, typer.Option("--tags", help='New tags, replacing the old ones: "a,b" ("" for none).')]
    = None,
    importance: Annotated[str | None, typer.Option("--importance", help="critical, high, medium or low.")] = None,
    metadata: Annotated[str | None, typer.Option("--metadata", help='A JSON object merged into the metadata: '
                                                                    '{"source": "chat"}.')] = None,
    supersedes: Annotated[str | None, typer.Option("--supersedes", help="The hash of an older memory this one "
                                                                        "replaces.")] = None,
    libraries: LibrariesOpt = None,
    library: LibraryOpt = None,
) -> None:
    """Change a memory as the update_memory tool does; one journal entry, undone with `memloci undo`."""
    options = {**FILTER_OPTIONS, "content": "--content", "tags": "--tags", "importance": "--importance",
               "metadata": "--metadata", "supersedes": "--supersedes", "update_memory": "memories edit"}
    try:
        meta = _metadata(metadata)
        tag_list = None if tags is None else [t.strip() for t in tags.split(",") if t.strip()]
        if content is None and tag_list is None and meta is None and importance is None and supersedes is None:
            raise ValidationError("memories edit: give at least one of --content, --tags, --importance, --metadata, "
                                  "--supersedes")
        service = open_service(libraries)
        try:
            old = _one(service, content_hash, library).content_hash  # an unknown hash refused as a person reads it
            since = newest_change(service, library)
            memory = service.update_memory(old, content=content, tags=tag_list, metadata=meta,
                                           importance=importance, supersedes=supersedes, library=library)
            # this command's own entries: the edit names the memory, the supersession the one replaced
            ids = changes_since(service, since, ("update_memory", "supersede"), library,
                                lambda e: names_memory(e, old) or (supersedes is not None
                                                                   and names_memory(e, supersedes.strip())))
        finally:
            service.close()
    except MemlociError as exc:
        fail(exc, options)
    console = open_console()
    console.print(f"Updated memory {memory.content_hash}: {first_line(memory.content, 80)}", highlight=False)
    if ids:
        console.print(_undo_hint(ids), highlight=False)


def _metadata(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValidationError(f"--metadata: not valid JSON ({exc.msg} at character {exc.pos})") from None
    if not isinstance(value, dict):
        raise ValidationError(f"--metadata: must be a JSON object, got {type(value).__name__}")
    return value


@memories_app.command("delete")
def delete(
    content_hash: Annotated[str, typer.Argument(metavar="HASH", help="The memory's content_hash.")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask (needed when not at a terminal).")] = False,
    libraries: LibrariesOpt = None,
    library: LibraryOpt = None,
) -> None:
    """Delete a memory as the delete_memory tool does; the journal keeps its text, and
    `memloci undo ID` brings it back."""
    try:
        service = open_service(libraries)
        try:
            memory = _one(service, content_hash, library)
            if not yes:
                if not sys.stdin.isatty():
                    raise ValidationError("--yes: needed to delete when not at a terminal (nothing asked, "
                                          "nothing deleted)", hint="Add --yes to delete without asking.")
                if not typer.confirm(f"Delete memory {memory.content_hash}: {first_line(memory.content, 80)}?"):
                    open_console(stderr=True).print("Nothing deleted.")
                    raise typer.Exit(1)
            since = newest_change(service, library)
            removed = service.delete_memory(memory.content_hash, library=library)
            ids = changes_since(service, since, ("delete_memory",), library,
                                lambda e: names_memory(e, memory.content_hash))
        finally:
            service.close()
    except MemlociError as exc:
        fail(exc, FILTER_OPTIONS)
    console = open_console()
    console.print(f"Deleted {counted(len(removed), 'memories')}: {first_line(memory.content, 80)}", highlight=False)
    if ids:
        console.print(_undo_hint(ids), highlight=False)


def search(
    query: Annotated[str, typer.Argument(help="Words to look for.")],
    kind: Annotated[str, typer.Option("--kind", "-k", help="What to search: all, memories, entities or notes "
                                                           "(entities with a body).")] = "all",
    limit: Annotated[int, typer.Option("--limit", "-n", help="Most results of each kind.")] = 10,
    as_json: Annotated[bool, typer.Option("--json", help="Print the hits of each kind as JSON.")] = False,
    libraries: LibrariesOpt = None,
    library: SearchLibraryOpt = None,
) -> None:
    """Search memories (as retrieve_memory), entities (as search_nodes) and notes, each hit with
    why it matched. With --kind all, a note is listed once, under notes."""
    from memloci.http.dashboard.found import KINDS
    from memloci.http.dashboard.found import search as found_in

    found: dict[str, list[dict[str, Any]]] = {}
    try:
        kind = check_choice("--kind", kind, KINDS)
        service = open_service(libraries, read_only=True, embedder=True)
        try:
            names = several(service, library)
            found = found_in(service, query, kind=kind, limit=limit, library=None if names else library,
                             libraries=names)
        finally:
            service.close()
    except MemlociError as exc:
        if not not_created(exc):
            fail(exc, {"limit": "-n/--limit", "n_results": "-n/--limit", "query": "QUERY", "library": "-l/--library"})
        found = {}
    if as_json:
        _print_json({"query": query, "kind": kind, **{k: found.get(k, []) for k in KINDS[1:] if kind in ("all", k)}})
        return
    _show_found(found, kind)


def _show_found(found: dict[str, list[dict[str, Any]]], kind: str) -> None:
    """A table per kind; a `library` column when the search covered several libraries."""
    from rich.table import Table

    console = open_console()
    if not any(found.values()):
        console.print("No match.")
        return
    for group in ("memories", "entities", "notes"):
        hits = found.get(group)
        if not hits:
            continue
        title = None if kind != "all" else f"{group} ({len(hits)})"
        where = ["library"] if "library" in hits[0] else []
        if group == "memories":
            table = Table(*where, "score", "when", "type", "text", "why", "hash", title=title)
            for m in hits:
                table.add_row(*[m[k] for k in where], f"{m['similarity_score']:.2f}", m["created_at"][:10],
                              m["memory_type"], first_line(m["content"], 80), m["why"] or "", m["content_hash"])
        elif group == "entities":
            table = Table(*where, "name", "type", "why", "observations", title=title)
            for e in hits:
                obs = e["observations"]
                preview = "; ".join(obs[:2]) + (f" (+{len(obs) - 2})" if len(obs) > 2 else "")
                table.add_row(*[e[k] for k in where], e["name"], e["entity_type"], e["why"], preview)
        else:
            table = Table(*where, "name", "type", "why", "line", title=title)
            for n in hits:
                table.add_row(*[n[k] for k in where], n["name"], n["entity_type"], n["why"], n["line"])
        console.print(table)


def register(app: typer.Typer) -> None:
    app.command()(recall)
    app.command()(search)
    app.add_typer(memories_app, name="memories")
