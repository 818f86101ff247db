"""The postgres engine on a real PostgreSQL (tests/pg.py): library URLs, the official graph
tools' semantics through the service, writes from several processes at once, and another
server's writes seen through LISTEN/NOTIFY."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from memloci.app.config import load_config
from memloci.app.registry import LibraryRegistry
from memloci.app.specs import parse_library_specs
from memloci.core.errors import AlreadyExistsError, InvalidRelationError, NotFoundError, ValidationError
from memloci.core.model import EntityInput, ObservationBatch, RelationInput
from memloci.core.schema import schema_from_config
from memloci.core.secrets import masked_url
from memloci.service.facade import MemoryService

ROOT = Path(__file__).resolve().parents[1]


# -- library specs -------------------------------------------------------------------------

def test_a_postgresql_url_selects_the_postgres_engine(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    specs = parse_library_specs("team:postgresql://me@db.example/memory?sslmode=require,"
                                "ops:postgres://me@db.example/memory,local:notes.db")
    assert [(s.name, s.kind) for s in specs] == [("team", "postgres"), ("ops", "postgres"), ("local", "sqlite")]
    # the URL is kept as given (a Path would fold `//`), and nothing is made on disk
    assert specs[0].path == "postgresql://me@db.example/memory?sslmode=require"
    assert specs[1].path == "postgres://me@db.example/memory"
    assert list(tmp_path.iterdir()) == []
    # a socket URL, as libpq takes it
    (sock,) = parse_library_specs("team:postgresql://postgres:@/postgres?host=/tmp/pg")
    assert sock.kind == "postgres" and sock.path == "postgresql://postgres:@/postgres?host=/tmp/pg"


@pytest.mark.parametrize("url", ["http://x", "https://host/db", "mysql://me@host/db", "file:///tmp/x.db",
                                 "sqlite://x.db"])
def test_a_url_of_a_scheme_not_served_is_refused(tmp_path, monkeypatch, url):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValidationError) as err:
        parse_library_specs(f"team:{url}")
    message = str(err.value)
    scheme = url.partition(":")[0]
    assert f"libraries[0] path '{url}'" in message and f"scheme '{scheme}' is not served" in message
    assert "postgresql://" in message
    assert list(tmp_path.iterdir()) == []  # no folder named `http:` or anything else


def test_config_file_libraries_take_urls(tmp_path):
    config = tmp_path / "config.toml"
    config.write_text('[libraries]\nteam = "postgresql://me:s3cret@db.example/memory"\nnotes = "notes"\n')
    specs = load_config(config)["libraries"]
    assert [(s.name, s.kind, str(s.path)) for s in specs] == [
        ("team", "postgres", "postgresql://me:s3cret@db.example/memory"),  # not made relative to the file
        ("notes", "markdown", str(tmp_path / "notes"))]
    config.write_text('[libraries]\nteam = "ftp://me:s3cret@db.example/memory"\n')
    with pytest.raises(ValidationError) as err:
        load_config(config)
    assert "config [libraries] team path" in str(err.value) and "scheme 'ftp' is not served" in str(err.value)
    assert "s3cret" not in str(err.value)


def test_passwords_are_masked():
    assert masked_url("postgresql://me:s3cret@db.example:5432/memory") == "postgresql://me:***@db.example:5432/memory"
    assert "s3cret" not in masked_url("postgresql://me@db/memory?password=s3cret&sslmode=require")
    assert masked_url("postgresql://me@db/memory?password=s3cret&sslmode=require").endswith("sslmode=require")
    assert masked_url("postgresql://me@db/memory") == "postgresql://me@db/memory"
    with pytest.raises(ValidationError) as err:
        parse_library_specs("team:postgresql://me:s3cret@db:notaport/memory")
    assert "s3cret" not in str(err.value) and "port" in str(err.value)


def test_an_unreachable_server_is_reported_without_its_password(tmp_path):
    registry = LibraryRegistry(parse_library_specs(
        f"team:postgresql://me:s3cret@/memory?host={tmp_path}/nowhere&connect_timeout=2"))
    try:
        with pytest.raises(Exception) as err:
            MemoryService(registry).read_graph(library="team")
        assert "cannot reach PostgreSQL" in str(err.value) and "s3cret" not in str(err.value)
        assert "team" in str(err.value)
    finally:
        registry.close()


# -- the official graph tools, through the service: the same answers as on SQLite -------------

def _service(spec, schema=None) -> MemoryService:
    if schema is not None:
        import dataclasses

        spec = dataclasses.replace(spec, schema=schema)
    return MemoryService(LibraryRegistry([spec]))


def _stamp_free(value):
    """A result with its timestamps blanked, so two runs a second apart compare equal."""
    import dataclasses

    if dataclasses.is_dataclass(value):
        return {f.name: ("<at>" if f.name in ("created_at", "updated_at") and getattr(value, f.name) else
                         _stamp_free(getattr(value, f.name))) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [_stamp_free(v) for v in value]
    if isinstance(value, dict):
        return {k: "<at>" if k in ("created_at", "updated_at") and v else _stamp_free(v) for k, v in value.items()}
    return value


def _official_tools(s: MemoryService) -> list:
    """The nine official tools and their error paths; every answer, timestamps blanked."""
    out: list = []

    def call(name, *args, **kwargs):
        try:
            out.append((name, _stamp_free(getattr(s, name)(*args, **kwargs))))
        except (ValidationError, NotFoundError, InvalidRelationError, AlreadyExistsError) as exc:
            out.append((name, type(exc).__name__, exc.code, str(exc)))

    call("create_entities", [EntityInput("Alice", "person", ("likes tea", "works at Acme #work")),
                             EntityInput("Bob", "person", ("plays chess",)),
                             EntityInput("alice", "robot", ("likes tea", "new in town")),  # merges in the call
                             EntityInput("Acme", "company")])
    call("create_entities", [EntityInput("ALICE", "robot", ("likes tea", "speaks French"))])  # merges into Alice
    call("create_relations", [RelationInput("Alice", "knows", "Bob"), RelationInput("alice", "works_at", "acme"),
                              RelationInput("Alice", "knows", "Bob")])
    call("create_relations", [RelationInput("Alice", "knows", "Bob")])  # already there
    call("create_relations", [RelationInput("Alice", "knows", "Ghost"), RelationInput("Nobody", "knows", "Bob")])
    call("add_observations", [ObservationBatch("bob", ("plays chess", "wins often")), ObservationBatch("Acme", ("big",))])
    call("add_observations", [ObservationBatch("Ghost", ("x",))])
    call("read_graph")
    call("read_graph", limit=2, offset=1, summary=True)
    call("open_nodes", ["bob", "Ghost", "ACME", "Bob"])
    call("delete_observations", [ObservationBatch("Alice", ("likes tea", "never said")), ObservationBatch("Ghost", ("x",))])
    call("delete_relations", [RelationInput("Alice", "knows", "Bob"), RelationInput("Alice", "knows", "Bob"),
                              RelationInput("Ghost", "knows", "Bob")])
    call("delete_entities", ["acme", "Ghost"])
    call("delete_entities", ["acme"])
    call("read_graph")  # Alice keeps the tag #work of an observation still there
    call("add_observations", [ObservationBatch("Bob", ("joined #chess-club", "plain words"))])
    call("delete_observations", [ObservationBatch("alice", ("works at Acme #work",))])
    call("read_graph")  # Alice's tag left with its observation; Bob's came with his
    # the journal, less the undo records SQLite keeps (this engine does not undo yet)
    out.append(("journal", [(e.tool, e.action, e.entities, {k: v for k, v in (e.detail or {}).items() if k != "undo"})
                            for e in reversed(s.history(limit=50))]))
    return out


def test_official_tools_answer_as_on_sqlite(pg_library, tmp_path):
    from memloci.app.specs import LibrarySpec

    sqlite, pg = _service(LibrarySpec("lite", tmp_path / "lite.db")), _service(pg_library.spec)
    try:
        expected, got = _official_tools(sqlite), _official_tools(pg)
    finally:
        sqlite.close()
        pg.close()
    assert got == expected
    errors = [e for e in got if len(e) == 4]
    assert [e[2] for e in errors] == ["INVALID_RELATION", "NOT_FOUND"]  # the run did reach the error paths
    tags = [{e["name"]: e["tags"] for e in got[i][1]["entities"]} for i in (-5, -2)]  # the last two read_graph
    assert tags == [{"Alice": ["work"], "Bob": []}, {"Alice": [], "Bob": ["chess-club"]}]


def _strict_rules(s: MemoryService) -> list:
    out: list = []

    def call(name, *args, **kwargs):
        try:
            out.append((name, _stamp_free(getattr(s, name)(*args, **kwargs))))
        except (ValidationError, NotFoundError, InvalidRelationError, AlreadyExistsError) as exc:
            out.append((name, exc.code, str(exc)))

    call("create_entities", [EntityInput("a", "concept", ("one",)), EntityInput("b", "concept"),
                             EntityInput("c", "concept")])
    call("create_entities", [EntityInput("a", "concept")])  # unique names
    call("add_observations", [ObservationBatch("a", ("one",))])  # unique observations
    call("create_relations", [RelationInput("a", "depends-on", "b"), RelationInput("b", "depends-on", "c")])
    call("create_relations", [RelationInput("c", "uses", "a")])  # closes a cycle over every type
    call("create_relations", [RelationInput("c", "knows", "b"), RelationInput("c", "uses", "a")])  # nothing half-applied
    call("read_graph")
    return out


def test_strict_rules_hold_as_on_sqlite(pg_library, tmp_path):
    from memloci.app.specs import LibrarySpec

    strict = schema_from_config("strict", "schema")
    sqlite, pg = _service(LibrarySpec("lite", tmp_path / "lite.db"), strict), _service(pg_library.spec, strict)
    try:
        expected, got = _strict_rules(sqlite), _strict_rules(pg)
    finally:
        sqlite.close()
        pg.close()
    assert got == expected
    codes = [e[1] for e in got if len(e) == 3]
    assert codes == ["ALREADY_EXISTS", "VALIDATION_ERROR", "INVALID_RELATION", "INVALID_RELATION"]
    assert "c -uses-> a would close a cycle (c -> a -> b -> c)" in got[4][2]
    graph = got[-1][1]
    assert len(graph["relations"]) == 2  # c -knows-> b was rolled back with the refused one


# -- the engine itself ---------------------------------------------------------------------

def test_each_library_is_a_schema_of_its_own(pg_url):
    from pg import pg_library_url

    one, two = pg_library_url(pg_url), pg_library_url(pg_url)
    registry = LibraryRegistry(parse_library_specs(f"{one.arg},{two.arg}"))
    s = MemoryService(registry)
    try:
        s.create_entities([EntityInput("Alice", "person", ("in one",))], library=one.name)
        s.create_entities([EntityInput("Alice", "robot", ("in two",))], library=two.name)
        assert [(e.entity_type, e.observations[0].content) for e in s.read_graph(library=one.name).entities] == \
            [("person", "in one")]
        assert [(e.entity_type, e.observations[0].content) for e in s.read_graph(library=two.name).entities] == \
            [("robot", "in two")]
        stats = s.stats(library=one.name)
        assert (stats.kind, stats.entities, stats.observations) == ("postgres", 1, 1)
        assert stats.path.endswith(f"#memloci_{one.name}")
    finally:
        s.close()


def test_open_without_create_reports_a_missing_library(pg_library):
    from memloci.core.errors import LibraryMissingError

    registry = LibraryRegistry([pg_library.spec], create_missing=False)
    try:
        with pytest.raises(LibraryMissingError, match=f"library '{pg_library.name}' does not exist yet"):
            MemoryService(registry).read_graph()
    finally:
        registry.close()


def test_long_and_dotted_library_names_get_distinct_schemas(pg_url):
    from memloci.store.postgres.connection import schema_for
    from memloci.store.postgres.engine import PostgresStore

    base = "x" * 60
    names = [base + "a", base + "b", "Team.x-1"]
    schemas = [schema_for(n) for n in names]
    assert len(set(schemas)) == 3 and all(len(s.encode()) <= 63 for s in schemas)
    assert schema_for("Team") == schema_for("team")  # library names match case-insensitively
    for name in names:
        store = PostgresStore(pg_url, name)
        try:
            store.create_entities([EntityInput("E", "t")], origin="test")
            assert [e.name for e in store.read_graph(limit=5, offset=0, summary=True).entities] == ["E"]
        finally:
            store.delete_entities(["E"], origin="test")
            store.close()


def test_rename_and_merge_of_missing_names_answer_as_on_sqlite(pg_library):
    """Renaming and merging answer here with SQLite's errors (the contract suite,
    test_rename_merge_contract.py, checks what they change)."""
    s = _service(pg_library.spec)
    try:
        with pytest.raises(NotFoundError, match="old_name: entity 'a' does not exist"):
            s.rename_entity("a", "b")
        with pytest.raises(NotFoundError, match="not found: source_names: 'a', target_name: 'b'"):
            s.merge_entities(["a"], "b")
    finally:
        s.close()


def test_stats_and_engine_figures(pg_library):
    s = _service(pg_library.spec)
    try:
        s.create_entities([EntityInput("A", "t", ("x",))])
        store = s.store()
        figures = store.engine_health()
        assert figures["engine"] == "postgres" and figures["server_version"].split(".")[0].isdigit()
        assert figures["pgvector"] is None or figures["pgvector"][0].isdigit()
        assert figures["pool"]["max"] >= 1 and figures["pool"]["size"] >= 1
        assert ":@" in store.path or "***" not in store.path  # an empty password is shown as empty
        health = s.health()
        assert (health["status"], health["backend"], health["engine"]["engine"]) == ("healthy", "postgres", "postgres")
        assert health["statistics"]["observations"] == 1
    finally:
        s.close()


# -- several servers on one library -------------------------------------------------------

def test_a_second_server_hears_the_first_ones_writes(pg_library):
    from memloci.store.postgres.engine import PostgresStore

    first, second = PostgresStore(pg_library.url, pg_library.name), PostgresStore(pg_library.url, pg_library.name)
    try:
        first.open()
        second.open()
        heard: list[str] = []
        second.on_change(heard.append)
        before = second.changes()
        first.create_entities([EntityInput("Alice", "person", ("hello",))], origin="test")
        deadline = time.monotonic() + 20
        while second.changes() == before and time.monotonic() < deadline:
            time.sleep(0.05)
        assert second.changes() > before and heard == ["graph"]
        assert [e.name for e in second.open_entities(["alice"]).entities] == ["Alice"]
        # a write that rolls back tells nobody
        count = second.changes()
        with pytest.raises(NotFoundError):
            first.add_observations([ObservationBatch("Ghost", ("x",))], origin="test")
        first.create_entities([EntityInput("Bob", "person")], origin="test")  # a marker after it
        deadline = time.monotonic() + 20
        while second.changes() == count and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.2)
        assert second.changes() == count + 1
    finally:
        first.close()
        second.close()


WRITER = textwrap.dedent("""
    import sys
    from memloci.core.errors import AlreadyExistsError
    from memloci.app.registry import LibraryRegistry
    from memloci.app.specs import parse_library_specs
    from memloci.core.model import EntityInput, ObservationBatch, RelationInput
    from memloci.service.facade import MemoryService

    spec, worker, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    s = MemoryService(LibraryRegistry(parse_library_specs(spec)))
    for i in range(count):
        s.create_entities([EntityInput(f"w{worker}-e{i}", "item", (f"made by {worker}",)),
                           EntityInput("Shared", "hub", (f"touched by {worker} #{i}",))])
        s.create_relations([RelationInput(f"w{worker}-e{i}", "part_of", "Shared")])
        if i % 10 == 0:
            s.add_observations([ObservationBatch("shared", (f"note {worker}-{i}",))])
    s.close()
    print("done", worker)
