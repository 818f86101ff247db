"""Server mode: real `memloci serve --transport http` processes on a free loopback port, reached
with the MCP SDK's streamable-HTTP client and with raw HTTP (httpx2)."""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import httpx2
import pytest
from conftest import server_env
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def memloci(home: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "memloci", *args], env=server_env(home), capture_output=True,
                          text=True, check=check, timeout=120)


def create_token(home: Path, name: str, *scopes: str) -> str:
    args = [a for s in scopes for a in ("--scope", s)]
    return memloci(home, "token", "create", name, *args).stdout.strip()


class Server:
    """`memloci serve --transport http` on a free port, with `libraries` (default: two SQLite ones,
    team and other); `stop()` sends SIGTERM and gives its exit code."""

    def __init__(self, home: Path, *args: str, libraries: str | None = None, **env: str):
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.url = f"{self.base}/mcp"
        self.log = home / f"server-{self.port}.log"
        self.err = self.log.open("w")
        libraries = libraries or f"team:{home / 'team.db'},other:{home / 'other.db'}"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "memloci", "serve", "--transport", "http", "--port", str(self.port),
             "--libraries", libraries, *args], env=server_env(home, **env), stdout=subprocess.DEVNULL, stderr=self.err)
        deadline = time.monotonic() + 90
        while True:
            try:
                if httpx2.get(f"http://127.0.0.1:{self.port}/healthz", timeout=2).status_code == 200:
                    break
            except httpx2.HTTPError:
                pass
            assert self.process.poll() is None, self.log.read_text()
            assert time.monotonic() < deadline, "server did not start"
            time.sleep(0.2)

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(timeout=90)
        self.err.close()
        return code

    def post(self, body: bytes | dict, token: str | None = None, **headers: str) -> httpx2.Response:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        auth = {"authorization": f"Bearer {token}"} if token else {}
        return httpx2.post(self.url, content=data, headers={**ACCEPT, **auth, **headers}, timeout=30)


