"""Dense retrieval: a library's vectors in memory, and the worker that embeds new memories.

Vectors live in SQLite (the truth) and, per process, in one float32 matrix: a query is a
single matrix-vector product (100,000 x 384 in a few milliseconds). Each row knows its
thread neighbours, so a memory's similarity can be lifted by theirs (a reply in a
conversation means little without the question before it).
"""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from memloci.core.errors import StorageUnavailableError
from memloci.core.lazy import on_first_use
from memloci.core.model import MemoryFilter
from memloci.search.embedder import REQUESTS, EmbedderHandle, yield_to_requests
from memloci.store.protocols import Passages, VectorSearch

if TYPE_CHECKING:
    import numpy as np
else:  # imported on first use: the server's start does not need it (core/lazy.py)
    np = on_first_use("numpy", globals(), "np")

log = logging.getLogger(__name__)

NEIGHBOUR_WEIGHT = 0.3  # share of each neighbour's similarity added to a memory's own
RECHECK_S = 5.0  # an idle embedding worker looks for unannounced work this often
GATHER_S = 0.01  # woken by a write, the worker waits this long: writes close together make one batch
OFFER_WAIT_S = 0.5  # how long the worker waits for a vector a request is computing for a text it holds
OFFERS_KEPT = 512  # vectors offered by requests and not yet taken, at most (the oldest are dropped)
# A backlog is embedded GIVE_WAY_TEXTS at a time, each batch once no request has run for SETTLE_S
# (or after GIVE_WAY_MAX_S at most): a request never shares the cores with more than one small batch.
GIVE_WAY_TEXTS = 16
SETTLE_S = 0.005
GIVE_WAY_MAX_S = 0.25


_keys: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # store -> its key: resolving a path reads the disk


def library_key(store) -> str:
    """What per-library state in a process is keyed by: the library's file (a Markdown library's
    index file), resolved. Never its display name: two projects `one/app` and `two/app` are both
    named "app", and must never share vectors or workers. Resolved once per store object (a
    store's path never changes), not at every search."""
    key = _keys.get(store)
    if key is None:
        path = str(store.path)
        key = _keys[store] = path if "://" in path else os.path.realpath(path)
    return key


