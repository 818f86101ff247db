"""Importers from MCP Memory Service, memorix and basic-memory: every count and value right,
into SQLite and into a Markdown library, idempotent re-import, bad sources refused.

The MMS database was written by mcp-memory-service 12.4.0's own storage layer and the
memorix.db by memorix 1.0.7 over MCP (see tests/fixtures/importers/README.md); the memorix
JSON files and the basic-memory notes follow those servers' documented formats.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import server_env

from memloci.app.registry import LibraryRegistry
from memloci.app.specs import LibrarySpec
from memloci.core.errors import MemlociError, ValidationError
from memloci.formats.basic_memory import read_basic_memory
from memloci.formats.memorix import read_memorix
from memloci.formats.mms import read_mms
from memloci.service.facade import MemoryService

FIXTURES = Path(__file__).parent / "fixtures" / "importers"
ALICE_MTIME = 1_767_225_600  # 2026-01-01T00:00:00Z: the note without front matter dates from its file


def memloci(home, *args, check=True):
    proc = subprocess.run([sys.executable, "-m", "memloci", *args], env=server_env(home, COLUMNS="200"),
                          capture_output=True, text=True, timeout=120)
    if check:
        assert proc.returncode == 0, proc.stderr + proc.stdout
    return proc


def gunzip(src: Path, dest: Path) -> Path:
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(gzip.decompress(src.read_bytes()))
    return dest


@pytest.fixture
def mms_db(tmp_path) -> Path:
    return gunzip(FIXTURES / "mms" / "sqlite_vec.db.gz", tmp_path / "mms" / "sqlite_vec.db")


@pytest.fixture
def memorix_db(tmp_path) -> Path:
    gunzip(FIXTURES / "memorix-db" / "memorix.db.gz", tmp_path / "memorix-db" / "memorix.db")
    return tmp_path / "memorix-db"


@pytest.fixture
def memorix_json(tmp_path) -> Path:
    return Path(shutil.copytree(FIXTURES / "memorix-json", tmp_path / "memorix-json"))


@pytest.fixture
def notes(tmp_path) -> Path:
    root = Path(shutil.copytree(FIXTURES / "basic-memory", tmp_path / "notes"))
    os.utime(root / "people" / "Alice.md", (ALICE_MTIME, ALICE_MTIME))
    return root


def open_service(tmp: Path, kind: str) -> tuple[MemoryService, LibraryRegistry]:
    registry = LibraryRegistry([LibrarySpec("default", tmp / ("lib.db" if kind == "sqlite" else "lib"), kind)])
    return MemoryService(registry), registry


@pytest.fixture(params=["sqlite", "markdown"])
def lib(request, tmp_path):
    service, registry = open_service(tmp_path, request.param)
    service.kind = request.param
    yield service
    registry.close()


def tree_digest(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def notes_digest(root: Path) -> dict[str, str]:
    """A Markdown library's own files (its index folder left out)."""
    return {k: v for k, v in tree_digest(root).items() if not k.startswith(".memloci/")}


# -- MCP Memory Service -----------------------------------------------------------------


def test_mms_memories_keep_content_tags_type_metadata_and_times(lib, mms_db):
    source = read_mms(mms_db)
    assert source.skipped == [("id 5", "deleted in MMS (deleted_at 2026-11-22T23:52:15.741005Z)")]
    report, added, existing = lib.import_everything(source.data)
    assert (added, existing) == (5, 0) and report.entities_created == 0
    _, memories = lib.export_everything()
    got = {m.content: (m.tags, m.memory_type, m.metadata, m.created_at, m.updated_at) for m in memories}
    assert got == {
        "Decided to use PostgreSQL 16 for the billing service":
            (("billing", "database", "decision"), "decision", {"project": "billing", "confidence": 0.9, "source": "mms"},
             "2025-11-22T08:26:40.250000Z", "2025-11-22T08:27:40.250000Z"),
        "The deploy script needs AWS_PROFILE set or it silently uses prod":
            (("deploy", "gotcha"), "note", {"source": "mms"}, "2025-11-22T09:26:40Z", "2025-11-22T09:27:40Z"),
        "Team standup moved to 10:00 on Mondays":
            (("meetings",), "reference", {"source": "mms", "mms_source": "calendar"},
             "2025-11-23T09:26:40.500000Z", "2025-11-23T09:27:40.500000Z"),
        "会議は月曜日の10時に移動しました":
            (("meetings", "日本語"), "note", {"source": "mms"}, "2025-11-23T12:13:20Z", "2025-11-23T12:14:20Z"),
        "Memory without tags or type":  # MMS itself tagged it `untagged` and left the type empty
            (("untagged",), "note", {"source": "mms"}, "2025-11-23T17:46:40Z", "2025-11-23T17:47:40Z"),
    }
    # the times are the ones MMS wrote in its *_iso columns, digit for digit
    conn = sqlite3.connect(mms_db.as_uri() + "?mode=ro&immutable=1", uri=True)
    iso = dict(conn.execute("SELECT content, created_at_iso FROM memories WHERE deleted_at IS NULL").fetchall())
    conn.close()
    assert {c: v[3] for c, v in got.items()} == iso
    assert lib.search_by_tag(["meetings"])[0].content in iso  # tags are searchable as tags
    again = lib.import_everything(read_mms(mms_db).data)
    assert again[1:] == (0, 5)