@asynccontextmanager
async def session(server: Server, token: str | None):
    headers = {"authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
        async with streamable_http_client(server.url, http_client=http) as (read, write, *_):
            async with ClientSession(read, write) as s:
                await s.initialize()
                yield s


def run(server: Server, token: str | None, body) -> None:
    async def main():
        async with session(server, token) as s:
            await body(s)

    anyio.run(main)


def text(result) -> dict:
    return json.loads(result.content[0].text)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """One server with two libraries (team, other) and tokens of each kind."""
    home = tmp_path_factory.mktemp("http")
    tokens = {"reader": create_token(home, "reader", "team:read"),
              "writer": create_token(home, "writer", "team:write"),
              "burst": create_token(home, "burst", "team:read"),
              "admin": create_token(home, "admin", "*:admin")}
    server = Server(home, "--rate-limit", "60", "--max-body", "20000")
    yield server, tokens, home
    server.stop()


def test_no_token_and_a_bad_token_get_401(served):
    server, _, _ = served
    for token in (None, "mlc_not-a-token"):
        response = server.post(INIT, token)
        assert response.status_code == 401
        assert response.headers["www-authenticate"].startswith("Bearer")
    assert httpx2.get(server.url.replace("/mcp", "/healthz")).json() == {"status": "alive"}


def test_a_write_token_lists_and_calls_tools(served):
    server, tokens, _ = served

    async def body(s):
        names = {t.name for t in (await s.list_tools()).tools}
        assert {"create_entities", "search_nodes", "store_memory"} <= names
        assert "export_markdown" not in names  # a maintenance tool: admin only
        created = await s.call_tool("create_entities", {"library": "team", "entities": [
            {"name": "alpha", "entityType": "project", "observations": ["uses FastAPI"]}]})
        assert not created.is_error, created.content[0].text
        found = await s.call_tool("search_nodes", {"library": "team", "query": "alpha"})
        assert [e["name"] for e in text(found)["entities"]] == ["alpha"]
        # what a strict-mode model sends: every argument, "" or null for the unused; no project named
        strict = await s.call_tool("search_nodes", {"library": "team", "query": "alpha", "limit": None, "offset": None,
                                                    "project_path": "", "confirm_new_project_root": ""})
        assert not strict.is_error, strict.content[0].text
        assert [e["name"] for e in text(strict)["entities"]] == ["alpha"]

    run(server, tokens["writer"], body)


def test_a_read_token_searches_but_cannot_write_or_see_other_libraries(served):
    server, tokens, _ = served

    async def seed(s):
        await s.call_tool("create_entities", {"library": "team", "entities": [
            {"name": "beta", "entityType": "project", "observations": []}]})

    run(server, tokens["admin"], seed)

    async def body(s):
        listed = (await s.list_tools()).tools
        assert listed and all(t.annotations.read_only_hint for t in listed), [t.name for t in listed]
        found = await s.call_tool("search_nodes", {"library": "team", "query": "beta"})
        assert not found.is_error and "beta" in found.content[0].text
        refused = await s.call_tool("create_entities", {"library": "team", "entities": [
            {"name": "gamma", "entityType": "project", "observations": []}]})
        assert refused.is_error and refused.structured_content is None
        error = text(refused)["error"]
        assert error["code"] == "PERMISSION_DENIED" and "needs scope team:write" in error["message"]
        other = await s.call_tool("search_nodes", {"library": "other", "query": "x"})
        assert text(other)["error"]["code"] == "PERMISSION_DENIED" and "other:read" in text(other)["error"]["message"]
        libraries = await s.call_tool("list_libraries", {})
        assert [lib["name"] for lib in libraries.structured_content["libraries"]] == ["team"]
        assert "path" not in libraries.structured_content["libraries"][0]  # the server's disk: admins only
        with pytest.raises(MCPError) as denied:  # the graph of the default library: a client error
            await s.read_resource("memloci://graph")
        assert denied.value.error.code == -32602 and "PERMISSION_DENIED" in denied.value.error.message
        unnamed = await s.call_tool("search_nodes", {"query": "x"})  # two libraries mounted: it must name one
        assert "team" in text(unnamed)["error"]["message"] and "other" not in text(unnamed)["error"]["message"]
        project = await s.call_tool("read_graph", {"project_path": str(Path.cwd())})
        assert "needs scope *:admin" in text(project)["error"]["message"]

    run(server, tokens["reader"], body)
    gone = [line for line in server.log.read_text().splitlines() if "tool=create_entities" in line and "token=reader" in line]
    assert gone and "outcome=PERMISSION_DENIED" in gone[-1] and "library=team" in gone[-1]


def test_a_search_of_every_library_searches_only_the_token_s_libraries(served):
    """`library: "*"` leaves the libraries outside the token's scopes out; naming one is refused."""
    server, tokens, _ = served

    async def seed(s):
        for library in ("team", "other"):
            await s.call_tool("create_entities", {"library": library, "entities": [
                {"name": f"quokka-{library}", "entityType": "animal", "observations": ["a quokka smiles"]}]})
            await s.call_tool("store_memory", {"library": library, "content": f"quokka sighting in {library}"})

    run(server, tokens["admin"], seed)

    async def everything(s):
        found = text(await s.call_tool("search_nodes", {"library": "*", "query": "quokka"}))
        assert [(e["library"], e["name"]) for e in found["entities"]] == [("team", "quokka-team"), ("other", "quokka-other")]

    run(server, tokens["admin"], everything)

    async def body(s):
        found = text(await s.call_tool("search_nodes", {"library": "*", "query": "quokka"}))
        assert [(e["library"], e["name"]) for e in found["entities"]] == [("team", "quokka-team")]
        assert found["libraries"] == ["team"]
        recalled = text(await s.call_tool("retrieve_memory", {"library": "*", "query": "quokka sighting"}))
        assert {m["library"] for m in recalled["memories"]} == {"team"}
        assert "quokka sighting in team" in [m["content"] for m in recalled["memories"]]
        named = await s.call_tool("retrieve_memory", {"library": ["team", "other"], "query": "quokka"})
        assert named.is_error and text(named)["error"]["code"] == "PERMISSION_DENIED"
        assert "needs scope other:read" in text(named)["error"]["message"]
        unknown = await s.call_tool("search_nodes", {"library": ["team", "secret"], "query": "quokka"})
        assert text(unknown)["error"]["code"] == "PERMISSION_DENIED"  # never says whether it exists

    run(server, tokens["reader"], body)
    searched = [line for line in server.log.read_text().splitlines()
                if "tool=search_nodes" in line and "token=reader" in line and "outcome=ok" in line]
    assert searched and "library=team " in searched[-1]  # "*" as narrowed to the token's libraries


def test_access_log_names_the_token_never_its_secret_or_arguments(served):
    server, tokens, _ = served

    async def body(s):
        created = await s.call_tool("create_entities", {"library": "team", "entities": [
            {"name": "alpha", "entityType": "project", "observations": ["uses FastAPI"]}]})
        assert not created.is_error

    run(server, tokens["writer"], body)
    log = server.log.read_text()
    line = next(entry for entry in log.splitlines() if "token=writer tool=create_entities library=team" in entry)
    assert line.endswith("outcome=ok") and " ms=" in line
    for secret in tokens.values():
        assert secret not in log
    assert "uses FastAPI" not in log and "alpha" not in log
    _, _, home = served
    assert str(home) not in log and str(Path.cwd()) not in log  # no paths (a refused project_path call ran)


def test_foreign_origin_and_host_are_refused(served):
    server, tokens, _ = served
    assert server.post(INIT, tokens["reader"], origin="http://evil.example").status_code == 403
    assert server.post(INIT, None, origin="http://evil.example").status_code == 403  # before any token check
    assert server.post(INIT, tokens["reader"], host="evil.example").status_code == 421
    assert server.post(INIT, tokens["reader"], origin=f"http://localhost:{server.port}").status_code == 200
    # matched exactly, not by prefix: a foreign name that begins like an allowed one is refused
    assert server.post(INIT, tokens["reader"], origin=f"http://127.0.0.1:{server.port}.evil.com").status_code == 403
    assert server.post(INIT, tokens["reader"], origin="http://localhost:1.evil.com").status_code == 403
    assert server.post(INIT, tokens["reader"], host=f"127.0.0.1:{server.port}.evil.com").status_code == 421
    assert server.post(INIT, tokens["reader"], host="localhost:x").status_code == 421


def test_oversized_bodies_batches_and_malformed_messages_are_refused(served):
    server, tokens, _ = served
    big = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
           "params": {"name": "search_nodes", "arguments": {"query": "x" * 30000}}}
    response = server.post(big, tokens["reader"])
    assert response.status_code == 413
    assert response.json()["error"]["code"] == -32600 and "20000 bytes" in response.json()["error"]["message"]
    batch = server.post([INIT], tokens["reader"])
    assert batch.status_code == 400 and "batches" in batch.json()["error"]["message"]
    doubled = server.post(b'{"jsonrpc":"2.0","id":3,"method":"ping","params":{"a":1,"a":2}}', tokens["reader"])
    assert doubled.status_code == 400 and doubled.json()["id"] == 3
    assert doubled.json()["error"]["message"] == "Invalid params: params.a: key given twice in one object; give each key once"


