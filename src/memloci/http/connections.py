"""Slow and surplus connections, cut where the bytes arrive: uvicorn's h11 protocol with two
deadlines and a cap.

uvicorn (0.54) closes a keep-alive connection idle between requests (`timeout_keep_alive`) and
can answer 503 beyond `limit_concurrency`, but it sets no deadline on receiving a request: a
client sending one header line, or one body byte, every few seconds holds its connection (a
file, a buffer) for as long as it likes, and `limit_concurrency` counts only requests whose
headers came in full, so such clients are never refused. What is missing is added here, in
the protocol, the only place that sees each byte arrive (an ASGI middleware sees a request
only once its headers are complete):

- headers: from a connection's opening, or from the first byte of its next request, until
  the request's last header line: at most `header_timeout` seconds; then 408 and close;
- body: from the headers until the body's last byte: at most `body_timeout` seconds; then 408
  with a JSON-RPC error, and close;
- connections: at most `max_connections` open at once; one more is answered 503 with
  Retry-After and closed at once, before anything of it is read.
- stopping: uvicorn closes each connection with no request under way at once, which resets
  one whose request is on its way in; here such a connection gets STOP_GRACE_SECONDS for its
  request to arrive and be answered (503, during shutdown) first. And closing the listening
  socket resets the connections the kernel has completed but nobody has accepted yet (its
  backlog, full of them when clients reconnect at once after each reply): `take_waiting`
  takes those in first, so they get the same grace.

The time an application takes to answer is not limited here: a tool call may run long.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger("memloci.http")
REFUSED_CLOSE_SECONDS = 1.0  # a refused connection's 503 is read (and its request dropped) for at most this long
# When uvicorn stops, it closes at once each connection with no request under way; but a request
# may be on its way in (sent, not yet read, as on a connection accepted an instant before), and
# closing with it unread resets the connection: its client never learns what became of it. Such
# a connection gets this long for a request to arrive and be answered (503, during shutdown).
STOP_GRACE_SECONDS = 2.0
LOG_EVERY_SECONDS = 10.0  # at most one line a kind this often: a flood of slow clients must not flood the log


def _response(status: str, body: bytes, content_type: bytes, *extra: bytes) -> bytes:
    head = [b"HTTP/1.1 " + status.encode(), b"content-type: " + content_type,
            b"content-length: " + str(len(body)).encode(), b"connection: close", *extra]
    return b"\r\n".join(head) + b"\r\n\r\n" + body


def _rpc_error(message: str) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}}).encode()


@dataclass
class ConnectionLimits:
    header_timeout: float
    body_timeout: float
    max_connections: int
    closed: dict[str, int] = field(default_factory=dict)  # kind -> connections cut since its last log line
    logged: dict[str, float] = field(default_factory=dict)  # kind -> monotonic time of its last log line

    def note(self, kind: str) -> None:
        """Count a connection cut; say so in the log at most once per LOG_EVERY_SECONDS and kind."""
        self.closed[kind] = self.closed.get(kind, 0) + 1
        now = time.monotonic()
        if now - self.logged.get(kind, -LOG_EVERY_SECONDS) < LOG_EVERY_SECONDS:
            return
        count, self.closed[kind], self.logged[kind] = self.closed[kind], 0, now
        if kind == "headers":
            log.warning("closed connections that took over %g s to send a request's headers (%d)", self.header_timeout,
                        count)
        elif kind == "body":
            log.warning("closed connections that took over %g s to send a request's body (%d)", self.body_timeout, count)
        else:
            log.warning("refused connections beyond the cap of %d open at once (%d)", self.max_connections, count)

    def header_timeout_response(self) -> bytes:
        return _response("408 Request Timeout", f"The request's headers took longer than {self.header_timeout:g} s "
                         "to arrive.\n".encode(), b"text/plain; charset=utf-8")

    def body_timeout_response(self) -> bytes:
        return _response("408 Request Timeout", _rpc_error(
            f"Invalid Request: the request body took longer than {self.body_timeout:g} s to arrive; send it "
            "at once"), b"application/json")

    def refused_response(self) -> bytes:
        return _response("503 Service Unavailable", f"The server has {self.max_connections} connections open, "
                         "its limit; retry in a moment.\n".encode(), b"text/plain; charset=utf-8", b"retry-after: 1")


def limited_protocol(limits: ConnectionLimits) -> type[H11Protocol]:
    """The protocol class for `uvicorn.Config(http=...)`: uvicorn's h11 protocol under `limits`.
    (A subclass, because uvicorn takes a protocol class and calls into its methods itself.)"""

    class LimitedH11Protocol(H11Protocol):
        refused = False
        stopping = False
        deadline: asyncio.TimerHandle | None = None
        deadline_kind: str | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            if len(self.connections) >= limits.max_connections:
                self.refused, self.transport = True, transport
                limits.note("connections")
                transport.write(limits.refused_response())
                if transport.can_write_eof():
                    transport.write_eof()  # the 503, then the end; reading on, so that closing sends no reset
                self.loop.call_later(REFUSED_CLOSE_SECONDS, transport.close)
                return
            super().connection_made(transport)
            self._arm("headers", limits.header_timeout)

        def data_received(self, data: bytes) -> None:
            if not self.refused:  # a refused connection's request is dropped unread
                super().data_received(data)

        def eof_received(self) -> None:
            if self.refused:
                self.transport.close()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            if not self.refused:
                super().connection_lost(exc)

        def handle_events(self) -> None:
            super().handle_events()
            if self.stopping and self.cycle is not None:
                self.cycle.keep_alive = False  # a request that came in the grace: answered, then closed
            self._follow()

        def shutdown(self) -> None:
            """uvicorn is stopping: a connection between requests waits STOP_GRACE_SECONDS for one on its way."""
            if self.cycle is not None and not self.cycle.response_complete:
                super().shutdown()  # a request under way: answered, then closed
            elif not self.stopping:
                self.stopping = True
                self.loop.call_later(STOP_GRACE_SECONDS, self._stop_now)

        def _stop_now(self) -> None:
            if not self.transport.is_closing():
                super().shutdown()

        def _follow(self) -> None:
            """Arm the deadline the client's side of the connection is under now, if any."""
            if self.transport.is_closing():
                self._disarm()
                return
            state = self.conn.their_state
            if state is h11.SEND_BODY:
                if self.deadline_kind != "body":
                    self._arm("body", limits.body_timeout)
            elif state is h11.IDLE and (self.cycle is None or self.conn.trailing_data[0]):
                # waiting for a first request, or part of the next one has come: the headers' clock
                # runs from then (an idle keep-alive connection is uvicorn's timeout_keep_alive's)
                if self.deadline_kind != "headers":
                    self._arm("headers", limits.header_timeout)
            else:
                self._disarm()

        def _arm(self, kind: str, seconds: float) -> None:
            self._disarm()
            self.deadline_kind = kind
            self.deadline = self.loop.call_later(seconds, self._too_slow, kind)

        def _disarm(self) -> None:
            if self.deadline is not None:
                self.deadline.cancel()
            self.deadline = self.deadline_kind = None

        def _too_slow(self, kind: str) -> None:
            self.deadline = self.deadline_kind = None
            if self.transport.is_closing():
                return
            limits.note(kind)
            if kind == "headers":
                self.transport.write(limits.header_timeout_response())
            elif self.cycle is None or not self.cycle.response_started:
                self.transport.write(limits.body_timeout_response())
            self.transport.close()  # the application reading the body gets http.disconnect

    return LimitedH11Protocol


