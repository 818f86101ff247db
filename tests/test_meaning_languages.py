"""The default model reads English only: Chinese and Japanese queries are ranked by their words
(CJK substrings), never by its meaning; and a note body too short to say anything gets no
meaning at all (real SQLite files, the real default model, a real server over stdio)."""

from __future__ import annotations

import time

import anyio
import numpy as np
import pytest
from conftest import Client, run_session

from memloci.app.registry import LibraryRegistry
from memloci.app.specs import LibrarySpec
from memloci.rules.passages import says_something, split_passages
from memloci.search.embedder import EmbedderHandle, cjk_share, create_embedder, understands
from memloci.service.documents import NewEntityDocument
from memloci.service.facade import MemoryService, _QueryEmbedding

# (memory, a word of it to ask for): Japanese and Chinese, among English ones.
CJK = [
    ("api.example.com の証明書は3月3日に期限切れになる。リリース前に更新すること。", "証明書"),
    ("請求サービスにはトランザクションが必要なので、PostgreSQLを選んだ。", "請求サービス"),
    ("アンナはピーナッツアレルギーなので、チームの昼食では避けること。", "アレルギー"),
    ("オフィスは6月にリバーサイドビルの4階へ移転する。", "移転"),
    ("夜間バックアップが今週2回失敗した。ディスクが満杯だった。", "バックアップ"),
    ("健二さんはメールよりSlackでの連絡を好む。", "連絡"),
    ("娘のピアノの発表会は土曜日の午後3時から。", "発表会"),
    ("东京旅行计划：十月出发，住在新宿。", "旅行计划"),
    ("我们决定把计费服务迁移到新的数据库集群。", "数据库"),
    ("周五下午三点在会议室开季度评审会。", "评审"),
    ("女儿的钢琴演奏会在周六下午。", "钢琴"),
    ("新员工的入职培训材料放在共享盘里。", "入职培训"),
    ("服务器的磁盘空间不足，需要扩容。", "磁盘"),
    ("APIの証明書の更新手順はwikiにある。", "APIの更新手順"),
]
ENGLISH = [
    "My cat Whiskers sleeps on the sofa all afternoon",
    "The TLS certificate for api.example.com expires on March 3",
    "We chose PostgreSQL for billing because we need transactions",
]


def test_language_reach_is_declared_and_read_from_the_letters():
    assert cjk_share("証明書") == 1.0 and cjk_share("the TLS certificate") == 0.0 and cjk_share("42 !") == 0.0
    assert cjk_share("APIの証明書") > 0.5 and cjk_share("when does the 証明書 expire") < 0.3

    class Model:
        model_id, dimension = "m", 2

        def __init__(self, multilingual):
            self.multilingual = multilingual

    english, multilingual = Model(False), Model(True)
    Wrapper = _QueryEmbedding  # the service's once-per-search wrapper says what its model does
    assert not understands(english, "証明書") and not understands(english, "삼성 보고서")
    assert not understands(Wrapper(english), "東京の旅行計画")
    assert understands(english, "when does the certificate expire") and understands(english, "Kenji 健")
    assert understands(multilingual, "証明書") and understands(Wrapper(multilingual), "証明書")
    assert not understands(None, "anything")


def test_the_default_model_says_it_is_english_only():
    model = create_embedder("minilm")
    assert model.multilingual is False
    assert not understands(model, "証明書") and understands(model, "certificate")


async def _embedded(c: Client) -> None:
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        health, _ = await c.ok("check_database_health")
        if health["embedder"].get("state") == "loaded" and health["embedder"].get("pending") == 0:
            return
        await anyio.sleep(0.5)
    raise AssertionError(f"memories were not embedded: {health['embedder']}")