class VectorIndex:
    """The vectors of one library, with thread neighbours, kept in step with the store. For a
    store that searches its own vectors (VectorSearch) it holds none and asks the store."""

    def __init__(self, store, model: str):
        self.store = store
        self.model = model
        self.delegated = isinstance(store, VectorSearch)
        self._lock = threading.Lock()
        self._version = -1
        self._ids = np.zeros(0, dtype=np.int64)
        self._matrix = np.zeros((0, 1), dtype=np.float32)
        self._prev = np.zeros(0, dtype=np.int64)
        self._next = np.zeros(0, dtype=np.int64)
        self._last_in_thread: dict[str, int] = {}
        self._capacity = 0
        self._n = 0

    def __len__(self) -> int:
        return self._n

    def _reload(self) -> None:
        loaded = self.store.load_vectors()
        ids, threads, matrix, version, model = loaded.ids, loaded.threads, loaded.matrix, loaded.version, loaded.model
        if model is not None and model != self.model:
            ids, threads, matrix = ids[:0], [], matrix[:0]  # another model's vectors are never mixed in
        n = len(ids)
        self._capacity = max(1024, int(n * 1.5))
        self._ids = np.zeros(self._capacity, dtype=np.int64)
        self._ids[:n] = ids
        dim = matrix.shape[1]
        self._matrix = np.zeros((self._capacity, dim), dtype=np.float32)
        self._matrix[:n] = matrix
        self._prev = np.full(self._capacity, -1, dtype=np.int64)
        self._next = np.full(self._capacity, -1, dtype=np.int64)
        self._last_in_thread = {}
        for pos, thread in enumerate(threads):  # ids ascend, so a thread's rows come in order
            self._link(pos, thread)
        self._n = n
        self._version = version

    def refresh(self) -> None:
        """Reload if another process (or a delete) changed the stored vectors."""
        if self.delegated:
            return
        version = self.store.vectors_version()
        if version != self._version:
            with self._lock:
                if version != self._version:
                    self._reload()

    def add(self, ids: list[int], threads: list[str], vectors: np.ndarray, version: int) -> None:
        """Append vectors this process just saved (ids larger than any held, as the worker goes in id order)."""
        if self.delegated:  # the store holds them, and searches them
            return
        with self._lock:
            # Each saved vector bumps the version once; any other difference is another writer.
            if (self._version < 0 or version != self._version + len(ids)
                    or (ids and self._n and ids[0] <= self._ids[self._n - 1])):
                self._reload()
                return
            need = self._n + len(ids)
            if need > self._capacity or self._matrix.shape[1] != vectors.shape[1]:
                self._grow(need, vectors.shape[1])
            for k, (memory_id, thread) in enumerate(zip(ids, threads)):
                pos = self._n + k
                self._ids[pos] = memory_id
                self._matrix[pos] = vectors[k]
                self._link(pos, thread)
            self._n = need
            self._version = version

    def _link(self, pos: int, thread: str) -> None:
        """Make row `pos` the newest of its thread ('' is no thread: no neighbours)."""
        if not thread:
            return
        last = self._last_in_thread.get(thread)
        if last is not None:
            self._prev[pos], self._next[last] = last, pos
        self._last_in_thread[thread] = pos

    def _grow(self, need: int, dim: int) -> None:
        capacity = max(need, self._capacity * 2, 1024)
        matrix = np.zeros((capacity, dim), dtype=np.float32)
        if self._matrix.shape[1] == dim:
            matrix[: self._n] = self._matrix[: self._n]
        ids = np.zeros(capacity, dtype=np.int64)
        ids[: self._n] = self._ids[: self._n]
        prev = np.full(capacity, -1, dtype=np.int64)
        nxt = np.full(capacity, -1, dtype=np.int64)
        prev[: self._n], nxt[: self._n] = self._prev[: self._n], self._next[: self._n]
        self._matrix, self._ids, self._prev, self._next, self._capacity = matrix, ids, prev, nxt, capacity

    def search(self, query: np.ndarray, k: int, allowed: set[int] | None = None,
               also: Sequence[int] = (), filters: MemoryFilter | None = None) -> tuple[dict[int, float], float, float]:
        """Similarities (own, plus NEIGHBOUR_WEIGHT x each neighbour's) of the best k memories and
        of the `also` ids, with the lowest and highest over all allowed memories (for scaling).
        A VectorSearch store is asked instead, with `filters` (the ids `allowed` are then not
        needed: the filter goes into its query)."""
        if self.delegated:
            found = self.store.vector_candidates(query, k, filters or MemoryFilter(), model=self.model, also=also)
            return found.scores, found.low, found.high
        self.refresh()
        with self._lock:
            n = self._n
            if n == 0:
                return {}, 0.0, 0.0
            own = self._matrix[:n] @ query.astype(np.float32)
            prev, nxt = self._prev[:n], self._next[:n]
            lifted = own + NEIGHBOUR_WEIGHT * (np.where(prev >= 0, own[prev], 0.0) + np.where(nxt >= 0, own[nxt], 0.0))
            ids = self._ids[:n]
            if allowed is not None:
                wanted = np.fromiter(allowed, dtype=np.int64, count=len(allowed))
                pos = np.searchsorted(ids, wanted)  # ids ascend
                pos = pos[(pos < n) & (ids[np.minimum(pos, n - 1)] == wanted)]
                mask = np.zeros(n, dtype=bool)
                mask[pos] = True
                lifted = np.where(mask, lifted, -np.inf)
            finite = lifted[np.isfinite(lifted)]
            if finite.size == 0:
                return {}, 0.0, 0.0
            k = min(k, n)
            top = np.argpartition(-lifted, k - 1)[:k]
            top = top[np.isfinite(lifted[top])]
            found = dict(zip(ids[top].tolist(), lifted[top].tolist()))
            if len(also):
                wanted = np.asarray(list(also), dtype=np.int64)
                pos = np.minimum(np.searchsorted(ids, wanted), n - 1)  # ids ascend: rows are kept in id order
                held = (ids[pos] == wanted) & np.isfinite(lifted[pos])
                found.update(zip(wanted[held].tolist(), lifted[pos[held]].tolist()))
            return found, float(finite.min()), float(finite.max())

    def rows(self, ids: Sequence[int]) -> tuple[list[int], np.ndarray]:
        """The held vectors of these memories (ids without one skipped), in the order asked: what
        a second pass reads of the first pass's hits (search/feedback.py). A VectorSearch store
        holds its vectors itself: none here."""
        if self.delegated or not len(ids):
            return [], np.zeros((0, 0), dtype=np.float32)
        with self._lock:
            n = self._n
            if n == 0:
                return [], np.zeros((0, 0), dtype=np.float32)
            held_ids = self._ids[:n]
            wanted = np.asarray(list(ids), dtype=np.int64)
            pos = np.minimum(np.searchsorted(held_ids, wanted), n - 1)  # ids ascend
            held = held_ids[pos] == wanted
            return wanted[held].tolist(), self._matrix[pos[held]]


