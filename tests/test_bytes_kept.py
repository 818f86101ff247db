"""A person's bytes are kept: tool calls on a copy of tests/golden_vault (notes written the way
people write them) change exactly the bytes they are about. After every call EVERY file of
the vault is compared byte for byte with the original plus the expected change."""

from __future__ import annotations

import re
import shutil
import unicodedata
from pathlib import Path

import pytest
from conftest import run_session

from memloci.app.registry import LibraryRegistry
from memloci.app.specs import LibrarySpec
from memloci.core.model import ObservationBatch, RelationInput
from memloci.search.lexical import content_hash
from memloci.service.facade import MemoryService

VAULT = Path(__file__).parent / "golden_vault"
DATE = re.compile(rb"<!-- \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ -->")


def files(folder: Path) -> dict[str, bytes]:
    """Every file a person sees: all but memloci's own `.memloci/` and the journal it appends."""
    out = {}
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder).as_posix()
        if path.is_file() and not rel.startswith(".memloci/") and rel != "journal.md":
            out[rel] = path.read_bytes()
    return out


@pytest.fixture
def vault(tmp_path):
    folder = tmp_path / "vault"
    shutil.copytree(VAULT, folder, ignore=shutil.ignore_patterns(".gitattributes"))
    original = files(folder)
    service = MemoryService(LibraryRegistry([LibrarySpec("v", folder, "markdown")]))
    service.list_entities("*")  # mounts and indexes the vault
    yield service, folder, original
    service.close()


def check(folder: Path, expected: dict[str, bytes]) -> None:
    """Every file exactly as expected; memloci's dates (unknowable in advance) read as DATE."""
    actual = {rel: DATE.sub(b"<!-- DATE -->", data) for rel, data in files(folder).items()}
    assert sorted(actual) == sorted(expected)
    for rel in expected:
        assert actual[rel] == expected[rel], rel


def changed(original: dict[str, bytes], **edits: tuple[str, str]) -> dict[str, bytes]:
    """The original with each named file's one substring replaced (file names with / as __)."""
    out = dict(original)
    for key, (old, new) in edits.items():
        rel = key.replace("__", "/").replace("_", " ") + ".md"
        assert out[rel].count(old.encode()) == 1, (rel, old)
        out[rel] = out[rel].replace(old.encode(), new.encode())
    return out


def test_mounting_a_vault_changes_and_adds_nothing(vault):
    service, folder, original = vault
    check(folder, original)
    assert not (folder / ".gitattributes").exists() and not (folder / "journal.md").exists()
    names = {e["name"] for e in service.list_entities("*")}
    assert {"Acme Corp", "Alice Martin", "Apollo", "2026-11-01", "Café", "Empty"} <= names


def test_rename_changes_only_the_link_text(vault):
    service, folder, original = vault
    result = service.rename_entity("Acme Corp", "Acme Inc")
    expected = dict(original)
    expected["Acme Inc.md"] = expected.pop("Acme Corp.md").replace(b"# Acme Corp\n", b"# Acme Inc\n")
    everywhere = ["Alice Martin.md", "Projects/Apollo.md", "Daily/2026-11-01.md", "Meeting notes.md", "BOM note.md",
                  "No newline.md", "Template.md", "Travel/Paris trip.md"]
    for rel in everywhere:
        expected[rel] = expected[rel].replace(b"[[Acme Corp", b"[[Acme Inc")
    expected["Daily/2026-11-02.md"] = expected["Daily/2026-11-02.md"].replace(b"[[acme corp]]", b"[[Acme Inc]]")
    expected["Reading list.md"] = expected["Reading list.md"].replace(b"to: Acme Corp", b"to: Acme Inc")
    expected["Bob.md"] = expected["Bob.md"].replace(b'to: "Acme Corp"', b'to: "Acme Inc"')
    expected["Supplier map.md"] = expected["Supplier map.md"].replace(b"[Acme Corp,", b"[Acme Inc,")
    expected["Code sample.md"] = expected["Code sample.md"].replace(b"but [[Acme Corp]]", b"but [[Acme Inc]]")
    check(folder, expected)
    assert {"Alice Martin", "Apollo", "Template", "Paris trip"} <= set(result["links_rewritten_in"])
    # The index agrees with the files: a rebuild finds the same graph.
    before = {(r.from_entity, r.relation_type, r.to_entity) for r in service.find_relations(to_entity="Acme Inc")}
    service.store("v").rebuild_index()
    after = {(r.from_entity, r.relation_type, r.to_entity) for r in service.find_relations(to_entity="Acme Inc")}
    assert before == after and ("Bob", "works_at", "Acme Inc") in after
    check(folder, expected)