def test_rate_limit_answers_429_with_retry_after(served):
    server, tokens, _ = served
    # Many at once: the bucket (60, refilled at one a second) empties however slow this machine is.
    statuses: list = []

    def burst() -> None:
        with httpx2.Client(timeout=30) as client:
            for i in range(40):
                statuses.append(client.post(server.url, json={"jsonrpc": "2.0", "id": i, "method": "ping"},
                                            headers={**ACCEPT, "authorization": f"Bearer {tokens['burst']}"}))

    threads = [threading.Thread(target=burst) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    limited = [r for r in statuses if r.status_code == 429]
    assert limited, [r.status_code for r in statuses]
    assert int(limited[0].headers["retry-after"]) >= 1
    assert "60 calls a minute" in limited[0].json()["error"]["message"]
    assert server.post({"jsonrpc": "2.0", "id": 1, "method": "ping"}, tokens["reader"]).status_code != 429  # its own bucket


def test_revoked_token_is_refused_by_the_running_server(served):
    server, _, home = served
    token = create_token(home, "temp", "team:read")
    assert server.post(INIT, token).status_code == 200
    memloci(home, "token", "revoke", "temp")
    assert server.post(INIT, token).status_code == 401


def test_token_cli_stores_only_hashes_privately(tmp_path):
    token = create_token(tmp_path, "alice", "team:write", "*:read")
    assert token.startswith("mlc_") and len(token) > 40
    path = tmp_path / "tokens.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    stored = path.read_text()
    assert token not in stored and "alice" in stored
    listed = json.loads(memloci(tmp_path, "token", "list", "--json").stdout)["tokens"]
    assert listed == [{"name": "alice", "scopes": ["team:write", "*:read"], "created": listed[0]["created"]}]
    assert token not in memloci(tmp_path, "token", "list").stdout
    again = memloci(tmp_path, "token", "create", "alice", "--scope", "team:read", check=False)
    assert again.returncode == 1 and "ALREADY_EXISTS" in again.stderr
    bad = memloci(tmp_path, "token", "create", "bob", "--scope", "team:rw", check=False)
    assert bad.returncode == 1 and "team:rw" in bad.stderr and "LIBRARY:read" in bad.stderr
    memloci(tmp_path, "token", "revoke", "alice")
    assert json.loads(memloci(tmp_path, "token", "list", "--json").stdout)["tokens"] == []
    assert memloci(tmp_path, "token", "revoke", "alice", check=False).returncode == 1


def test_wide_bind_without_tokens_refuses_to_start(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "memloci", "serve", "--transport", "http", "--host", "0.0.0.0",
                           "--port", str(free_port())], env=server_env(tmp_path), capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 1
    assert "host 0.0.0.0: refusing to listen beyond this machine with no token configured" in proc.stderr
    assert not (tmp_path / "default.db").exists()  # refused before anything was opened


def test_loopback_behind_a_proxy_without_tokens_refuses_to_start(tmp_path):
    """A loopback bind that lets in a Host name beyond this machine is a proxy's backend: exposed."""
    for allowed in ("memory.example", "memory.example:443"):
        proc = subprocess.run([sys.executable, "-m", "memloci", "serve", "--transport", "http", "--port",
                               str(free_port()), "--allowed-host", allowed], env=server_env(tmp_path),
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 1
        assert f"allowed host {allowed}: refusing to serve requests for a name beyond this machine" in proc.stderr
        assert not (tmp_path / "default.db").exists()
    server = Server(tmp_path, "--allowed-host", "localhost:8001")  # a loopback name is no proxy's: it starts
    assert server.stop() == 0


def test_without_tokens_loopback_needs_none_and_every_tool_works(tmp_path):
    server = Server(tmp_path)
    try:
        async def body(s):
            assert len((await s.list_tools()).tools) > 30
            stored = await s.call_tool("store_memory", {"library": "other", "content": "the sky is blue"})
            assert not stored.is_error, stored.content[0].text
            listed = await s.call_tool("list_libraries", {})
            assert {lib["name"] for lib in listed.structured_content["libraries"]} == {"team", "other"}
            resources = await s.list_resource_templates()
            assert resources.resource_templates

        run(server, None, body)
    finally:
        assert server.stop() == 0


def test_a_server_started_open_closes_when_the_first_token_is_created(tmp_path):
    """Loopback, no token at start: open. The first `memloci token create` closes it at once
    (no restart): no token and a bad one get 401, a read token cannot write, the new token works."""
    server = Server(tmp_path)
    try:
        assert server.post(INIT).status_code == 200
        reader = create_token(tmp_path, "late-reader", "team:read")
        for token in (None, "mlc_not-a-token"):
            refused = server.post(INIT, token)
            assert refused.status_code == 401, refused.text
            assert "bearer" in refused.headers.get("www-authenticate", "").lower()

        async def body(s):
            found = await s.call_tool("search_nodes", {"query": "x", "library": "team"})
            assert not found.is_error, found.content[0].text
            written = await s.call_tool("store_memory", {"library": "team", "content": "a later write"})
            assert written.is_error and "PERMISSION_DENIED" in written.content[0].text

        run(server, reader, body)
    finally:
        assert server.stop() == 0


def test_sigterm_finishes_the_call_in_flight_and_exits_0(tmp_path):
    token = create_token(tmp_path, "w", "*:write")
    server = Server(tmp_path, MEMLOCI_LOG_LEVEL="DEBUG")
    # the largest batch a call takes: long enough to be running when the signal comes
    entities = [{"name": f"e{i}", "entityType": "t", "observations": [f"fact {i}.{j}" for j in range(20)]}
                for i in range(1000)]
    outcome: dict = {}

    def call():
        init = server.post(INIT, token)
        sid = init.headers.get("mcp-session-id")
        headers = {"mcp-session-id": sid, "mcp-protocol-version": "2025-06-18"}
        server.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, token, **headers)
        try:
            outcome["reply"] = server.post({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
                "name": "create_entities", "arguments": {"library": "team", "entities": entities}}}, token, **headers)
        except httpx2.HTTPError as exc:
            outcome["reply"] = exc

    worker = threading.Thread(target=call)
    worker.start()
    deadline = time.monotonic() + 60
    while "call started tool=create_entities" not in server.log.read_text():
        assert time.monotonic() < deadline and worker.is_alive()
        time.sleep(0.01)
    server.process.send_signal(signal.SIGTERM)
    assert server.stop() == 0
    worker.join(30)
    log = server.log.read_text()
    # the call was still running when the signal came, and ended well before the process did
    done = next(line for line in log.splitlines() if "tool=create_entities library=team" in line)
    assert log.index("SIGTERM: refusing new calls") < log.index(done) < log.index("all running calls answered")
    assert log.index("all running calls answered") < log.index("Shutting down")
    assert done.endswith("outcome=ok")
    reply = outcome["reply"]  # and its reply still reached the client
    assert isinstance(reply, httpx2.Response) and reply.status_code == 200, reply
    assert '"e999"' in reply.text and '"isError":true' not in reply.text.replace(" ", "")
    from memloci.store.sqlite.engine import SQLiteStore

    store = SQLiteStore(tmp_path / "team.db", "team")
    store.open(create=False)
    try:
        assert len(store.list_entities("*")) == 1000
    finally:
        store.close()


