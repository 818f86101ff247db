"""Documents (entities with Markdown bodies) on every engine: add, read by TOC and section, edit
by exact context, rename and merge with every link repaired."""

from __future__ import annotations

import re
import threading

import pytest

from memloci.core.errors import InvalidRelationError, MemlociError, NotFoundError, ValidationError
from memloci.core.model import EntityInput, ObservationBatch, RelationInput
from memloci.core.schema import STRICT
from memloci.service.documents import NewEntityDocument


def text_of(service, name: str) -> str:
    """The entity's document without its timestamps (which differ from run to run)."""
    (doc,) = service.read_entities([name])["entities"]
    return re.sub(r"(?m)^(created|modified): .*\n", "", doc["content"])


def test_add_read_toc_and_sections(engine):
    s = engine.service
    s.add_entities([
        NewEntityDocument("hub", "project", content="## Plan\nShip in May.\n\n## Risks\n- late\n"),
        NewEntityDocument("notes", content="See [[hub]] and [[Hub|the hub]].", relations=(("uses", "hub"),))])
    assert text_of(s, "hub") == "---\ntype: project\n---\n# hub\n\n## Plan\nShip in May.\n\n## Risks\n- late\n"
    assert text_of(s, "notes") == ("---\ntype: note\nrelations:\n  - {type: uses, to: hub}\n---\n# notes\n\n"
                                   "See [[hub]] and [[Hub|the hub]].\n")
    read = s.read_entities(["HUB", "nope"])
    assert [e["name"] for e in read["entities"]] == ["hub"] and read["missing"] == ["nope"]
    with pytest.raises(NotFoundError, match="none of nope exists"):
        s.read_entities(["nope"])
    (toc,) = s.get_entities_toc(["hub"])["entities"]
    assert [(h["heading"], h["level"]) for h in toc["toc"]] == [("frontmatter", 0), ("hub", 1), ("Plan", 2), ("Risks", 2)]
    (sections,) = s.read_entities_sections(["hub"], ["plan"])["entities"]
    assert sections["sections"] == [{"heading": "Plan", "level": 2, "content": "## Plan\nShip in May.\n\n"}]
    assert {(r.from_entity, r.relation_type, r.to_entity) for r in s.find_relations(to_entity="hub")} == {
        ("notes", "links_to", "hub"), ("notes", "uses", "hub")}, "a [[link]] in a body is a relation"
    assert [e.name for e in s.open_nodes(["hub"]).entities] == ["hub"]
    assert s.open_nodes(["hub"]).entities[0].body == "## Plan\nShip in May.\n\n## Risks\n- late\n"
    with pytest.raises(ValidationError, match="the same name twice"):
        s.add_entities([NewEntityDocument("x"), NewEntityDocument("X")])


def test_edits_by_exact_context_change_only_their_bytes(engine):
    s = engine.service
    s.create_entities([EntityInput("plan", "project", ("first fact",))])
    s.add_entity_content("plan", "Notes", "Ship in May.\nShip in May.")
    before = text_of(s, "plan")
    with pytest.raises(NotFoundError, match="old_content: not found"):
        s.replace_entity_content("plan", "Ship in June.", "x")
    with pytest.raises(ValidationError, match="old_content"):  # two matches: which one is meant is unclear
        s.replace_entity_content("plan", "Ship in May.", "x")
    assert text_of(s, "plan") == before, "a refused edit leaves the document as it was"
    assert s.replace_entity_content("plan", "May.\nShip in May.", "May.\nShip in June.") == {"entity": "plan",
                                                                                           "changed": True}
    assert text_of(s, "plan") == before.replace("May.\nShip in May.", "May.\nShip in June.")
    s.delete_entity_content("plan", "Ship in June.\n")
    s.replace_entity_section("plan", "Notes", "## Dates", "May, probably.")
    body = s.open_nodes(["plan"]).entities[0].body
    assert "## Dates\nMay, probably." in body and "## Notes" not in body and "June" not in body
    assert [o.content for o in s.open_nodes(["plan"]).entities[0].observations] == ["first fact"]
    s.add_observations([ObservationBatch("plan", ("second fact",))])
    assert "## Dates\nMay, probably." in s.open_nodes(["plan"]).entities[0].body, "an observation keeps the prose"