class PassageIndex:
    """The vectors of a library's note-body passages, each row knowing its entity, kept in step
    with the store like VectorIndex (a version counter of its own, so embedding a note never
    makes the memory index reload, nor the other way round)."""

    def __init__(self, store, model: str):
        self.store = store
        self.model = model
        self._lock = threading.Lock()
        self._version = -1
        self._n = 0
        self._ids = np.zeros(0, dtype=np.int64)
        self._owners = np.zeros(0, dtype=np.int64)
        self._matrix = np.zeros((0, 1), dtype=np.float32)

    def __len__(self) -> int:
        return self._n

    def _reload(self) -> None:
        loaded = self.store.load_passage_vectors()
        ids, owners, matrix, version, model = loaded.ids, loaded.owners, loaded.matrix, loaded.version, loaded.model
        if model is not None and model != self.model:
            ids, owners, matrix = ids[:0], owners[:0], matrix[:0]  # another model's vectors are never mixed in
        self._ids, self._owners, self._matrix, self._n, self._version = ids, owners, matrix, len(ids), version

    def refresh(self) -> None:
        """Reload if another process, or a body split again (its old passages deleted), changed them."""
        if not isinstance(self.store, Passages):  # a store without note passages (postgres): none to hold
            return
        version = self.store.passages_version()
        if version != self._version:
            with self._lock:
                if version != self._version:
                    self._reload()

    def add(self, ids: list[int], owners: list[int], vectors: np.ndarray, version: int) -> None:
        """Take in vectors this process just saved; reload when anyone else changed passages too."""
        with self._lock:
            other_writer = self._version < 0 or version != self._version + len(ids)
            if other_writer or (self._n and self._matrix.shape[1] != vectors.shape[1]):
                self._reload()
                return
            need = self._n + len(ids)
            if need > len(self._ids) or self._matrix.shape[1] != vectors.shape[1]:
                capacity = max(need, 2 * len(self._ids), 1024)  # doubling: appends cost O(1) each
                grown = np.zeros((capacity, vectors.shape[1]), dtype=np.float32)
                grown[: self._n] = self._matrix[: self._n]
                self._matrix = grown
                self._ids = np.concatenate([self._ids[: self._n], np.zeros(capacity - self._n, dtype=np.int64)])
                self._owners = np.concatenate([self._owners[: self._n], np.zeros(capacity - self._n, dtype=np.int64)])
            self._ids[self._n:need] = ids
            self._owners[self._n:need] = owners
            self._matrix[self._n:need] = vectors
            self._n = need
            self._version = version

    def best_entities(self, query: np.ndarray, k: int = 200) -> dict[int, float]:
        """entity id -> the similarity of its closest passage, for the entities owning the best k passages."""
        self.refresh()
        with self._lock:
            n = self._n
            if n == 0:
                return {}
            sims = self._matrix[:n] @ query.astype(np.float32)
            top = np.argpartition(-sims, min(k, n) - 1)[: min(k, n)]
            found: dict[int, float] = {}
            for i in top:
                owner = int(self._owners[i])
                if float(sims[i]) > found.get(owner, -2.0):
                    found[owner] = float(sims[i])
            return found


