"""garbage_collect_relations on every engine, as the multi-library Markdown server documents it:
links to entities that no longer exist are listed (a preview, the default, changing nothing),
then cleaned by executing that preview: a front-matter relations entry goes, a link in the body
turns into its plain text; one journal entry, which undo takes back to the byte; a preview the
library changed under is refused, naming what changed, with nothing changed.
"""

from __future__ import annotations

import pytest

from memloci.core.errors import ConflictError
from memloci.core.model import EntityInput, MemoryFilter
from memloci.service.documents import NewEntityDocument
from memloci.store.protocols import FolderLibrary

KIND = "garbage_collect_relations"


def texts(s) -> dict[str, str]:
    """Every entity's document as read_entities gives it."""
    names = [e["name"] for e in s.list_entities()]
    return {d["name"]: d["content"] for d in s.read_entities(names)["entities"]}


def files(s) -> dict[str, bytes]:
    """Every file of a Markdown library, byte for byte ({} for the other engines)."""
    store = s.stores.store()
    if not isinstance(store, FolderLibrary):
        return {}
    root = store.root
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*.md"))
            if ".memloci" not in p.relative_to(root).parts}


def seed(s) -> None:
    s.add_entities([
        NewEntityDocument("Gone", "person"),
        NewEntityDocument("Acme", "company"),
        NewEntityDocument("Alice", "person", relations=(("works_at", "Acme"),),
                          content="Met [[Gone]] and [[Acme]]; `[[Gone]]` is code; see [[Gone|the old one]].\n"),
        NewEntityDocument("Bob", "person", relations=(("likes", "Nobody"), ("knows", "Alice")),
                          content="Ask [[Nobody]] about ![[Gone#Plans]].\n"),
        NewEntityDocument("Carol", "person", content="Only [[Acme]] and [[Alice]] here.\n"),
    ])
    s.delete_entities(["Gone"])


def shown(items) -> list[tuple]:
    return [(i["action"], i["entity"], i["where"], i["text"].strip(), i.get("becomes")) for i in items]


EXPECTED = [
    ("unlink", "Alice", "body", "[[Gone]]", "Gone"),
    ("unlink", "Alice", "body", "[[Gone|the old one]]", "the old one"),
    ("remove", "Bob", "front matter relations", "- {type: likes, to: Nobody}", None),
    ("unlink", "Bob", "body", "[[Nobody]]", "Nobody"),
    ("unlink", "Bob", "body", "![[Gone#Plans]]", "Gone#Plans"),
]


def test_listed_executed_and_undone_to_the_byte(engine):
    s = engine.service
    seed(s)
    before, before_files = texts(s), files(s)
    assert bool(before_files) == (engine.name == "markdown")
    preview = s.lifecycle.garbage_collect_relations()  # dry_run is the default
    assert not preview.executed and preview.preview_id
    assert shown(preview.items) == EXPECTED
    lines = {(i["entity"], i["text"].strip()): i["line"] for i in preview.items}
    for (entity, text), line in lines.items():  # each line as read_entities shows the document
        assert text.lstrip("!") in before[entity].split("\n")[line - 1]
    assert preview.counts == {"changed": 2, "deleted": 0, "created": 0, "links_removed": 5}
    assert texts(s) == before and files(s) == before_files  # a preview changes nothing
    assert [p["kind"] for p in s.lifecycle.previews()] == [KIND]

    done = s.lifecycle.execute_preview(preview.preview_id)
    assert done.executed and done.change_id and shown(done.items) == EXPECTED
    after = texts(s)
    assert after["Carol"] == before["Carol"] and after["Acme"] == before["Acme"]  # nothing else touched
    assert "Met Gone and [[Acme]]; `[[Gone]]` is code; see the old one.\n" in after["Alice"]
    assert "Ask Nobody about Gone#Plans.\n" in after["Bob"]
    assert "Nobody" not in after["Bob"].split("---")[1] and "{type: knows, to: Alice}" in after["Bob"]
    assert {(r.from_entity, r.relation_type, r.to_entity) for r in s.find_relations(from_entity="Bob")} == {
        ("Bob", "knows", "Alice")}
    assert {r.to_entity for r in s.find_relations(from_entity="Alice")} == {"Acme"}
    entry = s.history(limit=1)[0]
    assert (entry.id, entry.action, set(entry.entities)) == (done.change_id, KIND, {"Alice", "Bob"})
    assert s.lifecycle.garbage_collect_relations().items == []  # nothing dangles any more

    s.undo(done.change_id)
    assert texts(s) == before and files(s) == before_files  # every byte back
    with pytest.raises(ConflictError, match="was executed"):
        s.lifecycle.execute_preview(preview.preview_id)


