"""Backup and restore: round trips lose nothing (timestamps included), a library holding data is
replaced only when asked and then saved first, and a backup taken while a real server process
writes is consistent."""

from __future__ import annotations

import hashlib
import io
import json
import os
import sqlite3
import subprocess
import sys
import tarfile
from pathlib import Path

import anyio
import pytest
from conftest import Client, mcp_session, process_session, server_env
from test_undo import KINDS, dump, files, open_service, populate

from memloci.core.errors import AlreadyExistsError, ConflictError, ValidationError
from memloci.core.model import EntityInput, ObservationBatch, RelationInput


def backup_name(kind: str) -> str:
    return "backup.db" if kind == "sqlite" else "backup.tar.gz"


@pytest.mark.parametrize("kind", KINDS)
def test_backup_change_restore_round_trip_loses_nothing(tmp_path, kind):
    service, registry = open_service(tmp_path, kind)
    try:
        populate(service)
        service.add_observations([ObservationBatch("beta", ("drinks it green",))])
        assert service.health()["statistics"]["last_backup"] is None
        saved = dump(service)
        saved_files = files(tmp_path / "lib") if kind == "markdown" else None
        target = tmp_path / backup_name(kind)
        result = service.backup(target)
        assert target.is_file() and result["path"] == str(target)
        assert target.stat().st_mode & 0o777 == 0o600  # it holds everything the library does
        assert service.health()["statistics"]["last_backup"] == result["at"]
        with pytest.raises(AlreadyExistsError):
            service.backup(target)  # never over a file

        service.delete_entities(["alpha"])
        service.delete_memory(service.list_memories()[0][0].content_hash)
        service.create_entities([EntityInput("delta", "thing", ("new",))])
        service.create_relations([RelationInput("delta", "knows", "beta")])
        changed = dump(service)

        with pytest.raises(ConflictError) as err:
            service.restore(target)
        assert "--force" in err.value.hint
        assert dump(service) == changed  # refused: nothing changed

        result = service.restore(target, force=True)
        assert dump(service) == saved
        if saved_files is not None:
            assert files(tmp_path / "lib") == saved_files
        pre = Path(result["saved_before"])
        assert pre.is_file() and pre.parent == tmp_path  # beside the library, not inside it
        assert service.history(limit=1)[0].action == "restore"

        service.restore(pre, force=True)  # what --force replaced is recoverable
        assert dump(service) == changed
    finally:
        registry.close()


@pytest.mark.parametrize("kind", KINDS)
def test_restore_into_an_empty_library_needs_no_force(tmp_path, kind):
    first, registry = open_service(tmp_path / "a", kind)
    populate(first)
    saved = dump(first)
    first.backup(tmp_path / backup_name(kind))
    registry.close()
    second, registry = open_service(tmp_path / "b", kind)
    try:
        second.restore(tmp_path / backup_name(kind))
        assert dump(second) == saved
    finally:
        registry.close()


def test_restore_refuses_what_is_not_a_backup_of_that_kind(tmp_path):
    service, registry = open_service(tmp_path, "sqlite")
    try:
        populate(service)
        service.backup(tmp_path / "b.db")
        junk = tmp_path / "junk.db"
        junk.write_bytes(b"not a database at all")
        with pytest.raises(ValidationError):
            service.restore(junk, force=True)
        evil = tmp_path / "evil.tar.gz"
        with tarfile.open(evil, "w:gz") as tar:
            info = tarfile.TarInfo("../outside.md")
            info.size = 3
            tar.addfile(info, io.BytesIO(b"bad"))
        with pytest.raises(ValidationError) as err:
            service.restore(evil, force=True)
        assert "sqlite" in err.value.message  # a Markdown backup for a SQLite library
    finally:
        registry.close()
    md, registry = open_service(tmp_path / "m", "markdown")
    try:
        with pytest.raises(ValidationError) as err:
            md.restore(tmp_path / "evil.tar.gz", force=True)
        assert "../outside.md" in err.value.message
        assert not (tmp_path / "m" / "outside.md").exists() and not (tmp_path / "outside.md").exists()
    finally:
        registry.close()