def test_rename_repairs_every_link_and_relation(engine):
    s = engine.service
    s.create_entities([EntityInput("api", "service"), EntityInput("db", "database", ("holds data",))])
    s.create_relations([RelationInput("api", "uses", "db")])
    s.add_entities([NewEntityDocument("notes", content="See [[db]] and [[DB|the store]].")])
    result = s.rename_entity("db", "Ärger-db")
    assert (result["old_name"], result["new_name"], sorted(result["links_rewritten_in"])) == (
        "db", "Ärger-db", ["api", "notes"])
    assert "See [[Ärger-db]] and [[Ärger-db|the store]]." in text_of(s, "notes")
    assert "{type: uses, to: Ärger-db}" in text_of(s, "api")
    s.rename_entity("ärger-DB", "storage")
    assert {(r.from_entity, r.relation_type, r.to_entity) for r in s.find_relations(to_entity="storage")} == {
        ("api", "uses", "storage"), ("notes", "links_to", "storage")}
    assert [o.content for o in s.open_nodes(["storage"]).entities[0].observations] == ["holds data"]
    assert s.open_nodes(["db"]).entities == () and s.search_nodes("storage").hits[0].entity.name == "storage"
    with pytest.raises(MemlociError, match="api"):  # the new name is taken
        s.rename_entity("storage", "API")
    with pytest.raises(NotFoundError):
        s.rename_entity("ghost", "spirit")


def test_merge_moves_observations_and_links_to_the_target(engine):
    s = engine.service
    s.create_entities([EntityInput("target", "note", ("kept",)), EntityInput("src", "note", ("moved", "kept"))])
    s.create_relations([RelationInput("src", "r", "target")])
    s.add_entities([NewEntityDocument("linker", content="About [[src]].")])
    s.merge_entities(["src"], "target")
    assert [o.content for o in s.open_nodes(["target"]).entities[0].observations] == ["kept", "moved"]
    assert "src" not in {e.name for e in s.export_graph().entities}
    assert [e.name for e in s.open_nodes(["src"]).entities] == ["target"], "the old name opens the target"
    assert "About [[target]]." in text_of(s, "linker")
    assert {(r.from_entity, r.to_entity) for r in s.find_relations(to_entity="target")} >= {("linker", "target")}


def test_links_wait_for_their_target_and_land_when_it_appears(engine):
    s = engine.service
    s.add_entities([NewEntityDocument("diary", content="Met [[Later]] and [[Anna]] today.\n")])
    assert s.find_relations(from_entity="diary") == [], "a link to a name no entity has is no relation yet"
    before = text_of(s, "diary")
    assert "relations:" not in before, "a body's link is not repeated in the front matter"
    s.create_entities([EntityInput("later", "person")])  # a graph write: the waiting link lands
    s.add_entities([NewEntityDocument("Anna Smith", "person", aliases=("Anna",))])  # reached through its alias
    assert {(r.from_entity, r.relation_type, r.to_entity) for r in s.find_relations(from_entity="diary")} == {
        ("diary", "links_to", "later"), ("diary", "links_to", "Anna Smith")}
    assert text_of(s, "diary") == before, "the note reads as it was written"
    assert [r.from_entity for r in s.find_relations(to_entity="anna smith", relation_type="links_to")] == ["diary"]
    assert s.find_relations(to_entity="later", relation_type="uses") == []
    with pytest.raises(NotFoundError, match="to_entity: entity 'ghost' does not exist"):
        s.find_relations(to_entity="ghost")
    assert [e["name"] for e in s.list_entities("ANNA*")] == ["Anna Smith"]
    assert [e["name"] for e in s.list_entities()] == ["Anna Smith", "diary", "later"]
    # an edit that drops the link drops its relation; one that adds a link to a missing name waits again
    s.replace_entity_content("diary", "Met [[Later]] and [[Anna]] today.", "Met [[Anna]]; [[Someone]] soon.")
    assert {r.to_entity for r in s.find_relations(from_entity="diary")} == {"Anna Smith"}
    s.create_entities([EntityInput("Someone", "person")])
    assert {r.to_entity for r in s.find_relations(from_entity="diary")} == {"Anna Smith", "Someone"}


