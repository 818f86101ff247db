"""Many clients at once over streamable HTTP lose nothing.

A real `memloci serve --transport http` on loopback, with a write token made by `memloci token
create`, and 16 Python SDK clients writing at once (store_memory and create_entities in turn,
each write followed by a read): every write the server acknowledged is then read back through
MCP, and the library file agrees. Nothing here is timed; `memloci bench http` measures speed
with a load of the same shape.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from conftest import server_env

from memloci.http.loopback import Endpoint, http_session, loopback_server

CLIENTS = 16
WRITES = 12  # per client: 6 memories and 6 entities
LIBRARY = "load"


def client_tag(c: int) -> str:
    return f"client-{c:03d}"


def entity_name(c: int, i: int) -> str:
    return f"c{c:03d}-e{i:05d}"


@dataclass
class Acknowledged:
    """What the server said it wrote, and what went wrong on the way."""

    memories: set[str] = field(default_factory=set)
    entities: set[str] = field(default_factory=set)
    errors: list[str] = field(default_factory=list)
    stale_reads: int = 0  # an open_nodes right after an acknowledged create that did not find it


async def one_client(endpoint: Endpoint, c: int, done: Acknowledged) -> None:
    async with http_session(endpoint.url, endpoint.headers) as session:
        async def call(tool: str, args: dict[str, Any]) -> dict[str, Any] | None:
            result = await session.call_tool(tool, {**args, "library": LIBRARY})
            if result.is_error:
                done.errors.append(f"{tool}: {result.content[0].text[:300] if result.content else ''}")
                return None
            return result.structured_content

        tag = client_tag(c)
        for i in range(WRITES):
            if i % 2 == 0:
                content = f"Client {c} write {i}: a unique memory ({tag}, {i})"
                if await call("store_memory", {"content": content, "tags": [tag]}):
                    done.memories.add(content)
                await call("search_by_tag", {"tags": [tag], "limit": 5})
            else:
                name = entity_name(c, i)
                written = await call("create_entities", {"entities": [
                    {"name": name, "entityType": "load", "observations": [f"written by client {c} as write {i}"]}]})
                if written:
                    done.entities.add(name)
                opened = await call("open_nodes", {"names": [name]})
                if written and opened is not None and name not in {e["name"] for e in opened["entities"]}:
                    done.stale_reads += 1


async def read_back(endpoint: Endpoint) -> tuple[set[str], set[str]]:
    """Every client's memories (search_by_tag, page by page) and every entity name asked for."""
    memories: set[str] = set()
    entities: set[str] = set()
    async with http_session(endpoint.url, endpoint.headers) as session:
        for c in range(CLIENTS):
            offset: int | None = 0
            while offset is not None:
                page = (await session.call_tool("search_by_tag", {"tags": [client_tag(c)], "limit": 100,
                                                                  "offset": offset, "library": LIBRARY})).structured_content
                memories.update(m["content"] for m in page["memories"])
                offset = page["next_offset"] if page["is_truncated"] else None
            names = [entity_name(c, i) for i in range(1, WRITES, 2)]
            opened = (await session.call_tool("open_nodes", {"names": names, "library": LIBRARY})).structured_content
            entities.update(e["name"] for e in opened["entities"])
    return memories, entities


def test_concurrent_http_clients_lose_no_write(tmp_path: Path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text("[http]\nrate_limit = 0\n")  # the limit is not what is tested
    db = tmp_path / "load.db"
    serve = ["--libraries", f"{LIBRARY}:{db}", "--tools", "graph,memory"]
    done = Acknowledged()
    with loopback_server(serve, server_env(home), log=tmp_path / "server.log", scopes=[f"{LIBRARY}:write"]) as endpoint:
        async def load() -> None:
            async with anyio.create_task_group() as tg:
                for c in range(CLIENTS):
                    tg.start_soon(one_client, endpoint, c, done)

        anyio.run(load)
        found_memories, found_entities = anyio.run(read_back, endpoint)
    log = (tmp_path / "server.log").read_text(errors="replace")
    assert not done.errors, f"failed calls: {done.errors[:5]}\n{log[-2000:]}"
    assert len(done.memories) + len(done.entities) == CLIENTS * WRITES
    assert done.memories <= found_memories and done.entities <= found_entities, "acknowledged writes lost"
    assert done.stale_reads == 0  # each client sees its own write at once

    # The file itself, after the server's clean shutdown: each client's writes, once each.
    with sqlite3.connect(db) as con:
        names = {row[0] for row in con.execute("SELECT name FROM entities")}
        contents = [row[0] for row in con.execute("SELECT content FROM memories WHERE entity_id IS NULL")]
        observations = con.execute("SELECT count(*) FROM memories WHERE entity_id IS NOT NULL").fetchone()[0]
    assert names == {entity_name(c, i) for c in range(CLIENTS) for i in range(1, WRITES, 2)}
    assert observations == CLIENTS * WRITES // 2  # one per entity
    assert len(contents) == len(set(contents)) == CLIENTS * WRITES // 2
    assert all(sum(f"({client_tag(c)}," in text for text in contents) == WRITES // 2 for c in range(CLIENTS))