def take_waiting(listeners: Iterable[socket.socket | Any]) -> list[socket.socket]:
    """Accept every connection waiting in the listening sockets' backlogs, at once (no await):
    called right before the listeners close, so that a connection whose handshake the kernel
    completed is answered rather than reset by the close. The caller hands each to a protocol
    (`serve_taken`) once the listeners are closed."""
    taken: list[socket.socket] = []
    for listener in listeners:
        own = socket.socket(fileno=os.dup(listener.fileno()))  # the same listening socket; closing it closes the copy
        own.setblocking(False)
        try:
            while True:
                try:
                    conn, _ = own.accept()
                except (BlockingIOError, InterruptedError):
                    break
                except OSError:  # the listener is gone (closed, or out of files): nothing more to take
                    break
                conn.setblocking(False)
                taken.append(conn)
        finally:
            own.close()
    return taken


async def serve_taken(taken: list[socket.socket], protocol: Callable[[], asyncio.Protocol]) -> int:
    """Serve each connection `take_waiting` took with a new `protocol()`; how many are served."""
    loop = asyncio.get_running_loop()
    served = 0
    for conn in taken:
        try:
            await loop.connect_accepted_socket(protocol, sock=conn)
        except OSError:  # the client left already
            conn.close()
            continue
        served += 1
    return served
