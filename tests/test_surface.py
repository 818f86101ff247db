"""The tool surface as a client sees it, over a real stdio session: error replies any client
accepts, unknown and mistyped arguments refused, peers' shapes, sizes and truthful metadata."""

from __future__ import annotations

import json

import jsonschema
from conftest import Client
from conftest import run_session as run


def entity(name: str, *observations: str, entity_type: str = "thing") -> dict:
    return {"name": name, "entityType": entity_type, "observations": list(observations)}


async def tools_of(c: Client) -> dict:
    return {t.name: t for t in (await c.session.list_tools()).tools}


async def checked(c: Client, tools: dict, name: str, **arguments):
    """Call a tool and hold its reply to what a TypeScript SDK client checks: an error carries no
    structured content (or only content valid against the output schema); a success's
    structured content is valid against it."""
    result = await c.session.call_tool(name, arguments)
    schema = tools[name].output_schema
    if result.structured_content is not None and schema is not None:
        jsonschema.validate(result.structured_content, schema)
    if schema is not None and not result.is_error:
        assert result.structured_content is not None, f"{name}: a success must carry structured content"
    return result


def test_error_replies_carry_no_structured_content_and_say_code_message_hint(home, tmp_path):
    repo = tmp_path / "app"
    (repo / ".git").mkdir(parents=True)

    async def body(c: Client):
        tools = await tools_of(c)
        for name, arguments in [
            ("add_observations", {"observations": [{"entityName": "Ghost", "contents": ["x"]}]}),
            ("read_graph", {"limit": 0}),
            ("retrieve_memory", {"query": ""}),
            ("create_entities", {"entities": [{"name": "", "entityType": "t"}]}),
            ("create_relations", {"relations": [{"from": "a", "to": "b", "relationType": "r"}]}),
            ("store_memory", {"content": 3}),
            ("no_such_tool", {}),
        ]:
            if name not in tools:  # an unknown tool is answered the same way
                tools[name] = type("T", (), {"output_schema": None})()
            result = await checked(c, tools, name, **arguments)
            assert result.is_error, name
            assert result.structured_content is None, name
            body = json.loads(result.content[0].text)
            assert set(body) == {"error"} and {"code", "message", "hint"} <= set(body["error"]), body

        # The project handshake reaches such a client as a readable tool error with detected_root.
        result = await checked(c, tools, "create_entities", project_path=str(repo), entities=[entity("a")])
        assert result.is_error and result.structured_content is None
        err = json.loads(result.content[0].text)["error"]
        assert err["code"] == "AWAITING_CONFIRMATION" and err["detected_root"] == str(repo.resolve())
        assert "confirm_new_project_root" in err["hint"]

        # Successes still match their (slim) output schemas.
        await checked(c, tools, "create_entities", entities=[entity("a", "x")])
        await checked(c, tools, "read_graph")
        await checked(c, tools, "search_nodes", query="a")
        await checked(c, tools, "store_memory", content="hello")
        await checked(c, tools, "retrieve_memory", query="hello")
        await checked(c, tools, "search_by_tag", tags=["t"])

    run(home, body)


def test_strict_tool_set_errors_keep_that_servers_shape(home):
    async def body(c: Client):
        result = await c.session.call_tool("add_observation", {"entity": "ghost", "observation": "x"})
        assert result.is_error
        text = json.loads(result.content[0].text)
        assert text["success"] is False and text["error_type"] == "NOT_FOUND"
        assert "entity" in text["error"] and "entityName" not in text["error"]
        assert "search_memory" in text["error"] and "search_nodes" not in text["error"]  # a tool of this set
        tools = await tools_of(c)
        if tools["add_observation"].output_schema is not None and result.structured_content is not None:
            jsonschema.validate(result.structured_content, tools["add_observation"].output_schema)

        is_error, _, text = await c.call("create_relation", from_entity="a", to_entity="b", relation_type="")
        assert is_error and "relation_type" in text["error"] and "relationType" not in text["error"], text
        is_error, _, text = await c.call("create_relation", from_entity="a", to_entity="b", relation_typ="x")
        assert is_error and "relation_typ: unknown argument; did you mean relation_type?" in text["error"], text
        is_error, _, text = await c.call("create_entities", entities=[{"name": "x", "entity_type": "t", "observation": []}])
        assert is_error and "did you mean observations?" in text["error"], text
        assert "read_graph" not in text["error"] and "create_relations" not in text["error"]

    run(home, body, "--tools", "strict")


