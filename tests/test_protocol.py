"""The wire itself: malformed JSON-RPC gets a JSON-RPC error, stdout carries protocol only."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import server_env


def exchange(home, messages: list[str], expect_ids: set[int]) -> list[dict]:
    """Send raw lines to `memloci serve`; read replies until every id in `expect_ids` is answered."""
    proc = subprocess.Popen([sys.executable, "-m", "memloci", "serve"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=server_env(home), text=True)
    replies: list[dict] = []
    try:
        proc.stdin.write("\n".join(messages) + "\n")
        proc.stdin.flush()
        while not expect_ids <= {r.get("id") for r in replies}:
            line = proc.stdout.readline()
            assert line, f"server closed stdout; got {replies}"
            replies.append(json.loads(line))  # every stdout line must be JSON
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
    return replies


INIT = [
    json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}),
    json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
]


def test_malformed_arguments_get_errors_and_stdout_is_pure_json_rpc(home):
    replies = exchange(home, INIT + [
        json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                    "params": {"name": "create_entities", "arguments": "not an object"}}),
        json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                    "params": {"name": "create_entities", "arguments": {"entities": [{"name": 1}]}}}),
        json.dumps({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "read_graph"}}),
    ], {1, 2, 3, 4})
    by_id = {r.get("id"): r for r in replies}
    assert all(r.get("jsonrpc") == "2.0" for r in replies), "every stdout line is a JSON-RPC message"
    assert "error" in by_id[2] and by_id[2]["error"]["code"] == -32602  # invalid params, at protocol level
    bad = by_id[3]["result"]
    assert bad["isError"] is True
    assert "structuredContent" not in bad  # errors are text only (TypeScript clients check it against the schema)
    error = json.loads(bad["content"][0]["text"])["error"]
    assert error["code"] == "VALIDATION_ERROR"
    assert "entities[0].name: Input should be a valid string" in error["message"]
    assert "entities[0].entityType: Field required" in error["message"]
    assert by_id[4]["result"]["structuredContent"]["total_entity_count"] == 0


def test_unparseable_line_does_not_kill_the_server(home):
    replies = exchange(home, INIT + ["{this is not json", json.dumps({"jsonrpc": "2.0", "id": 5, "method": "tools/list"})],
                       {1, 5})
    by_id = {r.get("id"): r for r in replies}
    assert len(by_id[5]["result"]["tools"]) >= 9, "the server keeps serving after a garbage line"
