"""Undo on every engine: a destructive change keeps what it removed in its journal entry, `undo`
puts it back exactly (dates, use counts and all), refuses (changing nothing) when a later
change stands in the way and says which, and is itself journaled and undoable. Two services
on one library (two servers) undoing the same change at once: one wins, the other is refused.

Each undo is checked against a full dump of the library through the service: entities with
every field and their observations with dates, relations with theirs, free memories with
every field, the context.
"""

from __future__ import annotations

import json
import threading
import time

import pytest

from memloci.core.errors import ConflictError, NotFoundError, ValidationError
from memloci.core.model import EntityInput, ObservationBatch, RelationInput


def dump(s) -> dict:
    # (entities' updated_at is left out: a Markdown library's index takes it from the file's
    # `modified:`, which a relation added to the front matter moves and the index does not)
    graph = s.export_graph(order="name")
    memories, _ = s.list_memories(page_size=1000)
    return {
        "entities": sorted((e.name, e.entity_type, tuple(e.aliases), tuple(e.tags), e.created_at,
                            tuple((o.content, o.created_at) for o in e.observations)) for e in graph.entities),
        "relations": sorted((r.from_entity, r.relation_type, r.to_entity, r.created_at) for r in graph.relations),
        "memories": sorted((m.content, m.content_hash, m.tags, m.memory_type, m.importance,
                            json.dumps(m.metadata, sort_keys=True), m.created_at, m.updated_at, m.access_count,
                            m.last_accessed_at) for m in memories),
        "context": s.read_context(),
    }


def populate(s) -> None:
    s.create_entities([EntityInput("alpha", "project", ("uses FastAPI", "started 2024")),
                       EntityInput("beta", "person", ("likes tea",)),
                       EntityInput("gamma", "tool", ("fast",))])
    s.create_relations([RelationInput("beta", "works_on", "alpha"), RelationInput("alpha", "uses", "gamma")])
    s.store_memory("the deploy runs on Fridays", tags=["ops", "Deploy"], memory_type="fact",
                   metadata={"source": "chat", "n": 3}, importance="high")
    s.store_memory("lunch is at noon", tags=["social"])
    s.retrieve_memory("deploy")  # a use count and a last access, which undo keeps too
    counted(s, "the deploy runs on Fridays")
    s.update_context(active_task="ship the beta", next_steps=["tag"])


def counted(s, content: str) -> None:
    """Wait until the retrieval of `content` is counted (a background thread records uses)."""
    deadline = time.monotonic() + 30
    while not any(m.content == content and m.access_count for m in s.list_memories(page_size=100)[0]):
        assert time.monotonic() < deadline, "the retrieval was never counted"
        s.vectors.accesses.drain()
        time.sleep(0.05)


def last_change(s) -> int:
    return s.history(limit=1)[0].id


def _hash(s, content: str) -> str:
    return next(m.content_hash for m in s.list_memories(page_size=100)[0] if m.content == content)


CHANGES = {
    "delete_entities": lambda s: s.delete_entities(["alpha"]),
    "delete_observations": lambda s: s.delete_observations([ObservationBatch("alpha", ("uses FastAPI",))]),
    "delete_relations": lambda s: s.delete_relations([RelationInput("beta", "works_on", "alpha")]),
    "update_memory": lambda s: s.update_memory(_hash(s, "the deploy runs on Fridays"), content="the deploy runs daily",
                                               tags=["ops"], metadata={"n": 4}, importance="low"),
    "delete_memory": lambda s: s.delete_memory(_hash(s, "the deploy runs on Fridays")),
    "update_context": lambda s: s.update_context(active_task="fix the bug", status="blocked", reason="CI red"),
}


# Changes of notes with bodies: each undo gives the notes' text back too.
NOTE_CHANGES = {
    "document edit": lambda s: s.replace_entity_content("beta", "likes tea", "likes coffee"),
    "rename_entity": lambda s: s.rename_entity("alpha", "omega"),
    "merge_entities": lambda s: s.merge_entities(["gamma"], "alpha"),
}


