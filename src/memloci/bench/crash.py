"""`memloci bench crash`: SIGKILL a writer at many points and check that every change is all
there or not there at all (DESIGN.md §6).

For each write kind and engine, a library is built once; each round copies it, starts a real
process (`python -m memloci.bench.crash run KIND ENGINE PATH`) that opens the library and
makes one write, kills it with SIGKILL after a delay spread over the write's measured duration,
then checks the library as the next process finds it:
- the change is all there or not at all (counted in the index and in the files);
- in a Markdown library, after the recovery that opening does (and before any rescan), every
  file is exactly as the index records it, and the rescan that follows finds nothing to fix;
- no temp file is left (`.memloci/staging/` is empty, no `*.tmp` anywhere).
On PostgreSQL (`url` given: a libpq URL) the kinds without files or documents run
(POSTGRES_KINDS): a library cannot be copied there, so each round builds a fresh one (a new
library name, so a schema of its own), and the check reads it back through the service.
The tests run a few rounds per kind (tests/test_crash.py, tests/contract/); the bench runs as many as asked.
"""

from __future__ import annotations

import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from memloci.store.markdown.audit import index_disagreements, note_files, temp_files_left

KINDS = ("create", "rename", "merge", "delete", "add_observations", "reindex", "duplicates")  # tests/test_crash.py runs each
ENGINES = ("markdown", "sqlite")
POSTGRES_KINDS = ("create", "delete", "add_observations", "duplicates")  # no files to rebuild, no documents there yet
# How many entities each write touches (the judge's sizes): created, linking the renamed note,
# deleted, given an observation, in the library a reindex reads. A merge takes 20 sources of 10
# observations, each linked from 10 notes.
SIZES = {"create": 1000, "rename": 300, "merge": 20, "delete": 500, "add_observations": 1000, "reindex": 1000,
         "duplicates": 500}
N_SOURCE_OBS, N_SOURCE_LINKERS = 10, 10


def service_for(engine: str, path: Path | str):
    """A service on the library: a file or folder, or for postgres a spec `name:postgresql://...`."""
    from memloci.app.registry import LibraryRegistry
    from memloci.app.specs import LibrarySpec, parse_library_specs
    from memloci.search.embedder import EmbedderHandle
    from memloci.service.facade import MemoryService

    spec = parse_library_specs(str(path))[0] if engine == "postgres" else LibrarySpec("crash", Path(path), engine)
    return MemoryService(LibraryRegistry([spec]), EmbedderHandle("none"))


def library_path(engine: str, folder: Path) -> Path:
    return folder / "lib" if engine == "markdown" else folder / "lib.db"


# -- the library each write starts from ------------------------------------------------

def build(kind: str, engine: str, folder: Path, n: int, url: str | None = None) -> Path | str:
    """The library a write starts from; on postgres a fresh library on the server at `url`."""
    from memloci.core.model import EntityInput

    # a library name chooses the schema on postgres: a new one per build, never shared
    path: Path | str = f"crash{uuid.uuid4().hex[:12]}:{url}" if engine == "postgres" else library_path(engine, folder)
    s = service_for(engine, path)
    try:
        s.create_entities([EntityInput("base", "note", ("the library this write starts from",))])
        if kind == "rename":
            s.create_entities([EntityInput("hub", "note", ("the note every other note links to",))])
            s.create_entities([EntityInput(f"n{i}", "note", (f"note {i} points to [[hub]]",)) for i in range(n)])
        elif kind == "merge":
            s.create_entities([EntityInput("target", "note", ("the merge target",))])
            s.create_entities([EntityInput(f"src{i}", "note", tuple(f"source {i} fact {j}" for j in range(N_SOURCE_OBS)))
                               for i in range(n)])
            s.create_entities([EntityInput(f"n{i}", "note", (f"note {i} is about [[src{i % n}]]",))
                               for i in range(n * N_SOURCE_LINKERS)])
        elif kind in ("delete", "add_observations", "reindex"):
            s.create_entities([EntityInput(f"e{i}", "note", (f"fact {i}",)) for i in range(n)])
        elif kind == "duplicates":  # n pairs of free memories equal but for case and a full stop
            for i in range(n):
                s.store_memory(f"Dup fact {i}.", tags=["first"])
                s.store_memory(f"dup fact {i}", tags=["second"])
    finally:
        s.close()
    if kind == "reindex":  # edits by hand the index has not seen: 100 files deleted, 100 changed, 100 new
        assert isinstance(path, Path)
        for i in range(100):
            (path / f"e{i}.md").unlink()
            with open(path / f"e{100 + i}.md", "a", encoding="utf-8") as f:
                f.write("\n## Notes\nedited by hand\n")
            (path / f"hand{i}.md").write_text(f"# hand{i}\n\n## Observations\n- written by hand {i}\n", encoding="utf-8")
    return path


