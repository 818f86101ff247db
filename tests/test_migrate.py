"""`memloci migrate SOURCE TARGET`: real SQLite files, real Markdown folders, the real
PostgreSQL of tests/pg.py, and the command run as a real process."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import server_env

from memloci.app.registry import LibraryRegistry
from memloci.app.specs import LibrarySpec
from memloci.core.errors import ValidationError
from memloci.core.model import EntityInput, ObservationBatch, RelationInput
from memloci.core.settings import Settings
from memloci.formats.official import MemoryLine
from memloci.search.embedder import EmbedderHandle
from memloci.service import migrate as mig
from memloci.service.documents import NewEntityDocument
from memloci.service.facade import MemoryService
from memloci.store.protocols import Portable


def _fill(service: MemoryService) -> None:
    """A library with a bit of everything: entities, observations of several kinds, relations,
    free memories in a conversation, use counts, an update, deletes (undo records), the context."""
    service.create_entities([EntityInput("Alice", "person", ("likes green tea", "works at #acme")),
                             EntityInput("Bob", "person", ("plays chess", "to be removed")),
                             EntityInput("Acme", "company", ("makes anvils",))])
    service.create_relations([RelationInput("Alice", "knows", "Bob"), RelationInput("Alice", "works_at", "Acme")])
    service.add_observations([ObservationBatch("Bob", ("moved to Lisbon in 2024",))])
    service.delete_observations([ObservationBatch("Bob", ("to be removed",))])
    service.store_memory("Alice prefers meetings before noon", tags=["schedule"], entity="Alice",
                         memory_type="preference", importance="high")
    for i, text in enumerate(["we chose PostgreSQL for the shared memory", "the launch moved to March",
                              "budget approved for two more servers"]):
        service.store_memory(text, tags=["project", f"t{i}"], memory_type="decision",
                             metadata={"session": "s1", "turn": i})
    service.store_memory("a passing thought about anvils", importance="low")
    service.store_memory("to be deleted")
    service.retrieve_memory("which database did we choose")
    service.retrieve_memory("launch date")
    hits, _ = service.list_memories(page_size=50)
    by_text = {m.content: m for m in hits}
    service.update_memory(by_text["the launch moved to March"].content_hash, tags=["project", "launch"])
    service.delete_memory(by_text["to be deleted"].content_hash)
    service.store().update_context(lambda c: {**c, "active_task": "migrate the team's memory"}, origin="test")
    # the lifecycle: a memory superseded by another, one archived
    service.store_memory("the launch moved to April", tags=["project"],
                         supersedes=by_text["the launch moved to March"].content_hash)
    thought = next(m for m in service.list_memories(page_size=50)[0] if m.content == "a passing thought about anvils")
    service.lifecycle.archive([thought], service.store(), dry_run=False, why=lambda m: "old", args={})
    # dates long past, as an import gives them: a copy must keep them, not take its own day
    store = service.store()
    assert isinstance(store, Portable)
    store.import_memories([MemoryLine("the office moved to the harbour", ("office",), "event", "medium", {},
                                      "2024-05-01T09:00:00Z", "2024-05-02T10:30:00Z")], origin="test")
    store.restore_dates({"bob": ("2024-01-01T08:00:00Z", "2024-03-01T08:00:00Z", ["plays chess"],
                                 ["2024-01-01T08:00:00Z"])},
                        {("alice", "knows", "bob"): "2024-02-01T08:00:00Z"}, origin="test")


def _service(path: Path, spec: LibrarySpec, embedder: str) -> MemoryService:
    settings = Settings.from_env().with_flags(home=str(path))
    return MemoryService(LibraryRegistry([spec], settings=settings), EmbedderHandle(embedder, settings))


@pytest.fixture(scope="module")
def vectored(tmp_path_factory) -> Path:
    """A SQLite library filled by _fill, every memory embedded by the default model (minilm)."""
    folder = tmp_path_factory.mktemp("vectored")
    service = _service(folder, LibrarySpec("old", folder / "old.db"), "minilm")
    _fill(service)
    assert service.flush_embeddings(timeout=300)
    service.store().checkpoint()
    service.close()
    return folder / "old.db"


def _run(home: Path, *args: str, embedder: str = "minilm") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "memloci", "migrate", *args], capture_output=True, text=True,
                          env=server_env(home, MEMLOCI_EMBEDDER=embedder), timeout=600)


def _census(spec: LibrarySpec, home: Path, vectors: bool = True) -> mig.Census:
    from memloci.app.registry import open_store

    store = open_store(spec, home)
    store.open(create=False)
    try:
        return mig.census(store, with_vectors=vectors)
    finally:
        store.close()


def _same(a: mig.Census, b: mig.Census) -> None:
    assert a.counts == b.counts
    assert a.digests == b.digests
    assert a.vectors.keys() == b.vectors.keys()
    for key, vector in a.vectors.items():
        assert np.allclose(vector, b.vectors[key], atol=1e-6), key


def test_sqlite_to_postgres_and_back_keeps_everything(tmp_path, vectored, pg_library):
    source = tmp_path / "old.db"
    shutil.copy(vectored, source)
    home = tmp_path / "home"
    there = _run(home, f"old:{source}", pg_library.arg, "--json")
    assert there.returncode == 0, there.stderr
    report = json.loads(there.stdout)
    assert report["ok"] and report["vectors_copied"], report
    checks = {c["what"]: c for c in report["checks"]}
    assert checks["entities"]["target"] == 3 and checks["observations"]["target"] == 6
    assert checks["relations"]["target"] == 2 and checks["memories"]["target"] == 6
    assert checks["vectors"]["target"] == 12 and checks["vector values"]["equal"]
    assert checks["journal entries"]["source"] == checks["journal entries"]["target"] > 10
    assert "entities" in there.stderr and "journal" in there.stderr  # the progress bars

    back = tmp_path / "back.db"
    again = _run(home, pg_library.arg, f"back:{back}", "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["ok"]
    original = _census(LibrarySpec("old", source), home)
    _same(original, _census(pg_library.spec, home))
    _same(original, _census(LibrarySpec("back", back), home))
    assert original.counts["vectors"] == 12

    # the copy is a library like any other: it answers by meaning, and counts on from the copied journal
    service = _service(home, LibrarySpec("back", back), "minilm")
    try:
        found = service.retrieve_memory("which database did we pick", n_results=1).hits
        assert found[0].memory.content == "we chose PostgreSQL for the shared memory"
        assert service.store().read_context()["active_task"] == "migrate the team's memory"
        assert service.store().pending_count() == 0  # nothing left to embed: the vectors came along
    finally:
        service.close()


def test_another_model_leaves_vectors_for_the_target_to_make(tmp_path, vectored):
    source = tmp_path / "old.db"
    shutil.copy(vectored, source)
    result = _run(tmp_path / "home", f"old:{source}", f"new:{tmp_path / 'new.db'}", "--json", embedder="none")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["ok"] and not report["vectors_copied"]
    assert "vectors not copied" in " ".join(report["notes"]) and "vectors not copied" in result.stderr
    copy = _census(LibrarySpec("new", tmp_path / "new.db"), tmp_path, vectors=True)
    assert copy.counts["vectors"] == 0


def test_sqlite_to_markdown_and_back_keeps_graph_documents_and_memories(tmp_path):
    home = tmp_path / "home"
    service = _service(home, LibrarySpec("old", tmp_path / "old.db"), "none")
    _fill(service)
    service.add_entities([NewEntityDocument("Project Falcon", "project", aliases=("Falcon",),
                                            relations=(("owned_by", "Acme"),),
                                            content="The shared memory rollout.\n\n## Risks\n- the budget #risk\n")])
    service.close()
    old, notes, back = (LibrarySpec("old", tmp_path / "old.db"), LibrarySpec("notes", tmp_path / "notes", "markdown"),
                        LibrarySpec("back", tmp_path / "back.db"))
    settings = Settings.from_env().with_flags(home=str(home))
    for a, b in ((old, notes), (notes, back)):
        source, target = mig.open_pair(a, b, settings)
        report = mig.migrate(source, target, embedder_model=None)
        assert report.ok, [r for r in report.rows if not r["equal"]]
        source.close()
        target.close()
    original = _census(old, home, vectors=False)
    _same(original, _census(notes, home, vectors=False))
    _same(original, _census(back, home, vectors=False))
    falcon = (tmp_path / "notes" / "Project Falcon.md").read_text()
    assert "aliases:" in falcon and "The shared memory rollout." in falcon and "## Risks" in falcon
    journal = (tmp_path / "notes" / ".memloci" / "journal.md").read_text()
    assert "- by: migrate" not in journal and "· create_entities" in journal  # the source's journal, not the copy's


def test_the_progress_counts_agree_with_the_check_table(tmp_path):
    """Each progress bar's last count is what the check table counts under the bar's label: the
    memories part copies the observations and the free memories, and says so."""
    home = tmp_path / "home"
    service = _service(home, LibrarySpec("old", tmp_path / "old.db"), "none")
    _fill(service)
    service.close()
    source, target = mig.open_pair(LibrarySpec("old", tmp_path / "old.db"), LibrarySpec("new", tmp_path / "new.db"),
                                   Settings.from_env().with_flags(home=str(home)))
    last: dict[str, tuple[int, int]] = {}
    report = mig.migrate(source, target, embedder_model=None,
                         progress=lambda part, done, total: last.__setitem__(part, (done, total)))
    source.close()
    target.close()
    table = {r["what"]: r["target"] for r in report.rows}
    assert report.ok and table["observations"] > 0 and table["memories"] > 0
    assert set(last) == set(mig.PARTS) and all(done == total for done, total in last.values())
    assert mig.PART_LABELS["memories"] == "observations and memories"
    assert last["memories"][1] == table["observations"] + table["memories"]
    for part in ("entities", "relations"):
        assert last[part][1] == table[mig.PART_LABELS[part]]
    assert last["journal"][1] == table[mig.PART_LABELS["journal"]]


def test_refusals(tmp_path, pg_library):
    home = tmp_path / "home"
    taken = tmp_path / "taken.db"
    service = _service(home, LibrarySpec("taken", taken), "none")
    service.create_entities([EntityInput("Someone", "person", ())])
    service.close()
    before = taken.read_bytes()

    source = tmp_path / "src.db"
    service = _service(home, LibrarySpec("src", source), "none")
    service.create_entities([EntityInput("Alice", "person", ("x",))])
    service.close()

    full = _run(home, f"src:{source}", f"taken:{taken}", embedder="none")
    assert full.returncode == 1
    assert "target: library 'taken'" in full.stderr and "is not empty: it holds 1 entities" in full.stderr
    assert taken.read_bytes() == before

    folder = tmp_path / "my notes"  # a person's notes, never opened by memloci: not an empty library
    folder.mkdir()
    (folder / "Ideas.md").write_text("# Ideas\n\nWrite more.\n")
    notes = _run(home, f"src:{source}", f"notes:{folder}", embedder="none")
    assert notes.returncode == 1 and "is not empty: it holds 1 entities" in notes.stderr
    assert (folder / "Ideas.md").read_text() == "# Ideas\n\nWrite more.\n"

    same = _run(home, f"src:{source}", f"other:{source}", embedder="none")
    assert same.returncode == 1 and "is the source library itself" in same.stderr

    missing = tmp_path / "nothing.db"
    gone = _run(home, f"gone:{missing}", f"new:{tmp_path / 'new.db'}", embedder="none")
    assert gone.returncode == 1 and "source:" in gone.stderr
    assert not missing.exists() and not (tmp_path / "new.db").exists()

    from pg import fresh_library_name

    nobody = fresh_library_name()  # a library the database does not hold: refused, and not created
    unknown = _run(home, f"{nobody}:{pg_library.url}", f"new:{tmp_path / 'new.db'}", embedder="none")
    assert unknown.returncode == 1 and "source:" in unknown.stderr and "does not exist" in unknown.stderr
    import psycopg

    with psycopg.connect(pg_library.url) as conn:
        assert conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (f"memloci_{nobody}",)).fetchone() is None

    scheme = _run(home, f"src:{source}", "team:mysql://host/db", embedder="none")
    assert scheme.returncode == 1 and "the URL scheme 'mysql' is not served" in scheme.stderr

    # a source holding notes with bodies goes into postgres with its prose
    service = _service(home, LibrarySpec("src", source), "none")
    service.add_entities([NewEntityDocument("Notes", "note", content="Prose every engine keeps.\n")])
    kept = service.read_entities(["Notes"])
    service.close()
    copied = _run(home, f"src:{source}", pg_library.arg, embedder="none")
    assert copied.returncode == 0, copied.stderr
    target = _service(home, pg_library.spec, "none")
    try:
        assert target.read_entities(["Notes"]) == kept
    finally:
        target.close()


def test_markdown_to_postgres_and_back(tmp_path, pg_library):
    home = tmp_path / "home"
    notes = LibrarySpec("notes", tmp_path / "notes", "markdown")
    service = _service(home, notes, "none")
    _fill(service)
    service.close()
    again = LibrarySpec("again", tmp_path / "again", "markdown")
    settings = Settings.from_env().with_flags(home=str(home))
    for a, b in ((notes, pg_library.spec), (pg_library.spec, again)):
        source, target = mig.open_pair(a, b, settings)
        report = mig.migrate(source, target, embedder_model=None)
        assert report.ok, [r for r in report.rows if not r["equal"]]
        source.close()
        target.close()
    original = _census(notes, home, vectors=False)
    _same(original, _census(pg_library.spec, home, vectors=False))
    _same(original, _census(again, home, vectors=False))
    # the copy's files hold what its index holds: an index rebuilt from them alone reads the same
    # entities, dates and memories back (use counts and relation dates live in the index only)
    from memloci.app.registry import open_store

    copy = open_store(again, home)
    copy.open(create=False)
    try:
        copy.rebuild_index()
        rebuilt = mig.census(copy, with_vectors=False)
    finally:
        copy.close()
    for what in ("entity fields and dates", "content hashes", "memory fields"):
        assert rebuilt.digests[what] == original.digests[what], what
    assert {**rebuilt.counts, "journal entries": 0} == {**original.counts, "journal entries": 0}  # (+ the rebuild's)
    assert "created: 2024-01-01T08:00:00Z" in (tmp_path / "again" / "Bob.md").read_text()
    assert "the office moved to the harbour" in (tmp_path / "again" / ".memloci" / "memories" / "2024-05-01.md").read_text()


def test_a_source_the_target_schema_refuses_is_refused_whole_before_any_write(tmp_path):
    """The target's schema judges the whole source first: names, types, relation types,
    observations, and cycles (which a copy written step by step would only meet after writing
    every entity)."""
    from memloci.app.registry import open_store
    from memloci.core.schema import STRICT

    home = tmp_path / "home"
    settings = Settings.from_env().with_flags(home=str(home))
    cyclic = LibrarySpec("cyclic", tmp_path / "cyclic.db")
    service = _service(home, cyclic, "none")
    service.create_entities([EntityInput("a", "person", ("x",)), EntityInput("b", "person", ())])
    service.create_relations([RelationInput("a", "knows", "b"), RelationInput("b", "knows", "a")])
    service.close()
    loose = LibrarySpec("loose", tmp_path / "loose.db")
    service = _service(home, loose, "none")
    service.create_entities([EntityInput(f"Person {i}", "human", ("o" * 600,)) for i in range(4)])
    service.create_relations([RelationInput("Person 0", "likes", "Person 1")])
    service.store_memory("p" * 600, entity="Person 2", memory_type="preference")
    service.close()

    for source_spec, wanted in ((cyclic, ["cycle a -> b -> a", "in 1 place(s)"]),
                                (loose, ["in 14 place(s)", "name Person 0: name: 'Person 0' does not match",
                                         "and 9 more"])):
        strict = LibrarySpec("strict", tmp_path / f"strict-{source_spec.name}.db", "sqlite", STRICT)
        source, target = mig.open_pair(source_spec, strict, settings)
        try:
            with pytest.raises(mig.ValidationError) as refused:
                mig.migrate(source, target, embedder_model=None)
        finally:
            source.close()
            target.close()
        message = refused.value.message
        assert "so nothing was written" in message and "schema 'strict'" in message, message
        for part in wanted:
            assert part in message, (part, message)
        copy = open_store(strict, home)
        copy.open(create=False)
        try:
            held = copy.stats()
            assert (held.entities, held.relations, held.observations, held.memories) == (0, 0, 0, 0)
        finally:
            copy.close()
    details = refused.value.details
    assert details["count"] == 14
    assert {p["what"] for p in details["violations"]} == {"name", "type", "observation", "relation"}


def test_restore_dates_on_markdown_dates_the_files_it_created_and_no_others(tmp_path):
    """restore_dates (migrate, `memloci import jsonl`) keeps a Markdown library's files and index
    in agreement: a file memloci created takes the dates; a person's file keeps its bytes."""
    from memloci.app.registry import open_store

    home = tmp_path / "home"
    notes = LibrarySpec("notes", tmp_path / "notes", "markdown")
    (tmp_path / "notes").mkdir()
    mine = "---\ntype: person\n---\n# Carol\n\n- drinks coffee\n"
    (tmp_path / "notes" / "Carol.md").write_text(mine)
    service = _service(home, notes, "none")
    service.create_entities([EntityInput("Bob", "person", ("plays chess",))])
    store = service.store()
    assert isinstance(store, Portable)
    store.restore_dates({"bob": ("2024-01-01T08:00:00Z", "2024-03-01T08:00:00Z", ["plays chess"],
                                 ["2024-01-02T08:00:00Z"]),
                         "carol": ("2023-01-01T08:00:00Z", "2023-01-01T08:00:00Z", (), ())}, {}, origin="test")
    service.close()
    bob = (tmp_path / "notes" / "Bob.md").read_text()
    assert "created: 2024-01-01T08:00:00Z" in bob and "2024-03-01T08:00:00Z" in bob, bob
    assert "2024-01-02" in bob, bob
    assert (tmp_path / "notes" / "Carol.md").read_text() == mine

    # an index rebuilt from the files alone reads Bob's dates back
    copy = open_store(notes, home)
    copy.open(create=False)
    try:
        copy.rebuild_index()
        (entity,) = copy.open_entities(["Bob"]).entities
        assert (entity.created_at, entity.updated_at) == ("2024-01-01T08:00:00Z", "2024-03-01T08:00:00Z")
        assert [o.created_at for o in entity.observations] == ["2024-01-02T08:00:00Z"]
    finally:
        copy.close()


