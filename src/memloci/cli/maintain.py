"""`memloci maintain ...`: the maintenance tools for a person at a terminal, each of the same
meaning as its tool. A change is shown and kept as a preview with `--dry-run` (`memloci maintain
execute ID` applies it) or made at once; either way one journal entry, undone with `memloci undo`."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from memloci.cli.common import LibrariesOpt, LibraryOpt, counted, fail, open_console, open_service
from memloci.core.errors import MemlociError

maintain_app = typer.Typer(help="Maintenance: duplicates, deletion by tag or time, metadata, the archive, links to "
                                "entities that no longer exist, previews.",
                           no_args_is_help=True, rich_markup_mode=None)

DryRunOpt = Annotated[bool, typer.Option("--dry-run", help="Show and keep a preview; change nothing.")]
SHOWN = 50  # items a table lists (the preview keeps them all)
EMBEDDER_LOAD_S = 120.0
EMBED_SUMMARIES_S = 600.0


def _show(outcome: Any) -> None:
    from rich.table import Table

    console = open_console()
    links = outcome.kind == "garbage_collect_relations"  # items are links in entities, not memories
    if outcome.items:
        title = f"{outcome.kind} in library '{outcome.library}'"
        table = Table("action", "entity", "where", "line", "link", "becomes", title=title) if links \
            else Table("action", "memory", "content", "why", title=title)
        for item in outcome.items[:SHOWN]:
            if links:
                table.add_row(item["action"], item["entity"], item["where"], str(item["line"]), item["text"].strip(),
                              item.get("becomes", "(removed)"))
            else:
                table.add_row(item["action"], item["content_hash"][:12], item["content"], item.get("why", ""))
        console.print(table)
        if len(outcome.items) > SHOWN:
            console.print(f"... and {counted(len(outcome.items) - SHOWN, 'more item')}", highlight=False)
    for offer in outcome.offered[:SHOWN]:
        if links:
            console.print(f"left: {offer['entity']}: {offer['why']}", highlight=False)
            continue
        console.print(f"offered: merge {offer['merge'][0][:12]} and {offer['merge'][1][:12]} "
                      f"(similarity {offer['similarity']}): {offer['contents'][0]} | {offer['contents'][1]}",
                      highlight=False)
    console.print(outcome.summary, highlight=False)
    if outcome.preview_id:
        console.print(f"Execute it with: memloci maintain execute {outcome.preview_id}", highlight=False)
    elif outcome.change_id:
        console.print(f"Undo it with: memloci undo {outcome.change_id}", highlight=False)


def _run(libraries: str | None, call: Any, options: dict[str, str] | None = None, *, read_only: bool = False) -> Any:
    try:
        service = open_service(libraries, read_only=read_only)
        try:
            return call(service)
        finally:
            service.close()
    except MemlociError as exc:
        fail(exc, options)


@maintain_app.command("tags")
def tags(libraries: LibrariesOpt = None, library: LibraryOpt = None) -> None:
    """Every tag of the memories with how many carry it (list_tags)."""
    from rich.table import Table

    found = _run(libraries, lambda s: s.lifecycle.tags(library=library), read_only=True)
    table = Table("tag", "memories")
    for tag, n in found:
        table.add_row(tag, str(n))
    open_console().print(table)


@maintain_app.command("analysis")
def analysis(
    tag: Annotated[list[str] | None, typer.Option("--tag", "-t", help="Only memories with this tag (repeatable).")] = None,
    time: Annotated[str | None, typer.Option("--time", help='A time phrase: "last month", "2026".')] = None,
    libraries: LibrariesOpt = None, library: LibraryOpt = None,
) -> None:
    """Counts by tag, type, importance, month and state, and exact duplicates (knowledge_analysis)."""
    def call(s: Any) -> dict[str, Any]:
        after, before = s.time_range(time) if time else (None, None)
        return s.lifecycle.analysis(tags=tag or (), after=after, before=before, library=library)

    print(json.dumps(_run(libraries, call, {"time": "--time", "tags": "--tag"}, read_only=True), ensure_ascii=False,
                     indent=2))


@maintain_app.command("export")
def export(
    format: Annotated[str, typer.Argument(metavar="FORMAT", help="json, markdown or text.")],
    tag: Annotated[list[str] | None, typer.Option("--tag", "-t", help="Only memories with this tag (repeatable).")] = None,
    query: Annotated[str | None, typer.Option("--query", "-q", help="Only the best matches of this query.")] = None,
    archived: Annotated[bool, typer.Option("--archived", help="The archive too.")] = False,
    libraries: LibrariesOpt = None, library: LibraryOpt = None,
) -> None:
    """The memories as json, markdown or text, on standard output (knowledge_export)."""
    text = _run(libraries, lambda s: s.knowledge_export(format, tags=tag or (), query=query, include_archived=archived,
                                                       library=library), {"format": "FORMAT", "tags": "--tag"},
                read_only=True)
    print(text, end="" if text.endswith("\n") else "\n")


@maintain_app.command("delete-by-tag")
def delete_by_tag(
    tag: Annotated[list[str], typer.Argument(metavar="TAG...", help="Delete the memories with any of these tags.")],
    match_all: Annotated[bool, typer.Option("--all", help="Only memories with every tag given.")] = False,
    dry_run: DryRunOpt = False, libraries: LibrariesOpt = None, library: LibraryOpt = None,
) -> None:
    """Delete the memories carrying the tags (delete_by_tag); undoable."""
    _show(_run(libraries, lambda s: s.lifecycle.delete_by_tag(tag, match_all=match_all, dry_run=dry_run,
                                                              library=library), {"tags": "TAG"}))


@maintain_app.command("delete-by-time")
def delete_by_time(
    start: Annotated[str | None, typer.Option("--start", help="From this date (YYYY-MM-DD, inclusive).")] = None,
    end: Annotated[str | None, typer.Option("--end", help="Up to this date (exclusive).")] = None,
    tag: Annotated[str | None, typer.Option("--tag", "-t", help="Only memories with this tag.")] = None,
    dry_run: DryRunOpt = False, libraries: LibrariesOpt = None, library: LibraryOpt = None,
) -> None:
    """Delete the memories created in a time range (delete_by_timeframe, delete_before_date); undoable."""
    _show(_run(libraries, lambda s: s.lifecycle.delete_by_time(start=start, end=end, tag=tag, dry_run=dry_run,
                                                               library=library),
               {"start_date": "--start", "end_date": "--end", "start_date/end_date": "--start/--end", "tag": "--tag"}))


@maintain_app.command("duplicates")
def duplicates(
    similar: Annotated[bool, typer.Option("--similar", help="Merge near duplicates by meaning too (else offered).")] = False,
    dry_run: DryRunOpt = False, libraries: LibrariesOpt = None, library: LibraryOpt = None,
) -> None:
    """Merge duplicate memories into the oldest, keeping tags and uses (cleanup_duplicates)."""
    _show(_run(libraries, lambda s: s.cleanup_duplicates(similar=similar, dry_run=dry_run, library=library)))


@maintain_app.command("metadata")
def metadata(
    content_hash: Annotated[str, typer.Argument(metavar="HASH", help="The memory's content_hash.")],
    tags: Annotated[str | None, typer.Option("--tags", help="New tags, comma-separated.")] = None,
    memory_type: Annotated[str | None, typer.Option("--type", help="New memory type.")] = None,
    importance: Annotated[str | None, typer.Option("--importance", help="critical, high, medium or low.")] = None,
    meta: Annotated[str | None, typer.Option("--metadata", help="JSON object merged into the metadata.")] = None,
    dry_run: DryRunOpt = False, libraries: LibrariesOpt = None, library: LibraryOpt = None,
) -> None:
    """Change a memory's tags, type, importance or metadata; its text stays (update_memory_metadata)."""
    updates: dict[str, Any] = {}
    if tags is not None:
        updates["tags"] = tags
    if memory_type is not None:
        updates["memory_type"] = memory_type
    if importance is not None:
        updates["importance"] = importance
    if meta is not None:
        try:
            updates["metadata"] = json.loads(meta)
        except ValueError:
            open_console(stderr=True).print("VALIDATION_ERROR: --metadata: must be a JSON object", highlight=False)
            raise typer.Exit(1) from None
    _show(_run(libraries, lambda s: s.lifecycle.update_metadata(content_hash, updates, dry_run=dry_run, library=library),
               {"content_hash": "HASH", "updates": "--tags/--type/--importance/--metadata",
                "updates.tags": "--tags", "updates.memory_type": "--type", "updates.importance": "--importance",
                "updates.metadata": "--metadata"}))


