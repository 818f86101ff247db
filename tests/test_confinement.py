"""Nothing memloci does follows a symbolic link out of a library or project root; memloci's own
files are private; the data folder follows XDG_DATA_HOME. Real links, real files, a real server."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_session, server_env

from memloci.app.config import default_specs, memloci_home
from memloci.app.registry import LibraryRegistry
from memloci.app.specs import LibrarySpec
from memloci.core import confine
from memloci.core.errors import PermissionDeniedError, ValidationError
from memloci.core.model import EntityInput
from memloci.core.settings import Settings
from memloci.service.facade import MemoryService

SECRET = "TOPSECRET-do-not-leak"


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file below `folder` (links not followed) with its bytes: what must not change."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            p = Path(dirpath) / name
            out[str(p.relative_to(folder))] = os.readlink(p).encode() if p.is_symlink() else p.read_bytes()
    return out


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder outside every root, with files a link could lead to."""
    out = tmp_path / "outside"
    (out / "dir").mkdir(parents=True)
    for name in ("journal.md", "meta.md", "context.md", "note.md", "memory.json"):
        (out / name).write_text(f"# {name}\n\n- {SECRET}\n")
    (out / "dir" / "hidden-note.md").write_text(f"# hidden-note\n\n## Observations\n- {SECRET}\n")
    return out


# -- the primitives ---------------------------------------------------------------------

def test_primitives_refuse_every_link_on_the_way(tmp_path, outside):
    root = tmp_path / "lib"
    (root / "real").mkdir(parents=True)
    os.symlink(outside / "dir", root / "sub")
    os.symlink(outside / "note.md", root / "note.md")
    os.symlink(outside / "absent.md", root / "dangling.md")
    os.symlink(root / "real", root / "inner")  # a link that stays inside is refused as well
    before = snapshot(outside)
    attempts = [
        lambda: confine.write_atomic(root, "note.md", b"x"),
        lambda: confine.write_atomic(root, "dangling.md", b"x"),
        lambda: confine.write_atomic(root, "sub/new.md", b"x"),
        lambda: confine.write_atomic(root, "inner/new.md", b"x"),
        lambda: confine.append(root, "note.md", b"x"),
        lambda: confine.append(root, "dangling.md", b"x"),
        lambda: confine.append(root, "sub/hidden-note.md", b"x"),
        lambda: confine.read_bytes(root, "note.md"),
        lambda: confine.read_bytes(root, "sub/hidden-note.md"),
        lambda: confine.truncate(root, "note.md", 0),
        lambda: confine.unlink(root, "sub/hidden-note.md"),
        lambda: confine.lstat(root, "note.md"),
        lambda: confine.private_file(root, "dangling.md"),
        lambda: confine.check(root, "sub/x.db"),
    ]
    for i, attempt in enumerate(attempts):
        with pytest.raises(confine.LinkRefusedError) as info:
            attempt()
        assert info.value.code == "PERMISSION_DENIED", i
        assert str(tmp_path) not in info.value.message  # named relative to the root
    assert snapshot(outside) == before
    assert not (outside / "absent.md").exists()
    assert confine.exists(root, "note.md") and confine.is_link(root, "sub/hidden-note.md")
    # removing a link removes the link only
    confine.unlink(root, "note.md")
    assert (outside / "note.md").read_text().endswith(f"{SECRET}\n")
    for bad in ("../x.md", "/etc/passwd", "a/../../x", "x\x00.md"):
        with pytest.raises(ValidationError):
            confine.write_atomic(root, bad, b"x")


def test_a_link_swapped_in_for_the_root_is_refused(tmp_path, outside):
    root = tmp_path / ".mcp"
    os.symlink(outside, root)
    with pytest.raises(PermissionDeniedError):
        confine.write_atomic(root, "journal.md", b"x")
    assert (outside / "journal.md").read_text().startswith("# journal.md")


# -- a project's .mcp/ over MCP -----------------------------------------------------------