NAMES = {"sqlite": (".db", ["x.tar.gz", "x.zip", "x"], ["x.db", "y.sqlite3"]),
         "markdown": (".tar.gz", ["x.db", "x.zip", "x"], ["x.tar.gz", "y.tgz"])}


@pytest.mark.parametrize("kind", KINDS)
def test_a_backup_name_that_says_another_format_is_refused(tmp_path, kind):
    """`backup x.tar.gz` of a SQLite library would be a SQLite file under a tarball's name: refused,
    naming what backup writes and the name to give; nothing is written."""
    suffix, wrong, right = NAMES[kind]
    service, registry = open_service(tmp_path / "lib", kind)
    folder = tmp_path / "bk"
    folder.mkdir()
    try:
        populate(service)
        for name in wrong:
            with pytest.raises(ValidationError) as err:
                service.backup(folder / name)
            assert f"path: '{name}' does not end in {suffix}" in err.value.message
            assert f"e.g. {folder / ('x' + suffix)};" in err.value.hint
        assert list(folder.iterdir()) == []
        for name in right:
            assert service.backup(folder / name)["kind"] == kind
        assert sorted(p.name for p in folder.iterdir()) == right
    finally:
        registry.close()


def _backup_cli(home: Path, spec: str, target: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "memloci", "backup", str(target), "--libraries", spec],
                          env=server_env(home), capture_output=True, text=True, timeout=120)


@pytest.mark.full  # a server process writing while others back up
@pytest.mark.parametrize("kind", KINDS)
def test_backup_while_a_server_process_writes_is_consistent(tmp_path, kind):
    """A real `memloci serve` writes batches of 3-observation entities; backups taken meanwhile
    each hold whole batches only, and (Markdown) an index that agrees with the files."""
    path = tmp_path / ("lib.db" if kind == "sqlite" else "lib")
    spec = f"default:{path}"
    home = tmp_path / "home"
    targets = [tmp_path / f"b{i}{'.db' if kind == 'sqlite' else '.tar.gz'}" for i in range(3)]
    results = []

    async def main():
        async with process_session(home, "--libraries", spec) as session:
            client = Client(session)
            await client.ok("create_entities", entities=[{"name": "seed", "entityType": "t", "observations": ["s"]}])
            done = anyio.Event()

            async def write():
                i = 0
                while not done.is_set():
                    await client.ok("create_entities", entities=[
                        {"name": f"e{i}-{j}", "entityType": "t", "observations": ["a", "b", "c"]} for j in range(5)])
                    i += 1

            async with anyio.create_task_group() as tg:
                tg.start_soon(write)
                for target in targets:
                    results.append(await anyio.to_thread.run_sync(_backup_cli, home, spec, target))
                done.set()

    anyio.run(main)
    for proc in results:
        assert proc.returncode == 0, proc.stderr
    sizes = []
    for target in targets:
        if kind == "sqlite":
            conn = sqlite3.connect(target)
            assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
            counts = conn.execute("SELECT e.name, count(m.id) FROM entities e LEFT JOIN memories m "
                                  "ON m.entity_id = e.id WHERE e.name != 'seed' GROUP BY e.id").fetchall()
            conn.close()
        else:
            with tarfile.open(target, "r:gz") as tar:
                members = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
            index = tmp_path / "index-check.db"
            index.write_bytes(members[".memloci/index.db"])
            conn = sqlite3.connect(index)
            recorded = dict(conn.execute("SELECT path, sha256 FROM md_files"))
            counts = conn.execute("SELECT e.name, count(m.id) FROM entities e LEFT JOIN memories m "
                                  "ON m.entity_id = e.id WHERE e.name != 'seed' GROUP BY e.id").fetchall()
            conn.close()
            index.unlink()
            entity_files = {n for n in members if n.endswith(".md") and "/" not in n
                            and n not in ("journal.md", "meta.md", "context.md")}
            assert entity_files == {n for n in recorded if "/" not in n}  # the index knows every file, no more
            for rel, sha in recorded.items():
                assert hashlib.sha256(members[rel]).hexdigest() == sha, rel  # files and index agree
            assert len(entity_files) == len(counts) + 1  # every indexed entity has its file (and the seed)
        assert all(n == 3 for _, n in counts)  # no half batch: every entity has its three observations
        assert len(counts) % 5 == 0
        sizes.append(len(counts))
    assert sizes == sorted(sizes)


