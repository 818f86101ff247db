"""Library schemas and the strict-server tool set, through the real MCP client over stdio;
plus a property test that no sequence of strict calls breaks the graph's invariants."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import Client, run_session, server_env
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memloci.app.registry import LibraryRegistry
from memloci.app.specs import LibrarySpec
from memloci.core.errors import MemlociError
from memloci.core.model import EntityInput, ObservationBatch, RelationInput
from memloci.core.schema import STRICT
from memloci.service.facade import MemoryService


async def ok(c: Client, name: str, **args) -> dict:
    is_error, structured, _ = await c.call(name, **args)
    assert not is_error and structured["success"] is True, (name, structured)
    return structured


async def fails(c: Client, name: str, error_type: str, *words: str, **args) -> dict:
    is_error, structured, text = await c.call(name, **args)
    assert is_error and structured == text and structured["success"] is False, (name, structured)
    assert structured["error_type"] == error_type, structured
    for w in words:
        assert w in structured["error"], (w, structured["error"])
    return structured


def person(name: str, *observations: str, entity_type: str = "person") -> dict:
    return {"name": name, "entity_type": entity_type, "observations": list(observations)}


def test_strict_rules_through_the_strict_tool_set(home):
    async def body(c: Client):
        libs, _ = await c.ok("list_libraries")
        assert libs["libraries"][0]["schema"]["name"] == "strict"
        created = await ok(c, "create_entities", entities=[person("user-john", "prefers tea"),
                                                           person("python-project", entity_type="project")])
        assert [e["name"] for e in created["data"]["created"]] == ["user-john", "python-project"]
        for bad, words in [("User-John", ["'User-John'", "[a-z][a-z0-9-]*"]), ("2fast", ["'2fast'"]),
                           ("user_john", ["'user_john'"]), ("a" * 101, ["101 characters", "at most 100"])]:
            await fails(c, "create_entities", "VALIDATION_ERROR", "entities[1].name", *words,
                        entities=[person("fine-name"), person(bad)])
        await fails(c, "create_entities", "VALIDATION_ERROR", "entities[0].entity_type", "'animal'", "person, concept",
                    entities=[person("rex", entity_type="animal")])
        await fails(c, "create_entities", "VALIDATION_ERROR", "observations[0]", "501 characters", "at most 500",
                    entities=[person("long-talker", "x" * 501)])
        await fails(c, "create_entities", "ALREADY_EXISTS", "'user-john'", entities=[person("user-john")])
        graph = await ok(c, "get_graph")
        assert sorted(e["name"] for e in graph["data"]["entities"]) == ["python-project", "user-john"]  # all or none

        await ok(c, "add_observation", entity="user-john", observation="runs on mondays")
        await fails(c, "add_observation", "VALIDATION_ERROR", "already an observation", entity="user-john",
                    observation="runs on mondays")
        await fails(c, "add_observation", "VALIDATION_ERROR", "must not be empty", entity="user-john", observation="  ")
        await fails(c, "add_observation", "NOT_FOUND", "nobody", entity="nobody", observation="x")

        await ok(c, "create_entities", entities=[person("fastapi", entity_type="tool"),
                                                 person("starlette", entity_type="tool")])
        await ok(c, "create_relation", from_entity="python-project", to_entity="fastapi", relation_type="depends-on")
        await ok(c, "create_relation", from_entity="fastapi", to_entity="starlette", relation_type="depends-on")
        await fails(c, "create_relation", "INVALID_RELATION", "'likes'", "knows, contains",
                    from_entity="user-john", to_entity="fastapi", relation_type="likes")
        await fails(c, "create_relation", "INVALID_RELATION", "ghost", from_entity="user-john", to_entity="ghost",
                    relation_type="uses")
        await fails(c, "create_relation", "INVALID_RELATION", "itself", from_entity="fastapi", to_entity="fastapi",
                    relation_type="uses")
        cycle = await fails(c, "create_relation", "INVALID_RELATION", "cycle",
                            "starlette -> python-project -> fastapi -> starlette",
                            from_entity="starlette", to_entity="python-project", relation_type="uses")
        assert "nothing was created" in cycle["error"]

        john = await ok(c, "get_entity", entity_name="user-john")
        assert john["data"]["observations"] == ["prefers tea", "runs on mondays"]
        await fails(c, "get_entity", "NOT_FOUND", "nobody", entity_name="nobody")
        none = await ok(c, "search_memory", query="zeppelin")
        assert none["error_type"] == "NO_RESULTS" and none["data"]["results"] == []
        typo = await ok(c, "search_memory", query="fastapy")
        assert typo["data"]["results"][0]["name"] == "fastapi"
        import anyio

        await anyio.sleep(1.1)  # timestamps are to the second
        await ok(c, "add_observation", entity="python-project", observation="workout: refactor day")
        latest = await ok(c, "search_memory", query="latest")
        assert latest["data"]["recency"] and latest["data"]["results"][0]["name"] == "python-project"

        await ok(c, "delete_relation", from_entity="fastapi", to_entity="starlette")
        await fails(c, "delete_relation", "NOT_FOUND", from_entity="fastapi", to_entity="starlette")
        await fails(c, "delete_entities", "NOT_FOUND", "'ghost'", names=["starlette", "ghost"])
        await ok(c, "delete_entities", names=["starlette"])
        flushed = await ok(c, "flush_memory")
        assert flushed["data"]["entities"] == 3
        bad_args = await fails(c, "create_relation", "VALIDATION_ERROR", "relation_type", from_entity="a", to_entity="b")
        assert "Field required" in bad_args["error"]

    run_session(home, body, "--schema", "strict", "--tools", "strict,memory,documents")


def test_a_strict_server_client_script_runs_unchanged(home):
    """The calls a client of the strict-validation server makes, in its shapes and order."""
    script = [
        ("create_entities", {"entities": [{"name": "meeting-notes-2024", "entity_type": "document",
                                           "observations": ["kickoff on monday"]},
                                          {"name": "acme", "entity_type": "organization", "observations": []}]}, True),
        ("create_relation", {"from_entity": "acme", "to_entity": "meeting-notes-2024", "relation_type": "created"}, True),
        ("add_observation", {"entity": "acme", "observation": "based in berlin"}, True),
        ("get_entity", {"entity_name": "acme"}, True),
        ("search_memory", {"query": "berlin"}, True),
        ("get_graph", {}, True),
        ("delete_relation", {"from_entity": "acme", "to_entity": "meeting-notes-2024"}, True),
        ("delete_entities", {"names": ["meeting-notes-2024"]}, True),
        ("flush_memory", {}, True),
        ("get_entity", {"entity_name": "meeting-notes-2024"}, False),
    ]

    async def body(c: Client):
        for name, args, success in script:
            _, structured, text = await c.call(name, **args)
            assert set(structured) <= {"success", "data", "error", "error_type"} and structured == text
            assert structured["success"] is success, (name, structured)
        found = await ok(c, "search_memory", query="berlin")
        assert found["data"]["results"][0]["name"] == "acme"

    run_session(home, body, "--schema", "strict", "--tools", "strict")


def test_graph_tools_keep_the_strict_rules_too(home):
    async def body(c: Client):
        err = await c.error("create_entities", entities=[{"name": "Bad Name", "entityType": "person", "observations": []}])
        assert err["code"] == "VALIDATION_ERROR" and "entities[0].name" in err["message"] and "'Bad Name'" in err["message"]
        await c.ok("create_entities", entities=[{"name": "a", "entityType": "concept", "observations": []},
                                                {"name": "b", "entityType": "concept", "observations": []}])
        await c.ok("create_relations", relations=[{"from": "a", "relationType": "contains", "to": "b"}])
        err = await c.error("create_relations", relations=[{"from": "b", "relationType": "related-to", "to": "a"}])
        assert err["code"] == "INVALID_RELATION" and "cycle" in err["message"]
        err = await c.error("add_entities", entities=[{"name": "c", "entity_type": "note"}])
        assert err["code"] == "VALIDATION_ERROR" and "'note'" in err["message"]
        err = await c.error("rename_entity", old_name="a", new_name="A")
        assert err["code"] == "VALIDATION_ERROR" and "new_name" in err["message"]

    run_session(home, body, "--schema", "strict")


def test_strict_and_graph_groups_cannot_be_combined(home):
    out = subprocess.run([sys.executable, "-m", "memloci", "serve", "--tools", "graph,strict"], env=server_env(home),
                         capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert out.returncode != 0 and "cannot be combined" in out.stderr


def test_check_reports_every_violation(tmp_path, home):
    db = tmp_path / "team.db"

    async def body(c: Client):
        await c.ok("create_entities", entities=[
            {"name": "Person", "entityType": "person", "observations": []},
            {"name": "ok-name", "entityType": "people", "observations": ["x" * 600]},
            {"name": "loop-a", "entityType": "concept", "observations": []},
            {"name": "loop-b", "entityType": "concept", "observations": []}])
        await c.ok("create_relations", relations=[{"from": "loop-a", "relationType": "depends-on", "to": "loop-b"},
                                                  {"from": "loop-b", "relationType": "depends-on", "to": "loop-a"},
                                                  {"from": "Person", "relationType": "likes", "to": "ok-name"}])

    run_session(home, body, "--libraries", f"team:{db}")
    cmd = [sys.executable, "-m", "memloci", "check", "--libraries", f"team:{db}"]
    relaxed = subprocess.run(cmd, env=server_env(home), capture_output=True, text=True, timeout=60)
    assert relaxed.returncode == 0 and "no violations" in relaxed.stdout
    strict = subprocess.run([*cmd, "--schema", "strict"], env=server_env(home), capture_output=True, text=True, timeout=60)
    assert strict.returncode == 1, strict.stderr
    out = strict.stdout
    assert "5 violation(s)" in out
    for words in ("'Person'", "'people'", "600 characters", "'likes'", "loop-a -> loop-b -> loop-a"):
        assert words in out, words


def test_schemas_in_the_config_file(tmp_path, home):
    config = tmp_path / "memloci.toml"
    config.write_text(f'[libraries]\nstrict-one = "{tmp_path / "a.db"}"\ncustom = "{tmp_path / "b.db"}"\n'
                      '[schemas]\nstrict-one = "strict"\n'
                      '[schemas.custom]\nentity_types = ["service", "team"]\nacyclic = ["depends_on"]\n')

    async def body(c: Client):
        libs, _ = await c.ok("list_libraries")
        rules = {lib["name"]: lib["schema"] for lib in libs["libraries"]}
        assert rules["strict-one"]["name"] == "strict" and rules["custom"]["entity_types"] == ["service", "team"]
        err = await c.error("create_entities", library="custom",
                            entities=[{"name": "Any Name", "entityType": "person", "observations": []}])
        assert "'person'" in err["message"] and "service, team" in err["hint"]
        await c.ok("create_entities", library="custom", entities=[
            {"name": "Api", "entityType": "service", "observations": []},
            {"name": "Db", "entityType": "service", "observations": []}])
        await c.ok("create_relations", library="custom", relations=[{"from": "Api", "relationType": "depends_on", "to": "Db"},
                                                                    {"from": "Db", "relationType": "talks_to", "to": "Api"}])
        err = await c.error("create_relations", library="custom",
                            relations=[{"from": "Db", "relationType": "depends_on", "to": "Api"}])
        assert err["code"] == "INVALID_RELATION" and "depends_on relations acyclic" in err["message"]

    run_session(home, body, MEMLOCI_CONFIG=str(config))
    config.write_text('[libraries]\nx = "/tmp/x.db"\n[schemas]\nx = {entity_types = ["a"], colour = "red"}\n')
    out = subprocess.run([sys.executable, "-m", "memloci", "serve"], env=server_env(home, MEMLOCI_CONFIG=str(config)),
                         capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert out.returncode != 0 and "colour" in out.stderr


# -- property: no sequence of strict calls leaves a cycle, a dangling relation or a bad name --

NAMES = st.sampled_from(["Bad", "9x", "a", "b", "c-1"])  # few names: cycles are one or two steps away
TYPES = st.sampled_from(["knows", "uses", "depends-on", "likes"])
PAIRS = st.sampled_from([("a", "b"), ("b", "a"), ("b", "c-1"), ("c-1", "a"), ("a", "a"), ("a", "Bad"), ("c-1", "b")])
RELATE = st.tuples(st.just("relate"), PAIRS, TYPES).map(lambda t: (t[0], t[1][0], t[2], t[1][1]))
STEPS = st.lists(st.one_of(
    RELATE, RELATE, RELATE,  # weighted: relations are where cycles come from
    st.tuples(st.just("create"), NAMES, st.sampled_from(["person", "tool", "animal"])),
    st.tuples(st.just("observe"), NAMES, st.sampled_from(["", "fine", "x" * 501, "fine"])),
    st.tuples(st.just("delete"), NAMES),
    st.tuples(st.just("unrelate"), NAMES, TYPES, NAMES),
), max_size=40)


@pytest.fixture(scope="module")
def strict_service(tmp_path_factory):
    registry = LibraryRegistry([LibrarySpec("p", tmp_path_factory.mktemp("prop") / "p.db", "sqlite", STRICT)])
    service = MemoryService(registry)
    yield service
    registry.close()


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=STEPS)
def test_no_sequence_of_strict_calls_breaks_the_invariants(strict_service, steps):
    service = strict_service
    service.delete_entities([e.name for e in service.export_graph().entities] or ["none"])
    service.create_entities([EntityInput(n, "person") for n in ("a", "b", "c-1")])  # relations have ends to meet
    for step in steps:
        try:
            if step[0] == "create":
                service.create_entities([EntityInput(step[1], step[2])])
            elif step[0] == "relate":
                service.create_relations([RelationInput(step[1], step[2], step[3])])
            elif step[0] == "observe":
                service.add_observations([ObservationBatch(step[1], (step[2],))])
            elif step[0] == "delete":
                service.delete_entities([step[1]])
            else:
                service.delete_relations([RelationInput(step[1], step[2], step[3])])
        except MemlociError:
            pass  # refused: the graph must be as it was
        graph = service.export_graph()
        names = {e.name for e in graph.entities}
        assert all(STRICT.name_pattern and __import__("re").fullmatch(STRICT.name_pattern, n) for n in names)
        assert all(e.entity_type in STRICT.entity_types for e in graph.entities)
        assert all(0 < len(o.content) <= 500 for e in graph.entities for o in e.observations)
        assert all(r.from_entity in names and r.to_entity in names and r.relation_type in STRICT.relation_types
                   and r.from_entity != r.to_entity for r in graph.relations)
        assert not has_cycle([(r.from_entity, r.to_entity) for r in graph.relations])


def has_cycle(edges: list[tuple[str, str]]) -> bool:
    """Independent of memloci's own check: repeatedly drop nodes with no incoming edge (Kahn)."""
    nodes = {n for e in edges for n in e}
    incoming = {n: 0 for n in nodes}
    for _, b in edges:
        incoming[b] += 1
    ready = [n for n in nodes if incoming[n] == 0]
    seen = 0
    while ready:
        n = ready.pop()
        seen += 1
        for a, b in edges:
            if a == n:
                incoming[b] -= 1
                if incoming[b] == 0:
                    ready.append(b)
    return seen < len(nodes)