def make_project(base: Path, name: str, link: str, target: Path) -> Path:
    root = base / name
    (root / ".git").mkdir(parents=True)
    (root / ".mcp" / link).parent.mkdir(parents=True)
    os.symlink(target, root / ".mcp" / link)
    return root


def test_links_inside_mcp_are_never_followed(tmp_path, home, outside):
    base = tmp_path / "projects"
    projects = {
        "journal.md": make_project(base, "p-journal", ".memloci/journal.md", outside / "journal.md"),
        "memories": make_project(base, "p-memories", ".memloci/memories", outside / "dir"),
        "meta.md": make_project(base, "p-meta", "meta.md", outside / "meta.md"),
        "context.md": make_project(base, "p-context", "context.md", outside / "context.md"),
        ".memloci": make_project(base, "p-index", ".memloci", outside / "dir"),
        ".gitattributes": make_project(base, "p-attributes", ".gitattributes", outside / "attributes"),
        "note.md": make_project(base, "p-note", "note.md", outside / "note.md"),
        "sub": make_project(base, "p-sub", "sub", outside / "dir"),
        "memory.json": make_project(base, "p-n2n", "memory.json", outside / "memory.json"),
    }
    os.symlink(outside / "dir", projects[".gitattributes"] / "docs")  # links in the project itself
    os.symlink(outside / "note.md", projects[".gitattributes"] / "GRAPH.md")
    before = snapshot(outside)
    replies: list[str] = []

    async def body(c):
        async def call(name, **args):
            is_error, _, text = await c.call(name, **args)
            replies.append(json.dumps(text))
            return is_error, text

        def p(link):
            return str(projects[link])

        # journal.md: every write would append to it; the write is refused, naming the link
        is_error, text = await call("create_entities", project_path=p("journal.md"),
                                    entities=[{"name": "a", "entityType": "note", "observations": ["x"]}])
        assert is_error and text["error"]["code"] == "PERMISSION_DENIED" and "journal.md" in text["error"]["message"]
        # memories/: a free memory's day file would go there
        is_error, text = await call("store_memory", project_path=p("memories"), content="a free memory")
        assert is_error and "memories" in text["error"]["message"]
        # meta.md: read_manual never returns the outside file
        is_error, text = await call("read_manual", project_path=p("meta.md"))
        assert is_error and "meta.md" in text["error"]["message"]
        is_error, text = await call("add_manual_section", project_path=p("meta.md"), toc="Rules", new_content="- one")
        assert is_error
        # context.md: read_graph carries the context; the resource too
        is_error, text = await call("read_graph", project_path=p("context.md"))
        assert is_error and "context.md" in text["error"]["message"]
        is_error, text = await call("update_context", project_path=p("context.md"), active_task="t")
        assert is_error
        try:
            resource = await c.session.read_resource(f"memloci://graph?path={p('context.md')}")
            replies.append(resource.contents[0].text)
            raise AssertionError("the resource should have been refused")
        except Exception as exc:  # a resource error from the server
            replies.append(str(exc))
            assert "context.md" in str(exc)
        # .memloci: no index is made outside; every call names the link
        is_error, text = await call("read_graph", project_path=p(".memloci"))
        assert is_error and ".memloci" in text["error"]["message"]
        # .gitattributes (dangling): the project works; nothing is created at the link's target
        await c.ok("create_entities", project_path=p(".gitattributes"),
                   entities=[{"name": "b", "entityType": "note", "observations": ["y"]}])
        # export_markdown into the project never writes through a link
        for target in ("docs/graph.md", "GRAPH.md"):
            is_error, text = await call("export_markdown", project_path=p(".gitattributes"), output_path=target)
            assert is_error and "symbolic link" in text["error"]["message"], text
        await c.ok("export_markdown", project_path=p(".gitattributes"), output_path="KNOWLEDGE_GRAPH.md")
        # an entity file and a sub-folder that are links: not indexed, not written through
        for link in ("note.md", "sub"):
            _, text = await c.ok("read_graph", project_path=p(link))
            replies.append(json.dumps(text))
            assert text["entities"] == []
            _, text = await c.ok("search_nodes", project_path=p(link), query=SECRET)
            assert text["entities"] == []
        # the link may hold "note": a write under that name is refused, never a second file beside it
        is_error, text = await call("create_entities", project_path=p("note.md"),
                                    entities=[{"name": "Note", "entityType": "note", "observations": ["mine"]}])
        assert is_error and text["error"]["code"] == "CONFLICT" and "note.md" in text["error"]["message"], text
        await c.ok("create_entities", project_path=p("sub"),
                   entities=[{"name": "hidden-note", "entityType": "note", "observations": ["mine"]}])
        # n2n's memory.json as a link: refused on first use, nothing imported
        is_error, text = await call("read_graph", project_path=p("memory.json"))
        assert is_error and "memory.json" in text["error"]["message"]

    run_session(home, body)
    assert snapshot(outside) == before  # nothing outside was written, created or removed
    assert not (outside / "attributes").exists()
    assert all(SECRET not in r for r in replies)
    assert (projects["note.md"] / ".mcp" / "note.md").is_symlink()  # the link itself is left alone
    assert list((projects["note.md"] / ".mcp").glob("[Nn]ote*.md")) == [projects["note.md"] / ".mcp" / "note.md"]


