"""Free memories on every engine, through the service: store (dedup by content), retrieve with
filters (tags any/all, type, entity, time), list, update, delete. No model is loaded, so
retrieval is by words: every engine must give the same answers (tests/test_memory_service.py
has more of SQLite's ranking)."""

from __future__ import annotations

import pytest

from memloci.core.errors import AlreadyExistsError, NotFoundError, ValidationError
from memloci.core.model import EntityInput, MemoryFilter


def contents(retrieval) -> list[str]:
    return [h.memory.content for h in retrieval.hits]


def test_store_dedups_by_content_and_merges_tags(engine):
    s = engine.service
    first, created = s.store_memory("Deploy on   Monday ", tags=["ops"], memory_type="decision",
                                    metadata={"ticket": 7}, importance="HIGH")
    assert created and first.content == "Deploy on   Monday" and first.tags == ("ops",)
    assert (first.memory_type, first.importance, first.metadata, first.entity) == ("decision", "high", {"ticket": 7}, None)
    assert len(first.content_hash) == 64 and first.created_at.endswith("Z") and first.access_count == 0
    again, created = s.store_memory("Deploy on Monday", tags=["OPS", "calendar"])
    assert not created and again.id == first.id and again.content_hash == first.content_hash
    assert again.tags == ("ops", "calendar"), "one tag in any case, the new one added"
    assert s.store_memory("x", tags=["Bug", "bug", "BUG"])[0].tags == ("Bug",)
    listed, total = s.list_memories()
    assert total == 2 and [m.content for m in listed] == ["x", "Deploy on   Monday"]
    with pytest.raises(ValidationError, match="importance: must be one of"):
        s.store_memory("y", importance="urgent")
    with pytest.raises(ValidationError, match="content"):
        s.store_memory("   ")
    assert s.list_memories()[1] == 2, "nothing stored by a refused call"


def test_retrieve_filters_by_tags_any_all_type_and_time(engine):
    s = engine.service
    s.store_memory("deploy on friday", tags=["ops", "risky"], memory_type="decision")
    s.store_memory("deploy on monday", tags=["ops"])
    s.store_memory("lunch on friday", tags=["social"])
    assert set(contents(s.retrieve_memory("deploy", tags=["risky", "ops"]))) == {"deploy on friday", "deploy on monday"}
    assert contents(s.retrieve_memory("deploy", tags=["risky", "ops"], match_all=True)) == ["deploy on friday"]
    assert contents(s.retrieve_memory("deploy", memory_type="decision")) == ["deploy on friday"]
    assert contents(s.retrieve_memory("friday", tags=["SOCIAL"])) == ["lunch on friday"]
    assert s.retrieve_memory("deploy", after="2000-01-01", before="2000-02-01").hits == []
    # within a time filter the matches come first, then the filter's newest memories
    for found in (s.retrieve_memory("deploy", after="2000-01-01T00:00:00+02:00"), s.retrieve_memory("deploy", time="today")):
        assert set(contents(found)[:2]) == {"deploy on friday", "deploy on monday"}
        assert contents(found)[2:] == ["lunch on friday"] and "no word or meaning match" in found.hits[2].why
    assert contents(s.retrieve_memory("latest", n_results=1)) == ["lunch on friday"]
    assert set(contents(s.retrieve_memory("friday"))) == {"deploy on friday", "lunch on friday"}
    assert contents(s.retrieve_memory("zeppelin")) == []
    # a filter that nothing matches by words lists its newest, and says so
    found = s.retrieve_memory("zeppelin", tags=["ops"])
    assert contents(found) == ["deploy on monday", "deploy on friday"] and found.unmatched
    with pytest.raises(ValidationError, match="after/before"):
        s.retrieve_memory("deploy", after="2020-01-01", before="2019-01-01")


def test_tags_and_types_are_words_and_compare_case_insensitively(engine):
    s = engine.service
    s.store_memory("Login fails on Safari after the redirect", tags=["bug"], memory_type="bug")
    s.store_memory("Lunch with the design team on Friday")
    assert contents(s.retrieve_memory("bug")) == ["Login fails on Safari after the redirect"]
    s.store_memory("Use PostgreSQL for billing", tags=["decision", "DB"], memory_type="decision")
    s.store_memory("Deploys on Thursdays", tags=["Ops"], memory_type="Decision")
    assert [m.content for m in s.search_by_tag(["Decision"])] == ["Use PostgreSQL for billing"]
    assert {m.content for m in s.search_by_tag(["db", "ops"])} == {"Use PostgreSQL for billing", "Deploys on Thursdays"}
    assert [m.content for m in s.search_by_tag(["DECISION", "db"], match_all=True)] == ["Use PostgreSQL for billing"]
    page, total = s.search_by_tag_page(["db", "ops"], limit=1, offset=1)
    assert total == 2 and [m.content for m in page] == ["Use PostgreSQL for billing"], "newest first"
    assert len(s.retrieve_memory("billing thursdays", memory_type="DECISION").hits) == 2
    listed, total = s.list_memories(filters=MemoryFilter(tags=("dB",), memory_type="decision"))
    assert total == 1 and listed[0].tags == ("decision", "DB"), "tags keep their case"


