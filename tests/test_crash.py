"""All or nothing under SIGKILL, with real processes (`memloci bench crash` does the killing and
the checking, tests/sigkill.py runs it). A few kills per write kind here;
`MEMLOCI_CRASH_ROUNDS=20` (or `memloci bench crash` itself) runs the full 20."""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from services import service_for
from sigkill import KINDS, assert_files_agree, assert_no_temp_files, kill_rounds

from memloci.core.model import EntityInput, ObservationBatch
from memloci.service.documents import NewEntityDocument

ROUNDS = int(os.environ.get("MEMLOCI_CRASH_ROUNDS", "3"))
# Smaller batches than the bench (1,000 entities, 300 linking notes) keep `make test` short;
# with MEMLOCI_CRASH_ROUNDS=20 the bench's sizes are used.
TEST_SIZES = {"create": 400, "rename": 150, "merge": 10, "delete": 200, "add_observations": 200, "reindex": 300,
              "duplicates": 200}
CASES = [(k, e) for k in KINDS for e in ("markdown", "sqlite") if not (k == "reindex" and e == "sqlite")]


@pytest.mark.parametrize(("kind", "engine"), CASES, ids=[f"{k}-{e}" for k, e in CASES])
def test_sigkill_during_a_write_leaves_all_or_nothing(tmp_path, kind, engine):
    n = TEST_SIZES[kind] if ROUNDS < 20 else None
    result = kill_rounds(kind, engine, ROUNDS, tmp_path / "work", size=n)
    assert not result["failures"], "\n".join(result["failures"])
    assert result["all"] + result["none"] == ROUNDS


@pytest.mark.parametrize("committed", [False, True])
def test_a_half_done_change_is_rolled_back_or_forward(tmp_path, committed):
    """The two sides of recovery, as a kill leaves them: the files put in place and the intent
    written, then the index transaction committed (roll forward: keep) or not (roll back)."""
    from memloci.store.markdown.engine import MarkdownStore
    from memloci.store.markdown.intent import FileChange
    from memloci.store.sqlite.tx import WriteTx

    root = tmp_path / "lib"
    service = service_for("markdown", root)
    service.create_entities([EntityInput("a", "note", ("first",))])
    service.close()
    before = (root / "a.md").read_bytes()
    store = MarkdownStore(root, "t")
    store.open()
    conn = store.index.db.connect()
    conn.execute("BEGIN IMMEDIATE")
    tx = WriteTx(conn)
    change = tx.files = FileChange(root, "t")
    store._files.put(tx, "a.md", "changed\n", None)
    store._files.put(tx, "b.md", "new\n", None)
    change.apply(conn)  # files in place, intent on disk; then the process "dies"
    conn.execute("COMMIT" if committed else "ROLLBACK")
    conn.close()
    store.close()
    assert (root / "a.md").read_bytes() == b"changed\n"
    assert (root / ".memloci" / "staging" / f"{change.id}.intent").exists()
    store = MarkdownStore(root, "t")
    store.recover()
    store.close()
    if committed:
        assert (root / "a.md").read_bytes() == b"changed\n" and (root / "b.md").read_bytes() == b"new\n"
    else:
        assert (root / "a.md").read_bytes() == before, "the old file is back, byte for byte"
        assert not (root / "b.md").exists()
    assert not os.listdir(root / ".memloci" / "staging")


def test_a_kill_between_the_swap_and_keeping_the_old_file_is_rolled_back(tmp_path):
    """The new file was swapped in and the temp name holds the old one when the process died:
    recovery tells the two apart by the intent's sha and puts the old file back."""
    from memloci.store.markdown import intent as markdown_intent
    from memloci.store.markdown.engine import MarkdownStore
    from memloci.store.markdown.intent import FileChange
    from memloci.store.sqlite.tx import WriteTx

    root = tmp_path / "lib"
    service = service_for("markdown", root)
    service.create_entities([EntityInput("a", "note", ("first",))])
    service.close()
    before = (root / "a.md").read_bytes()
    store = MarkdownStore(root, "t")
    store.open()
    conn = store.index.db.connect()
    conn.execute("BEGIN IMMEDIATE")
    tx = WriteTx(conn)
    change = tx.files = FileChange(root, "t")
    store._files.put(tx, "a.md", "changed\n", None)
    change.apply(conn)
    conn.execute("ROLLBACK")
    conn.close()
    store.close()
    if not markdown_intent._exchange_works:
        pytest.skip("renameat2 RENAME_EXCHANGE is not available on this file system")
    op = change.ops["a.md"]
    staging = root / ".memloci" / "staging"
    os.replace(staging / op.backup, staging / op.tmp)  # as the kill left it: swapped, not yet kept
    assert (root / "a.md").read_bytes() == b"changed\n"
    store = MarkdownStore(root, "t")
    store.recover()
    store.close()
    assert (root / "a.md").read_bytes() == before
    assert not os.listdir(staging)


