"""The service's vectors: each library's vector index, note-passage index and embedding worker,
built once the embedder has loaded, and the recorder of retrievals. MemoryService holds one
LibraryVectors; every write reaches it through the one post-write hook (`written`).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from memloci.core.errors import StorageUnavailableError
from memloci.search.embedder import EmbedderHandle
from memloci.search.vectors import (
    EmbeddingWorker,
    PassageIndex,
    RequestBatcher,
    VectorIndex,
    VectorOffers,
    library_key,
)
from memloci.store.protocols import Passages, Store

log = logging.getLogger(__name__)

# A passage is longer than an observation, and its cosine to a short question lower for the same
# relevance ("holiday trip" to a paragraph about a vacation in Japan: 0.32); measured on
# `memloci bench notes` (LoCoMo sessions), floors 0.2-0.35 differ by under 0.005 nDCG@10.
BODY_FLOOR = 0.3


class AccessRecorder:
    """Counts retrievals (access_count, last_accessed_at) off the request path: a hit is
    recorded by a background thread a moment later, so a search never waits for a write."""

    def __init__(self) -> None:
        self._queue: list[tuple[Store, list[int]]] = []
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def record(self, store: Store, ids: list[int]) -> None:
        if not ids:
            return
        with self._lock:
            self._queue.append((store, ids))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="memloci-access", daemon=True)
                self._thread.start()
        self._wake.set()

    def _run(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            self.drain()

    def drain(self) -> None:
        with self._lock:
            queue, self._queue = self._queue, []
        by_store: dict[int, tuple[Store, list[int]]] = {}
        for store, ids in queue:
            by_store.setdefault(id(store), (store, []))[1].extend(ids)
        for store, ids in by_store.values():
            try:
                store.touch_memories(ids)
            except StorageUnavailableError:  # its store has logged the outage once; a count lost
                pass
            except Exception as exc:  # a count lost is better than a search failed
                log.warning("could not record accesses in %s: %s", store.name, exc)


class LibraryVectors:
    """The vector indexes and embedding workers of the libraries in use, by library (never by
    name: two projects may share one), and the access recorder."""

    def __init__(self, embedder: EmbedderHandle, *, embed_pending: bool = True):
        """`embed_pending=False` (read-only commands) searches the stored vectors but never
        computes or writes new ones."""
        self.embedder = embedder
        self.embed_pending = embed_pending
        self.accesses = AccessRecorder()
        self.offers = VectorOffers()  # vectors requests computed, for every library's worker to take
        self.batcher = RequestBatcher(self.offers)  # requests' texts embedded together (near-duplicate checks)
        self._dense: dict[str, tuple[VectorIndex, EmbeddingWorker]] = {}
        self._passages: dict[str, PassageIndex] = {}  # note-body passages, filled by the same worker
        self._lock = threading.Lock()
        self._bootstrapping: set[str] = set()

    def of(self, store: Store) -> tuple[VectorIndex, EmbeddingWorker] | None:
        """The library's vector index and embedding worker, once the embedder has loaded."""
        if not self.embedder.enabled:
            return None
        embedder = self.embedder.get()
        if embedder is None:
            return None
        key = library_key(store)
        with self._lock:
            if key not in self._dense:
                index = VectorIndex(store, embedder.model_id)
                passages = PassageIndex(store, embedder.model_id)
                worker = EmbeddingWorker(store, self.embedder, index.add, passages.add, self.offers)
                self._dense[key] = (index, worker)
                self._passages[key] = passages
                if self.embed_pending:
                    worker.start()
            return self._dense[key]

    def known(self, store: Store) -> tuple[VectorIndex, EmbeddingWorker] | None:
        """The library's index and worker if they are built already (never waits for the model)."""
        return self._dense.get(library_key(store))

    def indexes(self) -> list[VectorIndex]:
        """The vector indexes built so far, one per library in use."""
        with self._lock:
            return [index for index, _ in self._dense.values()]

    def written(self, store: Store) -> None:
        """After a write: new memories and changed note bodies wait for vectors, so wake the
        library's embedding worker (the first write starts it, once the model has loaded)."""
        if not self.embedder.enabled:
            return
        key = library_key(store)
        with self._lock:
            pair = self._dense.get(key)
        if pair:
            pair[1].poke()
        elif key not in self._bootstrapping:
            self._bootstrapping.add(key)  # one thread waits for the model, then starts the worker
            self.embedder.start_background()
            threading.Thread(target=self.of, args=(store,), daemon=True).start()

    def flush(self, store: Store, timeout: float) -> bool:
        """Wait until every memory and note passage of the library has its vector."""
        pair = self.of(store)
        return True if pair is None else pair[1].flush(timeout)

    def bodies_embedded(self, store: Store) -> bool:
        """Whether the library has note passages with vectors (and the model is loaded). The
        library's indexes are built here if no write or search built them yet (a server started
        on notes written before): else a question the words fill the page for never fused in
        the notes' meaning."""
        if self.embedder.get(timeout=0) is None:
            return False
        passages = self._passages.get(library_key(store))
        if passages is None:
            self.of(store)  # the model is loaded: no wait
            passages = self._passages.get(library_key(store))
            if passages is None:
                return False
        passages.refresh()
        return len(passages) > 0

    def body_signals(self, store: Store, text: str, embedder: Any, weight: float) -> list[tuple[str, float, str]]:
        """(entity name, score, why) for notes whose body means what the query says: `weight` times
        the similarity of the closest passage, above BODY_FLOOR (passages embedded so far)."""
        passages = self._passages.get(library_key(store)) if embedder is not None else None
        if passages is None:
            return []
        try:
            vector = embedder.embed([text])[0]
        except Exception as exc:  # the model failed now: words still answer
            log.warning("query embedding failed, notes searched without meaning: %s", exc)
            return []
        best = {i: sim for i, sim in passages.best_entities(vector).items() if sim >= BODY_FLOOR}
        names = store.entity_names_by_id(list(best)) if best and isinstance(store, Passages) else {}
        return [(names[i], weight * min(1.0, sim), f"body means it ({sim:.2f})")
                for i, sim in best.items() if i in names]

    def close(self) -> None:
        """Finish background work: the model load, the embedding batch in hand, the accesses."""
        self.embedder.wait()
        for _, worker in self._dense.values():
            worker.stop()
        self.accesses.drain()
