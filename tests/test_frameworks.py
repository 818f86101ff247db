"""Every tool of every tool group through the agent frameworks people call MCP tools with: each
framework's own converter (strict where it offers one) turns every tool into its function format
without an error, and each tool, called through the framework's tool object with what a
strict-mode model sends (every property, `null` for the ones it does not mean), succeeds.

openai-agents (MCPServerStdio, MCPUtil.to_function_tool with strict schemas), pydantic-ai
(MCPToolset tool definitions, OpenAIJsonSchemaTransformer strict), langchain-mcp-adapters
(load_mcp_tools, then langchain-core's convert_to_openai_tool(strict=True); on MCP SDK 1.x in its own
environment and process, tests/frameworks/langchain_client.py) and google-genai
(its MCP path: McpToGenAiToolAdapter, mcp_to_gemini_tool). No model is involved: the arguments
are built from each converted schema and a table of real values for what a call needs.
Each test runs `memloci serve` processes over stdio, so the file is in the full tier."""

from __future__ import annotations

import copy
import json
import logging
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream
from conftest import process_session, server_env

from memloci.core.model import content_hash

MEMORY = "We chose OAuth with PKCE for the mobile app"

# What a call needs, tool by tool, in the order the calls are made (each config's tools share one
# fresh server, so a call may rely on the ones before it). Everything not named here is sent as null.
# Each value is made from the project root the test made; `check` looks at the reply's text (as the
# framework gives it, maybe JSON-escaped again) where that is cheap.
Call = tuple[str, Callable[[str], dict[str, Any]], Callable[[str], bool] | None]


def default_calls() -> list[Call]:
    """Two libraries are mounted, so a call names one (`library`), or a project."""
    def in_a(values: Callable[[str], dict[str, Any]]) -> Callable[[str], dict[str, Any]]:
        return lambda p: (lambda v: v if "project_path" in v else {"library": "a", **v})(values(p))

    h = content_hash(MEMORY)
    return [(name, values if name == "list_libraries" else in_a(values), check) for name, values, check in [
        ("create_entities", lambda p: {"entities": [{"name": "Alice", "entityType": "person",
                                                     "observations": ["Works at Acme"]},
                                                    {"name": "Acme", "entityType": "organization"}]}, None),
        ("create_relations", lambda p: {"relations": [{"from": "Alice", "to": "Acme", "relationType": "works_at"}]},
         None),
        ("add_observations", lambda p: {"observations": [{"entityName": "Alice", "contents": ["Prefers email"]}]},
         None),
        ("search_nodes", lambda p: {"query": "alice"}, lambda t: "Prefers email" in t),
        ("open_nodes", lambda p: {"names": ["Alice"]}, lambda t: "works_at" in t),
        ("read_graph", lambda p: {}, lambda t: "Acme" in t),
        ("delete_observations", lambda p: {"deletions": [{"entityName": "Alice", "observations": ["Prefers email"]}]},
         None),
        ("delete_relations", lambda p: {"relations": [{"from": "Alice", "to": "Acme", "relationType": "works_at"}]},
         None),
        ("delete_entities", lambda p: {"entityNames": ["Acme"]}, None),
        ("store_memory", lambda p: {"content": MEMORY, "tags": ["auth"], "metadata": '{"source": "chat"}'}, None),
        ("retrieve_memory", lambda p: {"query": "OAuth mobile"}, lambda t: "PKCE" in t),
        ("search_by_tag", lambda p: {"tags": ["auth"]}, lambda t: "PKCE" in t),
        ("list_memories", lambda p: {}, lambda t: "chat" in t),
        ("update_memory", lambda p: {"content_hash": h, "importance": "high"}, None),
        ("check_database_health", lambda p: {}, None),
        ("delete_memory", lambda p: {"content_hash": h}, lambda t: re.search(r"deleted\W+1", t) is not None),
        ("list_libraries", lambda p: {}, lambda t: "a.db" in t),
        ("add_entities", lambda p: {"entities": [{"name": "python-project", "content": "## Notes\n- uses uv\n"},
                                                 {"name": "pyproj"}]}, None),
        ("list_entities", lambda p: {}, lambda t: "python-project" in t),
        ("read_entities", lambda p: {"entity_names": ["python-project"]}, lambda t: "uses uv" in t),
        ("get_entities_toc", lambda p: {"entity_names": ["python-project"]}, lambda t: "Notes" in t),
        ("read_entities_sections", lambda p: {"entity_names": ["python-project"], "section_globs": ["Notes"]},
         lambda t: "uses uv" in t),
        ("add_entity_content", lambda p: {"entity_name": "python-project", "in_section": "Notes",
                                          "new_content": "- deploys on Fridays"}, None),
        ("replace_entity_content", lambda p: {"entity_name": "python-project", "old_content": "uses uv",
                                              "new_content": "uses pip"}, None),
        ("delete_entity_content", lambda p: {"entity_name": "python-project",
                                             "content_to_delete": "- deploys on Fridays"}, None),
        ("replace_entity_section", lambda p: {"entity_name": "python-project", "old_heading": "Notes",
                                              "new_heading": "Notes", "new_body_content": "Rewritten."}, None),
        ("merge_entities", lambda p: {"source_names": ["pyproj"], "target_name": "python-project"}, None),
        ("rename_entity", lambda p: {"old_name": "python-project", "new_name": "py-project"}, None),
        ("find_relations", lambda p: {}, None),
        ("read_manual", lambda p: {}, None),
        ("add_manual_section", lambda p: {"toc": "Conventions", "new_content": "- names are kebab-case"}, None),
        ("update_manual_section", lambda p: {"toc": "Conventions", "old_content": "kebab", "new_content": "snake"},
         None),
        ("delete_manual_section", lambda p: {"toc": "Conventions", "deleting_content": "- names are snake-case"},
         None),
        ("update_context", lambda p: {"active_task": "Move sessions to Redis", "project_path": p}, None),
        ("get_graph_summary", lambda p: {"project_path": p}, None),
        ("export_markdown", lambda p: {"project_path": p}, None),
    ]]