def test_cli_backup_and_restore(tmp_path):
    db = tmp_path / "lib.db"
    service, registry = open_service(tmp_path, "sqlite")
    populate(service)
    registry.close()
    home = tmp_path / "home"
    spec = f"default:{db}"
    run = lambda *a: subprocess.run([sys.executable, "-m", "memloci", *a, "--libraries", spec],
                                    env=server_env(home), capture_output=True, text=True, timeout=120)
    wrong = run("backup", str(tmp_path / "b.tar.gz"))
    assert wrong.returncode == 1 and "VALIDATION_ERROR: path: 'b.tar.gz' does not end in .db" in wrong.stderr
    assert f"e.g. {tmp_path / 'b.db'}" in wrong.stderr and not (tmp_path / "b.tar.gz").exists()
    out = run("backup", str(tmp_path / "b.db"))
    assert out.returncode == 0 and "Backed up library 'default'" in out.stdout, out.stderr
    refused = run("restore", str(tmp_path / "b.db"))
    assert refused.returncode == 1 and "CONFLICT" in refused.stderr and "--force" in refused.stderr
    forced = run("restore", str(tmp_path / "b.db"), "--force")
    assert forced.returncode == 0, forced.stderr
    assert "pre-restore" in forced.stdout and "Restored library 'default'" in forced.stdout
    health = json.dumps(run("history", "--details").stdout)
    assert "restore" in health


def test_export_markdown_of_a_project_includes_its_free_memories(tmp_path, home):
    from conftest import run_session
    from test_projects import entity, make_repo

    app = make_repo(tmp_path / "app")

    async def body(c: Client):
        await c.ok("create_entities", project_path=str(app), confirm_new_project_root=str(app),
                   entities=[entity("auth", "Rotate JWT keys")])
        await c.ok("store_memory", project_path=str(app), content="deploys freeze on Fridays",
                   tags=["ops"], memory_type="decision", importance="high")
        out, _ = await c.ok("export_markdown", project_path=str(app))
        assert out["memories"] == 1

    run_session(home, body)
    text = (app / "KNOWLEDGE_GRAPH.md").read_text()
    assert "## auth" in text and "## Memories" in text
    line = next(line for line in text.splitlines() if "deploys freeze on Fridays" in line)
    assert "(decision, high)" in line and line.endswith("#ops")


@pytest.mark.parametrize("kind", KINDS)
def test_a_running_server_sees_the_restored_library(tmp_path, kind):
    path = tmp_path / ("lib.db" if kind == "sqlite" else "lib")
    spec = f"default:{path}"
    home = tmp_path / "home"
    target = tmp_path / backup_name(kind)

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "memloci", *args, "--libraries", spec], env=server_env(home),
                              capture_output=True, text=True, timeout=120)

    async def main():
        async with mcp_session(home, "--libraries", spec) as session:
            client = Client(session)
            await client.ok("create_entities", entities=[{"name": "kept", "entityType": "t", "observations": ["o1"]}])
            health, _ = await client.ok("check_database_health")
            assert health["statistics"]["last_backup"] is None
            assert (await anyio.to_thread.run_sync(cli, "backup", str(target))).returncode == 0
            health, _ = await client.ok("check_database_health")
            assert health["statistics"]["last_backup"].endswith("Z")  # the server sees the other process's backup
            await client.ok("delete_entities", entityNames=["kept"])
            await client.ok("create_entities", entities=[{"name": "later", "entityType": "t", "observations": []}])
            restored = await anyio.to_thread.run_sync(cli, "restore", str(target), "--force")
            assert restored.returncode == 0, restored.stderr
            graph, _ = await client.ok("read_graph")
            assert [e["name"] for e in graph["entities"]] == ["kept"]
            assert graph["entities"][0]["observations"] == ["o1"]
            await client.ok("add_observations", observations=[{"entityName": "kept", "contents": ["o2"]}])

    anyio.run(main)


