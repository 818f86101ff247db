"""Obsidian's conventions in a Markdown library (and the same documents in SQLite): aliases open
a note, front-matter and inline #tags are its tags, [[links]] in front-matter values are
relations typed by their key, and globs match paths. Reading never rewrites a file; deleting
or renaming such a relation changes exactly the bytes it is about."""

from __future__ import annotations

import shutil

import pytest
from conftest import run_session
from test_bytes_kept import VAULT, changed, check, files

from memloci.app.registry import LibraryRegistry
from memloci.app.specs import LibrarySpec
from memloci.core.errors import ValidationError
from memloci.core.model import RelationInput
from memloci.markdown.document import parse_document
from memloci.markdown.frontmatter import drop_link
from memloci.markdown.obsidian import inline_tags
from memloci.service.documents import NewEntityDocument
from memloci.service.facade import MemoryService


@pytest.fixture
def vault(tmp_path):
    folder = tmp_path / "vault"
    shutil.copytree(VAULT, folder, ignore=shutil.ignore_patterns(".gitattributes"))
    original = files(folder)
    service = MemoryService(LibraryRegistry([LibrarySpec("v", folder, "markdown")]))
    service.list_entities("*")
    yield service, folder, original
    service.close()


@pytest.fixture
def sqlite(tmp_path):
    service = MemoryService(LibraryRegistry([LibrarySpec("s", tmp_path / "s.db", "sqlite")]))
    yield service
    service.close()


def rels(service, **where) -> set[tuple[str, str, str]]:
    return {(r.from_entity, r.relation_type, r.to_entity) for r in service.find_relations(**where)}


# -- the rules, as pure functions ----------------------------------------------------------

def test_inline_tags_follow_obsidians_rules():
    body = ("Text #a and #b/c-d, not#x, `#code`, [[Note#Heading]] [[#Top]] https://x.org/#frag (#paren)\n"
            "# Heading\n## Two\n#1984 #y1984 #Café #A\n- an item #obs\n\n```\n#fenced\n```\n    #indented-is-prose-here\n")
    assert inline_tags(body) == ["a", "b/c-d", "y1984", "Café", "obs", "indented-is-prose-here"]


@pytest.mark.parametrize("value, tags", [
    ("tags: [a, '#b', c/d]", ["a", "b", "c/d"]),
    ("tags: '#a, b c'", ["a", "b", "c"]),
    ("tags: solo", ["solo"]),
    ("tags:\n  - '#x/y'\n  - X/Y", ["x/y"]),
])
def test_front_matter_tags_in_every_form(value, tags):
    assert parse_document(f"---\n{value}\n---\n# N\n", fallback_name="N").tags == tags


def test_links_in_front_matter_values_name_their_key():
    doc = parse_document('---\ncompany: "[[Globex]]"\npeople: ["[[Anna]]", "[[Bob|Bobby]]", plain]\n'
                         "up: '[[Projects/Apollo.md#Plan]]'\ntags: ['[[not-a-link-key]]']\nn: 3\n---\n# X\n",
                         fallback_name="X")
    assert doc.links == [("company", "Globex"), ("people", "Anna"), ("people", "Bob"), ("up", "Apollo")]
    assert doc.relations == []


def test_drop_link_removes_only_the_link():
    y = 'a: "[[X]]"  # note\nb: ["[[X|x]]", "[[Y]]"]\nc:\n  - "[[X#h]]"\n  - z\nd: "[[Y]]"\n'
    assert drop_link(y, "a", "x") == y.replace('a: "[[X]]"  # note\n', "")
    assert drop_link(y, "b", "X") == y.replace('["[[X|x]]", "[[Y]]"]', '["[[Y]]"]')
    assert drop_link(y, "c", "X") == y.replace('  - "[[X#h]]"\n', "")
    assert drop_link(y, "d", "X") == y  # not there: nothing to do
    with pytest.raises(ValidationError, match="^see: the link"):
        drop_link('see: "notes on [[X]] here"\n', "see", "X")