def strict_calls() -> list[Call]:
    return [
        ("create_entities", lambda p: {"entities": [{"name": "user-john", "entity_type": "person",
                                                     "observations": ["prefers tea"]},
                                                    {"name": "python-project", "entity_type": "project"}]}, None),
        ("add_observation", lambda p: {"entity": "user-john", "observation": "runs on Mondays"}, None),
        ("create_relation", lambda p: {"from_entity": "user-john", "to_entity": "python-project",
                                       "relation_type": "uses"}, None),
        ("get_entity", lambda p: {"entity_name": "user-john"}, lambda t: "runs on Mondays" in t),
        ("search_memory", lambda p: {"query": "tea"}, lambda t: "user-john" in t),
        ("get_graph", lambda p: {}, lambda t: "python-project" in t),
        ("delete_relation", lambda p: {"from_entity": "user-john", "to_entity": "python-project"}, None),
        ("delete_entities", lambda p: {"names": ["python-project"]}, None),
        ("flush_memory", lambda p: {}, None),
    ]


def n2n_calls() -> list[Call]:
    def at(args: dict[str, Any]) -> Callable[[str], dict[str, Any]]:
        return lambda p: {"projectPath": p, **args}

    return [(name, at(args), check) for name, args, check in [
        ("n2n_add_entities", {"entities": [{"name": "auth", "entityType": "module", "observations": ["uses JWT"]},
                                           {"name": "api", "entityType": "module"}]}, None),
        ("n2n_add_observations", {"observations": [{"entityName": "auth", "contents": ["rotates keys"]}]}, None),
        ("n2n_create_relations", {"relations": [{"from": "api", "to": "auth", "relationType": "uses"}]}, None),
        ("n2n_read_graph", {}, lambda t: "rotates keys" in t),
        ("n2n_search", {"query": "jwt"}, lambda t: "auth" in t),
        ("n2n_open_nodes", {"names": ["auth"]}, lambda t: "uses" in t),
        ("n2n_get_graph_summary", {}, lambda t: "api" in t),
        ("n2n_update_context", {"activeTask": "Rotate keys"}, None),
        ("n2n_export_markdown", {}, None),
        ("n2n_delete_observations", {"deletions": [{"entityName": "auth", "observations": ["rotates keys"]}]}, None),
        ("n2n_delete_relations", {"relations": [{"from": "api", "to": "auth", "relationType": "uses"}]}, None),
        ("n2n_delete_entities", {"entityNames": ["api"]}, None),
    ]]