def test_unknown_arguments_are_refused_with_the_closest_name_and_nothing_is_stored(home):
    async def body(c: Client):
        err = await c.error("store_memory", content="remember this", tag=["a"])
        assert err["code"] == "VALIDATION_ERROR"
        assert "tag: unknown argument; did you mean tags?" in err["message"], err
        err = await c.error("create_entities", entities=[{"name": "A", "entityType": "t", "observation": ["x"]}])
        assert "entities[0].observation: unknown field; did you mean observations?" in err["message"], err
        err = await c.error("search_nodes", query="a", limt=3)
        assert "limt: unknown argument; did you mean limit?" in err["message"], err
        err = await c.error("create_relations", relations=[{"from": "a", "to": "b", "relationType": "r", "weight": 1}])
        assert "relations[0].weight: unknown field" in err["message"], err

        # A batch with many bad items names each, up to a cap.
        batch = [{"name": f"e{i}", "entityType": "t", "observation": ["x"]} for i in range(25)]
        err = await c.error("create_entities", entities=batch)
        for i in range(20):
            assert f"entities[{i}].observation" in err["message"]
        assert "entities[20]" not in err["message"] and "and 5 more" in err["message"], err["message"]

        graph, _ = await c.ok("read_graph")
        assert graph["entities"] == []
        listed, _ = await c.ok("list_memories")
        assert listed["total"] == 0, "nothing is stored when an argument is refused"

    run(home, body)


def test_types_are_not_coerced(home):
    async def body(c: Client):
        for name, arguments, field, rule in [
            ("read_graph", {"limit": True}, "limit", "valid integer"),
            ("read_graph", {"limit": "3"}, "limit", "valid integer"),
            ("read_graph", {"summary_mode": "true"}, "summary_mode", "valid boolean"),
            ("store_memory", {"content": 3}, "content", "valid string"),
            ("retrieve_memory", {"query": "x", "min_similarity": True}, "min_similarity", "valid number"),
            ("retrieve_memory", {"query": "x", "n_results": 2.5}, "n_results", "valid integer"),
            ("create_entities", {"entities": [{"name": 1, "entityType": "t"}]}, "entities[0].name", "valid string"),
            ("add_observations", {"observations": [{"entityName": "a", "contents": [1]}]},
             "observations[0].contents[0]", "valid string"),
        ]:
            err = await c.error(name, **arguments)
            assert err["code"] == "VALIDATION_ERROR" and f"{field}: " in err["message"] and rule in err["message"], \
                (name, arguments, err)
        for bad in (5, -1, 1.5):
            err = await c.error("retrieve_memory", query="x", min_similarity=bad)
            assert "min_similarity" in err["message"], err
        await c.ok("retrieve_memory", query="x", min_similarity=1)  # an integer is a number
        assert (await c.ok("list_memories"))[0]["total"] == 0

    run(home, body)


def test_names_peers_clients_send_are_accepted(home):
    async def body(c: Client):
        stored, _ = await c.ok("store_memory", content="deploys on friday", tags=["ops"], client_hostname="laptop")
        found, _ = await c.ok("search_by_tag", tags=["source:laptop"])
        assert found["memories"][0]["content_hash"] == stored["content_hash"]
        assert sorted(found["memories"][0]["tags"]) == ["ops", "source:laptop"]
        await c.ok("read_graph", library_name="default")
        tools = await tools_of(c)
        assert "client_hostname" not in tools["store_memory"].input_schema["properties"]
        assert all("library_name" not in t.input_schema["properties"] for t in tools.values())

    run(home, body)