@pytest.mark.parametrize("y, key, target, out", [
    # A value on the line after its key: folded, plain, quoted, and a list item folded over lines.
    ("people: >\n  [[Anna]]\nx: 1\n", "people", "Anna", "x: 1\n"),
    ('more:\n  "[[Bob]]"\nx: 1\n', "more", "Bob", "x: 1\n"),
    ("up: |-\n  [[Bob]]\n\n# after\nx: 1\n", "up", "bob", "\n# after\nx: 1\n"),
    ("p:\n- >-\n  [[Anna]]\n- b\n", "p", "Anna", "p:\n- b\n"),
    # A person's comment lines stay when the item, or the whole key, goes.
    ('people:\n  # coworkers\n  - "[[Anna]]"\n  - "[[Bob]]"\nx: 1\n', "people", "Anna",
     'people:\n  # coworkers\n  - "[[Bob]]"\nx: 1\n'),
    ('people:\n  # coworkers\n  - "[[Anna]]"\n  # (left in May)\nx: 1\n', "people", "anna",
     "  # coworkers\n  # (left in May)\nx: 1\n"),
    ('people: ["[[Anna]]"]  # team\n  # more later\nx: 1\n', "people", "Anna", "  # more later\nx: 1\n"),
])
def test_drop_link_reads_every_layout_and_keeps_comments(y, key, target, out):
    assert drop_link(y, key, target) == out


def test_drop_link_refuses_what_it_cannot_remove_exactly():
    # A flow list over two lines: the link is there, but no edit of whole lines removes only it.
    with pytest.raises(ValidationError, match="^people: memloci could not remove the link"):
        drop_link('people: ["[[Anna]]",\n  "[[Bob]]"]\nx: 1\n', "people", "Anna")


# -- a real vault --------------------------------------------------------------------------

def test_aliases_open_the_note(vault):
    service, folder, original = vault
    assert [e.name for e in service.open_nodes(["acme"]).entities] == ["Acme Corp"]
    assert [e.name for e in service.open_nodes(["the TEAM", "Alice Martin"]).entities] == ["Team", "Alice Martin"]
    assert service.open_nodes(["nobody"]).entities == ()
    # A name wins over an alias; an alias two notes claim opens both, rather than a guess.
    service.add_entities([NewEntityDocument("Crew", content="A different crew.\n"),
                          NewEntityDocument("Staff", content="---\naliases: [Books]\n---\nStaff.\n")])
    assert [e.name for e in service.open_nodes(["crew"]).entities] == ["Crew"]
    assert sorted(e.name for e in service.open_nodes(["books"]).entities) == ["Reading list", "Staff"]
    service.delete_entities(["Crew", "Staff"])
    check(folder, original)


def test_tags_of_both_kinds_and_reading_rewrites_nothing(vault):
    service, folder, original = vault
    team = service.open_nodes(["Team"]).entities[0]
    assert list(team.tags) == ["people", "org/team", "meeting", "org/weekly"]
    reading = service.open_nodes(["Reading list"]).entities[0]
    assert list(reading.tags) == ["reading"]  # in front matter and in the body: once
    service.store("v").rebuild_index()
    assert list(service.open_nodes(["Team"]).entities[0].tags) == list(team.tags)
    check(folder, original)
    # Editing a note keeps its tags as they were spelled: `"#people, org/team"` stays a string.
    service.add_entity_content("Team", "Team", "Retro on Fridays #retro")
    expected = changed(original, Team=("either\n```\n", "either\n```\nRetro on Fridays #retro\n"))
    check(folder, expected)
    assert service.open_nodes(["Team"]).entities[0].tags[-1] == "retro"