def test_executed_at_once_with_dry_run_false(engine):
    s = engine.service
    seed(s)
    done = s.lifecycle.garbage_collect_relations(dry_run=False)
    assert done.executed and done.change_id and shown(done.items) == EXPECTED
    assert s.lifecycle.garbage_collect_relations(dry_run=False).change_id is None  # nothing left: no entry
    assert [e.action for e in s.history(limit=2)] == [KIND, "delete_entities"]


def test_a_stale_preview_is_refused_with_nothing_changed(engine):
    s = engine.service
    seed(s)
    preview = s.lifecycle.garbage_collect_relations()
    s.replace_entity_content("Alice", "is code;", "is code, still;")
    before, before_files = texts(s), files(s)
    with pytest.raises(ConflictError, match="'Alice' was changed since the preview; nothing was changed"):
        s.lifecycle.execute_preview(preview.preview_id)
    assert texts(s) == before and files(s) == before_files

    again = s.lifecycle.garbage_collect_relations()
    s.create_entities([EntityInput("Nobody", "person")])  # a gone name came back: its links are no longer dangling
    before, before_files = texts(s), files(s)
    with pytest.raises(ConflictError, match="an entity 'Nobody' exists now"):
        s.lifecycle.execute_preview(again.preview_id)
    assert texts(s) == before and files(s) == before_files
    assert {i["target"] for i in s.lifecycle.garbage_collect_relations().items} == {"Gone"}


def test_an_entity_deleted_since_the_preview_refuses_it(engine):
    s = engine.service
    seed(s)
    preview = s.lifecycle.garbage_collect_relations()
    s.delete_entities(["Bob"])
    before = texts(s)
    with pytest.raises(ConflictError, match="'Bob' was deleted or renamed since the preview"):
        s.lifecycle.execute_preview(preview.preview_id)
    assert texts(s) == before


def test_an_observation_keeps_its_row_when_its_link_turns_into_text(engine):
    s = engine.service
    s.create_entities([EntityInput("Gone", "person"),
                       EntityInput("Ann", "person", ("Met [[Gone]] at the fair", "likes tea"))])
    s.delete_entities(["Gone"])

    def rows():
        memories, _ = s.list_memories(page_size=50, filters=MemoryFilter(entity="Ann"))
        return {m.id: (m.content, m.created_at) for m in memories}

    before, text = rows(), texts(s)["Ann"]
    preview = s.lifecycle.garbage_collect_relations()
    assert shown(preview.items) == [("unlink", "Ann", "body", "[[Gone]]", "Gone")]
    done = s.lifecycle.execute_preview(preview.preview_id)
    after = rows()
    assert set(after) == set(before)  # the same rows, each with its date
    assert {i: (c.replace("[[Gone]]", "Gone"), at) for i, (c, at) in before.items()} == after
    assert texts(s)["Ann"].index("Met Gone") < texts(s)["Ann"].index("likes tea")  # in its place
    s.undo(done.change_id)
    assert texts(s)["Ann"] == text and {c for c, _ in rows().values()} == {c for c, _ in before.values()}