def test_an_editor_save_just_before_the_swap_is_caught_and_kept(tmp_path, monkeypatch):
    """An editor saves by rename the moment before memloci puts its file in place: the swap
    hands back the editor's file, the check sees it is not the file the change was computed
    from, and the editor's bytes end up in place."""
    from memloci.core.errors import ConflictError
    from memloci.store.markdown import intent as markdown_intent

    root = tmp_path / "lib"
    service = service_for("markdown", root)
    service.create_entities([EntityInput("a", "note", ("first",))])
    path = root / "a.md"
    real = markdown_intent._exchange
    saved = []

    def editor_then_exchange(src_dir, src, dst_dir, dst):
        if not saved and dst == "a.md":
            tmp = root / ".a.md.swp"
            tmp.write_bytes(path.read_bytes() + b"hand line\n")
            os.replace(tmp, path)
            saved.append(True)
        return real(src_dir, src, dst_dir, dst)

    monkeypatch.setattr(markdown_intent, "_exchange", editor_then_exchange)
    try:
        with pytest.raises(ConflictError, match="a.md"):
            service.add_observations([ObservationBatch("a", ("second",))])
    finally:
        service.close()
    if not markdown_intent._exchange_works:
        pytest.skip("renameat2 RENAME_EXCHANGE is not available on this file system")
    assert saved and path.read_bytes().endswith(b"hand line\n")
    assert b"second" not in path.read_bytes()


def _refused_amid_saves(service, monkeypatch, saves: dict[int, tuple], text: str) -> None:
    """Run add_observations(a, text) with an editor saving a.md by rename around memloci's swaps:
    `saves[n]` = (before, after) edits made just before and just after the n-th swap (None: no
    save); each edit is (old bytes, new bytes), replaced once. The call must be refused."""
    from memloci.core.errors import ConflictError
    from memloci.store.markdown import intent as markdown_intent

    real = markdown_intent._exchange
    calls = []
    path = service.store().root / "a.md"

    def save(edit) -> None:
        if edit:
            tmp = path.with_name(".a.md.swp")
            tmp.write_bytes(path.read_bytes().replace(edit[0], edit[1], 1))
            os.replace(tmp, path)

    def racing_editor(src_dir, src, dst_dir, dst):
        calls.append(dst)
        before, after = saves.get(len(calls), (None, None))
        save(before)
        done = real(src_dir, src, dst_dir, dst)
        save(after)
        return done

    monkeypatch.setattr(markdown_intent, "_exchange", racing_editor)
    try:
        with pytest.raises(ConflictError, match="a.md"):
            service.add_observations([ObservationBatch("a", (text,))])
    finally:
        service.close()
    if not markdown_intent._exchange_works:
        pytest.skip("renameat2 RENAME_EXCHANGE is not available on this file system")