def test_front_matter_links_are_relations(vault):
    service, folder, original = vault
    assert rels(service, from_entity="Team") == {
        ("Team", "lead", "Alice Martin"), ("Team", "members", "Weekly review"),
        ("Team", "members", "Reading list"), ("Team", "see", "Ideas"), ("Team", "links_to", "Ideas")}
    assert ("Alice Martin", "company", "Acme Corp") in rels(service, from_entity="Alice Martin")
    assert ("Apollo", "owner", "Alice Martin") in rels(service, from_entity="Apollo")
    assert ("Meeting notes", "attendees", "Alice Martin") in rels(service, from_entity="Meeting notes")
    service.store("v").rebuild_index()
    assert ("Team", "lead", "Alice Martin") in rels(service, to_entity="Alice Martin")
    check(folder, original)


def test_deleting_a_front_matter_relation_edits_its_value_and_undo_brings_it_back(vault):
    service, folder, original = vault
    service.delete_relations([RelationInput("Team", "members", "Reading list"),
                              RelationInput("Alice Martin", "company", "Acme Corp")])
    expected = changed(original, Team=("  - '[[Reading list#Books]]'\n", ""),
                       Alice_Martin=('company: "[[Acme Corp]]"\n', ""))
    check(folder, expected)
    assert ("Team", "members", "Reading list") not in rels(service, from_entity="Team")
    service.store("v").rebuild_index()  # the files and the index agree
    assert ("Team", "members", "Reading list") not in rels(service, from_entity="Team")
    assert ("Alice Martin", "company", "Acme Corp") not in rels(service, from_entity="Alice Martin")
    change = next(e for e in service.history(library="v") if e.action == "delete_relations")
    service.undo(change.id, library="v")
    check(folder, original)
    assert ("Team", "members", "Reading list") in rels(service, from_entity="Team")


LAYOUTS = (b'---\nowner: >\n  [[Alice Martin]]\nclient:\n  "[[Acme Corp]]"\nteam:\n  # coworkers\n'
           b'  - "[[Ideas]]"\n  - "[[Bob]]"\nx: 1\n---\nA note.\n')


def test_deleting_links_on_continuation_lines_edits_the_file(vault):
    """A deletion reported is a deletion made: the file loses the link, keeps its comments,
    a rebuilt index agrees, and undo brings back the exact bytes."""
    service, folder, original = vault
    (folder / "Layouts.md").write_bytes(LAYOUTS)
    service.store("v").sync()
    assert {("Layouts", "owner", "Alice Martin"), ("Layouts", "client", "Acme Corp"), ("Layouts", "team", "Ideas"),
            ("Layouts", "team", "Bob")} <= rels(service, from_entity="Layouts")
    service.delete_relations([RelationInput("Layouts", "owner", "Alice Martin"),
                              RelationInput("Layouts", "client", "Acme Corp"), RelationInput("Layouts", "team", "Ideas")])
    check(folder, {**original, "Layouts.md": b'---\nteam:\n  # coworkers\n  - "[[Bob]]"\nx: 1\n---\nA note.\n'})
    service.store("v").rebuild_index()
    assert rels(service, from_entity="Layouts") == {("Layouts", "team", "Bob")}
    service.delete_relations([RelationInput("Layouts", "team", "Bob")])
    check(folder, {**original, "Layouts.md": b"---\n  # coworkers\nx: 1\n---\nA note.\n"})
    for change in [e for e in service.history(library="v") if e.action == "delete_relations"]:
        service.undo(change.id, library="v")  # newest first
    check(folder, {**original, "Layouts.md": LAYOUTS})
    assert ("Layouts", "owner", "Alice Martin") in rels(service, from_entity="Layouts")


def test_a_link_that_cannot_be_removed_exactly_is_refused(vault):
    service, folder, original = vault
    note = b'---\nteam: ["[[Ideas]]",\n  "[[Bob]]"]\n---\nA note.\n'
    (folder / "Flow.md").write_bytes(note)
    service.store("v").sync()
    with pytest.raises(ValidationError, match="^team: "):
        service.delete_relations([RelationInput("Flow", "team", "Ideas")])
    check(folder, {**original, "Flow.md": note})
    assert ("Flow", "team", "Ideas") in rels(service, from_entity="Flow")


