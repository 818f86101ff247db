"""What English stemming promises, on every engine: a word's regular inflections (-s, -ed,
-ing) find each other by words, in both directions, in observations, note bodies and free
memories. Derived words (`deployment` for `deployed`) are not promised: SQLite's Porter and
PostgreSQL's Snowball cut them differently (docs/server.md, "Where the engines can still rank
differently")."""

from __future__ import annotations

import pytest

from memloci.core.model import EntityInput, ObservationBatch
from memloci.service.documents import NewEntityDocument

FORMS = ("deploy", "deploys", "deploying", "deployed")


@pytest.mark.parametrize("stored", FORMS)
def test_inflections_find_each_other_in_observations_bodies_and_memories(engine, stored):
    s = engine.service
    s.add_entities([NewEntityDocument("web", "service"), NewEntityDocument("runbook", "note",
                                                                           content=f"We {stored} on Fridays.\n")])
    s.add_observations([ObservationBatch("web", (f"Ops {stored} it nightly",))])
    s.store_memory(f"They {stored} the release")
    s.store_memory("Lunch was pasta")
    for asked in FORMS:
        hits = {h.entity.name: h.why for h in s.search_nodes(asked).hits}
        assert set(hits) == {"web", "runbook"}, (stored, asked, hits)
        assert all("substring" not in why for why in hits.values()), "found as a word, not a substring"
        found = {h.memory.content for h in s.retrieve_memory(asked, n_results=5).hits if h.words > 0}
        assert found == {f"They {stored} the release", f"Ops {stored} it nightly"}, (stored, asked, found)


def test_derived_words_are_found_by_meaning(engine):
    """`deployment` for `deployed` (and back) is not promised by words on every engine; with the
    default embedder it is found by meaning, in observations, note bodies and free memories."""
    s = engine.library(embedder="minilm")
    for i in range(12):
        s.store_memory(f"Lunch {i}: the cat sat on mat {i} and ate fish")
    s.store_memory("The deployment failed twice")
    s.create_entities([EntityInput("web", "service", ("The deployment failed twice",))])
    s.add_entities([NewEntityDocument("runbook", content="## Steps\nThe deployment runs at night.\n")])
    s.store_memory("We deployed it to staging")
    assert s.flush_embeddings(timeout=120)
    by_meaning = [h.memory.content for h in s.retrieve_memory("deployed", n_results=5).hits if h.meaning > 0]
    assert "The deployment failed twice" in by_meaning
    assert {"web", "runbook"} <= {h.entity.name for h in s.search_nodes("deployed").hits}
    assert "We deployed it to staging" in [h.memory.content for h in s.retrieve_memory("deployment", n_results=5).hits
                                           if h.meaning > 0]
