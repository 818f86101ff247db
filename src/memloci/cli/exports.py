"""`memloci export jsonl|markdown`: a library written out as one file, or to standard output."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Annotated

import typer

from memloci.cli.common import LibrariesOpt, LibraryOpt, counted, fail, not_created, open_console, open_service, styled
from memloci.core.errors import MemlociError

export_app = typer.Typer(help="Export a library.", no_args_is_help=True, rich_markup_mode=None)
_EMPTY_GRAPH = SimpleNamespace(entities=[], relations=[])  # what an export of a library not created yet holds


def _write_output(path: Path | None, text: str) -> None:
    """Standard output, or the file replaced atomically (a failed export never empties it)."""
    if path is None or str(path) == "-":
        sys.stdout.write(text)
        return
    from memloci.core.confine import atomic_write

    try:
        atomic_write(path, text.encode("utf-8"))
    except MemlociError as exc:  # a link as the file: refused, never written through
        fail(exc)
    except OSError as exc:
        open_console(stderr=True).print(styled((f"cannot write {path}", "bold red"), f": {exc.strerror}"), highlight=False)
        raise typer.Exit(1) from None


def _wrote(path: Path, counts: dict[str, int]) -> None:
    """What the file holds, counted as import, stats and migrate count: the entities (with their
    observations), the relations, and the free memories."""
    open_console(stderr=True).print(f"Wrote {counted(counts['entities'], 'entities')}, {counted(counts['relations'], 'relations')} and "
                                    f"{counted(counts['memories'], 'memories')} to {path}", highlight=False)


@export_app.command("jsonl")
def export_jsonl(
    path: Annotated[Path | None, typer.Argument(help="Output file (default: standard output).")] = None,
    official: Annotated[bool, typer.Option("--official", help="Only the official server's keys and lines "
                                           "(no timestamps, no free memories).")] = False,
    libraries: LibrariesOpt = None,
    library: LibraryOpt = None,
) -> None:
    """Export everything as JSONL that the official memory server loads (MEMORY_FILE_PATH): entities
    and relations, with memloci's timestamps in keys it ignores, then free memories as `memory` lines
    (a type it skips). `memloci import jsonl` reads it all back."""
    from memloci.formats.official import render_official

    try:
        service = open_service(libraries, read_only=True)
        if official:
            graph, memories = service.export_graph(library=library), []
        else:
            graph, memories = service.export_everything(library=library)
    except MemlociError as exc:
        if not not_created(exc):
            fail(exc)
        graph, memories = _EMPTY_GRAPH, []
    _write_output(path, render_official(graph.entities, graph.relations, memories, dates=not official))
    if path is not None:
        _wrote(path, {"entities": len(graph.entities), "relations": len(graph.relations), "memories": len(memories)})


@export_app.command("markdown")
def export_markdown(
    path: Annotated[Path | None, typer.Argument(help="Output file (default: standard output).")] = None,
    libraries: LibrariesOpt = None,
    library: LibraryOpt = None,
) -> None:
    """Export as one Markdown file: a section per entity in name order (clean diffs), then the free
    memories and the context."""
    from memloci.markdown.export import render_export

    try:
        text, counts = open_service(libraries, read_only=True).markdown_export(library=library)
    except MemlociError as exc:
        if not not_created(exc):
            fail(exc)
        text, counts = render_export([], []), dict.fromkeys(("entities", "relations", "memories"), 0)
    _write_output(path, text)
    if path is not None:
        _wrote(path, counts)
