"""Meaning on every engine, with the default model (all-MiniLM-L6-v2): memories and observations
are embedded in the background, and a query that shares no word with them finds them by
meaning, within the filters (on PostgreSQL the vectors are pgvector's and the filters SQL; on
SQLite and Markdown an index in the process)."""

from __future__ import annotations

from memloci.core.model import EntityInput

PUPPIES = "She adopted two puppies from the animal shelter last weekend"
ORCHESTRA = "The orchestra rehearses Mahler's fifth symphony on Thursdays"
TAXES = "Our quarterly taxes are due at the end of the month"


def test_memories_and_observations_are_found_by_meaning_within_filters(engine):
    s = engine.library(embedder="minilm")
    s.store_memory(PUPPIES, tags=["home"])
    s.store_memory(ORCHESTRA, tags=["music"])
    s.store_memory(TAXES, tags=["home"])
    s.create_entities([EntityInput("Pets", "topic", (PUPPIES,)), EntityInput("Concerts", "topic", (ORCHESTRA,))])
    assert s.flush_embeddings(timeout=600)

    found = s.retrieve_memory("getting new dogs")
    top = found.hits[0]
    assert top.memory.content == PUPPIES and top.words == 0 and top.meaning > 0, [(h.memory.content, h.why) for h in found.hits]
    inside = s.retrieve_memory("classical music concert", tags=["home"])
    assert inside.hits and all("home" in h.memory.tags for h in inside.hits), "the filter holds for meaning too"
    assert ORCHESTRA not in [h.memory.content for h in inside.hits]
    music = s.retrieve_memory("classical music concert", tags=["music"])
    assert [h.memory.content for h in music.hits][:1] == [ORCHESTRA] and music.hits[0].meaning > 0
    entity = s.retrieve_memory("classical music concert", entity="Concerts")
    assert [h.memory.content for h in entity.hits] == [ORCHESTRA] and entity.hits[0].memory.entity == "Concerts"

    nodes = s.search_nodes("getting new dogs")
    assert nodes.hits and nodes.hits[0].entity.name == "Pets", [(h.entity.name, h.why) for h in nodes.hits]
    health = s.health()
    assert health["embedder"]["search"] == "hybrid" and health["embedder"]["library_model"], health["embedder"]


def test_a_vector_the_near_duplicate_check_computed_is_the_memorys_and_an_edit_replaces_it(engine):
    """store_memory's near-duplicate check embeds a new text only when one of its best word matches
    may be a near duplicate (search/similar.py may_be_near), and hands the vectors to the embedding
    worker, which stores them instead of embedding the texts again (search/vectors.py,
    RequestBatcher and VectorOffers, by text): the memory is found by that meaning, and once its
    text is edited, by the new text's meaning only."""
    s = engine.library(embedder="minilm")
    s.store_memory(TAXES)
    assert s.flush_embeddings(timeout=600)
    batcher = s.vectors.batcher
    memory, created = s.store_memory(PUPPIES, tags=["home"])
    before = batcher.texts
    assert created and s.memories.similar_to(memory) == [] and batcher.texts == before, \
        "no word match may be near: nothing embedded on the request path"
    paraphrase, _ = s.store_memory("Last weekend she adopted two puppies from the animal shelter.")
    near = s.memories.similar_to(paraphrase)
    assert [m.content for m, _ in near] == [PUPPIES] and near[0][1] >= 0.84, near
    assert batcher.texts == before + 2, "the text and its match, not embedded yet, in one model call"
    assert s.flush_embeddings(timeout=600)
    dogs = s.retrieve_memory("getting new dogs").hits
    assert dogs[0].memory.content in (PUPPIES, paraphrase.content) and dogs[0].words == 0 and dogs[0].meaning > 0

    s.update_memory(memory.content_hash, content=ORCHESTRA)
    assert s.flush_embeddings(timeout=600)
    music = s.retrieve_memory("classical music concert").hits
    assert music[0].memory.content == ORCHESTRA and music[0].words == 0 and music[0].meaning > 0
    assert s.retrieve_memory("getting new dogs", tags=["home"]).hits[0].meaning < dogs[0].meaning
