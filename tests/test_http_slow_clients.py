"""Slow and surplus clients against a real `memloci serve --transport http` process: connections
that send their headers or their body a little at a time are closed once the limit is over, and
connections beyond the cap are answered 503 at once, while a well-behaved client is served
throughout. The limits are set small here; each check allows the limit plus a wide margin for
a busy machine, and nothing is asserted about speed beyond that bound.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import anyio
import httpx2
import pytest
from test_http import INIT, Server, create_token, session

pytestmark = pytest.mark.full
MARGIN = 8.0  # seconds beyond a limit that a loaded machine may take to close a connection
GIVE_UP = 40.0  # a connection still open this long after it opened was not cut


@dataclass
class Cut:
    after: float | None = None  # seconds from opening to the server's close; None: never closed
    reply: bytes = b""  # what the server sent before closing


async def dribble(port: int, head: bytes, piece: bytes, every: float) -> Cut:
    """Open a connection, send `head`, then `piece` every `every` seconds until the server closes it."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    opened = time.monotonic()
    cut = Cut()
    try:
        writer.write(head)
        while time.monotonic() - opened < GIVE_UP:
            try:
                data = await asyncio.wait_for(reader.read(65536), every)
            except TimeoutError:
                writer.write(piece)
                continue
            if not data:  # the server closed it
                cut.after = time.monotonic() - opened
                return cut
            cut.reply += data
    except (ConnectionError, OSError):
        cut.after = time.monotonic() - opened
    finally:
        writer.close()
    return cut


async def served_while(server: Server, token: str, busy: asyncio.Future) -> int:
    """A well-behaved client's calls while `busy` runs: how many were answered."""
    answered = 0
    async with session(server, token) as s:
        while not busy.done():
            result = await s.call_tool("search_nodes", {"query": "x", "library": "team"})
            assert not result.is_error
            answered += 1
            await anyio.sleep(0.2)
    return answered


@pytest.fixture(scope="module")
def slow_limits(tmp_path_factory):
    home = tmp_path_factory.mktemp("slow")
    token = create_token(home, "w", "team:write")
    server = Server(home, "--header-timeout", "2", "--body-timeout", "2")
    yield server, token
    assert server.stop() == 0


def test_connections_sending_headers_slowly_are_closed_within_the_header_limit(slow_limits):
    server, token = slow_limits
    head = f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n".encode()

    async def main() -> tuple[list[Cut], int]:
        slow = asyncio.gather(*(dribble(server.port, head, b"X-Slow: 1\r\n", 1.0) for _ in range(200)))
        answered = await served_while(server, token, slow)
        return await slow, answered

    cuts, answered = anyio.run(main)
    assert answered >= 1  # served during the slowloris
    assert all(c.after is not None for c in cuts), f"{sum(c.after is None for c in cuts)} of 200 still open"
    assert max(c.after for c in cuts if c.after is not None) <= 2 + MARGIN
    assert sum(c.reply.startswith(b"HTTP/1.1 408") for c in cuts) >= 190  # a few may be reset before reading it
    assert "closed connections that took over 2 s to send a request's headers" in server.log.read_text()


def test_authenticated_connections_sending_a_body_slowly_are_closed_within_the_body_limit(slow_limits):
    server, token = slow_limits
    head = (f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nAuthorization: Bearer {token}\r\n"
            "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
            "Content-Length: 1000\r\n\r\n{").encode()

    async def main() -> tuple[list[Cut], int]:
        slow = asyncio.gather(*(dribble(server.port, head, b" ", 1.0) for _ in range(100)))
        answered = await served_while(server, token, slow)
        return await slow, answered

    cuts, answered = anyio.run(main)
    assert answered >= 1
    assert all(c.after is not None for c in cuts), f"{sum(c.after is None for c in cuts)} of 100 still open"
    assert max(c.after for c in cuts if c.after is not None) <= 2 + MARGIN
    replies = [c.reply for c in cuts if c.reply]
    assert replies and all(r.startswith(b"HTTP/1.1 408") and b"request body took longer than 2 s" in r
                           for r in replies)
    assert "closed connections that took over 2 s to send a request's body" in server.log.read_text()


def test_connections_beyond_the_cap_get_503_at_once_and_clients_are_served_once_slots_free(tmp_path):
    server = Server(tmp_path, "--max-connections", "20", "--header-timeout", "60")

    async def main() -> None:
        await anyio.sleep(0.5)  # the connections of the start's health checks are gone
        held = [await asyncio.open_connection("127.0.0.1", server.port) for _ in range(20)]
        await anyio.sleep(0.5)  # the server has taken them all
        async with httpx2.AsyncClient(timeout=30) as http:
            refused = await http.get(f"http://127.0.0.1:{server.port}/healthz")
            assert refused.status_code == 503 and refused.headers["retry-after"] == "1", refused.text
            assert "20 connections open" in refused.text
        for _, writer in held[:5]:
            writer.close()
        async with httpx2.AsyncClient(timeout=30) as http:
            with anyio.fail_after(30):
                while (await http.get(f"http://127.0.0.1:{server.port}/healthz")).status_code != 200:
                    await anyio.sleep(0.2)
            reply = await http.post(server.url, json=INIT, headers={"accept": "application/json, text/event-stream"})
            assert reply.status_code == 200
        for _, writer in held[5:]:
            writer.close()

    try:
        anyio.run(main)
    finally:
        assert server.stop() == 0
    assert "refused connections beyond the cap of 20 open at once" in server.log.read_text()


def test_connections_waiting_in_the_backlog_are_taken_in_before_the_listener_closes():
    """Clients whose handshake the kernel completed, not yet accepted when the server stops:
    take_waiting accepts each at once, the listener closes, serve_taken hands each to a
    protocol, which reads its request: none is reset by the close."""
    import socket

    from memloci.http.connections import serve_taken, take_waiting

    async def main() -> None:
        loop = asyncio.get_running_loop()
        got: list[bytes] = []

        class Echo(asyncio.Protocol):
            def connection_made(self, transport):  # type: ignore[no-untyped-def]
                self.transport = transport

            def data_received(self, data: bytes) -> None:
                got.append(data)
                self.transport.write(b"seen " + data)
                self.transport.close()

        server = await loop.create_server(Echo, "127.0.0.1", 0, backlog=16)
        port = server.sockets[0].getsockname()[1]
        clients = []
        for i in range(5):  # blocking connects, the loop never runs: all five wait in the backlog
            c = socket.create_connection(("127.0.0.1", port))
            c.sendall(b"request %d" % i)
            c.setblocking(False)
            clients.append(c)
        waiting = take_waiting(server.sockets)
        server.close()  # the listener closes right after, as the server's shutdown does
        taken = await serve_taken(waiting, Echo)
        replies = [await asyncio.wait_for(loop.sock_recv(c, 100), 5) for c in clients]
        for c in clients:
            c.close()
        assert all(r.startswith(b"seen request") for r in replies), replies
        assert taken == 5 and sorted(got) == [b"request %d" % i for i in range(5)]

    asyncio.run(main())
