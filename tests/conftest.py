"""Shared test helpers: real SQLite files in temp dirs, the real MCP client over stdio."""

from __future__ import annotations

import json
import os
import sys
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from memloci.app.registry import LibraryRegistry
from memloci.app.specs import LibrarySpec
from memloci.service.facade import MemoryService


def server_env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMLOCI_")}
    env["MEMLOCI_HOME"] = str(home)
    # Graph-only tests skip loading the model; memory tests pass MEMLOCI_EMBEDDER="minilm".
    env["MEMLOCI_EMBEDDER"] = "none"
    env.update(extra)
    return env


def server_params(home: Path, *args: str, **env: str) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=["-m", "memloci", "serve", *args], env=server_env(home, **env))


@asynccontextmanager
async def mcp_session(home: Path, *args: str, **env: str):
    """A real client session with `memloci serve` running in a subprocess."""
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
    """Run `await body(Client)` against a fresh `memloci serve` (args and env passed through)."""

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
