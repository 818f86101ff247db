"""An alias names its entity for every tool that takes an entity's name, writes included, on
every engine (service/names.py): the entity's own name wins over another entity's alias, an
alias several entities list is refused naming them all, and a write through an alias changes
that entity, never one called like the alias."""

from __future__ import annotations

import pytest

from memloci.core.errors import ValidationError
from memloci.core.model import EntityInput, MemoryFilter, ObservationBatch, RelationInput
from memloci.service.documents import NewEntityDocument


def _library(engine):
    s = engine.service
    s.add_entities([NewEntityDocument("Anna Smith", "person", aliases=("Anna", "Boss"), content="## Notes\nLikes tea.\n"),
                    NewEntityDocument("Bob", "person", aliases=("Bobby", "Boss")),
                    NewEntityDocument("Carol", "person", aliases=("Bob",))])  # Bob is a name: it wins
    return s


def _names(s) -> list[str]:
    return sorted(e.name for e in s.export_graph().entities)


def test_graph_writes_reach_the_entity_through_its_alias(engine):
    s = _library(engine)
    (added,) = s.add_observations([ObservationBatch("anna", ("Speaks Finnish",))])
    assert added.entity_name == "Anna Smith" and added.added == ("Speaks Finnish",)
    (opened,) = s.open_nodes(["Anna Smith"]).entities
    assert [o.content for o in opened.observations] == ["Speaks Finnish"]
    created, _ = s.create_relations([RelationInput("Anna", "knows", "Bobby")])
    assert [(r.from_entity, r.relation_type, r.to_entity) for r in created] == [("Anna Smith", "knows", "Bob")]
    created, _ = s.create_relations([RelationInput("Bob", "knows", "Anna")])  # Bob's own name beats Carol's alias
    assert [(r.from_entity, r.to_entity) for r in created] == [("Bob", "Anna Smith")]
    assert [(r.from_entity, r.to_entity) for r in s.delete_relations([RelationInput("ANNA", "knows", "bobby")])] == [
        ("Anna Smith", "Bob")]
    (removed,) = s.delete_observations([ObservationBatch("Anna", ("Speaks Finnish",))])
    assert removed.entity_name == "Anna Smith" and removed.removed == ("Speaks Finnish",)
    (merged,) = s.create_entities([EntityInput("ANNA", "person", ("Was born in Turku",))])
    assert (merged.name, merged.status, merged.observations) == ("Anna Smith", "merged", ("Was born in Turku",))
    assert _names(s) == ["Anna Smith", "Bob", "Carol"], "no entity is made under an alias"
    assert s.delete_entities(["Bobby"]) == ["Bob"]
    assert _names(s) == ["Anna Smith", "Carol"]


def test_an_alias_several_entities_list_is_refused_naming_them(engine):
    s = _library(engine)
    before = s.export_graph()
    calls = [
        lambda: s.add_observations([ObservationBatch("Anna", ("x",)), ObservationBatch("boss", ("y",))]),
        lambda: s.create_entities([EntityInput("Boss", "person", ("z",))]),
        lambda: s.delete_observations([ObservationBatch("Boss", ("Likes tea.",))]),
        lambda: s.create_relations([RelationInput("Anna", "reports_to", "Boss")]),
        lambda: s.delete_relations([RelationInput("Boss", "knows", "Anna")]),
        lambda: s.delete_entities(["Boss"]),
        lambda: s.store_memory("the boss said yes", entity="Boss"),
        lambda: s.retrieve_memory("yes", entity="Boss"),
        lambda: s.add_entity_content("Boss", "Notes", "More."),
        lambda: s.rename_entity("Boss", "Chief"),
        lambda: s.merge_entities(["Boss"], "Carol"),
        lambda: s.read_entities(["Boss"]),
        lambda: s.find_relations(from_entity="Boss"),
    ]
    for call in calls:
        with pytest.raises(ValidationError) as caught:
            call()
        assert "'boss' is an alias of 2 entities ('anna smith', 'bob')" in caught.value.message.lower()
        assert caught.value.details["candidates"] == ["Anna Smith", "Bob"]
    after = s.export_graph()
    assert (after.entities, after.relations) == (before.entities, before.relations), "nothing was changed"


def test_memories_and_documents_reach_the_entity_through_its_alias(engine):
    s = _library(engine)
    memory, created = s.store_memory("Anna prefers green tea", entity="anna")
    assert created and memory.entity == "Anna Smith"
    found = s.retrieve_memory("tea", entity="Anna")
    assert [h.memory.content for h in found.hits] == ["Anna prefers green tea"]
    listed, total = s.list_memories(filters=MemoryFilter(entity="ANNA"))
    assert total == 1 and listed[0].entity == "Anna Smith"
    assert s.add_entity_content("Anna", "Notes", "Drinks it at four.")["entity"] == "Anna Smith"
    assert "Drinks it at four." in s.read_entities(["Anna"])["entities"][0]["content"]
    assert s.read_entities(["Anna"])["entities"][0]["name"] == "Anna Smith"
    s.create_relations([RelationInput("Carol", "knows", "Anna")])
    assert [(r.from_entity, r.to_entity) for r in s.find_relations(to_entity="Anna")] == [("Carol", "Anna Smith")]
    renamed_from = s.rename_entity("Anna", "Anna Virtanen")
    assert (renamed_from["old_name"], renamed_from["new_name"]) == ("Anna Smith", "Anna Virtanen")
    assert _names(s) == ["Anna Virtanen", "Bob", "Carol"], "the rename moved the entity the alias named"
    (renamed,) = s.open_nodes(["Anna"]).entities
    assert renamed.name == "Anna Virtanen" and "Anna" in renamed.aliases
    s.merge_entities(["Bobby"], "Anna")
    assert _names(s) == ["Anna Virtanen", "Carol"], "merged into the entity the alias named, none made"
