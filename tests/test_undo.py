"""Undo and history: every destructive change keeps what it removed, and `undo` puts it back.

Real SQLite files and real Markdown folders in temp dirs; each undo is checked against a full
dump of the library (entities, observations with their dates, relations with theirs, free
memories with every field), and for Markdown libraries against the files' bytes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from memloci.app.registry import LibraryRegistry
from memloci.app.specs import LibrarySpec
from memloci.core.errors import ConflictError, NotFoundError, ValidationError
from memloci.core.model import EntityInput, ObservationBatch, RelationInput
from memloci.service.facade import MemoryService

KINDS = ["sqlite", "markdown"]

# A note a person wrote: CRLF line ends, front matter with a comment and a block list, no
# observations section memloci would write, a link to another note.
HAND_NOTE = (b"---\r\naliases:\r\n  - The Alpha   # old name\r\ntags: [x, 'y']\r\nsource: notebook\r\n---\r\n"
             b"# alpha\r\n\r\nNotes kept for years. See [[beta]].\r\n\r\n## Log\r\n\r\n* 2019: started\r\n")


def open_service(tmp: Path, kind: str) -> tuple[MemoryService, LibraryRegistry]:
    path = tmp / ("lib.db" if kind == "sqlite" else "lib")
    registry = LibraryRegistry([LibrarySpec("default", path, kind)])
    return MemoryService(registry), registry


@pytest.fixture(params=KINDS)
def lib(request, tmp_path):
    service, registry = open_service(tmp_path, request.param)
    service.kind = request.param
    service.root = tmp_path / "lib"
    yield service
    registry.close()


def dump(service: MemoryService) -> dict:
    graph = service.export_graph(order="name")
    memories, _ = service.list_memories(page_size=1000)
    return {
        "entities": sorted((e.name, e.entity_type, tuple(e.aliases), e.created_at,
                            tuple((o.content, o.created_at) for o in e.observations)) for e in graph.entities),
        "relations": sorted((r.from_entity, r.relation_type, r.to_entity, r.created_at) for r in graph.relations),
        "memories": sorted((m.content, m.content_hash, m.tags, m.memory_type, m.importance,
                            json.dumps(m.metadata, sort_keys=True), m.created_at, m.updated_at) for m in memories),
    }


def files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*.md"))
            if ".memloci" not in p.parts and p.name != "journal.md"}


def populate(service: MemoryService) -> None:
    service.create_entities([EntityInput("alpha", "project", ("uses FastAPI", "started 2024")),
                             EntityInput("beta", "person", ("likes tea",)),
                             EntityInput("gamma", "tool", ("fast",))])
    service.create_relations([RelationInput("beta", "works_on", "alpha"), RelationInput("alpha", "uses", "gamma")])
    service.store_memory("the deploy runs on Fridays", tags=["ops", "deploy"], memory_type="fact",
                         metadata={"source": "chat", "n": 3}, importance="high")


def last_change(service: MemoryService) -> int:
    return service.history(limit=1)[0].id


CHANGES = {
    "delete_entities": lambda s: s.delete_entities(["alpha"]),
    "delete_observations": lambda s: s.delete_observations([ObservationBatch("alpha", ("uses FastAPI",))]),
    "delete_relations": lambda s: s.delete_relations([RelationInput("beta", "works_on", "alpha")]),
    "rename_entity": lambda s: s.rename_entity("alpha", "omega"),
    "merge_entities": lambda s: s.merge_entities(["gamma"], "alpha"),
    "document edit": lambda s: s.replace_entity_content("beta", "likes tea", "likes coffee"),
    "update_memory": lambda s: s.update_memory(s.list_memories()[0][0].content_hash, content="the deploy runs daily",
                                               tags=["ops"], metadata={"n": 4}),
    "delete_memory": lambda s: s.delete_memory(s.list_memories()[0][0].content_hash),
}


@pytest.mark.parametrize("change", list(CHANGES))
def test_undo_puts_back_exactly_what_the_change_removed(lib, change):
    populate(lib)
    before = dump(lib)
    before_files = files(lib.root) if lib.kind == "markdown" else None
    CHANGES[change](lib)
    assert dump(lib) != before
    change_id = last_change(lib)
    result = lib.undo(change_id)
    assert result["undid"] == change_id
    assert dump(lib) == before
    if before_files is not None:
        assert files(lib.root) == before_files
    entry = lib.history(limit=1)[0]
    assert entry.action == "undo" and entry.detail["undid"] == change_id


def test_undo_is_itself_undoable(lib):
    populate(lib)
    lib.delete_entities(["alpha"])
    deleted = dump(lib)
    lib.undo(last_change(lib))
    lib.undo(last_change(lib))  # undoing the undo deletes alpha again
    assert dump(lib) == deleted


def test_the_journal_keeps_whole_rows_with_dates(lib):
    populate(lib)
    lib.delete_entities(["alpha"])
    detail = lib.history(limit=1)[0].detail
    kept = {e["name"]: e for e in detail["undo"]["entities"]}["alpha"]
    assert [o["content"] for o in kept["observations"]] == ["uses FastAPI", "started 2024"]
    assert all(o["created_at"] for o in kept["observations"])
    assert ["beta", "works_on", "alpha"] == kept["relations"][0][:3] or ["beta", "works_on", "alpha"] in [
        r[:3] for r in kept["relations"]]
    if lib.kind == "markdown":
        assert detail["undo"]["files"]["alpha.md"].startswith("---\n")
        assert detail["undo"]["files_after"]["alpha.md"] is None


def test_a_new_entity_with_the_name_blocks_the_undo(lib):
    populate(lib)
    lib.delete_entities(["alpha"])
    change_id = last_change(lib)
    lib.create_entities([EntityInput("alpha", "other", ("new one",))])
    state = dump(lib)
    with pytest.raises(ConflictError) as err:
        lib.undo(change_id)
    assert "alpha" in err.value.message and "nothing was changed" in err.value.message
    assert dump(lib) == state


def test_a_later_change_blocks_the_undo_and_says_which(lib):
    populate(lib)
    lib.delete_observations([ObservationBatch("alpha", ("uses FastAPI",))])
    change_id = last_change(lib)
    lib.delete_observations([ObservationBatch("alpha", ("started 2024",))])
    later = last_change(lib)
    state = dump(lib)
    with pytest.raises(ConflictError) as err:
        lib.undo(change_id)
    assert f"change #{later}" in err.value.message
    assert dump(lib) == state
    lib.undo(later)  # newest first: then the older one goes back too
    lib.undo(change_id)
    alpha = lib.open_nodes(["alpha"]).entities[0]
    assert [o.content for o in alpha.observations] == ["uses FastAPI", "started 2024"]


def test_adding_after_a_change_blocks_its_undo(lib):
    populate(lib)
    lib.delete_observations([ObservationBatch("alpha", ("uses FastAPI",))])
    change_id = last_change(lib)
    lib.add_observations([ObservationBatch("alpha", ("now on Litestar",))])
    with pytest.raises(ConflictError) as err:
        lib.undo(change_id)
    assert "alpha" in err.value.message and "add_observations" in err.value.message


def test_unknown_and_not_undoable_changes_are_refused(lib):
    populate(lib)
    with pytest.raises(NotFoundError):
        lib.undo(999)
    with pytest.raises(ValidationError):
        lib.undo(1)  # create_entities removed nothing
    with pytest.raises(ValidationError):
        lib.undo("1")  # type: ignore[arg-type]


def test_markdown_delete_then_undo_brings_a_hand_written_note_back_byte_for_byte(tmp_path):
    root = tmp_path / "lib"
    (root / "notes").mkdir(parents=True)
    (root / "notes" / "alpha.md").write_bytes(HAND_NOTE)
    beta = b"\xef\xbb\xbf# beta\n\nMy friend. Works with [[alpha]].\n"  # BOM, no front matter
    (root / "beta.md").write_bytes(beta)
    service, registry = open_service(tmp_path, "markdown")
    try:
        assert sorted(e.name for e in service.export_graph().entities) == ["alpha", "beta"]
        service.delete_entities(["alpha"])
        assert not (root / "notes" / "alpha.md").exists()
        service.undo(last_change(service))
        assert (root / "notes" / "alpha.md").read_bytes() == HAND_NOTE
        assert (root / "beta.md").read_bytes() == beta
        graph = service.export_graph()
        assert {(r.from_entity, r.to_entity) for r in graph.relations} >= {("alpha", "beta"), ("beta", "alpha")}
    finally:
        registry.close()


def test_markdown_a_stored_memory_keeps_its_day_file_as_a_length_and_its_undo_cuts_it_back(tmp_path):
    """Storing a memory appends to its day file: the undo record keeps the old length, not the
    file (a day of memories would copy the file into journal.md once per memory), and the undo
    gives back the day file's bytes."""
    service, registry = open_service(tmp_path, "markdown")
    try:
        service.store_memory("the first memory of the day")
        (day,) = (tmp_path / "lib").rglob("memories/*.md")
        first = day.read_bytes()
        service.store_memory("the second memory of the day")
        entry = service.history(limit=1)[0]
        rel = day.relative_to(tmp_path / "lib").as_posix()
        assert entry.detail["undo"]["files"] == {rel: {"prefix": len(first)}}
        service.undo(entry.id)
        assert day.read_bytes() == first
        assert [m.content for m in service.list_memories(page_size=10)[0]] == ["the first memory of the day"]
        service.undo(last_change(service))  # the undo undone: the memory is back
        assert "the second memory of the day" in day.read_text()
    finally:
        registry.close()


