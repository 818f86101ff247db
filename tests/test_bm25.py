"""core/bm25.py is FTS5's bm25(): the same numbers for the same documents, so an engine that
hands over statistics (PostgreSQL) ranks as SQLite's FTS5 does."""

from __future__ import annotations

import sqlite3
from collections import Counter

import pytest

from memloci.core import bm25

DOCS = [  # (content, context, labels)
    ("deploy on friday after the freeze", "", "decision ops risky"),
    ("deploy on monday", "lunch on friday", "note ops"),
    ("deploy deploy deploy the script deploys again", "", "note scripts"),
    ("alice shall we deploy the new search on friday", "bob only after the freeze", "dia d1 1 note"),
    ("lunch with the design team", "", "friday note social"),
    ("a b c d e f g h i j k l m n o p", "q r s", "t"),
]
QUERIES = [["deploy"], ["friday", "freeze"], ["ops"], ["deploy", "lunch", "team"], ["friday"], ["zeppelin", "note"]]


@pytest.mark.parametrize("terms", QUERIES)
def test_the_score_is_fts5s(tmp_path, terms):
    conn = sqlite3.connect(tmp_path / "t.db")
    # no stemmer: the words of DOCS are their own terms, so the counts below are FTS5's
    conn.execute("CREATE VIRTUAL TABLE t USING fts5 (content, context, labels, tokenize = 'unicode61')")
    conn.executemany("INSERT INTO t (rowid, content, context, labels) VALUES (?, ?, ?, ?)",
                     [(i, *d) for i, d in enumerate(DOCS, 1)])
    expected = {rowid: -s for rowid, s in conn.execute(
        f"SELECT rowid, {bm25.fts5_weights('t', bm25.MEMORY_WEIGHTS)} FROM t WHERE t MATCH ?",
        (" OR ".join(terms),))}
    assert expected  # every query matches something
    corpus = bm25.Corpus(len(DOCS), sum(bm25.token_count(" ".join(d)) for d in DOCS))
    holders = [sum(1 for d in DOCS if t in " ".join(d).split()) for t in terms]
    mine = {}
    for rowid, doc in enumerate(DOCS, 1):
        columns = [Counter(text.split()) for text in doc]
        counts = {i: tuple(c[t] for c in columns) for i, t in enumerate(terms) if any(c[t] for c in columns)}
        if counts:
            mine[rowid] = bm25.score(counts, bm25.token_count(" ".join(doc)), holders, corpus, bm25.MEMORY_WEIGHTS)
    assert mine.keys() == expected.keys()
    for rowid, value in expected.items():
        assert mine[rowid] == pytest.approx(value, rel=1e-12, abs=1e-15)


def test_token_count_is_fts5s_unicode61():
    assert bm25.token_count("Deploy on Friday, after the freeze!") == 6
    assert bm25.token_count("dia:D1:3 snake_case don't München 東京の旅行") == 9
    assert bm25.token_count("") == 0


def test_postgres_totals_follow_every_write(pg_library):
    """The library totals BM25 reads on PostgreSQL (search_totals, kept by triggers) stay those
    of the memories there after stores, updates, a thread's neighbours' words, deletions and an
    entity's observations deleted with it (a cascade)."""
    from memloci.app.registry import LibraryRegistry
    from memloci.app.specs import parse_library_specs
    from memloci.core.model import EntityInput
    from memloci.search.embedder import EmbedderHandle
    from memloci.service.facade import MemoryService

    service = MemoryService(LibraryRegistry(parse_library_specs(pg_library.arg)), EmbedderHandle("none"))
    try:
        service.create_entities([EntityInput("Alice", "person", ("Works at Acme", "Likes green tea"))])
        for i in range(5):
            service.store_memory(f"Turn {i}: we talk about deploys", tags=["chat", f"t{i}"], metadata={"session": 1})
        service.update_memory(service.search_by_tag(["t2"])[0].content_hash, content="Turn two, longer now than before")
        service.delete_memory(service.search_by_tag(["t3"])[0].content_hash)
        service.delete_entities(["Alice"])
        store = service.store()
        with store._read() as conn:  # the engine's own connection: what its search reads
            totals = conn.execute("SELECT documents, tokens FROM search_totals").fetchone()
            actual = conn.execute("SELECT count(*), coalesce(sum(search_length), 0) FROM memories").fetchone()
            rows = conn.execute("SELECT content, context, tags, memory_type, search_length FROM memories").fetchall()
        assert tuple(totals) == tuple(actual) and actual[0] == 4
        for content, context, tags, memory_type, length in rows:  # lengths as FTS5 counts them
            labels = " ".join(sorted({t.lower() for t in tags} | {memory_type.lower()}))
            assert length == bm25.token_count(content) + bm25.token_count(context) + bm25.token_count(labels)
    finally:
        service.close()


def test_postgres_entity_lengths_and_totals_are_fts5s(pg_library):
    """An entity's length on PostgreSQL (migration 7) is what FTS5 counts in SQLite's seven
    entity_fts columns (name, aliases, tags, type, text, and the CJK tokens of the first four
    and of the text), and entity_totals stays the sum through creates, observations added and
    deleted, a rename, a note's body and a delete."""
    import json

    from memloci.app.registry import LibraryRegistry
    from memloci.app.specs import parse_library_specs
    from memloci.core.model import EntityInput, ObservationBatch
    from memloci.core.query_text import cjk_grams
    from memloci.search.embedder import EmbedderHandle
    from memloci.service.documents import NewEntityDocument
    from memloci.service.facade import MemoryService

    service = MemoryService(LibraryRegistry(parse_library_specs(pg_library.arg)), EmbedderHandle("none"))
    try:
        service.create_entities([EntityInput("Alice Chen", "person", ("Works at Acme", "東京の旅行計画 api_v2")),
                                 EntityInput("Bob", "person", ("Likes green tea",)),
                                 EntityInput("Carol", "team-lead", ())])
        service.add_entities([NewEntityDocument("Trip notes", "note", content="## Plan\n京都 then Osaka, don't rush.\n")])
        service.add_observations([ObservationBatch("Bob", ("Moved to Berlin in 2024",))])
        service.delete_observations([ObservationBatch("Alice Chen", ("Works at Acme",))])
        service.rename_entity("Carol", "Carol Díaz")
        service.delete_entities(["Bob"])
        with service.store()._read() as conn:
            totals = conn.execute("SELECT documents, tokens FROM entity_totals").fetchone()
            rows = conn.execute(
                """SELECT e.name, e.aliases::text, e.tags::text, e.entity_type, e.body, e.search_length,
                          coalesce((SELECT string_agg(m.content, E'\\n' ORDER BY m.id) FROM memories m
                                    WHERE m.entity_id = e.id), '')
                   FROM entities e""").fetchall()
        assert tuple(totals) == (len(rows), sum(r[5] for r in rows)) and len(rows) == 3
        for name, aliases, tags, entity_type, body, length, observations in rows:
            text = observations + "\n" + body
            labels = "\n".join([name, aliases, tags, entity_type])
            expected = (sum(bm25.token_count(c) for c in (name, json.dumps(json.loads(aliases)),
                                                          json.dumps(json.loads(tags)), entity_type, text))
                        + bm25.token_count(cjk_grams(labels)) + bm25.token_count(cjk_grams(text)))
            assert length == expected, name
    finally:
        service.close()
