"""The n2n-memory drop-in (`--tools n2n`): a client written as an n2n-memory user writes it
(camelCase arguments, the confirmation handshake, summaryMode paging, JSON text replies) runs
against `memloci serve --tools n2n`; the same `.mcp/` memory is then seen by the project tools."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import anyio
from conftest import Client, run_session, server_params
from mcp import ClientSession
from mcp.client.stdio import stdio_client

from memloci.mcp.n2n import TOOLS

REMINDER = "Remember to call n2n_update_context before 'git commit'."


def make_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(path)], check=True, capture_output=True)
    (path / "main.py").write_text("print('hi')\n")
    return path


async def n2n_client_script(session: ClientSession, project: str) -> dict:
    """What an n2n-memory user's script does, unchanged: it reads only the JSON text of replies."""

    async def call(name: str, args: dict) -> tuple[bool, dict]:
        result = await session.call_tool(name, {"projectPath": project, **args})
        return bool(result.is_error), json.loads(result.content[0].text)

    seen: dict = {}
    tools = {t.name for t in (await session.list_tools()).tools}
    assert tools == set(TOOLS)

    # 1. The handshake: a project without .mcp answers AWAITING_CONFIRMATION with detectedRoot.
    failed, body = await call("n2n_read_graph", {})
    assert failed and body["status"] == "AWAITING_CONFIRMATION"
    root = body["detectedRoot"]
    assert root == project and "confirmNewProjectRoot" in body["message"]
    failed, body = await call("n2n_add_entities", {"confirmNewProjectRoot": root, "entities": [
        {"name": "auth", "entityType": "module", "observations": ["uses JWT"]},
        {"name": "api", "entityType": "module", "observations": ["REST over FastAPI"]},
    ]})
    assert not failed and body["status"] == "success", body
    assert body["_protocol"] == {"action": "MEMORY_UPDATED", "reminder": REMINDER}

    # 2. Writes: merge into an existing name, observations to a missing entity skipped, relations.
    failed, body = await call("n2n_add_entities", {"entities": [
        {"name": "auth", "entityType": "service", "observations": ["keys rotate daily"]}]})
    assert not failed
    failed, body = await call("n2n_add_observations", {"observations": [
        {"entityName": "api", "contents": ["rate limited", "REST over FastAPI"]},
        {"entityName": "ghost", "contents": ["never stored"]}]})
    assert not failed and body["status"] == "success" and "Added 1 observation" in body["message"], body
    failed, body = await call("n2n_create_relations", {"relations": [
        {"from": "api", "to": "auth", "relationType": "uses"}]})
    assert not failed and body["status"] == "success"
    failed, body = await call("n2n_create_relations", {"relations": [
        {"from": "api", "to": "auth", "relationType": "uses"}]})  # a duplicate is ignored
    assert not failed
    failed, body = await call("n2n_create_relations", {"relations": [
        {"from": "api", "to": "nowhere", "relationType": "uses"}]})  # a dangling end is rejected
    assert failed and body["error"]["code"] == "INVALID_RELATION"
    for i in range(5):
        await call("n2n_add_entities", {"entities": [{"name": f"util{i}", "entityType": "module", "observations": []}]})
    failed, body = await call("n2n_update_context", {"activeTask": "Rotate keys", "status": "IN_PROGRESS",
                                                     "nextSteps": ["add key id", "deploy"], "lastCommit": "abc123"})
    assert not failed and body["_protocol"]["action"] == "CONTEXT_UPDATED"
    failed, body = await call("n2n_update_context", {"reason": "a leaked key"})  # merged
    assert not failed

    # 3. Reads: summaryMode paging until isTruncated is false, then the full graph and context.
    names, offset = [], 0
    while True:
        failed, page = await call("n2n_read_graph", {"summaryMode": True, "limit": 3, "offset": offset})
        assert not failed and set(page) == {"graph", "context", "totalEntityCount", "isTruncated", "_protocol"}
        assert all(e["observations"] == [] for e in page["graph"]["entities"])
        names += [e["name"] for e in page["graph"]["entities"]]
        offset += len(page["graph"]["entities"])
        if not page["isTruncated"]:
            break
    assert sorted(names) == sorted(["auth", "api"] + [f"util{i}" for i in range(5)])
    assert page["totalEntityCount"] == 7
    failed, full = await call("n2n_read_graph", {})
    ctx = full["context"]
    assert (ctx["activeTask"], ctx["status"], ctx["nextSteps"], ctx["reason"], ctx["lastCommit"]) == (
        "Rotate keys", "IN_PROGRESS", ["add key id", "deploy"], "a leaked key", "abc123")
    assert ctx["updatedAt"].endswith("Z")
    auth = next(e for e in full["graph"]["entities"] if e["name"] == "auth")
    assert auth == {"name": "auth", "entityType": "module", "observations": ["uses JWT", "keys rotate daily"]}
    assert full["graph"]["relations"] == [{"from": "api", "to": "auth", "relationType": "uses"}]
    failed, summary = await call("n2n_get_graph_summary", {"limit": 2})
    assert not failed and summary["relationCount"] == 1 and summary["totalEntityCount"] == 7
    assert summary["isTruncated"] and len(summary["entities"]) == 2 and set(summary["entities"][0]) == {"name", "type"}
    failed, found = await call("n2n_search", {"query": "JWT", "fuzzy": True, "minScore": 0.3})
    assert not failed and [e["name"] for e in found["entities"]] == ["auth"]
    assert found["totalResults"] == 1 and found["isTruncated"] is False
    failed, opened = await call("n2n_open_nodes", {"names": ["api"]})
    assert [e["name"] for e in opened["entities"]] == ["api"] and len(opened["relations"]) == 1

    # 4. Deletes, export.
    failed, body = await call("n2n_delete_observations", {"deletions": [{"entityName": "api", "observations": ["rate limited"]}]})
    assert not failed and "Deleted 1 observations" in body["message"]
    failed, body = await call("n2n_delete_entities", {"entityNames": ["util0", "util1"]})
    assert not failed and "Deleted 2 entities" in body["message"]
    failed, body = await call("n2n_export_markdown", {"outputPath": "docs.md"})
    assert not failed and body["status"] == "success"
    failed, body = await call("n2n_export_markdown", {"outputPath": "/etc/passwd.md"})
    assert failed and body["error"]["message"].startswith("outputPath:")
    seen["exported"] = Path(project, "docs.md").read_text()
    return seen


