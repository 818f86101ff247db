"""Memories, full text and vectors on a real PostgreSQL (tests/pg.py): the same calls as
test_memory_service.py, answered by tsvector, pg_trgm and pgvector."""

from __future__ import annotations

import pytest

from memloci.app.registry import LibraryRegistry
from memloci.core.errors import AlreadyExistsError, NotFoundError
from memloci.core.model import EntityInput, MemoryFilter, ObservationBatch
from memloci.search.embedder import EmbedderHandle
from memloci.search.vectors import VectorSearch
from memloci.service.facade import MemoryService
from memloci.store.postgres import search as pg_search


def contents(retrieval) -> list[str]:
    return [h.memory.content for h in retrieval.hits]


@pytest.fixture
def pg_service(pg_library):
    registry = LibraryRegistry([pg_library.spec])
    service = MemoryService(registry)
    yield service
    service.close()


def test_store_retrieve_update_delete(pg_service):
    memory, created = pg_service.store_memory("Pay the quarterly tax", tags=["Finance"], metadata={"b": 1, "a": 2})
    assert created and memory.tags == ("Finance",) and list(memory.metadata) == ["b", "a"]  # key order kept
    again, created = pg_service.store_memory("Pay  the quarterly tax", tags=["finance", "urgent"])
    assert not created and again.id == memory.id
    assert again.tags == ("Finance", "urgent"), "a tag told again in another case is the same tag"
    pg_service.store_memory("Refactor the billing module")
    assert contents(pg_service.retrieve_memory("taxes")) == ["Pay the quarterly tax"]  # stemmed, as on SQLite
    assert [m.content_hash for m in pg_service.list_memories(page_size=10)[0]] != []
    updated = pg_service.update_memory(memory.content_hash, content="Pay the yearly tax")
    assert updated.content == "Pay the yearly tax" and updated.content_hash != memory.content_hash
    assert contents(pg_service.retrieve_memory("yearly")) == ["Pay the yearly tax"]
    assert contents(pg_service.retrieve_memory("quarterly")) == []
    with pytest.raises(AlreadyExistsError):
        pg_service.update_memory(updated.content_hash, content="Refactor the billing module")
    removed = pg_service.delete_memory(updated.content_hash)
    assert [m.content for m in removed] == ["Pay the yearly tax"]
    assert pg_service.delete_memory(updated.content_hash) == []
    assert contents(pg_service.retrieve_memory("tax")) == []


def test_threads_lend_context_and_lose_it_with_a_neighbour(pg_service):
    pg_service.store_memory("Did you book the hotel?", metadata={"session": 1}, memory_type="dialogue")
    pg_service.store_memory("Yes, the one by the lake.", metadata={"session": 1}, memory_type="dialogue")
    pg_service.store_memory("The lake district is far", memory_type="note")
    found = contents(pg_service.retrieve_memory("hotel booking"))
    assert found[:2] == ["Did you book the hotel?", "Yes, the one by the lake."]  # the reply by its question's words
    question = pg_service.retrieve_memory("hotel").hits[0].memory
    pg_service.delete_memory(question.content_hash)
    assert contents(pg_service.retrieve_memory("hotel")) == []


def test_filters_tags_any_all_types_entity_and_time(pg_service):
    pg_service.store_memory("deploy on friday", tags=["ops", "Risky"], memory_type="Decision")
    pg_service.store_memory("deploy on monday", tags=["OPS"])
    pg_service.create_entities([EntityInput("Billing", "service", ("deploy needs a freeze",))])
    assert len(pg_service.retrieve_memory("deploy", tags=["risky", "ops"]).hits) == 2
    assert contents(pg_service.retrieve_memory("deploy", tags=["risky", "ops"], match_all=True)) == ["deploy on friday"]
    assert contents(pg_service.retrieve_memory("deploy", memory_type="decision")) == ["deploy on friday"]
    assert contents(pg_service.retrieve_memory("deploy", entity="billing")) == ["deploy needs a freeze"]
    with pytest.raises(NotFoundError):
        pg_service.retrieve_memory("deploy", entity="nobody")
    assert pg_service.retrieve_memory("deploy", after="2000-01-01", before="2000-02-01").hits == []
    assert len(pg_service.retrieve_memory("deploy", time="today").hits) == 3
    page, total = pg_service.list_memories(filters=MemoryFilter(tags=("OPS",)))
    assert total == 2 and [m.content for m in page] == ["deploy on monday", "deploy on friday"]  # newest first
    assert pg_service.list_memories(filters=MemoryFilter(memory_type="DECISION"))[1] == 1
    # a tag and a type are words of the memory too, below its own words
    assert contents(pg_service.retrieve_memory("risky")) == ["deploy on friday"]


def test_chinese_and_japanese_found_by_their_words(pg_service):
    pg_service.store_memory("東京の旅行計画を立てた")
    pg_service.store_memory("大阪で会議がある")
    assert contents(pg_service.retrieve_memory("東京")) == ["東京の旅行計画を立てた"]
    assert contents(pg_service.retrieve_memory("旅行の東京")) == ["東京の旅行計画を立てた"]  # its words in another order
    pg_service.create_entities([EntityInput("旅行計画", "plan", ("東京と京都",))])
    assert [h.entity.name for h in pg_service.search_nodes("京都").hits] == ["旅行計画"]


