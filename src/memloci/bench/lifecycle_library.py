"""A library of N free memories with stored vectors, made without running the embedder (too slow
at 100,000 memories), and consolidation timed on it on each engine (`memloci bench lifecycle
--parts engines`).

The memories are texts of topic words plus filler words, their vectors random but clustered as
their topics are (lifecycle.py `clustered_topics`: a topic's rows about 0.8 apart in cosine, other
topics about 0), their dates spread over the last 120 days (a medium note's retention is 90 days:
about a quarter are past it and archived). They go in through the engines' public calls: the
memories by `import_memories` (Portable; PostgreSQL's `copy_memories`, MemoryCopies, takes the
vectors with them in one COPY), the vectors by `save_vectors`, under the name of the English-only
model (the texts are Latin, so service/consolidation.py `with_meaning` keeps every one).
"""

from __future__ import annotations

import contextlib
import os
import random
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from memloci.bench.common import postgres_url
from memloci.core.settings import Settings
from memloci.formats.official import MemoryLine
from memloci.search.embedder import MINILM_ID

ENGINES = ("sqlite", "postgres", "markdown")
MARKDOWN_MAX = 10_000  # a Markdown library writes a day file per day; larger sizes are skipped
SPREAD_DAYS = 120
SAVE_BATCH = 5_000


def vocabulary(size: int, rng: random.Random) -> list[str]:
    syllables = ["ka", "lo", "mi", "ter", "an", "vel", "dor", "is", "pra", "nu", "sel", "gor", "ben", "ti", "ru"]
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))))
    return sorted(words)


def clustered_topics(n: int, seed: int = 7, dim: int = 384) -> tuple[np.ndarray, np.ndarray]:
    """Random-but-clustered unit vectors and each row's topic: topics of 2 to 40 rows, each row a
    noisy copy of its topic's direction (cosine to it about 0.8, to another topic about 0)."""
    rng = np.random.default_rng(seed)
    sizes: list[int] = []
    while sum(sizes) < n:
        sizes.append(int(rng.integers(2, 41)))
    sizes[-1] -= sum(sizes) - n
    centres = rng.standard_normal((len(sizes), dim)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    topics = np.repeat(np.arange(len(sizes)), sizes)
    rows = centres[topics]
    rows += rng.standard_normal((n, dim)).astype(np.float32) * (0.75 / np.sqrt(dim))
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32), topics


def synthetic_memories(n: int, now: datetime, seed: int = 7) -> tuple[list[MemoryLine], np.ndarray]:
    """N memories (unique texts, a topic's three words in each) and their unit vectors, row i for memory i."""
    vectors, topics = clustered_topics(n, seed)
    rng = random.Random(seed)
    words = vocabulary(3000, rng)
    names = [" ".join(rng.sample(words, 3)) for _ in range(int(topics.max()) + 1)]
    lines = []
    seen: set[str] = set()
    for i in range(n):
        topic = int(topics[i])
        text = ""
        while not text or text in seen:  # no numbers in the texts: a changed number reads as a contradiction
            text = f"The {names[topic]} note: " + " ".join(rng.choice(words) for _ in range(rng.randint(6, 14))) + "."
        seen.add(text)
        at = (now - timedelta(days=rng.uniform(0.01, SPREAD_DAYS))).strftime("%Y-%m-%dT%H:%M:%SZ")
        lines.append(MemoryLine(text, (f"topic-{topic % 50}",), "note", "medium", {}, at, at))
    return lines, vectors


def fill(store: Any, lines: list[MemoryLine], vectors: np.ndarray, model: str) -> None:
    """The memories and their vectors into an empty library, through the store's public calls."""
    from memloci.core.model import Memory
    from memloci.store.protocols import MemoryCopies

    if isinstance(store, MemoryCopies):  # PostgreSQL: rows and vectors in one COPY
        memories = [Memory(i, m.content, "", m.tags, m.memory_type, m.importance, m.metadata, m.created_at,
                           m.updated_at, 0, None, None) for i, m in enumerate(lines)]
        store.copy_memories(memories, {i: vectors[i] for i in range(len(lines))}, model, origin="bench")
        return
    for start in range(0, len(lines), SAVE_BATCH):
        store.import_memories(lines[start:start + SAVE_BATCH], origin="bench")
    row = {m.content: i for i, m in enumerate(lines)}
    stored = [(m.id, m.content_hash, vectors[row[m.content]]) for m in store.free_memories()]
    for start in range(0, len(stored), SAVE_BATCH):
        store.save_vectors(stored[start:start + SAVE_BATCH], model)


