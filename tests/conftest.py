"""Shared test helpers: real SQLite files in temp dirs, the real MCP client.

`mcp_session`/`run_session` talk to the server `memloci serve` builds, run in this process over
the MCP SDK's in-memory transport: most tests check tools and their replies, and a server
process costs about two seconds to start. `process_session` starts `python -m memloci serve`
and talks to it over stdio, for the tests where the process is what is tested (its stdio
transport, several processes at once).
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import sys
import tempfile
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client as SdkClient
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from memloci.app.registry import LibraryRegistry
from memloci.app.specs import LibrarySpec
from memloci.core.settings import Settings
from memloci.mcp.server import serve_from
from memloci.service.facade import MemoryService

# The files whose every test is in `make test-full` only (marked `full` here, so that a file of its
# own keeps its imports as they are); single tests elsewhere carry @pytest.mark.full.
FULL_FILES = {
    "test_crash.py": "SIGKILL of writer processes",
    "contract/test_sigkill_contract.py": "SIGKILL of writer processes, on every engine",
    "contract/test_concurrency_contract.py": "four writer processes at once, on every engine",
    "test_http_load.py": "HTTP load: 16 clients on a server process",
    "test_replicas.py": "two server processes behind a load balancer",
    "test_postgres_servers.py": "several server processes on one PostgreSQL library",
    "test_packaging.py": "a wheel built and installed in a new virtual environment",
    "test_official_compat.py": "the official Node server beside memloci",
    "test_stdio.py": "the stdio framing of a server process: each test starts one",
    "test_start_early.py": "the first replies of server processes started twice on one configuration",
    "test_http.py": "server mode: each test a `memloci serve --transport http` process",
    "test_workspace_processes.py": "`memloci rules sync` processes killed with SIGKILL; the workspace tools over HTTP",
    "test_dashboard_api.py": "the dashboard's API on `memloci serve --transport http` processes",
    "test_storage_errors.py": "a process each in a namespace with a full or read-only disk",
    "test_bench_postgres.py": "benchmarks on PostgreSQL",
    "test_bench_graph.py": "a server process embedding a backlog while the bench times it",
    "test_bench_dashboard.py": "a real HTTP server driven through the dashboard's API",
    "test_postgres_outage.py": "a private PostgreSQL stopped and started under a server process",
    "test_frameworks.py": "every tool through four agent frameworks, a server process each",
    "test_dashboard_browser.py": "the dashboard in headless Chromium against a server process, an agent writing meanwhile",
}
TESTS = Path(__file__).resolve().parent


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    full = {TESTS / name for name in FULL_FILES}
    for item in items:
        if item.path in full:
            item.add_marker(pytest.mark.full)


def environment_now() -> dict[str, str]:
    """A copy of this process's environment. The conformance runs read it from a thread pool
    while a test on the main thread may set a variable (monkeypatch, the command line's process
    defaults): a copy taken during that write raises "dictionary changed size during
    iteration", so it is taken again."""
    while True:
        try:
            return dict(os.environ)
        except RuntimeError:
            continue


_TEST_CACHE: list[Path] = []


def run_cache() -> Path:
    """This test run's per-user cache folder (XDG_CACHE_HOME of the servers it starts), so their
    recorded start replies (mcp/early.py) never go to, nor come from, the user's own cache. The
    models folder is the user's (a model is derived once, not once per run)."""
    if not _TEST_CACHE:
        folder = Path(tempfile.mkdtemp(prefix="memloci-test-cache-"))
        atexit.register(shutil.rmtree, folder, True)
        models = Settings.from_env({k: v for k, v in environment_now().items() if k != "MEMLOCI_CACHE"}).model_cache
        (folder / "memloci").mkdir()
        (folder / "memloci" / "models").symlink_to(models, target_is_directory=True)
        _TEST_CACHE.append(folder)
    return _TEST_CACHE[0]


def server_env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in environment_now().items() if not k.startswith("MEMLOCI_")}
    env["MEMLOCI_HOME"] = str(home)
    env["XDG_CACHE_HOME"] = str(run_cache())
    # Graph-only tests skip loading the model; memory tests pass MEMLOCI_EMBEDDER="minilm".
    env["MEMLOCI_EMBEDDER"] = "none"
    env.update(extra)
    return env