def test_a_markdown_library_reports_links_and_reads_nothing_through_them(tmp_path, outside):
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "real.md").write_text("# real\n\n## Observations\n- a real note\n")
    os.symlink(outside / "note.md", folder / "linked.md")
    os.symlink(outside / "dir", folder / "linked-folder")
    os.symlink(outside / "journal.md", folder / "journal.md")  # a note's name now; not followed either
    (folder / ".memloci").mkdir()
    os.symlink(outside / "journal.md", folder / ".memloci" / "journal.md")
    os.symlink(outside / "dir", folder / ".memloci" / "memories")
    registry = LibraryRegistry([LibrarySpec("notes", folder, "markdown")])
    service = MemoryService(registry)
    try:
        assert [e.name for e in service.read_graph().entities] == ["real"]
        listed = service.list_libraries()[0]
        problems = listed["unparsed_files"]
        assert {"linked.md", "linked-folder", "journal.md", ".memloci/memories"} <= set(problems)
        assert all("symbolic link" in why for why in problems.values())
        with pytest.raises(PermissionDeniedError):  # the journal would be appended to
            service.create_entities([EntityInput("new", "note", ())])
        assert not (folder / "new.md").exists()
    finally:
        service.close()
    assert (outside / "journal.md").read_text() == f"# journal.md\n\n- {SECRET}\n"


# -- modes and the data folder -------------------------------------------------------------

def mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


def test_memlocis_own_files_are_private(tmp_path):
    old = os.umask(0o022)
    try:
        registry = LibraryRegistry([LibrarySpec("a", tmp_path / "data" / "a.db"),
                                    LibrarySpec("notes", tmp_path / "notes", "markdown")])
        service = MemoryService(registry)
        service.create_entities([EntityInput("x", "note", ("y",))], library="a")
        service.create_entities([EntityInput("x", "note", ("y",))], library="notes")
        service.close()
    finally:
        os.umask(old)
    assert mode(tmp_path / "data") == 0o700
    for name in ("a.db", "a.db-wal", "a.db-shm"):
        if (tmp_path / "data" / name).exists():
            assert mode(tmp_path / "data" / name) == 0o600, name
    index = tmp_path / "notes" / ".memloci"
    assert mode(index) == 0o700 and mode(index / "index.db") == 0o600
    # a person's notes folder follows the umask, like an editor's files
    assert mode(tmp_path / "notes" / "x.md") == 0o644


def test_an_old_index_folder_is_made_private(tmp_path):
    index = tmp_path / "notes" / ".memloci"
    index.mkdir(parents=True)
    index.chmod(0o755)
    service = MemoryService(LibraryRegistry([LibrarySpec("notes", tmp_path / "notes", "markdown")]))
    service.stats()
    service.close()
    assert mode(index) == 0o700


