"""`memloci bench dashboard --memories N`: the dashboard's JSON API under load a person makes.

Starts a real `memloci serve --transport http` on a free loopback port with a fresh SQLite
library (no embedder: the figures are the API's and the engine's, not a model's) and a write
token. It stores N memories through `POST /api/memories` (timed: a person's or a script's
writes through the page's API), creates entities linked in a chain through MCP, then asks
each read the page makes `--calls` times, in turn, and reports p50/p95 per endpoint: the
memory browser's pages (newest first, sorted by importance and by uses, one zone), search
across kinds, an entity and its neighbourhood, the journal, health. The requests carry the
token as `Authorization: Bearer` (no cookie, so no CSRF header), as a script would.

The last part is the live stream: a client listens on `/api/events`, another stores a
memory through MCP, and the bench times from the MCP call's start to the `change` event's
arrival, and to the MCP reply's arrival.
"""

from __future__ import annotations

import asyncio
import os
import platform
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from memloci.bench.common import client_session_class, percentiles, save_report
from memloci.bench.http import bench_env
from memloci.http.loopback import Endpoint, http_session, loopback_server

LIBRARY = "bench"
TYPES = ("note", "decision", "fact", "task")
IMPORTANCE = ("low", "medium", "high")
WORDS = ("billing", "deploy", "schema", "cache", "token", "review", "retry", "index", "backup", "release")


def memory_body(i: int) -> dict[str, Any]:
    """The i-th memory: words that vary, a few tags, types and importances in rotation."""
    w = WORDS[i % len(WORDS)], WORDS[(i * 7 + 3) % len(WORDS)]
    return {"library": LIBRARY, "content": f"Memory {i}: the {w[0]} step waits for {w[1]} ({i * 37 % 1000})",
            "tags": [f"t{i % 10}", w[0]], "memory_type": TYPES[i % len(TYPES)],
            "importance": IMPORTANCE[i % len(IMPORTANCE)]}


def reads(entities: int) -> list[tuple[str, str]]:
    """(label, path and query) of each read the page makes."""
    middle = f"e{entities // 2:05d}"
    return [
        ("memories, newest first", f"/api/memories?library={LIBRARY}"),
        ("memories, by importance", f"/api/memories?library={LIBRARY}&sort=importance"),
        ("memories, by uses", f"/api/memories?library={LIBRARY}&sort=uses"),
        ("memories, zone active", f"/api/memories?library={LIBRARY}&zone=active"),
        ("memories, a tag", f"/api/memories?library={LIBRARY}&tag=t3"),
        ("search, all kinds", f"/api/search?library={LIBRARY}&q=billing+retry"),
        ("entities matching", f"/api/entities?library={LIBRARY}&q=service+{middle}"),
        ("one entity", f"/api/entities/{middle}?library={LIBRARY}"),
        ("neighbourhood, depth 2", f"/api/graph?library={LIBRARY}&name={middle}&depth=2"),
        ("history", f"/api/history?library={LIBRARY}"),
        ("health", "/api/health"),
    ]


async def timed_reads(base: str, headers: dict[str, str], entities: int, calls: int) -> dict[str, dict[str, float]]:
    import httpx2 as httpx

    ms: dict[str, list[float]] = {label: [] for label, _ in reads(entities)}
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=60) as http:
        for _label, path in reads(entities):  # one warm-up each: the first read of a kind builds caches
            (await http.get(path)).raise_for_status()
        for _ in range(calls):
            for label, path in reads(entities):
                t0 = time.perf_counter()
                response = await http.get(path)
                ms[label].append((time.perf_counter() - t0) * 1000)
                if response.status_code != 200:
                    raise RuntimeError(f"GET {path}: {response.status_code} {response.text[:300]}")
    return {label: percentiles(values) for label, values in ms.items()}


async def store_all(base: str, headers: dict[str, str], n: int, tick) -> list[float]:
    import httpx2 as httpx

    ms = []
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=60) as http:
        for i in range(n):
            t0 = time.perf_counter()
            response = await http.post("/api/memories", json=memory_body(i))
            ms.append((time.perf_counter() - t0) * 1000)
            if response.status_code not in (200, 201):
                raise RuntimeError(f"POST /api/memories: {response.status_code} {response.text[:300]}")
            tick()
    return ms


async def make_graph(endpoint: Endpoint, entities: int) -> None:
    """Entities e00000.. in a chain of relations, through MCP (the graph tools' own path)."""
    async with http_session(endpoint.url, endpoint.headers, client_session_class()) as session:
        for start in range(0, entities, 100):
            names = [f"e{i:05d}" for i in range(start, min(entities, start + 100))]
            await session.call_tool("create_entities", {"library": LIBRARY, "entities": [
                {"name": n, "entityType": "service", "observations": [f"{n} serves {WORDS[i % len(WORDS)]}"]}
                for i, n in enumerate(names)]})
            await session.call_tool("create_relations", {"library": LIBRARY, "relations": [
                {"from": a, "to": b, "relationType": "calls"} for a, b in zip(names, names[1:], strict=False)]})


