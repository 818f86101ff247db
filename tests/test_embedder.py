"""The default embedder: the shipped file, its dynamic-int8 conversion, batching by length."""

import numpy as np
import pytest

from memloci.search import embedder as E

TEXTS = [
    "Caroline: I went to the LGBTQ support group yesterday and it was so powerful.",
    "Melanie: The cat knocked the vase off the shelf again.",
    "A feline sleeps on the windowsill.",
    "Database migrations must run before the deploy.",
    "short",
    "We decided to use OAuth with PKCE for the mobile app; refresh tokens rotate every day.",
]


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    folder = tmp_path_factory.mktemp("model-cache")
    mp = pytest.MonkeyPatch()
    mp.setenv("MEMLOCI_CACHE", str(folder))
    yield folder
    mp.undo()


def test_conversion_is_cached_checked_and_close_to_the_shipped_file(cache):
    fast = E.create_embedder("minilm")
    exact = E.create_embedder("minilm-exact")
    assert fast.model_id == "all-MiniLM-L6-v2-int8-dq1" and exact.model_id == "all-MiniLM-L6-v2-int8"
    cached = sorted(cache.glob("*.onnx"))
    assert len(cached) == 1 and (cache / (cached[0].name + ".sha256")).is_file()
    a, b = fast.embed(TEXTS), exact.embed(TEXTS)
    assert a.shape == b.shape == (len(TEXTS), 384)
    assert float((a * b).sum(axis=1).min()) > 0.95  # the same model, int8 products
    # Meaning survives the conversion: the cat sentence is nearest to the feline one.
    sims = a @ a[2]
    assert int(np.argsort(-sims)[1]) == 1

    # A damaged cache file is rebuilt, never run.
    cached[0].write_bytes(b"not a model")
    again = E.create_embedder("minilm")
    assert cached[0].stat().st_size > 1_000_000
    assert np.allclose(again.embed(TEXTS[:1]), a[:1], atol=0.05)


def test_batches_by_length_give_the_vectors_of_single_texts(cache):
    exact = E.create_embedder("minilm-exact")
    together = exact.embed(TEXTS)
    alone = np.concatenate([exact.embed([t]) for t in TEXTS])
    assert np.allclose(together, alone, atol=1e-4)
    assert exact.embed([]).shape == (0, 384)
