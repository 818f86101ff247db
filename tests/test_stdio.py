"""The stdio transport: every malformed line gets the JSON-RPC error the specification names,
nothing but protocol reaches stdout, and a refused call stores nothing."""

from __future__ import annotations

import json
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
from conftest import server_env

REPO = Path(__file__).resolve().parent.parent
INIT = [
    {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
]


class RawServer:
    """`memloci serve` in a subprocess, spoken to in raw bytes, one line per message."""

    def __init__(self, home: Path, command: list[str] | None = None, cwd: Path | None = None, **env: str):
        self.stderr = tempfile.TemporaryFile()  # a file, not a pipe: a chatty server never blocks on it
        self.proc = subprocess.Popen(command or [sys.executable, "-m", "memloci", "serve"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.stderr, env=server_env(home, **env), cwd=cwd)
        self.lines: list[bytes] = []  # every stdout line, as read
        self._queue: queue.Queue[bytes] = queue.Queue()  # a silent server fails the test instead of hanging it
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        for line in iter(self.proc.stdout.readline, b""):
            self._queue.put(line)
        self._queue.put(b"")

    def send(self, *messages: dict | bytes) -> None:
        for m in messages:
            self.proc.stdin.write(m if isinstance(m, bytes) else json.dumps(m).encode())
            self.proc.stdin.write(b"\n")
        self.proc.stdin.flush()

    def read(self, timeout: float = 60) -> dict:
        try:
            line = self._queue.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no reply within {timeout} s; replies so far: {self.lines[-5:]}") from None
        assert line, "server closed stdout"
        self.lines.append(line)
        return json.loads(line)  # every stdout line must be JSON

    def until(self, request_id) -> list[dict]:
        """Every reply up to and including the one for `request_id`."""
        replies = [self.read()]
        while replies[-1].get("id") != request_id:
            replies.append(self.read())
        return replies

    def start(self) -> RawServer:
        self.send(*INIT)
        assert self.until(1)[-1]["result"]["serverInfo"]["name"]
        return self

    def close(self) -> bytes:
        """Close stdin; the rest of stdout (all of it must be JSON-RPC) once the server has exited."""
        self.proc.stdin.close()
        self.proc.wait(timeout=30)
        rest = []
        while (line := self._queue.get(timeout=30)) != b"":
            rest.append(line)
        self.stderr.close()
        return b"".join(rest)


def call(request_id, tool: str, **arguments) -> dict:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}


def entity_count(server: RawServer, request_id: int) -> int:
    server.send(call(request_id, "read_graph"))
    reply = server.until(request_id)[-1]["result"]
    return json.loads(reply["content"][0]["text"])["total_entity_count"]


MALFORMED = [  # (line, expected id of the reply, expected code, words in the message)
    (b"{this is not json", None, -32700, "Parse error"),
    (b'{"jsonrpc": "2.0", "id": 2, "method": "ping", "params": {"x": NaN}}', None, -32700, "NaN"),
    (b"[" * 5000 + b"]" * 5000, None, -32700, "nested too deeply"),
    (b'[{"jsonrpc": "2.0", "id": 3, "method": "ping"}]', None, -32600, "batches"),
    (b'"just a string"', None, -32600, "JSON object"),
    (b'{"id": 4, "method": "ping"}', 4, -32600, 'jsonrpc: must be "2.0"'),
    (b'{"jsonrpc": "1.0", "id": 5, "method": "ping"}', 5, -32600, 'jsonrpc: must be "2.0"'),
    (b'{"jsonrpc": "2.0", "id": null, "method": "ping"}', None, -32600, "id must be a string or an integer, not null"),
    (b'{"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}', None, -32600, "not an object"),
    (b'{"jsonrpc": "2.0", "id": 1.5, "method": "ping"}', None, -32600, "not a fraction"),
    (b'{"jsonrpc": "2.0", "id": true, "method": "ping"}', None, -32600, "not a boolean"),
    (b'{"jsonrpc": "2.0", "id": 6, "method": 5}', 6, -32600, "method must be a string"),
    (b'{"jsonrpc": "2.0", "id": 7}', 7, -32600, "not a request, notification or response"),
    (rb'{"jsonrpc": "2.0", "id": 11, "method": "pi\ud800ng"}', 11, -32600, "method: contains a lone surrogate"),
    (rb'{"jsonrpc": "2.0", "id": "a\udc80", "method": "ping"}', None, -32600, "id: contains a lone surrogate"),
    (b'{"jsonrpc": "2.0"}', None, -32600, "needs a method"),
    (b'{"jsonrpc": "2.0", "id": 8, "method": "tools/list", "params": [1]}', 8, -32602, "params must be an object, not an array"),
    (b'{"jsonrpc": "2.0", "id": 9, "method": "tools/list", "params": "x"}', 9, -32602, "params must be an object, not a string"),
    (b'{"jsonrpc": "2.0", "id": 10, "method": "ping", "params": {"a": ' + b"[" * 70 + b"]" * 70 + b"}}", 10, -32600,
     "nested deeper than 64 levels"),
]


def test_each_malformed_message_gets_the_json_rpc_error_the_specification_names(home):
    server = RawServer(home).start()
    try:
        server.send(*(line for line, *_ in MALFORMED), b"", b"   ", {"jsonrpc": "2.0", "id": 99, "method": "tools/list"})
        replies = server.until(99)
        assert len(replies[-1]["result"]["tools"]) >= 9, "the server keeps serving after every bad line"
        errors = replies[:-1]  # refusals come in the order of the lines (blank lines are skipped)
        assert len(errors) == len(MALFORMED), errors
        for (line, want_id, code, words), got in zip(MALFORMED, errors):
            assert got["jsonrpc"] == "2.0" and "result" not in got, got
            assert (got["id"], got["error"]["code"]) == (want_id, code), (line[:80], got)
            assert words in got["error"]["message"], (line[:80], got)
    finally:
        rest = server.close()
    assert all(json.loads(line)["jsonrpc"] == "2.0" for line in server.lines + rest.splitlines())


@pytest.mark.parametrize("bad", [rb'"Ada\ud800"', b'"Ada\xff"', b'"\xed\xa0\x80"'],
                         ids=["lone-surrogate-escape", "invalid-utf8-byte", "encoded-surrogate"])
def test_a_lone_surrogate_or_invalid_utf8_is_refused_naming_the_field_and_nothing_is_stored(home, bad):
    server = RawServer(home).start()
    try:
        entity = b'{"name": "Grace", "entityType": "person", "observations": ["ok"]}, ' \
                 b'{"name": "Ada", "entityType": "person", "observations": ["fine", ' + bad + b"]}"
        server.send(b'{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "create_entities", '
                    b'"arguments": {"entities": [' + entity + b"]}}}")
        reply = server.until(2)[-1]
        assert reply["error"]["code"] == -32602
        assert "params.arguments.entities[1].observations[1]: contains a lone surrogate or invalid UTF-8" \
            in reply["error"]["message"]
        # in a key, too
        server.send(b'{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "read_graph", '
                    b'"arguments": {' + bad + b": 1}}}")
        assert "contains a lone surrogate or invalid UTF-8" in server.until(3)[-1]["error"]["message"]
        assert entity_count(server, 4) == 0, "nothing of the refused batch is stored"
    finally:
        server.close()


def test_a_request_id_in_flight_cannot_be_used_again(home):
    server = RawServer(home).start()
    entities = [{"name": f"E{i}", "entityType": "t", "observations": [f"fact {i} {j}" for j in range(20)]}
                for i in range(1000)]
    try:
        # the batch takes far longer to store than the server takes to read the next line
        server.send(call(7, "create_entities", entities=entities), {"jsonrpc": "2.0", "id": 7, "method": "tools/list"})
        first, second = server.read(), server.read()
        refusal, result = (first, second) if "error" in first else (second, first)
        assert refusal == {"jsonrpc": "2.0", "id": 7, "error": {"code": -32600, "message": (
            "Invalid Request: id 7 is already used by a request still in flight; use a new id for each request")}}
        assert result["id"] == 7 and "content" in result["result"], "the first request is answered as usual"
        # once answered, the id is free again
        server.send({"jsonrpc": "2.0", "id": 7, "method": "ping"})
        assert server.until(7)[-1] == {"jsonrpc": "2.0", "id": 7, "result": {}}
        assert entity_count(server, 8) == 1000
    finally:
        server.close()


def test_a_cancelled_call_is_never_answered_and_is_applied_whole_or_not_at_all(home):
    """What docs/getting-started/agents.md says: a call cancelled while it runs still finishes (one transaction), unanswered."""
    server = RawServer(home).start()
    entities = [{"name": f"E{i}", "entityType": "t", "observations": [f"fact {i} {j}" for j in range(20)]}
                for i in range(1000)]
    try:
        server.send(call(5, "create_entities", entities=entities))
        time.sleep(0.3)
        server.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 5}})
        count = None
        for attempt in range(20):  # poll until the running call has finished
            time.sleep(0.5)
            count = entity_count(server, 100 + attempt)
            if count == 1000:
                break
        assert count in (0, 1000), "all or nothing"
        assert 5 not in {json.loads(line).get("id") for line in server.lines}, "a cancelled request gets no reply"
        server.send({"jsonrpc": "2.0", "id": 5, "method": "ping"})  # its id may be used again
        assert server.until(5)[-1]["result"] == {}
    finally:
        server.close()


