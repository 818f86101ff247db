"""The PostgreSQL benchmarks at a tiny size on the session's real PostgreSQL, run as `memloci bench
...` (the tests do not import the benches): each runs its real servers over stdio, writes its
JSON, and every memory or write it made is read back. No timing is asserted (the figures are the
bench's job). And the store's bulk load the recall bench fills its library with."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import psycopg
import pytest

from memloci.store.postgres.engine import PostgresStore


def _bench(tmp_path, *args: str) -> subprocess.CompletedProcess:
    """`memloci bench ARGS` in a process of its own, with a home of its own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMLOCI_")} | {"MEMLOCI_HOME": str(tmp_path / "home")}
    return subprocess.run([sys.executable, "-m", "memloci", "bench", *args], env=env, capture_output=True, text=True,
                          timeout=900)


def test_bulk_load_memories_counts_and_finds_by_vector(pg_library):
    store = PostgresStore(pg_library.url, pg_library.name)
    try:
        rng = np.random.default_rng(1)
        vectors = rng.normal(size=(30, 8)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        batches = [[(f"memory {i} about tea", ["Bench", f"b{i % 3}"], "note", f"2026-01-{i % 28 + 1:02d}T00:00:00Z",
                     vectors[i]) for i in range(start, start + 10)] for start in (0, 10, 20)]
        seen: list[int] = []
        assert store.bulk_load_memories(iter(batches), "test-model", seen.append) == 30
        assert seen == [10, 10, 10]
        assert store.stats().memories == 30
        assert store.pending_count() == 0 and store.vector_model() == "test-model"
        from memloci.core.model import MemoryFilter

        found = store.vector_candidates(vectors[7], 3, MemoryFilter(), model="test-model")
        best = max(found.scores, key=found.scores.get)
        assert store.load_memories([best])[best].content == "memory 7 about tea"
        assert len(store.memory_ids(MemoryFilter(tags=("bench",)))) == 30  # tags by key, as store_memory keeps them
        assert len(store.memory_ids(MemoryFilter(tags=("B1",)))) == 10
    finally:
        store.close()


def test_bench_recall_postgres_tiny(pg_url, tmp_path):
    out = tmp_path / "recall.json"
    done = _bench(tmp_path, "recall", "--engine", "postgres", "--url", pg_url, "--size", "60", "--queries", "2",
                  "--out", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    saved = json.loads(out.read_text())
    assert saved["engine"] == "postgres" and saved["size"] == 60
    assert saved["held"] == 60  # every memory loaded is there
    assert saved["vectors"]["texts_embedded_by_the_model"] == 2 * 1000  # bench/recall_pg.py's PHRASES, twice
    for label in ("retrieve_memory", "retrieve_memory (tag filter)", "retrieve_memory (time: half)",
                  "retrieve_memory (time: this week)"):
        assert saved["latency_ms"][label]["calls"] == 2
        assert {"p50_ms", "p95_ms"} <= set(saved["latency_ms"][label])
    assert "JSON written to" in done.stdout


# The calls `memloci bench graph` times, one of each per round (bench/graph.py's workload).
GRAPH_CALLS = ("create_entities", "search_nodes", "search_nodes common-word", "search_nodes common-word note",
               "search_nodes typo", "open_nodes",
               "read_graph", "add_observations", "create_relations", "delete_relations", "delete_observations",
               "delete_entities")


def test_bench_graph_postgres_tiny(pg_url, tmp_path):
    out = tmp_path / "graph.json"
    n = 40
    done = _bench(tmp_path, "graph", "--engine", "postgres", "--url", pg_url, "--n", str(n), "--calls", "2",
                  "--out", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    saved = json.loads(out.read_text())
    assert saved["engine"] == "postgres"
    assert {tool: stats["calls"] for tool, stats in saved["memloci"].items()} == dict.fromkeys(GRAPH_CALLS, 2)
    # every timed write was undone by the next ones; the warm-up's entity stays
    assert saved["held"] == {"entities": n + 1, "observations": 3 * n, "relations": n}


def test_bench_engines_refuse_unknown(tmp_path):
    refused = _bench(tmp_path, "graph", "--n", "1", "--calls", "1", "--engine", "mysql", "--out", str(tmp_path / "g.json"))
    assert refused.returncode == 1 and "--engine: unknown engine 'mysql'" in refused.stderr
    refused = _bench(tmp_path, "recall", "--size", "1", "--queries", "1", "--url", "postgresql://x/y",
                     "--out", str(tmp_path / "r.json"))
    assert refused.returncode == 1 and "--url/--library: only with --engine postgres" in refused.stderr
    assert not (tmp_path / "g.json").exists() and not (tmp_path / "r.json").exists()


def _indexes(store: PostgresStore) -> set[str]:
    with store._read() as conn:
        return {r[0] for r in conn.execute(
            """SELECT indexname FROM pg_indexes WHERE schemaname = current_schema()
               AND tablename IN ('memories', 'memory_tags', 'memory_vectors')""")}


def test_bulk_load_rebuilds_every_index_and_is_all_or_nothing(pg_library):
    store = PostgresStore(pg_library.url, pg_library.name)
    try:
        before = _indexes(store)
        vector = np.ones(8, dtype=np.float32) / np.sqrt(8)
        duplicate = [[("same text", ["a"], "note", "2026-01-01T00:00:00Z", vector),
                      ("same text", ["a"], "note", "2026-01-02T00:00:00Z", vector)]]
        with pytest.raises(psycopg.errors.UniqueViolation):  # the rebuilt unique index refuses the repeated text
            store.bulk_load_memories(iter(duplicate), "test-model")
        assert store.stats().memories == 0 and _indexes(store) == before  # nothing half-applied
        steps: dict[str, float] = {}
        rows = [[(f"Café {i} in München", ["x"], "note", "2026-01-01T00:00:00Z", vector) for i in range(5)]]
        assert store.bulk_load_memories(iter(rows), "test-model", timings=steps) == 5
        assert _indexes(store) == before | {"memory_vectors_hnsw"}  # each index built again after the load
        assert "index memories_search_s" in steps and "copy memories_s" in steps
        with store._read() as conn:  # the accent-folding search column, as a single store_memory writes it
            (found,) = conn.execute("SELECT count(*) FROM memories WHERE search @@ "
                                    "plainto_tsquery('english', memloci_fold('munchen'))").fetchone()
        assert found == 5
    finally:
        store.close()


def test_fold_answers_ascii_and_accented_text_alike(pg_library):
    store = PostgresStore(pg_library.url, pg_library.name)
    try:
        with store._read() as conn:
            got = conn.execute("SELECT memloci_fold('plain ASCII'), memloci_fold('München Café'), "
                               "memloci_fold(NULL)").fetchone()
        assert got == ("plain ASCII", "Munchen Cafe", "")
    finally:
        store.close()