def test_mms_source_is_never_written_and_gets_no_files_beside_it(tmp_path, mms_db):
    before = tree_digest(mms_db.parent)
    read_mms(mms_db)
    assert tree_digest(mms_db.parent) == before  # no -wal or -shm made, not a byte changed


def test_mms_rows_that_break_the_rules_are_skipped_by_id(tmp_path, mms_db):
    conn = sqlite3.connect(mms_db)
    conn.execute("UPDATE memories SET metadata = 'not json' WHERE id = 2")
    conn.execute("UPDATE memories SET tags = ? WHERE id = 3", ("ok," + "x" * 80,))
    conn.commit()
    conn.close()
    source = read_mms(mms_db)
    reasons = dict(source.skipped)
    assert len(source.data.memories) == 4 and "id 2 (3a150ea908d3)" not in reasons
    assert "id 3.tags[1]" in reasons["id 3 (dc0b4f093ffb)"]
    # metadata that is not JSON loses nothing: the content is kept, the text under original_metadata
    kept = dict(source.data.memories)[2]
    assert kept.metadata == {"original_metadata": "not json", "source": "mms"}
    assert dict(source.warnings)["id 2"].startswith("metadata is not JSON")


def test_memorix_a_bad_line_is_skipped_and_the_rest_imported(lib, memorix_json):
    """One rule for every importer: a bad line is listed by file and line, the rest comes over."""
    lines = (memorix_json / "entities.jsonl").read_text().splitlines()
    (memorix_json / "entities.jsonl").write_text("\n".join([lines[0], "{not json", "[1, 2]", *lines[1:]]) + "\n")
    source = read_memorix(memorix_json)
    reasons = dict(source.skipped)
    assert reasons["entities.jsonl:2"].startswith("not valid JSON")
    assert reasons["entities.jsonl:3"] == "expected a JSON object, got list"
    assert len(source.data.entities) == len(lines)
    report, added, _ = lib.import_everything(source.data)
    assert report.entities_created == len(lines) and report.relations_created == 2 and added == 3


@pytest.mark.parametrize("make, message", [
    (lambda p: p.write_text("hello, not a database\n" * 10), "not a SQLite database"),
    (lambda p: sqlite3.connect(p).execute("CREATE TABLE notes (x)").connection.commit(), "no 'memories' table"),
    (lambda p: sqlite3.connect(p).execute("CREATE TABLE memories (content)").connection.commit(),
     "has no column content_hash"),
])
def test_mms_wrong_sources_are_refused(tmp_path, make, message):
    path = tmp_path / "x.db"
    make(path)
    with pytest.raises(ValidationError, match=message):
        read_mms(path)


# -- memorix ----------------------------------------------------------------------------


def test_memorix_db_written_by_memorix(lib, memorix_db):
    source = read_memorix(memorix_db)
    assert source.layout == "memorix.db" and source.skipped == []
    report, added, _ = lib.import_everything(source.data)
    assert (report.entities_created, report.observations_added, report.relations_created, added) == (3, 7, 2, 4)
    graph, memories = lib.export_everything()
    assert {(e.name, e.entity_type, tuple(o.content for o in e.observations)) for e in graph.entities} == {
        ("auth-module", "component", ("Uses JWT with 15 minute expiry", "Refresh tokens live in Redis",
                                      "[#1] Token refresh races on slow networks")),
        ("redis", "service", ("Version 7.2", "[#3] Session keys expire with the token")),
        ("checkout", "component", ("[#2] Stripe over Adyen for payments", "[#4] 検索インデックスを再構築")),
    }
    assert {(r.from_entity, r.relation_type, r.to_entity) for r in graph.relations} == {
        ("auth-module", "depends_on", "redis"), ("checkout", "uses", "auth-module")}
    by_id = {m.metadata["memorixId"]: m for m in memories}
    first = by_id[1]
    assert first.content == ("Token refresh races on slow networks\n\nTwo tabs refreshing at once invalidate each "
                             "other's refresh token; the second request logs the user out.\n\n"
                             "- Refresh token rotation is on\n- Grace period: 0s")
    assert first.memory_type == "gotcha" and first.tags == ("auth", "race-condition")
    assert first.created_at == first.updated_at == "2026-11-22T23:53:52.384Z"
    assert {k: first.metadata[k] for k in ("source", "memorixSource", "entityName", "title", "facts", "filesModified",
                                           "projectId", "status", "topicKey")} == {
        "source": "memorix", "memorixSource": "agent", "entityName": "auth-module",
        "title": "Token refresh races on slow networks", "facts": ["Refresh token rotation is on", "Grace period: 0s"],
        "filesModified": ["src/auth/refresh.ts"], "projectId": "example/shop", "status": "active",
        "topicKey": "auth/token-refresh-race"}
    assert "tokens" not in first.metadata and "narrative" not in first.metadata
    assert [by_id[i].memory_type for i in (2, 3, 4)] == ["decision", "how-it-works", "what-changed"]
    assert by_id[4].tags == ("検索",) and by_id[3].tags == ()
    assert by_id[3].metadata["filesModified"] == ["src/auth/session.ts", "infra/redis.conf"]
    again, added, existing = lib.import_everything(read_memorix(memorix_db).data)
    assert (again.entities_created, again.observations_added, again.relations_created, added, existing) == (0, 0, 0, 0, 4)