@contextlib.contextmanager
def library_spec(engine: str, n: int, folder: Path, url: str | None) -> Iterator[str]:
    """`--libraries` text of a new, empty library of `engine` (PostgreSQL: a schema of its own on the URL)."""
    if engine == "sqlite":
        yield f"life{n}:{folder / f'life{n}.db'}"
    elif engine == "markdown":
        yield f"life{n}:{folder / f'life{n}-notes'}"
    else:
        yield f"life{n}x{os.getpid()}x{int(time.time())}:{url}"


def open_service(spec: str, settings: Settings | None, *, extract: bool = False) -> Any:
    """A service on the library `spec` names, with no embedder (extraction off unless asked)."""
    from memloci.app.registry import LibraryRegistry
    from memloci.app.specs import parse_library_specs
    from memloci.search.embedder import EmbedderHandle
    from memloci.service.facade import MemoryService

    registry = LibraryRegistry(parse_library_specs(spec), settings=settings) if settings else \
        LibraryRegistry(parse_library_specs(spec))
    return MemoryService(registry, EmbedderHandle("none"), extract=extract)


def consolidation_row(engine: str, n: int, spec: str, settings: Settings | None, now: datetime) -> dict[str, Any]:
    """Build the library, then time consolidate("yearly") as a preview and the execute of that preview."""
    lines, vectors = synthetic_memories(n, now)
    service = open_service(spec, settings)
    try:
        store = service.store()
        t0 = time.perf_counter()
        fill(store, lines, vectors, MINILM_ID)
        build_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        preview = service.consolidate("yearly", dry_run=True)
        preview_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        done = service.lifecycle.execute_preview(preview.preview_id)
        execute_s = time.perf_counter() - t0
    finally:
        service.close()
    r = preview.report
    sizes = _cluster_sizes(preview.items, preview.report)
    return {"engine": engine, "memories": n, "build_s": round(build_s, 1), "preview_s": round(preview_s, 1),
            "execute_s": round(execute_s, 1), "considered": r.get("considered", 0),
            "with_meaning": r.get("with_meaning", 0), "associations": r.get("associations", 0),
            "clusters": r.get("clusters", 0), "summaries": r.get("summaries", 0),
            "refused_clusters": len(r.get("refused_clusters", [])), "max_cluster": r.get("max_cluster"),
            "contradictions": r.get("contradictions", 0), "archived": r.get("archived", 0),
            "changed": done.counts["changed"], "created": done.counts["created"], "cluster_sizes": sizes,
            "refused_sizes": sorted((c["size"] for c in r.get("refused_clusters", [])), reverse=True)[:10]}


def _cluster_sizes(items: list[dict[str, Any]], report: dict[str, Any]) -> dict[str, int]:
    """Sizes of the summarized clusters, from the preview's items ("N memories, cohesion C" for a new
    summary, "stands for K like it" for a member standing for the rest), bucketed."""
    sizes: list[int] = []
    for item in items:
        why = str(item.get("why", ""))
        for part in why.split("; "):
            if part.endswith("like it") and part.startswith("stands for "):
                sizes.append(int(part.split()[2]) + 1)
            elif " memories, cohesion " in part:
                sizes.append(int(part.split()[0]))
    buckets = {"2-4": 0, "5-9": 0, "10-19": 0, "20-39": 0, "40+": 0}
    for s in sizes:
        key = "2-4" if s < 5 else "5-9" if s < 10 else "10-19" if s < 20 else "20-39" if s < 40 else "40+"
        buckets[key] += 1
    buckets["largest"] = max(sizes, default=0)
    return buckets


def run_engines(engines: list[str], sizes: list[int], url: str | None, settings: Settings | None,
                progress: Callable[[str], None]) -> list[dict[str, Any]]:
    """One row per engine and size (Markdown at MARKDOWN_MAX or fewer only)."""
    rows: list[dict[str, Any]] = []
    now = datetime.now(UTC)
    with tempfile.TemporaryDirectory(prefix="memloci-life-") as tmp, contextlib.ExitStack() as stack:
        folder = Path(tmp)
        server_url: str | None = None
        for engine in engines:
            if engine == "postgres" and server_url is None:
                server_url, _ = stack.enter_context(postgres_url(url, folder / "pgdata"))
            for n in sizes:
                if engine == "markdown" and n > MARKDOWN_MAX:
                    continue
                progress(f"consolidation on {engine}, {n} memories")
                with library_spec(engine, n, folder, server_url) as spec:
                    rows.append(consolidation_row(engine, n, spec, settings, now))
    return rows