""")


@pytest.mark.full  # several processes
def test_four_processes_creating_at_once_lose_nothing(pg_library):
    """4 server processes x 250 create calls (each with a merge into one shared entity, and a
    relation to it) on a library none has opened yet: every entity, observation and relation
    is there, and the shared entity exists once."""
    workers, count = 4, 250
    env = {**os.environ, "MEMLOCI_EMBEDDER": "none"}
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, pg_library.arg, str(w), str(count)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
             for w in range(workers)]
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-3000:]
    s = _service(pg_library.spec)
    try:
        stats = s.stats()
        assert stats.entities == workers * count + 1
        assert stats.relations == workers * count
        # each item's own observation, the shared entity's one per call and one per ten calls
        assert stats.observations == workers * count + workers * count + workers * (count // 10)
        (shared,) = s.open_nodes(["Shared"]).entities
        assert len(shared.observations) == workers * count + workers * (count // 10)
        assert len(s.history(limit=10_000)) == workers * (count * 2 + count // 10)
    finally:
        s.close()


STRICT_WRITER = textwrap.dedent("""
    import dataclasses, sys
    from memloci.core.errors import AlreadyExistsError
    from memloci.app.registry import LibraryRegistry
    from memloci.app.specs import parse_library_specs
    from memloci.core.model import EntityInput
    from memloci.core.schema import schema_from_config
    from memloci.service.facade import MemoryService

    (spec,) = parse_library_specs(sys.argv[1])
    s = MemoryService(LibraryRegistry([dataclasses.replace(spec, schema=schema_from_config("strict", "schema"))]))
    won = 0
    for i in range(int(sys.argv[2])):
        try:
            s.create_entities([EntityInput(f"name-{i}", "concept")])
            won += 1
        except AlreadyExistsError:
            pass
    s.close()
    print(won)
