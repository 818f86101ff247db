"""Recall on PostgreSQL when words are common and filters broad (store/postgres/search.py), on a
real PostgreSQL (tests/pg.py). The thresholds that separate "rare" from "common" words and
"narrow" from "broad" filters are lowered so that a small library crosses them."""

from __future__ import annotations

import pytest

from memloci.app.registry import LibraryRegistry
from memloci.core import bm25
from memloci.core.model import MemoryFilter
from memloci.search.hybrid import word_terms
from memloci.service.facade import MemoryService
from memloci.store.postgres import search as pg_search


@pytest.fixture
def pg_service(pg_library):
    registry = LibraryRegistry([pg_library.spec])
    service = MemoryService(registry)
    yield service
    service.close()


def _backdate(store, content: str, at: str) -> None:
    with store._write("test") as conn:
        assert conn.execute("UPDATE memories SET created_at = %s WHERE content = %s", (at, content)).rowcount == 1


def _counts(store, query: str, filters: MemoryFilter | None = None):
    return store.memory_word_counts(word_terms(query), [], 10, filters or MemoryFilter())


def test_word_positions_are_read_from_tsvector_text_by_column(pg_service):
    store = pg_service.store(None)
    pg_service.store_memory(r"O'Brien said the back\slash path C:\temp\o'brien broke", tags=["o'brien"])
    pg_service.store_memory("Nothing about him here", tags=["other"])
    counted = _counts(store, "o'brien")
    assert len(counted.counts) == 1, counted
    (terms,) = counted.counts.values()
    # "brien" is in the content twice (column 0) and in the tag (column 2, labels); the parser
    # splits at the apostrophe in the index and the query alike
    assert terms[1] == (2, 0, 1), terms
    hits = pg_service.retrieve_memory("o'brien").hits
    assert [h.memory.content for h in hits][:1] == [r"O'Brien said the back\slash path C:\temp\o'brien broke"]


def test_common_words_rank_their_newest_holders_within_the_time_range_and_the_filter(pg_service, monkeypatch):
    monkeypatch.setattr(pg_search, "COMMON", 3)
    monkeypatch.setattr(pg_search, "COMMON_POOL", 4)
    pg_service.store_memory("an old upgrade note", tags=["a"])
    pg_service.store_memory("another old upgrade note", tags=["b"])
    for i in range(8):
        pg_service.store_memory(f"upgrade number {i}", tags=["a" if i % 2 else "b"])
    store = pg_service.store(None)
    _backdate(store, "an old upgrade note", "2026-01-02T00:00:00Z")
    _backdate(store, "another old upgrade note", "2026-01-03T00:00:00Z")
    everything = _counts(store, "upgrade")
    assert len(everything.counts) == 4, "a common word ranks its newest COMMON_POOL holders"
    assert everything.holders == (4,), "holders are counted up to COMMON + 1"
    old = _counts(store, "upgrade", MemoryFilter(before="2026-02-01T00:00:00Z"))
    assert len(old.counts) == 2, "the newest holders are taken within the time range, not before it"
    tagged = _counts(store, "upgrade", MemoryFilter(tags=("a",)))
    loaded = store.load_memories(list(tagged.counts))
    assert tagged.counts and all(m.tags == ("a",) for m in loaded.values()), "the filter holds after the pool"
    # BM25 on the counts: the memory the words are most of comes first, as FTS5 would rank it
    scores = {i: bm25.score(c, everything.lengths[i], everything.holders,
                            bm25.Corpus(everything.documents, everything.tokens), bm25.MEMORY_WEIGHTS)
              for i, c in everything.counts.items()}
    assert all(s > 0 for s in scores.values())


def test_a_rare_word_is_found_in_every_holder_whatever_the_common_ones(pg_service, monkeypatch):
    monkeypatch.setattr(pg_search, "COMMON", 3)
    monkeypatch.setattr(pg_search, "COMMON_POOL", 2)
    pg_service.store_memory("the zeppelin upgrade plan")  # the oldest: outside any newest-holders pool
    for i in range(10):
        pg_service.store_memory(f"upgrade plan number {i}")
    hits = pg_service.retrieve_memory("zeppelin upgrade plan").hits
    assert hits[0].memory.content == "the zeppelin upgrade plan"


def test_a_broad_filter_is_told_from_a_narrow_one_part_by_part(pg_service, monkeypatch):
    for i in range(6):
        pg_service.store_memory(f"memory {i}", tags=["wide", *(["thin"] if i == 0 else [])],
                                memory_type="fact" if i < 5 else "note")
    store = pg_service.store(None)
    with store._read() as conn:
        def at_most(f: MemoryFilter, cap: int) -> bool:
            where, params = pg_search.filter_sql(f, conn)
            return pg_search._at_most(conn, f, where, params, cap)

        assert at_most(MemoryFilter(tags=("thin",)), 1)
        assert not at_most(MemoryFilter(tags=("wide",)), 5)
        assert at_most(MemoryFilter(tags=("wide",)), 6)
        # each part is broad (5 facts, 6 "wide"), together only 5: counted whole
        assert at_most(MemoryFilter(tags=("wide",), memory_type="fact"), 5)
        assert not at_most(MemoryFilter(tags=("wide",), memory_type="fact"), 4)
        # one narrow part settles it
        assert at_most(MemoryFilter(tags=("wide",), memory_type="note"), 1)