def test_memorix_json_layout(lib, memorix_json):
    source = read_memorix(memorix_json)
    assert source.layout == "observations.json + entities.jsonl + relations.jsonl"
    assert source.skipped == [("observations.json[3] (id 4)", "observations.json[3] (id 4): no createdAt, so the "
                                                                "observation has no date")]
    report, added, _ = lib.import_everything(source.data)
    assert (report.entities_created, report.observations_added, report.relations_created, added) == (3, 5, 2, 3)
    assert report.skipped_relations == [(3, "endpoint does not exist: billing-service")]
    assert source.relation_where[3] == "relations.jsonl:3"
    _, memories = lib.export_everything()
    by_id = {m.metadata["memorixId"]: m for m in memories}
    assert (by_id[2].created_at, by_id[2].updated_at) == ("2026-10-02T09:00:00.000Z", "2026-10-05T17:45:10.500Z")
    assert by_id[2].content == ("Rate limit per API key, not per IP\n\nCustomers behind one NAT shared a limit; "
                                "per-key limits are fair and easier to explain.")
    assert by_id[3].content == "502s after deploy fixed by draining connections\n\n- Drain timeout: 30s"
    assert (by_id[3].metadata["status"], by_id[3].metadata["memorixSource"]) == ("resolved", "hook")
    assert by_id[1].tags == ("vite", "ci", "env") and by_id[1].memory_type == "gotcha"


def test_memorix_graph_jsonl_is_read_too(tmp_path, memorix_json):
    (memorix_json / "entities.jsonl").unlink()
    (memorix_json / "relations.jsonl").unlink()
    (memorix_json / "graph.jsonl").write_text(
        '{"type":"entity","name":"a","entityType":"x","observations":["o"]}\n'
        '{"type":"entity","name":"b","entityType":"","observations":[]}\n'
        '{"type":"relation","from":"a","to":"b","relationType":"r"}\n{"type":"other"}\n')
    source = read_memorix(memorix_json)
    assert [e.entity_type for _, e in source.data.entities] == ["x", "note"]
    assert len(source.data.relations) == 1 and ("graph.jsonl:4", "a line of type 'other', neither entity nor relation") \
        in source.skipped


def test_memorix_wrong_sources_are_refused(tmp_path, memorix_db):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValidationError, match="neither memorix.db nor observations.json"):
        read_memorix(empty)
    (empty / "observations.json").write_text('{"not": "a list"}')
    with pytest.raises(ValidationError, match="must be a JSON array"):
        read_memorix(empty)
    (empty / "observations.json").unlink()
    (empty / "memorix.db").write_bytes(b"\0" * 4096)
    with pytest.raises(ValidationError, match="not a SQLite database|no table observations"):
        read_memorix(empty)
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / "memorix.db").symlink_to(memorix_db / "memorix.db")
    with pytest.raises(MemlociError, match="symbolic link"):
        read_memorix(linked)


# -- basic-memory -----------------------------------------------------------------------


