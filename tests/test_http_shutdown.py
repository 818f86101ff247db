"""SIGTERM under load: a real `memloci serve --transport http` process, Python SDK clients writing
in a loop, and one call held running by a write lock on its library when the signal comes.

Counted afterwards: every request got a reply (200 with a result, or 503 with the server's
JSON-RPC error), none was cut; every request sent after the server logged the signal was a
503; every acknowledged write is in the library file and no refused one is; the call running
at the signal got its reply; the process exited 0 within the drain window. Nothing is timed
beyond the drain window's bound: the running call is held by a lock, not by its size.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult
from test_http import Server, create_token

from memloci.http.app import SHUTTING_DOWN
from memloci.http.settings import DEFAULT_DRAIN_TIMEOUT

pytestmark = pytest.mark.full
WRITERS = 6
WRITES_PER_SESSION = 4
HAMMERS = 32
PROBE = "sent after the server logged SIGTERM"  # each writer opens sessions one after another: new sessions come all the time


@dataclass
class Sent:
    """One HTTP request as the client's transport saw it."""

    method: str  # GET, POST, DELETE
    rpc: str | None  # the JSON-RPC method of a POST, None for a notification's or a response's absence
    at: float  # monotonic time it was handed to the transport
    status: int | None = None
    error: str | None = None


@dataclass
class Tally:
    requests: list[Sent] = field(default_factory=list)
    acknowledged: dict[str, str] = field(default_factory=dict)  # write key -> "memory" | "entity"
    refused: dict[str, float] = field(default_factory=dict)  # write key -> when it was sent
    refused_sessions: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)


class RecordingTransport(httpx2.AsyncBaseTransport):
    """httpx's own transport, writing down each request and what came back: a status or an error."""

    def __init__(self, tally: Tally):
        self.inner, self.tally = httpx2.AsyncHTTPTransport(), tally

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        rpc = None
        if request.method == "POST":
            rpc = json.loads(request.content).get("method")
        sent = Sent(request.method, rpc, time.monotonic())
        self.tally.requests.append(sent)
        try:
            response = await self.inner.handle_async_request(request)
        except Exception as exc:
            sent.error = repr(exc)
            raise
        sent.status = response.status_code
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


@asynccontextmanager
async def recorded_session(server: Server, token: str, tally: Tally):
    async with httpx2.AsyncClient(headers={"authorization": f"Bearer {token}"}, timeout=120,
                                  transport=RecordingTransport(tally)) as http:
        async with streamable_http_client(server.url, http_client=http) as (read, write, *_):
            async with ClientSession(read, write) as s:
                await s.initialize()
                await s.list_tools()  # the output schemas, so that a call's reply is checked without another request
                yield s


def shutting_down(exc: BaseException) -> bool:
    """Is this (or an error in this group) the server's 503 during shutdown?"""
    if isinstance(exc, BaseExceptionGroup):
        return any(shutting_down(e) for e in exc.exceptions)
    return getattr(getattr(exc, "error", None), "code", None) == SHUTTING_DOWN


async def writer(server: Server, token: str, c: int, tally: Tally) -> None:
    """Sessions one after another, each with a few writes, until the server refuses one."""
    n = 0
    while True:
        opened = time.monotonic()
        try:
            async with recorded_session(server, token, tally) as s:
                for _ in range(WRITES_PER_SESSION):
                    key = f"writer {c} write {n}"
                    n += 1
                    if n % 2:
                        kind, args = "memory", {"content": key, "tags": [f"w{c}"]}
                        tool = "store_memory"
                    else:
                        kind, args = "entity", {"entities": [{"name": key, "entityType": "load",
                                                              "observations": [f"written by writer {c}"]}]}
                        tool = "create_entities"
                    sent = time.monotonic()
                    try:
                        with anyio.fail_after(120):
                            result = await s.call_tool(tool, {**args, "library": "team"})
                    except Exception as exc:
                        if shutting_down(exc):
                            tally.refused[key] = sent
                            return
                        tally.failures.append(f"{key}: {exc!r}")
                        return
                    if result.is_error:
                        tally.failures.append(f"{key}: {result.content[0].text[:200]}")
                        return
                    tally.acknowledged[key] = kind
        except Exception as exc:
            if shutting_down(exc):  # initialize refused: a new session after the signal
                tally.refused_sessions.append(opened)
                return
            tally.failures.append(f"writer {c} session: {exc!r}")
            return


async def hammer(server: Server, token: str, outcomes: list[tuple[float, str]]) -> None:
    """A client that takes no hint: a request at once after each reply, each on a new connection
    after the signal (the server closes them), until the process has exited. What matters is
    the moment the server stops listening: a request on its way in then must still get a reply."""
    headers = {"authorization": f"Bearer {token}", "accept": "application/json, text/event-stream"}
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}  # without a session: 400 before the signal, 503 after
    async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
        while server.process.poll() is None:
            sent = time.monotonic()
            try:
                outcomes.append((sent, str((await http.post(server.url, json=ping)).status_code)))
            except httpx2.ConnectError:  # nothing listens: the request was never sent
                outcomes.append((sent, "refused"))
                await anyio.sleep(0.01)
            except httpx2.HTTPError as exc:
                outcomes.append((sent, repr(exc)))