def test_a_markdown_backup_without_an_index_is_indexed_from_its_files(tmp_path):
    """A .tar.gz of notes alone (say, made by hand): restored, then indexed; journal.md read back."""
    archive = tmp_path / "notes.tar.gz"
    members = {"alpha.md": b"# alpha\n\nlinks [[beta]]\n", "sub/beta.md": b"---\ntype: person\n---\n# beta\n",
               "journal.md": b"# Journal\n\n## 2024-01-01T00:00:00Z \xc2\xb7 delete_entities \xc2\xb7 gone\n"}
    with tarfile.open(archive, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    service, registry = open_service(tmp_path, "markdown")
    try:
        service.restore(archive)
        graph = service.export_graph(order="name")
        assert [e.name for e in graph.entities] == ["alpha", "beta"]
        assert [(r.from_entity, r.to_entity) for r in graph.relations] == [("alpha", "beta")]
        assert (tmp_path / "lib" / "sub" / "beta.md").read_bytes() == members["sub/beta.md"]
        assert [e.action for e in service.history()][-1] == "delete_entities"
    finally:
        registry.close()


def test_a_restored_note_keeps_its_mtime_and_so_its_date(tmp_path):
    """A note a person wrote has no `created:`; its date is the file's mtime, which a round trip
    through a backup keeps (to the sub-second), even when the index is rebuilt from the files."""
    lib = tmp_path / "lib"
    lib.mkdir()
    note = lib / "Hand Note.md"
    note.write_bytes(b"Some words a person wrote.\n")
    old = 1_600_000_000.25
    os.utime(note, (old, old))
    service, registry = open_service(tmp_path, "markdown")
    try:
        before = service.open_nodes(["Hand Note"]).entities[0].created_at
        service.backup(tmp_path / "b.tar.gz")
        with tarfile.open(tmp_path / "b.tar.gz") as tar:
            assert {m.mode & 0o777 for m in tar.getmembers()} == {0o600}  # the index snapshot too
        service.delete_entities(["Hand Note"])
        service.restore(tmp_path / "b.tar.gz", force=True)
        assert note.stat().st_mtime == old
        registry.get().rebuild_index()  # dates read again from the files alone
        assert service.open_nodes(["Hand Note"]).entities[0].created_at == before
    finally:
        registry.close()


@pytest.mark.full  # SIGKILL
def test_restore_killed_at_any_moment_is_all_or_nothing(tmp_path):
    """SIGKILL `memloci restore --force` of a 30-note folder at many moments: afterwards the notes
    are wholly as before the restore or wholly as in the backup, and the index agrees."""
    import random
    import shutil
    import signal
    import time

    base = tmp_path / "base"
    service, registry = open_service(base, "markdown")
    service.create_entities([EntityInput(f"n{i}", "note", (f"first fact {i}",)) for i in range(30)])
    service.backup(tmp_path / "b.tar.gz")
    saved = files(base / "lib")
    service.add_observations([ObservationBatch(f"n{i}", (f"later fact {i}",)) for i in range(30)])
    service.delete_entities([f"n{i}" for i in range(0, 30, 3)])
    service.create_entities([EntityInput(f"new{i}", "note", ("made after the backup",)) for i in range(5)])
    registry.close()
    changed = files(base / "lib")
    skip = shutil.ignore_patterns("staging")  # leftovers of finished changes, still being cleared
    env = {"MEMLOCI_HOME": str(tmp_path / "home"), "MEMLOCI_EMBEDDER": "none", "PATH": "/usr/bin:/bin"}
    rng = random.Random(11)
    for attempt in range(12):
        work = tmp_path / f"run{attempt}"
        shutil.copytree(base, work, ignore=skip)
        proc = subprocess.Popen([sys.executable, "-m", "memloci", "restore", str(tmp_path / "b.tar.gz"), "--force",
                                 "--libraries", f"default:{work / 'lib'}"], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.1, 0.7))  # the whole command takes under 1 s here: start, open, pre-restore backup, restore
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        service, registry = open_service(work, "markdown")
        try:
            service.history(limit=1)  # opening recovers an interrupted change
            now = files(work / "lib")
            assert now in (saved, changed), f"attempt {attempt}: a half-done restore"
            names = {e.name for e in service.export_graph().entities}
            assert ("n0" in names) == (now == saved) and ("new0" in names) == (now == changed)
            assert not [p for p in (work / "lib").rglob("*") if p.name.endswith(".tmp")]
        finally:
            registry.close()
