"""A memory's content_hash names its content (and an observation's entity), never a row id;
per-library state is keyed by the library's file, never by its display name."""

from __future__ import annotations

import shutil
import sqlite3
import unicodedata
from pathlib import Path

import pytest

from memloci.app.projects import ProjectRef
from memloci.app.registry import LibraryRegistry
from memloci.app.specs import LibrarySpec
from memloci.core.model import EntityInput, ObservationBatch
from memloci.search import lexical
from memloci.search.embedder import EmbedderHandle
from memloci.service.facade import MemoryService
from memloci.store.sqlite.schema import MIGRATIONS

# What `.memloci/.gitignore` keeps in git: the journal and the free memories; the index is rebuilt.
VERSIONED = {"journal.md", "memories", ".gitignore"}


def unversioned(folder: str, names: list[str]) -> list[str]:
    """copytree's ignore: what a git clone of a library does not bring (its index)."""
    return [n for n in names if Path(folder).name == ".memloci" and n not in VERSIONED]


def drop_index(library: Path) -> None:
    """Leave a library as a fresh clone has it: its files, journal and memories, no index."""
    for path in (library / ".memloci").iterdir():
        if path.name not in VERSIONED:
            shutil.rmtree(path) if path.is_dir() else path.unlink()


def hashes(db: Path) -> dict[str, str]:
    with sqlite3.connect(db) as conn:
        return dict(conn.execute("SELECT content, content_hash FROM memories"))


def service_for(spec: LibrarySpec) -> MemoryService:
    return MemoryService(LibraryRegistry([spec]))


def fill(service: MemoryService, order: list[str]) -> None:
    service.store_memory("a free memory about deploys", tags=["ops"])
    for name in order:  # row ids follow the order; hashes must not
        service.create_entities([EntityInput(name, "note", (f"{name} runs on port 80", "shared fact"))])


def test_hashes_do_not_depend_on_row_ids(tmp_path):
    one, two = service_for(LibrarySpec("a", tmp_path / "a.db")), service_for(LibrarySpec("b", tmp_path / "b.db"))
    fill(one, ["alpha", "beta", "gamma"])
    fill(two, ["gamma", "beta", "alpha"])
    one.libraries.close(), two.libraries.close()
    with sqlite3.connect(tmp_path / "a.db") as a, sqlite3.connect(tmp_path / "b.db") as b:
        query = "SELECT ifnull(e.name, ''), m.content, m.content_hash FROM memories m LEFT JOIN entities e ON e.id = m.entity_id"
        rows_a, rows_b = sorted(a.execute(query)), sorted(b.execute(query))
    assert rows_a == rows_b
    # "shared fact" is held by three entities: three distinct hashes, each from the entity's name
    shared = {name: h for name, content, h in rows_a if content == "shared fact"}
    assert len(set(shared.values())) == 3
    assert shared["beta"] == lexical.content_hash("shared fact", "beta") == lexical.content_hash("shared  fact", "BETA")
    assert lexical.content_hash("a free memory about deploys") in {h for _, _, h in rows_a}


def test_markdown_hashes_survive_a_lost_index_and_a_reindex(tmp_path):
    folder = tmp_path / "notes"
    service = service_for(LibrarySpec("notes", folder, "markdown"))
    service.create_entities([EntityInput("Server", "host", ("runs nginx", "has 4 cores"))])
    memory, _ = service.store_memory("backup every night at 2am", tags=["ops"])
    before = hashes(folder / ".memloci" / "index.db")
    service.libraries.close()

    drop_index(folder)  # a fresh clone: the files only
    service = service_for(LibrarySpec("notes", folder, "markdown"))
    service.reindex()
    assert hashes(folder / ".memloci" / "index.db") == before
    service.reindex()  # and once more, on an index that exists
    assert hashes(folder / ".memloci" / "index.db") == before

    # the handles a client kept still work
    updated = service.update_memory(memory.content_hash, tags=["ops", "nightly"])
    assert updated.content_hash == memory.content_hash
    assert len(service.delete_memory(before["runs nginx"])) == 1
    assert "runs nginx" not in (folder / "Server.md").read_text()
    service.libraries.close()


def test_a_rename_gives_observations_the_new_names_hashes(tmp_path):
    service = service_for(LibrarySpec("notes", tmp_path / "notes", "markdown"))
    service.create_entities([EntityInput("old-name", "note", ("a fact",))])
    service.rename_entity("old-name", "new-name")
    new = lexical.content_hash("a fact", "new-name")
    assert hashes(tmp_path / "notes" / ".memloci" / "index.db")["a fact"] == new
    assert len(service.delete_memory(new)) == 1
    service.libraries.close()


def test_merge_and_delete_observations_use_the_name(tmp_path):
    service = service_for(LibrarySpec("a", tmp_path / "a.db"))
    service.create_entities([EntityInput("src", "note", ("moved fact",)), EntityInput("dst", "note", ())])
    service.merge_entities(["src"], "dst")
    assert hashes(tmp_path / "a.db")["moved fact"] == lexical.content_hash("moved fact", "dst")
    service.delete_observations([ObservationBatch("dst", ("moved fact",))])
    assert "moved fact" not in hashes(tmp_path / "a.db")
    service.libraries.close()