def test_a_rename_the_value_cannot_hold_is_refused(vault):
    """`see [[Ideas]]` cannot become `see [[Ideas: big]]`: unquoted, `: ` would start a mapping."""
    service, folder, original = vault
    note = b"---\nsource: '[[Ideas]]'\nsee: see [[Ideas]]\n---\nA note.\n"
    (folder / "Quoted.md").write_bytes(note)
    service.store("v").sync()
    with pytest.raises(ValidationError, match="^see: the link"):
        service.rename_entity("Ideas", "Ideas: big")
    check(folder, {**original, "Quoted.md": note})
    # a quote in single quotes is written twice, as YAML reads it
    service.rename_entity("Ideas", "Bob's ideas")
    assert files(folder)["Quoted.md"] == b"---\nsource: '[[Bob''s ideas]]'\nsee: see [[Bob's ideas]]\n---\nA note.\n"


def test_a_link_inside_text_is_refused_naming_its_key(vault):
    service, folder, original = vault
    with pytest.raises(ValidationError, match="see: the link"):
        service.delete_relations([RelationInput("Team", "see", "Ideas")])
    check(folder, original)
    assert ("Team", "see", "Ideas") in rels(service, from_entity="Team")


def test_renaming_a_target_repairs_the_link_in_the_value(vault):
    service, folder, original = vault
    service.rename_entity("Weekly review", "Weekly sync")
    expected = dict(original)
    expected["Weekly sync.md"] = expected.pop("Weekly review.md").replace(b"# Weekly review\n", b"# Weekly sync\n")
    expected["Team.md"] = expected["Team.md"].replace(b"[[Weekly review|review]]", b"[[Weekly sync|review]]")
    check(folder, expected)
    assert ("Team", "members", "Weekly sync") in rels(service, from_entity="Team")
    # Deleting another note leaves a value's link to it as it was written.
    service.delete_entities(["Ideas"])
    del expected["Ideas.md"]
    check(folder, expected)


def test_globs_match_paths_as_well_as_names(vault):
    service, folder, original = vault

    def names(glob):
        return sorted(e["name"] for e in service.list_entities(glob))

    assert names("Daily/*") == ["2026-11-01", "2026-11-02"]
    assert names("daily/2026-11-0?") == ["2026-11-01", "2026-11-02"]
    assert names("Projects/*") == names("Projects/**") == names("**/apollo.md") == ["Apollo"]
    assert names("Travel/") == ["Paris trip"]
    assert names("*.md") == names("*")
    assert names("Acme*") == ["Acme Corp"]  # names match as before
    assert names("*/*") == ["2026-11-01", "2026-11-02", "Apollo", "Paris trip"]


def test_globs_match_decomposed_file_names(vault):
    """A file name macOS wrote decomposed (e + U+0301) matches a glob typed composed, by name and by path."""
    service, folder, original = vault
    (folder / "Travel" / "Cafe\u0301 de Flore.md").write_bytes(b"Coffee.\n")
    service.store("v").sync()

    def names(glob):
        return [e["name"] for e in service.list_entities(glob)]

    assert names("Caf\u00e9 de*") == names("travel/caf\u00e9*") == names("**/CAF\u00c9 DE FLORE.md") == \
        ["Cafe\u0301 de Flore"]
    assert [e["path"] for e in service.list_entities("Travel/*")] == ["Travel/Cafe\u0301 de Flore.md",
                                                                     "Travel/Paris trip.md"]


def test_aliases_and_front_matter_links_over_stdio(tmp_path):
    """The same through the real server, as a client asks it."""
    folder = tmp_path / "vault"
    shutil.copytree(VAULT, folder, ignore=shutil.ignore_patterns(".gitattributes"))
    original = files(folder)

    async def body(c):
        opened, _ = await c.ok("open_nodes", names=["Crew"])
        assert [e["name"] for e in opened["entities"]] == ["Team"]
        assert {"from": "Team", "to": "Alice Martin", "relationType": "lead"} in [
            {k: r[k] for k in ("from", "to", "relationType")} for r in opened["relations"]]
        listed, _ = await c.ok("list_entities", entity_glob="Daily/*")
        assert sorted(e["name"] for e in listed["entities"]) == ["2026-11-01", "2026-11-02"]

    run_session(tmp_path / "home", body, "--libraries", f"v:{folder}")
    check(folder, original)


