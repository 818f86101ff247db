"""The nine official tools over a real MCP stdio session: names, shapes and semantics."""

from __future__ import annotations

import json
import sqlite3

from conftest import Client
from conftest import run_session as run

OFFICIAL = ["create_entities", "create_relations", "add_observations", "delete_entities", "delete_observations",
            "delete_relations", "read_graph", "search_nodes", "open_nodes"]


def test_lists_the_nine_official_tools_with_schemas_and_annotations(home):
    async def body(c: Client):
        tools = {t.name: t for t in (await c.session.list_tools()).tools}
        assert set(OFFICIAL) <= set(tools)
        for name in OFFICIAL:
            tool = tools[name]
            assert tool.output_schema and tool.output_schema["type"] == "object", name
            # one library mounted: `library` cannot apply, so it is accepted but not advertised
            assert "library" not in tool.input_schema["properties"], name
            assert "library_name" not in tool.input_schema["properties"], name
            # closed on the server (unknown arguments are refused), not in the schema: google-genai
            # reads a boolean additionalProperties as a schema and fails
            assert "additionalProperties" not in json.dumps(tool.input_schema), name
            assert tool.annotations is not None and tool.annotations.open_world_hint is False, name
        assert tools["read_graph"].annotations.read_only_hint is True
        assert tools["delete_entities"].annotations.destructive_hint is True
        # readOnlyHint false is the protocol's default, so a write leaves it out
        assert tools["create_entities"].annotations.read_only_hint is None
        # official argument shapes
        assert tools["create_entities"].input_schema["required"] == ["entities"]
        rel = tools["create_relations"].input_schema["properties"]["relations"]["items"]
        assert set(rel["required"]) == {"from", "to", "relationType"}
        assert tools["delete_entities"].input_schema["required"] == ["entityNames"]
        assert tools["delete_observations"].input_schema["required"] == ["deletions"]
        assert tools["open_nodes"].input_schema["required"] == ["names"]
        assert tools["search_nodes"].input_schema["required"] == ["query"]

    run(home, body)


def test_create_entities_merges_existing_and_in_call_duplicates(home):
    async def body(c: Client):
        structured, text = await c.ok("create_entities", entities=[
            {"name": "Alice", "entityType": "person", "observations": ["Works at Acme", "Likes tea"]},
            {"name": "ALICE", "entityType": "robot", "observations": ["Likes tea", "Plays chess"]},
        ])
        assert structured["created"] == ["Alice"] and structured["merged"] == []
        # the text content keeps the official shape: a JSON array of entities
        assert isinstance(text, list) and text[0]["name"] == "Alice" and text[0]["entityType"] == "person"
        assert text[0]["observations"] == ["Works at Acme", "Likes tea", "Plays chess"]
        assert text[0]["createdAt"].endswith("Z")

        structured, _ = await c.ok("create_entities", entities=[
            {"name": "alice", "entityType": "cat", "observations": ["Prefers email", "  Likes   tea "]},
            {"name": "Acme", "entityType": "company", "observations": []},
        ])
        assert structured["merged"] == ["Alice"] and structured["created"] == ["Acme"]
        merged = structured["entities"][0]
        assert merged["status"] == "merged" and merged["entityType"] == "person"
        assert merged["observations"] == ["Prefers email"] and merged["skippedObservations"] == ["Likes   tea"]

        graph, _ = await c.ok("open_nodes", names=["alice"])
        (alice,) = graph["entities"]
        assert alice["name"] == "Alice" and alice["entityType"] == "person"
        assert alice["observations"] == ["Works at Acme", "Likes tea", "Plays chess", "Prefers email"]
        assert len(alice["observationDates"]) == 4 and all(d.endswith("Z") for d in alice["observationDates"])

    run(home, body)


def test_create_relations_rejects_missing_endpoints_atomically_and_ignores_duplicates(home):
    async def body(c: Client):
        await c.ok("create_entities", entities=[{"name": n, "entityType": "t", "observations": []} for n in ("A", "B")])
        err = await c.error("create_relations", relations=[
            {"from": "A", "to": "B", "relationType": "knows"},
            {"from": "A", "to": "Ghost", "relationType": "knows"},
            {"from": "Nobody", "to": "B", "relationType": "knows"},
        ])
        assert err["code"] == "INVALID_RELATION"
        assert "Ghost" in err["message"] and "Nobody" in err["message"]
        assert err["details"]["missing"] == ["Ghost", "Nobody"]
        graph, _ = await c.ok("read_graph")
        assert graph["relations"] == [], "nothing of a failed batch may be applied"

        structured, text = await c.ok("create_relations", relations=[{"from": "A", "to": "B", "relationType": "knows"}])
        assert text == [{"from": "A", "to": "B", "relationType": "knows"}]
        structured, text = await c.ok("create_relations", relations=[{"from": "a", "to": "b", "relationType": "knows"}])
        assert text == [] and len(structured["already_existed"]) == 1
        graph, _ = await c.ok("read_graph")
        assert len(graph["relations"]) == 1

    run(home, body)