MAINTENANCE_SEED = [("Deploys go out on Fridays.", ["ops", "temporary"]), ("deploys go out on fridays", ["release"]),
                    ("Scratch: order pizza.", ["temporary"])]


def seed_maintenance(path: Path) -> None:
    """The library the maintenance calls work on: a duplicate pair and tagged scratch notes."""
    from memloci.app.registry import LibraryRegistry
    from memloci.app.specs import parse_library_specs
    from memloci.search.embedder import EmbedderHandle
    from memloci.service.facade import MemoryService

    service = MemoryService(LibraryRegistry(parse_library_specs(f"main:{path}")), EmbedderHandle("none"))
    try:
        for text, tags in MAINTENANCE_SEED:
            service.store_memory(text, tags=tags)
    finally:
        service.close()


def maintenance_calls() -> list[Call]:
    first = content_hash(MAINTENANCE_SEED[0][0])
    return [
        ("list_tags", lambda p: {}, lambda t: "temporary" in t),
        ("knowledge_analysis", lambda p: {}, lambda t: "exact_duplicates" in t),
        ("knowledge_export", lambda p: {"format": "text", "filters": '{"tags": ["ops"]}'}, lambda t: "Fridays" in t),
        ("cleanup_duplicates", lambda p: {"dry_run": True}, lambda t: "preview" in t),
        ("list_previews", lambda p: {}, lambda t: "cleanup_duplicates" in t),
        ("execute_preview", lambda p: {"preview_id": 1}, lambda t: "change #" in t),
        ("update_memory_metadata", lambda p: {"content_hash": first, "updates": '{"memory_type": "fact"}'}, None),
        ("memory_cleanup", lambda p: {"older_than": "1 year"}, lambda t: "preview" in t),
        ("delete_by_tag", lambda p: {"tags": ["temporary"], "dry_run": True}, lambda t: "preview" in t),
        ("delete_before_date", lambda p: {"before_date": "2000-01-01"}, lambda t: "nothing to change" in t),
        ("delete_by_timeframe", lambda p: {"start_date": "2000-01-01", "end_date": "2001-01-01"},
         lambda t: "nothing to change" in t),
        ("archive_memories", lambda p: {}, lambda t: "preview" in t),
        ("consolidate", lambda p: {"time_horizon": "monthly"}, lambda t: "report" in t),
        ("unarchive_memories", lambda p: {"content_hashes": [first]}, None),
        ("garbage_collect_relations", lambda p: {}, lambda t: "nothing to change" in t),
    ]


def workspace_calls() -> list[Call]:
    sync = {"from_agents": "windsurf", "to_agents": "gemini"}
    return [
        ("list_rules", lambda p: {"project": p}, lambda t: "Package manager" in t),
        ("preview_rules_sync", lambda p: {"project": p, **sync}, lambda t: "dry_run" in t),
        ("sync_rules", lambda p: {"project": p, **sync}, lambda t: "dry_run" in t),
        ("remember_rules", lambda p: {"project": p}, lambda t: "stored" in t),
    ]


def seed_rules(root: Path) -> None:
    """The workspace calls' project: a Claude Code rule and a Windsurf one."""
    for rel, text in {"CLAUDE.md": "## Package manager\n\nUse pnpm.\n",
                      ".windsurf/rules/style.md": "---\ntrigger: always_on\n---\n# Style\n\nIndent with 2.\n"}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