""")


@pytest.mark.full  # several processes
def test_unique_names_hold_across_processes(pg_library):
    """Three processes race to create the same 60 names under unique names: each exists once,
    and exactly one process won each."""
    names = 60
    env = {**os.environ, "MEMLOCI_EMBEDDER": "none"}
    procs = [subprocess.Popen([sys.executable, "-c", STRICT_WRITER, pg_library.arg, str(names)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
             for _ in range(3)]
    won = 0
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-3000:]
        won += int(out.split()[-1])
    assert won == names
    s = _service(pg_library.spec)
    try:
        assert s.stats().entities == names
    finally:
        s.close()


def test_a_user_without_write_rights_gets_permission_denied(pg_library):
    """A database user that may read the library but not write it: reads answer, a write is
    PERMISSION_DENIED (not an internal error) and changes nothing."""
    import psycopg

    from memloci.core.errors import PermissionDeniedError
    from memloci.store.postgres.engine import PostgresStore

    owner = PostgresStore(pg_library.url, pg_library.name)
    owner.create_entities([EntityInput("Alice", "person")], origin="test")
    role = f"reader_{pg_library.name}"
    with psycopg.connect(pg_library.url, autocommit=True) as conn:
        conn.execute(f'CREATE ROLE "{role}" LOGIN')
        conn.execute(f'GRANT USAGE ON SCHEMA "{owner.schema_id}" TO "{role}"')
        conn.execute(f'GRANT SELECT ON ALL TABLES IN SCHEMA "{owner.schema_id}" TO "{role}"')
    reader = PostgresStore(pg_library.url.replace("postgresql://postgres:", f"postgresql://{role}:", 1), pg_library.name)
    try:
        assert [e.name for e in reader.read_graph(limit=5, offset=0, summary=True).entities] == ["Alice"]
        with pytest.raises(PermissionDeniedError, match="may not"):
            reader.create_entities([EntityInput("Bob", "person")], origin="test")
        assert owner.stats().entities == 1
    finally:
        reader.close()
        owner.close()


# -- a real server over stdio ----------------------------------------------------------------

def test_a_server_serves_a_postgres_library_over_stdio(pg_library, home):
    from conftest import Client, run_session

    async def body(c: Client):
        created, _ = await c.ok("create_entities", entities=[
            {"name": "Alice", "entityType": "person", "observations": ["likes tea"]},
            {"name": "Bob", "entityType": "person", "observations": []}])
        assert [e["name"] for e in created["entities"]] == ["Alice", "Bob"]
        await c.ok("create_relations", relations=[{"from": "Alice", "to": "bob", "relationType": "knows"}])
        graph, _ = await c.ok("read_graph")
        assert [e["name"] for e in graph["entities"]] == ["Alice", "Bob"]
        assert [(r["from"], r["to"]) for r in graph["relations"]] == [("Alice", "Bob")]
        opened, _ = await c.ok("open_nodes", names=["alice"])
        assert opened["entities"][0]["observations"] == ["likes tea"]
        error = await c.error("add_observations", observations=[{"entityName": "Ghost", "contents": ["x"]}])
        assert error["code"] == "NOT_FOUND" and "Ghost" in error["message"]
        error = await c.error("create_relations", relations=[{"from": "Alice", "to": "Nobody", "relationType": "knows"}])
        assert error["code"] == "INVALID_RELATION"
        libs, _ = await c.ok("list_libraries")
        assert [(lib["name"], lib["kind"]) for lib in libs["libraries"]] == [(pg_library.name, "postgres")]
        # the client checks the reply against the tool's output schema
        health, _ = await c.ok("check_database_health")
        assert (health["status"], health["backend"], health["engine"]["engine"]) == ("healthy", "postgres", "postgres")

    run_session(home, body, "--libraries", pg_library.arg)


def test_a_server_refuses_a_library_url_it_does_not_serve(tmp_path, home):
    from conftest import server_env

    out = subprocess.run([sys.executable, "-m", "memloci", "serve", "--libraries", "team:http://example.com/memory"],
                         env=server_env(home), cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode != 0 and out.stdout == ""
    assert "scheme 'http' is not served" in out.stderr
    assert list(tmp_path.iterdir()) == [] or not (tmp_path / "team:http:").exists()
    assert not any(p.name.startswith("http") for p in tmp_path.iterdir())


def test_the_task_context_as_on_sqlite(pg_library, tmp_path):
    from memloci.app.specs import LibrarySpec

    def run(s: MemoryService) -> list:
        first = s.update_context(active_task="port the engine", status="IN_PROGRESS", next_steps=["tests"])
        second = s.update_context(status="COMPLETED")  # merged into the first, not replacing it
        journal = [(e.action, {k: v for k, v in (e.detail or {}).items() if k != "undo"}) for e in s.history(limit=5)]
        return [_stamp_free(first), _stamp_free(second), _stamp_free(s.read_context()), journal]

    sqlite, pg = _service(LibrarySpec("lite", tmp_path / "lite.db")), _service(pg_library.spec)
    try:
        expected, got = run(sqlite), run(pg)
    finally:
        sqlite.close()
        pg.close()
    assert got == expected
    assert got[2]["active_task"] == "port the engine" and got[2]["status"] == "COMPLETED"


def test_export_and_import_through_postgres_keep_every_timestamp(pg_library, tmp_path, home):
    """SQLite -> JSONL -> PostgreSQL -> JSONL -> SQLite: the three exports are byte for byte
    the same (entities, observations, relations and free memories, with their timestamps)."""
    from conftest import server_env

    lite = _service(parse_library_specs(f"lite:{tmp_path / 'lite.db'}")[0])
    try:
        lite.create_entities([EntityInput("Alice", "person", ("likes tea #drinks", "works at Acme")),
                              EntityInput("Bob", "person")])
        lite.create_relations([RelationInput("Alice", "knows", "Bob")])
        lite.store_memory("we ship on fridays", tags=["process"], metadata={"z": 1, "a": 2})
        lite.store_memory("東京の旅行計画", memory_type="plan", importance="high")
    finally:
        lite.close()
    time.sleep(1.1)  # so an import that stamped its own time would show

    def cli(*args: str) -> None:
        out = subprocess.run([sys.executable, "-m", "memloci", *args], env=server_env(home), cwd=tmp_path,
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr

    cli("export", "jsonl", str(tmp_path / "a.jsonl"), "--libraries", f"lite:{tmp_path / 'lite.db'}")
    cli("import", "jsonl", str(tmp_path / "a.jsonl"), "--libraries", pg_library.arg)
    cli("export", "jsonl", str(tmp_path / "b.jsonl"), "--libraries", pg_library.arg)
    cli("import", "jsonl", str(tmp_path / "b.jsonl"), "--libraries", f"back:{tmp_path / 'back.db'}")
    cli("export", "jsonl", str(tmp_path / "c.jsonl"), "--libraries", f"back:{tmp_path / 'back.db'}")
    a = (tmp_path / "a.jsonl").read_bytes()
    # 2 entities and 1 relation, 2 memories, all dated (metadata keys in the order written)
    assert a.count(b"\n") == 5 and a.count(b'"createdAt"') == 3 and a.count(b'"created_at"') == 2
    assert b'{"z": 1, "a": 2}' in a
    assert (tmp_path / "b.jsonl").read_bytes() == a
    assert (tmp_path / "c.jsonl").read_bytes() == a


@pytest.mark.full  # several server processes
def test_bench_load_runs_servers_on_one_library_and_counts_lost_writes(pg_url, tmp_path, home):
    import json

    from conftest import server_env

    out = subprocess.run([sys.executable, "-m", "memloci", "bench", "load", "--servers", "2", "--writes", "8",
                          "--url", pg_url, "--out", str(tmp_path / "load.json")],
                         env=server_env(home), cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:] + out.stdout[-2000:]
    report = json.loads((tmp_path / "load.json").read_text())
    assert report["lost_writes"] == 0 and report["errors"] == 0
    assert report["acknowledged"] == {"create_entities": 4, "add_observations": 4, "create_relations": 4,
                                      "store_memory": 4}
    assert report["held"] == {"entities": 5, "relations": 4, "memories": 4, "shared_observations": 8}


# -- the engine core under a hostile database: isolation, busy locks, errors, listener, search_path --

def _fresh_database(pg_url: str, *settings: str, extensions_in: str | None = None) -> str:
    """A new database on the test server (its URL), with `settings` (ALTER DATABASE ... SET ...)
    and, if `extensions_in` names a schema, vector and pg_trgm created in it."""
    import urllib.parse
    import uuid

    import psycopg

    name = "db_" + uuid.uuid4().hex[:12]
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
        for setting in settings:
            conn.execute(f'ALTER DATABASE "{name}" SET {setting}')
    parts = urllib.parse.urlsplit(pg_url)
    url = urllib.parse.urlunsplit(parts._replace(path="/" + name))
    if extensions_in:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{extensions_in}"')
            conn.execute(f'CREATE EXTENSION vector SCHEMA "{extensions_in}"')
            conn.execute(f'CREATE EXTENSION pg_trgm SCHEMA "{extensions_in}"')
    return url


RACER = textwrap.dedent("""
    import dataclasses, json, sys
    from memloci.core.errors import AlreadyExistsError, InvalidRelationError
    from memloci.app.registry import LibraryRegistry
    from memloci.app.specs import parse_library_specs
    from memloci.core.model import EntityInput, RelationInput
    from memloci.core.schema import STRICT
    from memloci.service.facade import MemoryService

    (spec,) = parse_library_specs(sys.argv[1])
    side, count = int(sys.argv[2]), int(sys.argv[3])
    s = MemoryService(LibraryRegistry([dataclasses.replace(spec, schema=STRICT)]))
    s.store().open()
    print("ready", flush=True)
    sys.stdin.readline()  # both start together
    won = {"names": 0, "relations": 0}
    for i in range(count):
        try:
            s.create_entities([EntityInput(f"n-{i}", "concept")])
            won["names"] += 1
        except AlreadyExistsError:
            pass
        a, b = (f"a-{i}", f"b-{i}") if side == 0 else (f"b-{i}", f"a-{i}")
        try:
            s.create_relations([RelationInput(a, "depends-on", b)])
            won["relations"] += 1
        except InvalidRelationError as exc:
            assert "would close a cycle" in str(exc), exc
    s.close()
    print(json.dumps(won))