def test_relations_in_the_markdown_library_shape(home, tmp_path):
    async def body(c: Client):
        await c.ok("create_entities", entities=[entity("api"), entity("db"), entity("cache")])
        await c.ok("create_relations", relations=[{"from": "api", "to": "db", "type": "uses"},
                                                  {"from": "api", "to": "cache", "relationType": "uses"}])
        graph, _ = await c.ok("open_nodes", names=["api"])
        assert sorted((r["to"], r["relationType"]) for r in graph["relations"]) == [("cache", "uses"), ("db", "uses")]
        err = await c.error("create_relations", relations=[{"from": "api", "to": "db", "type": "a", "relationType": "b"}])
        assert "relations[0]: give exactly one of relationType and type" in err["message"], err
        err = await c.error("create_relations", relations=[{"from": "api", "to": "db"}])
        assert "relations[0].relationType: Field required" in err["message"], err
        await c.ok("delete_relations", relations=[{"from": "api", "to": "db", "type": "uses"}])
        graph, _ = await c.ok("open_nodes", names=["api"])
        assert [r["to"] for r in graph["relations"]] == ["cache"]

        created, _ = await c.ok("add_entities", entities=[
            {"name": "web", "entity_type": "service", "relations": [{"type": "uses", "to": "api"}]},
            {"name": "job", "entity_type": "service", "relations": [{"relation_type": "uses", "to": "api"}]}])
        found, _ = await c.ok("find_relations", to_entity="api")
        assert sorted(r["from"] for r in found["relations"]) == ["job", "web"]
        err = await c.error("add_entities", entities=[{"name": "x", "relations": [{"to": "api"}]}])
        assert "entities[0].relations[0].type: Field required" in err["message"], err

    run(home, body)


def test_search_nodes_finds_substrings_lists_on_empty_query_and_pages(home):
    async def body(c: Client):
        await c.ok("create_entities", entities=[entity("mentor"), entity("Shop", "accepts payment by card")]
                   + [entity(f"item-{i:02d}", "common word") for i in range(30)])
        found, _ = await c.ok("search_nodes", query="ment")
        assert {"mentor", "Shop"} <= {e["name"] for e in found["entities"]}, found["why"]

        listed, _ = await c.ok("search_nodes", query="", limit=10)
        assert len(listed["entities"]) == 10 and listed["total_count"] == 32 and listed["is_truncated"]
        assert listed["next_offset"] == 10

        first, _ = await c.ok("search_nodes", query="common", limit=20)
        assert first["total_count"] == 30 and first["is_truncated"] and first["next_offset"] == 20
        second, _ = await c.ok("search_nodes", query="common", limit=20, offset=20)
        assert len(second["entities"]) == 10 and not second["is_truncated"] and second["offset"] == 20
        names = [e["name"] for e in first["entities"] + second["entities"]]
        assert sorted(names) == [f"item-{i:02d}" for i in range(30)], "pages neither overlap nor skip"

    run(home, body)


def test_search_by_tag_pages_with_a_total(home):
    async def body(c: Client):
        for i in range(5):
            await c.ok("store_memory", content=f"note number {i}", tags=["t"])
        page, _ = await c.ok("search_by_tag", tags=["t"], limit=2)
        assert page["total_count"] == 5 and page["is_truncated"] and page["next_offset"] == 2
        last, _ = await c.ok("search_by_tag", tags=["t"], limit=2, offset=4)
        assert len(last["memories"]) == 1 and not last["is_truncated"]

    run(home, body)


def test_rename_and_merge_list_every_file_they_rewrote(home, tmp_path):
    notes = tmp_path / "notes"
    notes.mkdir()

    async def body(c: Client):
        await c.ok("add_entities", entities=[
            {"name": "old-db", "entity_type": "service"},
            {"name": "spare-db", "entity_type": "service"},
            {"name": "api", "entity_type": "service", "relations": [{"type": "uses", "to": "old-db"}]},
            {"name": "worker", "entity_type": "service", "relations": [{"type": "uses", "to": "spare-db"}]},
            {"name": "guide", "entity_type": "note", "content": "## Notes\nSee [[old-db]].\n"}])
        renamed, _ = await c.ok("rename_entity", old_name="old-db", new_name="main-db")
        assert sorted(renamed["links_rewritten_in"]) == ["api", "guide"], renamed
        assert "to: main-db" in (notes / "api.md").read_text()
        merged, _ = await c.ok("merge_entities", source_names=["spare-db"], target_name="main-db")
        assert merged["links_rewritten_in"] == ["worker"], merged
        assert "to: main-db" in (notes / "worker.md").read_text()

    run(home, body, "--libraries", f"notes:{notes}")