def test_markdown_history_survives_a_fresh_index_and_hides_rescans(tmp_path):
    service, registry = open_service(tmp_path, "markdown")
    root = tmp_path / "lib"
    for i in range(5):
        service.create_entities([EntityInput(f"e{i}", "thing", (f"fact {i}",))])
    for i in range(5):
        service.delete_observations([ObservationBatch(f"e{i}", (f"fact {i}",))])
    registry.close()
    assert (root / ".memloci" / "journal.md").read_text().count("\n## ") == 10
    for part in (root / ".memloci").iterdir():  # a clone: the files and the journal (git keeps it), no index
        if part.name != "journal.md":
            shutil.rmtree(part) if part.is_dir() else part.unlink()
    (root / "hand.md").write_text("# hand\n\nwritten by a person\n")
    service, registry = open_service(tmp_path, "markdown")
    try:
        shown = service.history(limit=20)
        assert [e.action for e in shown] == ["delete_observations"] * 5 + ["create_entities"] * 5
        assert any(e.action == "sync" for e in service.history(limit=20, internal=True))
        # the undo records came back with the journal: the newest change can still be undone
        service.undo(shown[0].id)
        assert [o.content for o in service.open_nodes(["e4"]).entities[0].observations] == ["fact 4"]
    finally:
        registry.close()