def test_no_path_around_the_strict_rules(tmp_path):
    registry = LibraryRegistry([LibrarySpec("s", tmp_path / "s.db", "sqlite", STRICT)])
    service = MemoryService(registry)
    service.create_entities([EntityInput(n, "concept") for n in ("a", "b", "c")])
    service.create_relations([RelationInput("a", "depends-on", "b"), RelationInput("b", "depends-on", "c")])
    from memloci.core.errors import InvalidRelationError, ValidationError
    from memloci.service.documents import NewEntityDocument

    before = service.export_graph()
    service.add_entities([NewEntityDocument("d", "concept", relations=(("uses", "a"),)),
                          NewEntityDocument("e", "concept", relations=(("uses", "d"),))])
    with pytest.raises(InvalidRelationError, match="does not exist"):
        service.add_entities([NewEntityDocument("lonely", "concept", relations=(("uses", "nobody"),))])
    with pytest.raises(InvalidRelationError, match="cycle"):  # an edit adding c -> a closes a -> b -> c
        service.replace_entity_content("c", "type: concept\n", "type: concept\nrelations:\n  - {type: uses, to: a}\n")
    service.add_entities([NewEntityDocument("g", "concept", content="See [[a]].")])  # a link stays text here
    assert not [r for r in service.export_graph().relations if r.relation_type == "links_to"]
    with pytest.raises(InvalidRelationError, match="cycle"):  # merging c into a: b -> c becomes b -> a
        service.merge_entities(["c"], "a")
    with pytest.raises(ValidationError, match="500"):
        service.store_memory("y" * 501, entity="a")
    memory, _ = service.store_memory("short fact", entity="a")
    with pytest.raises(ValidationError, match="500"):
        service.update_memory(memory.content_hash, content="z" * 600)
    with pytest.raises(ValidationError, match="unique"):
        service.store_memory("short fact", entity="a")
    with pytest.raises(ValidationError, match="line 7"):
        service.import_graph([(7, EntityInput("Bad Name", "concept"))], [])
    after = service.export_graph()
    assert {e.name for e in after.entities} - {e.name for e in before.entities} == {"d", "e", "g"}
    assert {(r.from_entity, r.to_entity) for r in after.relations} >= {("a", "b"), ("b", "c")}
    assert "Bad Name" not in {e.name for e in after.entities}
    registry.close()


def test_strict_tools_in_a_project(tmp_path, home):
    app = tmp_path / "app"
    app.mkdir()
    (app / ".git").mkdir()

    async def body(c: Client):
        waiting = await fails(c, "create_entities", "AWAITING_CONFIRMATION", project_path=str(app),
                              entities=[person("ana")])
        assert waiting["data"]["detected_root"] == str(app)
        done = await ok(c, "create_entities", project_path=str(app), confirm_new_project_root=str(app),
                        entities=[person("ana")])
        assert set(done) == {"success", "data"}  # no hint in that server's shape
        await fails(c, "create_entities", "VALIDATION_ERROR", "'Bad'", project_path=str(app), entities=[person("Bad")])

    run_session(home, body, "--schema", "strict", "--tools", "strict,project")