def test_metadata_tells_the_truth(home):
    async def body(c: Client):
        tools = await tools_of(c)
        assert tools["retrieve_memory"].annotations.read_only_hint is True, "a recall only counts accesses"
        assert tools["search_by_tag"].annotations.read_only_hint is True
        assert tools["store_memory"].annotations.read_only_hint is None, "false is the default: left out"
        assert tools["delete_memory"].annotations.destructive_hint is True
        limits = tools["retrieve_memory"].input_schema["properties"]["min_similarity"]
        assert limits["minimum"] == 0 and limits["maximum"] == 1

    run(home, body, "--tools", "memory")


def test_instructions_name_only_exposed_tools(home):
    import re

    from memloci.mcp import server as srv

    every = set().union(*srv.GROUP_TOOLS.values())
    for groups in (["memory"], ["strict"], ["graph", "project"], srv.DEFAULT_GROUPS):
        text = srv.instructions(groups, several_libraries=False)
        exposed = set().union(*(srv.GROUP_TOOLS[g] for g in groups))
        named = {w for w in re.findall(r"\b[a-z]+(?:_[a-z]+)+\b", text) if w in every}
        assert named and named <= exposed, (groups, named - exposed)
    assert "list_libraries" not in srv.instructions(["graph"], several_libraries=True)

    async def body(c: Client):
        result = await c.session.initialize()
        assert "retrieve_memory" in result.instructions and "search_nodes" not in result.instructions

    run(home, body, "--tools", "memory")


def test_hints_name_only_exposed_tools():
    from memloci.mcp.server import KNOWN_TOOLS
    from memloci.mcp.surface import fit_hint

    hint = "Check the name with search_nodes or read_graph, or create it first."
    assert fit_hint(hint, {"search_memory", "get_graph"}, KNOWN_TOOLS) == \
        "Check the name with search_memory or get_graph, or create it first."
    assert fit_hint("Create it with create_entities first. Or leave entity out.", {"store_memory"}, KNOWN_TOOLS) \
        == "Or leave entity out."
    assert fit_hint("Use read_graph.", {"store_memory"}, KNOWN_TOOLS) == "Fix the call and send it again."
    # Words that are not tools (arguments, fields) are kept.
    assert fit_hint("Repeat with confirm_new_project_root set.", {"x"}, KNOWN_TOOLS) == \
        "Repeat with confirm_new_project_root set."


def test_hint_in_a_memory_only_server_names_no_graph_tool(home):
    async def body(c: Client):
        err = await c.error("store_memory", content="x", entity="ghost")
        tools = set(await tools_of(c))
        assert err["code"] == "NOT_FOUND"
        words = set(re.findall(r"\b[a-z]+(?:_[a-z]+)+\b", err["hint"]))
        assert not (words & KNOWN_TOOLS) - tools, err["hint"]

    import re

    from memloci.mcp.server import KNOWN_TOOLS
    run(home, body, "--tools", "memory")


# -- context cost: sizes, not timings --------------------------------------------------------

# tools/list with every group exposed, with one library mounted or several (then `library` is
# advertised on every tool); every optional argument nullable for strict-mode frameworks
# (`["integer", "null"]`, ~10 characters each) took ~1,300 of it
BUDGET_ALL = 35_000
BUDGET_OFFICIAL = 12_000  # the nine official tools (the official server sends 11,485)