class VectorOffers:
    """Vectors requests computed anyway (store_memory's near-duplicate check), by text, for the
    embedding workers to take instead of embedding the text again; and the texts a request is
    embedding now, which a worker waits for rather than embed them a second time. Keyed by text
    alone: a text has one vector per model, and a process has one model."""

    def __init__(self) -> None:
        self._offers: dict[str, np.ndarray] = {}
        self._embedding: dict[str, int] = {}
        self._changed = threading.Condition()

    def embedding(self, text: str) -> None:
        """A request is embedding `text` now and will offer() its vector (or None)."""
        with self._changed:
            self._embedding[text] = self._embedding.get(text, 0) + 1

    def offer(self, text: str, vector: np.ndarray | None) -> None:
        """The vector a request computed for `text` (once per embedding(text)); None if it failed."""
        with self._changed:
            left = self._embedding.get(text, 0) - 1
            if left > 0:
                self._embedding[text] = left
            else:
                self._embedding.pop(text, None)
            if vector is not None:
                self._offers[text] = vector
                while len(self._offers) > OFFERS_KEPT:  # texts never stored, or embedded by another process
                    del self._offers[next(iter(self._offers))]
            self._changed.notify_all()

    def vectors(self, embedder, texts: list[str], give_way: Callable[[], None] | None = None) -> np.ndarray:
        """The vectors of `texts`: those requests offered, the rest embedded. `give_way`, when
        given, is called before each GIVE_WAY_TEXTS of them (texts of like length together)."""
        with self._changed:
            self._changed.wait_for(lambda: not any(t in self._embedding for t in texts), OFFER_WAIT_S)
            taken = {k: self._offers[t] for k, t in enumerate(texts) if t in self._offers}
            for k in taken:
                self._offers.pop(texts[k], None)
        rest = [k for k in range(len(texts)) if k not in taken]
        if give_way is None:
            embedded = embedder.embed([texts[k] for k in rest]) if rest else None  # it batches by length itself
        else:
            rest.sort(key=lambda k: len(texts[k]))
            parts = []
            for start in range(0, len(rest), GIVE_WAY_TEXTS):
                give_way()
                parts.append(embedder.embed([texts[k] for k in rest[start:start + GIVE_WAY_TEXTS]]))
            embedded = np.concatenate(parts) if parts else None
        if not taken:
            assert embedded is not None  # (texts is never empty)
            vectors = np.empty_like(embedded)
            vectors[rest] = embedded
            return vectors
        vectors = np.empty((len(texts), next(iter(taken.values())).shape[0]), dtype=np.float32)
        for k, row in taken.items():
            vectors[k] = row
        if embedded is not None:
            vectors[rest] = embedded
        return vectors


class _Wanted:
    """One request's text in a RequestBatcher, and what became of it."""

    __slots__ = ("text", "embedder", "vector", "error", "done")

    def __init__(self, text: str, embedder) -> None:
        self.text = text
        self.embedder = embedder
        self.vector: np.ndarray | None = None
        self.error: Exception | None = None
        self.done = False


