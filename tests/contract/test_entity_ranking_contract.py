"""search_nodes ranks a library of sixty entities in the same order on every engine.

The same-answers script compares search results on a handful of entities, where every ranking
agrees; here sixty entities share a small vocabulary, so word scores (BM25 on SQLite, the
engine's own rank elsewhere) decide the order. Words only (no embedder), so meaning plays no part.
"""

from __future__ import annotations

import random

import pytest

from memloci.core.model import EntityInput

from .conftest import ENGINES

WORDS = ("payment invoice billing ledger tenant cache redis postgres kafka queue deploy friday release "
         "rollback incident pager oncall latency timeout retry backup restore schema index vector search "
         "ranking python rust golang team alice bob carol design review budget roadmap").split()
QUERIES = ["payment ledger", "redis cache latency", "incident rollback friday", "alice", "postgres backup restore",
           "kafka", "team roadmap budget", "vector search ranking", "pager", "service", "deploy release",
           "latncy rollbak", "incid", "sear", "payments and invoices"]  # typos, prefixes, stems


def corpus() -> list[EntityInput]:
    rnd = random.Random(7)
    out = []
    for i in range(60):
        observations = tuple(" ".join(rnd.sample(WORDS, rnd.randint(3, 7))) for _ in range(rnd.randint(1, 4)))
        out.append(EntityInput(f"{rnd.choice(WORDS).title()} {rnd.choice(WORDS)} {i}",
                               rnd.choice(["service", "person", "project", "doc"]), observations))
    return out


def top10(service) -> dict[str, list[tuple[str, str]]]:
    """Each query's first ten names, with why each matched (which words, and the BM25 score to
    three digits): the same scores, not only the same order."""
    service.create_entities(corpus())
    return {q: [(h.entity.name, h.why) for h in service.search_nodes(q).hits][:10] for q in QUERIES}


@pytest.mark.parametrize("other", [e for e in ENGINES if e != "sqlite"])
def test_search_nodes_top_ten_in_the_same_order_as_on_sqlite(engines, other):
    reference = top10(engines["sqlite"].library())
    answers = top10(engines[other].library())
    differ = {q: (answers[q], reference[q]) for q in QUERIES if answers[q] != reference[q]}
    assert not differ, "\n".join(f"{q!r}:\n  {other}: {a}\n  sqlite: {r}" for q, (a, r) in differ.items())


def common_corpus() -> list[EntityInput]:
    """Over 500 entities hold "service" (a common word: pooled, not all scored) and about one
    in three "billing" in a name or a type, so the pool is filled from labels first."""
    rnd = random.Random(11)
    out = []
    for i in range(620):
        words = rnd.sample(WORDS, 4)
        entity_type = "billing" if i % 3 == 0 else rnd.choice(["service", "person"])
        out.append(EntityInput(f"{words[0].title()} {words[1]} {i}", entity_type,
                               (f"the {words[2]} service handles {words[3]}",)))
    return out


@pytest.mark.parametrize("other", [e for e in ENGINES if e != "sqlite"])
def test_a_common_word_ranks_the_same_pool_as_on_sqlite(engines, other):
    queries = ["service", "billing service", "service ledger alice", "kafka service billing"]
    answers = {}
    for name in ("sqlite", other):
        service = engines[name].library()
        service.create_entities(common_corpus())
        answers[name] = {q: [(h.entity.name, h.why) for h in service.search_nodes(q).hits][:10] for q in queries}
    assert all(answers["sqlite"][q] for q in queries)
    differ = {q: (answers[other][q], answers["sqlite"][q]) for q in queries if answers[other][q] != answers["sqlite"][q]}
    assert not differ, "\n".join(f"{q!r}:\n  {other}: {a}\n  sqlite: {r}" for q, (a, r) in differ.items())


@pytest.mark.parametrize("other", [e for e in ENGINES if e != "sqlite"])
def test_cjk_runs_and_words_of_two_tokens_rank_as_on_sqlite(engines, other):
    """A CJK run matches as the phrase of its pairs (東京大学 is not 大学ノート), and a word the
    tokenizers cut in two (user_id) is both pieces together, not either: on every engine."""
    corpus = [EntityInput("東京大学", "school", ("東京にある大学",)),
              EntityInput("大学ノート", "note", ("ノートを買った",)),
              EntityInput("京都", "city", ("古い都",)),
              EntityInput("Auth table", "table", ("holds the user_id column", "user accounts")),
              EntityInput("Id badge", "thing", ("an id for the door",)),
              EntityInput("User profile", "page", ("shows the user",))]
    queries = ["東京大学", "大学", "user_id", "user", "id badge"]
    answers = {}
    for name in ("sqlite", other):
        service = engines[name].library()
        service.create_entities(corpus)
        answers[name] = {q: [(h.entity.name, h.why) for h in service.search_nodes(q).hits] for q in queries}
    assert answers["sqlite"]["東京大学"][0][0] == "東京大学" and answers["sqlite"]["user_id"][0][0] == "Auth table"
    differ = {q: (answers[other][q], answers["sqlite"][q]) for q in queries if answers[other][q] != answers["sqlite"][q]}
    assert not differ, "\n".join(f"{q!r}:\n  {other}: {a}\n  sqlite: {r}" for q, (a, r) in differ.items())


def test_a_fused_search_counts_its_matches_as_count_entities_does(engine):
    """A search with signals fused in and a word pool (search/entities.py FUSION_POOL) says the
    total every engine says, the one count_entities gives: the word matches, or the substring
    matches when no word matched (three names hold the word "auth", five more hold it inside a word)."""
    from memloci.search.entities import name_words
    from memloci.search.hybrid import STOP_WORDS

    s = engine.service
    s.create_entities([EntityInput(f"auth gateway {i}", "service", (f"handles tokens {i}",)) for i in range(3)]
                      + [EntityInput(f"oauthprovider{i}", "service", (f"provider number {i}",)) for i in range(5)]
                      + [EntityInput("Blades", "thing", ("rotor",))])
    store = s.store()
    for query, expected in (("auth", 3), ("uthprov", 5)):
        counted = store.count_entities(query, cap=50, stop_words=STOP_WORDS, names=name_words(store))
        found = store.search_entities(query, limit=2, extra=[("Blades", 0.95, "means it")], stop_words=STOP_WORDS,
                                      names=name_words(store), count_cap=50, pool=20)
        assert found.is_truncated and found.total_count == counted == expected, (query, found.total_count, counted)
