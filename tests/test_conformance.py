"""Conformance: every tool of every tool group, on its success and its error path, through
clients nobody here wrote: the TypeScript MCP SDK 1.x and its 2.x client (a Node script,
tests/conformance/client.mjs), the Python MCP SDK, and the MCP Inspector CLI.

The TypeScript SDK 1.x client checks every structuredContent against the tool's output schema
and throws (-32602) when it does not match, even on an error reply; the other clients do so
only on success replies, so the same rule is checked here for every reply they got. The table of
calls is tests/conformance/calls.py. Each scenario runs on one server process per client and
transport: over stdio the client starts it; over streamable HTTP it is a real `memloci serve
--transport http` on a free loopback port, reached with a bearer token from `memloci token
create` holding every library at admin level (so every tool is listed), and stopped with SIGTERM.
The Python client also runs each scenario on the SDK's in-memory transport, against the server
`memloci serve` builds, in this process (conftest.mcp_session): that pass is in `make test`; the
others, a process each, are in `make test-full` (marked `full`).

Every scenario but n2n runs twice: with `main` a SQLite file and `notes` a Markdown folder, and
(the `pg-` scenarios) with both in a PostgreSQL database of their own on the session's server
(tests/pg.py); every reply is judged the same on both engines.

Without node or the npm packages (`make test` installs them) the Node-driven tests are
skipped with the reason; under CI=true that is a failure, since CI has npm.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import pytest
from conformance.calls import PG_REFUSAL, SCENARIOS, Scenario, fill
from conformance.databases import fresh_database
from conftest import mcp_session, server_env
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError

from memloci.http.loopback import create_token, http_session, loopback_server

HERE = Path(__file__).parent / "conformance"
NODE_MODULES = HERE / "node_modules"
# What `npx @modelcontextprotocol/inspector --cli` runs (inspector 1.x bundles SDK 1.32).
INSPECTOR = NODE_MODULES / "@modelcontextprotocol" / "inspector" / "cli" / "build" / "cli.js"
TRANSPORTS = ("stdio", "http")  # http: streamable HTTP at http://127.0.0.1:PORT/mcp, with a token
MEMORY = "memory"  # the Python client only: the SDK's in-memory transport to a server in this process
HTTP_SCOPES = ["*:admin"]  # every library, every tool: the table calls them all
CLIENTS = ("typescript", "typescript-v2", "python")  # -v2: the 2.x client, on newer protocol versions


def transports(client: str) -> tuple[str, ...]:
    return (MEMORY, *TRANSPORTS) if client == "python" else TRANSPORTS


def tier(client: str, transport: str) -> tuple[pytest.MarkDecorator, ...]:
    """The Python client on the in-memory transport is in `make test`; every pass that starts a
    process (a server, a Node client) is in `make test-full` only."""
    return () if (client, transport) == ("python", MEMORY) else (pytest.mark.full,)


def node_missing() -> str | None:
    """Why the Node-driven tests cannot run here, or None when they can."""
    if shutil.which("node") is None:
        return "node is not installed"
    wanted = json.loads((HERE / "package.json").read_text())["dependencies"]
    missing = [name for name in wanted if not (NODE_MODULES / name / "package.json").exists()]
    if missing:
        return f"npm packages {', '.join(missing)} are not installed in {HERE} (run `make test`, or `npm ci` there)"
    return None


def require_node() -> None:
    reason = node_missing()
    if reason is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI must run the TypeScript conformance suite: {reason}")
    print(f"skipping the TypeScript conformance suite: {reason}")
    pytest.skip(reason)


# ----- running a scenario -------------------------------------------------------------------

RULE_FILES = {"CLAUDE.md": "## Package manager\n\nUse pnpm.\n\n## Generated client\n\nNever edit it.\n",
              "AGENTS.md": "## Generated client\n\nRegenerate it with make.\n",
              ".cursor/rules/pnpm.mdc": "---\ndescription: Package manager\nalwaysApply: true\n---\nUse pnpm.\n",
              ".windsurf/rules/style.md": "---\ntrigger: always_on\n---\n# Style\n\nIndent with 2 spaces.\n"}


def make_places(root: Path) -> dict[str, Path]:
    """A git repository without project memory, a Markdown library folder, a home, a project
    holding coding agents' rules."""
    root.mkdir(parents=True, exist_ok=True)
    repo = root / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True, capture_output=True)
    (repo / "main.py").write_text("print('hi')\n")
    rules = root / "rules"  # the workspace group's project: coding agents' rules (conformance/calls.py)
    for rel, text in RULE_FILES.items():
        (rules / rel).parent.mkdir(parents=True, exist_ok=True)
        (rules / rel).write_text(text)
    return {"tmp": root, "repo": repo, "notes": root / "notes", "home": root / "home", "rules": rules}