def test_tool_definitions_fit_their_budget(service, tmp_path):
    from memloci.app.registry import LibraryRegistry
    from memloci.app.specs import LibrarySpec
    from memloci.mcp.server import DEFAULT_GROUPS, tool_sizes
    from memloci.service.facade import MemoryService

    def total(svc, groups):
        return sum(r["chars"] for r in tool_sizes(svc, groups))

    assert total(service, DEFAULT_GROUPS) <= BUDGET_ALL
    assert total(service, ["strict", "memory", "documents", "project"]) <= BUDGET_ALL
    assert total(service, ["graph"]) <= BUDGET_OFFICIAL
    two = LibraryRegistry([LibrarySpec("a", tmp_path / "a.db"), LibrarySpec("b", tmp_path / "b.db")])
    try:  # with several libraries, `library` is advertised everywhere: still within budget
        assert total(MemoryService(two), DEFAULT_GROUPS) <= BUDGET_ALL
    finally:
        two.close()


def test_tools_list_is_inline_and_selectors_appear_only_where_they_apply(home, tmp_path):
    async def body(c: Client):
        tools = await tools_of(c)
        sent = sum(len(json.dumps(t.model_dump(by_alias=True, exclude_none=True, mode="json"))) for t in tools.values())
        assert sent <= BUDGET_ALL, sent
        for t in tools.values():
            text = json.dumps(t.input_schema)
            assert "$ref" not in text and "$defs" not in text, t.name
            assert "library_name" not in t.input_schema["properties"], t.name
            assert "library" in t.input_schema["properties"] or t.name == "list_libraries", t.name
            assert "project_path" not in t.input_schema["properties"], "no project group, no project_path"

    run(home, body, "--tools", "graph,memory,documents", "--libraries", f"a:{tmp_path}/a.db,b:{tmp_path}/b.db")


def test_memloci_tools_prints_sizes_and_the_total(home):
    import subprocess
    import sys

    from conftest import server_env

    out = subprocess.run([sys.executable, "-m", "memloci", "tools", "--json"], capture_output=True, text=True,
                         env=server_env(home), check=True)
    report = json.loads(out.stdout)
    assert report["total_chars"] == sum(r["chars"] for r in report["tools"]) <= BUDGET_ALL
    assert {r["tool"] for r in report["tools"]} >= {"read_graph", "store_memory", "update_context"}
    out = subprocess.run([sys.executable, "-m", "memloci", "tools", "--tools", "strict"], capture_output=True,
                         text=True, env=server_env(home), check=True)
    assert "get_entity" in out.stdout and "total" in out.stdout and "read_graph" not in out.stdout
    assert not home.exists(), "listing tool sizes creates no library"


def test_a_batch_names_every_bad_item_and_stores_none(home):
    async def body(c: Client):
        err = await c.error("create_entities", entities=[entity("ok"), entity(""), entity("fine"), entity("  ")])
        assert "entities[1].name: must not be empty" in err["message"]
        assert "entities[3].name: must not be empty" in err["message"], err
        batch = [entity("") for _ in range(23)]
        err = await c.error("create_entities", entities=batch)
        assert "entities[19].name" in err["message"] and "entities[20]" not in err["message"]
        assert err["message"].endswith("and 3 more"), err["message"]
        err = await c.error("add_observations", observations=[{"entityName": "", "contents": ["x"]},
                                                              {"entityName": "a", "contents": [""]}])
        assert "observations[0].entityName" in err["message"] and "observations[1].contents[0]" in err["message"]
        assert (await c.ok("read_graph"))[0]["entities"] == []

    run(home, body)