class RequestBatcher:
    """The texts requests need a vector for now (store_memory's near-duplicate check), embedded
    together: a request queues its text, and the first caller to find the model free embeds
    every text queued until then in one model call while the others wait for it; whoever queued
    meanwhile makes the next call. A lone request waits for nobody, and concurrent stores share
    one batch. Every vector goes to the embedding workers too (VectorOffers), which then do not
    compute it again. A batch the model fails on is embedded again text by text, so a text the
    model refuses fails only its own request; a batch an endpoint fails on (OSError: not reached,
    timed out, an HTTP error) fails its requests at once."""

    def __init__(self, offers: VectorOffers) -> None:
        self.offers = offers
        self._changed = threading.Condition()
        self._queue: list[_Wanted] = []
        self._running = False
        self.calls = 0  # model calls made, and texts embedded (what a bench reports)
        self.texts = 0

    @property
    def queued(self) -> int:
        """Texts waiting for the next model call."""
        with self._changed:
            return len(self._queue)

    def vectors(self, embedder, texts: Sequence[str]) -> list[np.ndarray]:
        """The vectors of `texts` by `embedder`, in order; raises what the model raised for one of them."""
        wanted = [_Wanted(text, embedder) for text in texts]
        for w in wanted:
            self.offers.embedding(w.text)  # a worker holding this text waits for it rather than embed it too
        with self._changed:
            self._queue.extend(wanted)
            while not all(w.done for w in wanted):
                if self._running:
                    self._changed.wait()
                    continue
                batch = [w for w in self._queue if w.embedder is embedder]  # (a process has one model)
                self._queue = [w for w in self._queue if w.embedder is not embedder]
                self._running = True
                self._changed.release()
                try:
                    self._embed(embedder, batch)
                finally:
                    self._changed.acquire()
                    self._running = False
                    self._changed.notify_all()
        for w in wanted:
            if w.error is not None:
                raise w.error
        return [w.vector for w in wanted if w.vector is not None]

    def _embed(self, embedder, batch: list[_Wanted]) -> None:
        texts = list(dict.fromkeys(w.text for w in batch))
        try:
            try:
                vectors = dict(zip(texts, embedder.embed(texts), strict=True))
                self.calls += 1
            except OSError:  # an endpoint not reached, not a text refused: each text alone would wait out its timeout
                raise
            except Exception:
                if len(texts) == 1:
                    raise
                vectors = {}
                for text in texts:  # one text the model refuses must not fail the others' requests
                    try:
                        vectors[text] = embedder.embed([text])[0]
                    except Exception as exc:
                        for w in batch:
                            if w.text == text:
                                w.error = exc
                    self.calls += 1
            self.texts += len(vectors)
            for w in batch:
                w.vector = vectors.get(w.text)
        except Exception as exc:
            for w in batch:
                w.error = exc
        finally:
            for w in batch:
                if w.vector is None and w.error is None:
                    w.error = RuntimeError("the embedding was interrupted")
                w.done = True
                self.offers.offer(w.text, w.vector)