# Each --tools value and its calls: every tool of every group (the default groups with two
# libraries, so `library` is advertised and sent as null too).
CONFIGS = {"default": ([], default_calls), "strict": (["--tools", "strict"], strict_calls),
           "n2n": (["--tools", "n2n"], n2n_calls),
           "maintenance": (["--tools", "maintenance"], maintenance_calls),
           "workspace": (["--tools", "workspace"], workspace_calls)}
FRAMEWORKS = ["openai-agents", "pydantic-ai", "langchain", "google-genai"]


def strict_arguments(schema: dict[str, Any], given: Any) -> Any:
    """What a strict-mode model sends: every property of every object in `schema`, the given
    value where there is one, else null."""
    branches = [schema, *schema.get("anyOf", ())]
    obj = next((b for b in branches if "properties" in b), None)
    if isinstance(given, dict) and obj is not None:
        return {name: strict_arguments(prop, given[name]) if name in given else None
                for name, prop in obj["properties"].items()}
    items = next((b["items"] for b in branches if isinstance(b.get("items"), dict)), None)
    if isinstance(given, list) and items is not None:
        return [strict_arguments(items, v) for v in given]
    return given


def is_error(result: Any) -> bool:
    """A CallToolResult's isError, in either MCP SDK generation's spelling."""
    return bool(result.is_error if hasattr(result, "is_error") else result.isError)


def nulls_everywhere(arguments: dict[str, Any]) -> int:
    def count(v: Any) -> int:
        if v is None:
            return 1
        if isinstance(v, dict):
            return sum(count(x) for x in v.values())
        if isinstance(v, list):
            return sum(count(x) for x in v)
        return 0
    return count(arguments)


def command(home: Path, config: str, tmp: Path) -> tuple[list[str], dict[str, str]]:
    args = ["-m", "memloci", "serve", *CONFIGS[config][0]]
    if config == "default":
        args += ["--libraries", f"a:{tmp / 'a.db'},b:{tmp / 'b'}"]
    if config == "maintenance":
        if not (tmp / "m.db").exists():
            seed_maintenance(tmp / "m.db")
        args += ["--libraries", f"main:{tmp / 'm.db'}"]
    if config == "workspace":
        seed_rules(tmp / "app")
    return args, server_env(home)


def project_root(tmp: Path) -> str:
    root = tmp / "app"
    (root / ".mcp").mkdir(parents=True)  # an established project: no confirmation handshake
    return str(root)


class Converted:
    """One framework's view of a server: each tool's schema as the framework converted it, and
    a way to call the tool through the framework's tool object (returning the reply's text;
    raising if the server said isError)."""

    def __init__(self) -> None:
        self.schemas: dict[str, dict[str, Any]] = {}
        self.call: Callable[[str, dict[str, Any]], Any] = lambda name, args: None


async def run_calls(converted: Converted, listed: set[str], calls: list[Call], project: str) -> None:
    named = [name for name, _, _ in calls]
    assert sorted(named) == sorted(listed), f"the table must call every listed tool once: {set(named) ^ listed}"
    sent_nulls = 0
    for name, values, check in calls:
        schema = converted.schemas[name]
        arguments = strict_arguments(schema, values(project))
        if schema.get("required") and set(schema["required"]) == set(schema.get("properties", {})):
            jsonschema.validate(arguments, schema)  # what the converted strict schema lets a model send
        sent_nulls += nulls_everywhere(arguments)
        text = await converted.call(name, arguments)
        assert check is None or check(text), f"{name}: {text[:600]}"
    assert sent_nulls, "the calls send nulls for what they do not mean"


# -- the frameworks ------------------------------------------------------------------------


