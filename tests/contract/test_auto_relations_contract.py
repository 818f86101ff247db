"""Auto-relations on every engine: the same relations, suggestions and undo (service/extraction.py)."""

from __future__ import annotations

from memloci.core.model import EntityInput, ObservationBatch, RelationInput


def test_mentions_relate_and_undo_takes_back_exactly_them(engine):
    s = engine.service
    s.create_entities([EntityInput("AuthService", "service"), EntityInput("jwt", "module"),
                       EntityInput("api", "project", ("The public API",))])
    s.create_relations([RelationInput("jwt", "uses", "AuthService")])
    before = s.export_graph(order="name")
    [result] = s.add_observations([ObservationBatch("API", (
        "Timeouts because AuthService and src/auth/JWT.ts share a lock; TokenCache next",))])
    assert sorted((r.from_entity, r.relation_type, r.to_entity) for r in result.relations_added) \
        == [("api", "causes", "AuthService"), ("api", "causes", "jwt")]
    assert result.entities_suggested == ("TokenCache",)
    assert [e.name for e in s.export_graph(order="name").entities] == ["api", "AuthService", "jwt"]
    entry = s.history(limit=1)[0]
    assert (entry.tool, entry.action) == ("auto_relations", "create_relations")
    s.undo(entry.id)
    after = s.export_graph(order="name")
    assert sorted((r.from_entity, r.relation_type, r.to_entity) for r in after.relations) \
        == sorted((r.from_entity, r.relation_type, r.to_entity) for r in before.relations)
    assert [o.content for e in after.entities if e.name == "api" for o in e.observations] \
        == ["The public API", "Timeouts because AuthService and src/auth/JWT.ts share a lock; TokenCache next"]


def test_a_free_memory_links_to_what_it_mentions_and_nothing_is_written_for_it(engine):
    s = engine.service
    s.create_entities([EntityInput("AuthService", "service")])
    journal = len(s.history(limit=100))
    memory, _ = s.store_memory("Decided to split the AuthService", memory_type="decision")
    assert [(link.type, link.entity) for link in memory.links] == [("causes", "AuthService")]
    assert len(s.history(limit=100)) == journal + 1  # the store_memory entry alone
    assert s.export_graph().relations == ()