# -- the same documents in a SQLite library ------------------------------------------------

def test_sqlite_library_reads_and_edits_the_same_way(sqlite):
    service = sqlite
    service.add_entities([
        NewEntityDocument("Anna Smith", content="---\naliases: [Anna]\ntags: ['#person']\n---\nLikes #coffee.\n"),
        NewEntityDocument("Globex", content="A company."),
        NewEntityDocument("Bob", content='---\ncompany: "[[Globex]]"\npeople: ["[[Anna Smith]]", "[[Globex|G]]"]\n'
                                         "---\nHi\n"),
    ])
    anna = service.open_nodes(["anna"]).entities[0]
    assert anna.name == "Anna Smith" and list(anna.tags) == ["person", "coffee"]
    assert "tags: [person]\n" in service.read_entities(["Anna Smith"])["entities"][0]["content"]
    assert rels(service, from_entity="Bob") == {("Bob", "company", "Globex"), ("Bob", "people", "Anna Smith"),
                                                ("Bob", "people", "Globex")}
    service.delete_relations([RelationInput("Bob", "people", "Globex"), RelationInput("Bob", "company", "Globex")])
    text = service.read_entities(["Bob"])["entities"][0]["content"]
    assert 'people: ["[[Anna Smith]]"]\n' in text and "company" not in text
    change = next(e for e in service.history() if e.action == "delete_relations")
    service.undo(change.id)
    assert 'company: "[[Globex]]"\npeople: ["[[Anna Smith]]", "[[Globex|G]]"]\n' in \
        service.read_entities(["Bob"])["entities"][0]["content"]
    assert ("Bob", "company", "Globex") in rels(service, from_entity="Bob")
    service.delete_relations([RelationInput("Bob", "people", "Globex"), RelationInput("Bob", "company", "Globex")])
    service.rename_entity("Anna Smith", "Anna Jones")
    assert 'people: ["[[Anna Jones]]"]\n' in service.read_entities(["Bob"])["entities"][0]["content"]
    assert rels(service, from_entity="Bob") == {("Bob", "people", "Anna Jones")}


def test_links_written_to_an_alias_reach_the_entity(vault):
    service, folder, original = vault
    note = (b'---\nclient: "[[acme]]"\nrelations:\n  - {type: knows, to: Crew}\n---\n'
            b"See [[ACME Inc.]], [[books]] and [[Zed]].\n")
    (folder / "Note.md").write_bytes(note)
    service.store("v").sync()
    assert rels(service, from_entity="Note") == {
        ("Note", "client", "Acme Corp"), ("Note", "knows", "Team"), ("Note", "links_to", "Acme Corp"),
        ("Note", "links_to", "Reading list")}
    # A link waits for the alias as it waits for a name; the linking note is not written.
    service.add_entities([NewEntityDocument("Zed Person", content="---\naliases: [Zed]\n---\nZed.\n")])
    assert ("Note", "links_to", "Zed Person") in rels(service, from_entity="Note")
    # Writing the note changes only what the call is about: no relation is repeated in its front matter.
    service.create_relations([RelationInput("Note", "met", "Crew")])
    expected = {**original, "Note.md": note.replace(b"to: Crew}\n", b"to: Crew}\n  - {type: met, to: Team}\n")}
    check(folder, {**expected, "Zed Person.md": files(folder)["Zed Person.md"]})
    # Deleting the relation a value holds through an alias removes that value.
    service.delete_relations([RelationInput("Note", "client", "Acme Corp")])
    expected["Note.md"] = expected["Note.md"].replace(b'client: "[[acme]]"\n', b"")
    check(folder, {**expected, "Zed Person.md": files(folder)["Zed Person.md"]})
    service.store("v").rebuild_index()
    assert ("Note", "client", "Acme Corp") not in rels(service, from_entity="Note")
    assert {("Note", "met", "Team"), ("Note", "knows", "Team"), ("Note", "links_to", "Reading list"),
            ("Note", "links_to", "Zed Person")} <= rels(service, from_entity="Note")  # alias links, rebuilt


