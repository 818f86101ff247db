"""The commands over the mounted libraries: stats, history, undo, backup, restore,
reindex, migrate and check."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from memloci.app.specs import LibrarySpec
from memloci.cli.common import (
    LibrariesOpt,
    LibraryOpt,
    command_settings,
    counted,
    fail,
    not_created,
    open_console,
    open_service,
    styled,
)
from memloci.core.errors import LibraryMissingError, MemlociError

CHECK_SHOWN = 1000  # violations listed by `memloci check`; the title says how many there are in all


def stats(libraries: LibrariesOpt = None, library: LibraryOpt = None) -> None:
    """Counts and size of every mounted library (of one with -l)."""
    from rich.table import Table

    try:
        service = open_service(libraries, read_only=True)
        rows = []
        specs = service.libraries.specs
        if library is not None:  # names match case-insensitively, as everywhere
            specs = [spec for spec in specs if spec.name.casefold() == library.casefold()]
            if not specs:
                service.store(library)  # refused: NOT_FOUND, naming the mounted libraries
        zones = []  # (library, its free memories by retention zone), for libraries that have some
        for spec in specs:  # one not created yet is a row of zeros, not a failure
            try:
                counts = service.stats(library=spec.name)
            except LibraryMissingError:
                rows.append(spec)
                continue
            rows.append(counts)
            if counts.memories:
                zones.append((spec.name, service.zone_counts(library=spec.name)))
    except MemlociError as exc:
        fail(exc)
    table = Table("library", "kind", "entities", "observations", "memories", "relations", "journal", "size", "path")
    for s in rows:
        if isinstance(s, LibrarySpec):
            table.add_row(s.name, s.kind, "0", "0", "0", "0", "0", "not created yet", s.shown_path)
            continue
        table.add_row(s.name, s.kind, str(s.entities), str(s.observations), str(s.memories), str(s.relations),
                      str(s.journal_entries), f"{s.size_bytes / 1024:.0f} KiB", s.path)
    console = open_console()
    console.print(table)
    for name, counts in zones:
        console.print(f"{name}: free memories by retention zone: {counts['active']} active, {counts['stale']} stale, "
                      f"{counted(counts['archive_candidate'], 'archive candidates')} ({counts['immune']} immune)")


def history(
    limit: Annotated[int, typer.Option("--limit", "-n", help="Most entries, newest first.")] = 20,
    details: Annotated[bool, typer.Option("--details", "-d",
                                          help="One JSON object per entry, with what changed and the removed text.")] = False,
    internal: Annotated[bool, typer.Option("--all", "-a", help="Also rescans of the files and vector resets.")] = False,
    libraries: LibrariesOpt = None,
    library: LibraryOpt = None,
) -> None:
    """The library's change journal, newest first; `memloci undo ID` reverts a change."""
    from rich.table import Table

    from memloci.service.history import memory_text

    try:
        entries = open_service(libraries, read_only=True).history(limit=limit, internal=internal, library=library)
    except MemlociError as exc:
        if not not_created(exc):
            fail(exc, {"limit": "-n/--limit"})
        entries = []
    if details:
        for e in entries:
            print(json.dumps({"id": e.id, "at": e.at, "tool": e.tool, "action": e.action,
                              "entities": list(e.entities), "detail": e.detail}, ensure_ascii=False))
        return
    table = Table("#", "at", "tool", "action", "entities / memory", "undo")
    for e in entries:
        names = ", ".join(e.entities[:5]) + (f" (+{len(e.entities) - 5})" if len(e.entities) > 5 else "")
        text = memory_text(e)
        if text is not None:  # a memory's change names the memory by its text
            names = (f"{names}: " if names else "") + f'"{text}"'
        table.add_row(str(e.id), e.at, e.tool, e.action, names, "yes" if e.detail and "undo" in e.detail else "")
    open_console().print(table)