@pytest.mark.parametrize("when", ["before the rollback", "during the put-back"])
def test_an_editor_saving_twice_around_the_swap_loses_neither_save(tmp_path, monkeypatch, when):
    """The editor saves just before memloci's swap (the change is refused and its file comes
    back), then reads memloci's bytes and saves again before the rollback is done: the second
    save's own line is merged into the first save, and the refused observation is in neither."""
    root = tmp_path / "lib"
    service = service_for("markdown", root)
    service.create_entities([EntityInput("a", "note", ("first",))])
    service.close()
    path = root / "a.md"
    path.write_bytes(path.read_bytes() + b"\n## Hand\n")
    first, second = (b"## Hand\n", b"## Hand\nhand line 1\n"), (b"## Hand\n", b"## Hand\nhand line 2\n")
    saves = {1: (first, second)} if when == "before the rollback" else {1: (first, None), 2: (second, None)}
    _refused_amid_saves(service_for("markdown", root), monkeypatch, saves, "second")
    final = path.read_bytes()
    assert b"hand line 1\n" in final and b"hand line 2\n" in final, final
    assert b"second" not in final
    assert not (root / ".memloci" / "conflicts").exists()


def test_two_saves_that_clash_around_a_refused_change_keep_the_earlier_one_aside(tmp_path, monkeypatch):
    """When the second save edits the very line the first one did, no merge is guessed: the
    newest save stays in place and the earlier one is kept under .memloci/conflicts/."""
    root = tmp_path / "lib"
    service = service_for("markdown", root)
    service.create_entities([EntityInput("a", "note", ("first",))])
    saves = {1: ((b"- first", b"- the first save"), (b"- first", b"- the second save"))}
    _refused_amid_saves(service, monkeypatch, saves, "added")
    assert b"- the second save" in (root / "a.md").read_bytes()
    kept = list((root / ".memloci" / "conflicts").iterdir())
    assert len(kept) == 1 and kept[0].name.startswith("a.md.")
    assert b"- the first save" in kept[0].read_bytes() and b"added" not in kept[0].read_bytes()