def test_settings_come_from_flags_then_environment_then_config(tmp_path, monkeypatch):
    from memloci.app.config import load_config
    from memloci.app.server_config import parse_http_config
    from memloci.core.errors import ValidationError
    from memloci.core.settings import Settings
    from memloci.http.settings import resolve

    config_path = tmp_path / "config.toml"
    config_path.write_text('[http]\nhost = "10.0.0.5"\nport = 9000\nallowed_hosts = ["memory.example.com"]\n')
    config = load_config(config_path)
    monkeypatch.delenv("MCP_SERVER_HOST", raising=False)
    monkeypatch.delenv("MCP_SERVER_PORT", raising=False)
    settings = resolve(config, process=Settings.from_env())
    assert (settings.host, settings.port, settings.loopback) == ("10.0.0.5", 9000, False)
    assert {"memory.example.com", "memory.example.com:*", "10.0.0.5:*"} <= set(settings.host_patterns())
    monkeypatch.setenv("MCP_SERVER_PORT", "9100")
    monkeypatch.setenv("MCP_SERVER_HOST", "::1")
    from_env = resolve(config, process=Settings.from_env())
    assert (from_env.host, from_env.port, from_env.loopback) == ("::1", 9100, True)
    assert resolve(config, port=9200, host="127.0.0.1", process=Settings.from_env()).port == 9200
    assert resolve({}, allowed_origins=["https://a.example"], process=Settings.from_env()).allowed_origins == ["https://a.example"]
    monkeypatch.setenv("MCP_SERVER_PORT", "http")
    with pytest.raises(ValidationError, match="MCP_SERVER_PORT: 'http' is not a port number"):
        resolve({}, process=Settings.from_env())
    for table, message in (({"prot": 1}, "prot: unknown key"), ({"port": 70000}, "not a port number"),
                           ({"stateless": "yes"}, "stateless: must be bool"),
                           ({"allowed_hosts": "a"}, "allowed_hosts: must be a list of strings"),
                           ({"rate_limit": -1}, "rate_limit: must be 0 or more"),
                           ({"header_timeout": "10s"}, "header_timeout: must be a number of seconds"),
                           ({"body_timeout": True}, "body_timeout: must be a number of seconds"),
                           ({"max_connections": 1.5}, "max_connections: must be int"),
                           ({"drain_timeout": "60s"}, "drain_timeout: must be a number of seconds"),
                           ({"drain_timeout": -1}, "drain_timeout: must be 0 or more")):
        with pytest.raises(ValidationError, match=message):
            parse_http_config(table)
    assert parse_http_config({"header_timeout": 2.5, "body_timeout": 30, "max_connections": 100})
    from memloci.http.settings import FILES_KEPT_FREE, default_max_connections

    monkeypatch.delenv("MCP_SERVER_PORT")
    defaults = resolve({}, process=Settings.from_env())
    assert (defaults.header_timeout, defaults.body_timeout, defaults.drain_timeout) == (10, 30, 60)
    assert defaults.max_connections == default_max_connections()
    import resource

    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    assert default_max_connections() == max(64, soft - FILES_KEPT_FREE)
    flagged = resolve({"http": {"header_timeout": 5}}, header_timeout=2, body_timeout=3, max_connections=50,
                      process=Settings.from_env())
    assert (flagged.header_timeout, flagged.body_timeout, flagged.max_connections) == (2, 3, 50)
    assert resolve({"http": {"drain_timeout": 5}}, process=Settings.from_env()).drain_timeout == 5
    assert resolve({"http": {"drain_timeout": 5}}, drain_timeout=2.5, process=Settings.from_env()).drain_timeout == 2.5
    for flags, message in (({"header_timeout": 0}, "--header-timeout: must be more than 0"),
                           ({"body_timeout": float("inf")}, "--body-timeout: must be more than 0"),
                           ({"max_connections": 0}, "--max-connections: must be at least 1"),
                           ({"drain_timeout": 0}, "--drain-timeout: must be more than 0"),
                           ({"drain_timeout": float("nan")}, "--drain-timeout: must be more than 0")):
        with pytest.raises(ValidationError, match=message):
            resolve({}, process=Settings.from_env(), **flags)


