"""The Markdown store in-process, on real folders: reconciliation of files and index, undo of
failed writes, names that are hard on file systems."""

from __future__ import annotations

import pytest

from memloci.app.registry import LibraryRegistry
from memloci.app.specs import LibrarySpec
from memloci.core.errors import ConflictError
from memloci.core.model import EntityInput, ObservationBatch, RelationInput
from memloci.service.documents import NewEntityDocument
from memloci.service.facade import MemoryService


@pytest.fixture
def md(tmp_path):
    folder = tmp_path / "lib"
    service = MemoryService(LibraryRegistry([LibrarySpec("lib", folder, "markdown")]))
    yield service, service.store("lib"), folder
    service.close()


def names(service) -> list[str]:
    return [e["name"] for e in service.list_entities("*")]


def test_a_failed_write_puts_every_file_back(md):
    service, store, folder = md
    service.create_entities([EntityInput("x", "note"), EntityInput("y", "note")])
    x_before = (folder / "x.md").read_bytes()
    y = folder / "y.md"
    y.write_text(y.read_text() + "\nEdited by hand, not yet scanned.\n")
    with pytest.raises(ConflictError):
        service.add_observations([ObservationBatch("x", ("one",)), ObservationBatch("y", ("two",))])
    assert (folder / "x.md").read_bytes() == x_before  # written, then restored
    assert "Edited by hand" in y.read_text()
    store.sync()
    assert service.open_nodes(["x"]).entities[0].observations == ()
    service.add_observations([ObservationBatch("x", ("one",)), ObservationBatch("y", ("two",))])
    assert "- two" in y.read_text() and "Edited by hand" in y.read_text()


def test_renaming_a_target_rewrites_front_matter_relations_elsewhere(md):
    service, store, folder = md
    service.create_entities([EntityInput("api", "service"), EntityInput("db", "database")])
    service.create_relations([RelationInput("api", "uses", "db")])
    service.rename_entity("db", "Ärger-db")
    assert "{type: uses, to: Ärger-db}" in (folder / "api.md").read_text()
    service.add_entities([NewEntityDocument("notes", content="See [[ärger-DB]] and [[api]].")])
    service.rename_entity("Ärger-db", "storage")
    assert "[[storage]]" in (folder / "notes.md").read_text()  # non-ASCII case folded too
    store.rebuild_index()
    assert {(r.from_entity, r.relation_type, r.to_entity) for r in service.find_relations(to_entity="storage")} == {
        ("api", "uses", "storage"), ("notes", "links_to", "storage")}


def test_a_title_changed_by_hand_replaces_the_entity(md):
    service, store, folder = md
    service.create_entities([EntityInput("old-title", "note", ("kept",))])
    path = folder / "old-title.md"
    path.write_text(path.read_text().replace("# old-title", "# new-title"))
    store.sync()
    assert names(service) == ["new-title"]
    assert service.open_nodes(["new-title"]).entities[0].observations[0].content == "kept"


def test_a_name_clash_between_files_resolves_when_one_goes(md):
    service, store, folder = md
    (folder / "a.md").write_text("# Same\n\nfrom a\n")
    (folder / "b.md").write_text("# Same\n\nfrom b\n")
    store.sync()
    assert names(service) == ["Same"] and list(store.problems()) == ["b.md"]
    (folder / "a.md").unlink()
    store.sync()
    assert names(service) == ["Same"] and store.problems() == {}
    assert "from b" in service.read_entities(["Same"])["entities"][0]["content"]


def test_rebuild_keeps_the_entity_of_a_file_that_cannot_be_parsed(md):
    service, store, folder = md
    service.create_entities([EntityInput("solid", "note", ("fact",)), EntityInput("other", "note")])
    service.create_relations([RelationInput("other", "knows", "solid")])
    (folder / "solid.md").write_text("---\ntype: [broken\n---\n# solid\n")
    store.sync()
    store.rebuild_index()
    assert names(service) == ["other", "solid"]
    assert "solid.md" in store.problems()
    with pytest.raises(ConflictError, match="cannot be parsed"):
        service.add_observations([ObservationBatch("solid", ("more",))])