def test_a_note_named_by_its_file_is_only_moved(vault):
    service, folder, original = vault
    service.rename_entity("Inbox", "Inbox 2026")
    service.rename_entity("2026-11-01", "2026-11-01 Monday")
    expected = dict(original)
    expected["Inbox 2026.md"] = expected.pop("Inbox.md")
    expected["Daily/2026-11-01 Monday.md"] = expected.pop("Daily/2026-11-01.md")
    check(folder, expected)


def test_observations_are_added_and_removed_as_lines(vault):
    service, folder, original = vault
    service.add_observations([ObservationBatch("Kitchen", ("dishwasher leaks",)),
                              ObservationBatch("No newline", ("linked from the inbox",)),
                              ObservationBatch("Meeting notes", ("quote sent",))])
    # Kitchen lists one line twice (a person's slip): both stay, the new line goes after them.
    expected = dict(original)
    expected["Kitchen.md"] += b"- dishwasher leaks <!-- DATE -->\n"
    expected["No newline.md"] += b"\n\n## Observations\n- linked from the inbox <!-- DATE -->"
    expected["Meeting notes.md"] += b"\r\n## Observations\r\n- quote sent <!-- DATE -->\r\n"
    check(folder, expected)
    service.delete_observations([ObservationBatch("Inbox", ("coffee machine fixed",)),
                                 ObservationBatch("Kitchen", ("dishwasher leaks",))])
    expected["Inbox.md"] = expected["Inbox.md"].replace(b"- coffee machine fixed\n", b"")
    expected["Kitchen.md"] = original["Kitchen.md"]
    check(folder, expected)
    # An edited observation keeps its place in the list.
    service.update_memory(content_hash("the printer jams on Mondays", "Inbox"), content="the printer jams on Tuesdays")
    expected["Inbox.md"] = expected["Inbox.md"].replace(
        b"- the printer jams on Mondays\n", b"- the printer jams on Tuesdays <!-- DATE -->\n")
    check(folder, expected)
    # The date memloci wrote is read back as the observation's date; a person's line has none.
    kitchen = service.open_nodes(["Meeting notes"]).entities[0]
    written = DATE.search((folder / "Meeting notes.md").read_bytes()).group()[5:-4].decode()
    assert [o.created_at for o in kitchen.observations if o.content == "quote sent"] == [written]


def test_relations_edit_front_matter_in_its_own_style(vault):
    service, folder, original = vault
    service.create_relations([RelationInput("Bob", "knows", "Alice Martin"),
                              RelationInput("Weekly review", "covers", "Apollo"),
                              RelationInput("Inbox", "mentions", "Kitchen"),
                              RelationInput("Reading list", "recommended_by", "Alice Martin")])
    expected = changed(
        original,
        Bob=('"Acme Corp"}]', '"Acme Corp"}, {type: knows, to: Alice Martin}]'),
        Weekly_review=("tags: [review]\n", "tags: [review]\nrelations:\n  - {type: covers, to: Apollo}\n"),
        Reading_list=("    to: Acme Corp\n", "    to: Acme Corp\n  - type: recommended_by\n    to: Alice Martin\n"),
    )
    expected["Inbox.md"] = b"---\nrelations:\n  - {type: mentions, to: Kitchen}\n---\n" + original["Inbox.md"]
    check(folder, expected)
    service.delete_relations([RelationInput("Reading list", "inspired_by", "Acme Corp"),
                              RelationInput("Bob", "knows", "Alice Martin")])
    expected["Reading list.md"] = expected["Reading list.md"].replace(b"  - type: inspired_by\n    to: Acme Corp\n", b"")
    expected["Bob.md"] = original["Bob.md"]
    check(folder, expected)