@maintain_app.command("cleanup")
def cleanup(
    older_than: Annotated[str | None, typer.Option("--older-than", help='Archive memories older: "6 months".')] = None,
    libraries: LibrariesOpt = None, library: LibraryOpt = None,
) -> None:
    """Preview a cleanup: duplicates to merge, old memories to archive (memory_cleanup)."""
    from memloci.service.lifecycle import older_than_cutoff

    _show(_run(libraries, lambda s: s.memory_cleanup(
        cutoff=older_than_cutoff(older_than, s.clock()) if older_than else None, library=library),
        {"older_than": "--older-than"}))


@maintain_app.command("archive")
def archive(
    execute: Annotated[bool, typer.Option("--execute", help="Archive now (default: a preview).")] = False,
    libraries: LibrariesOpt = None, library: LibraryOpt = None,
) -> None:
    """Move memories past their retention, not immune, into the archive (archive_memories)."""
    _show(_run(libraries, lambda s: s.archive_memories(dry_run=not execute, library=library)))


@maintain_app.command("unarchive")
def unarchive(
    content_hash: Annotated[list[str], typer.Argument(metavar="HASH...", help="Archived memories to bring back.")],
    dry_run: DryRunOpt = False, libraries: LibrariesOpt = None, library: LibraryOpt = None,
) -> None:
    """Bring archived memories back into search (unarchive_memories)."""
    _show(_run(libraries, lambda s: s.lifecycle.unarchive(content_hash, dry_run=dry_run, library=library)))