def test_stdout_carries_protocol_only_with_the_model_loaded(home):
    """The embedder (onnxruntime, tokenizers) loads while serving: nothing of it may reach stdout."""
    server = RawServer(home, MEMLOCI_EMBEDDER="minilm", PYTHONWARNINGS="always").start()
    try:
        server.send(call(2, "store_memory", content="The deploy key rotates every Monday", tags=["ops"]))
        assert server.until(2)[-1]["result"]["isError"] is False
        server.send(call(3, "retrieve_memory", query="when does the key rotate"))
        assert "Monday" in server.until(3)[-1]["result"]["content"][0]["text"]
    finally:
        rest = server.close()
    for line in server.lines + rest.splitlines():
        assert json.loads(line)["jsonrpc"] == "2.0", line


def _make_version() -> tuple[int, ...]:
    out = subprocess.run(["make", "--version"], capture_output=True, text=True).stdout.split()
    return tuple(int(x) for x in out[2].split(".")[:2]) if len(out) > 2 and out[:2] == ["GNU", "Make"] else (0,)


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
@pytest.mark.parametrize("flags", [["-s"], []], ids=["make-s-C", "make-C"])
def test_make_run_from_another_folder_prints_only_protocol(home, tmp_path, flags):
    """`make -C <repo> run`, started from another folder as a client config does, speaks only
    JSON-RPC on stdout. The Makefile sets --no-print-directory; GNU make before 4.4 prints its
    "Entering directory" line for -C before reading any Makefile, so there only -s stops it."""
    if not flags and _make_version() < (4, 4):
        pytest.skip(f"GNU make {_make_version()} prints 'Entering directory' before reading the Makefile")
    server = RawServer(home, command=["make", *flags, "-C", str(REPO), "run"], cwd=tmp_path)
    try:
        server.start()
        server.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        assert len(server.until(2)[-1]["result"]["tools"]) >= 9
    finally:
        rest = server.close()
    for line in server.lines + rest.splitlines():
        assert json.loads(line)["jsonrpc"] == "2.0", line