def test_document_edits_touch_only_their_section(vault):
    service, folder, original = vault
    service.add_entity_content("Meeting notes", "Actions", "- call back")
    service.replace_entity_section("Acme Corp", "History", "History", "Founded in 1998, in Lyon.")
    service.delete_entity_content("Alice Martin", "- phone: +33 1 23 45 67 89\n")
    expected = changed(original, Meeting_notes=("- send quote\r\n", "- send quote\r\n- call back\r\n"),
                       Acme_Corp=("Founded in 1999 in Lyon.", "Founded in 1998, in Lyon."))
    expected["Alice Martin.md"] = original["Alice Martin.md"].replace(b"\n- phone: +33 1 23 45 67 89\n", b"")
    check(folder, expected)
    service.add_entity_content("BOM note", "Later", "Read again.")
    expected["BOM note.md"] += b"\n## Later\n\nRead again.\n"
    check(folder, expected)
    # A person's own `modified:` is theirs: memloci stamps only files it created.
    service.add_observations([ObservationBatch("Weekly review", ("short week",))])
    expected["Weekly review.md"] += b"\n## Observations\n- short week <!-- DATE -->\n"
    check(folder, expected)


def test_merge_appends_and_deletes_nothing_else(vault):
    service, folder, original = vault
    service.merge_entities(["Bob"], "Alice Martin")
    expected = dict(original)
    del expected["Bob.md"]
    expected["Alice Martin.md"] = original["Alice Martin.md"].replace(
        b"tags: [person, contact]\n",
        b"tags: [person, contact]\naliases: [Bob]\nrelations:\n  - {type: works_at, to: Acme Corp}\n",
    ) + b"\n---\n\n## Merged from Bob\n"
    check(folder, expected)


def test_delete_entities_removes_one_file(vault):
    service, folder, original = vault
    service.delete_entities(["Empty", "Ideas"])
    expected = dict(original)
    del expected["Empty.md"], expected["Ideas.md"]
    check(folder, expected)


def test_decomposed_file_names_answer_to_composed_names(vault):
    service, folder, original = vault
    nfd = unicodedata.normalize("NFD", "résumé")
    (folder / f"{nfd}.md").write_bytes(b"Worked for [[Acme Corp]].\n")
    service.store("v").sync()
    nfc = unicodedata.normalize("NFC", "résumé")
    assert [e.name for e in service.open_nodes([nfc]).entities] == [nfd]
    service.add_observations([ObservationBatch(nfc.upper(), ("fluent in Spanish",))])
    assert (folder / f"{nfd}.md").read_bytes().startswith(b"Worked for [[Acme Corp]].\n\n## Observations\n- fluent")
    service.delete_entities([nfc])
    assert not (folder / f"{nfd}.md").exists() and service.open_nodes([nfc]).entities == ()
    check(folder, original)


def test_a_rename_over_stdio_keeps_the_vault(tmp_path):
    """The same promise through the real server, as a client would ask it."""
    folder = tmp_path / "vault"
    shutil.copytree(VAULT, folder, ignore=shutil.ignore_patterns(".gitattributes"))
    original = files(folder)

    async def body(c):
        await c.ok("rename_entity", old_name="Kitchen", new_name="Küche")

    run_session(tmp_path / "home", body, "--libraries", f"v:{folder}")
    expected = dict(original)
    expected["Küche.md"] = expected.pop("Kitchen.md").replace(b"# Kitchen\n", "# Küche\n".encode())
    expected["Daily/2026-11-01.md"] = expected["Daily/2026-11-01.md"].replace(b"[[Kitchen]]", "[[Küche]]".encode())
    expected["Supplier map.md"] = expected["Supplier map.md"].replace(b"Kitchen]", "Küche]".encode())
    check(folder, expected)


