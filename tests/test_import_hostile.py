"""Importers never abort on one bad row: for every importer, a valid export with hostile rows
mixed in (dates out of range, wrong types, broken JSON, bytes that are not UTF-8, lone
surrogates, NUL, huge values, unknown keys in a closed format) imports every good row, lists
every bad one by where it is, and writes nothing of a bad one. Generated with hypothesis; the
counts are kept small so the fast tier stays fast.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from conftest import server_env
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memloci.app.registry import LibraryRegistry
from memloci.app.specs import LibrarySpec
from memloci.formats.basic_memory import read_basic_memory
from memloci.formats.memorix import read_memorix
from memloci.formats.mms import read_mms
from memloci.formats.official import read_official
from memloci.service.facade import MemoryService

FEW = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Values no importer may take for a date, a name or a text.
BAD_DATES = [1e300, -1e300, float("inf"), float("-inf"), "not a date", "0000-01-01T00:00:00Z",
             "10000-01-01T00:00:00Z", "2026-13-01T00:00:00Z", "2026-02-30T00:00:00Z", "0001-01-01T00:00:00+01:00",
             "9999-12-31T23:00:00-05:00", None, [], {"at": 1}, True, 10**30]
BAD_TEXTS = [None, 42, 1.5, True, ["a"], {"a": 1}, "", "   ", "a\x00b", "lone \ud800 surrogate", "x" * 30_000]
BAD_NAMES = BAD_TEXTS[:-1] + ["two\nlines", "n" * 300]
# Lines of a JSON Lines file that are not JSON at all, or not an object.
BROKEN_LINES = [b"{oops", b'{"type": "entity", "name": "cut', b"[1, 2]", b"42", b'"text"', b"null",
                b'{"type": "entity", "name": "\xff\xfe", "entityType": "t", "observations": []}',
                b"[" * 100_000 + b"]" * 100_000, b'{"n": ' + b"9" * 5000 + b"}", b'{"n": NaN}', b'{"n": 1e400}',
                b"\xef\xbb\xbf{}", b"\x00"]


def open_service(root: Path, kind: str = "sqlite") -> tuple[MemoryService, LibraryRegistry]:
    registry = LibraryRegistry([LibrarySpec("default", root / ("lib.db" if kind == "sqlite" else "lib"), kind)])
    return MemoryService(registry), registry


def library_contents(service: MemoryService) -> tuple[set[str], set[str], set[tuple[str, str, str]]]:
    graph = service.export_graph()
    memories = {m.content for m in service.export_everything()[1]}
    return ({e.name for e in graph.entities}, memories,
            {(r.from_entity, r.relation_type, r.to_entity) for r in graph.relations})


def replace(obj: dict, key: str, value) -> dict:
    return {**obj, key: value}


# -- memory.jsonl (`memloci import jsonl`) -------------------------------------------------


def jsonl_entity(i: int) -> dict:
    return {"type": "entity", "name": f"good {i}", "entityType": "thing", "observations": [f"fact {i}"],
            "createdAt": "2024-01-02T03:04:05Z", "updatedAt": "2024-01-02T03:04:05Z",
            "observationDates": ["2024-01-02T03:04:05Z"]}


def jsonl_memory(i: int) -> dict:
    return {"type": "memory", "content": f"memory {i}", "tags": ["t"], "memory_type": "note", "importance": "high",
            "metadata": {"n": i}, "created_at": "2024-01-02T03:04:05Z", "updated_at": "2024-01-02T03:04:05Z"}


def hostile_jsonl_line():
    """One line no reader may take: a broken line, or a good line with one field made hostile."""
    entity, memory = jsonl_entity(999), jsonl_memory(999)
    return st.one_of(
        st.sampled_from(BROKEN_LINES),
        st.builds(lambda k, v: replace(entity, k, v), st.sampled_from(["name", "entityType"]), st.sampled_from(BAD_NAMES)),
        st.builds(lambda v: replace(entity, "observations", v), st.sampled_from([BAD_TEXTS[1:], "one", {"a": 1}, [None]])),
        st.builds(lambda k, v: replace(entity, k, v), st.sampled_from(["createdAt", "updatedAt"]), st.sampled_from(BAD_DATES)),
        st.builds(lambda v: replace(entity, "observationDates", [v]), st.sampled_from(BAD_DATES)),
        st.builds(lambda k, v: replace(memory, k, v), st.sampled_from(["created_at", "updated_at"]),
                  st.sampled_from(BAD_DATES)),
        st.builds(lambda v: replace(memory, "content", v), st.sampled_from(BAD_TEXTS)),
        st.builds(lambda v: replace(memory, "metadata", v),
                  st.sampled_from([[], "text", 3, {"s": "\ud800"}, {"s": "a\x00b"}, {"big": "x" * 20_000}])),
        st.builds(lambda v: replace(memory, "importance", v), st.sampled_from(["urgent", 3, None])),
        st.builds(lambda k: replace(memory, k, "surprise"), st.sampled_from(["colour", "\ud800", "id"])),
        st.builds(lambda v: {"type": "relation", "from": v, "to": "good 0", "relationType": "r"}, st.sampled_from(BAD_NAMES)),
    ).map(lambda x: x if isinstance(x, bytes) else json.dumps(x).encode())


@FEW
@given(goods=st.integers(1, 6), hostile=st.lists(hostile_jsonl_line(), min_size=1, max_size=4), data=st.data())
def test_jsonl_hostile_lines_are_skipped_and_listed(goods, hostile, data):
    good = [json.dumps(jsonl_entity(i)).encode() for i in range(goods)]
    good += [json.dumps({"type": "relation", "from": f"good {i}", "to": "good 0", "relationType": "r"}).encode()
             for i in range(1, goods)]
    good += [json.dumps(jsonl_memory(i)).encode() for i in range(goods)]
    lines: list[bytes] = list(good)
    bad_at = []
    for line in hostile:  # each hostile line at a place of its own among the good ones
        lines.insert(data.draw(st.integers(0, len(lines))), line)
    bad_at = [n for n, line in enumerate(lines, start=1) if line in hostile]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "memory.jsonl"
        path.write_bytes(b"\n".join(lines) + b"\n")
        source = read_official(path)
        assert sorted(int(where.split()[1]) for where, _ in source.skipped) == bad_at
        assert all(reason.strip() for _, reason in source.skipped)
        service, registry = open_service(Path(tmp))
        try:
            report, added, _ = service.import_everything(source)
            names, memories, relations = library_contents(service)
        finally:
            registry.close()
    assert names == {f"good {i}" for i in range(goods)}  # every good row, and nothing of a bad one
    assert memories == {f"memory {i}" for i in range(goods)} and added == goods
    assert relations == {(f"good {i}", "r", "good 0") for i in range(1, goods)}


# -- MCP Memory Service (`memloci import mms`) ---------------------------------------------

MMS_TABLE = """CREATE TABLE memories (id INTEGER PRIMARY KEY AUTOINCREMENT, content_hash TEXT UNIQUE NOT NULL,
    content TEXT NOT NULL, tags TEXT, memory_type TEXT, metadata TEXT, created_at REAL, updated_at REAL,
    created_at_iso TEXT, updated_at_iso TEXT, deleted_at REAL DEFAULT NULL)"""
MMS_COLUMNS = ("content", "tags", "memory_type", "metadata", "created_at", "updated_at")


def hostile_mms_row():
    """(column values as SQL literals or Python values) for one row no importer may take."""
    good = {"content": "bad row", "tags": "a,b", "memory_type": "note", "metadata": "{}", "created_at": 1_700_000_000,
            "updated_at": 1_700_000_000}
    sql_bytes = st.sampled_from([b"a\xffb", b"\xc3", b"ok\x00nul"])
    return st.one_of(
        st.builds(lambda k, v: replace(good, k, v), st.sampled_from(["created_at", "updated_at"]),
                  st.sampled_from([1e300, -1e300, float("inf"), float("-inf"), "not a date", "2026-01-01", b"\x01",
                                   10**18, -(10**18)])),
        st.builds(lambda v: replace(good, "created_at", v), st.just(None)),
        st.builds(lambda v: replace(good, "content", v), st.sampled_from(["", "   ", "a\x00b", "x" * 30_000, b"blob"])),
        st.builds(lambda v: replace(good, "content", ("bytes", v)), sql_bytes),  # text holding bytes not UTF-8
        st.builds(lambda v: replace(good, "tags", v), st.sampled_from(["ok," + "x" * 80, "a\x00b", b"tags"])),
        st.builds(lambda v: replace(good, "memory_type", v), st.sampled_from(["two\nlines", "t" * 100])),
        st.builds(lambda v: replace(good, "metadata", v),
                  st.sampled_from(['{"s": "\\ud800"}', '{"big": "' + "x" * 20_000 + '"}', '{"s": "a\\u0000b"}'])),
        st.builds(lambda v: replace(good, "metadata", ("bytes", v)), sql_bytes),
    )


def write_mms(path: Path, rows: list[dict]) -> None:
    conn = sqlite3.connect(path)
    conn.execute(MMS_TABLE)
    for n, row in enumerate(rows):
        values, marks = [], []
        for column in MMS_COLUMNS:
            value = row[column]
            if isinstance(value, tuple):  # stored as TEXT holding these bytes, as a broken writer would
                marks.append("CAST(? AS TEXT)")
                values.append(value[1])
            else:
                marks.append("?")
                values.append(value)
        conn.execute(f"INSERT INTO memories (content_hash, {', '.join(MMS_COLUMNS)}) VALUES (?, {', '.join(marks)})",
                     [f"hash{n:04d}", *values])
    conn.commit()
    conn.close()


@FEW
@given(goods=st.integers(1, 6), hostile=st.lists(hostile_mms_row(), min_size=1, max_size=4), data=st.data())
def test_mms_hostile_rows_are_skipped_and_listed(goods, hostile, data):
    rows = [{"content": f"memory {i}", "tags": "a,b", "memory_type": "note", "metadata": json.dumps({"n": i}),
             "created_at": 1_700_000_000 + i, "updated_at": None} for i in range(goods)]
    for row in hostile:
        rows.insert(data.draw(st.integers(0, len(rows))), row)
    bad_ids = {n for n, row in enumerate(rows, start=1) if row in hostile}
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "sqlite_vec.db"
        write_mms(db, rows)
        source = read_mms(db)
        assert {int(where.split()[1]) for where, _ in source.skipped} == bad_ids
        service, registry = open_service(Path(tmp))
        try:
            _, added, _ = service.import_everything(source.data)
            _, memories, _ = library_contents(service)
        finally:
            registry.close()
    assert memories == {f"memory {i}" for i in range(goods)} and added == goods


def test_mms_row_dated_1e300_is_listed_and_the_command_exits_cleanly(tmp_path):
    """The issue's case, through the command a person runs: dry run and run alike."""
    db = tmp_path / "sqlite_vec.db"
    write_mms(db, [{"content": "kept", "tags": "", "memory_type": None, "metadata": None, "created_at": 1_700_000_000,
                    "updated_at": None},
                   {"content": "from the far future", "tags": "", "memory_type": None, "metadata": None,
                    "created_at": 1e300, "updated_at": None},
                   {"content": ("bytes", b"caf\xe9"), "tags": "", "memory_type": None, "metadata": None,
                    "created_at": 1_700_000_000, "updated_at": None}])
    home = tmp_path / "home"
    for extra in (["--dry-run"], []):
        proc = subprocess.run([sys.executable, "-m", "memloci", "import", "mms", str(db), *extra],
                              env=server_env(home, COLUMNS="200"), capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
        assert "1 memory" in proc.stdout and "2 items" in proc.stdout and "2 skipped" in proc.stdout or extra
        assert "id 2 (hash0001): id 2.created_at: 1e+300 epoch seconds is no date in the years 1 to 9999" in proc.stdout
        assert "id 3 (hash0002): id 3.content: holds bytes that are not UTF-8 text" in proc.stdout


# -- memorix (`memloci import memorix`) ----------------------------------------------------


def memorix_observation(i: int) -> dict:
    return {"id": i, "entityName": f"good {i}", "type": "decision", "title": f"title {i}", "narrative": f"memory {i}",
            "facts": ["a fact"], "concepts": ["c"], "createdAt": "2026-01-02T03:04:05.000Z"}


def hostile_memorix_observation():
    obs = memorix_observation(999)
    return st.one_of(
        st.builds(lambda k, v: replace(obs, k, v), st.sampled_from(["createdAt", "updatedAt"]),
                  st.sampled_from([d for d in BAD_DATES if d not in (None, [], {})] + ["yesterday"])),
        st.builds(lambda v: replace(obs, "facts", v), st.sampled_from(["one", [1], {"a": 1}, ["\ud800"]])),
        st.builds(lambda k, v: replace(obs, k, v), st.sampled_from(["title", "narrative"]),
                  st.sampled_from([42, ["a"], "a\x00b", "\udcff", "x" * 30_000])),
        st.builds(lambda v: replace(obs, "concepts", v), st.sampled_from([42, ["x" * 80], [None], ["a\x00b"]])),
        st.builds(lambda v: replace(obs, "filesModified", v), st.sampled_from([["\ud800"], ["x" * 20_000]])),
        st.sampled_from([None, 42, "text", [obs]]),
        st.just({k: v for k, v in obs.items() if k != "createdAt"}),
    )


@FEW
@given(goods=st.integers(1, 5), hostile=st.lists(hostile_memorix_observation(), min_size=1, max_size=3),
       broken=st.lists(st.sampled_from(BROKEN_LINES), max_size=3), data=st.data())
def test_memorix_hostile_observations_and_lines_are_skipped_and_listed(goods, hostile, broken, data):
    observations = [memorix_observation(i) for i in range(goods)]
    for obs in hostile:
        observations.insert(data.draw(st.integers(0, len(observations))), obs)
    bad_items = {f"observations.json[{n}]" for n, obs in enumerate(observations) if obs in hostile}
    entity_lines = [json.dumps({"name": f"good {i}", "entityType": "thing", "observations": []}).encode()
                    for i in range(goods)]
    for line in broken:
        entity_lines.insert(data.draw(st.integers(0, len(entity_lines))), line)
    bad_lines = {f"entities.jsonl:{n}" for n, line in enumerate(entity_lines, start=1) if line in broken}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "data"
        root.mkdir()
        (root / "observations.json").write_text(json.dumps(observations))
        (root / "entities.jsonl").write_bytes(b"\n".join(entity_lines) + b"\n")
        source = read_memorix(root)
        assert {where.split(" ")[0] for where, _ in source.skipped} == bad_items | bad_lines
        service, registry = open_service(Path(tmp))
        try:
            _, added, _ = service.import_everything(source.data)
            names, memories, _ = library_contents(service)
        finally:
            registry.close()
    assert names == {f"good {i}" for i in range(goods)}
    assert memories == {f"title {i}\n\nmemory {i}\n\n- a fact" for i in range(goods)} and added == goods


def test_memorix_db_rows_with_bad_bytes_or_bad_json_are_skipped_alone(tmp_path):
    root = tmp_path / "data"
    root.mkdir()
    conn = sqlite3.connect(root / "memorix.db")
    conn.executescript("""
        CREATE TABLE observations (id INTEGER PRIMARY KEY, entityName TEXT, type TEXT, title TEXT, narrative TEXT,
            facts TEXT, concepts TEXT, filesModified TEXT, createdAt TEXT, updatedAt TEXT);
        CREATE TABLE graph_entities (name TEXT PRIMARY KEY, entityType TEXT, observations TEXT);
        CREATE TABLE graph_relations (id INTEGER PRIMARY KEY, from_entity TEXT, to_entity TEXT, relationType TEXT);
        INSERT INTO observations VALUES (1, 'a', 'decision', 'good', 'kept', '[]', '[]', '[]', '2026-01-01T00:00:00Z', NULL);
        INSERT INTO observations VALUES (2, 'a', 'decision', CAST(X'FF' AS TEXT), 'x', '[]', '[]', '[]',
                                         '2026-01-01T00:00:00Z', NULL);
        INSERT INTO observations VALUES (3, 'a', 'decision', 't', 'x', '[1,', '[]', '[]', '2026-01-01T00:00:00Z', NULL);
        INSERT INTO observations VALUES (4, 'a', 'decision', 't', 'x', '[]', '[]', '[]', '0000-01-01T00:00:00Z', NULL);
        INSERT INTO observations VALUES (5, 'a', 'decision', 't', 'x', 42, '[]', '[]', '2026-01-01T00:00:00Z', NULL);
        INSERT INTO graph_entities VALUES ('a', 'thing', '["one"]');
        INSERT INTO graph_entities VALUES ('b', 'thing', '{not json');
        INSERT INTO graph_entities VALUES (CAST(X'61FF' AS TEXT), 'thing', '[]');
        INSERT INTO graph_entities VALUES ('c', 'thing', 7);
        INSERT INTO graph_relations VALUES (1, 'a', 'a', 'self');
        INSERT INTO graph_relations VALUES (2, 'a', 'a', CAST(X'FF' AS TEXT));
    """)
    conn.close()
    source = read_memorix(root)
    skipped = dict(source.skipped)
    assert sorted(skipped) == ["graph entity 'a\\udcff'", "graph entity 'b'", "graph entity 'c'",
                               "graph relation id 2", "observation id 2", "observation id 3", "observation id 4",
                               "observation id 5"]
    assert "not UTF-8" in skipped["observation id 2"] and "year 0 is out of range" not in skipped["observation id 4"]
    service, registry = open_service(tmp_path)
    try:
        service.import_everything(source.data)
        names, memories, relations = library_contents(service)
    finally:
        registry.close()
    assert names == {"a"} and memories == {"good\n\nkept"} and relations == {("a", "self", "a")}


# -- basic-memory (`memloci import basic-memory`) ------------------------------------------

HOSTILE_NOTES: list[tuple[str, bytes]] = [
    ("bytes.md", b"---\ntitle: Bytes\n---\n# Bytes\ncaf\xe9\n"),
    ("nul.md", b"# Nul\n- [fact] a\x00b\n"),
    ("far.md", b"---\ntitle: Far\ncreated: 10000-01-01\n---\nprose\n"),
    ("words.md", b"---\ntitle: Words\ncreated: not a date\n---\nprose\n"),
    ("huge date.md", b"---\ntitle: Huge\ncreated: 1e300\n---\nprose\n"),
    ("early.md", b"---\ntitle: Early\nmodified: 0001-01-01T00:00:00+01:00\n---\nprose\n"),
    ("late.md", b"---\ntitle: Late\nmodified: 9999-12-31T23:00:00-05:00\n---\nprose\n"),
    ("month.md", b"---\ntitle: Month\ncreated: '2026-13-01'\n---\nprose\n"),
    ("surrogate.md", b'---\ntitle: "lone \\ud800"\n---\nprose\n'),
    ("long.md", b"---\ntitle: " + b"n" * 300 + b"\n---\nprose\n"),
    ("lines.md", b'---\ntitle: "two\\nlines"\n---\nprose\n'),
    ("key.md", b'---\ntitle: Key\n"k\\ud800": v\n---\nprose\n'),
]


# Relation items no reader may take (the note itself is good): listed by file and line.
HOSTILE_RELATIONS = ["- 'a\u0001b' [[Good 0]]", "- knows [[" + "n" * 300 + "]]",
                     "- " + "t" * 200 + " [[Good 0]]"]


@FEW
@given(goods=st.integers(1, 4), hostile=st.lists(st.sampled_from(HOSTILE_NOTES), min_size=1, max_size=4, unique=True),
       folders=st.lists(st.sampled_from(["", "people/", "coffee/deep/"]), min_size=4, max_size=4),
       bad_relation=st.sampled_from(HOSTILE_RELATIONS), kind=st.sampled_from(["sqlite", "markdown"]))
def test_basic_memory_hostile_notes_are_skipped_and_listed(goods, hostile, folders, bad_relation, kind):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "notes"
        for i in range(goods):
            path = root / folders[i] / f"good {i}.md"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"---\ntitle: Good {i}\ncreated: 2026-01-02T03:04:05Z\n---\n# Good {i}\n\nProse {i}.\n\n"
                            f"## Observations\n- [fact] fact {i}\n\n## Relations\n- knows [[Good 0]]\n{bad_relation}\n")
        for name, text in hostile:
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_bytes(text)
        source = read_basic_memory(root)
        bad_lines = {f"{folders[i]}good {i}.md:14" for i in range(goods)}
        assert {where for where, _ in source.skipped if ".md:14" in where} == bad_lines
        assert {where.split(":")[0] for where, _ in source.skipped if ".md:14" not in where} == {n for n, _ in hostile}
        service, registry = open_service(Path(tmp), kind)
        try:
            service.import_everything(source.data)
            names, _, relations = library_contents(service)
            paths = {row["name"]: row.get("path") for row in service.list_entities("*")}
        finally:
            registry.close()
    assert names == {f"Good {i}" for i in range(goods)}
    # a skipped relation item's line stays in the body as prose, where its [[link]] is a links_to
    assert {r for r in relations if r[1] != "links_to"} == {(f"Good {i}", "knows", "Good 0") for i in range(goods)}
    if kind == "markdown":  # each in its folder, at its own file name
        assert paths == {f"Good {i}": f"{folders[i]}good {i}.md" for i in range(goods)}