def test_basic_memory_counts_and_values(lib, notes):
    source = read_basic_memory(notes)
    assert source.skipped == []
    assert sorted(source.warnings) == [
        ("coffee/Coffee Bean Origins.md:18", "relation grown near -> 'Mount Elgon': no note of that name; it waits "
                                            "as a link of that type and becomes the relation when such an entity exists"),
        ("coffee/Coffee Brewing Methods.md:26", "relation pairs_with -> 'Pastry Notes': no note of that name; it waits "
                                               "as a link of that type and becomes the relation when such an entity exists"),
    ]
    report, added, _ = lib.import_everything(source.data)
    assert (report.entities_created, report.observations_added, report.relations_created, added) == (3, 8, 4, 0)
    graph = lib.export_graph()
    entities = {e.name: e for e in graph.entities}
    assert set(entities) == {"Coffee Brewing Methods", "Coffee Bean Origins", "Alice"}
    brew, beans, alice = entities["Coffee Brewing Methods"], entities["Coffee Bean Origins"], entities["Alice"]
    assert [o.content for o in brew.observations] == [
        "[method] Pour over gives the cleanest cup #brewing #clarity",
        "[technique] Water just off the boil, about 94 °C (light roasts)",
        "[tip] Bloom for 30 seconds before the main pour #technique",
        "[preference] Medium-light roasts suit pour over"]
    assert [o.content for o in alice.observations] == ["Prefers Chemex over V60 #equipment"]
    assert (brew.entity_type, beans.entity_type, alice.entity_type) == ("note", "reference", "note")
    assert brew.created_at == "2026-03-01T09:30:00Z" and beans.created_at == "2026-02-20T00:00:00Z"
    assert alice.created_at == "2026-01-01T00:00:00Z"
    assert {o.created_at for o in brew.observations} == {"2026-03-01T09:30:00Z"}
    # explicit relations (by title, by permalink, quoted type) and the prose's [[links]] as links_to
    assert {(r.from_entity, r.relation_type, r.to_entity) for r in graph.relations} == {
        ("Coffee Brewing Methods", "requires", "Coffee Bean Origins"),
        ("Coffee Brewing Methods", "recommended_by", "Alice"),
        ("Coffee Bean Origins", "used_by", "Coffee Brewing Methods"),
        ("Alice", "taught_me", "Coffee Brewing Methods"),
        ("Coffee Brewing Methods", "links_to", "Coffee Bean Origins"),
        ("Alice", "links_to", "Coffee Brewing Methods"),
        ("Alice", "links_to", "Coffee Bean Origins"),
    }
    text = lib.read_entities(["Coffee Brewing Methods"])["entities"][0]["content"]
    # front-matter tags, then the notes' inline #tags (observations' too), each once
    assert brew.tags == ("coffee", "brewing", "clarity", "technique")
    assert beans.tags == ("coffee", "sourcing", "ethiopia", "colombia") and alice.tags == ("equipment",)
    assert "permalink: coffee/coffee-brewing-methods" in text
    assert "Notes on the ways I brew, kept while testing grinders. Beans come from\n[[Coffee Bean Origins]]" in text
    assert "- pairs_with [[Pastry Notes]]" not in text  # a relation to a name nothing has waits, typed:
    assert "  - {type: pairs_with, to: Pastry Notes}\n" in text  # it becomes the relation when Pastry Notes appears
    assert "- requires [[Coffee Bean Origins]]" not in text and text.count("# Coffee Brewing Methods") == 1
    alice_text = lib.read_entities(["Alice"])["entities"][0]["content"]
    for prose in ("- [ ] ask about the Kenya lot", "> - [hours] Closed on Mondays",
                  "- [example] not an observation inside a code fence", "- see also [[Coffee Bean Origins]] for the beans"):
        assert prose in alice_text
    changes = len(lib.history(limit=1000, internal=True))
    files = notes_digest(lib.store().root) if lib.kind == "markdown" else None
    again, added, existing = lib.import_everything(read_basic_memory(notes).data)
    assert len(lib.history(limit=1000, internal=True)) == changes  # nothing written, not even the journal
    assert files is None or notes_digest(lib.store().root) == files
    assert (again.entities_created, again.observations_added, again.relations_created) == (0, 0, 0)
    assert again.entities_merged == 3 and again.relations_existing == 4
    assert len(lib.export_graph().relations) == 7


def test_basic_memory_relation_to_a_name_nothing_has_keeps_its_type(lib, notes):
    """`- pairs_with [[Pastry Notes]]` with no such note: once Pastry Notes is created (a tool
    call, later), the relation is `pairs_with`, not `links_to`; one to an entity the library
    already holds is that relation at once."""
    from memloci.core.model import EntityInput

    lib.create_entities([EntityInput("Mount Elgon", "place", ())])
    lib.import_everything(read_basic_memory(notes).data)

    def typed(target):
        return {(r.from_entity, r.relation_type) for r in lib.export_graph().relations if r.to_entity == target}

    assert typed("Mount Elgon") == {("Coffee Bean Origins", "grown near")}
    assert typed("Pastry Notes") == set()
    lib.create_entities([EntityInput("Pastry Notes", "note", ())])
    assert typed("Pastry Notes") == {("Coffee Brewing Methods", "pairs_with")}


def test_basic_memory_relation_to_a_missing_name_under_a_typed_schema_stays_text(tmp_path, notes):
    """A schema that lists relation types wants both ends: the line stays in the body as written."""
    from memloci.core.schema import LibrarySchema

    typed = LibrarySchema(name="typed", relation_types=("requires", "recommended_by", "used_by", "taught_me",
                                                          "pairs_with", "grown near"))
    registry = LibraryRegistry([LibrarySpec("default", tmp_path / "lib.db", "sqlite", typed)])
    service = MemoryService(registry)
    try:
        service.import_everything(read_basic_memory(notes).data)
        text = service.read_entities(["Coffee Brewing Methods"])["entities"][0]["content"]
    finally:
        registry.close()
    assert "- pairs_with [[Pastry Notes]]" in text and "to: Pastry Notes" not in text


