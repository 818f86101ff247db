"""`memloci bench ingest`: memories stored and embedded per second through the real MCP server,
with 1 or more store_memory calls in flight on one session.

Each LoCoMo turn is stored as `memloci bench locomo` stores it (one store_memory per turn, the
same arguments), into a fresh library per conversation and concurrency, on a `memloci serve`
over stdio whose model has loaded. With N in flight, N calls are outstanding at any moment;
with 1, each call is awaited before the next. The clock stops once nothing waits for a vector
(check_database_health's `pending`). The server process's CPU time (Linux /proc) is reported
beside wall time: a busy host disturbs it less.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from memloci.bench.common import client_session_class, save_report
from memloci.bench.locomo_protocol import turns_of

_DEVNULL = open(os.devnull, "w")


def _server_cpu_s() -> float | None:
    """CPU seconds (user + system) of this process's `memloci serve` children; None off Linux."""
    proc = Path("/proc")
    if not proc.is_dir():
        return None
    total, me, tick = 0.0, os.getpid(), os.sysconf("SC_CLK_TCK")
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            fields = stat[stat.rindex(")") + 2:].split()
            if int(fields[1]) != me or b"memloci" not in (entry / "cmdline").read_bytes():
                continue
            total += (int(fields[11]) + int(fields[12])) / tick
        except (OSError, ValueError):
            continue
    return total


async def _ingest(turns: list[dict[str, Any]], home: Path, library: str, in_flight: int,
                  embedder: str | None) -> dict[str, Any]:
    import anyio
    from mcp import StdioServerParameters
    from mcp.client.stdio import stdio_client

    env = {**os.environ, "MEMLOCI_HOME": str(home), "MEMLOCI_LIBRARIES": f"bench:{home / (library + '.db')}",
           **({"MEMLOCI_EMBEDDER": embedder} if embedder is not None else {})}
    params = StdioServerParameters(command=sys.executable, args=["-m", "memloci", "serve"], env=env)
    async with stdio_client(params, errlog=_DEVNULL) as (read, write):
        async with client_session_class()(read, write) as session:
            await session.initialize()
            await session.list_tools()
            while True:  # the model loaded: the bench times storing and embedding, not the start
                health = (await session.call_tool("check_database_health", {})).structured_content
                if health["embedder"]["loaded"] or health["embedder"].get("state") in ("disabled", "failed"):
                    break
                await anyio.sleep(0.05)
            latencies: list[float] = []
            similar = 0
            next_turn = iter(turns)

            async def client() -> None:  # one of the `in_flight` callers: a call at a time
                nonlocal similar
                for t in next_turn:
                    t0 = time.perf_counter()
                    result = await session.call_tool("store_memory", {
                        "content": t["content"], "tags": [f"dia:{t['dia_id']}"], "memory_type": "dialogue",
                        "metadata": {"dia_id": t["dia_id"], "session": t["session"], "date": t["date"]}})
                    latencies.append((time.perf_counter() - t0) * 1000)
                    if result.is_error:
                        raise RuntimeError(f"store_memory failed: {result.content[0].text[:300]}")
                    similar += "similar" in (result.structured_content or {})

            cpu0, started = _server_cpu_s(), time.perf_counter()
            async with anyio.create_task_group() as group:
                for _ in range(in_flight):
                    group.start_soon(client)
            stored = time.perf_counter() - started
            while True:
                health = (await session.call_tool("check_database_health", {})).structured_content
                if health["embedder"].get("pending", 0) == 0 or not health["embedder"]["loaded"]:
                    break
                await anyio.sleep(0.02)
            embedded = time.perf_counter() - started
            cpu1 = _server_cpu_s()
    return {"memories": len(turns), "stored_s": stored, "embedded_s": embedded, "latencies": latencies,
            "server_cpu_s": None if cpu0 is None or cpu1 is None else cpu1 - cpu0, "similar": similar}


def conversations(data: Path, limit: int | None) -> list[dict[str, Any]]:
    """The first `limit` conversations of a LoCoMo JSON, each with turns; ValueError naming the
    file and what it lacks otherwise."""
    try:
        samples = json.loads(data.read_text(encoding="utf-8"))[:limit]
        with_turns = [s for s in samples if str(s["sample_id"]) and turns_of(s)]
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
        raise ValueError(f"{data}: not a LoCoMo JSON (a list of conversations with sample_id and "
                         f"session_N turns): {type(exc).__name__}: {exc}") from None
    if not samples:
        raise ValueError(f"{data}: no conversation (LoCoMo: a list of conversations with session_N turns)")
    if len(with_turns) < len(samples):
        raise ValueError(f"{data}: a conversation without turns (LoCoMo: a list of conversations with session_N turns)")
    return samples


def run(*, data: Path, in_flight: list[int], out: Path, console: Any, limit: int | None = 1,
        embedder: str | None = None) -> dict[str, Any]:
    """Store the turns of the first `limit` conversations with each number of calls in flight."""
    import anyio
    from rich.table import Table

    samples = conversations(data, limit)
    report: dict[str, Any] = {"bench": "ingest", "data": str(data), "conversations": [s["sample_id"] for s in samples],
                              "runs": []}
    table = Table(title=f"Ingest through MCP: store_memory per LoCoMo turn, {len(samples)} conversation(s)")
    for column in ("in flight", "memories", "stored/s", "stored and embedded/s", "server CPU ms/memory",
                   "store p50 ms", "similar"):
        table.add_column(column, justify="right")
    with tempfile.TemporaryDirectory(prefix="memloci-ingest-") as tmp:
        for n in in_flight:
            runs = [anyio.run(_ingest, turns_of(s), Path(tmp), f"{s['sample_id']}-{n}", n, embedder) for s in samples]
            memories = sum(r["memories"] for r in runs)
            stored, embedded = sum(r["stored_s"] for r in runs), sum(r["embedded_s"] for r in runs)
            cpu = None if any(r["server_cpu_s"] is None for r in runs) else sum(r["server_cpu_s"] for r in runs)
            latencies = [x for r in runs for x in r["latencies"]]
            row = {"in_flight": n, "memories": memories, "stored_per_s": round(memories / stored, 1),
                   "stored_and_embedded_per_s": round(memories / embedded, 1),
                   "server_cpu_ms_per_memory": None if cpu is None else round(1000 * cpu / memories, 2),
                   "store_p50_ms": round(statistics.median(latencies), 2), "similar": sum(r["similar"] for r in runs)}
            report["runs"].append(row)
            table.add_row(str(n), str(memories), f"{row['stored_per_s']}", f"{row['stored_and_embedded_per_s']}",
                          "-" if cpu is None else f"{row['server_cpu_ms_per_memory']}", f"{row['store_p50_ms']}",
                          str(row["similar"]))
    console.print(table)
    save_report(report, out, console)
    return report