""")


def test_rules_hold_when_the_database_defaults_to_repeatable_read(pg_url):
    """A database whose default isolation is REPEATABLE READ: two processes racing to create the
    same names and the two directions of the same relations (acyclic, strict) still leave each
    name once and one direction of each pair, and the loser gets memloci's error, never a raw
    UniqueViolation (writes set READ COMMITTED themselves, before the lock)."""
    import dataclasses
    import json

    from pg import pg_library_url

    from memloci.core.schema import STRICT

    url = _fresh_database(pg_url, "default_transaction_isolation = 'repeatable read'")
    lib = pg_library_url(url)
    count = 40
    setup = _service(lib.spec, STRICT)
    try:
        setup.create_entities([EntityInput(f"{side}-{i}", "concept") for i in range(count) for side in "ab"])
    finally:
        setup.close()
    env = {**os.environ, "MEMLOCI_EMBEDDER": "none"}
    procs = [subprocess.Popen([sys.executable, "-c", RACER, lib.arg, str(side), str(count)], env=env,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              cwd=ROOT) for side in (0, 1)]
    for p in procs:
        assert p.stdout.readline().strip() == "ready", p.stderr.read()[-3000:]
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    won = {"names": 0, "relations": 0}
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-3000:]
        for key, value in json.loads(out.split("\n")[-2]).items():
            won[key] += value
    assert won == {"names": count, "relations": count}
    s = _service(dataclasses.replace(lib.spec))
    try:
        assert s.stats().entities == 3 * count and s.stats().relations == count
    finally:
        s.close()


def _wait_for(check, what: str, seconds: float = 30.0):
    """Poll `check()` until it is true (a readiness wait, not a timing assert)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"never happened: {what}")