def log_has(server: Server, text: str) -> bool:
    return text in server.log.read_text(errors="replace")


async def seed_anchor(server: Server, token: str) -> None:
    """The entity a held call adds to, in the library whose file the test locks."""
    async with recorded_session(server, token, Tally()) as s:
        result = await s.call_tool("create_entities", {"library": "other", "entities": [
            {"name": "anchor", "entityType": "t", "observations": ["first"]}]})
        assert not result.is_error


async def add_to_anchor(server: Server, token: str, tally: Tally, content: str, out: dict[str, Any]) -> None:
    """The call the test holds on the write lock: its reply (or the exception of no reply) in out["result"]."""
    try:
        async with recorded_session(server, token, tally) as s:
            out["result"] = await s.call_tool("add_observations", {"library": "other", "observations": [
                {"entityName": "anchor", "contents": [content]}]})
    except Exception as exc:  # the server went away without a reply
        out.setdefault("result", exc)


async def sigterm_once_the_call_runs(server: Server) -> float:
    """SIGTERM once the held call has started; when the server has said it took the signal."""
    with anyio.fail_after(60):
        while not log_has(server, "call started tool=add_observations"):
            await anyio.sleep(0.02)
    server.process.send_signal(signal.SIGTERM)
    with anyio.fail_after(30):
        while not log_has(server, "SIGTERM: refusing new calls"):
            await anyio.sleep(0.01)
    return time.monotonic()


def test_sigterm_under_load_answers_every_request_and_keeps_every_acknowledged_write(tmp_path: Path):
    (tmp_path / "config.toml").write_text("[http]\nrate_limit = 0\n")  # the rate limit is not what is tested
    token = create_token(tmp_path, "w", "*:write")
    pinger = create_token(tmp_path, "pinger", "team:read")
    server = Server(tmp_path, MEMLOCI_LOG_LEVEL="DEBUG")
    pings: list[tuple[float, str]] = []
    tally = Tally()
    slow: dict[str, Any] = {}
    probes: list[bool] = []  # for each probe sent after the signal: was it refused as shutting down?
    seen: dict[str, float] = {}

    async def main() -> None:
        await seed_anchor(server, token)
        lock = sqlite3.connect(tmp_path / "other.db", isolation_level=None)
        lock.execute("BEGIN IMMEDIATE")  # the held call waits for this write lock (busy timeout)
        try:
            async with anyio.create_task_group() as load:
                for c in range(WRITERS):
                    load.start_soon(writer, server, token, c, tally)
                for _ in range(HAMMERS):
                    load.start_soon(hammer, server, pinger, pings)
                with anyio.fail_after(120):
                    while len(tally.acknowledged) < 3 * WRITERS:  # the load is going
                        await anyio.sleep(0.05)
                async with anyio.create_task_group() as held, recorded_session(server, token, tally) as probe:
                    held.start_soon(add_to_anchor, server, token, tally, "added while the server was asked to stop",
                                    slow)
                    seen["sigterm"] = await sigterm_once_the_call_runs(server)
                    # whatever the writers were doing at that moment: a call in an open session, and a
                    # new session, both sent now, are refused
                    try:
                        await probe.call_tool("store_memory", {"content": PROBE, "library": "team"})
                    except Exception as exc:
                        probes.append(shutting_down(exc))
                    try:
                        async with recorded_session(server, token, tally):
                            pass
                    except Exception as exc:
                        probes.append(shutting_down(exc))
                    with anyio.fail_after(120):  # every writer is refused and stops; the held call still waits
                        while len(tally.refused) + len(tally.refused_sessions) + len(tally.failures) < WRITERS:
                            await anyio.sleep(0.05)
                    assert "result" not in slow and server.process.poll() is None
                    lock.execute("ROLLBACK")
        finally:
            lock.close()

    anyio.run(main)
    code = server.process.wait(timeout=DEFAULT_DRAIN_TIMEOUT + 15)
    exited = time.monotonic()
    server.err.close()
    log = server.log.read_text(errors="replace")

    assert not tally.failures, f"{tally.failures[:5]}\n{log[-3000:]}"
    assert code == 0, log[-3000:]
    assert exited - seen["sigterm"] < DEFAULT_DRAIN_TIMEOUT + 10
    # the call running at the signal got its reply, and its write is kept
    result = slow["result"]
    assert not isinstance(result, Exception), repr(result)
    assert not result.is_error, result.content[0].text
    # every request got a status; after the signal, every call and every new session got 503
    assert all(r.error is None and r.status is not None for r in tally.requests), \
        [r for r in tally.requests if r.error or r.status is None][:5]
    late = [r for r in tally.requests if r.at > seen["sigterm"] and r.rpc in ("tools/call", "initialize")]
    assert late and all(r.status == 503 for r in late), [r for r in late if r.status != 503][:5]
    assert all(r.status == 503 for r in tally.requests if r.method == "GET" and r.at > seen["sigterm"])
    assert len(tally.refused) + len(tally.refused_sessions) == WRITERS
    assert probes == [True, True]
    # the clients that took no hint: a reply to each request, until nothing listened
    assert {o for _, o in pings} <= {"400", "503", "refused"}, [o for _, o in pings if not o.isalnum()][:5]
    assert all(o in ("503", "refused") for at, o in pings if at > seen["sigterm"])
    assert any(o == "503" for _, o in pings) and pings[-1][1] == "refused"
    assert "SIGTERM: refusing new calls" in log and "all running calls answered" in log
    assert "drain window" not in log and "unfinished" not in log

    with sqlite3.connect(tmp_path / "team.db") as con:
        names = {row[0] for row in con.execute("SELECT name FROM entities")}
        contents = {row[0] for row in con.execute("SELECT content FROM memories WHERE entity_id IS NULL")}
    with sqlite3.connect(tmp_path / "other.db") as con:
        observations = {row[0] for row in con.execute("SELECT content FROM memories WHERE entity_id IS NOT NULL")}
    kept = names | contents
    acknowledged = set(tally.acknowledged)
    assert acknowledged <= kept, sorted(acknowledged - kept)[:5]
    assert not (set(tally.refused) | {PROBE}) & kept, "a refused call's write landed"
    assert "added while the server was asked to stop" in observations



