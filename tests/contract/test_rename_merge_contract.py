"""rename_entity and merge_entities on every engine: every link repaired (bodies, observations,
front-matter values, relations), links waiting for the new name resolved, observations and
relations folded once each, the same errors, and the same journal entry.

The expected values are written once for all engines (rules/rename.py decides them), so an
engine that answers differently fails."""

from __future__ import annotations

import pytest

from memloci.core.errors import AlreadyExistsError, InvalidRelationError, NotFoundError, ValidationError
from memloci.core.model import EntityInput, ObservationBatch, RelationInput
from memloci.core.schema import LibrarySchema
from memloci.service.documents import NewEntityDocument

from .test_documents_contract import text_of


def triples(service, **where) -> set[tuple[str, str, str]]:
    return {(r.from_entity, r.relation_type, r.to_entity) for r in service.find_relations(**where)}


def observations(service, name: str) -> list[str]:
    return [o.content for o in service.open_nodes([name]).entities[0].observations]


def snapshot(service) -> tuple:
    """Everything a refused call must leave as it was: the graph, every document, the journal."""
    graph = service.export_graph()
    texts = {e.name: text_of(service, e.name) for e in graph.entities}
    return graph, texts, [(e.id, e.action) for e in service.history(limit=100)]


def test_rename_repairs_links_in_bodies_observations_front_matter_and_relations(engine):
    s = engine.service
    s.create_entities([EntityInput("api", "service"), EntityInput("db", "database", ("holds data",)),
                       EntityInput("ops", "team", ("backs up [[db]] nightly", "backs up [[Ärger DB]] nightly"))])
    s.create_relations([RelationInput("api", "uses", "db")])
    s.add_entities([
        NewEntityDocument("notes", content="See [[db]], [[DB#Schema|the store]], [[db|db]], [[dir/db.md]] and `[[db]]` in code.\n"),
        NewEntityDocument("owner", content='---\nsystem: "[[db]]"\nteam: ["[[ops]]", "[[DB|main db]]"]\n---\nOwns it.\n'),
        NewEntityDocument("bystander", content="Mentions [[dbx]] and db, not the entity.\n"),
    ])
    result = s.rename_entity("db", "Ärger DB")
    assert (result["old_name"], result["new_name"]) == ("db", "Ärger DB")
    assert sorted(result["links_rewritten_in"]) == ["api", "notes", "ops", "owner"]
    # Each link keeps its heading, its label and every other byte; a link in code stays as written.
    assert text_of(s, "notes").endswith(
        "See [[Ärger DB]], [[Ärger DB#Schema|the store]], [[Ärger DB|db]], [[dir/Ärger DB.md]] and `[[db]]` in code.\n")
    assert '\nsystem: "[[Ärger DB]]"\nteam: ["[[ops]]", "[[Ärger DB|main db]]"]\n---\n' in text_of(s, "owner")
    assert "{type: uses, to: Ärger DB}" in text_of(s, "api")
    assert text_of(s, "bystander").endswith("Mentions [[dbx]] and db, not the entity.\n")
    # An observation that now says what another one says is kept once.
    assert observations(s, "ops") == ["backs up [[Ärger DB]] nightly"]
    # (in a Markdown library an observation is a line of its file, so its link is a relation too)
    assert triples(s, to_entity="Ärger DB") - {("ops", "links_to", "Ärger DB")} == {
        ("api", "uses", "Ärger DB"), ("notes", "links_to", "Ärger DB"),
        ("owner", "system", "Ärger DB"), ("owner", "team", "Ärger DB")}
    # Observations' identity follows the new name: the same text is still recognised as held.
    added = s.add_observations([ObservationBatch("ärger db", ("holds data",)),
                                ObservationBatch("ops", ("backs up [[Ärger DB]] nightly",))])
    assert [list(a.added) for a in added] == [[], []]
    assert s.open_nodes(["db"]).entities == ()
    assert s.search_nodes("Ärger").hits[0].entity.name == "Ärger DB"
    (entry,) = [e for e in s.history(limit=20) if e.action == "rename_entity"]
    assert (entry.tool, list(entry.entities)) == ("rename_entity", ["db", "Ärger DB"])
    assert {k: entry.detail[k] for k in ("old_name", "new_name")} == {"old_name": "db", "new_name": "Ärger DB"}
    assert sorted(entry.detail["links_rewritten_in"]) == ["api", "notes", "ops", "owner"]