def memory_count(server: RawServer, request_id: int) -> int:
    server.send(call(request_id, "list_memories"))
    reply = server.until(request_id)[-1]["result"]
    return reply["structuredContent"]["total"]


def test_overflowing_numbers_doubled_keys_and_bad_tools_call_params_are_refused_naming_the_path(home):
    server = RawServer(home).start()
    cases = [  # (line, code, words)
        (b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"store_memory",'
         b'"arguments":{"content":"num","metadata":{"x":1e400}}}}', -32602, "params.arguments.metadata.x: number too large"),
        (b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"store_memory",'
         b'"arguments":{"content":"neg","metadata":{"y":[-1e999]}}}}', -32602, "params.arguments.metadata.y[0]: number too large"),
        (b'{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"store_memory",'
         b'"arguments":{"content":"x","content":"y"}}}', -32602, "params.arguments.content: key given twice"),
        (b'{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"store_memory","arguments":["x"]}}',
         -32602, "params.arguments: must be an object, not an array"),
        (b'{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"store_memory","arguments":"x"}}',
         -32602, "params.arguments: must be an object, not a string"),
        (b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"arguments":{"content":"x"}}}',
         -32602, "params.name: required for tools/call"),
        (b'{"jsonrpc":"2.0","id":8,"id":9,"method":"ping"}', -32600, "id: key given twice"),
    ]
    try:
        for line, code, words in cases:
            server.send(line)
            got = server.read()
            assert got["error"]["code"] == code and words in got["error"]["message"], (line, got)
        assert memory_count(server, 20) == 0, "nothing of a refused call is stored"
        # a huge number that fits a double is data like any other, and every reply stays valid JSON
        server.send(call(21, "store_memory", content="big", metadata={"x": 1e300}))
        assert "error" not in server.until(21)[-1]
        server.send(call(22, "list_memories"))
        text = server.until(22)[-1]["result"]["content"][0]["text"]
        assert "Infinity" not in text and json.loads(text)
    finally:
        server.close()
    assert all(json.loads(line) for line in server.lines)


def test_a_malformed_notification_is_dropped_never_answered(home):
    server = RawServer(home).start()
    try:
        server.send(b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":"x"}',
                    b'{"jsonrpc":"2.0","method":"notifications/initialized","params":3}',
                    b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"a":1,"a":2}}',
                    {"jsonrpc": "2.0", "id": 2, "method": "ping"})
        assert server.until(2) == [{"jsonrpc": "2.0", "id": 2, "result": {}}], "no reply to any notification"
    finally:
        server.close()


def test_closing_stdin_right_after_a_request_still_gets_its_real_reply(home):
    server = RawServer(home).start()
    server.send(call(2, "store_memory", content="q0"), call(3, "store_memory", content="q1"))
    rest = server.close()
    replies = {r["id"]: r for r in map(json.loads, rest.splitlines())}
    assert set(replies) == {2, 3}, replies
    assert all("result" in r and not r["result"].get("isError") for r in replies.values()), replies


@pytest.mark.parametrize("path", ["/etc", "../.."])
def test_reading_a_graph_resource_of_a_bad_path_is_invalid_params(home, path):
    server = RawServer(home).start()
    try:
        server.send({"jsonrpc": "2.0", "id": 2, "method": "resources/read",
                     "params": {"uri": f"memloci://graph?path={path}"}})
        error = server.until(2)[-1]["error"]
        assert error["code"] == -32602 and error["message"].startswith(("VALIDATION_ERROR", "NOT_FOUND")), error
    finally:
        server.close()