async def through_openai_agents(home: Path, config: str, tmp: Path, caplog: Any) -> None:
    from agents.mcp import MCPServerStdio, MCPUtil
    from agents.tool_context import ToolContext

    args, env = command(home, config, tmp)
    server = MCPServerStdio(params={"command": sys.executable, "args": args, "env": env},
                            client_session_timeout_seconds=60)
    errors: list[str] = []
    call_tool = server.call_tool

    async def recorded(name: str, arguments: dict[str, Any] | None, **kwargs: Any) -> Any:
        result = await call_tool(name, arguments, **kwargs)
        if is_error(result):
            errors.append(f"{name}: {result.content[0].text if result.content else ''}")
        return result

    server.call_tool = recorded  # type: ignore[method-assign]  # watches the replies; the call is the SDK's
    async with server:
        tools = await server.list_tools()
        with caplog.at_level(logging.DEBUG, logger="openai.agents"):
            functions = {t.name: MCPUtil.to_function_tool(t, server, convert_schemas_to_strict=True) for t in tools}
        assert "Error converting" not in caplog.text, caplog.text
        not_strict = [name for name, f in functions.items() if not f.strict_json_schema]
        assert not not_strict, f"not converted to strict mode: {not_strict}"
        converted = Converted()
        converted.schemas = {name: f.params_json_schema for name, f in functions.items()}

        async def call(name: str, arguments: dict[str, Any]) -> str:
            payload = json.dumps(arguments)
            before = len(errors)
            out = await functions[name].on_invoke_tool(
                ToolContext(context=None, tool_name=name, tool_call_id="call-1", tool_arguments=payload), payload)
            assert len(errors) == before, f"{name} {payload}: {errors[-1]}"
            return json.dumps(out) if not isinstance(out, str) else out

        converted.call = call
        await run_calls(converted, set(functions), CONFIGS[config][1](), project_root(tmp))


async def through_pydantic_ai(home: Path, config: str, tmp: Path) -> None:
    from fastmcp.client.transports import StdioTransport
    from pydantic_ai import RunContext
    from pydantic_ai.mcp import MCPToolset
    from pydantic_ai.models.test import TestModel
    from pydantic_ai.profiles.openai import OpenAIJsonSchemaTransformer
    from pydantic_ai.usage import RunUsage

    args, env = command(home, config, tmp)
    toolset = MCPToolset(StdioTransport(command=sys.executable, args=args, env=env), tool_error_behavior="error",
                         init_timeout=120, read_timeout=120)
    async with toolset:
        ctx = RunContext(deps=None, model=TestModel(), usage=RunUsage())
        tools = await toolset.get_tools(ctx)
        converted = Converted()
        for name, tool in tools.items():
            schema = copy.deepcopy(tool.tool_def.parameters_json_schema)
            converted.schemas[name] = OpenAIJsonSchemaTransformer(schema, strict=True).walk()

        async def call(name: str, arguments: dict[str, Any]) -> str:
            tool = tools[name]
            validated = tool.args_validator.validate_python(arguments)
            return json.dumps(await toolset.call_tool(name, validated, ctx, tool), default=str)

        converted.call = call
        await run_calls(converted, set(tools), CONFIGS[config][1](), project_root(tmp))


# The LangChain client runs in its own environment: langchain-mcp-adapters has no release for the
# MCP SDK 2.x memloci runs on, so it runs as LangChain users run it, on SDK 1.x, in another process
# (tests/frameworks/langchain_client.py, with .venv-langchain made by `make test-full` from
# tests/frameworks/requirements-langchain.txt).
ROOT = Path(__file__).resolve().parent.parent
LANGCHAIN_CLIENT = ROOT / "tests" / "frameworks" / "langchain_client.py"
LANGCHAIN_VENV = ROOT / ".venv-langchain"


def require_langchain_venv() -> Path:
    """The LangChain environment's python; skipped when it is missing (failed under CI=true)."""
    python = LANGCHAIN_VENV / "bin" / "python"
    if (LANGCHAIN_VENV / ".installed").exists() and python.exists():
        return python
    reason = (f"the LangChain client's environment {LANGCHAIN_VENV} is not installed (run `make test-full`, "
              "or `make .venv-langchain/.installed`)")
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI must run the LangChain framework tests: {reason}")
    pytest.skip(reason)