def undo(
    change_id: Annotated[int, typer.Argument(metavar="ID", help="The change's id, from `memloci history`.")],
    libraries: LibrariesOpt = None,
    library: LibraryOpt = None,
) -> None:
    """Revert one change (a delete, edit, rename, merge, memory update); refused, changing nothing,
    when a later change depends on it. The undo is a change too: undo it to redo."""
    try:
        service = open_service(libraries)
        try:
            result = service.undo(change_id, library=library)
        finally:
            service.close()
    except MemlociError as exc:
        fail(exc, {"id": "ID"})
    names = ", ".join(result["entities"])
    open_console().print(f"Undid change #{result['undid']} ({result['action']})" + (f": {names}" if names else ""),
                     highlight=False)


def backup(
    path: Annotated[Path, typer.Argument(help="New file: a .db for a SQLite library, a .tar.gz for a Markdown one "
                                      "(another ending is refused).")],
    libraries: LibrariesOpt = None,
    library: LibraryOpt = None,
) -> None:
    """A consistent copy of a whole library, safe while servers write (never replaces a file)."""
    try:
        service = open_service(libraries, read_only=True)
        result = service.backup(path, library=library)
    except MemlociError as exc:
        fail(exc)
    open_console().print(f"Backed up library '{result['library']}' to {result['path']} "
                     f"({result['bytes'] / 1024:.0f} KiB, {result['at']})", highlight=False)


def restore(
    path: Annotated[Path, typer.Argument(help="A file made by `memloci backup`.")],
    force: Annotated[bool, typer.Option("--force", help="Replace a library that holds data (it is saved first, "
                                        "to a pre-restore backup beside it).")] = False,
    libraries: LibrariesOpt = None,
    library: LibraryOpt = None,
) -> None:
    """Put a backup back into the mounted library."""
    try:
        service = open_service(libraries)
        try:
            result = service.restore(path, force=force, library=library)
        finally:
            service.close()
    except MemlociError as exc:
        fail(exc)
    console = open_console()
    if result["saved_before"]:
        console.print(f"The data it replaced is saved in {result['saved_before']}", highlight=False)
    console.print(f"Restored library '{result['library']}' from {result['from']}", highlight=False)