def test_rename_resolves_links_waiting_for_the_new_name(engine):
    s = engine.service
    s.create_entities([EntityInput("db", "database")])
    s.add_entities([NewEntityDocument("todo", content="Ask [[Storage]] about [[db]].\n")])
    assert triples(s, from_entity="todo") == {("todo", "links_to", "db")}
    s.rename_entity("DB", "storage")  # the old name in another case; the new one as the link spells it but lower
    assert triples(s, from_entity="todo") == {("todo", "links_to", "storage")}
    assert text_of(s, "todo").endswith("Ask [[Storage]] about [[storage]].\n"), "a waiting link's text is not touched"
    s.rename_entity("storage", "Storage")  # a new case of the same name is a rename too
    assert [e.name for e in s.open_nodes(["storage"]).entities] == ["Storage"]
    assert text_of(s, "todo").endswith("Ask [[Storage]] about [[Storage]].\n")


def test_rename_refuses_a_missing_or_taken_name_and_changes_nothing(engine):
    s = engine.service
    s.create_entities([EntityInput("api", "service"), EntityInput("db", "database", ("holds data",))])
    s.add_entities([NewEntityDocument("owner", content="---\nsystem: see [[db]]\n---\nUses [[db]].\n")])
    before = snapshot(s)
    with pytest.raises(NotFoundError, match="old_name: entity 'ghost' does not exist"):
        s.rename_entity("ghost", "spirit")
    with pytest.raises(AlreadyExistsError, match="new_name: 'api' is taken"):
        s.rename_entity("db", "API")
    # An unquoted front-matter value cannot hold `: ` without saying something else.
    with pytest.raises(ValidationError, match=r"system: the link \[\[db\]\] in this front-matter value"):
        s.rename_entity("db", "db: main")
    with pytest.raises(ValidationError, match="new_name"):
        s.rename_entity("db", "a [[b]]")
    assert snapshot(s) == before, "a refused rename leaves everything as it was"


def test_merge_folds_observations_relations_aliases_and_links(engine):
    s = engine.service
    s.create_entities([EntityInput("alice", "person", ("likes tea",)), EntityInput("bob", "person"),
                       EntityInput("al", "person", ("likes tea", "plays chess"))])
    s.add_entities([
        NewEntityDocument("alicia", "person", aliases=("Ally",), content="## Notes\nMet in Lyon.\n\n### Work\nACME.\n"),
        NewEntityDocument("notes", content="Met [[al|Al]] and [[Alicia#Notes]].\n"),
        NewEntityDocument("later", content="Ask [[Ally]].\n"),
    ])
    s.create_relations([RelationInput("al", "knows", "bob"), RelationInput("bob", "knows", "al"),
                        RelationInput("al", "knows", "alice"), RelationInput("alice", "knows", "bob"),
                        RelationInput("alicia", "mentors", "bob")])
    result = s.merge_entities(["al", "Alicia"], "Alice")
    # (not `later`: its link reaches alicia through an alias the target now holds; no byte of it changes)
    assert result == {"target": "alice", "merged": ["al", "alicia"], "aliases": ["al", "alicia", "Ally"],
                      "links_rewritten_in": ["bob", "notes"]}
    assert observations(s, "alice") == ["likes tea", "plays chess"], "one copy of a text the target holds"
    assert triples(s, from_entity="alice") | triples(s, to_entity="alice") == {
        ("alice", "knows", "bob"), ("bob", "knows", "alice"), ("alice", "mentors", "bob"),
        ("notes", "links_to", "alice"), ("later", "links_to", "alice")}, "no self-loop, no relation twice"
    assert text_of(s, "notes").endswith("Met [[alice|Al]] and [[alice#Notes]].\n")
    assert text_of(s, "later").endswith("Ask [[Ally]].\n"), "a link through an alias still reaches: the target holds it"
    body = s.open_nodes(["alice"]).entities[0].body
    assert body.endswith("\n---\n\n## Merged from al\n\n---\n\n## Merged from alicia\n\n### Notes\nMet in Lyon.\n\n"
                         "#### Work\nACME.\n")
    assert {e.name for e in s.export_graph().entities} == {"alice", "bob", "notes", "later"}
    assert [e.name for e in s.open_nodes(["al"]).entities] == ["alice"], "a source's name opens the target"
    added = s.add_observations([ObservationBatch("alice", ("plays chess",))])
    assert list(added[0].added) == [], "a moved observation is recognised as the target's"
    (entry,) = [e for e in s.history(limit=20) if e.action == "merge_entities"]
    assert (entry.tool, list(entry.entities)) == ("merge_entities", ["alice", "al", "alicia"])
    assert entry.detail["target"] == "alice" and entry.detail["links_rewritten_in"] == ["bob", "notes"]
    sources = {d["name"]: d for d in entry.detail["sources"]}
    assert sources["al"]["observations"] == ["likes tea", "plays chess"]
    assert [list(r) for r in sources["al"]["relations"]] == [["knows", "alice"], ["knows", "bob"]]
    assert (sources["alicia"]["entityType"], sources["alicia"]["aliases"]) == ("person", ["Ally"])
    assert sources["alicia"]["body"] == "## Notes\nMet in Lyon.\n\n### Work\nACME.\n"


