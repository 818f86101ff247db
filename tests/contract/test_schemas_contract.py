"""Library schemas on every engine: the `strict` preset and a custom one. Unique names, unique
observations, typed relations, no self-relations, acyclic relations with the path in the error;
a refused call changes nothing. The messages are the ones the tools show (tests/test_schemas.py
checks them over MCP)."""

from __future__ import annotations

import pytest

from memloci.core.errors import AlreadyExistsError, InvalidRelationError, NotFoundError, ValidationError
from memloci.core.model import EntityInput, ObservationBatch, RelationInput
from memloci.core.schema import STRICT, schema_from_config


def triples(relations) -> set[tuple[str, str, str]]:
    return {(r.from_entity, r.relation_type, r.to_entity) for r in relations}


def test_strict_names_and_types(engine):
    s = engine.library(STRICT)
    s.create_entities([EntityInput("user-john", "person", ("prefers tea",)), EntityInput("python-project", "project")])
    before = s.export_graph()
    with pytest.raises(AlreadyExistsError) as caught:
        s.create_entities([EntityInput("fresh-name", "person"), EntityInput("user-john", "person")])
    assert caught.value.message == ("entities.name: 'user-john' already exists; schema 'strict' keeps names unique "
                                    "(nothing was created)")
    assert caught.value.details["existing"] == ["user-john"]
    with pytest.raises(AlreadyExistsError, match="'twice' already exists"):
        s.create_entities([EntityInput("twice", "person"), EntityInput("twice", "person")])
    for bad, words in [("User-John", "'User-John' does not match schema 'strict' rule [a-z][a-z0-9-]*"),
                       ("user_john", "'user_john' does not match"), ("a" * 101, "101 characters")]:
        with pytest.raises(ValidationError) as caught:
            s.create_entities([EntityInput("fine-name", "person"), EntityInput(bad, "person")])
        assert caught.value.message.startswith("entities[1].name: ") and words in caught.value.message
    with pytest.raises(ValidationError, match=r"entities\[0\]\.entityType: 'animal' is not an entity type of schema"):
        s.create_entities([EntityInput("rex", "animal")])
    with pytest.raises(ValidationError, match="501 characters; schema 'strict' allows at most 500"):
        s.create_entities([EntityInput("long-talker", "person", ("x" * 501,))])
    assert s.export_graph() == before, "all or none"


def test_strict_observations_are_unique(engine):
    s = engine.library(STRICT)
    s.create_entities([EntityInput("user-john", "person", ("prefers tea",)), EntityInput("acme", "organization")])
    with pytest.raises(ValidationError) as caught:
        s.add_observations([ObservationBatch("acme", ("new fact",)), ObservationBatch("user-john", ("prefers tea",))])
    assert caught.value.message == ("observations: 'prefers tea' is already an observation of 'user-john'; schema "
                                    "'strict' keeps observations unique per entity (nothing was added)")
    with pytest.raises(ValidationError, match="the same text twice"):
        s.add_observations([ObservationBatch("user-john", ("x", "x"))])
    with pytest.raises(ValidationError, match="given twice"):
        s.create_entities([EntityInput("jane", "person", ("y", "y"))])
    with pytest.raises(NotFoundError, match="nobody"):
        s.add_observations([ObservationBatch("nobody", ("x",))])
    with pytest.raises(ValidationError, match="already an observation of 'user-john'"):
        s.store_memory("prefers tea", entity="user-john")
    assert [o.content for o in s.open_nodes(["acme"]).entities[0].observations] == []
    (added,) = s.add_observations([ObservationBatch("user-john", ("runs on mondays",))])
    assert added.added == ("runs on mondays",)
    assert [o.content for o in s.open_nodes(["user-john"]).entities[0].observations] == ["prefers tea", "runs on mondays"]


def test_strict_relations_are_typed_and_acyclic_with_the_path_in_the_error(engine):
    s = engine.library(STRICT)
    s.create_entities([EntityInput(n, t) for n, t in [("user-john", "person"), ("python-project", "project"),
                                                     ("fastapi", "tool"), ("starlette", "tool")]])
    s.create_relations([RelationInput("python-project", "depends-on", "fastapi"),
                        RelationInput("fastapi", "depends-on", "starlette")])
    before = s.export_graph()
    with pytest.raises(InvalidRelationError, match=r"relations\[0\]\.relationType: 'likes' is not a relation type"):
        s.create_relations([RelationInput("user-john", "likes", "fastapi")])
    with pytest.raises(InvalidRelationError, match="'fastapi' cannot relate to itself"):
        s.create_relations([RelationInput("fastapi", "uses", "fastapi")])
    with pytest.raises(InvalidRelationError, match="'ghost' does not exist"):
        s.create_relations([RelationInput("user-john", "uses", "ghost")])
    with pytest.raises(InvalidRelationError) as caught:  # any type closes the cycle in strict: acyclic = all
        s.create_relations([RelationInput("user-john", "knows", "fastapi"),
                            RelationInput("starlette", "uses", "python-project")])
    assert caught.value.message == (
        "relations[1]: starlette -uses-> python-project would close a cycle (starlette -> python-project -> fastapi "
        "-> starlette); schema 'strict' keeps relations acyclic (nothing was created)")
    # a cycle closed only by two relations of one call is seen too
    s.create_entities([EntityInput("x-one", "concept"), EntityInput("x-two", "concept")])
    with pytest.raises(InvalidRelationError, match=r"relations\[1\]: x-two -contains-> x-one would close a cycle "
                                                   r"\(x-two -> x-one -> x-two\)"):
        s.create_relations([RelationInput("x-one", "contains", "x-two"), RelationInput("x-two", "contains", "x-one")])
    assert triples(s.export_graph().relations) == triples(before.relations), "nothing was created"
    s.delete_relations([RelationInput("fastapi", "depends-on", "starlette")])
    created, _ = s.create_relations([RelationInput("starlette", "uses", "python-project")])
    assert triples(created) == {("starlette", "uses", "python-project")}, "no cycle once the path is gone"


def test_a_custom_schema_checks_its_own_rules(engine):
    rules = schema_from_config({"entity_types": ["service", "team"], "acyclic": ["depends_on"]}, "schemas.custom")
    s = engine.library(rules)
    with pytest.raises(ValidationError) as caught:
        s.create_entities([EntityInput("Any Name", "person")])
    assert "'person' is not an entity type of schema 'custom'" in caught.value.message
    assert caught.value.hint == "Use one of: service, team."
    s.create_entities([EntityInput("Api", "service"), EntityInput("Db", "service"), EntityInput("Cache", "service")])
    s.create_relations([RelationInput("Api", "depends_on", "Db"), RelationInput("Db", "talks_to", "Api"),
                        RelationInput("Db", "depends_on", "Cache")])
    with pytest.raises(InvalidRelationError) as caught:
        s.create_relations([RelationInput("Cache", "depends_on", "Api")])
    assert caught.value.message == ("relations[0]: Cache -depends_on-> Api would close a cycle (Cache -> Api -> Db -> "
                                    "Cache); schema 'custom' keeps depends_on relations acyclic (nothing was created)")
    # other types may cycle, and names merge as in the default schema
    created, _ = s.create_relations([RelationInput("Cache", "talks_to", "Api")])
    assert len(created) == 1
    (merged,) = s.create_entities([EntityInput("api", "service", ("x",))])
    assert (merged.status, merged.name, merged.observations) == ("merged", "Api", ("x",))