def test_entities_by_words_prefix_typo_and_substring(pg_service):
    pg_service.create_entities([
        EntityInput("Alice Chen", "person", ("Leads the payments team",)),
        EntityInput("Bob Stone", "person", ("Deploys the billing service on fridays",)),
    ])
    assert [h.entity.name for h in pg_service.search_nodes("payments").hits] == ["Alice Chen"]
    assert [h.entity.name for h in pg_service.search_nodes("Alcie").hits] == ["Alice Chen"]  # a typo of a name
    assert [h.entity.name for h in pg_service.search_nodes("Ali").hits] == ["Alice Chen"]  # the start of a name
    assert [h.entity.name for h in pg_service.search_nodes("deploying").hits] == ["Bob Stone"]
    assert [h.entity.name for h in pg_service.search_nodes("illing serv").hits] == ["Bob Stone"]  # a substring
    result = pg_service.search_nodes("person", limit=1)
    assert len(result.hits) == 1 and result.total_count == 2 and result.is_truncated
    store = pg_service.store()
    assert store.count_entities("stone", cap=10) == 1


def test_an_entity_is_found_by_its_observations_as_they_change(pg_service):
    pg_service.create_entities([EntityInput("Carol", "person")])
    assert pg_service.search_nodes("kayaking").hits == ()
    pg_service.add_observations([ObservationBatch("Carol", ("Goes kayaking on weekends",))])
    assert [h.entity.name for h in pg_service.search_nodes("kayaking").hits] == ["Carol"]
    pg_service.store_memory("Speaks fluent Portuguese", entity="Carol")  # an observation through the memory tools
    assert [h.entity.name for h in pg_service.search_nodes("portuguese").hits] == ["Carol"]
    pg_service.delete_observations([ObservationBatch("Carol", ("Goes kayaking on weekends",))])
    assert pg_service.search_nodes("kayaking").hits == ()
    assert [h.entity.name for h in pg_service.search_nodes("portuguese").hits] == ["Carol"]


def test_vectors_in_pgvector_find_by_meaning_with_the_filter_in_sql(pg_library, monkeypatch):
    registry = LibraryRegistry([pg_library.spec])
    service = MemoryService(registry, EmbedderHandle("minilm"))
    try:
        store = service.store()
        assert isinstance(store, VectorSearch)
        service.store_memory("The cat sat on the warm windowsill all afternoon", tags=["home"])
        service.store_memory("Quarterly revenue grew by twelve percent", tags=["work"])
        service.store_memory("My kitten loves sleeping in the sun", tags=["work"])
        assert service.flush_embeddings(timeout=300)
        assert store.embedding_state()["pending"] == 0
        found = service.retrieve_memory("feline napping")  # no word in common: meaning only
        assert contents(found)[0] in ("The cat sat on the warm windowsill all afternoon",
                                      "My kitten loves sleeping in the sun")
        assert "meaning" in found.hits[0].why
        filtered = service.retrieve_memory("feline napping", tags=["work"])
        assert contents(filtered)[0] == "My kitten loves sleeping in the sun"
        assert "The cat sat on the warm windowsill all afternoon" not in contents(filtered)
        # the store's own search, straight: the filter is SQL, the vectors never loaded here
        vector = service.embedder.get().embed(["feline napping"])[0]
        hits = store.vector_candidates(vector, 5, MemoryFilter(tags=("home",)), model=service.embedder.get().model_id)
        assert len(hits.scores) == 1 and hits.high > 0.2
        assert store.vector_candidates(vector, 5, MemoryFilter(), model="another-model").scores == {}
        # a wide filter walks the HNSW index instead (iterative scan), with the same answer
        monkeypatch.setattr(pg_search, "EXACT_MAX", 0)
        walked = store.vector_candidates(vector, 5, MemoryFilter(tags=("home",)), model=service.embedder.get().model_id)
        assert walked.scores.keys() == hits.scores.keys()
        monkeypatch.undo()
        # every vector read back as stored (what a copy to another engine takes)
        loaded = store.load_vectors()
        assert loaded.matrix.shape == (3, len(vector)) and loaded.model == service.embedder.get().model_id
        kitten = service.retrieve_memory("kitten").hits[0].memory
        again = service.embedder.get().embed([kitten.content])[0]
        assert float(loaded.matrix[list(loaded.ids).index(kitten.id)] @ again) > 0.99
        # another server on the same database searches these vectors without computing any
        other = MemoryService(LibraryRegistry([pg_library.spec]), EmbedderHandle("minilm"), embed_pending=False)
        try:
            seen = other.retrieve_memory("feline napping", tags=["work"])
            assert contents(seen)[0] == "My kitten loves sleeping in the sun" and "meaning" in seen.hits[0].why
        finally:
            other.close()
        # a changed text gets a new vector (found by the new meaning); a reset forgets them all
        memory = service.retrieve_memory("revenue").hits[0].memory
        service.update_memory(memory.content_hash, content="Sales collapsed badly this quarter")
        assert service.flush_embeddings(timeout=300)
        assert store.pending_count() == 0
        found = service.retrieve_memory("income dropped")
        assert contents(found)[0] == "Sales collapsed badly this quarter" and "meaning" in found.hits[0].why
        assert store.reset_vectors("another-model", 8) == 3
        assert store.pending_count() == 3 and store.vector_model() == "another-model"
    finally:
        service.close()