class EmbeddingWorker:
    """Embeds a library's new memories in batches on a background thread.

    Writes never wait for the model: a stored memory is searchable by words at once and by
    meaning as soon as the worker reaches it. `flush()` waits until nothing is pending.
    """

    def __init__(self, store, embedder: EmbedderHandle, on_saved: Callable[[list[int], list[str], np.ndarray, int], None],
                 on_passages: Callable[[list[int], list[int], np.ndarray, int], None] | None = None,
                 offers: VectorOffers | None = None):
        """`on_passages` (a PassageIndex's add) makes the worker embed note-body passages too,
        after each batch of memories, on a store that keeps them. `offers`: vectors requests
        computed (the process's, shared by its workers), taken instead of embedding again."""
        self.store = store
        self.embedder = embedder
        self.on_saved = on_saved
        self.on_passages = on_passages if isinstance(store, Passages) else None
        self._wake = threading.Event()
        self._idle = threading.Event()
        self._memories_idle = threading.Event()  # no memory waits (passages may)
        self._state = threading.Lock()  # makes "nothing new came in, so idle" one step
        self._hurry = threading.Event()  # a search waits (flush): no gathering
        self._stop = False
        self._thread: threading.Thread | None = None
        self.error: str | None = None
        self.offers = offers if offers is not None else VectorOffers()

    def start(self) -> None:
        """Start the thread (once); it first embeds whatever is pending (another process's writes too)."""
        with self._state:
            if self._thread is not None:
                return
            thread = threading.Thread(target=self._run, name=f"memloci-embed-{self.store.name}", daemon=True)
            thread.start()
            self._thread = thread
        self.poke()

    def poke(self, *, hurry: bool = False) -> None:
        """Wake the worker; `hurry`: a search waits for it (set with the wake, under the same
        lock, so the worker cannot clear it between the two)."""
        with self._state:
            if hurry:
                self._hurry.set()
            self._idle.clear()
            self._memories_idle.clear()
            self._wake.set()

    def flush(self, timeout: float = 120.0, *, memories_only: bool = False) -> bool:
        """Wait until every stored memory and note passage has its vector (True), or the timeout
        passes. `memories_only`: a memory search need not wait for notes being embedded."""
        if self.embedder.get() is None:
            return True
        self.start()
        self.poke(hurry=True)  # another process (a hook, a second server) may have stored memories since the last wake
        return (self._memories_idle if memories_only else self._idle).wait(timeout)

    def _idle_if_unasked(self, *events: threading.Event) -> None:
        with self._state:
            if not self._wake.is_set():
                for event in events:
                    event.set()
                self._hurry.clear()  # the search that waited has what it waited for

    def _give_way(self) -> None:
        """Before each few texts of a backlog: wait for a quiet moment between requests, unless
        a search waits for this worker (flush), which is a request itself."""
        if not self._hurry.is_set():
            REQUESTS.wait_quiet(SETTLE_S, GIVE_WAY_MAX_S)

    def stop(self, timeout: float = 30.0) -> None:
        """Stop after the batch in hand (a process must not exit in the middle of one)."""
        self._stop = True
        self._wake.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def _run(self) -> None:
        yield_to_requests()
        embedder = self.embedder.get(timeout=None)
        if embedder is None:
            self._idle.set()
            self._memories_idle.set()
            return
        while not self._stop:
            # Woken by this process's writes, and every RECHECK_S for what it was not told of:
            # another process's writes, a person's edits the Markdown scan picked up. A moment's
            # wait after a wake gathers the writes around it into one batch, and lets the request
            # that wrote say it is embedding the text itself (embedding()).
            if self._wake.wait(RECHECK_S) and not self._hurry.is_set():
                time.sleep(GATHER_S)
            self._wake.clear()
            try:
                model = self.store.vector_model()
                if model not in (None, embedder.model_id):  # never compute vectors that cannot be stored
                    raise RuntimeError(f"library '{self.store.name}' holds vectors of {model}, not "
                                       f"{embedder.model_id}: run `memloci reindex`")
                while not self._stop:
                    pending = self.store.pending_embeddings(256)
                    if pending:
                        vectors = self.offers.vectors(embedder, [p.content for p in pending], self._give_way)
                        saved = self.store.save_vectors(
                            [(p.id, p.content_hash, vectors[j]) for j, p in enumerate(pending)], embedder.model_id)
                        keep = set(saved.ids)
                        rows = [j for j, p in enumerate(pending) if p.id in keep]  # id order, as fetched
                        if rows:
                            self.on_saved([pending[j].id for j in rows], [pending[j].thread for j in rows], vectors[rows],
                                          saved.version)
                    else:
                        self._idle_if_unasked(self._memories_idle)
                    # Between batches of memories, one of passages: a bulk import of memories does not
                    # leave notes without meaning until it ends, nor the other way round.
                    if not self._embed_passages(embedder) and not pending:
                        break
                self.error = None
            except Exception as exc:  # keep serving lexically; health reports the error
                error = f"{type(exc).__name__}: {exc}"
                # Once per error, not every round it lasts; an unreachable database is logged
                # by its store already, once, when the outage begins.
                if error != self.error and not isinstance(exc, StorageUnavailableError):
                    log.error("embedding worker for %s: %s", self.store.name, error)
                self.error = error
                time.sleep(1.0)
            self._idle_if_unasked(self._idle, self._memories_idle)

    def _embed_passages(self, embedder) -> bool:
        """Split bodies changed since the last round, then embed one batch of passages; False if
        there was nothing to do."""
        if self.on_passages is None:
            return False
        split = self.store.refresh_passages(256)  # splitting is cheap: few transactions for an import of notes
        pending = self.store.pending_passages(64)  # passages are long: smaller batches than memories
        if not pending:
            return bool(split)
        vectors = embedder.embed([p.text for p in pending])
        saved = self.store.save_passage_vectors(
            [(p.id, p.text_hash, vectors[j]) for j, p in enumerate(pending)], embedder.model_id)
        keep = set(saved.ids)
        rows = [j for j, p in enumerate(pending) if p.id in keep]
        if rows:
            self.on_passages([pending[j].id for j in rows], [pending[j].entity_id for j in rows], vectors[rows],
                             saved.version)
        return True