def test_basic_memory_into_a_markdown_library_keeps_the_notes_readable(tmp_path, notes):
    service, registry = open_service(tmp_path, "markdown")
    try:
        service.import_everything(read_basic_memory(notes).data)
    finally:
        registry.close()
    text = (tmp_path / "lib" / "coffee" / "Coffee Brewing Methods.md").read_text()  # in its folder, as in the source
    # written once, with its relations, in the entity document's order (DESIGN.md §1)
    assert text.startswith("---\ntype: note\nrelations:\n  - {type: recommended_by, to: Alice}\n"
                           "  - {type: requires, to: Coffee Bean Origins}\n"
                           "  - {type: pairs_with, to: Pastry Notes}\n"  # waits for its target, typed
                           "created: 2026-03-01T09:30:00Z\n")
    assert "tags:\n  - coffee\n  - brewing\npermalink: coffee/coffee-brewing-methods\n---\n" in text
    assert ("# Coffee Brewing Methods\n\nNotes on the ways I brew, kept while testing grinders. Beans come from\n"
            "[[Coffee Bean Origins]]; see also the [grinder manual](https://example.com/grinder).\n\n"
            "## Observations\n- [method] Pour over gives the cleanest cup #brewing #clarity <!-- 2026-03-01T09:30:00Z -->\n"
            ) in text
    # the index rebuilt from the files alone holds the same graph
    shutil.rmtree(tmp_path / "lib" / ".memloci")
    service, registry = open_service(tmp_path, "markdown")
    try:
        graph = service.export_graph()
        assert sum(len(e.observations) for e in graph.entities) == 8 and len(graph.relations) == 7
        assert {e.name: e.created_at for e in graph.entities}["Coffee Bean Origins"] == "2026-02-20T00:00:00Z"
    finally:
        registry.close()


def test_basic_memory_folders_and_file_names_are_kept_in_a_markdown_library(tmp_path):
    """people/anna.md comes in as people/anna.md (its title, Anna, names the entity); a note
    whose path is taken by a person's file goes beside it, named after its title (and never as a
    file whose name differs from another's only in case); an entity that
    exists keeps its file where it is; hidden folders are never made."""
    src = tmp_path / "notes"
    for rel, text in {"people/anna.md": "---\ntitle: Anna\n---\n# Anna\n- [role] barista\n",
                      "coffee/deep/roast.md": "---\ntitle: Roast Levels\n---\n- [fact] dark is bitter\n",
                      "people/bob.md": "---\ntitle: Bob\n---\n- [fact] likes tea\n",
                      "top.md": "- [fact] at the root\n",  # no title: named after its file
                      "mine/kept.md": "---\ntitle: Kept\n---\n- [fact] theirs\n"}.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(text)
    lib = tmp_path / "lib"
    (lib / "people").mkdir(parents=True)
    (lib / "people" / "bob.md").write_text("# Robert\n\nA person's own note.\n")  # the path is taken
    (lib / "Kept.md").write_text("# Kept\n\nAlready here.\n")  # the entity exists, at the root
    service, registry = open_service(tmp_path, "markdown")
    try:
        service.store().sync()
        service.import_everything(read_basic_memory(src).data)
        paths = {row["name"]: row.get("path") for row in service.list_entities("*")}
    finally:
        registry.close()
    # Bob's title would give people/Bob.md, one file with the person's people/bob.md on macOS and
    # Windows: it takes its other name
    bob = paths.pop("Bob")
    assert re.fullmatch(r"people/Bob-[0-9a-f]{6}\.md", bob), bob
    assert paths == {"Anna": "people/anna.md", "Roast Levels": "coffee/deep/roast.md",
                     "Robert": "people/bob.md", "top": "top.md", "Kept": "Kept.md"}
    assert (lib / "people" / "bob.md").read_text() == "# Robert\n\nA person's own note.\n"
    assert not (lib / "mine").exists()


def test_basic_memory_into_a_markdown_library_dates_each_file_as_its_note(tmp_path, notes):
    """The `modified:` memloci writes is the note's own date (front matter, else the file's
    mtime), not the time of the import: file and index agree, and a rebuilt index keeps it."""
    service, registry = open_service(tmp_path, "markdown")
    try:
        service.import_everything(read_basic_memory(notes).data)
        indexed = {e.name: e.updated_at for e in service.export_graph().entities}
    finally:
        registry.close()
    expected = {"coffee/Coffee Brewing Methods": "2026-03-04T18:05:12Z", "people/Alice": "2026-01-01T00:00:00Z"}
    for path, at in expected.items():
        assert indexed[path.split("/")[1]] == at
        assert f"\nmodified: {at}\n" in (tmp_path / "lib" / f"{path}.md").read_text()
    shutil.rmtree(tmp_path / "lib" / ".memloci")
    service, registry = open_service(tmp_path, "markdown")
    try:
        rebuilt = {e.name: e.updated_at for e in service.export_graph().entities}
    finally:
        registry.close()
    assert rebuilt == indexed