def test_content_with_its_own_front_matter_and_title(vault):
    service, folder, original = vault
    from memloci.service.documents import NewEntityDocument

    service.add_entities([NewEntityDocument("spec-42", content="---\nstatus: draft\ntags:\n  - spec\n---\n"
                                                               "# The shelving spec\n\nText.\n")])
    text = (folder / "spec-42.md").read_text()
    head, body = text.split("\n---\n", 1)
    assert "status: draft" in head and "name: spec-42" in head and "created:" in head
    assert body == "# The shelving spec\n\nText.\n"  # one title: the content's own
    assert [e.name for e in service.open_nodes(["spec-42"]).entities] == ["spec-42"]
    assert service.open_nodes(["spec-42"]).entities[0].tags == ("spec",)
    service.store("v").rebuild_index()
    assert (folder / "spec-42.md").read_text() == text
    assert [e.name for e in service.open_nodes(["spec-42"]).entities] == ["spec-42"]


def test_old_libraries_learn_to_compare_names_in_nfc(tmp_path):
    """A library written before names compared in NFC is migrated: its decomposed names answer."""
    import sqlite3

    from memloci.core.model import EntityInput

    db = tmp_path / "old.db"
    nfd, nfc = unicodedata.normalize("NFD", "Émile"), unicodedata.normalize("NFC", "émile")
    service = MemoryService(LibraryRegistry([LibrarySpec("old", db, "sqlite")]))
    service.create_entities([EntityInput(nfd, "person", ("writes",))])
    service.close()
    with sqlite3.connect(db) as conn:  # as the previous version stored it: case-folded only
        conn.execute("UPDATE entities SET name = ?, name_key = ?", (nfd, nfd.casefold()))
        conn.execute("PRAGMA user_version = 4")
    conn.close()
    service = MemoryService(LibraryRegistry([LibrarySpec("old", db, "sqlite")]))
    try:
        assert [e.name for e in service.open_nodes([nfc]).entities] == [nfd]
    finally:
        service.close()


def test_dates_come_from_the_file_never_from_indexing(vault):
    import os

    service, folder, original = vault
    note = folder / "Dated.md"
    note.write_bytes(b"## Observations\n- written by memloci <!-- 2025-01-02T03:04:05Z -->\n- written by a person\n")
    os.utime(note, (1700000000, 1700000000))  # 2023-11-14T22:13:20Z
    service.store("v").sync()
    entity = service.open_nodes(["Dated"]).entities[0]
    dates = {o.content: o.created_at for o in entity.observations}
    assert dates == {"written by memloci": "2025-01-02T03:04:05Z", "written by a person": "2023-11-14T22:13:20Z"}
    assert entity.created_at == "2023-11-14T22:13:20Z"  # no `created:` key: the file's time, not today
    assert [e.created_at for e in service.open_nodes(["Weekly review"]).entities] == ["2024-03-01"]
    assert note.read_bytes().endswith(b"- written by a person\n")  # nothing written back


def test_files_memloci_created_keep_its_format_and_their_modified_stamp(vault):
    import time

    from memloci.core.model import EntityInput

    service, folder, original = vault
    service.create_entities([EntityInput("fresh", "idea")])
    first = (folder / "fresh.md").read_text()
    created = re.search(r"created: (\S+)\n", first).group(1)
    assert first == f"---\ntype: idea\ncreated: {created}\nmodified: {created}\n---\n# fresh\n"
    time.sleep(1.1)  # stamps have whole seconds
    service.add_observations([ObservationBatch("fresh", ("grows",))])
    second = (folder / "fresh.md").read_text()
    stamp = re.search(r"modified: (\S+)\n", second).group(1)
    assert stamp > created
    assert DATE.sub(b"<!-- DATE -->", second.encode()).decode() == first.replace(
        f"modified: {created}", f"modified: {stamp}") + "\n## Observations\n- grows <!-- DATE -->\n"
    check(folder, {**original, "fresh.md": DATE.sub(b"<!-- DATE -->", second.encode())})