def old_hash(text: str, entity_id: int | None) -> str:
    """content_hash as memloci computed it before migration 4 (with the row id)."""
    import hashlib

    owner = f"entity:{entity_id}\n" if entity_id is not None else ""
    return hashlib.sha256((owner + lexical.normalize_content(text)).encode()).hexdigest()


def test_migration_recomputes_hashes_and_keeps_them_unique(tmp_path):
    """A library written before the rule: hashes with row ids, and two entities whose names
    differ only in Unicode form (NFC 'résumé' and NFD 'résumé') holding the same observation."""
    db = tmp_path / "old.db"
    conn = sqlite3.connect(db, isolation_level=None)
    for script in MIGRATIONS[:3]:
        conn.executescript(script)
    nfc, nfd = unicodedata.normalize("NFC", "résumé"), unicodedata.normalize("NFD", "résumé")
    at = "2026-01-01T00:00:00Z"
    for i, name in ((1, nfc), (2, nfd), (3, "other")):
        conn.execute("INSERT INTO entities (id, name, name_key, entity_type, created_at, updated_at) "
                     "VALUES (?, ?, ?, 'note', ?, ?)", (i, name, name.casefold(), at, at))
    rows = [(10, 1, "same text", "2026-01-01T00:00:01Z"), (11, 2, "same text", "2026-01-01T00:00:02Z"),
            (12, 3, "other text", at), (13, None, "free text", at)]
    for mid, owner, text, created in rows:
        conn.execute("INSERT INTO memories (id, entity_id, content, content_hash, memory_type, created_at, updated_at) "
                     "VALUES (?, ?, ?, ?, 'observation', ?, ?)", (mid, owner, text, old_hash(text, owner), created, created))
    conn.execute("PRAGMA user_version = 3")
    conn.close()

    service = service_for(LibrarySpec("old", db))
    service.stats()  # opens, migrates
    service.libraries.close()
    with sqlite3.connect(db) as conn:
        got = dict(conn.execute("SELECT id, content_hash FROM memories"))
    assert got[12] == lexical.content_hash("other text", "other")
    assert got[13] == lexical.content_hash("free text") == old_hash("free text", None)  # free memories keep theirs
    assert got[10] == lexical.content_hash("same text", nfc)  # the earlier one keeps the plain hash
    assert got[11] == lexical.content_hash("same text 2026-01-01T00:00:02Z", nfd)  # the later one: its date added
    assert len(set(got.values())) == 4


@pytest.mark.parametrize("embedder", ["none", "minilm"])
def test_two_projects_with_one_folder_name_never_share_state(tmp_path, embedder):
    roots = []
    for parent in ("one", "two"):
        root = tmp_path / parent / "app"
        (root / ".git").mkdir(parents=True)
        roots.append(root)
    registry = LibraryRegistry([LibrarySpec("default", tmp_path / "default.db")])
    service = MemoryService(registry, EmbedderHandle(embedder))
    try:
        one, two = (ProjectRef(str(r), str(r)) for r in roots)
        service.store_memory("the staging database runs PostgreSQL 16", library=one)
        service.store_memory("the billing service is written in Rust", library=two)
        service.flush_embeddings(library=one)
        service.flush_embeddings(library=two)
        for ref, mine, theirs in ((one, "PostgreSQL", "Rust"), (two, "Rust", "PostgreSQL")):
            for query in ("which database does staging use", "what language is billing written in"):
                found = [h.memory.content for h in service.retrieve_memory(query, n_results=5, library=ref).hits]
                assert all(theirs not in text for text in found), (query, found)
            assert any(mine in h.memory.content for h in
                       service.retrieve_memory(mine, n_results=5, library=ref).hits)
        if embedder != "none":
            assert len(service.vectors.indexes()) == 2  # one vector index per project root
            assert {len(index) for index in service.vectors.indexes()} == {1}
    finally:
        service.close()


def test_handles_survive_a_clone_of_a_project_over_mcp(tmp_path, home):
    """A project's memory made by one server, cloned without its index, answered by another:
    the content_hash a client kept still finds the memory (two real servers, one per home)."""
    from conftest import run_session

    app = tmp_path / "app"
    (app / ".git").mkdir(parents=True)
    kept: dict[str, str] = {}

    async def first(c):
        await c.ok("create_entities", project_path=str(app), confirm_new_project_root=str(app),
                   entities=[{"name": "zeta", "entityType": "service", "observations": ["first made"]},
                             {"name": "api", "entityType": "service", "observations": []}])
        # the clone indexes api.md before zeta.md: row ids differ there, hashes must not
        _, out = await c.ok("store_memory", project_path=str(app), content="api answers on port 8080", entity="api")
        kept["observation"] = out["content_hash"]
        _, out = await c.ok("store_memory", project_path=str(app), content="release on fridays")
        kept["free"] = out["content_hash"]

    run_session(home, first)
    clone = tmp_path / "clone" / "app"
    shutil.copytree(app, clone, ignore=unversioned)  # what git clone brings

    async def second(c):
        _, out = await c.ok("update_memory", project_path=str(clone), content_hash=kept["free"], tags=["process"])
        assert out["content_hash"] == kept["free"]
        _, out = await c.ok("delete_memory", project_path=str(clone), content_hash=kept["observation"])
        assert out["deleted"] == 1

    run_session(tmp_path / "home2", second)
    assert "port 8080" not in (clone / ".mcp" / "api.md").read_text()
    assert "port 8080" in (app / ".mcp" / "api.md").read_text()