def test_strict_relation_errors_name_the_relation_type_the_endpoint_and_a_fitting_hint(home, tmp_path):
    async def body(c: Client):
        await c.ok("create_entities", entities=[{"name": n, "entity_type": "person"} for n in ("alice", "bob")])
        await c.ok("create_relation", from_entity="alice", to_entity="bob", relation_type="knows")
        is_error, _, text = await c.call("create_relation", from_entity="bob", to_entity="alice", relation_type="knows")
        assert is_error and "bob -knows-> alice would close a cycle (bob -> alice -> bob)" in text["error"], text
        assert "keeps from_entity" not in text["error"] and "keeps relations acyclic" in text["error"], text
        is_error, _, text = await c.call("create_relation", from_entity="alice", to_entity="alice", relation_type="knows")
        assert is_error and "cannot relate to itself" in text["error"], text
        assert "missing entities" not in text["error"] and "another entity" in text["error"], text
        is_error, _, text = await c.call("create_relation", from_entity="alice", to_entity="ghost", relation_type="knows")
        assert is_error and "to_entity: 'ghost' does not exist" in text["error"], text
        is_error, _, text = await c.call("create_relation", from_entity="ghost", to_entity="bob", relation_type="knows")
        assert is_error and "from_entity: 'ghost' does not exist" in text["error"], text
        # a path problem gets a path hint, not a name-lookup one
        is_error, _, text = await c.call("get_graph_summary", project_path=str(tmp_path / "nope"))
        assert is_error and "not an existing folder" in text["error"]["message"], text
        assert "project root" in text["error"]["hint"] and "search_memory" not in text["error"]["hint"], text
        _, graph, _ = await c.call("get_graph")
        assert len(graph["data"]["relations"]) == 1, "no refused relation was stored"

    run(home, body, "--tools", "strict,memory,project", "--schema", "strict")


def test_graph_set_names_each_missing_endpoint_and_suggests_unadvertised_arguments(home):
    async def body(c: Client):
        await c.ok("create_entities", entities=[entity("A")])
        err = await c.error("create_relations", relations=[{"from": "A", "to": "Ghost", "relationType": "knows"},
                                                           {"from": "Nobody", "to": "A", "relationType": "knows"}])
        assert "relations[0].to: 'Ghost' does not exist" in err["message"], err
        assert "relations[1].from: 'Nobody' does not exist" in err["message"], err
        # `library` is accepted but, with one library mounted, not advertised: still suggested
        assert "library" not in (await tools_of(c))["create_entities"].input_schema["properties"]
        err = await c.error("create_entities", entities=[entity("B")], libary="default")
        assert "libary: unknown argument; did you mean library?" in err["message"], err
        # an advertised name is suggested before an accepted one, which needs a near miss
        err = await c.error("find_relations", entity_name="A")
        assert "entity_name: unknown argument" in err["message"] and "library_name" not in err["message"], err
        graph, _ = await c.ok("read_graph")
        assert [e["name"] for e in graph["entities"]] == ["A"]
        # "*" is for the searches: elsewhere it is refused as such, not looked up as a library's name
        err = await c.error("search_by_tag", tags=["x"], library="*")
        assert err["code"] == "VALIDATION_ERROR" and "'*' (every library) is taken by the searches only" in err["message"]

    run(home, body)


# -- schemas every agent framework converts (the frameworks themselves: test_frameworks.py) ----

# The ranges the service enforces, stated in the schema: tool -> argument -> (minimum, maximum).
RANGES = {"read_graph": {"limit": (1, 10_000), "offset": (0, 1_000_000_000)},
          "search_nodes": {"limit": (1, 1_000), "offset": (0, 999)},
          "retrieve_memory": {"n_results": (1, 1_000), "min_similarity": (0, 1)},
          "search_by_tag": {"limit": (1, 10_000), "offset": (0, 1_000_000_000)},
          "list_memories": {"page": (1, 1_000_000_000), "page_size": (1, 10_000)},
          "get_graph_summary": {"limit": (1, 10_000)}, "n2n_read_graph": {"limit": (1, 10_000)},
          "n2n_search": {"limit": (1, 1_000), "offset": (0, 999)}}


# Defaults a model cannot guess (null is the default of the other optional arguments).
DEFAULTS = {"read_graph": {"limit": 100, "offset": 0}, "search_nodes": {"limit": 25}, "n2n_search": {"limit": 25},
            "list_memories": {"page": 1, "page_size": 10}, "retrieve_memory": {"n_results": 5},
            "store_memory": {"memory_type": "note"}, "list_entities": {"entity_glob": "*"}}


