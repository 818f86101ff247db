"""Search under consolidation (`memloci bench lifecycle --parts under-load`): does a consolidation run
of a library keep off the request path (search p95 should no more than double meanwhile)?

A SQLite library of N free memories with stored vectors (lifecycle_library.py: no embedder run per
memory) is served by a real `memloci serve --transport http` (http/loopback.py) with the minilm
embedder, which embeds each query. A few MCP clients (Python SDK, one process, one event loop)
call retrieve_memory in a loop; after a baseline window another client calls the maintenance
group's `consolidate` tool (yearly, dry_run false: the server runs `memloci consolidate --nice` in a
child process, service/background.py) and the clients keep going until it returns, then a few
seconds more. A call counts in a window when it started and ended inside it. Each round uses a
fresh copy of the library and a fresh server; the report gives every round and the medians.

Where the time goes is measured, not guessed: the CPU seconds of the server process and of the
consolidation child (read from /proc while it runs) in each window.
"""

from __future__ import annotations

import os
import random
import shutil
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memloci.bench.common import client_session_class, percentiles
from memloci.bench.lifecycle_library import fill, open_service, synthetic_memories, vocabulary
from memloci.core.settings import Settings
from memloci.http.loopback import Endpoint, http_session, loopback_server

WARMUP_S = 5.0
AFTER_S = 15.0  # the server embeds the new summaries then: searches wait for them (see run_under_load)
TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _cpu_s(pid: int) -> float | None:
    """utime + stime of a process in seconds (Linux /proc), None if it is gone or unreadable."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICK
    except (OSError, IndexError, ValueError):
        return None


def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            out += [int(c) for c in (task / "children").read_text().split()]
    except (OSError, ValueError):
        pass
    return out


class ChildWatch:
    """Polls the server's child processes while consolidation runs: the last CPU seconds and the
    nice value seen of each."""

    def __init__(self, server_pid: int):
        self.server_pid = server_pid
        self.cpu: dict[int, float] = {}
        self.nice: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> ChildWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        while not self._stop.wait(0.2):
            for pid in _children(self.server_pid):
                cpu = _cpu_s(pid)
                if cpu is not None:
                    self.cpu[pid] = cpu
                    try:
                        self.nice[pid] = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[16])
                    except (OSError, IndexError, ValueError):
                        pass


async def _round(endpoint: Endpoint, clients: int, baseline_s: float, words: list[str]) -> dict[str, Any]:
    import anyio

    samples: list[tuple[float, float]] = []  # (start, end) of each retrieve_memory, perf_counter seconds
    errors: list[str] = []
    stop = anyio.Event()
    ready = [anyio.Event() for _ in range(clients)]
    marks: dict[str, float] = {}
    server_pid = endpoint.process.pid

    async def client(c: int) -> None:
        rng = random.Random(c)
        async with http_session(endpoint.url, endpoint.headers, client_session_class()) as session:
            await session.call_tool("retrieve_memory", {"query": "warm up", "n_results": 10})  # the model loads
            ready[c].set()
            while not stop.is_set():
                query = " ".join(rng.sample(words, 3))
                t0 = time.perf_counter()
                result = await session.call_tool("retrieve_memory", {"query": query, "n_results": 10})
                samples.append((t0, time.perf_counter()))
                if result.is_error:
                    errors.append(result.content[0].text[:200] if result.content else "error")

    async with anyio.create_task_group() as tg:
        for c in range(clients):
            tg.start_soon(client, c)
        async with http_session(endpoint.url, endpoint.headers, client_session_class()) as admin:
            for event in ready:
                await event.wait()
            await anyio.sleep(WARMUP_S)
            cpu0 = _cpu_s(server_pid) or 0.0
            marks["baseline"] = time.perf_counter()
            await anyio.sleep(baseline_s)
            cpu1 = _cpu_s(server_pid) or 0.0
            marks["during"] = time.perf_counter()
            with ChildWatch(server_pid) as watch:
                result = await admin.call_tool("consolidate", {"time_horizon": "yearly", "dry_run": False})
            marks["after"] = time.perf_counter()
            cpu2 = _cpu_s(server_pid) or 0.0
            await anyio.sleep(AFTER_S)
            marks["end"] = time.perf_counter()
            cpu3 = _cpu_s(server_pid) or 0.0
            stop.set()
    if result.is_error:
        raise RuntimeError(f"consolidate failed: {result.content[0].text[:500] if result.content else ''}")
    out = result.structured_content or {}

    def window(a: str, b: str) -> list[float]:  # a call counts in the window it started in, however long it took
        return [(e - s) * 1000 for s, e in samples if marks[a] <= s < marks[b]]

    base, during, after = window("baseline", "during"), window("during", "after"), window("after", "end")
    lengths = {k: marks[b] - marks[k] for k, b in (("baseline", "during"), ("during", "after"), ("after", "end"))}
    report: dict[str, Any] = {"baseline": percentiles(base), "during": percentiles(during), "after": percentiles(after),
              "longest_ms": {k: round(max(w, default=0.0), 1) for k, w in (("baseline", base), ("during", during),
                                                                           ("after", after))},
              "consolidate_s": round(lengths["during"], 1), "errors": len(errors),
              "calls_per_s": {k: round(len(w) / max(lengths[k], 1e-9), 1)
                              for k, w in (("baseline", base), ("during", during), ("after", after))},
              "server_cpu_share": {"baseline": round((cpu1 - cpu0) / lengths["baseline"], 2),
                                   "during": round((cpu2 - cpu1) / lengths["during"], 2),
                                   "after": round((cpu3 - cpu2) / lengths["after"], 2)},
              "child_cpu_s": round(sum(watch.cpu.values()), 1), "child_nice": sorted(set(watch.nice.values())),
              "consolidated": {k: out.get("report", {}).get(k) for k in ("considered", "associations", "clusters",
                                                                         "summaries", "archived")},
              "load_average": [round(x, 2) for x in os.getloadavg()]}
    p95 = report["baseline"].get("p95_ms"), report["during"].get("p95_ms")
    report["p95_ratio"] = round(p95[1] / p95[0], 2) if p95[0] and p95[1] else None
    return report


def run_under_load(n: int, rounds: int, clients: int, baseline_s: float, settings: Settings,
                   progress: Callable[[str], None]) -> dict[str, Any]:
    """`rounds` rounds on fresh copies of one library of `n` memories; each round's windows and the medians."""
    import anyio

    from memloci.search.embedder import create_embedder

    model = create_embedder("minilm", settings)
    if model is None:
        raise ValueError("--parts under-load: needs the minilm embedder")
    model_id = model.model_id  # the server's own model: vectors of another would be re-embedded
    del model
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="memloci-life-load-") as tmp:
        folder = Path(tmp)
        progress(f"under load: building a library of {n} memories")
        lines, vectors = synthetic_memories(n, datetime.now(UTC))
        service = open_service(f"load:{folder / 'source.db'}", settings)
        try:
            fill(service.store(), lines, vectors, model_id)
        finally:
            service.close()
        words = vocabulary(3000, random.Random(7))
        home = folder / "home"
        home.mkdir()
        (home / "config.toml").write_text("[http]\nrate_limit = 0\n")
        env = {k: v for k, v in os.environ.items() if not k.startswith("MEMLOCI_") or k == "MEMLOCI_CACHE"}
        env.update({"MEMLOCI_HOME": str(home), "MEMLOCI_EMBEDDER": "minilm"})
        for r in range(rounds):
            progress(f"under load: round {r + 1} of {rounds}")
            db = folder / f"round{r}.db"
            for f in folder.glob("source.db*"):
                shutil.copy(f, folder / f.name.replace("source.db", db.name))
            serve = ["--libraries", f"load:{db}", "--tools", "memory,maintenance"]
            with loopback_server(serve, env, log=folder / f"server{r}.log") as endpoint:
                rows.append(anyio.run(_round, endpoint, clients, baseline_s, words))
    ratios = [r["p95_ratio"] for r in rows if r["p95_ratio"] is not None]

    def median(path: tuple[str, str]) -> float | None:
        values = [r[path[0]][path[1]] for r in rows if path[1] in r[path[0]]]
        return round(statistics.median(values), 2) if values else None

    return {"memories": n, "clients": clients, "baseline_s": baseline_s, "rounds": rows,
            "median": {"baseline_p50_ms": median(("baseline", "p50_ms")), "baseline_p95_ms": median(("baseline", "p95_ms")),
                       "during_p50_ms": median(("during", "p50_ms")), "during_p95_ms": median(("during", "p95_ms")),
                       "after_p95_ms": median(("after", "p95_ms")),
                       "p95_ratio": round(statistics.median(ratios), 2) if ratios else None,
                       "consolidate_s": round(statistics.median(r["consolidate_s"] for r in rows), 1)}}
