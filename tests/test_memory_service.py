"""Memory operations through the service (no model needed): identity, threads, filters, time, tags and
types as words, case-insensitive labels, migration."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime

import pytest

from memloci.app.registry import LibraryRegistry
from memloci.app.specs import LibrarySpec
from memloci.core.errors import AlreadyExistsError, ValidationError
from memloci.core.model import EntityInput, MemoryFilter, name_key
from memloci.search import lexical
from memloci.search.timephrases import parse_time_phrase, split_time_phrase
from memloci.service.facade import MemoryService
from memloci.store.sqlite.schema import MIGRATIONS
from memloci.store.sqlite.sql import split_sql


def contents(retrieval) -> list[str]:
    return [h.memory.content for h in retrieval.hits]


def test_delete_memory_never_takes_an_entitys_observation_along(service):
    service.create_entities([EntityInput("Alice", "person", ("Likes green tea",))])
    memory, _ = service.store_memory("Likes green tea")
    observation = service.retrieve_memory("green tea", entity="Alice").hits[0].memory
    assert observation.content_hash != memory.content_hash, "every memory has its own hash"
    removed = service.delete_memory(memory.content_hash)
    assert [m.entity for m in removed] == [None]
    assert [o.content for o in service.open_nodes(["Alice"]).entities[0].observations] == ["Likes green tea"]
    assert service.delete_memory(memory.content_hash) == []  # idempotent


def test_free_memories_lend_context_only_within_a_conversation(service):
    service.store_memory("Pay the quarterly tax")
    service.store_memory("Refactor the billing module")
    assert contents(service.retrieve_memory("tax")) == ["Pay the quarterly tax"]
    service.store_memory("Did you book the hotel?", metadata={"session": 1}, memory_type="dialogue")
    service.store_memory("Yes, the one by the lake.", metadata={"session": 1}, memory_type="dialogue")
    found = contents(service.retrieve_memory("hotel booking lake"))
    assert found[:2] == ["Did you book the hotel?", "Yes, the one by the lake."]
    # the context goes when a neighbour goes
    answer = service.retrieve_memory("lake").hits[0].memory
    service.delete_memory(answer.content_hash)
    assert contents(service.retrieve_memory("lake")) == []


def test_filters_tags_any_all_dates_and_types(service):
    service.store_memory("deploy on friday", tags=["ops", "risky"], memory_type="decision")
    service.store_memory("deploy on monday", tags=["ops"])
    assert len(service.retrieve_memory("deploy", tags=["risky", "ops"]).hits) == 2
    assert contents(service.retrieve_memory("deploy", tags=["risky", "ops"], match_all=True)) == ["deploy on friday"]
    assert contents(service.retrieve_memory("deploy", memory_type="decision")) == ["deploy on friday"]
    assert service.retrieve_memory("deploy", after="2000-01-01", before="2000-02-01").hits == []
    assert len(service.retrieve_memory("deploy", after="2000-01-01T00:00:00+02:00").hits) == 2
    assert len(service.retrieve_memory("deploy", time="today").hits) == 2
    assert contents(service.retrieve_memory("latest", n_results=1)) == ["deploy on monday"]
    again, created = service.store_memory("deploy on monday", tags=["calendar"])
    assert not created and again.tags == ("ops", "calendar"), "a repeat adds its new tags to the one memory"


def test_bad_ranges_and_empty_updates_are_refused(service):
    a, _ = service.store_memory("something")
    with pytest.raises(ValidationError, match="after/before"):
        service.retrieve_memory("something", after="2020-01-01", before="2019-01-01")
    with pytest.raises(ValidationError, match="at least one of"):
        service.update_memory(a.content_hash)


def test_update_to_an_existing_text_is_refused(service):
    a, _ = service.store_memory("first text")
    service.store_memory("second text")
    with pytest.raises(AlreadyExistsError):
        service.update_memory(a.content_hash, content="second   text")
    assert [m.content for m in service.list_memories()[0]] == ["second text", "first text"]


def test_time_phrases():
    now = datetime(2026, 11, 21, 5, 0, tzinfo=UTC)
    assert parse_time_phrase("yesterday", now).iso() == ("2026-11-20T00:00:00Z", "2026-11-21T00:00:00Z")
    assert parse_time_phrase("last week", now).iso() == ("2026-11-09T00:00:00Z", "2026-11-16T00:00:00Z")
    assert parse_time_phrase("in December", now).iso() == ("2025-12-01T00:00:00Z", "2026-01-01T00:00:00Z")
    assert parse_time_phrase("last month", datetime(2026, 1, 10, tzinfo=UTC)).iso() == (
        "2025-12-01T00:00:00Z", "2026-01-01T00:00:00Z")
    assert parse_time_phrase("latest", now).latest
    rest, found = split_time_phrase("what did I store last week about auth", now)
    assert rest == "what did I store about auth" and found.phrase == "last week"
    assert split_time_phrase("what did Melanie do last weekend?", now)[1] is None
    for bad in ("2026-02-30", "someday"):
        with pytest.raises(ValidationError, match="time:"):
            parse_time_phrase(bad, now)


def test_a_library_of_schema_1_migrates_with_its_observations_searchable(tmp_path):
    db = tmp_path / "old.db"
    conn = sqlite3.connect(db)
    for statement in split_sql(MIGRATIONS[0]):
        conn.execute(statement)
    conn.execute("INSERT INTO entities (id, name, name_key, entity_type, created_at, updated_at) "
                 "VALUES (1, 'Alice', 'alice', 'person', '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z')")
    conn.execute("INSERT INTO memories (entity_id, content, content_hash, memory_type, created_at, updated_at) "
                 "VALUES (1, 'Plays the cello', 'h', 'observation', '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z')")
    conn.execute("PRAGMA user_version = 1")
    conn.commit()
    conn.close()
    service = MemoryService(LibraryRegistry([LibrarySpec("old", db)]))
    assert contents(service.retrieve_memory("cello")) == ["Plays the cello"]
    assert service.store().embedding_state()["pending"] == 1, "old memories wait for vectors"
    assert "pending" not in service.health()["embedder"], "not shown: no embedder is configured to drain it"
    service.close()


def test_tags_and_type_words_are_found_by_queries(service):
    service.store_memory("Login fails on Safari after the redirect", tags=["bug"], memory_type="bug")
    service.store_memory("Lunch with the design team on Friday")
    assert contents(service.retrieve_memory("bug")) == ["Login fails on Safari after the redirect"]
    service.store_memory("Ship the beta to ten customers first", memory_type="product_decision")
    assert contents(service.retrieve_memory("decisions")) == ["Ship the beta to ten customers first"]
    # a tag is a word of its own, weighed below the text: machine tags do not outrank what a memory says
    service.store_memory("See you at the party", tags=["dia:D1:3"], memory_type="dialogue")
    service.store_memory("We bought 3 cakes for the party", tags=["dia:D1:4"], memory_type="dialogue")
    assert contents(service.retrieve_memory("3"))[0] == "We bought 3 cakes for the party"
    # retagging and retyping moves what is searchable along
    tagged = service.retrieve_memory("bug").hits[0].memory
    service.update_memory(tagged.content_hash, tags=["browser"])
    assert contents(service.retrieve_memory("browser")) == ["Login fails on Safari after the redirect"]


def test_tags_types_and_importance_compare_case_insensitively_keeping_their_case(service):
    first, _ = service.store_memory("Use PostgreSQL for billing", tags=["decision", "DB"], memory_type="decision",
                                    importance="HIGH")
    assert first.importance == "high" and first.tags == ("decision", "DB")
    service.store_memory("Deploys on Thursdays", tags=["Ops"], memory_type="Decision")
    assert [m.content for m in service.search_by_tag(["Decision"])] == ["Use PostgreSQL for billing"]
    assert {m.content for m in service.search_by_tag(["db", "ops"])} == {"Use PostgreSQL for billing",
                                                                       "Deploys on Thursdays"}
    assert [m.content for m in service.search_by_tag(["DECISION", "db"], match_all=True)] == [
        "Use PostgreSQL for billing"]
    assert len(service.retrieve_memory("billing thursdays", memory_type="DECISION").hits) == 2
    assert contents(service.retrieve_memory("billing thursdays", tags=["OPS"])) == ["Deploys on Thursdays"]
    listed, total = service.list_memories(filters=MemoryFilter(tags=("dB",), memory_type="decision"))
    assert total == 1 and listed[0].tags == ("decision", "DB")
    again, created = service.store_memory("Use PostgreSQL for billing", tags=["Decision", "Finance"])
    assert not created and again.tags == ("decision", "DB", "Finance"), "one tag in any case, the new one added"
    assert service.store_memory("x", tags=["Bug", "bug", "BUG"])[0].tags == ("Bug",)
    updated = service.update_memory(first.content_hash, importance="Low", tags=["Archive"])
    assert updated.importance == "low" and [m.content for m in service.search_by_tag(["archive"])] == [
        "Use PostgreSQL for billing"]
    with pytest.raises(ValidationError, match="importance: must be one of"):
        service.store_memory("y", importance="urgent")


def test_a_library_of_schema_5_gets_labels_and_case_free_tags(tmp_path):
    db = tmp_path / "old.db"
    conn = sqlite3.connect(db)
    conn.create_function("memloci_content_hash", 2, lexical.content_hash)
    conn.create_function("memloci_name_key", 1, name_key)
    for migration in MIGRATIONS[:5]:
        for statement in split_sql(migration):
            conn.execute(statement)
    rows = [(1, "Did you book the hotel?", '["Travel"]', "dialogue", "m:dialogue:1"),
            (2, "Yes, the one by the lake.", '[]', "dialogue", "m:dialogue:1"),
            (3, "Safari login fails", '["Bug", "web"]', "bug", "")]
    for id_, content, tags, mtype, thread in rows:
        conn.execute("INSERT INTO memories (id, content, content_hash, memory_type, tags, created_at, updated_at, "
                     "thread) VALUES (?, ?, ?, ?, ?, '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z', ?)",
                     (id_, content, lexical.content_hash(content), mtype, tags, thread))
        conn.execute("INSERT INTO memory_fts (rowid, content, context) VALUES (?, ?, '')", (id_, content))
        conn.execute("INSERT INTO memory_grams (rowid, content) VALUES (?, ?)", (id_, content))
        conn.executemany("INSERT INTO memory_tags VALUES (?, ?)", [(t, id_) for t in json.loads(tags)])
    conn.execute("PRAGMA user_version = 5")
    conn.commit()
    conn.close()
    service = MemoryService(LibraryRegistry([LibrarySpec("old", db)]))
    try:
        assert contents(service.retrieve_memory("bug")) == ["Safari login fails"]
        assert [m.content for m in service.search_by_tag(["bug"])] == ["Safari login fails"]
        assert [m.tags for m in service.search_by_tag(["TRAVEL"])] == [("Travel",)], "tags keep their case"
        # the rebuilt index keeps each turn's neighbours' words: the answer is found by the question's
        assert contents(service.retrieve_memory("hotel"))[:2] == ["Did you book the hotel?", "Yes, the one by the lake."]
    finally:
        service.close()


def test_a_time_phrase_whose_range_holds_every_memory_keeps_its_words(service):
    # everything was stored today: "today" separates nothing, so it may be what a memory says
    service.store_memory("Lunch with the design team on Friday")
    service.store_memory("The standup moved to ten o'clock today")
    found = service.retrieve_memory("what changed today")
    assert contents(found) == ["The standup moved to ten o'clock today", "Lunch with the design team on Friday"]
    assert "words" in found.hits[0].why and "no word or meaning match" in found.hits[1].why
    # a range that holds nothing is no time at all: the words alone answer
    assert contents(service.retrieve_memory("standup last year")) == ["The standup moved to ten o'clock today"]


def test_chinese_and_japanese_questions_find_memories_sharing_their_words_in_another_order(service):
    """A question rarely shares three characters in a row with the memory that answers it; its
    two-character words (東京, 旅行, 上海, 迁移) find it by words alone (the fixture has no model)."""
    service.store_memory("東京の旅行計画。来月の金曜日に出発する")
    service.store_memory("大阪の会議は火曜日に延期された")
    service.store_memory("数据库迁移到上海的数据中心")
    service.store_memory("北京办公室的网络很慢")
    trip = service.retrieve_memory("東京旅行の日程")
    assert contents(trip)[0] == "東京の旅行計画。来月の金曜日に出発する"
    assert "words" in trip.hits[0].why
    moved = service.retrieve_memory("上海迁移")
    assert contents(moved)[0] == "数据库迁移到上海的数据中心"
    # an update moves the memory's words with it
    memory = service.retrieve_memory("北京办公室").hits[0].memory
    service.update_memory(memory.content_hash, content="深圳办公室的网络很快")
    assert "深圳办公室的网络很快" in contents(service.retrieve_memory("深圳网络"))
    assert all("北京" not in c for c in contents(service.retrieve_memory("北京")))


class _RefusingModel:
    """The loaded model, except that it fails on any batch holding "zqfail" (an endpoint that
    errs now): put in its place with EmbedderHandle.wrap."""

    def __init__(self, model):
        self.model, self.model_id, self.dimension, self.multilingual = model, model.model_id, model.dimension, model.multilingual

    def embed(self, texts):
        if any("zqfail" in t for t in texts):
            raise OSError("the embeddings endpoint answered 500")
        return self.model.embed(texts)


def test_a_model_failing_in_the_near_duplicate_check_leaves_a_stored_memory_stored(tmp_path):
    # The memory is written before the check: the check's failure is no failure of the store
    # (else the caller is told it failed, retries, and is told it is a duplicate).
    from memloci.search.embedder import EmbedderHandle

    handle = EmbedderHandle("minilm")
    service = MemoryService(LibraryRegistry([LibrarySpec("lib", tmp_path / "lib.db")]), handle)
    try:
        assert handle.wrap(_RefusingModel) is not None
        service.store_memory("The deploy runs on Friday at noon in the main region.")
        memory, created = service.store_memory("The deploy runs on Friday at noon in the main region zqfail.")
        assert created and service.memories.similar_to(memory) == []
        assert service.list_memories()[1] == 2
    finally:
        service.close()
