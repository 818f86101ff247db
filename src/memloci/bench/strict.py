"""`memloci bench strict --relations N`: the strict schema's cycle check on a large graph.

A library of N/5 entities and N `depends-on` relations forming a random DAG (each edge from
a lower to a higher number, so the graph is acyclic and most entities reach many others) is
built in-process; then `memloci serve --schema strict --tools strict` answers
`create_relation` over MCP stdio: new edges that keep the graph acyclic (accepted), and
edges that would close a cycle (refused with the cycle named). Every call runs the check
over the whole graph.
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
from memloci.bench.graph import SEED


def run(*, relations: int, calls: int, out: Path, console: Any) -> dict[str, Any]:
    import anyio

    from memloci.app.registry import LibraryRegistry
    from memloci.app.specs import LibrarySpec
    from memloci.core.model import EntityInput, RelationInput
    from memloci.search.embedder import EmbedderHandle
    from memloci.service.facade import MemoryService

    rng = random.Random(SEED)
    n = max(10, relations // 5)
    tmp = Path(tempfile.mkdtemp(prefix="memloci-strict-"))
    db = tmp / "strict.db"
    service = MemoryService(LibraryRegistry([LibrarySpec("strict", db)]), EmbedderHandle("none"))
    names = [f"node-{i}" for i in range(n)]
    for i in range(0, n, 1000):
        service.create_entities([EntityInput(x, "concept") for x in names[i:i + 1000]])
    edges: set[tuple[int, int]] = set()
    while len(edges) < relations:
        a = rng.randrange(n - 1)
        b = rng.randrange(a + 1, min(n, a + 1 + max(50, n // 20)))
        edges.add((a, b))
    ordered = sorted(edges)
    for i in range(0, len(ordered), 1000):
        service.create_relations([RelationInput(names[a], "depends-on", names[b]) for a, b in ordered[i:i + 1000]])
    service.close()
    console.print(f"built {n} entities and {len(ordered)} relations (a DAG)")

    async def timed() -> dict[str, list[float]]:
        from mcp import StdioServerParameters
        from mcp.client.stdio import stdio_client

        env = {**os.environ, "MEMLOCI_LIBRARIES": f"strict:{db}", "MEMLOCI_EMBEDDER": "none"}
        params = StdioServerParameters(command=sys.executable,
                                       args=["-m", "memloci", "serve", "--schema", "strict", "--tools", "strict"], env=env)
        times: dict[str, list[float]] = {"create_relation (accepted)": [], "create_relation (cycle refused)": []}
        with open(os.devnull, "w") as devnull:
            async with stdio_client(params, errlog=devnull) as (read, write):
                async with client_session_class()(read, write) as session:
                    await session.initialize()
                    for _ in range(calls):
                        a, b = ordered[rng.randrange(len(ordered))]
                        c = rng.randrange(b + 1, n) if b + 1 < n else b
                        for name, args, expect in (
                                ("create_relation (accepted)", (names[a], names[c], "uses"), True),
                                ("create_relation (cycle refused)", (names[b], names[a], "related-to"), False)):
                            t0 = time.perf_counter()
                            result = await session.call_tool("create_relation", {
                                "from_entity": args[0], "to_entity": args[1], "relation_type": args[2]})
                            times[name].append((time.perf_counter() - t0) * 1000)
                            if result.structured_content["success"] is not expect:
                                raise RuntimeError(f"{name}: unexpected reply {result.structured_content}")
            return times

    times = anyio.run(timed)
    latency_ms = {k: percentiles(v, digits=3) for k, v in times.items()}
    report = {"bench": "strict", "entities": n, "relations": len(ordered), "calls": calls, "latency_ms": latency_ms}
    print_latencies(console, f"memloci bench strict — {n} entities, {len(ordered)} relations, {calls} calls each "
                             "(ms, MCP stdio round trip)", latency_ms)
    save_report(report, out, console)
    import shutil

    shutil.rmtree(tmp, ignore_errors=True)
    return report
