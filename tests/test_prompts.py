"""MCP prompts (session_start, before_compaction, task_end) through real clients: the Python
SDK and the TypeScript SDK 1.x and 2.x (tests/conformance/prompts.mjs), each against a real
`memloci serve` over stdio."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from conftest import mcp_session, server_env
from mcp.shared.exceptions import MCPError
from test_conformance import HERE, require_node

from memloci.mcp.prompts import BUDGET_MAX, CHARS_PER_TOKEN, DEFAULT_BUDGET, tokens
from memloci.mcp.server import KNOWN_TOOLS

TOPIC = "redis session storage"


def project(tmp_path: Path) -> Path:
    repo = tmp_path / "app"
    repo.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    return repo


def tools_named(text: str) -> set[str]:
    return {t for t in KNOWN_TOOLS if re.search(rf"\b{re.escape(t)}\b", text)}


async def fill(session, repo: Path | None = None, n: int = 30) -> None:
    where = {"project_path": str(repo), "confirm_new_project_root": str(repo)} if repo else {}
    await session.call_tool("update_context", {**where, "active_task": "Move sessions to Redis",
                                               "status": "IN_PROGRESS", "next_steps": ["load-test the cluster"]})
    where.pop("confirm_new_project_root", None)
    for i in range(n):
        result = await session.call_tool("store_memory", {**where, "content": f"Note {i} on redis session storage: "
                                                          + "the TTL keeps idle sessions short. " * 12})
        assert not result.is_error
    result = await session.call_tool("create_entities", {**where, "entities": [
        {"name": "Redis", "entityType": "service", "observations": ["Holds the session storage since March"]}]})
    assert not result.is_error


def text_of(result) -> str:
    assert len(result.messages) == 1 and result.messages[0].role == "user"
    return result.messages[0].content.text


def test_prompts_listed_and_filled_within_budget(tmp_path):
    async def main():
        async with mcp_session(tmp_path / "home") as session:
            listed = {p.name: [a.name for a in p.arguments or []] for p in (await session.list_prompts()).prompts}
            assert listed == {"session_start": ["project_path", "query", "token_budget"],
                              "before_compaction": ["project_path"], "task_end": ["project_path"]}
            empty = text_of(await session.get_prompt("session_start", {}))
            assert "Nothing is stored here yet" in empty
            await fill(session)
            default = text_of(await session.get_prompt("session_start", {}))
            assert "- active task: Move sessions to Redis" in default and "load-test the cluster" in default
            assert "Note " in default and "Redis (service): Holds the session storage" in default
            assert tokens(default) <= DEFAULT_BUDGET
            for budget in (200, 600, 5000):
                text = text_of(await session.get_prompt("session_start", {"token_budget": str(budget),
                                                                         "query": TOPIC}))
                assert len(text) <= budget * CHARS_PER_TOKEN
                shown = int(re.search(r"\((\d+) memories", text).group(1))
                assert (shown < 30) if budget < 5000 else shown == 20  # a small budget shows fewer
            assert tools_named(default) <= {"retrieve_memory", "search_nodes", "open_nodes"}
            compaction = text_of(await session.get_prompt("before_compaction", {}))
            assert {"store_memory", "create_entities", "add_observations", "update_context"} <= tools_named(compaction)
            end = text_of(await session.get_prompt("task_end", {}))
            assert "update_context" in end and "- active task: Move sessions to Redis" in end

    anyio.run(main)


def test_project_prompts(tmp_path):
    repo = project(tmp_path)
    bare = project(tmp_path / "other")

    async def main():
        async with mcp_session(tmp_path / "home") as session:
            await fill(session, repo, n=3)
            text = text_of(await session.get_prompt("session_start", {"project_path": str(repo)}))
            assert f"project {repo}" in text and "Move sessions to Redis" in text and "Note 2" in text
            assert f'project_path="{repo}"' in text_of(await session.get_prompt("task_end",
                                                                                {"project_path": str(repo)}))
            # the default library holds none of it
            assert "Nothing is stored here yet" in text_of(await session.get_prompt("session_start", {}))
            with pytest.raises(MCPError) as err:  # a prompt never creates a project's memory
                await session.get_prompt("session_start", {"project_path": str(bare)})
            assert err.value.code == -32602 and "no project memory yet" in err.value.message
            # the advice names a tool that takes the confirmation, not this prompt
            assert f'a project tool (update_context or store_memory) with project_path and ' \
                   f'confirm_new_project_root="{bare}" first' in err.value.message
            assert "Repeat the same call" not in err.value.message
            assert not (bare / ".mcp").exists()
            with pytest.raises(MCPError) as err:
                await session.get_prompt("task_end", {"project_path": "relative/path"})
            assert err.value.code == -32602 and "project_path" in err.value.message

    anyio.run(main)


def test_n2n_prompts_speak_n2n(tmp_path):
    """Under --tools n2n the prompts name the n2n_ tools and their camelCase projectPath."""
    repo = project(tmp_path)
    bare = project(tmp_path / "other")

    async def main():
        async with mcp_session(tmp_path / "home", "--tools", "n2n") as session:
            result = await session.call_tool("n2n_update_context", {"projectPath": str(repo),
                                                                    "confirmNewProjectRoot": str(repo),
                                                                    "activeTask": "Ship the cart", "status": "BLOCKED"})
            assert not result.is_error
            end = text_of(await session.get_prompt("task_end", {"project_path": str(repo)}))
            assert "n2n_update_context: activeTask" in end and f'projectPath="{repo}"' in end
            assert "project_path=" not in end and "- active task: Ship the cart" in end
            start = text_of(await session.get_prompt("session_start", {"project_path": str(repo)}))
            assert "Ship the cart" in start and "n2n_search" in start
            # without a project_path the model is told to pass projectPath (a client without roots needs it)
            assert "Pass projectPath, the project's absolute root, to every n2n_ tool." in \
                text_of(await session.get_prompt("task_end", {}))
            with pytest.raises(MCPError) as err:
                await session.get_prompt("session_start", {"project_path": str(bare)})
            assert f'n2n_update_context with projectPath and confirmNewProjectRoot="{bare}"' in err.value.message

    anyio.run(main)


@pytest.mark.parametrize("name,args,says", [
    ("session_start", {"budget": "500"}, "unknown argument 'budget'; did you mean 'token_budget'?"),
    ("session_start", {"token_budget": "lots"}, "token_budget: must be a whole number"),
    ("session_start", {"token_budget": "-5"}, "token_budget: must be a whole number"),
    ("session_start", {"token_budget": str(BUDGET_MAX + 1)}, f"token_budget: {BUDGET_MAX + 1} is outside"),
    ("session_start", {"token_budget": "1e3"}, "token_budget: must be a whole number"),
    ("session_start", {"token_budget": "²"}, "token_budget: must be a whole number"),
    ("session_start", {"token_budget": "9" * 5000}, "token_budget: must be a whole number"),
    ("task_end", {"query": "x"}, "unknown argument 'query'"),
    ("session_begin", {}, "no prompt named 'session_begin'; did you mean 'session_start'?"),
])
def test_prompt_arguments_refused(tmp_path, name, args, says):
    async def main():
        async with mcp_session(tmp_path / "home") as session:
            with pytest.raises(MCPError) as err:
                await session.get_prompt(name, args)
            assert err.value.code == -32602 and says in err.value.message

    anyio.run(main)


def test_non_string_argument_refused_on_the_wire(tmp_path):
    """A client that sends a number where the protocol says text gets -32602 naming the argument."""
    lines = [{"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
             {"jsonrpc": "2.0", "method": "notifications/initialized"},
             {"jsonrpc": "2.0", "id": 2, "method": "prompts/get",
              "params": {"name": "session_start", "arguments": {"token_budget": 500}}}]
    proc = subprocess.run([sys.executable, "-m", "memloci", "serve"], input="".join(json.dumps(m) + "\n" for m in lines),
                          capture_output=True, text=True, env=server_env(tmp_path / "home"), timeout=60)
    replies = {r.get("id"): r for r in map(json.loads, proc.stdout.splitlines())}
    error = replies[2]["error"]
    assert error["code"] == -32602 and "token_budget" in json.dumps(error)


@pytest.mark.parametrize("groups,expected", [
    ("graph", {"session_start", "before_compaction"}),
    ("memory", {"session_start", "before_compaction"}),
    ("documents", {"session_start"}),
    ("strict,project", {"session_start", "before_compaction", "task_end"}),
    ("n2n", {"session_start", "before_compaction", "task_end"}),
])
def test_prompts_name_only_exposed_tools(tmp_path, groups, expected):
    async def main():
        async with mcp_session(tmp_path / "home", "--tools", groups) as session:
            exposed = {t.name for t in (await session.list_tools()).tools}
            prompts = {p.name: p for p in (await session.list_prompts()).prompts}
            assert set(prompts) == expected
            for name, prompt in prompts.items():
                assert tools_named(prompt.description or "") <= exposed
                text = text_of(await session.get_prompt(name, {}))
                assert tools_named(text) <= exposed, (name, tools_named(text) - exposed)
                assert ("project_path" in [a.name for a in prompt.arguments or []]) == \
                    ("project" in groups or "n2n" in groups)

    anyio.run(main)


def run_node(tmp_path: Path, sdk: str, calls: list[dict]) -> dict:
    require_node()
    spec = {"sdk": sdk, "command": sys.executable, "args": ["-m", "memloci", "serve"],
            "env": server_env(tmp_path / "home"), "calls": calls}
    proc = subprocess.run(["node", str(HERE / "prompts.mjs")], input=json.dumps(spec), capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.full  # the TypeScript client
@pytest.mark.parametrize("sdk", ["1", "2"])
def test_typescript_client(tmp_path, sdk):
    async def seed():
        async with mcp_session(tmp_path / "home") as session:
            await fill(session, n=5)

    anyio.run(seed)
    out = run_node(tmp_path, sdk, [
        {"prompt": "session_start", "args": {"query": TOPIC, "token_budget": "400"}},
        {"prompt": "session_start", "args": {}},
        {"prompt": "before_compaction", "args": {}},
        {"prompt": "task_end", "args": {}},
        {"prompt": "session_start", "args": {"token_budget": "many"}},
        {"prompt": "session_start", "args": {"bogus": "1"}},
        {"prompt": "no_such_prompt", "args": {}},
    ])
    assert out["list_error"] is None
    assert {p["name"] for p in out["prompts"]} == {"session_start", "before_compaction", "task_end"}
    ok, errors = out["results"][:4], out["results"][4:]
    for entry in ok:
        assert not entry["threw"], entry
        [message] = entry["messages"]
        assert message["role"] == "user" and message["content"]["type"] == "text"
    assert len(ok[0]["messages"][0]["content"]["text"]) <= 400 * CHARS_PER_TOKEN
    assert "Move sessions to Redis" in ok[1]["messages"][0]["content"]["text"]
    for entry, says in zip(errors, ("token_budget", "unknown argument 'bogus'", "no prompt named")):
        assert entry["threw"] and entry["error"]["code"] == -32602 and says in entry["error"]["message"], entry