@pytest.mark.parametrize("item, observation", [
    ("[method] Pour over #brewing (light roasts)", True), ("plain text with a #tag", True),
    ("plain text", False), ("[ ] a task", False), ("[x] done", False), ("[/] in progress", False),
    ("[00:01:02] a transcript line", False), ("[a link](https://example.com)", False), ("[[Just A Link]]", False),
])
def test_basic_memory_observation_rule(item, observation):
    from memloci.formats.basic_memory import is_observation

    assert is_observation(item) is observation


@pytest.mark.parametrize("item, relation", [
    ("relates_to [[Coffee]]", ("relates_to", "Coffee")), ("implements [[Spec]] (since v2)", ("implements", "Spec")),
    ("'inspired by' [[Alice]]", ("inspired by", "Alice")), ("see also [[Coffee]]", None),
    ("uses [[A]] and then [[B]]", None), ("[[Coffee]]", None),
])
def test_basic_memory_relation_rule(item, relation):
    from memloci.formats.basic_memory import explicit_relation

    assert explicit_relation(item) == relation


def test_basic_memory_wrapped_items_are_one_observation(service, tmp_path):
    root = tmp_path / "wrapped"
    root.mkdir()
    (root / "w.md").write_text("---\ntitle: W\n---\n- [idea] one\n  two #t\n- plain\n  continued\n")
    service.import_everything(read_basic_memory(root).data)
    entity = service.export_graph().entities[0]
    assert [o.content for o in entity.observations] == ["[idea] one\ntwo #t"]
    assert entity.body.startswith("- plain\n  continued\n")


def test_basic_memory_never_follows_links_out_of_the_folder(tmp_path, notes):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "Secret.md").write_text("---\ntitle: Secret\n---\n- [secret] the password is hunter2\n")
    (notes / "Secret.md").symlink_to(outside / "Secret.md")
    (notes / "elsewhere").symlink_to(outside, target_is_directory=True)
    source = read_basic_memory(notes)
    assert ("Secret.md", "a symbolic link: not followed") in source.skipped
    assert ("elsewhere", "a symbolic link to a folder: not followed") in source.skipped
    assert "Secret" not in {e.name for _, e in source.data.entities}


def test_basic_memory_refuses_what_is_no_project(tmp_path):
    (tmp_path / "a.txt").write_text("hello")
    with pytest.raises(ValidationError, match="no Markdown notes"):
        read_basic_memory(tmp_path)
    with pytest.raises(ValidationError, match="not a folder"):
        read_basic_memory(tmp_path / "a.txt")


# -- the command line -------------------------------------------------------------------


def test_cli_imports_each_format_then_imports_nothing_again(home, mms_db, memorix_db, notes):
    out = memloci(home, "import", "mms", str(mms_db), "--dry-run").stdout
    assert "Dry run, nothing written." in out and "5 memories" in out and "id 5: deleted in MMS" in out
    assert not home.exists() or not any(home.rglob("*.db"))
    first = memloci(home, "import", "mms", str(mms_db))
    assert "5 memories (0 already there); 1 skipped." in first.stdout
    assert "importing mms" in first.stderr  # the progress bar is on stderr
    second = memloci(home, "import", "mms", str(mms_db)).stdout
    assert "0 memories (5 already there)" in second and "Nothing new" in second

    out = memloci(home, "import", "memorix", str(memorix_db)).stdout
    assert "3 entities created (0 already there), 7 observations, 2 relations (0 already there), 4 memories" in out
    assert "Nothing new" in memloci(home, "import", "memorix", str(memorix_db)).stdout

    lib = home.parent / "md"
    out = memloci(home, "import", "basic-memory", str(notes), "--libraries", f"notes:{lib}").stdout
    assert "3 entities created (0 already there), 8 observations, 4 relations" in out
    assert "coffee/Coffee Brewing Methods.md:26: relation pairs_with -> 'Pastry Notes'" in out
    assert (lib / "people" / "Alice.md").is_file() and not (lib / "Alice.md").exists()
    assert "Nothing new" in memloci(home, "import", "basic-memory", str(notes), "--libraries", f"notes:{lib}").stdout


def test_cli_dry_run_counts_what_the_run_does(home, memorix_json):
    """A relation to an entity neither in the source nor in the library is skipped by the dry
    run as by the run (one check for both); one the library holds is written by both."""
    def counts(text):
        return (re.search(r"(\d+) relations?[ ,]", text).group(1), re.search(r"(\d+) (?:items? would be )?skipped", text).group(1))

    dry = memloci(home, "import", "memorix", str(memorix_json), "--dry-run").stdout
    assert "relations.jsonl:3: endpoint does not exist: billing-service" in dry
    assert not home.exists() or not any(home.rglob("*.db"))  # still nothing written
    run = memloci(home, "import", "memorix", str(memorix_json)).stdout
    assert counts(dry) == counts(run) == ("2", "2")
    other = memorix_json.parent / "other"
    other.mkdir()
    (other / "observations.json").write_text("[]")
    (other / "entities.jsonl").write_text('{"name": "billing-service", "entityType": "service", "observations": []}\n')
    memloci(home, "import", "memorix", str(other))
    dry = memloci(home, "import", "memorix", str(memorix_json), "--dry-run").stdout
    assert counts(dry) == ("3", "1") and "billing-service" not in dry


