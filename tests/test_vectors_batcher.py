"""The request batcher (search/vectors.py RequestBatcher): texts that concurrent requests need a
vector for now are embedded together, each request gets its own text's vector, a text the model
refuses fails only its own request, and every vector goes to the embedding workers (VectorOffers)."""

from __future__ import annotations

import threading
import zlib

import numpy as np
import pytest

from memloci.search.vectors import RequestBatcher, VectorOffers


class WordHashEmbedder:
    """A deterministic embedder (words hashed into 64 dimensions) that refuses texts with
    "REFUSED" in them, and whose first call waits until `hold` is set, so the test decides
    what queues while the model is busy."""

    model_id = "word-hash"
    dimension = 64
    multilingual = True

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.hold = threading.Event()
        self.entered = threading.Event()  # the first call has begun

    def embed(self, texts: list[str]) -> np.ndarray:
        if not self.calls:
            self.entered.set()
            self.hold.wait(30)
        self.calls.append(list(texts))
        if any("REFUSED" in t for t in texts):
            raise ValueError("the model refuses this text")
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.split():
                out[row, zlib.crc32(word.encode()) % self.dimension] += 1.0
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)


def _concurrently(batcher: RequestBatcher, embedder: WordHashEmbedder, texts: list[str]) -> dict[str, object]:
    """Each text asked by its own thread; the first one's model call holds until all the others
    have queued. Returns each text's vector, or the error its request raised."""
    results: dict[str, object] = {}

    def ask(text: str) -> None:
        try:
            results[text] = batcher.vectors(embedder, [text])[0]
        except Exception as exc:
            results[text] = exc

    first = threading.Thread(target=ask, args=(texts[0],))
    first.start()
    assert embedder.entered.wait(30)  # the first request is in the model (holding)
    others = [threading.Thread(target=ask, args=(t,)) for t in texts[1:]]
    for t in others:
        t.start()
    while batcher.queued < len(texts) - 1:
        threading.Event().wait(0.001)
    embedder.hold.set()
    for t in [first, *others]:
        t.join(30)
    return results


def test_concurrent_requests_share_one_model_call_and_each_gets_its_own_vector():
    embedder = WordHashEmbedder()
    offers = VectorOffers()
    batcher = RequestBatcher(offers)
    texts = [f"memory number {i} about topic {i * 7}" for i in range(6)]
    results = _concurrently(batcher, embedder, texts)
    assert [sorted(c) for c in embedder.calls] == [texts[:1], sorted(texts[1:])], embedder.calls
    alone = WordHashEmbedder()
    alone.hold.set()
    alone.calls.append([])  # (its first call does not hold)
    for text in texts:
        assert np.array_equal(results[text], alone.embed([text])[0]), text
    # the vectors are the workers' too: taken instead of embedded again
    taken = offers.vectors(alone, texts)
    assert alone.calls == [[], *([t] for t in texts)] and np.array_equal(taken, np.stack([results[t] for t in texts]))


def test_a_refused_text_fails_only_its_own_request():
    embedder = WordHashEmbedder()
    batcher = RequestBatcher(VectorOffers())
    texts = ["the first request", "a REFUSED text", "a third request", "a fourth request"]
    results = _concurrently(batcher, embedder, texts)
    assert isinstance(results["a REFUSED text"], ValueError)
    for text in ("the first request", "a third request", "a fourth request"):
        assert isinstance(results[text], np.ndarray), (text, results[text])
    # the batch the model refused was embedded again text by text
    assert ["a REFUSED text"] in embedder.calls and ["a third request"] in embedder.calls
    # and the batcher is free again: a later request is answered
    assert batcher.vectors(embedder, ["one more"])[0].shape == (64,)
    with pytest.raises(ValueError, match="refuses"):
        batcher.vectors(embedder, ["REFUSED alone"])


class UnreachableEmbedder(WordHashEmbedder):
    """An embeddings endpoint that cannot be reached while "DOWN" is in a batch: each call
    fails as a refused connection or a timeout does (OSError), whatever the texts."""

    def embed(self, texts: list[str]) -> np.ndarray:
        if any("DOWN" in t for t in texts):
            super().embed([])  # (the first call holds, as the others do)
            self.calls[-1] = list(texts)
            raise ConnectionRefusedError("the embeddings endpoint is not reachable")
        return super().embed(texts)


def test_an_endpoint_that_cannot_be_reached_fails_the_batch_once_not_text_by_text():
    # Trying each text again would wait out the endpoint's timeout once per text, every queued
    # request waiting behind it; the texts are not at fault.
    embedder = UnreachableEmbedder()
    texts = ["DOWN first request", "a second request", "a third request", "a fourth request"]
    results = _concurrently(RequestBatcher(VectorOffers()), embedder, texts)
    assert isinstance(results[texts[0]], ConnectionRefusedError), results
    assert len(embedder.calls) == 2 and isinstance(results["a second request"], np.ndarray)  # another batch: answered
    down = UnreachableEmbedder()
    down.hold.set()
    batcher = RequestBatcher(VectorOffers())
    with pytest.raises(ConnectionRefusedError):
        batcher.vectors(down, ["DOWN one", "two", "three"])
    assert down.calls == [["DOWN one", "two", "three"]]  # one call: no text tried alone