def test_add_observations_missing_entity_is_not_found_and_nothing_applied(home):
    async def body(c: Client):
        await c.ok("create_entities", entities=[{"name": "A", "entityType": "t", "observations": ["one"]}])
        err = await c.error("add_observations", observations=[
            {"entityName": "A", "contents": ["two"]},
            {"entityName": "Missing", "contents": ["x"]},
        ])
        assert err["code"] == "NOT_FOUND" and "Missing" in err["message"]
        graph, _ = await c.ok("open_nodes", names=["A"])
        assert graph["entities"][0]["observations"] == ["one"]

        structured, text = await c.ok("add_observations", observations=[{"entityName": "a", "contents": ["one", "two", "two"]}])
        assert text == [{"entityName": "A", "addedObservations": ["two"], "skippedObservations": ["one", "two"]}]
        graph, _ = await c.ok("open_nodes", names=["A"])
        assert graph["entities"][0]["observations"] == ["one", "two"]

    run(home, body)


def test_deletes_are_idempotent_and_delete_entities_cascades(home):
    async def body(c: Client):
        await c.ok("create_entities", entities=[
            {"name": "A", "entityType": "t", "observations": ["a1", "a2"]},
            {"name": "B", "entityType": "t", "observations": ["b1"]},
            {"name": "C", "entityType": "t", "observations": []},
        ])
        await c.ok("create_relations", relations=[
            {"from": "A", "to": "B", "relationType": "r"}, {"from": "B", "to": "C", "relationType": "r"},
            {"from": "C", "to": "A", "relationType": "r"}])
        removed = []
        for _ in range(2):
            structured, text = await c.ok("delete_observations", deletions=[{"entityName": "A", "observations": ["a1"]},
                                                                            {"entityName": "Nope", "observations": ["x"]}])
            assert text == "Observations deleted successfully" and structured["success"] is True
            removed.append(structured["deleted"])
        assert removed == [[{"entityName": "A", "observations": ["a1"]}], []]
        graph, _ = await c.ok("open_nodes", names=["A"])
        assert graph["entities"][0]["observations"] == ["a2"]
        for _ in range(2):
            _, text = await c.ok("delete_relations", relations=[{"from": "B", "to": "C", "relationType": "r"}])
            assert text == "Relations deleted successfully"
        deleted = []
        for _ in range(2):
            structured, text = await c.ok("delete_entities", entityNames=["a", "Ghost"])
            assert text == "Entities deleted successfully"
            deleted.append(structured["deleted"])
        assert deleted == [["A"], []]
        graph, _ = await c.ok("read_graph")
        assert [e["name"] for e in graph["entities"]] == ["B", "C"]
        assert graph["relations"] == [], "relations of a deleted entity go with it"
        found, _ = await c.ok("search_nodes", query="a2")
        assert found["entities"] == []

    run(home, body)
    conn = sqlite3.connect(home / "default.db")
    contents = [r[0] for r in conn.execute("SELECT content FROM memories ORDER BY id")]
    assert contents == ["b1"], "observations of a deleted entity are gone from the library, not just hidden"
    conn.close()


def test_observations_differing_in_case_are_distinct_facts(home):
    async def body(c: Client):
        await c.ok("create_entities", entities=[{"name": "Svc", "entityType": "service", "observations": ["Uses postgres"]}])
        _, text = await c.ok("add_observations", observations=[{"entityName": "Svc", "contents": ["Uses Postgres"]}])
        assert text[0]["addedObservations"] == ["Uses Postgres"]
        await c.ok("delete_observations", deletions=[{"entityName": "Svc", "observations": ["Uses postgres"]}])
        graph, _ = await c.ok("open_nodes", names=["svc"])
        assert graph["entities"][0]["observations"] == ["Uses Postgres"]

    run(home, body)