def _advisory_waiters(url: str, key: int) -> int:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute("""SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
                               AND ((classid::bigint << 32) | objid::bigint) = (%s::bigint & x'ffffffffffffffff'::bigint)""",
                            (key,)).fetchone()[0]


def test_writers_waiting_for_the_lock_leave_connections_to_reads(pg_library):
    """Another server holds the library's write lock; six writers of this process wait for it.
    Only one of them holds a connection meanwhile, so a read still answers at once from a pool
    of two (before, every connection waited on the lock and the read failed after 30 s as
    "cannot reach PostgreSQL"); once the lock is free every write lands."""
    import threading

    import psycopg

    from memloci.store.postgres.engine import PostgresStore

    store = PostgresStore(pg_library.url, pg_library.name, pool_size=2)
    store.create_entities([EntityInput("A", "t")], origin="test")
    done: list[object] = []
    with psycopg.connect(pg_library.url, autocommit=True) as other:
        with other.transaction():
            other.execute("SELECT pg_advisory_xact_lock(%s)", (store._lock_key,))
            writers = [threading.Thread(target=lambda i=i: done.append(
                store.create_entities([EntityInput(f"W{i}", "t")], origin="test"))) for i in range(6)]
            for t in writers:
                t.start()
            _wait_for(lambda: _advisory_waiters(pg_library.url, store._lock_key) == 1, "a writer waits on the lock")
            assert [e.name for e in store.read_graph(limit=10, offset=0, summary=True).entities] == ["A"]
            assert done == [] and _advisory_waiters(pg_library.url, store._lock_key) == 1  # one waits on the server
    for t in writers:
        t.join(60)
    try:
        assert len(done) == 6 and store.stats().entities == 7
    finally:
        store.close()


def test_a_lock_or_a_pool_not_free_in_time_is_busy(pg_library):
    """A write that waits past lock_timeout for another server's lock, and a call that finds no
    free connection in the pool in time, are CONFLICT "busy", not "cannot reach"; nothing is
    written, and the next write goes through."""
    import psycopg

    from memloci.core.errors import ConflictError
    from memloci.store.postgres.engine import PostgresStore

    store = PostgresStore(pg_library.url, pg_library.name, pool_size=1, pool_timeout=0.5, lock_timeout=0.5)
    try:
        store.open()
        with psycopg.connect(pg_library.url, autocommit=True) as other:
            with other.transaction():
                other.execute("SELECT pg_advisory_xact_lock(%s)", (store._lock_key,))
                with pytest.raises(ConflictError) as err:
                    store.create_entities([EntityInput("A", "t")], origin="test")
        assert f"library '{pg_library.name}' is busy: another server holds its write lock" in str(err.value)
        with store._pool.connection():  # the only connection, taken
            with pytest.raises(ConflictError) as err:
                store.read_graph(limit=5, offset=0, summary=True)
        assert "is busy" in str(err.value) and "cannot reach" not in str(err.value)
        assert store.stats().entities == 0
        store.create_entities([EntityInput("A", "t")], origin="test")
        assert store.stats().entities == 1
    finally:
        store.close()