@pytest.mark.parametrize("change", list(NOTE_CHANGES))
def test_undo_of_a_note_change_gives_back_every_note(engine, change):
    s = engine.service
    populate(s)
    before = dump(s), notes(s)
    NOTE_CHANGES[change](s)
    assert (dump(s), notes(s)) != before
    s.undo(last_change(s))
    assert (dump(s), notes(s)) == before


def notes(s) -> list[str]:
    """The text of every note (entity document), by name."""
    names = sorted(e.name for e in s.export_graph().entities)
    return [e["content"] for e in s.read_entities(names)["entities"]]


def test_a_manual_edit_is_undone(engine):
    s = engine.service
    s.add_manual_section("## Conventions", "Names are lowercase.")
    before = s.read_manual()["content"]
    s.delete_manual_section("## Conventions", "Names are lowercase.")
    assert "lowercase" not in s.read_manual()["content"]
    s.undo(last_change(s))
    assert s.read_manual()["content"] == before
    s.undo(last_change(s))
    assert "lowercase" not in s.read_manual()["content"]


@pytest.mark.parametrize("change", list(CHANGES))
def test_undo_puts_back_exactly_what_the_change_removed(engine, change):
    s = engine.service
    populate(s)
    before = dump(s)
    CHANGES[change](s)
    changed = dump(s)
    assert changed != before
    change_id = last_change(s)
    assert s.undo(change_id)["undid"] == change_id
    assert dump(s) == before
    entry = s.history(limit=1)[0]
    assert entry.action == "undo" and entry.detail["undid"] == change_id
    # the undo is a change like any other: undoing it makes the first change again
    s.undo(entry.id)
    assert dump(s) == changed
    s.undo(last_change(s))
    assert dump(s) == before


def test_the_journal_keeps_whole_rows_with_dates(engine):
    s = engine.service
    populate(s)
    alpha = s.open_nodes(["alpha"]).entities[0]
    s.delete_entities(["alpha"])
    kept = {e["name"]: e for e in s.history(limit=1)[0].detail["undo"]["entities"]}["alpha"]
    assert [(o["content"], o["created_at"]) for o in kept["observations"]] == [
        (o.content, o.created_at) for o in alpha.observations]
    assert (kept["entity_type"], kept["created_at"], kept["updated_at"]) == (alpha.entity_type, alpha.created_at,
                                                                            alpha.updated_at)
    assert sorted(r[:3] for r in kept["relations"]) == [["alpha", "uses", "gamma"], ["beta", "works_on", "alpha"]]


def test_a_later_change_blocks_the_undo_and_says_which(engine):
    s = engine.service
    populate(s)
    s.delete_observations([ObservationBatch("alpha", ("uses FastAPI",))])
    change_id = last_change(s)
    s.delete_observations([ObservationBatch("alpha", ("started 2024",))])
    later = last_change(s)
    state = dump(s)
    with pytest.raises(ConflictError) as err:
        s.undo(change_id)
    message = err.value.message
    assert f"change #{change_id} (delete_observations) cannot be undone" in message
    # (a Markdown library names the note's file: "alpha.md was changed since ...")
    (blocker,) = err.value.details["blocked_by"]
    assert "alpha" in blocker and blocker.endswith(f"was changed since by change #{later} (delete_observations)")
    assert blocker in message and message.endswith("nothing was changed") and dump(s) == state
    s.undo(later)  # newest first: then the older one goes back too
    s.undo(change_id)
    assert [o.content for o in s.open_nodes(["alpha"]).entities[0].observations] == ["uses FastAPI", "started 2024"]
    # an addition since stands in the way as well
    s.delete_observations([ObservationBatch("alpha", ("uses FastAPI",))])
    change_id = last_change(s)
    s.add_observations([ObservationBatch("alpha", ("now on Litestar",))])
    with pytest.raises(ConflictError, match=rf"alpha.* was changed since by change #{last_change(s)} \(add_observations\)"):
        s.undo(change_id)