def test_sigterm_with_an_idle_client_connected_exits_promptly(tmp_path):
    """A client's open event stream (the SDK keeps one) does not hold the shutdown up."""
    server = Server(tmp_path)

    async def main():
        async with session(server, None) as s:
            await s.list_tools()
            await anyio.sleep(0.5)
            server.process.send_signal(signal.SIGTERM)
            with anyio.fail_after(30):
                while server.process.poll() is None:
                    await anyio.sleep(0.1)

    try:
        anyio.run(main)
    except Exception:  # the client may complain that the server went away: that is expected here
        pass
    # ended within the wait above, far below the 65 s uvicorn would give a stream nobody closed
    assert server.process.poll() is not None
    assert server.stop() == 0
    assert "shutting down with" not in server.log.read_text()


def test_wide_bind_with_a_token_starts_and_checks_the_host(tmp_path):
    token = create_token(tmp_path, "remote", "team:read")
    server = Server(tmp_path, "--host", "0.0.0.0", "--allowed-host", "memory.example")
    try:
        assert server.post(INIT, token, host=f"memory.example:{server.port}").status_code == 200
        assert server.post(INIT, token, host="memory.example").status_code == 200
        assert server.post(INIT, token, host=f"other.example:{server.port}").status_code == 421
        assert server.post(INIT, None, host=f"memory.example:{server.port}").status_code == 401
    finally:
        assert server.stop() == 0


