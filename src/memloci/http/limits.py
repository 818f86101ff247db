"""Checks on a request before the SDK sees it: body size, message shape, rate.

Each refusal is an HTTP status with a JSON-RPC error body that says what was wrong, so a
client (or its log) learns why its call failed:

- a body over the limit                        -> 413, -32600 naming both sizes
- what the stdio reader refuses (mcp/stdio.py `parse_line`: not JSON, a batch, a doubled
  key, an overflowing number, bad UTF-8, a tools/call without a string name, ...)
                                               -> 400 with the same JSON-RPC error as over stdio
- more calls than a token's rate allows        -> 429 with Retry-After (seconds)

The message checks are stdio's own function, called on the whole body (one body is one
message over streamable HTTP), so both transports refuse exactly the same messages.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Sequence
from typing import Any

import mcp_types as types
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memloci.mcp.stdio import Refusal, parse_line

RATE_LIMITED = -32029  # a server-defined JSON-RPC code (the -32000..-32099 range)


async def send_json(send: Send, status: int, body: dict[str, Any], headers: Sequence[tuple[bytes, bytes]] = ()) -> None:
    data = json.dumps(body, ensure_ascii=False).encode("utf-8")
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode()),
                            *headers]})
    await send({"type": "http.response.body", "body": data})


def rpc_error(code: int, message: str, request_id: Any = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


class MessageGuard:
    """Reads a POST body (at most `max_bytes`), checks it as stdio checks a line, then passes it on unchanged."""

    def __init__(self, app: ASGIApp, max_bytes: int):
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._too_large(send, int(declared))
            return
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            body.extend(message.get("body", b""))
            if len(body) > self.max_bytes:
                await self._too_large(send, None)
                return
            if not message.get("more_body", False):
                break
        try:
            parsed = parse_line(bytes(body), set())
            if parsed is None:
                raise Refusal(types.INVALID_REQUEST, "Invalid Request: the body is empty; send one JSON-RPC message")
            scope["memloci.message"] = parsed  # for the checks after this one (app.ShutdownGate)
        except Refusal as refusal:
            await send_json(send, 400, rpc_error(refusal.code, refusal.message, refusal.request_id))
            return
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _too_large(self, send: Send, size: int | None) -> None:
        told = f"{size} bytes" if size is not None else f"more than {self.max_bytes} bytes"
        await send_json(send, 413, rpc_error(types.INVALID_REQUEST,
                                             f"Invalid Request: the request body ({told}) exceeds the server's limit of "
                                             f"{self.max_bytes} bytes; send smaller batches of items"))


class RateLimiter:
    """A token bucket per caller: `per_minute` calls a minute on average, bursts up to `per_minute`."""

    def __init__(self, per_minute: int):
        self.per_minute = per_minute
        self._buckets: dict[str, tuple[float, float]] = {}  # caller -> (tokens left, at monotonic time)
        self._lock = threading.Lock()

    def take(self, caller: str) -> float:
        """0 when the call may go ahead, else the seconds until it may."""
        return self._take(caller, 1.0)

    def waiting(self, caller: str) -> float:
        """What `take` would answer, taking nothing: for what only counts once it is known to
        have failed (a sign-in)."""
        return self._take(caller, 0.0)

    def _take(self, caller: str, cost: float) -> float:
        if self.per_minute <= 0:
            return 0.0
        rate = self.per_minute / 60.0
        now = time.monotonic()
        with self._lock:
            tokens, then = self._buckets.get(caller, (float(self.per_minute), now))
            tokens = min(float(self.per_minute), tokens + (now - then) * rate)
            if tokens >= 1.0:
                if not cost:
                    return 0.0
                self._buckets[caller] = (tokens - cost, now)
                return 0.0
            self._buckets[caller] = (tokens, now)
            return (1.0 - tokens) / rate


class RateLimit:
    """Refuses a token's POSTs beyond its rate with 429 and Retry-After. Requests without a token
    (a loopback server with no tokens configured) are not limited: there is no one to tell apart."""

    def __init__(self, app: ASGIApp, limiter: RateLimiter):
        self.app, self.limiter = app, limiter

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        user = scope.get("user")
        token = getattr(user, "access_token", None)
        if scope["type"] == "http" and scope["method"] == "POST" and token is not None:
            wait = self.limiter.take(token.client_id)
            if wait > 0:
                seconds = max(1, math.ceil(wait))
                await send_json(send, 429, rpc_error(RATE_LIMITED,
                                                     f"Rate limited: token '{token.client_id}' may make "
                                                     f"{self.limiter.per_minute} calls a minute; retry after "
                                                     f"{seconds} s"),
                                [(b"retry-after", str(seconds).encode())])
                return
        await self.app(scope, receive, send)


TOO_MANY_SESSIONS = -32030  # a server-defined JSON-RPC code (the -32000..-32099 range)


class SessionCap:
    """At most `per_token` open sessions per token (0: no cap), so that one token cannot fill the
    SDK's server-wide session table and lock every other client out.

    A token at its cap that opens another session closes its own oldest idle one (no request
    being served, no stream open: a client that went away without DELETE), whose ID then
    answers 404 as an expired session does; with none idle the new session is refused with
    429 naming the limit. Opening requests of one token go through one at a time, so a burst
    of them cannot slip past the count."""

    def __init__(self, app: ASGIApp, manager: Any, per_token: int):
        self.app, self.manager, self.per_token = app, manager, per_token
        self._locks: dict[str, Any] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        token = getattr(scope.get("user"), "access_token", None)
        opening = (scope["type"] == "http" and scope["method"] == "POST"
                   and not any(k == b"mcp-session-id" for k, _ in scope["headers"]))
        if token is None or not opening or self.per_token <= 0 or self.manager.stateless:
            await self.app(scope, receive, send)
            return
        import anyio

        lock = self._locks.setdefault(token.client_id, anyio.Lock())
        async with lock:
            # the SDK's tables, in creation order: the owner of each session, and its transport
            mine = [sid for sid, owner in list(self.manager._session_owners.items())
                    if owner.get("client_id") == token.client_id]
            if len(mine) >= self.per_token:
                idle = [sid for sid in mine
                        if getattr(self.manager._server_instances.get(sid), "_requests_in_flight", 1) == 0]
                if not idle:
                    await send_json(send, 429, rpc_error(
                        TOO_MANY_SESSIONS, f"Too many sessions: token '{token.client_id}' may have "
                        f"{self.per_token} open sessions at once, and all are in use; close one (DELETE) first"))
                    return
                transport = self.manager._server_instances.get(idle[0])
                if transport is not None:
                    await self.manager._discard_session(idle[0], transport)
            await self.app(scope, receive, send)