def memloci(home: Path, *args: str) -> subprocess.CompletedProcess:
    env = {"MEMLOCI_HOME": str(home), "MEMLOCI_EMBEDDER": "none", "PATH": "/usr/bin:/bin",
           "PYTHONPATH": os.environ.get("PYTHONPATH", "")}  # the code under test, not the installed copy
    return subprocess.run([sys.executable, "-m", "memloci", *args], capture_output=True, text=True, env=env, timeout=120)


@pytest.mark.parametrize("kind", KINDS)
def test_cli_history_and_undo(tmp_path, kind):
    path = tmp_path / ("lib.db" if kind == "sqlite" else "lib")
    service, registry = open_service(tmp_path, kind)
    populate(service)
    service.store_memory("the deploy runs on Fridays", tags=["release [v2]"])  # told again, one tag more
    service.delete_entities(["gamma"])
    registry.close()
    spec = f"default:{path}"
    home = tmp_path / "home"
    out = memloci(home, "history", "--details", "--libraries", spec)
    assert out.returncode == 0, out.stderr
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    assert lines[0]["action"] == "delete_entities" and isinstance(lines[0]["id"], int)
    table = memloci(home, "history", "--libraries", spec)
    assert "delete_entities" in table.stdout and str(lines[0]["id"]) in table.stdout
    # a memory's change names the memory by its text
    assert lines[1]["action"] == "store_memory" and lines[1]["detail"]["added_tags"] == ["release [v2]"]
    assert '"the deploy runs on Fridays"' in next(row for row in table.stdout.splitlines() if f" {lines[1]['id']} " in row)
    done = memloci(home, "undo", str(lines[0]["id"]), "--libraries", spec)
    assert done.returncode == 0, done.stderr
    assert "gamma" in done.stdout
    again = memloci(home, "undo", str(lines[0]["id"]), "--libraries", spec)
    assert again.returncode == 1 and "CONFLICT" in again.stderr and "gamma" in again.stderr


