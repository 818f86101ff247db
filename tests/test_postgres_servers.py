"""Several servers on one PostgreSQL library (tests/pg.py): pending memories claimed so no two
servers embed the same one, a claim that dies with its process, and the words of names kept
fresh by the change notices other servers' writes send."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np

from memloci.core.model import EntityInput
from memloci.formats.official import MemoryLine
from memloci.search.entities import find_entities
from memloci.store.postgres.engine import PostgresStore

ROOT = Path(__file__).resolve().parents[1]
MODEL = "test-hash-8"


def _vector(text: str) -> np.ndarray:
    """A deterministic 8-dimension vector of a text (the claims are under test, not the model)."""
    rng = np.random.default_rng(abs(hash(text)) % 2**32)
    v = rng.standard_normal(8).astype(np.float32)
    return v / np.linalg.norm(v)


def _fill(store: PostgresStore, n: int) -> None:
    store.import_memories([MemoryLine(f"memory number {i}", (), "note", "medium", {}, "2025-01-01T00:00:00Z",
                                      "2025-01-01T00:00:00Z") for i in range(n)], origin="test")


def _wait_for(check, what: str, seconds: float = 60.0):
    """Poll `check()` until it is true (a readiness wait, not a timing assert)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"never happened: {what}")


def test_two_servers_claim_different_batches(pg_library):
    first, second = PostgresStore(pg_library.url, pg_library.name), PostgresStore(pg_library.url, pg_library.name)
    try:
        _fill(first, 30)
        a = first.pending_embeddings(10)
        b = second.pending_embeddings(10)
        assert len(a) == len(b) == 10
        assert not {p.id for p in a} & {p.id for p in b}, "a claimed memory is skipped by the other server"
        assert [p.id for p in a] == sorted(p.id for p in a)
        saved = first.save_vectors([(p.id, p.content_hash, _vector(p.content)) for p in a], MODEL)
        assert set(saved.ids) == {p.id for p in a}
        # the first's next batch: neither its own saved ones nor the second's claimed ones
        c = first.pending_embeddings(10)
        assert len(c) == 10 and not {p.id for p in c} & ({p.id for p in a} | {p.id for p in b})
        # a batch never saved (its embedding failed) is let go by the next claim
        again = second.pending_embeddings(30)
        assert {p.id for p in b} <= {p.id for p in again} and not {p.id for p in again} & {p.id for p in c}
        assert first.pending_embeddings(0) == []  # (nothing asked: nothing held) lets c go
        assert len(second.pending_embeddings(30)) == 20
    finally:
        first.close()
        second.close()


CLAIMER = textwrap.dedent("""
    import sys, time
    from memloci.store.postgres.engine import PostgresStore
    store = PostgresStore(sys.argv[1], sys.argv[2])
    print(" ".join(str(p.id) for p in store.pending_embeddings(int(sys.argv[3]))), flush=True)
    time.sleep(600)  # killed mid-batch
""")


def test_a_server_killed_mid_batch_leaves_nothing_claimed(pg_library):
    store = PostgresStore(pg_library.url, pg_library.name)
    _fill(store, 8)
    proc = subprocess.Popen([sys.executable, "-c", CLAIMER, pg_library.url, pg_library.name, "5"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        claimed = {int(i) for i in proc.stdout.readline().split()}
        assert len(claimed) == 5, proc.stderr.read() if not claimed else claimed
        assert [len(store.pending_embeddings(8)) for _ in range(2)] == [3, 3], "held while its server lives"
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)

        def every_one() -> list[int] | None:
            got = [p.id for p in store.pending_embeddings(8)]
            return got if len(got) == 8 else None

        assert claimed <= set(_wait_for(every_one, "the killed server's claim to go"))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        store.close()


WORKER = textwrap.dedent("""
    import json, sys, time
    import numpy as np
    from memloci.search.vectors import EmbeddingWorker
    from memloci.store.postgres.engine import PostgresStore

    class Embedder:  # deterministic, with a model's pace: both workers are busy at once
        model_id, dimension, multilingual = "test-hash-8", 8, False
        def embed(self, texts):
            time.sleep(0.002 * len(texts))
            out = np.zeros((len(texts), 8), dtype=np.float32)
            for k, t in enumerate(texts):
                rng = np.random.default_rng(sum(t.encode()) + len(t))
                out[k] = rng.standard_normal(8)
            return out / np.linalg.norm(out, axis=1, keepdims=True)

    class Handle:
        def get(self, timeout=None):
            return EMBEDDER

    EMBEDDER = Embedder()
    store = PostgresStore(sys.argv[1], sys.argv[2])
    store.open()
    saved = []
    worker = EmbeddingWorker(store, Handle(), lambda ids, threads, vectors, version: saved.extend(ids))
    print("ready", flush=True)
    sys.stdin.readline()  # both start together
    worker.start()
    while store.pending_count():  # the other server may still hold a batch
        worker.flush(120)
        time.sleep(0.05)
    worker.stop()
    store.close()
    print(json.dumps(saved), flush=True)
""")


def test_two_servers_embed_every_memory_exactly_once(pg_library):
    """Two server processes, each with the real embedding worker, on one library of 1,500
    pending memories: every memory is saved once, by one of them, and none is left pending."""
    store = PostgresStore(pg_library.url, pg_library.name)
    procs = []
    try:
        _fill(store, 1500)
        procs = [subprocess.Popen([sys.executable, "-c", WORKER, pg_library.url, pg_library.name],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  cwd=ROOT) for _ in range(2)]
        for p in procs:
            assert p.stdout.readline().strip() == "ready", p.stderr.read()
        for p in procs:
            p.stdin.write("go\n")
            p.stdin.flush()
        outs = [p.communicate(timeout=300) for p in procs]
        assert all(p.returncode == 0 for p in procs), [err for _, err in outs]
        saves = [json.loads(out.strip().splitlines()[-1]) for out, _ in outs]
        every = sorted(saves[0] + saves[1])
        assert len(every) == len(set(every)) == 1500, "each memory embedded exactly once"
        assert all(saves), "both servers took part"
        assert store.pending_count() == 0 and len(store.load_vectors().ids) == 1500
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        store.close()


def test_a_name_made_on_one_server_is_respelled_on_another(pg_library):
    first, second = PostgresStore(pg_library.url, pg_library.name), PostgresStore(pg_library.url, pg_library.name)
    try:
        first.open()
        second.open()
        assert find_entities(second, "Fairwether", 5).hits == ()
        reads: list[int] = []
        log_reads = second.name_changes
        second.name_changes = lambda since: reads.append(since) or log_reads(since)  # type: ignore[method-assign]
        find_entities(second, "anything", 5)
        assert reads == [], "nothing changed: the name log is not read again"
        before = second.changes()
        first.create_entities([EntityInput("Cornelius Fairweather", "person")], origin="test")
        _wait_for(lambda: second.changes() > before, "the second server to hear the write")
        hits = find_entities(second, "Fairwether", 5).hits
        assert [h.entity.name for h in hits] == ["Cornelius Fairweather"] and "fairwether→fairweather" in hits[0].why
        assert len(reads) == 1
        find_entities(second, "Fairwether", 5)
        assert len(reads) == 1
    finally:
        first.close()
        second.close()