def test_a_new_entity_or_memory_in_the_way_blocks_the_undo(engine):
    s = engine.service
    populate(s)
    s.delete_entities(["alpha"])
    deleted = last_change(s)
    s.create_entities([EntityInput("Alpha", "other", ("a new one",))])
    taken = last_change(s)
    s.delete_memory(_hash(s, "lunch is at noon"))
    forgotten = last_change(s)
    s.store_memory("lunch is at noon", tags=["again"])
    state = dump(s)
    # (a Markdown library names the note's file as well)
    with pytest.raises(ConflictError, match=rf"(?i)alpha.* by change #{taken} \(create_entities\).*; nothing was changed$"):
        s.undo(deleted)
    with pytest.raises(ConflictError, match=r"the memory [0-9a-f]{12} was stored again since|memories/[0-9-]{10}\.md was changed since"):
        s.undo(forgotten)
    assert dump(s) == state


def test_a_related_entity_deleted_since_blocks_the_undo(engine):
    if engine.name == "markdown":
        pytest.skip("a Markdown library puts the note's bytes back: its link to a deleted note waits for that note")
    s = engine.service
    populate(s)
    s.delete_entities(["alpha"])
    change_id = last_change(s)
    s.delete_entities(["gamma"])
    with pytest.raises(ConflictError, match="'gamma', related to 'alpha', no longer exists"):
        s.undo(change_id)


def test_a_context_changed_since_blocks_its_undo(engine):
    s = engine.service
    populate(s)
    s.update_context(status="blocked")
    change_id = last_change(s)
    s.update_context(status="completed")
    with pytest.raises(ConflictError, match=r"the library's context was changed since|context\.md was changed since"):
        s.undo(change_id)


def test_unknown_and_not_undoable_changes_are_refused(engine):
    s = engine.service
    populate(s)
    with pytest.raises(NotFoundError, match="id: the journal has no change #999"):
        s.undo(999)
    first = s.history(limit=50)[-1]
    assert first.action == "create_entities"
    with pytest.raises(ValidationError, match=rf"id: change #{first.id} \(create_entities\) removed nothing"):
        s.undo(first.id)
    with pytest.raises(ValidationError):
        s.undo("1")  # type: ignore[arg-type]


def test_another_server_s_change_blocks_the_undo_and_two_undos_at_once_make_one(engine):
    spec = engine.spec_text()
    one, two = engine.open(spec), engine.open(spec)
    populate(one)
    one.delete_entities(["gamma"])
    change_id = last_change(one)
    # the other server's later write stands in the way
    two.create_entities([EntityInput("gamma", "tool", ("slow",))])
    with pytest.raises(ConflictError, match=rf"gamma.* by change #{last_change(two)} \(create_entities\)"):
        one.undo(change_id)
    two.delete_entities(["gamma"])
    change_id = last_change(one)
    wins: list[str] = []
    refusals: list[str] = []

    def undo(service) -> None:
        try:
            service.undo(change_id)
            wins.append("undone")
        except ConflictError as exc:
            refusals.append(exc.message)

    threads = [threading.Thread(target=undo, args=(s,)) for s in (one, two)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wins) == 1 and len(refusals) == 1, (wins, refusals)
    assert "gamma" in refusals[0] and "(undo)" in refusals[0]
    gamma = two.open_nodes(["gamma"]).entities[0]
    assert [o.content for o in gamma.observations] == ["slow"]


def test_an_undone_delete_links_what_its_note_was_waiting_for(engine):
    """A note linking to a name that did not exist is deleted, that name is created, and the
    delete is undone: the note's waiting link becomes a relation, as on creating it now would."""
    from memloci.service.documents import NewEntityDocument

    s = engine.service
    s.add_entities([NewEntityDocument("plan", content="Ask [[Bob]] first.")])
    assert not s.export_graph().relations
    s.delete_entities(["plan"])
    deleted = last_change(s)
    s.create_entities([EntityInput("Bob", "person", ())])
    s.undo(deleted)
    assert [(r.from_entity, r.relation_type, r.to_entity) for r in s.export_graph().relations] == \
        [("plan", "links_to", "Bob")]