def test_server_errors_are_named_for_what_they_are(pg_url):
    """Real failures from the server, each mapped: a cancelled statement, a lock not granted, a
    serialization failure, a deadlock, a terminated connection; only the last may say "cannot reach"."""
    import threading
    import uuid

    import psycopg

    from memloci.core.errors import ConflictError, StorageUnavailableError
    from memloci.store.postgres.connection import TransientError, engine_error

    caught: dict[str, Exception] = {}

    def catch(name, conn, sql):
        try:
            conn.execute(sql)
        except psycopg.Error as exc:
            caught[name] = exc

    table = "t_" + uuid.uuid4().hex[:10]
    with psycopg.connect(pg_url, autocommit=True) as a, psycopg.connect(pg_url, autocommit=True) as b:
        with a.transaction():
            a.execute("SET LOCAL statement_timeout = 50")
            catch("cancel", a, "SELECT pg_sleep(5)")
            raise psycopg.Rollback
        with b.transaction():
            b.execute("SELECT pg_advisory_xact_lock(4242)")
            with a.transaction():
                a.execute("SET LOCAL lock_timeout = 50")
                catch("lock", a, "SELECT pg_advisory_xact_lock(4242)")
                raise psycopg.Rollback
        a.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, v int)")
        a.execute(f"INSERT INTO {table} VALUES (1, 0)")
        with a.transaction():
            a.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            a.execute(f"SELECT v FROM {table}")
            b.execute(f"UPDATE {table} SET v = 1")
            catch("serialization", a, f"UPDATE {table} SET v = 2")
            raise psycopg.Rollback
        a.execute(f"DROP TABLE {table}")
        with a.transaction(), b.transaction():
            a.execute("SELECT pg_advisory_xact_lock(1001)")
            b.execute("SELECT pg_advisory_xact_lock(1002)")
            t = threading.Thread(target=catch, args=("deadlock", a, "SELECT pg_advisory_xact_lock(1002)"))
            t.start()
            _wait_for(lambda: _advisory_waiters(pg_url, 1002) == 1, "a waits")
            catch("deadlock", b, "SELECT pg_advisory_xact_lock(1001)")
            t.join(30)
            raise psycopg.Rollback
    victim = psycopg.connect(pg_url, autocommit=True)
    with psycopg.connect(pg_url, autocommit=True) as a:
        a.execute("SELECT pg_terminate_backend(%s)", (victim.info.backend_pid,))
    catch("terminated", victim, "SELECT 1")
    victim.close()

    mapped = {name: engine_error("lib", pg_url, exc) for name, exc in caught.items()}
    assert set(mapped) == {"cancel", "lock", "serialization", "deadlock", "terminated"}
    assert isinstance(mapped["cancel"], ConflictError) and "cancelled or ran past statement_timeout" in str(mapped["cancel"])
    assert isinstance(mapped["lock"], ConflictError) and "library 'lib' is busy" in str(mapped["lock"])
    assert isinstance(mapped["serialization"], TransientError) and "serialization failure" in str(mapped["serialization"])
    assert isinstance(mapped["deadlock"], TransientError) and "a deadlock" in str(mapped["deadlock"])
    assert isinstance(mapped["terminated"], StorageUnavailableError)  # STORAGE_UNAVAILABLE: send it again
    assert all("cannot reach" not in str(mapped[n]) for n in ("cancel", "lock", "serialization", "deadlock"))


def test_a_write_chosen_to_break_a_deadlock_runs_once_more(pg_library):
    """Another session holds a lock on an entity's row and then asks for the library's write
    lock while this store's write (holding that lock) waits for the row: PostgreSQL rolls this
    write back to break the deadlock, and the store runs it again by itself: the caller sees it
    succeed, once."""
    import threading

    import psycopg

    from memloci.store.postgres.engine import PostgresStore

    store = PostgresStore(pg_library.url, pg_library.name)
    store.create_entities([EntityInput("A", "t")], origin="test")
    result: list[object] = []
    with psycopg.connect(pg_library.url, autocommit=True) as other:
        with other.transaction():
            other.execute("SET LOCAL deadlock_timeout = '20s'")  # so this store's backend finds the deadlock
            other.execute(f"UPDATE {store.schema_name}.entities SET updated_at = updated_at WHERE name = 'A'")
            writer = threading.Thread(target=lambda: result.append(
                store.add_observations([ObservationBatch("A", ("new",))], origin="test")))
            writer.start()
            _wait_for(lambda: other.execute(
                "SELECT count(*) FROM pg_locks WHERE NOT granted AND locktype = 'transactionid'").fetchone()[0] >= 1,
                "the write waits for the row")
            other.execute("SELECT pg_advisory_xact_lock(%s)", (store._lock_key,))  # the deadlock; we win it
    writer.join(60)
    try:
        assert len(result) == 1 and [o.content for o in store.open_entities(["A"]).entities[0].observations] == ["new"]
    finally:
        store.close()


def test_access_counts_tell_no_other_server(pg_library):
    """A retrieval's access bookkeeping sends no change notice; a real write does."""
    from memloci.store.postgres.engine import PostgresStore

    first, second = PostgresStore(pg_library.url, pg_library.name), PostgresStore(pg_library.url, pg_library.name)
    try:
        first.open()
        second.open()
        heard: list[str] = []
        second.on_change(heard.append)
        mark = first.change_mark()
        first.touch_memories([1, 2])
        assert first.change_mark() == mark  # nothing another process holds changed
        first.create_entities([EntityInput("Marker", "t")], origin="test")
        assert first.change_mark() != mark  # its own write is known at once
        _wait_for(lambda: heard, "the marker's notice")
        time.sleep(0.2)
        assert heard == ["graph"]
    finally:
        first.close()
        second.close()


