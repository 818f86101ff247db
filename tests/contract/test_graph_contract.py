"""The nine official graph tools, on every engine, through the service: merge-on-create,
relations with duplicates and missing endpoints, observations, deletes that cascade, reads,
search; the error codes and the messages the tools show (tests/test_graph_tools.py checks the
same over MCP on the default engine)."""

from __future__ import annotations

import pytest

from memloci.core.errors import InvalidRelationError, NotFoundError, ValidationError
from memloci.core.model import EntityInput, ObservationBatch, RelationInput


def observations(service, name: str) -> list[str]:
    (entity,) = service.open_nodes([name]).entities
    return [o.content for o in entity.observations]


def triples(relations) -> set[tuple[str, str, str]]:
    return {(r.from_entity, r.relation_type, r.to_entity) for r in relations}


def test_create_merges_existing_and_in_call_duplicates(engine):
    s = engine.service
    (alice,) = s.create_entities([EntityInput("Alice", "person", ("Works at Acme", "Likes tea")),
                                  EntityInput("ALICE", "robot", ("Likes tea", "Plays chess"))])
    assert (alice.name, alice.entity_type, alice.status) == ("Alice", "person", "created")
    assert alice.observations == ("Works at Acme", "Likes tea", "Plays chess")
    assert alice.created_at.endswith("Z")

    merged, acme = s.create_entities([EntityInput("alice", "cat", ("Prefers email", "  Likes   tea ")),
                                      EntityInput("Acme", "company")])
    assert (merged.name, merged.entity_type, merged.status, merged.ignored_type) == ("Alice", "person", "merged", "cat")
    assert merged.observations == ("Prefers email",) and merged.skipped_observations == ("Likes   tea",)
    assert merged.created_at == alice.created_at, "a merge keeps the entity's creation time"
    assert (acme.status, acme.observations) == ("created", ())

    (entity,) = s.open_nodes(["alice"]).entities
    assert (entity.name, entity.entity_type) == ("Alice", "person")
    assert [o.content for o in entity.observations] == ["Works at Acme", "Likes tea", "Plays chess", "Prefers email"]
    assert all(o.created_at.endswith("Z") for o in entity.observations)
    # a merge that adds nothing changes nothing
    (again,) = s.create_entities([EntityInput("ALICE", "person", ("Likes tea",))])
    assert again.status == "merged" and again.observations == () and again.ignored_type is None
    assert s.read_graph().total_entity_count == 2


def test_create_relations_refuses_missing_endpoints_atomically_and_ignores_duplicates(engine):
    s = engine.service
    s.create_entities([EntityInput("A", "t"), EntityInput("B", "t")])
    with pytest.raises(InvalidRelationError) as caught:
        s.create_relations([RelationInput("A", "knows", "B"), RelationInput("A", "knows", "Ghost"),
                            RelationInput("Nobody", "knows", "B")])
    err = caught.value
    assert err.code == "INVALID_RELATION" and err.details["missing"] == ["Ghost", "Nobody"]
    assert err.message == "relations[1].to: 'Ghost' does not exist; relations[2].from: 'Nobody' does not exist"
    assert "nothing was changed" in err.hint
    assert s.read_graph().relations == (), "nothing of a refused batch is applied"

    created, existing = s.create_relations([RelationInput("A", "knows", "B")])
    assert triples(created) == {("A", "knows", "B")} and existing == []
    assert created[0].created_at.endswith("Z")
    # endpoints match in any case and name the stored entity; relation types are case-sensitive
    created, existing = s.create_relations([RelationInput("a", "knows", "b"), RelationInput("a", "Knows", "b"),
                                            RelationInput("A", "knows", "A")])
    assert triples(existing) == {("A", "knows", "B")}
    assert triples(created) == {("A", "Knows", "B"), ("A", "knows", "A")}
    # the same relation twice in one call is created once
    created, existing = s.create_relations([RelationInput("B", "r", "A"), RelationInput("b", "r", "a")])
    assert triples(created) == {("B", "r", "A")} and len(created) == 1 and existing == []
    assert triples(s.read_graph().relations) == {("A", "knows", "B"), ("A", "Knows", "B"), ("A", "knows", "A"),
                                                 ("B", "r", "A")}


def test_add_observations_missing_entity_is_not_found_and_nothing_applied(engine):
    s = engine.service
    s.create_entities([EntityInput("A", "t", ("one",))])
    with pytest.raises(NotFoundError) as caught:
        s.add_observations([ObservationBatch("A", ("two",)), ObservationBatch("Missing", ("x",)),
                            ObservationBatch("Gone", ("y",))])
    assert caught.value.code == "NOT_FOUND" and caught.value.message == "entities not found: Missing, Gone"
    assert caught.value.details["missing"] == ["Missing", "Gone"]
    assert observations(s, "A") == ["one"]

    (added,) = s.add_observations([ObservationBatch("a", ("one", "two", "two", " two  "))])
    assert (added.entity_name, added.added, added.skipped) == ("A", ("two",), ("one", "two", "two"))
    assert observations(s, "A") == ["one", "two"]