def test_one_token_cannot_take_every_session(tmp_path):
    """A token at its session cap closes its own oldest idle session, or is refused with 429 when
    all are in use; another token still connects."""
    (tmp_path / "config.toml").write_text("[http]\nmax_sessions_per_token = 3\n")
    flood = create_token(tmp_path, "flood", "team:read")
    other = create_token(tmp_path, "other", "team:read")
    server = Server(tmp_path)
    try:
        sids = []
        for _ in range(4):  # one more than the cap, none closed: clients that went away
            opened = server.post(INIT, flood)
            assert opened.status_code == 200, opened.text
            sids.append(opened.headers["mcp-session-id"])
        ping = {"jsonrpc": "2.0", "id": 9, "method": "ping"}
        heads = {"mcp-protocol-version": "2025-06-18"}
        assert server.post(ping, flood, **{"mcp-session-id": sids[0]}, **heads).status_code == 404  # the oldest closed
        assert server.post(ping, flood, **{"mcp-session-id": sids[3]}, **heads).status_code == 200

        async def busy():  # three sessions, each with its event stream open: none idle
            async with httpx2.AsyncClient(timeout=30) as http, contextlib.AsyncExitStack() as streams:
                for _ in range(3):
                    sid = server.post(INIT, flood).headers["mcp-session-id"]
                    get = http.stream("GET", server.url, headers={"accept": "text/event-stream", "mcp-session-id": sid,
                                                                 "authorization": f"Bearer {flood}", **heads})
                    assert (await streams.enter_async_context(get)).status_code == 200
                refused = server.post(INIT, flood)
                assert refused.status_code == 429
                assert refused.json()["error"]["message"].startswith(
                    "Too many sessions: token 'flood' may have 3 open sessions at once")
                async with session(server, other) as s:  # another token is not affected
                    assert (await s.list_tools()).tools

        anyio.run(busy)
    finally:
        assert server.stop() == 0