def test_chinese_and_japanese_queries_are_found_by_their_words_not_by_english_meaning(home):
    async def body(c: Client):
        for text in ENGLISH + [m for m, _ in CJK]:
            await c.ok("store_memory", content=text)
        await c.ok("create_entities", entities=[
            {"name": "証明書の管理", "entityType": "project", "observations": ["有効期限は毎年三月に確認する。"]},
            {"name": "Garden", "entityType": "place", "observations": ["Tomatoes were planted along the south fence."]}])
        await _embedded(c)

        hits = 0
        for memory, query in CJK:
            found, _ = await c.ok("retrieve_memory", query=query, n_results=3)
            top = [m["content"] for m in found["memories"]]
            hits += memory in top
            assert memory in top, (query, top)
            for m in found["memories"]:  # the English model's nearest vectors are noise here
                assert "meaning" not in m["why"], (query, m)
        assert hits == len(CJK)

        # English still ranks by meaning: no word of "feline" is stored.
        found, _ = await c.ok("retrieve_memory", query="feline", n_results=1)
        assert found["memories"][0]["content"].startswith("My cat Whiskers") and "meaning" in found["memories"][0]["why"]

        # Entity search: a Japanese query finds the note by its words, never "means it".
        found, _ = await c.ok("search_nodes", query="証明書")
        assert [e["name"] for e in found["entities"]][:1] == ["証明書の管理"]
        assert not any("means it" in why for why in found["why"].values()), found["why"]
        found, _ = await c.ok("search_nodes", query="有効期限")
        assert [e["name"] for e in found["entities"]] == ["証明書の管理"], found["why"]
        found, _ = await c.ok("search_nodes", query="vegetables growing by the fence")
        assert found["entities"] and found["entities"][0]["name"] == "Garden"
        assert "observation means it" in found["why"]["Garden"]

    run_session(home, body, MEMLOCI_EMBEDDER="minilm")


# -- bodies with nothing to say ------------------------------------------------------------------

def test_a_body_of_a_few_words_is_no_passage():
    assert split_passages("Dmitri.") == [] and split_passages("# Dmitri\n\nDmitri Petrov.") == []
    assert split_passages("東京。") == [] and not says_something("## A long heading of many words\n\nAnna.")
    assert split_passages("Met him at the conference.") == ["Met him at the conference."]
    assert says_something("東京の旅行計画は十月です。")  # 12 characters: six words' worth


def test_a_tiny_body_does_not_show_up_for_unrelated_queries(tmp_path):
    service = MemoryService(LibraryRegistry([LibrarySpec("lib", tmp_path / "lib.db", "sqlite")]),
                            EmbedderHandle("minilm"))
    try:
        service.add_entities([
            NewEntityDocument("Dmitri", content="Dmitri."),
            NewEntityDocument("Pets", content="She adopted two puppies from the animal shelter last weekend."),
            NewEntityDocument("Music", content="The orchestra rehearses Mahler's fifth symphony on Thursdays.")])
        assert service.flush_embeddings(timeout=300)
        assert service.store().passages_of("Dmitri") == []
        for query in ("alcie", "music", "alpha", "getting new dogs"):
            found = service.search_nodes(query)
            assert "Dmitri" not in [h.entity.name for h in found.hits], (query, [(h.entity.name, h.why) for h in found.hits])
        found = service.search_nodes("getting new dogs")
        assert found.hits and found.hits[0].entity.name == "Pets" and "body means it" in found.hits[0].why
        assert "Dmitri" in [h.entity.name for h in service.search_nodes("Dmitri").hits]  # its name still finds it
    finally:
        service.close()


def test_vectors_of_tiny_bodies_stored_before_are_left_out(tmp_path):
    """A library embedded before short bodies lost their passage: their vectors are not searched."""
    import sqlite3

    service = MemoryService(LibraryRegistry([LibrarySpec("lib", tmp_path / "lib.db", "sqlite")]), EmbedderHandle("none"))
    store = service.store()
    try:
        service.add_entities([NewEntityDocument("Pets", content="She adopted two puppies from the shelter.")])
        store.refresh_passages()
        with sqlite3.connect(store.path) as conn:
            (pets,) = conn.execute("SELECT id FROM entities WHERE name = 'Pets'").fetchone()
            conn.execute("INSERT INTO passages (entity_id, text, text_hash) VALUES (?, 'Dmitri.', 'h')", (pets,))
        store.save_passage_vectors([(pid, h, np.array([1.0, 0.0], dtype=np.float32))
                                    for pid, _, h, _ in store.pending_passages(10)], "m")
        ids, owners, matrix, _, _ = store.load_passage_vectors()
        assert len(ids) == 1 and list(owners) == [pets] and matrix.shape == (1, 2)
    finally:
        service.close()


if __name__ == "__main__":  # pragma: no cover
    pytest.main([__file__, "-q"])