def test_the_data_folder_follows_xdg(tmp_path, monkeypatch):
    monkeypatch.delenv("MEMLOCI_HOME", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert memloci_home() == tmp_path / "xdg" / "memloci"
    monkeypatch.setenv("XDG_DATA_HOME", "relative/path")  # the spec says: ignore it
    assert memloci_home() == Path.home() / ".local" / "share" / "memloci"
    monkeypatch.setenv("MEMLOCI_HOME", str(tmp_path / "mine"))
    assert memloci_home() == tmp_path / "mine"


def test_the_default_library_is_created_private_under_xdg(tmp_path):
    env = server_env(tmp_path / "unused")
    del env["MEMLOCI_HOME"]
    env["XDG_DATA_HOME"] = str(tmp_path / "xdg")
    env["HOME"] = str(tmp_path / "home")
    imported = tmp_path / "graph.jsonl"
    imported.write_text(json.dumps({"type": "entity", "name": "e", "entityType": "t", "observations": ["o"]}) + "\n")
    done = subprocess.run([sys.executable, "-m", "memloci", "import", "jsonl", str(imported)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    db = tmp_path / "xdg" / "memloci" / "default.db"
    assert db.is_file() and mode(db) == 0o600
    assert mode(db.parent) == 0o700
    assert not (tmp_path / "home" / ".local").exists()


def test_a_folder_replaced_by_a_link_drops_its_notes_and_keeps_the_library_working(tmp_path, outside):
    folder = tmp_path / "notes"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "x.md").write_text("# x\n\n## Observations\n- inside\n")
    (folder / "keep.md").write_text("# keep\n")
    service = MemoryService(LibraryRegistry([LibrarySpec("notes", folder, "markdown")]))
    try:
        assert sorted(e.name for e in service.read_graph().entities) == ["keep", "x"]
        (folder / "sub" / "x.md").unlink()
        (folder / "sub").rmdir()
        os.symlink(outside / "dir", folder / "sub")  # say, a checkout of a branch where it is a link
        service.store("notes").sync()
        assert [e.name for e in service.read_graph().entities] == ["keep"]
        assert "sub" in service.list_libraries()[0]["unparsed_files"]
        service.create_entities([EntityInput("new", "note", ("still writable",))])
    finally:
        service.close()
    assert sorted(p.name for p in (outside / "dir").iterdir()) == ["hidden-note.md"]


def test_a_fifo_where_a_file_is_expected_does_not_hang(tmp_path):
    root = tmp_path / "lib"
    root.mkdir()
    os.mkfifo(root / "meta.md")
    with pytest.raises(PermissionDeniedError, match="not a regular file"):
        confine.read_bytes(root, "meta.md")
    with pytest.raises((PermissionDeniedError, OSError)):
        confine.append(root, "meta.md", b"x")


def test_an_old_world_readable_default_library_is_tightened(tmp_path, monkeypatch):
    home = tmp_path / "data"
    home.mkdir(mode=0o755)
    home.chmod(0o755)
    old = LibraryRegistry([LibrarySpec("default", home / "default.db")])
    MemoryService(old).create_entities([EntityInput("x", "note", ("y",))])
    old.close()
    (home / "default.db").chmod(0o644)  # as an older memloci left it
    monkeypatch.setenv("MEMLOCI_HOME", str(home))
    monkeypatch.delenv("MEMLOCI_LIBRARIES", raising=False)
    monkeypatch.delenv("MEMLOCI_CONFIG", raising=False)
    settings = Settings.from_env()
    registry = LibraryRegistry(default_specs(settings), settings=settings)
    service = MemoryService(registry)
    assert [e.name for e in service.read_graph().entities] == ["x"]
    service.close()
    assert mode(home) == 0o700 and mode(home / "default.db") == 0o600