def test_sigterm_delivers_a_running_calls_reply_to_the_sdk_client(tmp_path):
    """The SDK client reads a reply from the POST's event stream: the stream must not close before it is sent."""
    token = create_token(tmp_path, "w", "*:write")
    server = Server(tmp_path, MEMLOCI_LOG_LEVEL="DEBUG")
    entities = [{"name": f"e{i}", "entityType": "t", "observations": [f"fact {i}.{j}" for j in range(20)]}
                for i in range(1000)]
    got: dict = {}

    async def body(s):
        async def signal_once_started():
            while "call started tool=create_entities" not in server.log.read_text():
                await anyio.sleep(0.01)
            server.process.send_signal(signal.SIGTERM)

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(signal_once_started)
            try:
                got["result"] = await s.call_tool("create_entities", {"library": "team", "entities": entities})
            except Exception as exc:
                got["result"] = exc

    try:
        run(server, token, body)
    except Exception as exc:  # closing the session after the server is gone may fail; the call's reply is what counts
        got.setdefault("result", exc)
    assert server.stop() == 0
    result = got["result"]
    assert not isinstance(result, Exception), repr(result)
    assert not result.is_error and '"e999"' in result.content[0].text, result.content[0].text[:300]


def test_subscribing_to_a_resource_needs_the_scope_reading_it_needs(served):
    server, tokens, _ = served
    for token, allowed in ((tokens["reader"], False), (tokens["admin"], True)):
        init = server.post(INIT, token)
        heads = {"mcp-session-id": init.headers["mcp-session-id"], "mcp-protocol-version": "2025-06-18"}
        server.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, token, **heads)
        for uri in ("memloci://graph", f"memloci://graph?path={Path.cwd()}"):
            reply = server.post({"jsonrpc": "2.0", "id": 5, "method": "resources/subscribe", "params": {"uri": uri}},
                                token, **heads)
            message = json.loads(next(line[5:] for line in reply.text.splitlines() if line.startswith("data:")))
            if allowed:
                assert message.get("result") == {}, message
            else:
                assert message["error"]["code"] == -32602, message
                assert message["error"]["message"].startswith("PERMISSION_DENIED: ")
                assert "needs scope" in message["error"]["message"]