def test_search_nodes_ranks_words_spread_over_name_and_observations(home):
    async def body(c: Client):
        await c.ok("create_entities", entities=[
            {"name": "Project Falcon", "entityType": "project", "observations": ["Uses PostgreSQL", "Deadline in March"]},
            {"name": "Falcon Heavy", "entityType": "rocket", "observations": ["Built by SpaceX"]},
            {"name": "Billing", "entityType": "project", "observations": ["Moved to PostgreSQL in March"]},
            {"name": "Unrelated", "entityType": "note", "observations": ["nothing here"]},
        ])
        await c.ok("create_relations", relations=[{"from": "Project Falcon", "to": "Billing", "relationType": "feeds"}])
        # the official server looks for the literal substring "falcon postgresql march": it finds nothing
        found, text = await c.ok("search_nodes", query="FALCON postgresql March")
        names = [e["name"] for e in found["entities"]]
        assert names[0] == "Project Falcon", names
        assert set(names) == {"Project Falcon", "Falcon Heavy", "Billing"}
        assert found["why"]["Project Falcon"].startswith("all 3 words")
        assert "2 of 3" in found["why"]["Billing"]
        assert text["entities"][0]["name"] == "Project Falcon"
        assert [(r["from"], r["to"], r["relationType"]) for r in found["relations"]] == [("Project Falcon", "Billing", "feeds")]

        found, _ = await c.ok("search_nodes", query="falcon", limit=1)
        assert len(found["entities"]) == 1 and found["is_truncated"] is True
        # prefix and case-insensitive
        found, _ = await c.ok("search_nodes", query="postgre")
        assert {e["name"] for e in found["entities"]} == {"Project Falcon", "Billing"}
        # a substring inside a word still matches, as with the official server
        found, _ = await c.ok("search_nodes", query="elated")
        assert [e["name"] for e in found["entities"]] == ["Unrelated"]
        # FTS syntax in a query is searched as words, never parsed
        found, _ = await c.ok("search_nodes", query='"falcon" AND NEAR( *')
        assert found["entities"][0]["name"] in {"Project Falcon", "Falcon Heavy"}

    run(home, body)


def test_search_handles_non_ascii_words_and_substrings(home):
    async def body(c: Client):
        await c.ok("create_entities", entities=[
            {"name": "Jürgen", "entityType": "person", "observations": ["Works at Größenwahn GmbH in München"]},
            {"name": "北京办公室", "entityType": "office", "observations": ["负责亚洲市场"]}])
        for query in ["Größenwahn", "größenwahn", "munchen", "MÜNCHEN", "jurgen"]:
            found, _ = await c.ok("search_nodes", query=query)
            assert [e["name"] for e in found["entities"]] == ["Jürgen"], query
        found, _ = await c.ok("search_nodes", query="北京")  # a substring of a name
        assert [e["name"] for e in found["entities"]] == ["北京办公室"]
        found, _ = await c.ok("search_nodes", query="亚洲")  # a substring of an observation
        assert [e["name"] for e in found["entities"]] == ["北京办公室"]

    run(home, body)


def test_merge_says_when_a_different_type_was_not_applied(home):
    async def body(c: Client):
        await c.ok("create_entities", entities=[{"name": "Bob", "entityType": "person"}])
        structured, _ = await c.ok("create_entities", entities=[{"name": "BOB", "entityType": "manager"}])
        (bob,) = structured["entities"]
        assert bob["status"] == "merged" and bob["entityType"] == "person" and "manager" in bob["note"]

    run(home, body)


def test_open_nodes_returns_relations_with_either_end_opened(home):
    async def body(c: Client):
        await c.ok("create_entities", entities=[{"name": n, "entityType": "t", "observations": []} for n in "ABCD"])
        await c.ok("create_relations", relations=[
            {"from": "A", "to": "B", "relationType": "r"}, {"from": "C", "to": "A", "relationType": "r"},
            {"from": "C", "to": "D", "relationType": "r"}])
        graph, _ = await c.ok("open_nodes", names=["a", "Nope"])
        assert [e["name"] for e in graph["entities"]] == ["A"]
        pairs = {(r["from"], r["to"]) for r in graph["relations"]}
        assert pairs == {("A", "B"), ("C", "A")}

    run(home, body)