def test_merge_refuses_and_changes_nothing(engine):
    s = engine.library(LibrarySchema(name="dag", acyclic=("*",)))
    s.create_entities([EntityInput(n, "node") for n in ("a", "b", "c")])
    s.create_relations([RelationInput("a", "next", "b"), RelationInput("c", "next", "a")])
    before = snapshot(s)
    with pytest.raises(ValidationError, match="source_names: the target cannot also be a source"):
        s.merge_entities(["a", "B"], "b")
    with pytest.raises(NotFoundError, match="not found: source_names: 'ghost', target_name: 'nobody'"):
        s.merge_entities(["a", "ghost"], "nobody")
    # b takes c's c -next-> a, and b already reaches... a -next-> b: b -> a -> b closes a cycle.
    with pytest.raises(InvalidRelationError, match=r"merging into 'b' would close a cycle \(b -> a -> b\)"):
        s.merge_entities(["c"], "b")
    assert snapshot(s) == before, "a refused merge leaves everything as it was"


# -- names with quotes: each front-matter value keeps its quoting, escaped as it needs ----------

QUOTED = ('---\nrelated: "[[Bob \\"The Builder\\"]]"\nsource: \'[[O\'\'Brien]]\'\n'
          'both: ["[[Bob \\"The Builder\\"|Bob]]", \'[[O\'\'Brien#Early]]\']\n---\n'
          'Met [[Bob "The Builder"|Bob]] and [[O\'Brien#Early life]].\n')


def test_rename_rewrites_links_whose_names_are_escaped_in_front_matter(engine):
    s = engine.service
    s.create_entities([EntityInput('Bob "The Builder"', "person"), EntityInput("O'Brien", "person")])
    s.add_entities([NewEntityDocument("notes", content=QUOTED)])
    before = text_of(s, "notes")
    first = s.rename_entity('Bob "The Builder"', 'Bob "Builder" O\'Neil')
    assert first["links_rewritten_in"] == ["notes"]
    second = s.rename_entity("O'Brien", 'Ed "O\'Brien"')
    assert second["links_rewritten_in"] == ["notes"]
    # Only the bytes of each link changed, each in its value's quoting: `\"` in double quotes, `''` in single.
    assert text_of(s, "notes") == before.replace(
        '"[[Bob \\"The Builder\\"]]"', '"[[Bob \\"Builder\\" O\'Neil]]"').replace(
        '"[[Bob \\"The Builder\\"|Bob]]"', '"[[Bob \\"Builder\\" O\'Neil|Bob]]"').replace(
        "'[[O''Brien]]'", "'[[Ed \"O''Brien\"]]'").replace(
        "'[[O''Brien#Early]]'", "'[[Ed \"O''Brien\"#Early]]'").replace(
        '[[Bob "The Builder"|Bob]] and', '[[Bob "Builder" O\'Neil|Bob]] and').replace(
        "[[O'Brien#Early life]]", "[[Ed \"O'Brien\"#Early life]]")
    assert triples(s, from_entity="notes") == {
        ("notes", "related", 'Bob "Builder" O\'Neil'), ("notes", "both", 'Bob "Builder" O\'Neil'),
        ("notes", "links_to", 'Bob "Builder" O\'Neil'), ("notes", "source", 'Ed "O\'Brien"'),
        ("notes", "both", 'Ed "O\'Brien"'), ("notes", "links_to", 'Ed "O\'Brien"')}
    # Undo puts the old bytes back exactly.
    for entry in [e for e in s.history(limit=20) if e.action == "rename_entity"]:  # newest first
        s.undo(entry.id)
    assert text_of(s, "notes") == before