def test_browsers_from_an_allowed_origin_get_cors(tmp_path):
    token = create_token(tmp_path, "web", "team:read")
    server = Server(tmp_path, "--allowed-origin", "https://app.example")
    try:
        preflight = httpx2.options(server.url, timeout=30, headers={
            "origin": "https://app.example", "access-control-request-method": "POST",
            "access-control-request-headers": "authorization, content-type, mcp-session-id, mcp-protocol-version"})
        assert preflight.status_code == 204  # no token needed: browsers send none with a preflight
        assert preflight.headers["access-control-allow-origin"] == "https://app.example"
        allowed = {h.strip().lower() for h in preflight.headers["access-control-allow-headers"].split(",")}
        assert {"authorization", "content-type", "mcp-session-id", "mcp-protocol-version"} <= allowed
        opened = server.post(INIT, token, origin="https://app.example")
        assert opened.status_code == 200 and opened.headers["access-control-allow-origin"] == "https://app.example"
        assert "mcp-session-id" in opened.headers["access-control-expose-headers"].lower()
        refused = server.post(INIT, None, origin="https://app.example")  # the 401 is readable by the page
        assert refused.status_code == 401 and refused.headers["access-control-allow-origin"] == "https://app.example"
        # a loopback origin (let in by default) and a foreign one get no CORS
        local = httpx2.options(server.url, timeout=30, headers={"origin": f"http://localhost:{server.port}"})
        assert local.status_code == 204 and "access-control-allow-origin" not in local.headers
        local_post = server.post(INIT, token, origin=f"http://localhost:{server.port}")
        assert "access-control-allow-origin" not in local_post.headers
        foreign = httpx2.options(server.url, timeout=30, headers={"origin": "https://app.example.evil"})
        assert foreign.status_code == 403 and "access-control-allow-origin" not in foreign.headers
    finally:
        assert server.stop() == 0


def test_a_library_admin_is_not_offered_the_project_only_export(served):
    server, tokens, home = served
    token = create_token(home, "team-admin", "team:admin")

    async def body(s):
        names = {t.name for t in (await s.list_tools()).tools}
        assert "export_markdown" not in names and "create_entities" in names
        refused = await s.call_tool("export_markdown", {"library": "team"})
        error = text(refused)["error"]
        assert error["code"] == "PERMISSION_DENIED" and "needs scope *:admin" in error["message"]

    run(server, token, body)

    async def admin(s):
        assert "export_markdown" in {t.name for t in (await s.list_tools()).tools}

    run(server, tokens["admin"], admin)


def test_refusals_get_one_access_log_line_each_and_a_flood_does_not_flood_the_log(tmp_path):
    token = create_token(tmp_path, "r", "team:read")
    server = Server(tmp_path, "--rate-limit", "2")
    try:
        bad = "mlc_guessed-secret-value"
        for _ in range(15):
            assert server.post(INIT, bad).status_code == 401
        assert server.post(INIT, token, origin="http://evil.example").status_code == 403
        assert server.post(INIT, token, host="evil.example").status_code == 421
        statuses = [server.post({"jsonrpc": "2.0", "id": 1, "method": "ping"}, token).status_code for _ in range(3)]
        assert 429 in statuses
    finally:
        assert server.stop() == 0
    lines = [line for line in server.log.read_text().splitlines() if "memloci.access: refused" in line]
    assert sum("token=- method=POST status=401 reason=no valid token" in line for line in lines) == 10  # throttled
    assert any("status=403 reason=origin not allowed" in line for line in lines)
    assert any("status=421 reason=host not allowed" in line for line in lines)
    assert any("token=r method=POST status=429" in line for line in lines)
    assert bad not in server.log.read_text() and token not in server.log.read_text()
    warned = [line for line in server.log.read_text().splitlines() if "WARNING" in line and "refused" in line]
    assert len(warned) <= 2, warned