@maintain_app.command("gc-relations")
def gc_relations(
    execute: Annotated[bool, typer.Option("--execute", help="Clean them now (else: a preview, changing nothing).")] = False,
    libraries: LibrariesOpt = None, library: LibraryOpt = None,
) -> None:
    """Links to entities that no longer exist, with where each is; --execute removes their front-matter
    relations entries and turns their [[links]] into plain text (garbage_collect_relations); undoable."""
    _show(_run(libraries, lambda s: s.lifecycle.garbage_collect_relations(dry_run=not execute, library=library)))


@maintain_app.command("previews")
def previews(
    every: Annotated[bool, typer.Option("--all", "-a", help="Executed ones too.")] = False,
    libraries: LibrariesOpt = None, library: LibraryOpt = None,
) -> None:
    """The previews waiting to be executed, newest first (list_previews)."""
    from rich.table import Table

    found = _run(libraries, lambda s: s.lifecycle.previews(pending=not every, library=library), read_only=True)
    table = Table("#", "kind", "made", "items", "offered", "executed")
    for p in found:
        table.add_row(str(p["preview_id"]), p["kind"], p["created_at"], str(p["items"]), str(p["offered"]),
                      f"{p['executed_at']} (change #{p['change_id']})" if p["executed_at"] else "")
    open_console().print(table)


@maintain_app.command("execute")
def execute(
    preview_id: Annotated[int, typer.Argument(metavar="ID", help="The preview's id.")],
    libraries: LibrariesOpt = None, library: LibraryOpt = None,
) -> None:
    """Apply a preview exactly; refused, changing nothing, if its memories changed since (execute_preview)."""
    _show(_run(libraries, lambda s: s.lifecycle.execute_preview(preview_id, library=library), {"preview_id": "ID"}))


def consolidate(
    horizon: Annotated[str, typer.Option("--horizon", help="daily, weekly, monthly, quarterly or yearly.")] = "weekly",
    execute: Annotated[bool, typer.Option("--execute", help="Apply now (a contradiction's supersession still "
                                                           "needs a preview); default: a preview.")] = False,
    max_cluster: Annotated[int | None, typer.Option("--max-cluster", help="Largest cluster summarized.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the outcome as JSON.")] = False,
    nice: Annotated[bool, typer.Option("--nice", help="Run at low priority (what a server's runs use).")] = False,
    libraries: LibrariesOpt = None, library: LibraryOpt = None,
) -> None:
    """Consolidate the memories of a time horizon: associations, clusters summarized, supersessions
    proposed, past-retention memories archived. A preview unless --execute; undo with `memloci undo`."""
    import os

    if nice:
        os.nice(10)
    try:
        # an execute that writes summaries gives them their vectors here, at this process's priority,
        # so a server's searches never wait for them (a preview loads no model)
        service = open_service(libraries, embedder=execute)
        try:
            if execute:
                service.embedder.get(timeout=EMBEDDER_LOAD_S)
            outcome = service.consolidate(horizon, dry_run=not execute, max_cluster=max_cluster, library=library)
            if outcome.executed and outcome.counts["created"]:
                service.flush_embeddings(library=library, timeout=EMBED_SUMMARIES_S)
        finally:
            service.close()
    except MemlociError as exc:
        if as_json:
            print(json.dumps(exc.to_dict(), ensure_ascii=False))
            raise typer.Exit(1) from None
        fail(exc, {"time_horizon": "--horizon", "max_cluster": "--max-cluster"})
    if as_json:
        print(json.dumps(outcome.to_data(), ensure_ascii=False))
        return
    _show(outcome)
    report = outcome.report
    if report:
        open_console().print(
            f"{report.get('considered', 0)} memories considered ({report.get('with_meaning', 0)} with meaning): "
            f"{report.get('associations', 0)} associations, {report.get('clusters', 0)} clusters "
            f"({len(report.get('refused_clusters', []))} refused), {report.get('summaries', 0)} summaries, "
            f"{report.get('contradictions', 0)} contradictions, {report.get('archived', 0)} to archive", highlight=False)
        for refused in report.get("refused_clusters", [])[:SHOWN]:
            open_console().print(f"refused cluster of {refused['size']}: {refused['reason']}", highlight=False)


def register(app: typer.Typer) -> None:
    app.command()(consolidate)