def test_merge_rewrites_links_whose_names_are_escaped_in_front_matter(engine):
    s = engine.service
    s.create_entities([EntityInput('Bob "The Builder"', "person"), EntityInput("O'Brien", "person")])
    s.add_entities([NewEntityDocument("notes", content=QUOTED)])
    before = text_of(s, "notes")
    result = s.merge_entities(['Bob "The Builder"'], "O'Brien")
    assert result["links_rewritten_in"] == ["notes"]
    assert text_of(s, "notes") == before.replace(
        '"[[Bob \\"The Builder\\"]]"', '"[[O\'Brien]]"').replace(
        '"[[Bob \\"The Builder\\"|Bob]]"', '"[[O\'Brien|Bob]]"').replace(
        '[[Bob "The Builder"|Bob]] and', "[[O'Brien|Bob]] and")
    assert triples(s, from_entity="notes") == {("notes", "related", "O'Brien"), ("notes", "both", "O'Brien"),
                                               ("notes", "links_to", "O'Brien"), ("notes", "source", "O'Brien")}
    (entry,) = [e for e in s.history(limit=20) if e.action == "merge_entities"]
    s.undo(entry.id)
    assert text_of(s, "notes") == before


def test_a_rename_or_merge_a_value_cannot_hold_is_refused_whole(engine):
    s = engine.service
    s.create_entities([EntityInput("db", "database"), EntityInput("db: main", "database")])
    s.add_entities([NewEntityDocument("a", content='---\nsystem: "[[db]]"\n---\nUses [[db]].\n'),
                    NewEntityDocument("b", content="---\nnote: see [[db]] first\n---\n")])
    before = snapshot(s)
    with pytest.raises(ValidationError, match=r"^note: the link \[\[db\]\] in this front-matter value cannot be "
                                              r"rewritten as \[\[db: old\]\] .*\(in 'b'; nothing was changed\)$"):
        s.rename_entity("db", "db: old")
    with pytest.raises(ValidationError, match=r"^note: the link \[\[db\]\] in this front-matter value .*\(in 'b';"):
        s.merge_entities(["db"], "db: main")
    assert snapshot(s) == before, "nothing half-applied: not the quoted value, not the body"


PERSON = ('---\r\nrelated: "[[Bob \\"The Builder\\"]]"   # who built it\r\nsource: \'[[o\'\'brien]]\'\r\n'
          'relations:\r\n  - {type: knows, to: "Bob \\"The Builder\\""}\r\n---\r\n'
          '# notes\r\n\r\nMet [[Bob "The Builder"#Work|him]] and `[[Bob "The Builder"]]` in code.\r\n')


def test_a_markdown_file_a_person_wrote_changes_by_the_bytes_of_its_links(tmp_path):
    from memloci.app.registry import LibraryRegistry
    from memloci.app.specs import LibrarySpec
    from memloci.service.facade import MemoryService

    folder = tmp_path / "lib"
    folder.mkdir()
    (folder / "notes.md").write_bytes(PERSON.encode())
    s = MemoryService(LibraryRegistry([LibrarySpec("lib", folder, "markdown")]))
    try:
        s.create_entities([EntityInput('Bob "The Builder"', "person"), EntityInput("O'Brien", "person")])
        assert s.rename_entity('Bob "The Builder"', 'Bob "Builder" \\ Jr')["links_rewritten_in"] == ["notes"]
        assert s.rename_entity("O'Brien", "O'Neil")["links_rewritten_in"] == ["notes"]
        assert (folder / "notes.md").read_bytes() == PERSON.replace(
            '"[[Bob \\"The Builder\\"]]"', '"[[Bob \\"Builder\\" \\\\ Jr]]"').replace(
            "'[[o''brien]]'", "'[[O''Neil]]'").replace(
            'to: "Bob \\"The Builder\\""', 'to: "Bob \\"Builder\\" \\\\ Jr"').replace(
            '[[Bob "The Builder"#Work|him]]', '[[Bob "Builder" \\ Jr#Work|him]]').encode()
        for entry in [e for e in s.history(limit=20) if e.action == "rename_entity"]:  # newest first
            s.undo(entry.id)
        assert (folder / "notes.md").read_bytes() == PERSON.encode(), "undo puts back the person's bytes"
    finally:
        s.close()