def write(kind: str, s: Any, n: int) -> None:
    from memloci.core.model import EntityInput, ObservationBatch

    if kind == "create":
        s.create_entities([EntityInput(f"new{i}", "note", (f"new fact {i}", f"another new fact {i}")) for i in range(n)])
    elif kind == "rename":
        s.rename_entity("hub", "hub2")
    elif kind == "merge":
        s.merge_entities([f"src{i}" for i in range(n)], "target")
    elif kind == "delete":
        s.delete_entities([f"e{i}" for i in range(n)])
    elif kind == "add_observations":
        s.add_observations([ObservationBatch(f"e{i}", (f"extra fact {i}",)) for i in range(n)])
    elif kind == "reindex":
        s.reindex()
    elif kind == "duplicates":  # one lifecycle change: n memories changed, n deleted
        s.cleanup_duplicates()


def main(argv: list[str]) -> None:
    """The writer process: open, say "ready", write, say "done"."""
    _, kind, engine, path, n = argv
    s = service_for(engine, path)
    s.store()  # opened (and scanned) before the clock starts
    print("ready", flush=True)
    write(kind, s, int(n))
    print("done", flush=True)
    s.close()


# -- one round -------------------------------------------------------------------------

def start(kind: str, engine: str, path: Path | str, n: int) -> tuple[subprocess.Popen, float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMLOCI_")}
    env["MEMLOCI_EMBEDDER"] = "none"
    proc = subprocess.Popen([sys.executable, "-m", "memloci.bench.crash", "run", kind, engine, str(path), str(n)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    assert proc.stdout is not None  # a pipe (above)
    line = proc.stdout.readline()
    if line.strip() != "ready":
        proc.kill()
        raise RuntimeError(f"the writer did not start: {line!r}")
    return proc, time.perf_counter()


def measure(kind: str, engine: str, base: Path | str, work: Path, n: int, url: str | None = None) -> float:
    """How long the write takes, unkilled (the kill delays are spread over it)."""
    path = fresh(kind, engine, base, work / "calibrate", n, url)
    proc, started = start(kind, engine, path, n)
    proc.wait()
    return time.perf_counter() - started


def fresh(kind: str, engine: str, base: Path | str, folder: Path, n: int, url: str | None) -> Path | str:
    """A library as `base` is, for one round: a copy of its files, or on postgres (where a library
    is a schema on a server, not files to copy) one built the same way under a new name."""
    if engine == "postgres":
        return build(kind, engine, folder, n, url)
    assert isinstance(base, Path)
    return copy(engine, base, folder)


def copy(engine: str, base: Path, folder: Path) -> Path:
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    if engine == "markdown":
        shutil.copytree(base, folder / "lib", symlinks=True)
        return folder / "lib"
    for suffix in ("", "-wal", "-shm"):
        if Path(f"{base}{suffix}").exists():
            shutil.copy2(f"{base}{suffix}", f"{folder / 'lib.db'}{suffix}")
    return folder / "lib.db"


def kill_round(kind: str, engine: str, base: Path | str, folder: Path, delay: float, n: int,
               url: str | None = None) -> str:
    """Copy, start, SIGKILL after `delay` s, check. Returns 'all', 'none' (or raises AssertionError)."""
    path = fresh(kind, engine, base, folder, n, url)
    proc, started = start(kind, engine, path, n)
    left = delay - (time.perf_counter() - started)
    if left > 0:
        time.sleep(left)
    proc.kill()  # SIGKILL
    proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()
    return check(kind, engine, path, n)


# -- the checks --------------------------------------------------------------------------

def _no_temp_files(root: Path) -> None:
    left = temp_files_left(root)
    assert not left, f"temp files left: {left[:5]}"


def _agree(root: Path, index: sqlite3.Connection) -> None:
    """Every file as the index records it, and no record without its file."""
    differ = index_disagreements(root, index)
    assert differ is None, differ


def _count(index: sqlite3.Connection, sql: str, *args: Any) -> int:
    return index.execute(sql, args).fetchone()[0]


def _day_blocks(root: Path) -> int:
    """Free memories "dup fact ..." in a Markdown library's day files."""
    from memloci.markdown.memories import parse_day

    return sum(b.content.lower().startswith("dup fact ") for f in sorted((root / ".memloci" / "memories").glob("*.md"))
               for b in parse_day(f.read_text(encoding="utf-8"), f.stem))


def _one_of(what: str, value: int, nothing: int, everything: int) -> str:
    """"none" or "all": a count after a kill must be one of the two, never in between."""
    assert value in (nothing, everything), f"{what}: {value}, neither {nothing} (nothing) nor {everything} (all)"
    return "none" if value == nothing else "all"


def _all_or_nothing(kind: str, index: sqlite3.Connection, files: dict[str, bytes] | None, n: int) -> str:
    entity = "SELECT count(*) FROM entities WHERE name GLOB ?"
    if kind == "create":
        got = _one_of("new entities", _count(index, entity, "new*"), 0, n)
        _one_of("their observations", _count(index, "SELECT count(*) FROM memories m JOIN entities e ON e.id = m.entity_id "
                                                    "WHERE e.name GLOB 'new*'"), 0, 2 * n if got == "all" else 0)
        if files is not None:
            _one_of("new files", sum(rel.startswith("new") for rel in files), 0, n if got == "all" else 0)
        return got
    if kind == "rename":
        hub, hub2 = _count(index, entity, "hub"), _count(index, entity, "hub2")
        assert hub + hub2 == 1, f"hub: {hub}, hub2: {hub2}"
        got = "all" if hub2 else "none"
        if files is not None:
            new = sum(b"[[hub2]]" in data for rel, data in files.items() if rel.startswith("n"))
            old = sum(b"[[hub]]" in data for rel, data in files.items() if rel.startswith("n"))
            assert (new, old) == ((n, 0) if hub2 else (0, n)), f"linking files: {new} renamed, {old} not"
            assert ("hub2.md" in files, "hub.md" in files) == (bool(hub2), bool(hub)), "the renamed note's file"
            linked = _count(index, "SELECT count(*) FROM relations r JOIN entities e ON e.id = r.to_id WHERE e.name = ?",
                            "hub2" if hub2 else "hub")
            assert linked == n, f"relations to the note: {linked}, not {n}"
        return got
    if kind == "merge":
        got = _one_of("sources left", _count(index, entity, "src*"), n, 0)  # none left: merged
        target = _count(index, "SELECT count(*) FROM memories m JOIN entities e ON e.id = m.entity_id WHERE e.name = 'target'")
        assert target == (1 + n * N_SOURCE_OBS if got == "all" else 1), f"target observations: {target}"
        if files is not None:
            sources = sum(rel.startswith("src") for rel in files)
            assert sources == (0 if got == "all" else n), f"source files: {sources}"
            to_target = sum(b"[[target]]" in data for rel, data in files.items() if rel.startswith("n"))
            assert to_target == (n * N_SOURCE_LINKERS if got == "all" else 0), f"links repaired: {to_target}"
        return got
    if kind == "delete":
        left = _count(index, entity, "e*")
        got = _one_of("entities left", left, n, 0)
        got = "all" if left == 0 else "none"
        if files is not None:
            assert sum(rel.startswith("e") for rel in files) == left, "entity files and entities differ"
        return got
    if kind == "duplicates":
        left = _count(index, "SELECT count(*) FROM memories WHERE entity_id IS NULL AND lower(content) GLOB 'dup fact *'")
        got = _one_of("duplicates left", left, 2 * n, n)
        merged = _count(index, "SELECT count(*) FROM memories WHERE tags = ?", '["first", "second"]')
        assert merged == (n if got == "all" else 0), f"memories holding both tags: {merged}"
        return got
    if kind == "add_observations":
        got = _one_of("added observations", _count(index, "SELECT count(*) FROM memories WHERE content GLOB 'extra fact *'"),
                     0, n)
        if files is not None:
            _one_of("files holding them", sum(b"extra fact" in data for data in files.values()), 0,
                   n if got == "all" else 0)
        return got
    raise ValueError(kind)


def _graph_all_or_nothing(kind: str, path: str, n: int) -> str:
    """The same checks as `_all_or_nothing`, read through the service (for postgres, whose tables
    are its own business): the write's entities and observations all there, or none."""
    s = service_for("postgres", path)
    try:
        graph = s.export_graph()
    finally:
        s.close()

    def named(prefix: str) -> list:
        return [e for e in graph.entities if e.name.startswith(prefix)]

    if kind == "create":
        got = _one_of("new entities", len(named("new")), 0, n)
        _one_of("their observations", sum(len(e.observations) for e in named("new")), 0, 2 * n if got == "all" else 0)
        return got
    if kind == "delete":
        return _one_of("entities left", len(named("e")), n, 0)
    if kind == "add_observations":
        return _one_of("added observations", sum(o.content.startswith("extra fact ") for e in graph.entities
                                                for o in e.observations), 0, n)
    if kind == "duplicates":
        from memloci.core.model import EVERY_MEMORY

        s = service_for("postgres", path)
        try:
            memories, _ = s.list_memories(page_size=10_000, filters=EVERY_MEMORY)
        finally:
            s.close()
        dups = [m for m in memories if m.content.lower().startswith("dup fact ")]
        got = _one_of("duplicates left", len(dups), 2 * n, n)
        merged = sum(list(m.tags) == ["first", "second"] for m in dups)
        assert merged == (n if got == "all" else 0), f"memories holding both tags: {merged}"
        return got
    raise ValueError(f"{kind}: not a write kind postgres runs ({', '.join(POSTGRES_KINDS)})")


def check(kind: str, engine: str, path: Path | str, n: int) -> str:
    if engine == "postgres":
        return _graph_all_or_nothing(kind, str(path), n)
    assert isinstance(path, Path)
    if engine == "sqlite":
        s = service_for(engine, path)
        s.store()  # opening is all the recovery SQLite needs
        s.close()
        index = sqlite3.connect(path)
        try:
            return _all_or_nothing(kind, index, None, n)
        finally:
            index.close()
    from memloci.store.markdown.engine import MarkdownStore

    store = MarkdownStore(path, "crash")
    store.recover()  # what the next process does first: finish or undo the killed change
    store.close()
    _no_temp_files(path)
    index = sqlite3.connect(path / ".memloci" / "index.db")
    try:
        if kind == "reindex":
            outcome = "all" if _count(index, "SELECT count(*) FROM entities WHERE name GLOB 'hand*'") else "none"
        else:
            _agree(path, index)
            outcome = _all_or_nothing(kind, index, note_files(path), n)
            if kind == "duplicates":  # the day files hold what the index holds
                blocks = _day_blocks(path)
                assert blocks == (n if outcome == "all" else 2 * n), f"day files hold {blocks} duplicates"
    finally:
        index.close()
    s = service_for(engine, path)
    try:
        report = getattr(s.store(), "last_sync", None)  # set only when the scan found something
        if kind != "reindex":
            assert report is None or (report.indexed, report.removed) == (0, 0), \
                f"the rescan after recovery had to fix the index: {report}"
        else:  # whatever the kill left, the next open brings the index up to the files
            from memloci.core.model import EntityInput

            names = {e.name for e in s.read_graph(limit=10_000).entities}
            assert not {f"e{i}" for i in range(100)} & names, "entities of files deleted by hand came back"
            assert {f"hand{i}" for i in range(100)} <= names, "files written by hand are not indexed"
            s.create_entities([EntityInput("after", "note", ("a write after the rebuild",))])
            assert not any((path / f"e{i}.md").exists() for i in range(100)), "a write recreated deleted files"
        index = sqlite3.connect(path / ".memloci" / "index.db")
        try:
            _agree(path, index)
        finally:
            index.close()
        _no_temp_files(path)
    finally:
        s.close()
    return outcome


def run_kind(kind: str, engine: str, rounds: int, work: Path, n: int | None = None, seed: int = 7,
             url: str | None = None) -> dict[str, Any]:
    """Build once, measure once, then `rounds` kills spread over the write's duration.
    `url`: the PostgreSQL server a postgres engine writes to."""
    if engine == "postgres" and (url is None or kind not in POSTGRES_KINDS):
        raise ValueError(f"postgres runs {', '.join(POSTGRES_KINDS)}, with a server URL")
    rng = random.Random(seed)
    n = n or SIZES[kind]
    base = build(kind, engine, work / "base", n, url)
    duration = measure(kind, engine, base, work, n, url)
    result: dict[str, Any] = {"kind": kind, "engine": engine, "n": n, "rounds": rounds, "write_s": round(duration, 3),
                              "all": 0, "none": 0, "failures": []}
    for i in range(rounds):
        delay = duration * (i + rng.random()) / rounds
        try:
            result[kill_round(kind, engine, base, work / "round", delay, n, url)] += 1
        except AssertionError as exc:
            result["failures"].append(f"kill at {delay:.3f} s: {exc}")
    shutil.rmtree(work, ignore_errors=True)
    return result


def run(*, rounds: int, kinds: list[str], engines: list[str], out: Path, console: Any,
        size: int | None = None, pg_url: str | None = None) -> dict[str, Any]:
    """`size`: entities each write touches (None: SIZES, each kind's own); `pg_url`: the server
    the postgres engine writes to."""
    from rich.table import Table

    from memloci.bench.common import save_report

    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        raise ValueError(f"unknown write kind(s) {', '.join(unknown)}; known: {', '.join(KINDS)}")
    report: dict[str, Any] = {"bench": "crash", "rounds": rounds, "results": []}
    table = Table(title=f"memloci bench crash — SIGKILL during each write, {rounds} rounds each")
    for column in ("write", "engine", "write takes", "all there", "not there", "failed"):
        table.add_column(column, justify="left" if column in ("write", "engine") else "right")
    tmp = Path(tempfile.mkdtemp(prefix="memloci-crash-"))
    for kind in kinds:
        for engine in engines:
            if kind == "reindex" and engine == "sqlite":
                continue  # a SQLite library has no files to rebuild from
            if engine == "postgres" and kind not in POSTGRES_KINDS:
                continue  # documents (rename, merge) and files (reindex) are not on postgres yet
            console.print(f"{kind} on {engine} ...")
            r = run_kind(kind, engine, rounds, tmp / f"{kind}-{engine}", n=size, url=pg_url)
            report["results"].append(r)
            table.add_row(kind, engine, f"{r['write_s']:.2f} s", str(r["all"]), str(r["none"]), str(len(r["failures"])))
            for failure in r["failures"]:
                console.print(f"  FAILED: {failure}", markup=False)
    shutil.rmtree(tmp, ignore_errors=True)
    console.print(table)
    save_report(report, out, console)
    return report


if __name__ == "__main__":
    if len(sys.argv) == 6 and sys.argv[1] == "run":
        main(sys.argv[1:])
    else:
        sys.exit("usage: python -m memloci.bench.crash run KIND ENGINE PATH N  (postgres: PATH is NAME:postgresql://...)")