def test_the_listener_pings_reconnects_and_logs_no_password(pg_url, caplog):
    import logging
    import uuid

    import psycopg

    from memloci.store.postgres.connection import ChangeListener

    channel = "memloci_" + uuid.uuid4().hex[:12]
    listener = ChangeListener(pg_url, channel, keepalive=0.2)
    listener.start()
    try:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            def backend():
                return conn.execute("SELECT pid, query FROM pg_stat_activity WHERE application_name = 'memloci-listen' "
                                    "AND query IN (%s, 'SELECT 1') AND pid <> pg_backend_pid()",
                                    (f'LISTEN "{channel}"',)).fetchall()
            # the connection is pinged while nothing is said on it (its last statement becomes the ping)
            (pid, _), = _wait_for(lambda: [r for r in backend() if r[1] == "SELECT 1"], "a ping")
            assert listener.listening and listener.count == 0
            conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
            _wait_for(lambda: listener.count == 1 and listener.listening, "a reconnection, counted as a change")
            conn.execute(f'NOTIFY "{channel}", \'graph\'')
            _wait_for(lambda: listener.count == 2, "a notice on the new connection")
    finally:
        listener.stop()
    # (INFO: an outage is reported once, at WARNING, by the calls that meet it; outage.Reachability)
    caplog.set_level(logging.INFO, logger="memloci.store.postgres.connection")
    caplog.clear()
    broken = ChangeListener("postgresql://me:s3cr/et@/memory?host=/nowhere&connect_timeout=1", "memloci_x")
    broken.start()
    try:
        _wait_for(lambda: any("memloci_x" in r.getMessage() for r in caplog.records), "a log line")
        assert not broken.listening
    finally:
        broken.stop()
    text = "\n".join(r.getMessage() for r in caplog.records if "memloci_x" in r.getMessage())
    assert "LISTEN memloci_x at postgresql://***@/memory" in text and "s3cr" not in text


def test_passwords_are_masked_however_they_are_written():
    from pathlib import Path

    from memloci.core.secrets import masked_specs
    from memloci.core.settings import Settings

    assert masked_url("postgresql://me:p@ss@db/memory") == "postgresql://me:***@db/memory"
    # an unencoded / or ? ends urlsplit's host part early: everything up to the last @ is hidden
    assert masked_url("postgresql://me:s3cr/et@db/memory") == "postgresql://***@db/memory"
    assert masked_url("postgresql://me:s3?cret@db/memory") == "postgresql://***@db/memory"
    assert masked_url("postgresql://me:s3%2Fcret@db/memory") == "postgresql://me:***@db/memory"
    assert masked_url("postgresql://postgres:@/postgres?host=/tmp/pg") == "postgresql://postgres:@/postgres?host=/tmp/pg"
    assert masked_url("postgresql://me@db/x?host=/tmp/a&password=s3cret") == "postgresql://me@db/x?host=/tmp/a&password=***"
    spec = "team:postgresql://me:s3cret@db/memory,ops:postgresql://u:s3cr/et@h/y,notes:notes"
    assert masked_specs(spec) == "team:postgresql://me:***@db/memory,ops:postgresql://***@h/y,notes:notes"
    settings = Settings(home=Path("/x"), libraries=spec)
    assert "s3cr" not in repr(settings) and "s3cr" not in str(settings)
    assert "libraries='team:postgresql://me:***@db/memory," in repr(settings)
    assert settings.libraries == spec  # masked only where shown


def test_each_transaction_sets_its_own_search_path(pg_url):
    """A pooled session left pointing at another library's schema (as a pooler in transaction
    mode hands sessions around) still reads and writes this library: the search_path is set by
    each transaction, and none is left on the session."""
    from pg import pg_library_url

    from memloci.store.postgres.engine import PostgresStore

    mine, theirs = pg_library_url(pg_url), pg_library_url(pg_url)
    a, b = PostgresStore(mine.url, mine.name, pool_size=1), PostgresStore(theirs.url, theirs.name)
    try:
        a.create_entities([EntityInput("Mine", "t")], origin="test")
        b.create_entities([EntityInput("Theirs", "t")], origin="test")
        with a._pool.connection() as conn:  # the pool's only session
            assert conn.execute("SHOW search_path").fetchone()[0] == '"$user", public'
            conn.execute(f"SET search_path TO {b.schema_name}, public")
        assert [e.name for e in a.read_graph(limit=5, offset=0, summary=True).entities] == ["Mine"]
        a.create_entities([EntityInput("Mine too", "t")], origin="test")
        assert a.stats().entities == 2 and b.stats().entities == 1
    finally:
        a.close()
        b.close()


def test_extensions_kept_in_a_schema_of_their_own(pg_url):
    """A host that keeps vector and pg_trgm in an `extensions` schema: the library is created,
    written, searched (full text, fuzzy names) and given vectors."""
    from pg import pg_library_url

    from memloci.store.postgres.engine import PostgresStore

    lib = pg_library_url(_fresh_database(pg_url, extensions_in="extensions"))
    s = _service(lib.spec)
    try:
        s.create_entities([EntityInput("Alice Wonderland", "person", ("likes tea",))])
        assert [h.entity.name for h in s.search_nodes("alice").hits] == ["Alice Wonderland"]
        assert [h.entity.name for h in s.search_nodes("Wonderlnd").hits] == ["Alice Wonderland"]
        store = s.store()
        assert isinstance(store, PostgresStore) and '"extensions"' in store._search_path
        assert store.engine_health()["pgvector"] is not None
        # vectors: the column's type and its HNSW index come from the extensions' schema
        import numpy as np

        from memloci.core.model import MemoryFilter, MemoryInput

        stored = [store.store_memory(MemoryInput(text), origin="test").memory for text in ("tea time", "chess club")]
        vectors = [np.array([1.0, 0.0, 0.0], dtype=np.float32), np.array([0.0, 1.0, 0.0], dtype=np.float32)]
        saved = store.save_vectors([(m.id, m.content_hash, v) for m, v in zip(stored, vectors)], "test-model")
        assert len(saved.ids) == 2
        found = store.vector_candidates(np.array([0.1, 1.0, 0.0], dtype=np.float32), 1, MemoryFilter(), model="test-model")
        assert max(found.scores, key=found.scores.get) == stored[1].id
    finally:
        s.close()


# -- defects found in use ---------------------------------------------------------------------

def _wordy(seed: int, size: int = 9000) -> str:
    """About `size` characters of words no other call repeats (each a lexeme of its own)."""
    words, length, i = [], 0, 0
    while length < size:
        word = f"w{seed}x{i:05d}q"
        words.append(word)
        length += len(word) + 1
        i += 1
    return " ".join(words)[:size]


def test_a_large_entity_keeps_accepting_writes(pg_library):
    """An entity whose observations pass a tsvector's 1 MB (120 x 9,000 characters of distinct
    words) still takes writes, in one create and one observation at a time, and is still found
    by its name and by a word of its first observation."""
    s = _service(pg_library.spec)
    try:
        s.create_entities([EntityInput("Big Ledger", "log", tuple(_wordy(i) for i in range(120)))])
        for i in range(120, 130):
            s.add_observations([ObservationBatch("Big Ledger", (_wordy(i),))])
        assert len(s.open_nodes(["Big Ledger"]).entities[0].observations) == 130
        assert [h.entity.name for h in s.search_nodes("ledger").hits] == ["Big Ledger"]
        assert [h.entity.name for h in s.search_nodes("w0x00007q").hits] == ["Big Ledger"]
    finally:
        s.close()