async def through_langchain(home: Path, config: str, tmp: Path) -> None:
    python = require_langchain_venv()
    args, env = command(home, config, tmp)
    server = json.dumps({"command": sys.executable, "args": args, "env": env})
    with open(tmp / "langchain-client.stderr", "wb") as stderr:
        async with await anyio.open_process([str(python), str(LANGCHAIN_CLIENT), server],
                                            stderr=stderr) as client:
            assert client.stdin is not None and client.stdout is not None
            lines = BufferedByteReceiveStream(client.stdout)

            async def receive() -> dict[str, Any]:
                try:
                    with anyio.fail_after(300):  # a guard against a hang, not a measure of speed
                        return json.loads(await lines.receive_until(b"\n", 1 << 30))
                except (anyio.EndOfStream, anyio.IncompleteRead, TimeoutError) as exc:
                    log = (tmp / "langchain-client.stderr").read_text(errors="replace")
                    raise AssertionError(f"the LangChain client stopped ({exc!r}): {log[-3000:]}") from exc

            loaded = await receive()
            assert not loaded["errors"], f"LangChain could not convert: {loaded['errors']}"
            functions: dict[str, dict[str, Any]] = loaded["functions"]
            not_strict = [name for name, function in functions.items() if function.get("strict") is not True]
            assert not not_strict, f"not converted to strict mode: {not_strict}"
            converted = Converted()
            converted.schemas = {name: function["parameters"] for name, function in functions.items()}

            async def call(name: str, arguments: dict[str, Any]) -> str:
                await client.stdin.send((json.dumps({"name": name, "arguments": arguments}) + "\n").encode())
                out = await receive()
                assert out["ok"], f"{name} {json.dumps(arguments)}: {out['error']}"
                return str(out["text"])

            converted.call = call
            await run_calls(converted, set(functions), CONFIGS[config][1](), project_root(tmp))
            await client.stdin.aclose()
            assert await client.wait() == 0, (tmp / "langchain-client.stderr").read_text(errors="replace")[-3000:]


async def through_google_genai(home: Path, config: str, tmp: Path) -> None:
    from google.genai import types
    from google.genai._adapters import McpToGenAiToolAdapter

    args, _ = command(home, config, tmp)
    async with process_session(home, *args[3:]) as session:
        listed = await session.list_tools()
        adapter = McpToGenAiToolAdapter(session, listed)
        declarations = {d.name: d for tool in adapter.tools for d in tool.function_declarations or ()}
        converted = Converted()
        for tool in listed.tools:
            parameters = declarations[tool.name].parameters
            assert parameters is not None and parameters.properties, tool.name
            schema = tool.input_schema
            optional = set(schema["properties"]) - set(schema.get("required", ()))
            not_nullable = [p for p in optional if not parameters.properties[p].nullable]
            assert not not_nullable, f"{tool.name}: optional but not nullable for Gemini: {not_nullable}"
            converted.schemas[tool.name] = schema

        async def call(name: str, arguments: dict[str, Any]) -> str:
            result = await adapter.call_tool(types.FunctionCall(name=name, args=arguments))
            text = result.content[0].text if result.content else ""
            assert not is_error(result), f"{name} {arguments}: {text}"
            return text

        converted.call = call
        await run_calls(converted, set(declarations), CONFIGS[config][1](), project_root(tmp))


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("config", list(CONFIGS))
def test_every_tool_converts_and_takes_a_strict_models_call(framework, config, home, tmp_path, caplog):
    async def main() -> None:
        if framework == "openai-agents":
            await through_openai_agents(home, config, tmp_path, caplog)
        elif framework == "pydantic-ai":
            await through_pydantic_ai(home, config, tmp_path)
        elif framework == "langchain":
            await through_langchain(home, config, tmp_path)
        else:
            await through_google_genai(home, config, tmp_path)

    anyio.run(main)