def test_reindex_while_two_servers_write_loses_nothing(tmp_path):
    root = tmp_path / "lib"
    service = service_for("markdown", root)
    service.create_entities([EntityInput(f"w{t}-{i}", "note", ("start",)) for t in "ab" for i in range(20)])
    service.close()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMLOCI_")}
    env["MEMLOCI_EMBEDDER"] = "none"
    writers = [subprocess.Popen([sys.executable, str(Path(__file__).parent / "crash_writer.py"), str(root), tag, "100"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) for tag in "ab"]
    reindexes = 0
    while any(w.poll() is None for w in writers) and reindexes < 6:
        cli = subprocess.run([sys.executable, "-m", "memloci", "reindex", "--libraries", f"lib:{root}"],
                             capture_output=True, text=True, env=env, timeout=300)
        assert cli.returncode == 0, cli.stdout + cli.stderr
        assert "indexed" in cli.stdout
        reindexes += 1
    acknowledged: list[tuple[str, str]] = []
    for w in writers:
        out, err = w.communicate(timeout=300)
        assert w.returncode == 0, err[-2000:]
        acknowledged += [tuple(line.split("\t")) for line in out.splitlines() if "\t" in line]
    assert reindexes >= 2 and len(acknowledged) == 200
    duplicates = [p.name for p in root.glob("*.md") if re.search(r"-[0-9a-f]{6}\.md$", p.name)]
    assert not duplicates, f"second files made for entities: {duplicates}"
    service = service_for("markdown", root)
    try:
        graph = service.open_nodes(sorted({name for name, _ in acknowledged}))
        held = {(e.name, o.content) for e in graph.entities for o in e.observations}
        lost = [a for a in acknowledged if a not in held]
        assert not lost, f"acknowledged observations missing from the index: {lost[:5]}"
        for name, text in acknowledged:
            assert text in (root / f"{name}.md").read_text(encoding="utf-8"), f"{text} missing from {name}.md"
    finally:
        service.close()


@pytest.mark.parametrize("how", ["in-place", "by-rename"])
def test_an_editor_saving_every_10_ms_never_loses_a_line(tmp_path, how):
    root = tmp_path / "lib"
    service = service_for("markdown", root)
    service.create_entities([EntityInput("shared", "note", ("start",))])
    service.close()
    path = root / "shared.md"
    with open(path, "a", encoding="utf-8") as f:
        f.write("\n## Hand\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMLOCI_")}
    env["MEMLOCI_EMBEDDER"] = "none"
    server = subprocess.Popen([sys.executable, str(Path(__file__).parent / "crash_writer.py"), str(root), "s", "0",
                               "shared"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    lines: list[str] = []
    stop = time.monotonic() + 9
    i = 0
    while time.monotonic() < stop:  # the editor: read, add a line to its section, save
        if i % 40 == 39:  # a pause now and then, so the server's writes get through between bursts
            time.sleep(1.5)
        text = path.read_text(encoding="utf-8")
        line = f"hand line {i}"
        new = text.replace("## Hand\n", f"## Hand\n{line}\n", 1)
        if how == "in-place":
            with open(path, "w", encoding="utf-8") as f:
                f.write(new)
        else:
            tmp = path.with_name(".shared.md.swp")
            tmp.write_text(new, encoding="utf-8")
            os.replace(tmp, path)
        lines.append(line)
        i += 1
        time.sleep(0.01)
    server.terminate()
    out, err = server.communicate(timeout=60)
    final = path.read_text(encoding="utf-8")
    lost = [line for line in lines if line + "\n" not in final]
    assert not lost, f"{len(lost)} hand-written lines lost, e.g. {lost[:3]}"
    assert "written" in out, err[-2000:]  # the server did write between the editor's saves


def test_a_broken_note_is_never_shadowed(tmp_path):
    root = tmp_path / "lib"
    root.mkdir()
    (root / "plan.md").write_text("---\ntype: [unclosed\n---\n# plan\n", encoding="utf-8")
    service = service_for("markdown", root)
    try:
        from memloci.core.errors import ConflictError

        with pytest.raises(ConflictError, match="plan.md"):
            service.create_entities([EntityInput("plan", "note", ("a new fact",))])
        assert sorted(p.name for p in root.glob("*.md")) == ["plan.md"]
    finally:
        service.close()


@pytest.mark.parametrize("on_disk, asked", [("Broken.md", "broken"), ("Cafe\u0301.md", "CAFÉ"), ("Sec.md", "Sec")])
def test_an_unreadable_note_is_not_shadowed_in_any_case_or_form(tmp_path, on_disk, asked):
    """An unparsable note, or a link memloci does not follow, keeps its name: a write under that
    name in another letter case or Unicode form is refused too, and no second file appears."""
    from memloci.core.errors import ConflictError

    root = tmp_path / "lib"
    root.mkdir()
    outside = tmp_path / "outside.md"
    outside.write_text("# secret\n", encoding="utf-8")
    if on_disk == "Sec.md":
        (root / on_disk).symlink_to(outside)
    else:
        (root / on_disk).write_bytes(b"---\ntags: [a\n---\nbad\x00\n")
    service = service_for("markdown", root)
    try:
        with pytest.raises(ConflictError, match=on_disk):
            service.create_entities([EntityInput(asked, "note", ("a new fact",))])
        with pytest.raises(ConflictError, match=on_disk):
            service.add_entities([NewEntityDocument(asked, "note", content="words")])
        assert sorted(p.name for p in root.iterdir() if p.suffix == ".md") == [on_disk]
        assert outside.read_text(encoding="utf-8") == "# secret\n"
    finally:
        service.close()


def test_temp_files_of_a_killed_writer_are_removed_on_open(tmp_path):
    """write_atomic's temp files (the index's .gitignore, a project's .gitattributes, an export)
    left by a process killed before its rename are removed; a live writer's are not."""
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True).stdout.strip()
    root = tmp_path / "lib"
    (root / ".memloci").mkdir(parents=True)
    (root / "sub").mkdir()
    stray = [root / f"..gitattributes.{dead}.0badc0de.tmp", root / ".memloci" / f"..gitignore.{dead}.0badc0de.tmp",
             root / "sub" / f".export.md.{dead}.0badc0de.tmp"]
    live = root / f".note.md.{os.getpid()}.0badc0de.tmp"
    for path in [*stray, live]:
        path.write_bytes(b"half")
    service = service_for("markdown", root)
    try:
        service.create_entities([EntityInput("x", "note", ())])
        assert [p for p in stray if p.exists()] == []
        assert live.exists()
    finally:
        service.close()


def test_a_planted_staging_folder_or_intent_moves_nothing(tmp_path):
    """A clone may carry a `.memloci/staging` of its own: a link there is refused, and an intent
    whose names climb out of the staging folder is ignored, so no outside file is moved or deleted."""
    from memloci.core.errors import MemlociError

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.txt").write_text("keep me", encoding="utf-8")
    linked = tmp_path / "linked"
    (linked / ".memloci").mkdir(parents=True)
    (linked / ".memloci" / "staging").symlink_to(outside)
    with pytest.raises(MemlociError):
        service_for("markdown", linked).create_entities([EntityInput("x", "note", ())])
    assert (outside / "precious.txt").read_text(encoding="utf-8") == "keep me"

    planted = tmp_path / "planted"
    (planted / ".memloci" / "staging").mkdir(parents=True)
    evil = {"ops": [{"kind": "delete", "rel": "stolen.md", "tmp": None,
                     "backup": "../../../outside/precious.txt", "old_size": None, "sha": None}]}
    (planted / ".memloci" / "staging" / "c0ffee.intent").write_text(json.dumps(evil), encoding="utf-8")
    service = service_for("markdown", planted)
    try:
        service.create_entities([EntityInput("x", "note", ())])
        assert not (planted / "stolen.md").exists()
        assert (outside / "precious.txt").read_text(encoding="utf-8") == "keep me"
        assert not (planted / ".memloci" / "staging" / "c0ffee.intent").exists()
    finally:
        service.close()


def test_a_corrupt_index_is_moved_aside_and_rebuilt(tmp_path):
    root = tmp_path / "lib"
    service = service_for("markdown", root)
    service.create_entities([EntityInput(f"e{i}", "note", (f"fact {i}",)) for i in range(10)])
    service.close()
    index = root / ".memloci" / "index.db"
    for suffix in ("-wal", "-shm"):
        Path(f"{index}{suffix}").unlink(missing_ok=True)
    index.write_bytes(b"this is not a database" * 100)
    (root / "bad.md").write_bytes(b"# bad\n\n## Observations\n- a NUL \x00 here\n")
    (root / "huge.md").write_text("# huge\n\n## Observations\n- " + "x" * 2_000_000 + "\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMLOCI_")}
    env["MEMLOCI_EMBEDDER"] = "none"
    cli = subprocess.run([sys.executable, "-m", "memloci", "reindex", "--libraries", f"lib:{root}"],
                         capture_output=True, text=True, env=env, timeout=300)
    assert cli.returncode == 0, cli.stdout + cli.stderr
    moved = list((root / ".memloci").glob("index.db.corrupt-*"))
    assert len(moved) == 1 and moved[0].read_bytes().startswith(b"this is not a database")
    assert moved[0].name in cli.stdout
    assert "10 indexed" in cli.stdout and "2 unparsable" in cli.stdout
    assert "bad.md: contains a NUL byte" in cli.stdout and "huge.md: observation 1" in cli.stdout
    service = service_for("markdown", root)
    try:
        names = {e.name for e in service.read_graph().entities}
        assert names == {f"e{i}" for i in range(10)}
    finally:
        service.close()