def test_a_broad_filter_far_from_the_query_still_answers_within_the_filter(pg_library, monkeypatch):
    """The filtered HNSW walk stops at MAX_SCAN entries; what it found, and the word matches'
    own similarities, answer, all within the filter."""
    from memloci.search.embedder import EmbedderHandle

    monkeypatch.setattr(pg_search, "EXACT_MAX", 0)  # every filter is "broad": HNSW
    monkeypatch.setattr(pg_search, "MAX_SCAN", 5)
    monkeypatch.setattr(pg_search, "MAX_SCAN_TAGGED", 5)
    service = MemoryService(LibraryRegistry([pg_library.spec]), EmbedderHandle("minilm"), embed_pending=True)
    try:
        for text in ["The invoice export failed", "Invoices were sent late", "Billing totals were wrong",
                     "The payment retry queue grew"]:
            service.store_memory(text, tags=["billing"])
        for text in ["We hired a backend engineer", "The interview loop has four steps"]:
            service.store_memory(text, tags=["hiring"])
        assert service.flush_embeddings()
        hits = service.retrieve_memory("invoice problems", tags=["hiring"]).hits
        assert hits and {h.memory.tags for h in hits} == {("hiring",)}
        found = service.retrieve_memory("invoice export", tags=["billing"]).hits
        assert found[0].memory.content == "The invoice export failed"
    finally:
        service.close()


def _python_bm25(store, terms: list[str], k: int, filters: MemoryFilter) -> dict[int, float]:
    """core/bm25.py over memory_word_counts: the scores PostgreSQL must give by itself."""
    counted = store.memory_word_counts(terms, [], k, filters)
    corpus = bm25.Corpus(counted.documents, counted.tokens)
    scores = {i: bm25.score(c, counted.lengths[i], counted.holders, corpus, bm25.MEMORY_WEIGHTS)
              for i, c in counted.counts.items()}
    return {i: scores[i] for i in sorted(scores, key=lambda i: (-scores[i], i))[:k]}


def test_words_scored_inside_postgresql_are_core_bm25_to_the_last_digit(pg_service, monkeypatch):
    """lexical_memory_candidates scores BM25 in one SQL statement; the same memories in the same
    order with the very same floating-point scores as core/bm25.py over the counts, for rare and
    common words, words in the text, a thread neighbour's text and the tags, repeated words,
    quotes and backslashes, with and without filters."""
    monkeypatch.setattr(pg_search, "COMMON", 6)
    monkeypatch.setattr(pg_search, "COMMON_POOL", 5)
    texts = [("The invoice export failed after the upgrade", ["billing"], "s1"),
             ("Invoice invoice INVOICE: the export ran three times", ["billing", "export"], "s1"),
             ("Priya noted the upgrade in Berlin", ["deploy"], "s1"),
             ("The upgrade broke the login page after the upgrade", ["auth", "upgrade"], "s2"),
             (r"O'Brien's path C:\temp\o'brien\export failed", ["o'brien"], "s2"),
             ("A note about lunch", ["misc"], ""),
             ("Upgrade plan for the billing cron", ["billing", "plan"], "s3"),
             ("The billing upgrade was rolled back", ["billing"], "s3"),
             ("Export of the upgrade logs", ["deploy", "logs"], ""),
             ("Another upgrade note, upgrade upgrade", ["deploy"], "s4"),
             ("A zeppelin export upgrade", ["misc"], "s4")]
    for text, tags, session in texts:
        pg_service.store_memory(text, tags=tags, metadata={"session": session} if session else None)
    store = pg_service.store(None)
    filters = [MemoryFilter(), MemoryFilter(tags=("billing",)), MemoryFilter(tags=("deploy", "misc")),
               MemoryFilter(memory_type="note"), MemoryFilter(after="2000-01-01T00:00:00Z"),
               MemoryFilter(before="2100-01-01T00:00:00Z", tags=("deploy",)), MemoryFilter(after="2100-01-01T00:00:00Z")]
    queries = ["invoice export", "upgrade", "upgrade plan billing", "o'brien export", "zeppelin upgrade",
               "upgrades upgrade", "berlin priya login", "nothing matches this", "lunch"]
    compared = 0
    # with a time range the newest WINDOW ids are walked first: holding enough holders, and not
    # (then the planner's query gives them)
    for window in (10_000, 2):
        monkeypatch.setattr(pg_search, "WINDOW", window)
        for query in queries:
            for f in filters:
                for k in (3, 40):
                    expected = _python_bm25(store, word_terms(query), k, f)
                    got = store.lexical_memory_candidates(word_terms(query), [], k, f)
                    assert list(got.items()) == list(expected.items()), (query, f, k, window)
                    compared += bool(expected)
    assert compared > 80  # most cases find something: the comparison is not of empty answers
    # the thread neighbour's words count (column 1, context) in SQL too
    context = _python_bm25(store, ["priya"], 40, MemoryFilter())
    assert len(context) > 1