def test_an_unreachable_library_is_listed_with_its_error(tmp_path):
    """A PostgreSQL library nobody answers for, beside a working SQLite one: list_libraries lists
    both (the unreachable one with its error, password masked), health answers `unhealthy`."""
    registry = LibraryRegistry(parse_library_specs(
        f"notes:{tmp_path / 'notes.db'},team:postgresql://u:s3cret@127.0.0.1:1/db?connect_timeout=3"))
    s = MemoryService(registry)
    try:
        s.create_entities([EntityInput("Alice", "person")], library="notes")
        rows = {r["name"]: r for r in s.list_libraries()}
        assert rows["notes"]["entities"] == 1 and "error" not in rows["notes"]
        team = rows["team"]
        assert team["kind"] == "postgres" and team["path"] == "postgresql://u:***@127.0.0.1:1/db?connect_timeout=3#memloci_team"
        assert team["error"]["code"] == "STORAGE_UNAVAILABLE" and "cannot reach PostgreSQL" in team["error"]["message"]
        assert "s3cret" not in repr(rows)
        health = s.health(library="team")
        assert health["status"] == "unhealthy" and health["backend"] == "postgres" and health["library"] == "team"
        assert "cannot reach PostgreSQL" in health["problems"][0] and "s3cret" not in repr(health)
        assert s.health(library="notes")["status"] in ("healthy", "degraded")
        with pytest.raises(NotFoundError):  # a library not mounted is still the caller's mistake
            s.health(library="nowhere")
    finally:
        s.close()


def test_connections_the_server_closed_are_replaced(pg_library):
    """The server ends the store's connections (as a restart does): the next read and the next
    write answer, on connections made again."""
    import psycopg

    from memloci.store.postgres.engine import PostgresStore

    store = PostgresStore(pg_library.url, pg_library.name)
    try:
        store.create_entities([EntityInput("Alice", "person")], origin="test")
        for _ in range(3):
            with psycopg.connect(pg_library.url, autocommit=True) as admin:
                ended = admin.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                                      "WHERE application_name = %s", (f"memloci-{store.schema_id}",)).fetchone()[0]
            assert ended >= 1
            assert [e.name for e in store.read_graph(limit=5, offset=0, summary=True).entities][0] == "Alice"
            with psycopg.connect(pg_library.url, autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
                              (f"memloci-{store.schema_id}",))
            store.add_observations([ObservationBatch("Alice", (f"seen {_}",))], origin="test")
        assert store.stats().observations == 3
    finally:
        store.close()


def test_a_refused_login_or_a_missing_database_is_named(pg_url):
    """A wrong password, an unknown role and a database that does not exist are told apart from
    an internal error: PERMISSION_DENIED naming the user, NOT_FOUND naming the database; the
    password never shows. A role that may not create `vector` is told a superuser must."""
    import urllib.parse
    import uuid

    import psycopg
    from pg import pg_library_url

    from memloci.core.errors import PermissionDeniedError
    from memloci.store.postgres.engine import PostgresStore

    role = "pw_" + uuid.uuid4().hex[:10]
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE \"{role}\" LOGIN PASSWORD 'right-one'")
        hba = conn.execute("SHOW hba_file").fetchone()[0]
        # this role alone logs in with a password (every other keeps the test server's `trust`)
        text = Path(hba).read_text()
        Path(hba).write_text(f"local all {role} scram-sha-256\nhost all {role} 127.0.0.1/32 scram-sha-256\n" + text)
        conn.execute("SELECT pg_reload_conf()")
    parts = urllib.parse.urlsplit(pg_url)

    def url_of(user: str, password: str, database: str = "postgres") -> str:
        return urllib.parse.urlunsplit(parts._replace(netloc=f"{user}:{password}@", path="/" + database))

    cases = [(url_of(role, "wrong-pw"), PermissionDeniedError, f"PostgreSQL refused the login of user '{role}'"),
             (url_of("nobody_" + role, "wrong-pw"), PermissionDeniedError, "PostgreSQL refused the login of user"),
             (url_of("postgres", "wrong-pw", "no_such_db"), NotFoundError,
              "database 'no_such_db' does not exist on the server; create it, or fix the URL")]
    for url, kind, words in cases:
        lib = pg_library_url(url)
        store = PostgresStore(lib.url, lib.name)
        with pytest.raises(kind) as err:
            store.open()
        message = str(err.value)
        assert words in message and f"library '{lib.name}'" in message and "***" in message, message
        assert "wrong-pw" not in message + err.value.hint
        store.close()
    # the right password opens (the hba line works), so the refusal above was the password's
    with psycopg.connect(url_of(role, "right-one")) as conn:
        assert conn.execute("SELECT current_user").fetchone()[0] == role

    # a role that may create schemas in a database but not the vector extension
    db = urllib.parse.urlsplit(_fresh_database(pg_url)).path.lstrip("/")
    with psycopg.connect(url_of("postgres", "", db), autocommit=True) as conn:
        conn.execute(f'GRANT CREATE ON DATABASE "{db}" TO "{role}"')
    lib = pg_library_url(url_of(role, "right-one", db))
    store = PostgresStore(lib.url, lib.name)
    with pytest.raises(PermissionDeniedError) as err:
        store.open()
    assert "may not create the extensions" in str(err.value) and "CREATE EXTENSION vector" in err.value.hint
    assert "superuser" in err.value.hint and "right-one" not in str(err.value)
    store.close()


def test_a_name_past_two_typos_is_found_by_trigram_similarity(pg_library):
    """A word no name word is within two edits of ("anastasiaaaa": three letters too many) is
    tried against names by pg_trgm's word similarity, and the hit says so."""
    s = _service(pg_library.spec)
    try:
        s.create_entities([EntityInput("Anastasia Romanova", "person", ("historian",)),
                           EntityInput("Boris Petrov", "person", ("engineer",))])
        hits = s.search_nodes("anastasiaaaa").hits
        assert [h.entity.name for h in hits] == ["Anastasia Romanova"]
        assert "name ~ anastasiaaaa" in hits[0].why, hits[0].why
        assert s.search_nodes("anastasiaaaa historian").hits[0].why.startswith("all 2 words")
    finally:
        s.close()