@pytest.mark.full  # SIGKILL
def test_undo_killed_at_any_moment_is_all_or_nothing(tmp_path):
    """SIGKILL `memloci undo` of a rename that rewrote 31 notes, at many moments: afterwards the
    folder is wholly as before the undo or wholly as after it, and the index agrees."""
    import random
    import signal
    import time

    base = tmp_path / "base"
    service, registry = open_service(base, "markdown")
    service.create_entities([EntityInput("hub", "thing", ("center of it all",))])
    service.create_entities([EntityInput(f"n{i}", "note", (f"see [[hub]] {i}",)) for i in range(30)])
    service.rename_entity("hub", "center")
    change_id = last_change(service)
    registry.close()
    renamed = files(base / "lib")
    undone_dir = tmp_path / "undone"
    skip = shutil.ignore_patterns("staging")  # leftovers of finished changes, still being cleared
    shutil.copytree(base, undone_dir, ignore=skip)
    service, registry = open_service(undone_dir, "markdown")
    service.undo(change_id)
    registry.close()
    undone = files(undone_dir / "lib")
    assert undone != renamed
    home = tmp_path / "home"
    rng = random.Random(7)
    for attempt in range(10):
        work = tmp_path / f"run{attempt}"
        shutil.copytree(base, work, ignore=skip)
        proc = subprocess.Popen([sys.executable, "-m", "memloci", "undo", str(change_id), "--libraries",
                                 f"default:{work / 'lib'}"], env={"MEMLOCI_HOME": str(home), "MEMLOCI_EMBEDDER": "none",
                                                                  "PATH": "/usr/bin:/bin"},
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.5, 4.5))  # the whole command takes 1-4 s here: start, open, undo
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        service, registry = open_service(work, "markdown")
        try:
            service.history(limit=1)  # opening recovers an interrupted change
            now = files(work / "lib")
            assert now in (renamed, undone), f"attempt {attempt}: a half-done undo"
            names = {e.name for e in service.export_graph().entities}
            assert ("hub" in names) == (now == undone) and ("center" in names) == (now == renamed)
            leftovers = [p for p in (work / "lib").rglob("*") if p.name.endswith(".tmp")]
            assert not leftovers
        finally:
            registry.close()


def test_a_manual_edit_is_undone(lib):
    lib.add_manual_section("## Conventions", "Names are lowercase.")
    before = lib.read_manual()["content"]
    lib.delete_manual_section("## Conventions", "Names are lowercase.")
    assert "lowercase" not in lib.read_manual()["content"]
    lib.undo(last_change(lib))
    assert lib.read_manual()["content"] == before
