"""`memloci import jsonl|mms|memorix|basic-memory`: the command line of the importers, registered on
cli/main.py's `import` group. The importers of other servers' data work as `memloci import jsonl`
does: read the source (nothing written when it cannot be read), then one call of the service's
import, with a progress bar on stderr.

What a run promises: the whole source is read and checked before the first write, so a bad
source changes nothing. The writes go in transactions of up to 1,000 entities or relations
each, then one for all the memories (the same path as `import jsonl`), so a run stopped
halfway leaves whole batches; running it again completes it, because an import is idempotent:
entities merge by name, observations and relations already there are kept once, and a
memory whose content is already there is not added again.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from memloci.cli.common import LibrariesOpt, LibraryOpt, counted, fail, open_console, open_service, styled
from memloci.core.errors import MemlociError
from memloci.formats.source import ImportSource

SHOWN = 100  # skipped items listed; the title says how many there are in all


def _run(reader: Callable[[Path], ImportSource], path: Path, libraries: str | None, library: str | None,
         dry_run: bool) -> None:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    out, err = open_console(), open_console(stderr=True)
    try:
        source = reader(path.expanduser())
    except MemlociError as exc:
        fail(exc)
    except OSError as exc:
        err.print(styled((f"cannot read {path}", "bold red"), f": {exc.strerror or exc}"), highlight=False)
        raise typer.Exit(1) from None
    data = source.data
    if dry_run:
        try:
            writable, dropped = _plan(open_service(libraries, read_only=True), data, library)
        except MemlociError as exc:
            fail(exc)
        skipped = source.skipped + [(source.relation_where.get(n, f"relation {n}"), reason) for n, reason in dropped]
        c = source.counts()
        out.print(f"Dry run, nothing written. {path} ({source.kind}, {source.layout}) holds {counted(c['entities'], 'entities')} "
                  f"({counted(c['observations'], 'observations')}), {counted(len(writable), 'relations')}, {counted(c['memories'], 'memories')}; "
                  f"{counted(len(skipped), 'items')} would be skipped.", highlight=False)
        _skipped(out, skipped)
        _warnings(out, source.warnings)
        return
    try:
        service = open_service(libraries)
        with Progress(TextColumn(f"importing {source.kind}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                      console=err, transient=False) as bar:
            task = bar.add_task("import", total=len(data.entities) + len(data.relations) + len(data.memories)
                                + len(data.entity_edits))
            report, added, existing = service.import_everything(data, library=library,
                                                                progress=lambda n: bar.advance(task, n))
    except MemlociError as exc:
        fail(exc)
    skipped = source.skipped + [(source.relation_where.get(n, f"relation {n}"), reason)
                                for n, reason in report.skipped_relations]
    new = report.entities_created + report.observations_added + report.relations_created + added
    parts = []
    if data.entities or data.relations:
        parts.append(f"{counted(report.entities_created, 'entities')} created ({report.entities_merged} already there), "
                     f"{counted(report.observations_added, 'observations')}, {counted(report.relations_created, 'relations')} "
                     f"({report.relations_existing} already there)")
    if data.memories or not parts:
        parts.append(f"{counted(added, 'memories')} ({existing} already there)")
    out.print(f"Imported {path} ({source.kind}, {source.layout}): {', '.join(parts)}; {len(skipped)} skipped.",
              highlight=False)
    if not new:
        out.print("Nothing new: everything in the source was already in the library.", highlight=False)
    _skipped(out, skipped)
    _warnings(out, source.warnings)


def _printable(text: str) -> str:
    """A source's bytes that are not UTF-8 (kept in names as lone surrogates) written as escapes,
    so listing them cannot fail."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _warnings(out, warnings: list[tuple[str, str]]) -> None:
    """Items imported, but not quite as the source had them (e.g. MMS metadata kept as text)."""
    if not warnings:
        return
    shown = f" (the first {SHOWN} shown)" if len(warnings) > SHOWN else ""
    out.print(styled((f"{counted(len(warnings), 'items')} imported with a warning{shown}:", "yellow")), highlight=False)
    for where, reason in warnings[:SHOWN]:
        out.print(_printable(f"  {where}: {reason}"), highlight=False)


def _plan(service, data, library: str | None) -> tuple[list, list[tuple[int, str]]]:
    """The relations an import would write and skip, by the import's own checks
    (`plan_graph_import`), so a dry run counts what the run does. Nothing is written: a
    library not created yet is checked as the empty library the import would create, made
    in a temporary folder."""
    import dataclasses
    import tempfile

    from memloci.app.registry import LibraryRegistry
    from memloci.core.errors import LibraryMissingError
    from memloci.search.embedder import EmbedderHandle
    from memloci.service.facade import MemoryService

    try:
        return service.plan_graph_import(data.entities, data.relations, library=library)[1:]
    except LibraryMissingError:
        pass
    finally:
        service.close()
    with tempfile.TemporaryDirectory(prefix="memloci-dry-run-") as tmp:
        specs = [dataclasses.replace(spec, path=Path(tmp) / f"lib{n}{'.db' if spec.kind == 'sqlite' else ''}")
                 for n, spec in enumerate(service.libraries.specs)]
        empty = MemoryService(LibraryRegistry(specs, settings=service.libraries.settings), EmbedderHandle("none"),
                              embed_pending=False)
        try:
            return empty.plan_graph_import(data.entities, data.relations, library=library)[1:]
        finally:
            empty.close()


