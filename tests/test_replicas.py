"""Stateless replicas: two `memloci serve --transport http --stateless` on one SQLite library.

What a load balancer does to them: consecutive calls of one client land on either replica,
and several clients write at once. Every acknowledged write must be there, read from either.
The calls are plain JSON-RPC POSTs (stateless mode keeps no session between them).
"""

from __future__ import annotations

import json
import threading
from contextlib import ExitStack

import httpx2
from conftest import server_env

from memloci.http.loopback import loopback_server

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
           "MCP-Protocol-Version": "2025-06-18"}


def call(client: httpx2.Client, url: str, tool: str, arguments: dict, rid: int) -> dict:
    """One tools/call POST; the reply (JSON or one SSE event) as the tool's structured result."""
    body = {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}
    reply = client.post(url, json=body, headers=HEADERS)
    assert reply.status_code == 200, reply.text
    text = reply.text
    if reply.headers["content-type"].startswith("text/event-stream"):
        text = next(line[5:].strip() for line in text.splitlines() if line.startswith("data:"))
    message = json.loads(text)
    assert message["id"] == rid and "result" in message, message
    result = message["result"]
    assert not result.get("isError"), result
    return result["structuredContent"]


def test_writes_through_either_replica_are_seen_by_both(tmp_path):
    library = tmp_path / "team.db"
    env = server_env(tmp_path / "home")
    serve = ["--stateless", "--libraries", f"team:{library}"]
    with ExitStack() as stack:
        urls = [stack.enter_context(loopback_server(serve, env, log=tmp_path / f"replica{i}.log")).url for i in (0, 1)]
        http = stack.enter_context(httpx2.Client(timeout=60))

        # One client, its calls alternating between the replicas (round robin).
        for i in range(20):
            call(http, urls[i % 2], "create_entities", {"library": "team", "entities": [
                {"name": f"rr-{i}", "entityType": "note", "observations": [f"written through replica {i % 2}"]}]}, i)
            # the write just made is visible at once through the other replica
            seen = call(http, urls[(i + 1) % 2], "open_nodes", {"library": "team", "names": [f"rr-{i}"]}, 1000 + i)
            assert [e["name"] for e in seen["entities"]] == [f"rr-{i}"]

        # Four clients at once, each alternating, adding observations to shared entities too.
        errors: list[BaseException] = []

        def writer(w: int) -> None:
            try:
                with httpx2.Client(timeout=60) as own:
                    for i in range(15):
                        call(own, urls[(w + i) % 2], "create_entities", {"library": "team", "entities": [
                            {"name": f"w{w}-{i}", "entityType": "note", "observations": ["concurrent"]}]}, i)
                        call(own, urls[(w + i + 1) % 2], "add_observations", {"library": "team", "observations": [
                            {"entityName": f"rr-{i}", "contents": [f"writer {w} was here ({i})"]}]}, 100 + i)
            except BaseException as exc:  # reported below: a thread's assert would otherwise vanish
                errors.append(exc)

        threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors

        expected = {f"rr-{i}" for i in range(20)} | {f"w{w}-{i}" for w in range(4) for i in range(15)}
        for n, url in enumerate(urls):
            graph = call(http, url, "read_graph", {"library": "team"}, 5000 + n)
            entities = {e["name"]: e for e in graph["entities"]}
            assert set(entities) == expected, f"replica {n} misses {sorted(expected - set(entities))}"
            for i in range(15):
                observations = set(entities[f"rr-{i}"]["observations"])
                assert {f"writer {w} was here ({i})" for w in range(4)} <= observations