def _rows(url: str, schema: str, query: str) -> list[tuple]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'SET search_path TO "{schema}", public')
        return [tuple(r) for r in conn.execute(query).fetchall()]


def test_into_postgres_memories_go_whole_as_each_write_would_leave_them(tmp_path, pg_url):
    """The copy into PostgreSQL (one transaction of COPYs, store.MemoryCopies) leaves what the
    writes one by one leave: the same hashes, thread contexts, tag keys, entity tags and full
    text, and every index of a library made by its writes."""
    from pg import pg_library_url

    from memloci.store.postgres.connection import schema_for
    from memloci.store.postgres.engine import PostgresStore

    home = tmp_path / "home"
    made, copied = pg_library_url(pg_url), pg_library_url(pg_url)
    # the same library written twice: once call by call on PostgreSQL, once on SQLite then copied
    for spec in (made.spec, LibrarySpec("old", tmp_path / "old.db")):
        service = _service(home, spec, "none")
        _fill(service)
        for turn in ("Did you book the hotel?", "Yes, the one by the lake.", "Great, see you there"):
            service.store_memory(turn, memory_type="dialogue", metadata={"session": 7}, tags=["Trip"])
        service.store_memory("ships #tea from #Lisbon", entity="Bob", memory_type="fact", tags=["x"])
        service.close()
    source, target = mig.open_pair(LibrarySpec("old", tmp_path / "old.db"), copied.spec,
                                   Settings.from_env().with_flags(home=str(home)))
    assert isinstance(target, PostgresStore)
    report = mig.migrate(source, target, embedder_model=None)
    assert report.ok, [r for r in report.rows if not r["equal"]]
    source.close()
    # a second copy into it is refused whole: it holds memories now
    with pytest.raises(ValidationError, match="holds memories already"):
        target.copy_memories([], {}, None, origin="test")
    target.close()

    def memories(lib) -> list[tuple]:
        return _rows(pg_url, schema_for(lib.name), """
            SELECT m.content, m.content_hash, m.thread, m.context, m.search::text, m.search_length,
                   (SELECT array_agg(t.tag ORDER BY t.tag) FROM memory_tags t WHERE t.memory_id = m.id)
            FROM memories m ORDER BY m.content_hash""")

    def entities(lib) -> list[tuple]:
        return _rows(pg_url, schema_for(lib.name), "SELECT name, tags::text, search::text FROM entities ORDER BY name")

    def indexes(lib) -> list[str]:
        return [d.replace(schema_for(lib.name), "S") for (d,) in _rows(
            pg_url, schema_for(lib.name), "SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema() "
                                          "ORDER BY indexname")]

    assert memories(copied) == memories(made)
    assert [r for r in memories(copied) if r[0] == "Yes, the one by the lake."][0][3] == \
        "Did you book the hotel?\nGreat, see you there"
    assert entities(copied) == entities(made)
    assert "tea" in dict((n, t) for n, t, _ in entities(copied))["Bob"]
    assert indexes(copied) == indexes(made)
    # the totals one BM25 reads are kept by the tables' own triggers, COPY or not
    totals = "SELECT documents, tokens FROM search_totals"
    assert _rows(pg_url, schema_for(copied.name), totals) == _rows(pg_url, schema_for(made.name), totals)
