"""The tool surface as a client sees it, over a real stdio session: error replies any client
accepts, unknown and mistyped arguments refused, peers' shapes, sizes and truthful metadata."""

from __future__ import annotations

import json

import jsonschema

from conftest import Client, run_session as run


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
