"""Note bodies carry meaning on every engine: a body is cut into passages (rules/passages.py),
kept in step with every way the body changes (edits, rename, merge, delete, undo), embedded by
the background worker, and a note whose body says what a query means is found by search_nodes
with no word in common. On PostgreSQL the vectors are pgvector columns: a second server on the
same library finds them, and sees them change."""

from __future__ import annotations

import numpy as np

from memloci.service.documents import NewEntityDocument
from memloci.store.protocols import Passages

PUPPIES = "She adopted two puppies from the animal shelter last weekend."
BOILER = "The boiler was serviced and the radiators bled."
OTHERS = {
    "Budget": "Quarterly revenue grew twelve percent, driven by enterprise subscriptions.",
    "Infra": "## Database\n\nThe staging server runs PostgreSQL 16 with nightly backups.",
    "Garden": "Tomatoes and basil were planted along the south fence in May.",
}


def embed_all(store, model: str = "m") -> None:
    """Split what waits and give every passage a vector (a fixed one: this is about bookkeeping)."""
    while store.refresh_passages():
        pass
    pending = store.pending_passages(10_000)
    if pending:
        store.save_passage_vectors([(p.id, p.text_hash, np.array([1.0, 0.0], dtype=np.float32)) for p in pending], model)


def test_passages_follow_every_change_to_a_body(engine):
    s = engine.service
    store = s.store()
    assert isinstance(store, Passages)
    s.add_entities([NewEntityDocument("Pets", content=f"{PUPPIES}\n\n## Vet\n\n" + "Checkups are due. " * 60)])
    assert store.passage_pending_count() == 1  # one body waits to be split; the write did not do it
    assert store.refresh_passages() == 1 and store.refresh_passages() == 0
    before = store.passages_of("Pets")
    assert len(before) == 2 and PUPPIES in before[0] and before[1].startswith("## Vet")
    assert store.passage_pending_count() == 2
    embed_all(store)
    assert store.passage_pending_count() == 0
    version = store.passages_version()
    first = store.load_passage_vectors()
    assert len(first.ids) == 2 and first.model == "m" and first.matrix.shape == (2, 2)
    vet_id = int(first.ids[1])

    # One paragraph edited: only its passage is made again (and waits); the other keeps its row and vector.
    s.replace_entity_content("Pets", "two puppies", "three kittens")
    store.refresh_passages()
    after = store.passages_of("Pets")
    kittens = [p for p in after if "three kittens" in p]
    assert len(after) == 2 and before[1] in after and len(kittens) == 1 and not any("puppies" in p for p in after)
    assert [p.text for p in store.pending_passages(10)] == kittens
    assert [int(i) for i in store.load_passage_vectors().ids] == [vet_id]
    assert store.passages_version() != version  # the old passage's vector went: an index reloads

    s.rename_entity("Pets", "Animals")
    store.refresh_passages()
    assert sorted(store.passages_of("Animals")) == sorted(after)  # a rename keeps them
    s.add_entities([NewEntityDocument("Zoo", content="Lions sleep most of the day in the shade.")])
    s.merge_entities(["Animals"], "Zoo")
    store.refresh_passages()
    assert store.passages_of("Animals") == []
    merged = " ".join(store.passages_of("Zoo"))
    assert "Lions" in merged and "kittens" in merged  # the merged body is split again
    embed_all(store)

    version = store.passages_version()
    s.delete_entities(["Zoo"])
    assert store.passages_of("Zoo") == [] and store.passage_pending_count() == 0
    assert len(store.load_passage_vectors().ids) == 0 and store.passages_version() != version

    # Undo brings the note back, and its body is split again (its passages wait for vectors).
    s.undo(s.history(limit=1)[0].id)
    store.refresh_passages()
    assert " ".join(store.passages_of("Zoo")) == merged
    assert store.passage_pending_count() == len(store.passages_of("Zoo"))


def test_a_short_or_empty_body_makes_no_passage(engine):
    s = engine.service
    store = s.store()
    s.add_entities([NewEntityDocument("Dmitri", content="Dmitri."), NewEntityDocument("Empty", content="")])
    store.refresh_passages()
    assert store.passages_of("Dmitri") == [] and store.passages_of("Empty") == []
    assert store.passage_pending_count() == 0


def test_a_note_is_found_by_what_its_body_means(engine):
    s = engine.library(embedder="minilm")
    s.add_entities([NewEntityDocument("Pets", content=PUPPIES)]
                   + [NewEntityDocument(n, content=t) for n, t in OTHERS.items()])
    assert s.flush_embeddings(timeout=600)
    assert s.health()["embedder"]["pending"] == 0
    found = s.search_nodes("getting new dogs")
    assert found.hits, "no word of the query is in any note: only meaning can find it"
    assert found.hits[0].entity.name == "Pets" and "body means it" in found.hits[0].why, \
        [(h.entity.name, h.why) for h in found.hits]

    # The body changes: the old meaning goes with it.
    s.replace_entity_content("Pets", PUPPIES, BOILER)
    assert s.flush_embeddings(timeout=600)
    assert "Pets" not in [h.entity.name for h in s.search_nodes("getting new dogs").hits]

    # A new model (reindex) re-embeds the passages too.
    store = s.store()
    passages = sum(len(store.passages_of(n)) for n in ["Pets", *OTHERS])
    assert s.reindex() >= passages and s.health()["embedder"]["pending"] == 0
    assert len(store.load_passage_vectors().ids) == passages


def test_a_second_server_finds_and_follows_the_passages_another_embedded(engine):
    spec = engine.spec_text()
    one = engine.open(spec, embedder="minilm")
    one.add_entities([NewEntityDocument("Pets", content=PUPPIES)]
                     + [NewEntityDocument(n, content=t) for n, t in OTHERS.items()])
    assert one.flush_embeddings(timeout=600)
    two = engine.open(spec, embedder="minilm")
    assert two.flush_embeddings(timeout=600)  # its worker finds nothing left to embed
    found = two.search_nodes("getting new dogs")
    assert found.hits and found.hits[0].entity.name == "Pets" and "body means it" in found.hits[0].why
    one.replace_entity_content("Pets", PUPPIES, BOILER)
    assert one.flush_embeddings(timeout=600)
    if engine.name == "markdown":
        two.store().sync()  # a folder library's second server learns of the edit by its scan
    assert "Pets" not in [h.entity.name for h in two.search_nodes("getting new dogs").hits]
    assert "Pets" in [h.entity.name for h in two.search_nodes("heating maintenance").hits]