def _skipped(out, skipped: list[tuple[str, str]]) -> None:
    if not skipped:
        return
    shown = f" (the first {SHOWN} shown)" if len(skipped) > SHOWN else ""
    out.print(styled((f"{counted(len(skipped), 'items')} skipped{shown}:", "yellow")), highlight=False)
    for where, reason in skipped[:SHOWN]:  # a rule's message may already start with the place
        out.print(_printable(f"  {reason}" if reason.startswith(where) else f"  {where}: {reason}"), highlight=False)


def import_jsonl(
    path: Annotated[Path, typer.Argument(help="memory.jsonl (or the older memory.json) of the official memory server.",
                                         exists=True, dir_okay=False, readable=True)],
    libraries: LibrariesOpt = None,
    library: LibraryOpt = None,
) -> None:
    """Import the official MCP memory server's memory.jsonl, or memloci's own export (then also free
    memories and every timestamp). Existing entities are merged, not duplicated; a line that
    cannot be read is skipped and listed, and the rest imported."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from memloci.formats.official import read_official

    console = open_console()
    try:
        source = read_official(path)
    except OSError as exc:
        open_console(stderr=True).print(styled((f"cannot read {path}", "bold red"), f": {exc.strerror or exc}"),
                                        highlight=False)
        raise typer.Exit(1) from None
    try:
        service = open_service(libraries)
        with Progress(TextColumn("importing"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                      console=console, transient=False) as bar:
            task = bar.add_task("import", total=len(source.entities) + len(source.relations) + len(source.memories))
            report, added, existing = service.import_everything(source, library=library,
                                                                progress=lambda n: bar.advance(task, n))
    except MemlociError as exc:
        fail(exc)
    console.print(
        f"Imported {path}: {counted(report.entities_created, 'entities')} created, {report.entities_merged} merged, "
        f"{counted(report.observations_added, 'observations')}, {counted(report.relations_created, 'relations')}"
        + (f" ({report.relations_existing} already there)" if report.relations_existing else "")
        + (f", {counted(added, 'memories')}" + (f" ({existing} already there)" if existing else "") if source.memories else ""),
        highlight=False,
    )
    if source.ignored_lines:
        console.print(f"{counted(len(source.ignored_lines), 'lines')} of another type ignored (lines "
                      f"{', '.join(map(str, source.ignored_lines[:10]))}{', ...' if len(source.ignored_lines) > 10 else ''})",
                      highlight=False)
    if report.skipped_relations:
        console.print(styled((f"{counted(len(report.skipped_relations), 'relations')} skipped:", "yellow")), highlight=False)
        for line, reason in report.skipped_relations[:20]:
            console.print(f"  {source.where('relation', line)}: {reason}", highlight=False)
    if source.skipped:  # lines that could not be read; the rest was imported
        console.print(styled((f"{counted(len(source.skipped), 'lines')} skipped, not readable"
                              + (f" (the first {SHOWN} shown)" if len(source.skipped) > SHOWN else "") + ":",
                              "yellow")), highlight=False)
        for where, reason in source.skipped[:SHOWN]:
            console.print(_printable(f"  {reason}" if reason.startswith(where) else f"  {where}: {reason}"),
                          highlight=False)


IntoLibrariesOpt = Annotated[str | None, typer.Option("--libraries",
                                                         help="Libraries to mount, NAME:PATH[,NAME:PATH...] (MEMLOCI_LIBRARIES).")]
IntoLibraryOpt = Annotated[str | None, typer.Option("--library", "-l", help="Library to import into when several are mounted.")]
DryRunOpt = Annotated[bool, typer.Option("--dry-run", help="Read the source and print what it holds; write nothing.")]


def register(import_app: typer.Typer) -> None:
    import_app.command("jsonl")(import_jsonl)

    @import_app.command("mms")
    def import_mms(
        path: Annotated[Path, typer.Argument(help="MCP Memory Service's SQLite database (e.g. sqlite_vec.db).")],
        libraries: IntoLibrariesOpt = None,
        library: IntoLibraryOpt = None,
        dry_run: DryRunOpt = False,
    ) -> None:
        """Import MCP Memory Service's SQLite database (read-only): memories with their tags, type,
        metadata and times; soft-deleted ones are skipped and listed."""
        from memloci.formats.mms import read_mms

        _run(read_mms, path, libraries, library, dry_run)

    @import_app.command("memorix")
    def import_memorix(
        path: Annotated[Path, typer.Argument(help="memorix's data folder (memorix.db, or observations.json with "
                                                  "entities.jsonl/relations.jsonl or graph.jsonl).")],
        libraries: IntoLibrariesOpt = None,
        library: IntoLibraryOpt = None,
        dry_run: DryRunOpt = False,
    ) -> None:
        """Import memorix's data folder: its graph as entities and relations, its observations as
        memories (type, tags from concepts, facts and files in metadata, times kept)."""
        from memloci.formats.memorix import read_memorix

        _run(read_memorix, path, libraries, library, dry_run)

    @import_app.command("basic-memory")
    def import_basic_memory(
        path: Annotated[Path, typer.Argument(help="A basic-memory project folder of Markdown notes.")],
        libraries: IntoLibrariesOpt = None,
        library: IntoLibraryOpt = None,
        dry_run: DryRunOpt = False,
    ) -> None:
        """Import a basic-memory project: each note an entity with its prose as the body,
        `- [category] text` items as observations, `- type [[Target]]` items as relations."""
        from memloci.formats.basic_memory import read_basic_memory

        _run(read_basic_memory, path, libraries, library, dry_run)
