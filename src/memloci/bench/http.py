"""`memloci bench http --clients N --writes M`: N concurrent MCP clients over streamable HTTP.

Starts a real `memloci serve --transport http` on a free loopback port, with a fresh SQLite
library in a temp folder and a write token made by `memloci token create`. Then N Python SDK
clients, each with its own HTTP connection and MCP session, run at once in one asyncio loop:
each makes M writes (store_memory and create_entities in turn, every one with unique
content), each write followed by a read (open_nodes of the entity just made, or
search_by_tag of the client's own tag). When all are done, one more client reads everything
back (search_by_tag pages, open_nodes batches) and counts lost writes: writes the server
acknowledged that are not there.

The clients share one process and one event loop on purpose: that is how an agent host
holds many sessions, and it keeps the machine's other core for the server. Whether the
client side was the bottleneck is measured, not guessed: the report gives the CPU seconds
of the client process and of the server process over the run, and per call. (With 16
clients on a 2-core machine, the SDK client spent less CPU per call than the server did,
and neither process used a whole core: one client process is not what limits the figures.) The server's per-token rate
limit is turned off in the bench's own config file, since the limit is not what is measured.

The server is started as the tests start one (memloci.http.loopback).
"""

from __future__ import annotations

import os
import platform
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memloci.bench.common import client_session_class, percentiles, save_report
from memloci.http.loopback import Endpoint, http_session, loopback_server

ENGINES = ("sqlite",)  # postgresql joins when that engine is in
LIBRARY = "bench"


# ----- the load -------------------------------------------------------------------------------

@dataclass
class ClientLog:
    """What one client did: latencies per kind, failures, and the writes acknowledged."""

    write_ms: list[float] = field(default_factory=list)
    read_ms: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    memories: set[str] = field(default_factory=set)  # contents acknowledged by store_memory
    entities: set[str] = field(default_factory=set)  # names acknowledged by create_entities
    stale_reads: int = 0  # an open_nodes right after an acknowledged create that did not find it


def client_tag(c: int) -> str:
    return f"client-{c:03d}"


def entity_name(c: int, i: int) -> str:
    return f"c{c:03d}-e{i:05d}"


async def one_client(endpoint: Endpoint, c: int, writes: int, log: ClientLog, tick) -> None:
    """M writes, each followed by a read; a failed call is logged, never retried."""
    import json

    async with http_session(endpoint.url, endpoint.headers, client_session_class()) as session:
        async def call(kind: str, tool: str, args: dict[str, Any]) -> dict[str, Any] | None:
            t0 = time.perf_counter()
            try:
                result = await session.call_tool(tool, args)
            except Exception as exc:  # counted: the bench reports failures, it does not stop on them
                log.errors.append(f"{tool}: {type(exc).__name__}: {exc}")
                return None
            finally:
                (log.write_ms if kind == "write" else log.read_ms).append((time.perf_counter() - t0) * 1000)
                tick()
            if result.is_error:
                log.errors.append(f"{tool}: {result.content[0].text[:300] if result.content else ''}")
                return None
            return result.structured_content or json.loads(result.content[0].text)

        tag = client_tag(c)
        for i in range(writes):
            if i % 2 == 0:
                content = f"Client {c} write {i}: a unique memory ({tag}, {i})"
                if await call("write", "store_memory", {"content": content, "tags": [tag], "library": LIBRARY}):
                    log.memories.add(content)
                await call("read", "search_by_tag", {"tags": [tag], "limit": 5, "library": LIBRARY})
            else:
                name = entity_name(c, i)
                entity = {"name": name, "entityType": "bench", "observations": [f"written by client {c} as write {i}"]}
                written = await call("write", "create_entities", {"entities": [entity], "library": LIBRARY})
                if written:
                    log.entities.add(name)
                opened = await call("read", "open_nodes", {"names": [name], "library": LIBRARY})
                if written and opened is not None and name not in {e["name"] for e in opened["entities"]}:
                    log.stale_reads += 1


async def read_back(endpoint: Endpoint, clients: int, logs: list[ClientLog]) -> dict[str, int]:
    """Everything each client was told was written, looked for through MCP; what is missing is lost."""
    found_memories: set[str] = set()
    found_entities: set[str] = set()
    async with http_session(endpoint.url, endpoint.headers, client_session_class()) as session:
        for c in range(clients):
            offset = 0
            while True:
                page = (await session.call_tool("search_by_tag", {"tags": [client_tag(c)], "limit": 100,
                                                                  "offset": offset, "library": LIBRARY})).structured_content
                found_memories.update(m["content"] for m in page["memories"])
                if not page["is_truncated"]:
                    break
                offset = page["next_offset"]
        names = sorted(n for log in logs for n in log.entities)
        for i in range(0, len(names), 100):
            opened = (await session.call_tool("open_nodes", {"names": names[i:i + 100],
                                                             "library": LIBRARY})).structured_content
            found_entities.update(e["name"] for e in opened["entities"])
    acked_memories = set().union(*(log.memories for log in logs))
    acked_entities = set().union(*(log.entities for log in logs))
    return {"acknowledged": len(acked_memories) + len(acked_entities),
            "lost_memories": len(acked_memories - found_memories),
            "lost_entities": len(acked_entities - found_entities)}