def test_every_change_of_a_free_memory_is_journaled_with_its_text_and_undone(engine):
    """A memory told again with more tags, stored, updated or deleted: each is a journal entry
    that names the memory's text, and undoing it gives the memory back as it was."""
    from memloci.service.history import memory_text

    s = engine.service
    populate(s)
    before = dump(s)
    s.store_memory("the deploy runs on Fridays", tags=["ops", "release"])  # the same memory, one tag more
    told_again = s.history(limit=1)[0]
    assert (told_again.action, told_again.detail["added_tags"]) == ("store_memory", ["release"])
    assert memory_text(told_again) == "the deploy runs on Fridays" and "undo" in told_again.detail
    assert next(m.tags for m in s.list_memories(page_size=100)[0]
                if m.content == "the deploy runs on Fridays") == ("ops", "Deploy", "release")
    s.undo(told_again.id)
    assert dump(s) == before
    s.store_memory("the deploy runs on Fridays", tags=["Ops"])  # nothing new: no change, no entry
    assert s.history(limit=1)[0].action == "undo" and dump(s) == before

    s.store_memory("a brand new memory about tea " + "x" * 80, tags=["t"])
    stored = s.history(limit=1)[0]
    assert memory_text(stored) == ("a brand new memory about tea " + "x" * 80)[:59] + "…"
    s.undo(stored.id)
    assert dump(s) == before
    s.undo(last_change(s))  # the undo of the store is undone: the memory is back
    assert "a brand new memory about tea" in json.dumps(dump(s)["memories"])

    s.update_memory(_hash(s, "lunch is at noon"), content="lunch is at one")
    assert memory_text(s.history(limit=1)[0]) == "lunch is at noon → lunch is at one"
    s.delete_memory(_hash(s, "lunch is at one"))
    assert memory_text(s.history(limit=1)[0]) == "lunch is at one"


def test_the_undo_of_a_change_of_a_free_memory_shows_the_texts_it_takes_away_and_puts_back(engine):
    """`memloci history` names the memory's text on an undo's row too: the texts the undo takes
    away, then those it puts back; an undo of an undo shows them the other way round."""
    from memloci.service.history import memory_text

    s = engine.service
    populate(s)

    def undone_last() -> str | None:
        s.undo(last_change(s))
        entry = s.history(limit=1)[0]
        assert entry.action == "undo"
        return memory_text(entry)

    s.store_memory("the deploy runs on Fridays", tags=["release"])  # told again, one tag more
    assert undone_last() == "the deploy runs on Fridays"
    s.store_memory("a brand new memory about tea", tags=["t"])
    assert undone_last() == "a brand new memory about tea"  # taken away
    assert undone_last() == "a brand new memory about tea"  # put back
    s.update_memory(_hash(s, "lunch is at noon"), content="lunch is at one")
    assert undone_last() == "lunch is at one → lunch is at noon"
    assert undone_last() == "lunch is at noon → lunch is at one"
    s.delete_memory(_hash(s, "lunch is at one"))
    assert undone_last() == "lunch is at one"  # put back
    assert _hash(s, "lunch is at one")
    assert undone_last() == "lunch is at one"  # deleted again
    assert "lunch is at one" not in json.dumps(dump(s)["memories"])


def test_an_observation_told_again_with_more_tags_is_undone_on_every_engine(engine):
    """The same observation stored again with a new tag: its undo takes the tag back (in a
    Markdown library the tags live in the index, not the note), and undoing that undo returns it."""
    s = engine.service
    s.create_entities([EntityInput("Anna", "person", ())])
    s.store_memory("likes tea", entity="Anna", tags=["a"])

    def tags() -> tuple[str, ...]:
        return next(m.tags for m in s.search_by_tag_page(["a"], limit=10, offset=0)[0] if m.content == "likes tea")

    s.store_memory("likes tea", entity="Anna", tags=["b"])
    assert tags() == ("a", "b")
    s.undo(s.history(limit=1)[0].id)
    assert tags() == ("a",)
    s.undo(last_change(s))
    assert tags() == ("a", "b")
