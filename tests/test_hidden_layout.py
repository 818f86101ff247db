"""memloci's own files in a Markdown library live under `.memloci/`, never beside the notes: the
journal (`.memloci/journal.md`) and the free memories (`.memloci/memories/<day>.md`) as well as
the index. A library of the older layout (`journal.md` and `memories/` at its root) is moved on
open, without loss, also when a SIGKILL stops the move anywhere (the next open finishes it)."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from services import service_for
from sigkill import assert_files_agree, assert_no_temp_files

from memloci.core.model import EntityInput, ObservationBatch
from memloci.store.markdown.engine import MarkdownStore

VAULT = Path(__file__).parent / "golden_vault"
OLD_GITIGNORE = b"# memloci's rebuildable index\n*\n"


def visible(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*")
                  if not any(part.startswith(".") for part in p.relative_to(folder).parts))


def test_a_persons_vault_gets_nothing_visible(tmp_path):
    folder = tmp_path / "vault"
    shutil.copytree(VAULT, folder, ignore=shutil.ignore_patterns(".gitattributes"))
    before = visible(folder)
    service = service_for("markdown", folder)
    try:
        service.rename_entity("Acme Corp", "Acme Inc")
        service.store_memory("a free memory, in no note")
        assert visible(folder) == sorted(p.replace("Acme Corp", "Acme Inc") for p in before)
        assert "rename_entity" in (folder / ".memloci" / "journal.md").read_text()
        (day,) = (folder / ".memloci" / "memories").glob("*.md")
        assert "a free memory, in no note" in day.read_text()
        # the hidden folder is never read as notes: no entity from it
        names = {e["name"] for e in service.list_entities("*")}
        assert not {"Journal", "journal", day.stem} & names
        assert [m.content for m in service.store().free_memories()] == ["a free memory, in no note"]
    finally:
        service.close()
    # a person's note named journal.md, or a folder memories/, is theirs: a note like any other
    (folder / "journal.md").write_text("# Journal\n\nToday I planted tomatoes.\n")
    (folder / "memories").mkdir()
    (folder / "memories" / "2026-01-02.md").write_text("# a day I remember\n")
    service = service_for("markdown", folder)
    try:
        names = {e["name"] for e in service.list_entities("*")}
        assert {"Journal", "a day I remember"} <= names
        assert (folder / "journal.md").read_text() == "# Journal\n\nToday I planted tomatoes.\n"
    finally:
        service.close()


def make_old_library(root: Path, *, index: bool = True) -> dict[str, object]:
    """A library as an older memloci left it: journal.md and memories/ at the root (the index
    says so too), the old .gitignore. What it holds, to compare after the move."""
    service = service_for("markdown", root)
    service.create_entities([EntityInput("Anna", "person", ("likes tea",))])
    service.store_memory("the office moved to the harbour")
    service.store_memory("standup at nine", tags=["team"])
    gone, _ = service.store_memory("a memory deleted before the move")
    service.delete_memory(gone.content_hash)
    service.delete_observations([ObservationBatch("Anna", ("likes tea",))])
    held = {"history": [(e.action, e.entities) for e in service.history(limit=50)],
            "memories": sorted((m.id, m.content) for m in service.store().free_memories())}
    service.close()
    hidden = root / ".memloci"
    (hidden / "journal.md").rename(root / "journal.md")
    (hidden / "memories").rename(root / "memories")
    (hidden / ".gitignore").write_bytes(OLD_GITIGNORE)
    if index:
        with sqlite3.connect(hidden / "index.db") as conn:
            conn.execute("UPDATE md_files SET path = substr(path, 10) WHERE path LIKE '.memloci/memories/%'")
    else:
        for part in hidden.iterdir():
            shutil.rmtree(part) if part.is_dir() else part.unlink()
    held["journal"] = (root / "journal.md").read_bytes()
    held["days"] = {p.name: p.read_bytes() for p in (root / "memories").glob("*.md")}
    return held


def assert_moved(root: Path, held: dict[str, object], *, same_ids: bool = True) -> None:
    """Open the library: everything `held` is there, in the new layout, and nothing at the root."""
    service = service_for("markdown", root)
    try:
        assert [(e.action, e.entities) for e in service.history(limit=50)] == held["history"]
        memories = sorted((m.id, m.content) for m in service.store().free_memories())
        expected = held["memories"]
        assert isinstance(expected, list)
        assert (memories if same_ids else sorted(c for _, c in memories)) == \
            (expected if same_ids else sorted(c for _, c in expected))
        assert [e["name"] for e in service.list_entities("*")] == ["Anna"]
        assert not (root / "journal.md").exists() and not (root / "memories").exists()
        assert (root / ".memloci" / "journal.md").read_bytes() == held["journal"]
        days = held["days"]
        assert isinstance(days, dict)
        assert {p.name: p.read_bytes() for p in (root / ".memloci" / "memories").glob("*.md")} == days
        assert (root / ".memloci" / ".gitignore").read_bytes() != OLD_GITIGNORE
        service.store_memory("after the move")
        assert not (root / "journal.md").exists() and not (root / "memories").exists()
    finally:
        service.close()
    store = MarkdownStore(root, "old")
    store.recover()  # (a committed change's intent goes on a background thread; here at once)
    store.close()
    with sqlite3.connect(root / ".memloci" / "index.db") as conn:
        assert_files_agree(root, conn)
    assert_no_temp_files(root)


@pytest.mark.parametrize("index", [True, False], ids=["with-its-index", "a-clone-without-index"])
def test_an_older_library_is_moved_on_open(tmp_path, index):
    root = tmp_path / "lib"
    held = make_old_library(root, index=index)
    assert_moved(root, held, same_ids=index)


def test_a_change_made_before_the_move_is_undone_where_its_files_are_now(tmp_path):
    root = tmp_path / "lib"
    make_old_library(root)
    service = service_for("markdown", root)
    try:
        (deleted,) = [e.id for e in service.history(limit=50) if e.action == "delete_memory"]
        service.undo(deleted)
        assert "a memory deleted before the move" in [m.content for m in service.store().free_memories()]
        assert not (root / "memories").exists()
    finally:
        service.close()


def test_an_old_branch_journal_merged_in_is_joined_to_the_moved_one(tmp_path):
    root = tmp_path / "lib"
    held = make_old_library(root)
    service = service_for("markdown", root)
    service.store()  # opening moves it
    service.close()
    moved = (root / ".memloci" / "journal.md").read_bytes()
    old_entry = (b"# Journal\n\nEvery change to this library, newest last.\n\n"
                 b"## 2024-01-01T00:00:00Z \xc2\xb7 delete_entities \xc2\xb7 gone\n")
    (root / "journal.md").write_bytes(old_entry)  # a git merge of a branch of the older layout
    (day,) = (root / ".memloci" / "memories").glob("*.md")  # its memories: one day the library has, one not
    (root / "memories").mkdir()
    (root / "memories" / day.name).write_text(f"# Memories of {day.stem}\n\n## 23:59:58Z · note\nfrom the branch\n")
    (root / "memories" / "2024-01-01.md").write_text("# Memories of 2024-01-01\n\n## 10:00:00Z · note\nnew year\n")
    service = service_for("markdown", root)
    try:
        service.store()
        assert not (root / "journal.md").exists() and not (root / "memories").exists()
        joined = (root / ".memloci" / "journal.md").read_bytes()
        assert joined.startswith(moved) and joined.endswith(b"\xc2\xb7 delete_entities \xc2\xb7 gone\n")
        assert not {"Journal", day.stem, "2024-01-01"} & {e["name"] for e in service.list_entities("*")}
        free = [m.content for m in service.store().free_memories()]
        before = held["memories"]
        assert isinstance(before, list)
        assert {"from the branch", "new year", *(c for _, c in before)} == set(free)
    finally:
        service.close()


def _kill(root: Path, *where: str) -> str:
    env = {**os.environ, "MEMLOCI_EMBEDDER": "none"}
    done = subprocess.run([sys.executable, str(Path(__file__).parent / "layout_killer.py"), str(root), *where],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode in (0, -9), done.stderr[-3000:]
    return "killed" if done.returncode == -9 else "finished"


@pytest.mark.full  # SIGKILL of real processes, as tests/test_crash.py
def test_a_kill_anywhere_in_the_move_loses_nothing(tmp_path):
    """SIGKILL after each file operation of the move (0: with only its intent written), and
    after its commit before the emptied folder goes: the next open finishes the move."""
    outcomes, n, ops = [], 0, None
    while ops is None or n <= ops + 1:
        root = tmp_path / f"op{n}"
        held = make_old_library(root)
        days = held["days"]
        assert isinstance(days, dict)
        ops = 2 * (1 + len(days))  # a put and a delete for the journal and each day file
        outcomes.append(_kill(root, "op", str(n)))
        assert_moved(root, held)
        n += 1
    assert outcomes == ["killed"] * (ops + 1) + ["finished"]  # after 0..ops operations: all before the commit
    root = tmp_path / "drop"
    held = make_old_library(root)
    assert _kill(root, "drop") == "killed"
    assert (root / "memories").is_dir() and not list((root / "memories").iterdir())  # moved, not yet removed
    assert_moved(root, held)