def _cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of a process (Linux /proc; None elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def bench_env(home: Path) -> dict[str, str]:
    """The server's environment: its own home, no embedder (the bench measures the server and
    its transport, not a model), and no rate limit (see the module docstring)."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text("[http]\nrate_limit = 0\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMLOCI_")}
    env.update({"MEMLOCI_HOME": str(home), "MEMLOCI_EMBEDDER": "none"})
    return env


def run_load(endpoint: Endpoint, clients: int, writes: int, progress=None) -> dict[str, Any]:
    """N clients at once, then the read-back; the figures as a dict (no printing)."""
    import importlib

    import anyio

    importlib.import_module("mcp.client.streamable_http")  # loaded before the clock starts: not the server's time

    logs = [ClientLog() for _ in range(clients)]
    tick = progress or (lambda: None)

    async def load() -> float:
        t0 = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for c in range(clients):
                tg.start_soon(one_client, endpoint, c, writes, logs[c], tick)
        return time.perf_counter() - t0

    client_cpu0, server_cpu0 = time.process_time(), _cpu_seconds(endpoint.process.pid)
    seconds = anyio.run(load)
    client_cpu, server_cpu1 = time.process_time() - client_cpu0, _cpu_seconds(endpoint.process.pid)
    lost = anyio.run(read_back, endpoint, clients, logs)
    write_ms = [x for log in logs for x in log.write_ms]
    read_ms = [x for log in logs for x in log.read_ms]
    errors = [e for log in logs for e in log.errors]
    server_cpu = None if server_cpu0 is None or server_cpu1 is None else server_cpu1 - server_cpu0
    calls = len(write_ms) + len(read_ms)
    return {
        "seconds": round(seconds, 3),
        "calls_per_s": round(calls / seconds, 1),
        "writes_per_s": round(len(write_ms) / seconds, 1),
        "writes": percentiles(write_ms), "reads": percentiles(read_ms),
        "errors": len(errors), "first_errors": errors[:5],
        "lost_writes": lost["lost_memories"] + lost["lost_entities"], **lost,
        "stale_reads": sum(log.stale_reads for log in logs),
        "cpu_seconds": {"clients": round(client_cpu, 2), "server": None if server_cpu is None else round(server_cpu, 2)},
        # CPU per call does not depend on what else the machine runs; calls/s and latencies do
        "cpu_ms_per_call": {"clients": round(1000 * client_cpu / max(1, calls), 2),
                            "server": None if server_cpu is None else round(1000 * server_cpu / max(1, calls), 2)},
    }


def run(*, clients: int, writes: int, engine: str, repeat: int, out: Path, console: Any) -> dict[str, Any]:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Table

    if engine not in ENGINES:
        raise ValueError(f"--engine: unknown engine {engine!r}; known: {', '.join(ENGINES)}")
    runs = []
    for r in range(repeat):
        tmp = Path(tempfile.mkdtemp(prefix="memloci-bench-http-"))
        try:
            env = bench_env(tmp / "home")
            serve = ["--libraries", f"{LIBRARY}:{tmp / 'bench.db'}", "--tools", "graph,memory"]
            with loopback_server(serve, env, log=tmp / "server.log", scopes=[f"{LIBRARY}:write"]) as endpoint, \
                    Progress(TextColumn(f"run {r + 1}/{repeat}: {clients} clients"), BarColumn(), MofNCompleteColumn(),
                             TimeElapsedColumn(), console=Console(stderr=True), transient=True) as bar:
                task = bar.add_task("calls", total=clients * writes * 2)
                runs.append(run_load(endpoint, clients, writes, lambda task=task: bar.advance(task)))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    median_run = sorted(runs, key=lambda x: x["calls_per_s"])[len(runs) // 2]
    report = {"bench": "http", "engine": engine, "clients": clients, "writes_per_client": writes,
              "reads_per_client": writes, "transport": "streamable HTTP on 127.0.0.1, one token, no rate limit",
              "client": "Python MCP SDK ClientSession, one per client, all in one asyncio loop",
              "embedder": "none", "repeat": repeat, "median_run": median_run, "runs": runs,
              "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform()}}

    table = Table(title=f"memloci bench http — {clients} clients × {writes} writes (+ {writes} reads) each, "
                        f"{engine}, median of {repeat} run(s) by calls/s")
    for column in ("calls", "count", "calls/s", "p50 ms", "p95 ms", "p99 ms"):
        table.add_column(column, justify="left" if column == "calls" else "right")
    for kind, per_s in (("writes", median_run["writes_per_s"]), ("reads", None)):
        stats = median_run[kind]
        table.add_row(kind, str(stats["calls"]), "" if per_s is None else f"{per_s:.1f}",
                      *(f"{stats.get(k, 0):.1f}" for k in ("p50_ms", "p95_ms", "p99_ms")))
    table.add_row("all", str(median_run["writes"]["calls"] + median_run["reads"]["calls"]),
                  f"{median_run['calls_per_s']:.1f}", "", "", "")
    console.print(table)
    cpu, per_call = median_run["cpu_seconds"], median_run["cpu_ms_per_call"]
    console.print(f"lost writes: {median_run['lost_writes']} of {median_run['acknowledged']} acknowledged; "
                  f"stale reads (a create not seen by the next open_nodes): {median_run['stale_reads']}; "
                  f"failed calls: {median_run['errors']}; wall {median_run['seconds']:.1f} s; "
                  f"CPU seconds: clients {cpu['clients']}, server {cpu['server']} "
                  f"(ms per call: clients {per_call['clients']}, server {per_call['server']})")
    for error in median_run["first_errors"]:
        console.print(f"  error: {error}")
    if repeat > 1:
        console.print("calls/s of each run: " + ", ".join(f"{x['calls_per_s']:.1f}" for x in runs))
    save_report(report, out, console)
    return report