def test_observations_differing_in_case_are_distinct_facts(engine):
    s = engine.service
    s.create_entities([EntityInput("Svc", "service", ("Uses postgres",))])
    (added,) = s.add_observations([ObservationBatch("Svc", ("Uses Postgres",))])
    assert added.added == ("Uses Postgres",)
    s.delete_observations([ObservationBatch("Svc", ("Uses postgres",))])
    assert observations(s, "svc") == ["Uses Postgres"]


def test_deletes_are_idempotent_and_delete_entities_cascades(engine):
    s = engine.service
    s.create_entities([EntityInput("A", "t", ("a1", "a2")), EntityInput("B", "t", ("b1",)), EntityInput("C", "t")])
    s.create_relations([RelationInput("A", "r", "B"), RelationInput("B", "r", "C"), RelationInput("C", "r", "A")])
    removed = [s.delete_observations([ObservationBatch("A", ("a1",)), ObservationBatch("Nope", ("x",))])
               for _ in range(2)]
    assert [[(r.entity_name, r.removed) for r in batch] for batch in removed] == [[("A", ("a1",))], []]
    assert observations(s, "A") == ["a2"]
    gone = [s.delete_relations([RelationInput("b", "r", "c")]) for _ in range(2)]
    assert [triples(g) for g in gone] == [{("B", "r", "C")}, set()]
    assert [s.delete_entities(["a", "Ghost"]) for _ in range(2)] == [["A"], []]
    graph = s.read_graph()
    assert [e.name for e in graph.entities] == ["B", "C"]
    assert graph.relations == (), "relations of a deleted entity go with it"
    assert [h.entity.name for h in s.search_nodes("a2").hits] == []
    stats = s.stats()
    assert (stats.entities, stats.observations, stats.relations) == (2, 1, 0), \
        "observations of a deleted entity are gone from the library, not just hidden"
    # the name is free again: a new entity, not a merge into the deleted one
    (again,) = s.create_entities([EntityInput("a", "other")])
    assert again.status == "created" and observations(s, "a") == []


def test_open_nodes_returns_relations_with_either_end_opened(engine):
    s = engine.service
    s.create_entities([EntityInput(n, "t") for n in "ABCD"])
    s.create_relations([RelationInput("A", "r", "B"), RelationInput("C", "r", "A"), RelationInput("C", "r", "D")])
    graph = s.open_nodes(["a", "Nope"])
    assert [e.name for e in graph.entities] == ["A"]
    assert triples(graph.relations) == {("A", "r", "B"), ("C", "r", "A")}
    assert s.open_nodes(["Nope"]).entities == ()


def test_read_graph_pages_and_summary_mode(engine):
    s = engine.service
    s.create_entities([EntityInput(f"E{i}", "t", (f"obs {i}",)) for i in range(10)])
    s.create_relations([RelationInput("E0", "r", "E1"), RelationInput("E1", "r", "E5"), RelationInput("E6", "r", "E7")])
    page = s.read_graph(summary=True, limit=4)
    assert [e.name for e in page.entities] == ["E0", "E1", "E2", "E3"]
    assert all(e.observations == () for e in page.entities)
    assert (page.total_entity_count, page.is_truncated, page.offset) == (10, True, 0)
    assert triples(page.relations) == {("E0", "r", "E1")}, "relations with both ends on the page"
    page = s.read_graph(limit=4, offset=4)
    assert [e.name for e in page.entities] == ["E4", "E5", "E6", "E7"]
    assert [o.content for o in page.entities[0].observations] == ["obs 4"]
    assert triples(page.relations) == {("E6", "r", "E7")}
    page = s.read_graph(offset=8)
    assert [e.name for e in page.entities] == ["E8", "E9"] and page.is_truncated is False
    full = s.read_graph()
    assert len(full.entities) == 10 and len(full.relations) == 3
    with pytest.raises(ValidationError, match="limit"):
        s.read_graph(limit=0)


def test_export_is_the_whole_graph_in_order(engine):
    s = engine.service
    s.create_entities([EntityInput("b", "t", ("x",)), EntityInput("A", "t")])
    s.create_relations([RelationInput("A", "r", "b")])
    by_name = s.export_graph(order="name")
    assert [e.name for e in by_name.entities] == ["A", "b"] and triples(by_name.relations) == {("A", "r", "b")}
    assert [e.name for e in s.export_graph().entities] == ["b", "A"], "creation order"