def test_every_optional_argument_is_nullable_with_its_default_and_range(tmp_path):
    import anyio

    from memloci.app.registry import LibraryRegistry
    from memloci.app.specs import LibrarySpec
    from memloci.mcp.server import build_server
    from memloci.service.facade import MemoryService

    def nullable(prop: dict) -> bool:
        kind = prop.get("type")
        return (isinstance(kind, list) and "null" in kind) or {"type": "null"} in prop.get("anyOf", [])

    def walk(where: str, node: dict) -> None:
        assert "additionalProperties" not in node, where  # google-genai reads a boolean as a schema
        for name, prop in node.get("properties", {}).items():
            assert name in node.get("required", []) or nullable(prop), f"{where}.{name}: optional but not nullable"
            if "enum" in json.dumps(prop):  # google-genai's enums are strings: null goes in an anyOf
                assert None not in (prop.get("enum") or []), f"{where}.{name}"
            for inner in [prop, prop.get("items", {}), *prop.get("anyOf", [])]:
                if inner.get("properties"):
                    walk(f"{where}.{name}", inner)

    registry = LibraryRegistry([LibrarySpec("a", tmp_path / "a.db")])
    try:
        for groups in (["graph", "memory", "documents", "project"], ["strict"], ["n2n"]):
            for tool in anyio.run(build_server(MemoryService(registry), groups=groups).list_tools):
                schema = tool.input_schema
                assert schema["properties"], f"{tool.name}: strict converters refuse an object with no property"
                walk(tool.name, schema)
                for name, (low, high) in RANGES.get(tool.name, {}).items():
                    prop = schema["properties"][name]
                    assert (prop["minimum"], prop["maximum"]) == (low, high), (tool.name, name)
                for name, default in DEFAULTS.get(tool.name, {}).items():
                    assert schema["properties"][name]["default"] == default, (tool.name, name)
    finally:
        registry.close()


def test_a_strict_model_sends_null_or_empty_text_for_what_it_does_not_mean(home):
    async def body(c: Client):
        # null and "" are "not given": the defaults apply (memory_type "note", limit 100)
        stored, _ = await c.ok("store_memory", content="Met Anna in Lisbon", tags=None, memory_type="",
                               metadata='{"source": "chat", "n": 2}', importance=None, entity="")
        listed, _ = await c.ok("list_memories", page=1.0, page_size=None, tags=None, memory_type="", entity="",
                               after="", before="", time="", project_path="", confirm_new_project_root="")
        assert [(m["memory_type"], m["metadata"]) for m in listed["memories"]] == [("note", {"source": "chat", "n": 2})]
        await c.ok("update_memory", content_hash=stored["content_hash"], content="", tags=None,
                   metadata={"n": 3}, importance="")
        listed, _ = await c.ok("list_memories")
        assert listed["memories"][0]["metadata"] == {"source": "chat", "n": 3}
        await c.ok("read_graph", summary_mode=None, limit=None, offset=None)
        # list_libraries' one property (strict converters refuse a tool with none): `name`
        # (Client.ok's own first parameter is `name`, so these go through the session)
        listed = (await c.session.call_tool("list_libraries", {"name": None})).structured_content["libraries"]
        one = await c.session.call_tool("list_libraries", {"name": listed[0]["name"]})
        assert one.structured_content["libraries"] == listed[:1]
        assert (await c.session.call_tool("list_libraries", {"name": "nowhere"})).is_error
        await c.ok("search_nodes", query="anna", limit=5.0, offset=0.0)
        for name, arguments, message in [
            ("retrieve_memory", {"query": "x", "n_results": 5.5}, "n_results: Input should be a valid integer"),
            ("read_graph", {"limit": 0}, "limit: must be between 1 and 10000, got 0"),
            ("read_graph", {"limit": 20_000.0}, "limit: must be between 1 and 10000, got 20000"),
            ("store_memory", {"content": "x", "metadata": "[1, 2]"}, "metadata: must be a JSON object"),
            ("store_memory", {"content": "x", "metadata": "{oops"}, "metadata: must be a JSON object"),
            ("store_memory", {"content": ""}, "content: must not be empty"),  # required text: "" is refused
            ("read_graph", {"limit": True}, "limit: Input should be a valid integer"),
        ]:
            err = await c.error(name, **arguments)
            assert err["code"] == "VALIDATION_ERROR" and message in err["message"], (name, arguments, err)

    run(home, body)