async def live_events(endpoint: Endpoint, base: str, headers: dict[str, str], rounds: int) -> list[dict[str, float]]:
    """Per round: ms from an MCP store_memory's start to the `change` event on /api/events, and to its reply."""
    import httpx2 as httpx

    out = []
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=None) as http, \
            http_session(endpoint.url, endpoint.headers, client_session_class()) as session:
        for r in range(rounds):
            seen: asyncio.Future[float] = asyncio.get_running_loop().create_future()
            opened = asyncio.Event()

            async def listen(seen=seen, opened=opened) -> None:
                async with http.stream("GET", "/api/events") as stream:
                    if stream.status_code != 200:
                        raise RuntimeError(f"GET /api/events: {stream.status_code} {(await stream.aread())[:300]!r}")
                    async for line in stream.aiter_lines():
                        if line.startswith(": ready"):  # the stream reads the journal from here on
                            opened.set()
                        if line.startswith("event:") and "change" in line and not seen.done():
                            seen.set_result(time.perf_counter())
                            return

            task = asyncio.create_task(listen())
            ready = asyncio.create_task(opened.wait())
            await asyncio.wait([task, ready], timeout=30, return_when=asyncio.FIRST_COMPLETED)
            if task.done():
                ready.cancel()
                task.result()  # the stream's refusal, raised here
            if not opened.is_set():
                raise RuntimeError("GET /api/events: no ': ready' within 30 s")
            t0 = time.perf_counter()
            await session.call_tool("store_memory", {"library": LIBRARY, "content": f"live event round {r}"})
            replied = time.perf_counter()
            event_at = await asyncio.wait_for(seen, 30)
            task.cancel()
            out.append({"event_ms": round((event_at - t0) * 1000, 2), "reply_ms": round((replied - t0) * 1000, 2)})
    return out


def run(*, memories: int, entities: int, calls: int, out: Path, console: Any) -> dict[str, Any]:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Table

    tmp = Path(tempfile.mkdtemp(prefix="memloci-bench-dashboard-"))
    try:
        env = bench_env(tmp / "home")
        serve = ["--libraries", f"{LIBRARY}:{tmp / 'bench.db'}", "--tools", "graph,memory"]
        with loopback_server(serve, env, log=tmp / "server.log", scopes=[f"{LIBRARY}:write"]) as endpoint:
            base = endpoint.url.removesuffix("/mcp")
            with Progress(TextColumn("storing through /api/memories"), BarColumn(), MofNCompleteColumn(),
                          TimeElapsedColumn(), console=Console(stderr=True), transient=True) as bar:
                task = bar.add_task("stores", total=memories)
                t0 = time.perf_counter()
                store_ms = asyncio.run(store_all(base, endpoint.headers, memories, lambda: bar.advance(task)))
                store_s = time.perf_counter() - t0
            asyncio.run(make_graph(endpoint, entities))
            console.print(f"timing {len(reads(entities))} reads × {calls} ...", highlight=False)
            read_stats = asyncio.run(timed_reads(base, endpoint.headers, entities, calls))
            events = asyncio.run(live_events(endpoint, base, endpoint.headers, 5))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    stores = {"seconds": round(store_s, 3), "per_s": round(memories / store_s, 1), **percentiles(store_ms)}
    report: dict[str, Any] = {
        "bench": "dashboard", "memories": memories, "entities": entities, "calls": calls,
        "engine": "sqlite", "embedder": "none", "stores": stores, "reads": read_stats, "events": events,
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "load": os.getloadavg()}}
    table = Table(title=f"memloci bench dashboard — {memories} memories, {entities} entities, "
                        f"{calls} calls per read (ms)")
    for column in ("request", "p50", "p95"):
        table.add_column(column, justify="left" if column == "request" else "right")
    table.add_row(f"POST /api/memories ({stores['per_s']:.0f}/s)", f"{stores['p50_ms']:.1f}", f"{stores['p95_ms']:.1f}")
    for label, stats in read_stats.items():
        table.add_row(f"GET {label}", f"{stats['p50_ms']:.1f}", f"{stats['p95_ms']:.1f}")
    console.print(table)
    console.print("live event before the MCP reply in {} of {} rounds; event ms: {}".format(
        sum(e["event_ms"] <= e["reply_ms"] for e in events), len(events),
        ", ".join(f"{e['event_ms']:.0f} (reply {e['reply_ms']:.0f})" for e in events)), highlight=False)
    save_report(report, out, console)
    return report