def test_list_pages_newest_first_with_filters(engine):
    s = engine.service
    s.create_entities([EntityInput("Alice", "person", ("Likes green tea",))])
    for i in range(5):
        s.store_memory(f"note {i}", tags=["even"] if i % 2 == 0 else ["odd"], memory_type="note" if i < 4 else "task")
    page, total = s.list_memories(page=2, page_size=2)
    assert total == 6 and [m.content for m in page] == ["note 2", "note 1"]
    assert [m.content for m in s.list_memories(filters=MemoryFilter(tags=("even",)))[0]] == ["note 4", "note 2", "note 0"]
    assert [m.content for m in s.list_memories(filters=MemoryFilter(memory_type="task"))[0]] == ["note 4"]
    listed, total = s.list_memories(filters=MemoryFilter(entity="alice"))
    assert total == 1 and listed[0].content == "Likes green tea" and listed[0].entity == "Alice"
    assert s.list_memories(filters=MemoryFilter(before="2000-01-01T00:00:00Z")) == ([], 0)
    assert s.list_memories(time="today")[1] == 6
    assert s.list_memories(page=9)[0] == []


def test_update_moves_the_words_and_refuses_an_existing_text(engine):
    s = engine.service
    a, _ = s.store_memory("first text", tags=["one"])
    s.store_memory("second text")
    updated = s.update_memory(a.content_hash, content="third words here", tags=["Two"], metadata={"k": "v"},
                              importance="low")
    assert (updated.id, updated.content, updated.tags, updated.metadata, updated.importance) == (
        a.id, "third words here", ("Two",), {"k": "v"}, "low")
    assert updated.content_hash != a.content_hash and updated.created_at == a.created_at
    assert contents(s.retrieve_memory("third")) == ["third words here"]
    assert contents(s.retrieve_memory("first")) == [], "the old words left the index"
    assert [m.content for m in s.search_by_tag(["two"])] == ["third words here"]
    assert s.search_by_tag(["one"]) == []
    with pytest.raises(AlreadyExistsError):
        s.update_memory(updated.content_hash, content="second   text")
    with pytest.raises(ValidationError, match="at least one of"):
        s.update_memory(updated.content_hash)
    with pytest.raises(NotFoundError, match="content_hash"):
        s.update_memory("0" * 64, content="x")
    assert sorted(m.content for m in s.list_memories()[0]) == ["second text", "third words here"]


def test_delete_memory_is_idempotent_and_never_takes_an_observation(engine):
    s = engine.service
    s.create_entities([EntityInput("Alice", "person", ("Likes green tea",))])
    memory, _ = s.store_memory("Likes green tea")
    observation = s.retrieve_memory("green tea", entity="Alice").hits[0].memory
    assert observation.entity == "Alice" and observation.content_hash != memory.content_hash
    removed = s.delete_memory(memory.content_hash)
    assert [(m.content, m.entity) for m in removed] == [("Likes green tea", None)]
    assert s.delete_memory(memory.content_hash) == []
    assert [o.content for o in s.open_nodes(["Alice"]).entities[0].observations] == ["Likes green tea"]
    assert contents(s.retrieve_memory("green tea")) == ["Likes green tea"]
    assert s.list_memories()[1] == 1


def test_a_memory_may_belong_to_an_entity(engine):
    s = engine.service
    s.create_entities([EntityInput("Alice", "person")])
    memory, created = s.store_memory("Plays the cello", entity="alice", tags=["music"])
    assert created and memory.entity == "Alice"
    assert [o.content for o in s.open_nodes(["Alice"]).entities[0].observations] == ["Plays the cello"]
    assert contents(s.retrieve_memory("cello", entity="ALICE")) == ["Plays the cello"]
    with pytest.raises(NotFoundError):
        s.store_memory("x", entity="nobody")


def test_chinese_and_japanese_memories_are_found_by_their_words(engine):
    s = engine.service
    s.store_memory("東京の旅行計画。来月の金曜日に出発する")
    s.store_memory("大阪の会議は火曜日に延期された")
    s.store_memory("数据库迁移到上海的数据中心")
    s.store_memory("北京办公室的网络很慢")
    assert contents(s.retrieve_memory("東京"))[0] == "東京の旅行計画。来月の金曜日に出発する"
    assert contents(s.retrieve_memory("東京旅行の日程"))[0] == "東京の旅行計画。来月の金曜日に出発する"
    assert contents(s.retrieve_memory("上海迁移"))[0] == "数据库迁移到上海的数据中心"
    memory = s.retrieve_memory("北京办公室").hits[0].memory
    s.update_memory(memory.content_hash, content="深圳办公室的网络很快")
    assert "深圳办公室的网络很快" in contents(s.retrieve_memory("深圳网络"))
    assert all("北京" not in c for c in contents(s.retrieve_memory("北京")))


def test_a_conversation_lends_context_to_its_turns(engine):
    s = engine.service
    s.store_memory("Pay the quarterly tax")
    s.store_memory("Did you book the hotel?", metadata={"session": 1}, memory_type="dialogue")
    s.store_memory("Yes, the one by the lake.", metadata={"session": 1}, memory_type="dialogue")
    assert contents(s.retrieve_memory("hotel booking lake"))[:2] == ["Did you book the hotel?",
                                                                     "Yes, the one by the lake."]