def test_read_graph_pages_and_summary_mode(home):
    async def body(c: Client):
        await c.ok("create_entities", entities=[
            {"name": f"E{i}", "entityType": "t", "observations": [f"obs {i}"]} for i in range(10)])
        await c.ok("create_relations", relations=[
            {"from": "E0", "to": "E1", "relationType": "r"},   # both on page 1
            {"from": "E1", "to": "E5", "relationType": "r"},   # crosses pages
            {"from": "E6", "to": "E7", "relationType": "r"}])  # both on page 2
        page, _ = await c.ok("read_graph", summary_mode=True, limit=4)
        assert [e["name"] for e in page["entities"]] == ["E0", "E1", "E2", "E3"]
        assert all("observations" not in e for e in page["entities"])
        assert page["total_entity_count"] == 10 and page["is_truncated"] is True and page["next_offset"] == 4
        assert [(r["from"], r["to"]) for r in page["relations"]] == [("E0", "E1")]
        page, _ = await c.ok("read_graph", limit=4, offset=4)
        assert [e["name"] for e in page["entities"]] == ["E4", "E5", "E6", "E7"]
        assert page["entities"][0]["observations"] == ["obs 4"]
        assert [(r["from"], r["to"]) for r in page["relations"]] == [("E6", "E7")]
        page, _ = await c.ok("read_graph", offset=8)
        assert [e["name"] for e in page["entities"]] == ["E8", "E9"] and page["is_truncated"] is False
        full, text = await c.ok("read_graph")
        assert len(full["entities"]) == 10 and len(full["relations"]) == 3
        assert text["entities"] == full["entities"]

    run(home, body)


def test_library_argument_names_a_mounted_library(home, tmp_path):
    spec = f"work:{tmp_path / 'work.db'},personal:{tmp_path / 'personal.db'}"

    async def body(c: Client):
        err = await c.error("read_graph")
        assert err["code"] == "VALIDATION_ERROR" and "work" in err["message"] and "personal" in err["message"]
        await c.ok("create_entities", library="work", entities=[{"name": "W", "entityType": "t"}])
        await c.ok("create_entities", library_name="personal", entities=[{"name": "P", "entityType": "t"}])
        work, _ = await c.ok("read_graph", library="work")
        personal, _ = await c.ok("read_graph", library="personal")
        assert [e["name"] for e in work["entities"]] == ["W"]
        assert [e["name"] for e in personal["entities"]] == ["P"]
        err = await c.error("read_graph", library="nope")
        assert err["code"] == "NOT_FOUND" and "work" in err["message"]

    run(home, body, "--libraries", spec)


def test_single_library_may_be_named_or_left_out(home):
    async def body(c: Client):
        await c.ok("create_entities", library="default", entities=[{"name": "X", "entityType": "t"}])
        graph, _ = await c.ok("read_graph")
        assert [e["name"] for e in graph["entities"]] == ["X"]

    run(home, body)


def test_search_nodes_finds_cjk_words_typos_and_prefixes_of_any_word(home):
    async def body(c: Client):
        await c.ok("create_entities", entities=[
            {"name": "trip", "entityType": "note", "observations": ["東京の旅行計画。来月に行く。"]},
            {"name": "Alice Chen", "entityType": "person", "observations": ["Leads the data team"]},
            {"name": "Bob Chen", "entityType": "person", "observations": []}])
        for query in ["東京", "旅行計画"]:
            found, _ = await c.ok("search_nodes", query=query)
            assert [e["name"] for e in found["entities"]] == ["trip"], query
        for query in ["alcie", "Aliec", "Ali", "alcie chen"]:
            found, _ = await c.ok("search_nodes", query=query)
            assert found["entities"][0]["name"] == "Alice Chen", query
        found, _ = await c.ok("search_nodes", query="who leads the data team?")
        assert found["entities"][0]["name"] == "Alice Chen" and found["why"]["Alice Chen"].startswith("all 3 words")

    run(home, body)


def test_an_alias_names_its_entity_in_the_graph_writes(home):
    async def body(c: Client):
        await c.ok("add_entities", entities=[{"name": "Anna Smith", "entity_type": "person", "aliases": ["Anna", "Boss"]},
                                              {"name": "Bob", "entity_type": "person", "aliases": ["Boss"]}])
        _, text = await c.ok("add_observations", observations=[{"entityName": "Anna", "contents": ["Likes tea"]}])
        assert text == [{"entityName": "Anna Smith", "addedObservations": ["Likes tea"], "skippedObservations": []}]
        err = await c.error("add_observations", observations=[{"entityName": "boss", "contents": ["x"]}])
        assert err["code"] == "VALIDATION_ERROR" and err["details"]["candidates"] == ["Anna Smith", "Bob"]
        assert err["message"].startswith("observations[0].entityName: 'boss' is an alias of 2 entities")
        graph, _ = await c.ok("read_graph")
        assert sorted(e["name"] for e in graph["entities"]) == ["Anna Smith", "Bob"]
        assert [e["observations"] for e in graph["entities"] if e["name"] == "Anna Smith"] == [["Likes tea"]]

    run(home, body)