def test_rename_lists_exactly_the_documents_whose_text_changed(engine):
    s = engine.service
    s.add_entities([NewEntityDocument("alicia", "person", aliases=("Ally",), content="Hi.\n"),
                    NewEntityDocument("later", content="Ask [[Ally]].\n"),
                    NewEntityDocument("boss", content="---\nmanages: '[[ally]]'\n---\n"),
                    NewEntityDocument("team", content="Lead.\n", relations=(("has", "alicia"),))])
    texts = {n: text_of(s, n) for n in ("later", "boss", "team")}
    result = s.rename_entity("alicia", "Alice")
    # `later` and `boss` reach her through an alias: a relation each, but not a byte changes
    assert result["links_rewritten_in"] == ["team"]
    assert {n: text_of(s, n) for n in ("later", "boss")} == {n: texts[n] for n in ("later", "boss")}
    assert text_of(s, "team") == texts["team"].replace("to: alicia}", "to: Alice}")
    assert triples(s, to_entity="Alice") == {("later", "links_to", "Alice"), ("boss", "manages", "Alice"),
                                             ("team", "has", "Alice")}


def test_a_markdown_relations_mapping_on_one_line_is_renamed_in_place(tmp_path):
    from memloci.app.registry import LibraryRegistry
    from memloci.app.specs import LibrarySpec
    from memloci.service.facade import MemoryService

    folder = tmp_path / "lib"
    folder.mkdir()
    note = b"---\nrelations: {knows: [bob, ann], bob: bob}  # by type\n---\nx\n"
    (folder / "x.md").write_bytes(note)
    s = MemoryService(LibraryRegistry([LibrarySpec("lib", folder, "markdown")]))
    try:
        s.create_entities([EntityInput("Bob", "person"), EntityInput("ann", "person")])
        assert s.rename_entity("Bob", "Rob's, Jr")["links_rewritten_in"] == ["x"]
        # (a relation type named like the entity is no link; the value takes the quoting it needs)
        assert (folder / "x.md").read_bytes() == note.replace(b"[bob,", b"['Rob''s, Jr',").replace(
            b"bob: bob}", b"bob: 'Rob''s, Jr'}")
        assert triples(s, from_entity="x") == {("x", "knows", "Rob's, Jr"), ("x", "knows", "ann"),
                                               ("x", "bob", "Rob's, Jr")}
    finally:
        s.close()


def test_a_markdown_merge_target_keeps_its_escaped_aliases_and_comments(tmp_path):
    from memloci.app.registry import LibraryRegistry
    from memloci.app.specs import LibrarySpec
    from memloci.service.facade import MemoryService

    folder = tmp_path / "lib"
    folder.mkdir()
    target = b'---\naliases: ["Bob \\"B\\", the builder", \'it\'\'s bob\']  # names, "quoted"\n---\n# bob\n\nBuilds.\n'
    (folder / "bob.md").write_bytes(target)
    s = MemoryService(LibraryRegistry([LibrarySpec("lib", folder, "markdown")]))
    try:
        s.create_entities([EntityInput("O'Brien", "person")])
        assert s.merge_entities(["O'Brien"], "bob")["aliases"] == ['Bob "B", the builder', "it's bob", "O'Brien"]
        text = (folder / "bob.md").read_bytes()
        assert text.startswith(b'---\naliases: ["Bob \\"B\\", the builder", \'it\'\'s bob\', O\'Brien]  # names, "quoted"\n'
                               b"---\n# bob\n\nBuilds.\n"), text
        s.undo(next(e for e in s.history() if e.action == "merge_entities").id)
        assert (folder / "bob.md").read_bytes() == target
    finally:
        s.close()