def test_search_nodes_ranks_words_spread_over_name_and_observations(engine):
    s = engine.service
    s.create_entities([
        EntityInput("Project Falcon", "project", ("Uses PostgreSQL", "Deadline in March")),
        EntityInput("Falcon Heavy", "rocket", ("Built by SpaceX",)),
        EntityInput("Billing", "project", ("Moved to PostgreSQL in March",)),
        EntityInput("Unrelated", "note", ("nothing here",))])
    s.create_relations([RelationInput("Project Falcon", "feeds", "Billing")])
    found = s.search_nodes("FALCON postgresql March")
    names = [h.entity.name for h in found.hits]
    assert names[0] == "Project Falcon" and set(names) == {"Project Falcon", "Falcon Heavy", "Billing"}
    why = {h.entity.name: h.why for h in found.hits}
    assert why["Project Falcon"].startswith("all 3 words") and "2 of 3" in why["Billing"]
    assert triples(found.relations) == {("Project Falcon", "feeds", "Billing")}
    page = s.search_nodes("falcon", limit=1)
    assert len(page.hits) == 1 and page.is_truncated is True and page.total_count == 2
    rest = s.search_nodes("falcon", limit=1, offset=1)
    assert {h.entity.name for h in page.hits + rest.hits} == {"Project Falcon", "Falcon Heavy"}
    assert {h.entity.name for h in s.search_nodes("postgre").hits} == {"Project Falcon", "Billing"}, "a prefix"
    assert [h.entity.name for h in s.search_nodes("elated").hits] == ["Unrelated"], "a substring inside a word"
    assert s.search_nodes('"falcon" AND NEAR( *').hits[0].entity.name in {"Project Falcon", "Falcon Heavy"}
    assert s.search_nodes("zeppelin").hits == ()
    assert len(s.search_nodes("").hits) == 4, "an empty query lists the graph"


def test_search_nodes_finds_non_ascii_cjk_typos_and_prefixes(engine):
    s = engine.service
    s.create_entities([
        EntityInput("Jürgen", "person", ("Works at Größenwahn GmbH in München",)),
        EntityInput("北京办公室", "office", ("负责亚洲市场",)),
        EntityInput("trip", "note", ("東京の旅行計画。来月に行く。",)),
        EntityInput("Alice Chen", "person", ("Leads the data team",)),
        EntityInput("Bob Chen", "person")])
    for query in ["Größenwahn", "größenwahn", "munchen", "MÜNCHEN", "jurgen"]:
        assert [h.entity.name for h in s.search_nodes(query).hits] == ["Jürgen"], query
    assert [h.entity.name for h in s.search_nodes("北京").hits] == ["北京办公室"], "a substring of a name"
    assert [h.entity.name for h in s.search_nodes("亚洲").hits] == ["北京办公室"], "a substring of an observation"
    for query in ["東京", "旅行計画"]:
        assert [h.entity.name for h in s.search_nodes(query).hits] == ["trip"], query
    for query in ["alcie", "Aliec", "Ali", "alcie chen"]:
        assert s.search_nodes(query).hits[0].entity.name == "Alice Chen", query
    found = s.search_nodes("who leads the data team?")
    assert found.hits[0].entity.name == "Alice Chen" and found.hits[0].why.startswith("all 3 words")


def test_refused_calls_name_the_field_and_change_nothing(engine):
    s = engine.service
    s.create_entities([EntityInput("keep", "t", ("kept",))])
    before = s.export_graph()
    with pytest.raises(ValidationError, match=r"entities\[1\]\.name"):
        s.create_entities([EntityInput("fine", "t"), EntityInput("  ", "t")])
    with pytest.raises(ValidationError, match=r"entities\[0\]\.observations\[1\]"):
        s.create_entities([EntityInput("fine", "t", ("ok", ""))])
    with pytest.raises(ValidationError, match=r"relations\[0\]\.relationType"):
        s.create_relations([RelationInput("keep", "", "keep")])
    with pytest.raises(ValidationError, match=r"observations\[0\]\.contents\[0\]"):
        s.add_observations([ObservationBatch("keep", ("",))])
    assert s.export_graph() == before


def test_history_journals_each_change_once(engine):
    s = engine.service
    s.create_entities([EntityInput("A", "t", ("keep", "drop"))])
    s.create_entities([EntityInput("a", "t", ("keep",))])  # changes nothing: not journaled
    s.delete_observations([ObservationBatch("A", ("drop",))])
    s.delete_entities(["A"])
    entries = s.history()
    assert [e.action for e in entries] == ["delete_entities", "delete_observations", "create_entities"]
    assert entries[1].detail["removed"] == {"A": ["drop"]}
    assert entries[0].entities == ("A",)


def test_stats_count_what_the_library_holds(engine):
    s = engine.service
    s.create_entities([EntityInput("A", "t", ("one", "two")), EntityInput("B", "t")])
    s.create_relations([RelationInput("A", "r", "B")])
    s.store_memory("a free memory")
    stats = s.stats()
    assert (stats.kind, stats.entities, stats.observations, stats.memories, stats.relations) == (
        engine.name, 2, 2, 1, 1)