def server_command(scenario: Scenario, places: dict[str, Path]) -> tuple[str, list[str], dict[str, str]]:
    return sys.executable, ["-m", "memloci", *scenario.serve_args(places)], server_env(places["home"])


_TOKEN: dict[str, Any] = {}
_TOKEN_LOCK = threading.Lock()  # the runs start from a thread pool


def token_for(home: Path) -> str:
    """A token holding HTTP_SCOPES, valid in `home`. `memloci token create` makes it once per test
    run, in a home of its own; each server's home gets a copy of that token file (only hashes),
    which saves a process start per server on a busy 2-core machine."""
    with _TOKEN_LOCK:
        if not _TOKEN:
            made = Path(tempfile.mkdtemp(prefix="memloci-conformance-token-"))
            atexit.register(shutil.rmtree, made, True)
            _TOKEN.update(token=create_token(server_env(made), "conformance", HTTP_SCOPES), file=made / "tokens.json")
    home.mkdir(parents=True, exist_ok=True)
    shutil.copy2(_TOKEN["file"], home / "tokens.json")
    return _TOKEN["token"]


@contextmanager
def serving(scenario: Scenario, places: dict[str, Path], transport: str):
    """Where a client reaches the scenario's server: for stdio the command it starts (the client
    owns the process), for http the URL and headers of a server started here for the run, for
    memory the home and the flags of a server this process builds."""
    command, args, env = server_command(scenario, places)
    if transport == MEMORY:
        yield {"home": places["home"], "flags": args[3:]}  # args[:3] is `-m memloci serve`
        return
    if transport == "stdio":
        yield {"command": command, "args": args, "env": env, "cwd": str(places["tmp"])}
        return
    assert transport == "http", f"transport {transport}: unknown"
    headers = {"Authorization": f"Bearer {token_for(places['home'])}"}
    with loopback_server(args[2:], env, log=places["tmp"] / "server.log", headers=headers,
                         cwd=places["tmp"]) as endpoint:  # args[:2] is `-m memloci`
        yield {"url": endpoint.url, "headers": endpoint.headers}


@asynccontextmanager
async def python_session(where: dict[str, Any], **session_kwargs: Any):
    """A Python SDK ClientSession on either transport, initialized (`session.init_result`)."""
    if "url" in where:
        async with http_session(where["url"], where["headers"], **session_kwargs) as session:
            yield session
        return
    if "flags" in where:
        async with mcp_session(where["home"], *where["flags"], client_options=session_kwargs) as session:
            session.init_result = session.initialize_result
            yield session
        return
    params = StdioServerParameters(command=where["command"], args=where["args"], env=where["env"], cwd=where["cwd"])
    async with stdio_client(params) as (read, write), ClientSession(read, write, **session_kwargs) as session:
        session.init_result = await session.initialize()
        yield session