def reindex(
    libraries: LibrariesOpt = None,
    library: LibraryOpt = None,
) -> None:
    """Rebuild a Markdown library's index from its files, then re-embed every memory with the
    configured embedder (MEMLOCI_EMBEDDER), e.g. after switching models."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    try:
        service = open_service(libraries, embedder=True)
        service.store(library)  # a wrong or missing library name fails here, before any progress bar
        rebuilt: list = []
        with Progress(TextColumn("embedding"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                      console=open_console()) as bar:
            task = bar.add_task("reindex", total=None)
            total = service.reindex(library=library, progress=lambda done, n: bar.update(task, completed=done, total=n),
                                    files=rebuilt.append)
        status = service.embedder.status()
    except MemlociError as exc:
        fail(exc)
    for files in rebuilt:  # a Markdown library: what the rebuild found
        if files.index_moved_to:
            open_console().print(f"The index could not be read; the old one was moved to {files.index_moved_to}.",
                             highlight=False)
        open_console().print(f"Files: {files.indexed} indexed, {files.skipped} skipped (changed while read; the next "
                         f"scan takes them), {len(files.problems)} unparsable, {counted(files.removed, 'entities')} removed.",
                         highlight=False)
        for rel, why in files.problems.items():
            open_console().print(f"  unparsable: {rel}: {why}", highlight=False, markup=False)
    if status.model is None:
        open_console().print("Index rebuilt from the files; no embedder is configured, so no vectors.", highlight=False)
    else:
        open_console().print(f"Re-embedded {counted(total, 'memories')} with {status.model} ({status.dimension} dimensions).",
                         highlight=False)


def migrate_cmd(
    source: Annotated[str, typer.Argument(metavar="SOURCE", help="The library to copy, NAME:PATH as in --libraries "
                                          "(a .db file, a Markdown folder, a postgresql:// URL); only read.")],
    target: Annotated[str, typer.Argument(metavar="TARGET", help="An empty or new library, NAME:PATH.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the verification report as JSON.")] = False,
) -> None:
    """Copy a library into an empty one of any engine (sqlite, markdown, postgres): entities,
    relations, memories, dates, use counts, the journal, and the vectors when the target's
    embedder (MEMLOCI_EMBEDDER) made them; then compare both. Exit 2 when they differ."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
    from rich.table import Table

    from memloci.search.embedder import create_embedder
    from memloci.service import migrate as mig

    settings = command_settings()
    try:
        src_spec, dst_spec = mig.parse_spec(source, "source"), mig.parse_spec(target, "target")
        src, dst = mig.open_pair(src_spec, dst_spec, settings)
        embedder_model = None
        if src.vector_model():  # load the embedder only when there are vectors to keep
            embedder = create_embedder(settings.embedder, settings)
            embedder_model = (embedder.model_id, embedder.dimension) if embedder is not None else None
        width = max(map(len, mig.PART_LABELS.values()))
        with Progress(TextColumn(f"{{task.description:<{width}}}"), BarColumn(), MofNCompleteColumn(),
                      console=open_console(stderr=True)) as bar:
            tasks = {part: bar.add_task(mig.PART_LABELS[part], total=None) for part in mig.PARTS}
            report = mig.migrate(src, dst, embedder_model=embedder_model,
                                 progress=lambda part, done, total: bar.update(tasks[part], completed=done, total=total))
        src.close()
        dst.close()
    except MemlociError as exc:
        fail(exc)
    if as_json:
        print(json.dumps(report.as_dict(), ensure_ascii=False, indent=2))
    else:
        table = Table(title=f"{report.source} -> {report.target}")
        for column in ("checked", "source", "target", "equal"):
            table.add_column(column)
        for row in mig.render_table(report):
            table.add_row(*row)
        open_console().print(table)
    for note in report.notes:
        open_console(stderr=True).print(note, highlight=False)
    if not report.ok:
        open_console(stderr=True).print(styled(("The target differs from the source (rows marked NO).", "bold red")))
        raise typer.Exit(2)


def check(
    libraries: LibrariesOpt = None,
    library: LibraryOpt = None,
    schema: Annotated[str | None, typer.Option("--schema", help="Check against this schema (default, strict) "
                                                  "instead of the library's own.")] = None,
) -> None:
    """Report every violation of a schema in a library (exit code 1 if there is any)."""
    from rich.table import Table

    from memloci.core.schema import schema_from_config

    try:
        rules = schema_from_config(schema, "--schema") if schema else None
        service = open_service(libraries, read_only=True)
        problems = service.check(rules, library=library, limit=None)
        name = service.store(library).name
        used = rules or service.store(library).schema
    except MemlociError as exc:
        if not not_created(exc):
            fail(exc)
        return
    console = open_console()
    if not problems:
        console.print(f"library '{name}' follows schema '{used.name}': no violations.", highlight=False)
        return
    total = len(problems)
    problems = problems[:CHECK_SHOWN]
    title = (f"{total} violation(s)" if total <= CHECK_SHOWN else f"showing {CHECK_SHOWN} of {total} violations")
    table = Table(title=f"{title} of schema '{used.name}' in library '{name}'")
    for column in ("what", "where", "value", "rule"):
        table.add_column(column, overflow="fold")
    for p in problems:
        table.add_row(p["what"], p["where"], p["value"], p["rule"])
    console.print(table)
    raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command()(stats)
    app.command()(history)
    app.command()(undo)
    app.command()(backup)
    app.command()(restore)
    app.command()(reindex)
    app.command("migrate")(migrate_cmd)
    app.command()(check)