def _import_round(source: Path, lib: Path, env: dict, kill_when=None) -> None:
    """`memloci import jsonl` into `lib`; SIGKILLed as soon as `kill_when()` is true (None: let it finish)."""
    proc = subprocess.Popen([sys.executable, "-m", "memloci", "import", "jsonl", str(source), "--libraries", f"lib:{lib}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    if kill_when is None:
        assert proc.wait(timeout=900) == 0
        return
    while proc.poll() is None and not kill_when():
        time.sleep(0.002)
    proc.kill()  # SIGKILL (a no-op if it finished first)
    proc.wait()


def _kill_points(lib: Path, rounds: int, seed: int = 11) -> list:
    """Moments of an import to kill it at, read off the disk as it goes: while the first batch's
    files are staged, once its intent is written, while its files are put in place, once all
    of them are, while the second batch is staged."""
    rng = random.Random(seed)
    staging = lib / ".memloci" / "staging"

    def listed(folder: Path) -> list[str]:
        try:
            return os.listdir(folder)
        except FileNotFoundError:
            return []

    def staged(k: int):
        return lambda: sum(".t" in n for n in listed(staging)) >= k

    def intent():
        return lambda: any(n.endswith(".intent") for n in listed(staging))

    def placed(k: int):
        return lambda: sum(n.startswith("imp") for n in listed(lib)) >= k

    def second_batch():
        seen: set[str] = set()

        def started() -> bool:  # temp files of a second change: the first one committed
            seen.update(n.split(".")[0] for n in listed(staging) if ".t" in n)
            return len(seen) > 1
        return started

    makers = [lambda: staged(rng.randint(1, 999)), intent, lambda: placed(rng.randint(1, 999)), second_batch,
              lambda: placed(1000)]
    return [makers[i % len(makers)]() for i in range(rounds)]


def test_sigkill_during_a_markdown_import_leaves_whole_batches(tmp_path):
    """An import of 1,100 entities (batches of 1,000 and 100) whose relations cross batches both
    ways, killed at several points: after recovery each batch is all there or not at all, files
    and index agree, a relation whose target's batch never came waits as a pending link, and
    a person's note is not touched."""
    import shutil
    import sqlite3

    from memloci.store.markdown.engine import MarkdownStore

    n = 1100
    source = tmp_path / "memory.jsonl"
    with source.open("w", encoding="utf-8") as f:
        for i in range(n):
            f.write(json.dumps({"type": "entity", "name": f"imp{i}", "entityType": "note",
                                "observations": [f"imported fact {i}"]}) + "\n")
        for j in range(n):
            f.write(json.dumps({"type": "relation", "from": f"imp{j}", "to": f"imp{(j * 7 + 1) % n}",
                                "relationType": "uses"}) + "\n")
    base = tmp_path / "base"
    base.mkdir()
    hand = b"---\ntags:  [mine]  # by hand\n---\nA note of my own.\r\n"
    (base / "hand.md").write_bytes(hand)
    service = service_for("markdown", base)
    service.store()  # indexed, as the library the import starts from
    service.close()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMLOCI_")}
    env.update(MEMLOCI_EMBEDDER="none", MEMLOCI_HOME=str(tmp_path / "home"))
    lib = tmp_path / "lib"
    outcomes = []
    for kill_when in _kill_points(lib, max(ROUNDS + 2, 5)):
        shutil.rmtree(lib, ignore_errors=True)
        shutil.copytree(base, lib, symlinks=True)
        _import_round(source, lib, env, kill_when)
        store = MarkdownStore(lib, "crash")
        store.recover()  # what the next process does first
        store.close()
        assert_no_temp_files(lib)
        index = sqlite3.connect(lib / ".memloci" / "index.db")
        try:
            assert_files_agree(lib, index)
            count = index.execute("SELECT count(*) FROM entities WHERE name GLOB 'imp*'").fetchone()[0]
            assert count in (0, 1000, n), f"{count} entities: not whole batches"
            outcomes.append(count)
            observations = index.execute("SELECT count(*) FROM memories WHERE content GLOB 'imported fact *'").fetchone()[0]
            assert observations == count
            linked = index.execute("SELECT count(*) FROM relations").fetchone()[0]
            waiting = index.execute("SELECT count(*) FROM pending_links").fetchone()[0]
            assert linked + waiting == count, f"{linked} relations and {waiting} waiting for {count} sources"
            assert waiting == 0 or count == 1000, f"{waiting} links wait with every batch there"
        finally:
            index.close()
        assert sum(p.name.startswith("imp") for p in lib.glob("*.md")) == count
        assert (lib / "hand.md").read_bytes() == hand
        service = service_for("markdown", lib)
        try:
            report = getattr(service.store(), "last_sync", None)
            assert report is None or (report.indexed, report.removed) == (0, 0), f"the rescan had to fix: {report}"
        finally:
            service.close()
    assert 0 in outcomes and {1000, n} & set(outcomes), f"kills landed only at {outcomes}"
    # Running the import again finishes what a kill left.
    _import_round(source, lib, env)
    service = service_for("markdown", lib)
    try:
        graph = service.export_graph()
        assert len(graph.entities) == n + 1 and len(graph.relations) == n  # hand.md is an entity too
    finally:
        service.close()