def server_params(home: Path, *args: str, **env: str) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=["-m", "memloci", "serve", *args], env=server_env(home, **env))


# The flags of `memloci serve` an in-process server takes, and the Settings field each sets.
SERVE_FLAGS = {"--libraries": "libraries", "--tools": "tools", "--schema": "schema", "--name": "name"}


def serve_flags(args: tuple[str, ...]) -> dict[str, str]:
    """`--libraries X --tools Y ...` as {"libraries": X, "tools": Y}; any other argument is a
    mistake here (a transport, a host: use process_session)."""
    if len(args) % 2 or any(flag not in SERVE_FLAGS for flag in args[::2]):
        raise ValueError(f"an in-process server takes {', '.join(SERVE_FLAGS)} with a value each, not {args}")
    return {SERVE_FLAGS[flag]: value for flag, value in zip(args[::2], args[1::2], strict=True)}


@asynccontextmanager
async def mcp_session(home: Path, *args: str, client_options: dict[str, Any] | None = None, **env: str):
    """A client session with the server `memloci serve [args]` builds, over the SDK's in-memory
    transport. The server is built by mcp.server.serve_from, as `memloci serve` builds it, from
    Settings read from server_env(home, **env) (never from this process's environment); errors that
    would make `serve` exit are raised here. `client_options` go to the SDK's Client (say a
    message_handler)."""
    flags = serve_flags(args)
    name = flags.pop("name", None)
    settings = Settings.from_env(server_env(home, **env)).with_flags(**flags)
    service, server = serve_from(settings, name=name)
    try:
        service.embedder.start_background(delay=0.5)
        service.watch_libraries()
        async with SdkClient(server, mode="legacy", cache=None, **(client_options or {})) as client:
            yield client.session
    finally:
        service.close()


@asynccontextmanager
async def process_session(home: Path, *args: str, **env: str):
    """A client session with `memloci serve` running in a subprocess, over stdio."""
    async with stdio_client(server_params(home, *args, **env)) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            yield session


class Client:
    """Calls tools and returns (is_error, structured content, parsed text)."""

    def __init__(self, session: ClientSession):
        self.session = session

    async def call(self, name: str, **arguments):
        result = await self.session.call_tool(name, arguments)
        text = result.content[0].text if result.content else ""
        try:
            parsed = json.loads(text)
        except json.JSONDecodeError:
            parsed = text
        return result.is_error, result.structured_content, parsed

    async def ok(self, name: str, **arguments):
        is_error, structured, text = await self.call(name, **arguments)
        assert not is_error, f"{name} failed: {text}"
        return structured, text

    async def error(self, name: str, **arguments) -> dict:
        is_error, structured, text = await self.call(name, **arguments)
        assert is_error, f"{name} should have failed: {text}"
        # An error is text only: structured content would be checked against the tool's output
        # schema, and TypeScript SDK clients reject a reply whose content does not match it.
        assert structured is None, f"{name}: an error reply must carry no structured content"
        return text["error"]


def run_session(home: Path, body, *args: str, **env: str) -> None:
    """Run `await body(Client)` against a fresh server as `memloci serve` builds it, in this
    process (args and env passed through, see mcp_session)."""

    async def main():
        async with mcp_session(home, *args, **env) as session:
            await body(Client(session))

    anyio.run(main)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def service(tmp_path: Path) -> MemoryService:
    registry = LibraryRegistry([LibrarySpec("default", tmp_path / "lib.db")])
    yield MemoryService(registry)
    registry.close()


@pytest.fixture(scope="session")
def pg_url() -> str:
    """The libpq URL of the session's real PostgreSQL (tests/pg.py); skipped (failed under CI=true)
    when it cannot start."""
    from pg import PgServer

    server = PgServer()
    try:
        yield server.require()
    finally:
        server.stop()


@pytest.fixture
def pg_library(pg_url: str):
    """A fresh PostgreSQL library for one test: `.name`, `.url`, `.arg` (for --libraries), `.spec`."""
    from pg import pg_library_url

    return pg_library_url(pg_url)