def test_cli_lists_warnings_apart_from_skipped_items(home, mms_db):
    conn = sqlite3.connect(mms_db)
    conn.execute("UPDATE memories SET metadata = 'not json' WHERE id = 2")
    conn.commit()
    conn.close()
    for args in (["--dry-run"], []):
        out = memloci(home, "import", "mms", str(mms_db), *args).stdout
        assert "5 memories" in out and "1 item imported with a warning:" in out
        assert "  id 2: metadata is not JSON" in out and "kept as text in metadata.original_metadata" in out


def test_cli_refuses_bad_sources_with_a_message(home, tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("just text\n")
    proc = memloci(home, "import", "mms", str(text), check=False)
    assert proc.returncode == 1 and "not a SQLite database" in proc.stderr
    proc = memloci(home, "import", "mms", str(tmp_path / "missing.db"), check=False)
    assert proc.returncode == 1 and "no such file" in proc.stderr
    proc = memloci(home, "import", "memorix", str(tmp_path), check=False)
    assert proc.returncode == 1 and "not a memorix data folder" in proc.stderr
    # a folder for MMS: named as one, with where its database file lives
    proc = memloci(home, "import", "mms", str(tmp_path), check=False)
    assert proc.returncode == 1 and "no such file" not in proc.stderr
    assert "a directory, not a file" in proc.stderr and "sqlite_vec.db" in proc.stderr
    assert "~/.local/share/mcp-memory/" in proc.stderr
    (tmp_path / "sqlite_vec.db").write_bytes(b"")
    proc = memloci(home, "import", "mms", str(tmp_path), check=False)
    assert proc.returncode == 1 and f"Did you mean {tmp_path / 'sqlite_vec.db'}?" in proc.stderr
    proc = memloci(home, "import", "basic-memory", str(text), check=False)
    assert proc.returncode == 1 and "not a folder" in proc.stderr
    assert not home.exists() or not any(home.rglob("*.db"))


def test_basic_memory_merges_into_a_persons_entity_without_touching_its_prose(tmp_path, notes):
    service, registry = open_service(tmp_path, "markdown")
    try:
        person = "---\ntype: person\n---\n# Alice\n\nMy own words about Alice.\n"
        (tmp_path / "lib").mkdir(exist_ok=True)
        (tmp_path / "lib" / "Alice.md").write_text(person)
        service.store().sync()
        service.import_everything(read_basic_memory(notes).data)
        text = (tmp_path / "lib" / "Alice.md").read_text()
        assert text.startswith("---\ntype: person\n") and "# Alice\n\nMy own words about Alice.\n\n" in text
        assert "Roaster at the corner shop" not in text  # the note's prose did not replace theirs
        alice = {e.name: e for e in service.export_graph().entities}["Alice"]
        assert alice.entity_type == "person" and alice.created_at != "2026-01-01T00:00:00Z"
        assert [o.content for o in alice.observations] == ["Prefers Chemex over V60 #equipment"]
    finally:
        registry.close()


def test_basic_memory_edits_a_persons_file_only_where_the_import_adds(tmp_path, notes):
    service, registry = open_service(tmp_path, "markdown")
    try:
        person = "---\n# kept comment\ntype:   reference\ntags:\n  - mine\n---\n# Coffee Bean Origins\n\nMy own prose.\n"
        (tmp_path / "lib").mkdir(exist_ok=True)
        (tmp_path / "lib" / "Coffee Bean Origins.md").write_text(person)
        service.store().sync()
        service.import_everything(read_basic_memory(notes).data)
        text = (tmp_path / "lib" / "Coffee Bean Origins.md").read_text()
        for line in person.splitlines(keepends=True):  # every line of theirs is still there, as written
            assert line in text
        entity = {e.name: e for e in service.export_graph().entities}["Coffee Bean Origins"]
        assert "tags:\n  - mine\n" in text and "permalink" not in text  # their front matter is theirs
        assert len(entity.observations) == 3 and "My own prose." in entity.body
        # the note's relation to a name nothing has yet waits in their front matter, typed
        assert "  - {type: grown near, to: Mount Elgon}\n" in text and "[[Mount Elgon]]" not in text
    finally:
        registry.close()
    shutil.rmtree(tmp_path / "lib" / ".memloci")  # the index and the files agree: a rebuild reads the same
    service, registry = open_service(tmp_path, "markdown")
    try:
        rebuilt = {e.name: e for e in service.export_graph().entities}["Coffee Bean Origins"]
        assert rebuilt.tags == entity.tags == ("mine", "ethiopia", "colombia")  # the observations' #tags too
    finally:
        registry.close()


def write_notes(root: Path, n: int) -> None:
    root.mkdir(parents=True)
    for i in range(n):
        (root / f"note {i:03d}.md").write_text(
            f"---\ntitle: Note {i:03d}\ntype: topic\ntags: [t{i % 7}]\ncreated: 2026-0{1 + i % 9}-1{i % 10}T10:00:00Z\n---\n"
            f"# Note {i:03d}\n\nProse of note {i} with a link to [[Note {(i * 7) % n:03d}]].\n\n"
            f"## Observations\n- [fact] first fact of {i} #f{i % 5}\n- [fact] second fact of {i}\n\n"
            f"## Relations\n- next [[Note {(i + 1) % n:03d}]]\n")


def library_state(service: MemoryService) -> tuple:
    """Everything an import writes, less the times of the moment (relation times, `modified`)."""
    graph = service.export_graph(order="name")
    return (tuple((e.name, e.entity_type, e.tags, e.body, e.created_at,
                   tuple((o.content, o.created_at) for o in e.observations)) for e in graph.entities),
            tuple(sorted((r.from_entity, r.relation_type, r.to_entity) for r in graph.relations)))


def start_import(src: Path, spec: str, home: Path, lib: Path) -> tuple[subprocess.Popen, float]:
    """`memloci import basic-memory` running; returns once its library appears (the reading is done)."""
    import time

    proc = subprocess.Popen([sys.executable, "-m", "memloci", "import", "basic-memory", str(src), "--libraries", spec],
                            env=server_env(home), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while not lib.exists() and proc.poll() is None:
        time.sleep(0.002)
    return proc, time.monotonic()


@pytest.mark.full  # SIGKILL
@pytest.mark.parametrize("kind", ["sqlite", "markdown"])
def test_basic_memory_import_killed_then_run_again_ends_as_one_clean_run(tmp_path, kind):
    """SIGKILL at moments spread over an import's writes, then the same import again: the
    library ends exactly as after one uninterrupted import (whole batches, idempotent edits)."""
    import time

    src = tmp_path / "notes"
    write_notes(src, 30)
    clean_lib = tmp_path / "clean" / ("lib.db" if kind == "sqlite" else "lib")
    proc, started = start_import(src, f"clean:{clean_lib}", tmp_path / "home", clean_lib)
    assert proc.wait(timeout=120) == 0
    took = time.monotonic() - started  # the writing part of the import
    service, registry = open_service(clean_lib.parent, kind)
    expected = library_state(service)
    registry.close()
    assert len(expected[0]) == 30 and len(expected[1]) == 54  # 30 `next`, 24 prose links (6 notes link to themselves)
    interrupted = []  # whether a kill left the library halfway (else the test would prove nothing)
    # kills spread over the measured time; on a busy machine the writes may start late or end early,
    # so several points keep at least one inside them
    for n, fraction in enumerate((0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)):
        lib = tmp_path / f"k{n}" / ("lib.db" if kind == "sqlite" else "lib")
        proc, _ = start_import(src, f"k:{lib}", tmp_path / "home", lib)
        time.sleep(took * fraction)
        proc.kill()
        proc.wait()
        service, registry = open_service(lib.parent, kind)
        try:
            interrupted.append(library_state(service) != expected)
            service.import_everything(read_basic_memory(src).data)  # the command's own call, run again
            assert library_state(service) == expected, f"killed at {fraction:.0%} of {took:.1f}s"
        finally:
            registry.close()
    print(f"{sum(interrupted)} of {len(interrupted)} kills left the library halfway")
    assert any(interrupted), "no kill landed inside the import"


@pytest.mark.parametrize("given, expected", [
    ("2026-10-03T12:00:00.123Z", "2026-10-03T12:00:00.123Z"), ("2026-10-03T12:00Z", "2026-10-03T12:00:00Z"),
    ("2026-10-03T12:00:00.5+02:00", "2026-10-03T10:00:00.500000Z"), ("2026-10-03 12:00:00+00:00", "2026-10-03T12:00:00Z"),
])
def test_times_become_memlocis_utc_form(given, expected):
    from memloci.formats.source import utc_from_epoch, utc_from_text

    assert utc_from_text(given) == expected
    assert (utc_from_epoch(1763800000.25), utc_from_epoch(1763803600)) == ("2025-11-22T08:26:40.250000Z", "2025-11-22T09:26:40Z")


@pytest.mark.parametrize("bad", ["2026-10-03T12:00:00", "yesterday", "", 1234])
def test_a_time_without_a_zone_or_unreadable_is_refused_not_guessed(bad):
    from memloci.formats.source import utc_from_text

    with pytest.raises(ValidationError):
        utc_from_text(bad)