def test_a_refused_document_changes_nothing(engine):
    s = engine.library(schema=STRICT)
    s.create_entities([EntityInput("a", "concept"), EntityInput("b", "concept")])
    s.create_relations([RelationInput("a", "uses", "b")])
    before = s.export_graph()
    with pytest.raises(InvalidRelationError, match="'ghost' does not exist"):
        s.add_entities([NewEntityDocument("c", "concept", relations=(("uses", "ghost"),))])
    with pytest.raises(InvalidRelationError, match=r"b -uses-> a would close a cycle \(b -> a -> b\)"):
        s.replace_entity_content("b", "type: concept\n", "type: concept\nrelations:\n  - {type: uses, to: a}\n")
    assert s.export_graph() == before


def test_the_library_manual(engine):
    s = engine.service
    assert s.read_manual() == {"content": "", "toc": [], "exists": False}
    s.add_manual_section("Conventions", "- names are kebab-case")
    manual = s.read_manual()
    assert manual["exists"] and manual["content"] == "# Library manual\n\n## Conventions\n\n- names are kebab-case\n"
    s.update_manual_section("Conventions", "kebab-case", "lower case")
    assert "- names are lower case" in s.read_manual()["content"]


def test_two_servers_editing_one_note_both_land(engine):
    """Each edit reads, changes and writes the note in one transaction: none is lost to the other server's."""
    spec = engine.spec_text()
    first, second = engine.open(spec), engine.open(spec)
    first.add_entities([NewEntityDocument("log", content="## Entries\n")])
    failures: list[Exception] = []

    def write(service, who: str) -> None:
        try:
            for i in range(6):
                service.add_entity_content("log", "Entries", f"- {who} {i}")
        except Exception as exc:
            failures.append(exc)

    threads = [threading.Thread(target=write, args=pair) for pair in ((first, "one"), (second, "two"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    body = second.open_nodes(["log"]).entities[0].body
    assert sorted(line for line in body.splitlines() if line.startswith("- ")) == sorted(
        f"- {who} {i}" for who in ("one", "two") for i in range(6))


def test_correct_observation_changes_that_observation_in_place_in_one_entry(engine):
    s = engine.service
    s.add_entities([NewEntityDocument("svc", "service", content="Runs nightly.\n\n## Notes\n- a note, not an observation\n")])
    s.add_observations([ObservationBatch("svc", ("runs on Tuesday", "two lines\nof text", "owned by ops"))])
    before = text_of(s, "svc")

    def observations() -> list[str]:
        return [o.content for o in s.open_nodes(["svc"]).entities[0].observations]

    done = s.correct_observation("svc", "runs on Tuesday", "runs on Wednesday\n- not a second one\n## Nor a heading")
    assert done["changed"] and done["change_id"] == s.history(limit=1)[0].id
    assert s.history(limit=1)[0].action == "correct_observation"
    assert observations() == ["runs on Wednesday\n- not a second one\n## Nor a heading", "two lines\nof text",
                              "owned by ops"]
    assert "## Notes\n- a note, not an observation\n" in text_of(s, "svc")
    second = s.correct_observation("svc", "two lines\nof text", "one line")  # a multi-line one is found
    assert observations()[1] == "one line"
    assert s.correct_observation("svc", "owned by ops", "owned by ops") == {"entity": "svc", "changed": False,
                                                                          "change_id": None}
    assert observations()[2] == "owned by ops"  # the same text: kept, nothing journaled
    with pytest.raises(NotFoundError, match="^old: "):
        s.correct_observation("svc", "a note, not an observation", "x")
    with pytest.raises(ValidationError, match="^new: .*already has"):
        s.correct_observation("svc", "one line", "owned by ops")
    with pytest.raises(ValidationError, match="^new: "):
        s.correct_observation("svc", "one line", "   ")
    with pytest.raises(NotFoundError, match="^entity_name: "):
        s.correct_observation("nobody", "one line", "x")
    s.undo(second["change_id"])
    s.undo(done["change_id"])
    assert text_of(s, "svc") == before