def test_file_names_for_hard_names(md):
    service, store, folder = md
    long_name = "é" * 200
    service.create_entities([EntityInput(long_name, "note"), EntityInput("x/y", "note"), EntityInput("x:y", "note"),
                             EntityInput("..", "note")])
    files = sorted(p.name for p in folder.glob("*.md") if p.name != "journal.md")
    assert len(files) == 4 and all(len(f.encode()) < 200 for f in files)
    store.rebuild_index()
    assert sorted(names(service)) == sorted([long_name, "x/y", "x:y", ".."])


def test_free_memories_round_trip_through_day_files(md):
    service, store, folder = md
    tricky = "first line\n## 10:00:00Z · note\n<!-- memloci {\"x\": 1} -->"
    service.store_memory(tricky, tags=["has space", "ok"], importance="high", metadata={"k": 1})
    service.store_memory("plain one", tags=["ok"])
    day = next((folder / ".memloci" / "memories").glob("*.md"))
    day.write_text(day.read_text().replace("\n\n## ", "\n\nA line a person added.\n\n## ", 1))
    store.sync()
    store.rebuild_index()
    found = {m.content: m for m in service.search_by_tag(["ok"])}
    assert set(found) == {tricky, "plain one"}
    assert found[tricky].tags == ("has space", "ok") and found[tricky].importance == "high"
    memory, _ = service.store_memory("plain one")
    service.delete_memory(memory.content_hash)
    assert "A line a person added." in day.read_text() and "plain one" not in day.read_text()


def test_a_file_fixed_back_by_hand_is_indexed_again(md):
    service, store, folder = md
    service.create_entities([EntityInput("n", "note", ("one",))])
    path = folder / "n.md"
    original = path.read_bytes()
    path.write_text("---\ntype: [t\n---\n# n\n")
    store.sync()
    assert "n.md" in store.problems()
    path.write_bytes(original)  # an editor's undo: the very bytes that were indexed
    store.sync()
    assert store.problems() == {}
    service.add_observations([ObservationBatch("n", ("two",))])
    assert "- two" in path.read_text()


def test_links_in_observations_are_relations_at_once(md):
    service, store, folder = md
    service.create_entities([EntityInput("p1", "note", ("see [[p2]] and [[P3|three]]",)), EntityInput("p2", "note")])
    service.add_observations([ObservationBatch("p2", ("back to [[p1]]",))])
    live = {(r.from_entity, r.to_entity) for r in service.find_relations(relation_type="links_to")}
    assert live == {("p1", "p2"), ("p2", "p1")}
    service.create_entities([EntityInput("p3", "note")])
    live = {(r.from_entity, r.to_entity) for r in service.find_relations(relation_type="links_to")}
    store.rebuild_index()
    rebuilt = {(r.from_entity, r.to_entity) for r in service.find_relations(relation_type="links_to")}
    assert live == rebuilt == {("p1", "p2"), ("p2", "p1"), ("p1", "p3")}


def test_edits_stamp_modified_and_content_front_matter_is_used(md):
    service, store, folder = md
    service.add_entities([NewEntityDocument("doc", content="---\ntype: runbook\n---\n## Steps\n1. go\n")])
    text = (folder / "doc.md").read_text()
    assert "type: runbook" in text
    stamp = text.split("modified: ")[1].split("\n")[0]
    import time

    time.sleep(1.1)
    service.add_entity_content("doc", "Steps", "2. stop")
    assert (folder / "doc.md").read_text().split("modified: ")[1].split("\n")[0] > stamp


def test_no_file_is_made_beside_one_that_differs_only_in_case(md):
    """`todo.md` and `TODO.md` are one file on macOS and Windows (and after a clone onto them):
    a new entity's file takes its other name instead, and the person's file keeps its bytes."""
    service, store, folder = md
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "people").mkdir()
    mine = {"todo.md": b"# My List\n\n- buy milk\n", "people/anna.md": b"# Someone Else\n"}
    for rel, data in mine.items():
        (folder / rel).write_bytes(data)
    store.sync()
    service.create_entities([EntityInput("TODO", "list", ("ship it",)), EntityInput("Anna", "person")])
    for rel, data in mine.items():
        assert (folder / rel).read_bytes() == data
    made = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*.md") if ".memloci" not in p.parts)
    assert "TODO.md" not in made and len([m for m in made if m.casefold().startswith("todo")]) == 2, made
    assert len({m.casefold() for m in made}) == len(made), made
    assert [o.content for o in service.open_nodes(["TODO"]).entities[0].observations] == ["ship it"]