def run_typescript(scenario: Scenario, places: dict[str, Path], transport: str, sdk: str = "1") -> dict[str, Any]:
    spec = {"sdk": sdk, "transport": transport,
            "calls": [{"tool": s.tool, "args": fill(s.args, places)} for s in scenario.steps]}
    with serving(scenario, places, transport) as where:
        proc = subprocess.run(["node", str(HERE / "client.mjs")], input=json.dumps({**spec, **where}),
                              capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, f"the TypeScript client failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}"
    return json.loads(proc.stdout)


def run_python(scenario: Scenario, places: dict[str, Path], transport: str) -> dict[str, Any]:
    """The same calls through the Python SDK's ClientSession, recorded in the Node script's shape."""
    out: dict[str, Any] = {"instructions": None, "tools": None, "list_error": None, "results": []}

    async def main(where: dict[str, Any]):
        async with python_session(where) as session:
            out["instructions"] = session.init_result.instructions
            try:
                listed = await session.list_tools()
                out["tools"] = [t.model_dump(by_alias=True, exclude_none=True) for t in listed.tools]
            except Exception as exc:  # recorded, judged by the tests
                out["list_error"] = {"code": getattr(exc, "code", None), "message": str(exc)}
            for step in scenario.steps:
                entry = {"tool": step.tool, "threw": False, "error": None, "isError": None, "text": None,
                         "structuredContent": None}
                try:
                    result = await session.call_tool(step.tool, fill(step.args, places))
                    entry["isError"] = bool(result.is_error)
                    entry["text"] = "".join(c.text for c in result.content if getattr(c, "type", "") == "text")
                    entry["structuredContent"] = result.structured_content
                except Exception as exc:
                    entry["threw"] = True
                    code = exc.code if isinstance(exc, MCPError) else None
                    entry["error"] = {"code": code, "message": f"{type(exc).__name__}: {exc}"}
                out["results"].append(entry)

    with serving(scenario, places, transport) as where:
        anyio.run(main, where)
    return out


RUNNERS = {"typescript": run_typescript, "python": run_python,
           "typescript-v2": lambda *a: run_typescript(*a, sdk="2")}


@pytest.fixture(scope="module")
def run(request, tmp_path_factory):
    """run(client, scenario_name, transport): that scenario's record, made once. Every run the
    selected tests need starts at the first request, a few at a time: each is a server process
    and a client that mostly wait on each other."""
    params = [getattr(getattr(item, "callspec", None), "params", {})
              for item in request.session.items if item.module is request.module]
    # In the order the tests ask for them: each test then waits for its own run, not for runs
    # of later tests (pytest-timeout counts the wait, and a busy host makes each run slow).
    wanted = list(dict.fromkeys((p["client"], p["scenario"], p["transport"]) for p in params
                                if {"client", "scenario", "transport"} <= set(p)))
    if node_missing():  # those runs are skipped (or failed under CI) by the tests that ask for them
        wanted = [key for key in wanted if not key[0].startswith("typescript")]
    pool = ThreadPoolExecutor(max_workers=3)
    futures: dict[tuple[str, str, str], Future] = {}
    engine = {s.name: s.engine for s in SCENARIOS}
    postgres: dict[str, Any] = {}  # "url" of the session's server, or "skip": why there is none

    def pg_url() -> str | None:
        """The session's PostgreSQL (started at the first postgres run), or None without one."""
        if not postgres:
            try:
                postgres["url"] = request.getfixturevalue("pg_url")
            except pytest.skip.Exception as exc:  # raised again by the tests that need it
                postgres["skip"] = exc
        return postgres.get("url")

    def start(key: tuple[str, str, str]) -> None:
        client, name, transport = key
        scenario = next(s for s in SCENARIOS if s.name == name)
        places: dict[str, Any] = make_places(tmp_path_factory.mktemp(f"{client}-{name}-{transport}"))
        if scenario.engine == "postgres":
            places["pg"] = fresh_database(pg_url())
        futures[key] = pool.submit(RUNNERS[client], scenario, places, transport)

    def get(client: str, name: str, transport: str) -> dict[str, Any]:
        if client.startswith("typescript"):
            require_node()
        if engine[name] == "postgres" and pg_url() is None:
            raise postgres["skip"]
        if not futures:
            if any(engine[key[1]] == "postgres" for key in wanted) and pg_url() is None:
                wanted[:] = [key for key in wanted if engine[key[1]] != "postgres"]
            for key in wanted:
                start(key)
        if (client, name, transport) not in futures:
            start((client, name, transport))
        return futures[client, name, transport].result()

    yield get
    pool.shutdown(wait=True, cancel_futures=True)


# ----- judging ------------------------------------------------------------------------------

def error_code(text: str) -> str | None:
    """The error code an error reply's text names: `{error: {code}}`, or the strict set's `error_type`."""
    try:
        body = json.loads(text)
    except (TypeError, ValueError):
        return None
    if not isinstance(body, dict):
        return None
    if isinstance(body.get("error"), dict):
        return body["error"].get("code")
    return body.get("error_type")


def schema_failure(tools: list[dict], name: str, structured: Any) -> str | None:
    """What the TypeScript SDK would reject: structuredContent that fails the tool's output schema."""
    tool = next((t for t in tools if t["name"] == name), None)
    if structured is None or tool is None or not tool.get("outputSchema"):
        return None
    validator = jsonschema.Draft202012Validator(tool["outputSchema"])
    error = jsonschema.exceptions.best_match(validator.iter_errors(structured))
    return None if error is None else f"structuredContent fails the output schema: {error.message}"


ALL_TOOLS = {step.tool for s in SCENARIOS for step in s.steps}  # the table covers every tool of every group
TOOL_WORD = re.compile(r"[a-z]+(?:_[a-z]+)+")


def foreign_tools(tools: list[dict], text: str | None) -> list[str]:
    """Tools a reply names that this server does not expose (a hint must name a step that exists)."""
    listed = {t["name"] for t in tools}
    return sorted({w for w in TOOL_WORD.findall(text or "") if w in ALL_TOOLS and w not in listed})


STEP_CASES = [pytest.param(client, transport, s.name, i, id=f"{client}-{transport}-{s.name}-{i:02d}-{step.label}",
                           marks=tier(client, transport))
              for client in CLIENTS for transport in transports(client) for s in SCENARIOS
              if client in (s.clients or CLIENTS) for i, step in enumerate(s.steps)]


@pytest.mark.parametrize("client,transport,scenario,index", STEP_CASES)
def test_call(run, client, transport, scenario, index):
    record = run(client, scenario, transport)
    step = next(s for s in SCENARIOS if s.name == scenario).steps[index]
    got = record["results"][index]
    where = f"{step.tool}({json.dumps(step.args)[:300]})"
    assert not got["threw"], f"{where}: the {client} client threw: {got['error']}"
    problem = schema_failure(record["tools"] or [], step.tool, got["structuredContent"])
    assert problem is None, f"{where}: {problem}"
    foreign = foreign_tools(record["tools"] or [], got["text"])
    assert not foreign, f"{where}: the reply names tools this server does not expose: {foreign}: {got['text'][:600]}"
    assert PG_REFUSAL not in (got["text"] or ""), f"{where}: the engine refused it: {got['text'][:600]}"
    missing = [w for w in step.says if w not in (got["text"] or "")]
    assert not missing, f"{where}: the reply should name {missing}: {(got['text'] or '')[:600]}"
    present = [w for w in step.never if w in (got["text"] or "")]
    assert not present, f"{where}: the reply should not contain {present}: {got['text'][:600]}"
    if step.expect == "ok":
        assert got["isError"] is False, f"{where}: expected success, got an error: {got['text'][:600]}"
        return
    assert got["isError"] is True, f"{where}: expected an error ({step.why}), got success: {got['text'][:600]}"
    code = error_code(got["text"])
    assert code, f"{where}: the error text should be JSON naming an error code: {got['text'][:600]}"
    if step.code:
        assert code == step.code, f"{where}: expected {step.code}, got {code}: {got['text'][:600]}"


GROUP_CASES = [pytest.param(client, transport, s.name, id=f"{client}-{transport}-{s.name}", marks=tier(client, transport))
               for client in CLIENTS for transport in transports(client) for s in SCENARIOS
               if client in (s.clients or CLIENTS)]


@pytest.mark.parametrize("client,transport,scenario", GROUP_CASES)
def test_tools_list(run, client, transport, scenario):
    """tools/list succeeds, and every input schema is inline, with no boolean additionalProperties
    (google-genai reads one as a schema and fails; the server refuses unknown arguments itself)."""
    record = run(client, scenario, transport)
    assert record["list_error"] is None, f"tools/list failed: {record['list_error']}"
    problems = []
    for tool in record["tools"]:
        schema = tool["inputSchema"]
        text = json.dumps(schema)
        if '"additionalProperties"' in text:
            problems.append(f"{tool['name']}: inputSchema has additionalProperties (google-genai cannot convert it)")
        if '"$ref"' in text or '"$defs"' in text:
            problems.append(f"{tool['name']}: inputSchema uses $ref/$defs (some clients do not resolve them)")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("client,transport,scenario", GROUP_CASES)
def test_table_covers_every_tool(run, client, transport, scenario):
    """Every tool the server lists has a success and an error call in the table (and no call is
    to a tool it does not list), so a new tool cannot slip past the judges."""
    record = run(client, scenario, transport)
    steps = next(s for s in SCENARIOS if s.name == scenario).steps
    listed = {t["name"] for t in record["tools"] or []}
    missing = sorted(f"{name}: no {kind} call" for name in listed for kind in ("ok", "error")
                     if not any(s.tool == name and s.expect == kind for s in steps))
    unknown = sorted({s.tool for s in steps} - listed)
    assert not missing and not unknown, f"missing: {missing}; calls to tools not listed: {unknown}"


@pytest.mark.parametrize("client,transport,scenario", GROUP_CASES)
def test_instructions_name_only_exposed_tools(run, client, transport, scenario):
    record = run(client, scenario, transport)
    foreign = foreign_tools(record["tools"] or [], record["instructions"])
    assert not foreign, f"the server's instructions name tools it does not expose: {foreign}"


OFFICIAL_TOOLS = {"create_entities", "create_relations", "add_observations", "delete_entities", "delete_observations",
                  "delete_relations", "read_graph", "search_nodes", "open_nodes"}


@pytest.mark.full  # the TypeScript client
@pytest.mark.parametrize("scenario,budget", [("graph", 35_000), ("official", 12_000)])
def test_tools_list_fits_the_context_budget(run, scenario, budget):
    """What tools/list costs a model's context, as a TypeScript client receives it (each tool as
    Python's json.dumps with default separators): every group at most 35,000 characters (every
    optional argument nullable for strict-mode frameworks took ~1,300), the nine official tools
    alone at most 12,000."""
    tools = run("typescript", scenario, "stdio")["tools"]
    if scenario == "official":
        assert {t["name"] for t in tools} == OFFICIAL_TOOLS
    sizes = {t["name"]: len(json.dumps(t)) for t in tools}
    total = sum(sizes.values())
    largest = sorted(sizes.items(), key=lambda kv: -kv[1])[:5]
    assert total <= budget, f"tools/list of --tools {scenario}: {total} characters > {budget}; largest: {largest}"


# ----- the MCP Inspector CLI ------------------------------------------------------------------

INSPECTOR_CALLS = [
    # (tool, --tool-arg values, expect an error?); the first makes the entity the others may find.
    ("create_entities", ['entities=[{"name":"Alice","entityType":"person","observations":["Works at Acme"]}]'], False),
    ("add_observations", ['observations=[{"entityName":"Ghost","contents":["x"]}]'], True),
    ("read_graph", [], False),
    ("read_graph", ["library=nowhere"], True),
    ("create_entities", ['entities=[{"name":"Bob"}]'], True),
    ("search_nodes", ["query=Alice"], False),
    ("retrieve_memory", ["query=anything", "min_similarity=5"], True),
    ("store_memory", ["content=hello", 'tag=["x"]'], True),
]


def inspector(home: Path, tool: str, tool_args: list[str], serve_args: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """`npx @modelcontextprotocol/inspector --cli memloci serve [serve_args] --method tools/call ...`, offline."""
    args = [a for pair in (("--tool-arg", t) for t in tool_args) for a in pair]
    return subprocess.run(["node", str(INSPECTOR), "--cli", sys.executable, "-m", "memloci", "serve", *serve_args,
                           "--method", "tools/call", "--tool-name", tool, *args],
                          capture_output=True, text=True, env=server_env(home), timeout=120)


def inspector_reply(proc: subprocess.CompletedProcess, expect_error: bool) -> dict:
    """The Inspector CLI prints the tool's reply and exits 0 for successes and tool errors alike;
    an SDK rejection (say -32602 over the output schema) makes it exit 1."""
    shown = f"inspector exit {proc.returncode}:\n{proc.stdout[-1500:]}\n{proc.stderr[-1500:]}"
    assert proc.returncode == 0 and "MCP error" not in proc.stdout + proc.stderr, shown
    reply = json.loads(proc.stdout)
    assert bool(reply.get("isError")) is expect_error, f"isError should be {expect_error}: {shown}"
    if expect_error:
        assert error_code(reply["content"][0]["text"]), f"the error should name a code: {shown}"
    return reply


@pytest.fixture(scope="module")
def inspector_home(tmp_path_factory) -> Path:
    require_node()
    home = tmp_path_factory.mktemp("inspector") / "home"
    inspector_reply(inspector(home, *INSPECTOR_CALLS[0][:2]), INSPECTOR_CALLS[0][2])
    return home


@pytest.mark.full  # the Inspector CLI
@pytest.mark.parametrize("tool,tool_args,expect_error", INSPECTOR_CALLS[1:],
                         ids=[f"{c[0]}-{'error' if c[2] else 'ok'}" for c in INSPECTOR_CALLS[1:]])
def test_inspector_cli(inspector_home, tool, tool_args, expect_error):
    inspector_reply(inspector(inspector_home, tool, tool_args), expect_error)


PG_INSPECTOR_CALLS = [  # in order, on one PostgreSQL library, the server's only one (so its default)
    ("create_entities", ['entities=[{"name":"Alice","entityType":"person","observations":["Works at Acme"]}]'], False),
    ("search_nodes", ["query=Alice"], False),
    ("add_observations", ['observations=[{"entityName":"Ghost","contents":["x"]}]'], True),
    ("store_memory", ["content=We chose PostgreSQL", 'tags=["db"]'], False),
    ("retrieve_memory", ["query=PostgreSQL"], False),
    ("retrieve_memory", ["query=anything", "min_similarity=5"], True),
    ("check_database_health", [], False),
    ("read_graph", ["library=nowhere"], True),
    ("read_entities", ['entity_names=["Alice"]'], False),
    ("rename_entity", ["old_name=Alice", "new_name=Alicia"], False),
    ("open_nodes", ['names=["Alicia"]'], False),
]


@pytest.mark.full  # the Inspector CLI
def test_inspector_cli_on_postgres(tmp_path, pg_library):
    """The Inspector CLI against a server whose only library is in PostgreSQL: each call is a
    server process of its own, and the later ones find what the earlier ones stored."""
    require_node()
    serve_args = ("--libraries", pg_library.arg)
    for tool, tool_args, expect_error in PG_INSPECTOR_CALLS:
        proc = inspector(tmp_path / "home", tool, tool_args, serve_args)
        text = inspector_reply(proc, expect_error)["content"][0]["text"]
        wanted = {"search_nodes": "Alice", "retrieve_memory": "We chose PostgreSQL", "read_entities": "Alice",
                  "check_database_health": "postgres", "open_nodes": "Alicia"}.get(tool)
        if wanted and not expect_error:
            assert wanted in text, f"{tool}: the reply should name {wanted}: {text[:600]}"


@pytest.mark.full  # the Inspector CLI
def test_inspector_cli_sets_up_project_memory(tmp_path):
    """The AWAITING_CONFIRMATION step reaches the Inspector as a tool error it shows, and the
    confirm step then keeps the memory in the project."""
    require_node()
    repo = make_places(tmp_path)["repo"]
    entities = 'entities=[{"name":"auth","entityType":"component","observations":["uses JWT"]}]'
    asked = inspector_reply(inspector(tmp_path / "home", "create_entities", [entities, f"project_path={repo}"]), True)
    assert error_code(asked["content"][0]["text"]) == "AWAITING_CONFIRMATION"
    inspector_reply(inspector(tmp_path / "home", "create_entities",
                              [entities, f"project_path={repo}", f"confirm_new_project_root={repo}"]), False)
    assert (repo / ".mcp").is_dir()


# ----- resources: read, subscribe, notified of changes, on each transport ----------------------

class OneLibrary(Scenario):
    """One SQLite library mounted: `memloci://graph` is it, and tools need no `library`."""

    def serve_args(self, places: dict[str, Path]) -> list[str]:
        return ["serve", "--tools", self.tools, "--libraries", f"main:{places['tmp']}/main.db"]


RESOURCES_SCENARIO = OneLibrary("resources", "graph,project")


def resource_calls(places: dict[str, Path]) -> list[dict[str, Any]]:
    """client.mjs's call list: a project made, both graph resources subscribed, one change to each
    (a read in between that must notify no one), then both read."""
    repo = str(places["repo"])
    project = f"memloci://graph?path={repo}"
    return [
        {"tool": "create_entities", "args": {"project_path": repo, "confirm_new_project_root": repo,
                                             "entities": [{"name": "auth", "entityType": "component"}]}},
        {"subscribe": "memloci://graph"},
        {"subscribe": project},
        {"tool": "update_context", "args": {"project_path": repo, "active_task": "Rotate JWT keys"}},
        {"tool": "search_nodes", "args": {"query": "auth"}},
        {"tool": "create_entities", "args": {"entities": [{"name": "Alice", "entityType": "person"}]}},
        {"awaitUpdates": 2, "ms": 15000},
        {"read": "memloci://graph"},
        {"read": project},
    ]


def run_resources_python(places: dict[str, Path], transport: str) -> dict[str, Any]:
    """The same steps through the Python SDK, recorded as client.mjs records them."""
    out: dict[str, Any] = {"results": [], "updated": []}

    async def on_message(message):
        root = getattr(message, "root", message)
        if getattr(root, "method", "") == "notifications/resources/updated":
            out["updated"].append(str(root.params.uri))

    async def main(where: dict[str, Any]):
        async with python_session(where, message_handler=on_message) as session:
            assert session.init_result.capabilities.resources.subscribe
            for step in resource_calls(places):
                entry: dict[str, Any] = {"threw": False, "error": None, "text": None}
                try:
                    if "tool" in step:
                        result = await session.call_tool(step["tool"], step["args"])
                        entry.update(tool=step["tool"], isError=bool(result.is_error),
                                     text="".join(c.text for c in result.content if getattr(c, "type", "") == "text"))
                    elif "subscribe" in step:
                        entry["resource"] = step["subscribe"]
                        await session.subscribe_resource(step["subscribe"])
                    elif "read" in step:
                        entry["resource"] = step["read"]
                        read = await session.read_resource(step["read"])
                        entry["text"] = "".join(getattr(c, "text", "") for c in read.contents)
                    else:
                        with anyio.move_on_after(step["ms"] / 1000):
                            while len(out["updated"]) < step["awaitUpdates"]:
                                await anyio.sleep(0.05)
                except Exception as exc:
                    entry.update(threw=True, error={"message": f"{type(exc).__name__}: {exc}"})
                out["results"].append(entry)

    with serving(RESOURCES_SCENARIO, places, transport) as where:
        anyio.run(main, where)
    return out


@pytest.mark.filterwarnings("ignore:resources/subscribe is removed")  # the session here is 2025-era, where it is the way
@pytest.mark.parametrize("client,transport", [pytest.param(c, t, id=f"{c}-{t}", marks=tier(c, t))
                                              for c in CLIENTS for t in transports(c)])
def test_resources_read_and_notify(tmp_path, client, transport):
    """resources/read and resources/subscribe: a write to the default library and a context
    change in a project each notify their subscribers, a read notifies no one, and reading the
    resources afterwards shows both changes."""
    places = make_places(tmp_path)
    if client == "python":
        record = run_resources_python(places, transport)
    else:
        require_node()
        spec = {"sdk": "2" if client == "typescript-v2" else "1", "transport": transport,
                "calls": resource_calls(places)}
        with serving(RESOURCES_SCENARIO, places, transport) as where:
            proc = subprocess.run(["node", str(HERE / "client.mjs")], input=json.dumps({**spec, **where}),
                                  capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, f"the TypeScript client failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}"
        record = json.loads(proc.stdout)
    failed = [r for r in record["results"] if r["threw"] or r.get("isError")]
    assert not failed, f"steps failed: {failed}"
    project = f"memloci://graph?path={places['repo']}"
    assert sorted(record["updated"]) == sorted(["memloci://graph", project]), record["updated"]
    graph_text, project_text = record["results"][-2]["text"], record["results"][-1]["text"]
    assert "Alice" in graph_text and "Rotate JWT keys" in project_text, (graph_text[:500], project_text[:500])


# ----- the Inspector CLI over HTTP ------------------------------------------------------------

@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def inspector_http(request, tmp_path_factory):
    """One HTTP server for the Inspector's calls (each Inspector run is one connection), with
    `main` in SQLite, then in PostgreSQL."""
    require_node()
    places: dict[str, Any] = make_places(tmp_path_factory.mktemp(f"inspector-http-{request.param}"))
    if request.param == "postgres":
        places["pg"] = fresh_database(request.getfixturevalue("pg_url"))
    with serving(Scenario("inspector", "graph,memory", engine=request.param), places, "http") as where:
        yield where


def inspector_over_http(where: dict[str, Any], tool: str, tool_args: list[str]) -> subprocess.CompletedProcess:
    """`npx @modelcontextprotocol/inspector --cli URL --transport http --header ...`, offline."""
    args = [a for pair in (("--tool-arg", t) for t in tool_args) for a in pair]
    headers = [a for name, value in where["headers"].items() for a in ("--header", f"{name}: {value}")]
    return subprocess.run(["node", str(INSPECTOR), "--cli", where["url"], "--transport", "http", *headers,
                           "--method", "tools/call", "--tool-name", tool, *args],
                          capture_output=True, text=True, timeout=120)


HTTP_INSPECTOR_CALLS = [  # in order: the first makes what the later ones find
    ("create_entities", ['entities=[{"name":"Alice","entityType":"person","observations":["Works at Acme"]}]',
                         "library=main"], False),
    ("search_nodes", ["query=Alice", "library=main"], False),
    ("add_observations", ['observations=[{"entityName":"Ghost","contents":["x"]}]', "library=main"], True),
    ("store_memory", ["content=hello", 'tag=["x"]', "library=main"], True),
    ("read_graph", ["library=nowhere"], True),
]


@pytest.mark.full  # the Inspector CLI
def test_inspector_cli_over_http(inspector_http):
    for tool, tool_args, expect_error in HTTP_INSPECTOR_CALLS:
        reply = inspector_reply(inspector_over_http(inspector_http, tool, tool_args), expect_error)
        if tool == "search_nodes":
            assert "Alice" in reply["content"][0]["text"]
