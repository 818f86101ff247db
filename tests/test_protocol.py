"""The wire itself: malformed JSON-RPC gets a JSON-RPC error, stdout carries protocol only."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import server_env


def exchange(home, messages: list[str]) -> list[dict]:
    """Send raw lines to `memloci serve` and read every reply line."""
    proc = subprocess.run([sys.executable, "-m", "memloci", "serve"], input="\n".join(messages) + "\n",
                          env=server_env(home), capture_output=True, text=True, timeout=60)
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]


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
    ])
    by_id = {r.get("id"): r for r in replies}
    assert all(r.get("jsonrpc") == "2.0" for r in replies), "every stdout line is a JSON-RPC message"
    assert "error" in by_id[2] and by_id[2]["error"]["code"] == -32602  # invalid params, at protocol level
    bad = by_id[3]["result"]
    assert bad["isError"] is True
    error = bad["structuredContent"]["error"]
    assert error["code"] == "VALIDATION_ERROR"
    assert "entities[0].name: Input should be a valid string" in error["message"]
    assert "entities[0].entityType: Field required" in error["message"]
    assert by_id[4]["result"]["structuredContent"]["total_entity_count"] == 0


def test_unparseable_line_does_not_kill_the_server(home):
    replies = exchange(home, INIT + ["{this is not json", json.dumps({"jsonrpc": "2.0", "id": 5, "method": "tools/list"})])
    by_id = {r.get("id"): r for r in replies}
    assert any(r.get("error", {}).get("code") == -32700 for r in replies) or 5 in by_id
    assert len(by_id[5]["result"]["tools"]) >= 9