def test_a_call_running_past_the_drain_window_is_cut_and_the_server_stops(tmp_path: Path):
    """`--drain-timeout 2`, one call held (by the write lock) past it: the server gives up on it
    within the window and the close after it, says so, refuses what comes after the signal,
    and exits 0; the held call gets no reply, and its library opens and reads whole.

    The held call waits in a worker thread, which nothing can stop: the process exits only
    once it has ended (by SQLite's busy timeout, 60 s, if the lock were never released). So the
    lock is released once the server has logged that it gave up on the call, and the write then
    lands, unacknowledged and whole."""
    window = 2.0
    token = create_token(tmp_path, "w", "*:write")
    server = Server(tmp_path, "--drain-timeout", f"{window:g}", MEMLOCI_LOG_LEVEL="DEBUG")
    held: dict[str, Any] = {}
    probes: list[bool] = []
    seen: dict[str, float] = {}

    async def main() -> None:
        await seed_anchor(server, token)
        lock = sqlite3.connect(tmp_path / "other.db", isolation_level=None)
        lock.execute("BEGIN IMMEDIATE")  # the held call waits for this write lock, past the window
        try:
            async with anyio.create_task_group() as calls, recorded_session(server, token, Tally()) as probe:
                calls.start_soon(add_to_anchor, server, token, Tally(), "held past the drain window", held)
                seen["sigterm"] = await sigterm_once_the_call_runs(server)
                try:
                    await probe.call_tool("store_memory", {"content": PROBE, "library": "team"})
                except Exception as exc:
                    probes.append(shutting_down(exc))
                with anyio.fail_after(window + 60):  # the lock is still held: only the window ends the wait
                    while not log_has(server, "tool calls unfinished"):
                        await anyio.sleep(0.05)
                seen["gave up"] = time.monotonic()
                assert server.process.poll() is None  # still waiting for the held call to end
                lock.execute("ROLLBACK")
                with anyio.fail_after(60):
                    while server.process.poll() is None:
                        await anyio.sleep(0.05)
                seen["exited"] = time.monotonic()
                calls.cancel_scope.cancel()  # the held call's client would wait for a reply that will not come
        finally:
            lock.close()

    anyio.run(main)
    code = server.process.wait(timeout=5)
    server.err.close()
    log = server.log.read_text(errors="replace")
    story = "\n".join(line for line in log.splitlines() if " DEBUG " not in line)[-3000:]  # for a failure

    assert probes == [True], story  # a request after the signal: 503
    assert f"drain window of {window:g} s over with 1 call still running: stopping; their clients get no reply" \
        in log, story
    assert "shutting down with 1 tool calls unfinished" in log
    assert "all running calls answered" not in log and "tool=add_observations library=other" not in log
    # no acknowledgement reached the client: its stream ended without a reply
    assert isinstance(held.get("result"), Exception) and not isinstance(held["result"], CallToolResult), held
    assert "SSE stream ended without a response" in repr(held["result"]), held
    assert code == 0, story
    # the promise: the server gives up on the call within the window and the close after it (5 s
    # for the call to end its write), with a margin for a busy machine; then exits once it ended
    assert seen["gave up"] - seen["sigterm"] < window + 5 + 10, story
    assert seen["exited"] - seen["gave up"] < 15, story

    with sqlite3.connect(tmp_path / "other.db") as con:  # whole: the first write, and the held one entire
        assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        observations = sorted(row[0] for row in con.execute(
            "SELECT m.content FROM memories m JOIN entities e ON e.id = m.entity_id WHERE e.name = 'anchor'"))
    assert observations == ["first", "held past the drain window"], observations
    with sqlite3.connect(tmp_path / "team.db") as con:  # refused before it opened the library
        tables = {row[0] for row in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        stored = {row[0] for row in con.execute("SELECT content FROM memories")} if "memories" in tables else set()
    assert PROBE not in stored