def test_an_n2n_client_runs_unchanged_and_the_project_tools_see_its_memory(tmp_path, home):
    app = make_repo(tmp_path / "app")

    async def main():
        async with stdio_client(server_params(home, "--tools", "n2n")) as (r, w):
            async with ClientSession(r, w) as session:
                await session.initialize()
                return await n2n_client_script(session, str(app))

    seen = anyio.run(main)
    assert "# Knowledge graph" in seen["exported"] and "auth" in seen["exported"]

    async def through_project_tools(c: Client):
        graph, _ = await c.ok("read_graph", project_path=str(app))
        assert sorted(e["name"] for e in graph["entities"]) == ["api", "auth", "util2", "util3", "util4"]
        assert graph["context"]["active_task"] == "Rotate keys"
        summary, _ = await c.ok("get_graph_summary", project_path=str(app))
        assert summary["project"] == {"id": "app", "root": str(app)}

    run_session(home, through_project_tools)


def test_n2n_refusals_name_n2n_fields(tmp_path, home):
    app = make_repo(tmp_path / "app")
    (app / ".mcp").mkdir()

    async def body(c: Client):
        err = await c.error("n2n_read_graph", projectPath="relative/path")
        assert err["code"] == "VALIDATION_ERROR" and err["message"].startswith("projectPath:")
        err = await c.error("n2n_read_graph")  # no roots from this client: projectPath is needed
        assert err["message"].startswith("projectPath: Field required")
        err = await c.error("n2n_read_graph", projectPath=str(app), summary_mode=True)
        assert "summary_mode: unknown argument; did you mean summaryMode?" in err["message"]
        err = await c.error("n2n_update_context", projectPath=str(app), status="DONE")
        assert err["message"].startswith("status:")
        err = await c.error("n2n_update_context", projectPath=str(app))
        assert "activeTask" in err["message"] and "active_task" not in err["message"]
        err = await c.error("n2n_search", projectPath=str(app), query="x", minScore=2)
        assert err["message"].startswith("minScore:")
        err = await c.error("n2n_add_observations", projectPath=str(app),
                            observations=[{"entityName": "  ", "contents": ["x"]}])
        assert err["message"].startswith("observations[0].entityName:"), err
        err = await c.error("n2n_add_entities", projectPath=str(app), entities=[{"name": "x", "entityType": 3}])
        assert err["message"].startswith("entities[0].entityType:")
        assert not any((app / ".mcp").glob("*.md"))  # nothing half-applied

    run_session(home, body, "--tools", "n2n")


def test_n2n_combines_with_other_groups_and_stays_small(service):
    from memloci.mcp.server import tool_groups, tool_sizes

    assert tool_groups("graph,n2n") == ["graph", "n2n"]
    sizes = tool_sizes(service, ["n2n"])
    assert {r["tool"] for r in sizes} == set(TOOLS)
    assert sum(r["chars"] for r in sizes) <= 12_000  # no more than the nine official tools' budget


def test_a_project_n2n_memory_already_kept_reads_back_the_same(tmp_path, home):
    app = make_repo(tmp_path / "app")
    (app / ".mcp").mkdir()
    memory = {"entities": [{"name": "auth", "entityType": "module", "observations": ["uses JWT"]},
                           {"name": "api", "entityType": "module", "observations": []}],
              "relations": [{"from": "api", "to": "auth", "relationType": "uses"}]}
    context = {"activeTask": "Rotate keys", "status": "BLOCKED", "reason": "waiting on ops", "nextSteps": ["ask ops"],
               "lastCommit": "abc123", "updatedAt": "2026-01-02T03:04:05Z"}
    (app / ".mcp" / "memory.json").write_text(json.dumps(memory))
    (app / ".mcp" / "context.json").write_text(json.dumps(context))

    async def body(c: Client):
        graph, text = await c.ok("n2n_read_graph", projectPath=str(app))
        assert text == graph  # n2n clients read the JSON text; it says the same as the structured content
        assert sorted(graph["graph"]["entities"], key=lambda e: e["name"]) == sorted(memory["entities"],
                                                                                     key=lambda e: e["name"])
        assert graph["graph"]["relations"] == memory["relations"]
        assert graph["context"] == context
        # confirmNewProjectRoot on an established project changes nothing (n2n clients may always send it)
        await c.ok("n2n_get_graph_summary", projectPath=str(app), confirmNewProjectRoot=str(app))

    run_session(home, body, "--tools", "n2n")
    assert json.loads((app / ".mcp" / "memory.json").read_text()) == memory  # n2n's files are left as they were