def test_the_cli_lists_hostile_rows_of_every_importer_without_a_traceback(tmp_path):
    """One subprocess per command: exit 0, every good row in, each bad one listed, bytes that
    are not UTF-8 shown as escapes."""
    home = tmp_path / "home"
    jsonl = tmp_path / "memory.jsonl"
    jsonl.write_bytes(json.dumps(jsonl_entity(1)).encode() + b"\n" + BROKEN_LINES[6] + b"\n"
                      + json.dumps(replace(jsonl_memory(1), "created_at", "0000-01-01T00:00:00Z")).encode() + b"\n")
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "ok.md").write_text("# OK\n- [fact] fine\n")
    (notes / os.fsdecode(b"caf\xe9.md")).write_bytes(HOSTILE_NOTES[0][1])  # a name, and a text, not UTF-8
    for args, expected in ((["jsonl", str(jsonl)], ["1 entity created", "  line 2: not UTF-8 text",
                                                    "  line 3.created_at: '0000-01-01T00:00:00Z' is not a date"]),
                           (["basic-memory", str(notes)], ["1 entity created", "caf\\udce9.md: ", "not UTF-8 text"])):
        proc = subprocess.run([sys.executable, "-m", "memloci", "import", *args, "--libraries", f"x:{tmp_path / 'x.db'}"],
                              env=server_env(home, COLUMNS="200"), capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr + proc.stdout
        for text in expected:
            assert text in proc.stdout, (text, proc.stdout)


@pytest.mark.full  # PostgreSQL
def test_hostile_rows_and_waiting_relations_on_postgresql(pg_library, tmp_path):
    """What PostgreSQL refuses outright (NUL in text or jsonb, NaN and Infinity in jsonb, lone
    surrogates) is refused per row before any write; a basic-memory relation to a name nothing
    has keeps its type there too."""
    from memloci.core.model import EntityInput

    lines = [json.dumps(jsonl_entity(0)).encode(), json.dumps(jsonl_memory(0)).encode()]
    hostile = [json.dumps(replace(jsonl_memory(1), "metadata", {"s": "a\x00b"})).encode(),
               json.dumps(replace(jsonl_memory(2), "content", "lone \ud800")).encode(),
               b'{"type": "memory", "content": "x", "metadata": {"n": NaN}, "created_at": "2024-01-02T03:04:05Z", '
               b'"updated_at": "2024-01-02T03:04:05Z"}',
               json.dumps(replace(jsonl_entity(3), "observations", ["a\x00b"])).encode()]
    path = tmp_path / "memory.jsonl"
    path.write_bytes(b"\n".join(lines + hostile) + b"\n")
    source = read_official(path)
    assert [where for where, _ in source.skipped] == ["line 3", "line 4", "line 5", "line 6"]
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "brew.md").write_text("---\ntitle: Brew\n---\n## Relations\n- pairs_with [[Pastry Notes]]\n")
    registry = LibraryRegistry([pg_library.spec])
    service = MemoryService(registry)
    try:
        service.import_everything(source)
        service.import_everything(read_basic_memory(notes).data)
        names, memories, _ = library_contents(service)
        assert names == {"good 0", "Brew"} and memories == {"memory 0"}
        service.create_entities([EntityInput("Pastry Notes", "note", ())])
        assert ("Brew", "pairs_with", "Pastry Notes") in library_contents(service)[2]
    finally:
        registry.close()