def test_sqlite_deletes_links_on_continuation_lines(sqlite):
    service = sqlite
    service.add_entities([NewEntityDocument(n, content="x") for n in ("Alice Martin", "Acme Corp", "Ideas", "Bob")] +
                         [NewEntityDocument("Layouts", content=LAYOUTS.decode())])
    before = service.read_entities(["Layouts"])["entities"][0]["content"]
    service.delete_relations([RelationInput("Layouts", "owner", "Alice Martin"),
                              RelationInput("Layouts", "client", "Acme Corp"), RelationInput("Layouts", "team", "Ideas")])
    text = service.read_entities(["Layouts"])["entities"][0]["content"]
    assert "owner" not in text and "client" not in text and '  # coworkers\n  - "[[Bob]]"\n' in text
    assert rels(service, from_entity="Layouts") == {("Layouts", "team", "Bob")}
    service.undo(next(e for e in service.history() if e.action == "delete_relations").id)
    assert service.read_entities(["Layouts"])["entities"][0]["content"] == before
    service.add_entities([NewEntityDocument("Quoted", content="---\nsource: see [[Ideas]]\n---\nA note.\n")])
    with pytest.raises(ValidationError, match="^source: the link"):
        service.rename_entity("Ideas", "Ideas: big")
    assert ("Quoted", "source", "Ideas") in rels(service, from_entity="Quoted")


def test_sqlite_links_to_an_alias(sqlite):
    service = sqlite
    service.add_entities([NewEntityDocument("Anna Smith", content="---\naliases: [Anna]\n---\nHi.\n"),
                          NewEntityDocument("Bob", content='---\nboss: "[[anna]]"\n---\nWorks with [[Anna]].\n')])
    assert rels(service, from_entity="Bob") == {("Bob", "boss", "Anna Smith"), ("Bob", "links_to", "Anna Smith")}
    assert "relations" not in service.read_entities(["Bob"])["entities"][0]["content"]
    created, _ = service.create_relations([RelationInput("anna", "knows", "Bob")])
    assert [(r.from_entity, r.to_entity) for r in created] == [("Anna Smith", "Bob")]
    service.delete_relations([RelationInput("Bob", "boss", "Anna")])
    assert "boss" not in service.read_entities(["Bob"])["entities"][0]["content"]


@pytest.mark.parametrize("kind", ["sqlite", "markdown"])
def test_observations_tags_are_the_entitys_tags(tmp_path, kind):
    from memloci.core.model import ObservationBatch
    path = tmp_path / ("lib.db" if kind == "sqlite" else "vault")
    service = MemoryService(LibraryRegistry([LibrarySpec("l", path, kind)]))
    try:
        service.add_entities([NewEntityDocument("API", content="---\ntags: [python]\n---\nThe service.\n")])
        service.add_observations([ObservationBatch("API", ("Uses FastAPI for the HTTP layer #backend",))])
        assert service.open_nodes(["API"]).entities[0].tags == ("python", "backend")
        text = service.read_entities(["API"])["entities"][0]["content"]
        assert "tags: [python]\n" in text  # the front matter keeps its own tags only
        from memloci.search.lexical import content_hash
        service.update_memory(content_hash("Uses FastAPI for the HTTP layer #backend", "API"),
                              content="Uses FastAPI for the HTTP layer #api")
        assert service.open_nodes(["API"]).entities[0].tags == ("python", "api")
        service.delete_observations([ObservationBatch("API", ("Uses FastAPI for the HTTP layer #api",))])
        assert service.open_nodes(["API"]).entities[0].tags == ("python",)
    finally:
        service.close()
