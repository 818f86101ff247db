"""`GET /api/events`: server-sent events telling the page that a library it may read changed.

An event `change` (`{"library", "change_id", "action", "entities"}`) for each new journal
entry, whoever wrote it: an agent over MCP in this server, the page, or another process writing
the same library file. Each stream reads its libraries' newest journal entries about every
POLL_SECONDS, and at once when this process's dashboard writes (`Changes.nudge`); a comment
`: ping` every PING_SECONDS keeps proxies from closing an idle stream. A stream ends when the
client goes, when its sign-in ends (checked at each ping), or at the server's shutdown (the
drain sets sse-starlette's AppStatus.should_exit once the running calls are answered, see
http/app.py), so it never holds a shutdown up."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import anyio
import anyio.to_thread
from sse_starlette.sse import EventSourceResponse, ServerSentEvent
from starlette.requests import Request
from starlette.responses import Response

from memloci.core.errors import MemlociError, ValidationError
from memloci.http.dashboard.auth import Access, Who, check_site, refused
from memloci.http.dashboard.endpoint import NO_STORE, error_response
from memloci.service.facade import MemoryService

POLL_SECONDS = 1.0
PING_SECONDS = 15.0
READ_AT_ONCE = 100  # journal entries read per library and poll
STREAMS_PER_CALLER = 8  # event streams one token (or, in open mode, one address) keeps open at once
STOP_GRACE_SECONDS = 2.0  # at shutdown, how long a stream has to end on its own before it is cut


class Changes:
    """Wakes every open stream when this process writes."""

    def __init__(self) -> None:
        self.waiting: set[anyio.Event] = set()

    def nudge(self) -> None:
        for event in list(self.waiting):
            event.set()

    async def wait(self, seconds: float, stop: anyio.Event) -> None:
        """Until a nudge, `stop` is set, or `seconds` pass."""
        event = anyio.Event()
        self.waiting.add(event)
        try:
            with anyio.move_on_after(seconds):
                async with anyio.create_task_group() as either:
                    async def until(happens: anyio.Event) -> None:
                        await happens.wait()
                        either.cancel_scope.cancel()

                    either.start_soon(until, event)
                    either.start_soon(until, stop)
        finally:
            self.waiting.discard(event)


def newest_ids(service: MemoryService, libraries: list[str]) -> dict[str, int]:
    out = {}
    for name in libraries:
        try:
            entries = service.history(limit=1, library=name)
        except MemlociError:
            entries = []
        out[name] = entries[0].id if entries else 0
    return out


def new_entries(service: MemoryService, seen: dict[str, int]) -> list[dict[str, Any]]:
    """The journal entries after `seen` (library -> newest id seen), oldest first; updates `seen`."""
    out = []
    for name, last in seen.items():
        try:
            entries = service.history(limit=READ_AT_ONCE, library=name)
        except MemlociError:
            continue  # a library that cannot be read now: its changes come once it can
        fresh = sorted((e for e in entries if e.id > last), key=lambda e: e.id)
        out += [{"library": name, "change_id": e.id, "action": e.action, "entities": list(e.entities)} for e in fresh]
        if fresh:
            seen[name] = fresh[-1].id
    return out


class TooManyStreamsError(MemlociError):
    code = "RATE_LIMITED"
    default_hint = "Close another tab of the dashboard (each keeps one stream open)."


def caller_key(request: Request, who: Who) -> str:
    return who.name if who.name else f"(address {request.client.host if request.client else 'unknown'})"


def events_endpoint(service: MemoryService, access: Access, changes: Changes) -> Any:
    open_streams: dict[str, int] = {}  # caller -> streams open (kept on the event loop only)

    async def events(request: Request) -> Response:
        who = await access.who(request)
        refusal = refused(who)
        if refusal is None:
            try:
                check_site(request, who)
            except MemlociError as exc:
                refusal = exc
        if refusal is None and who is not None and open_streams.get(caller_key(request, who), 0) >= STREAMS_PER_CALLER:
            refusal = TooManyStreamsError(f"{caller_key(request, who)} has {STREAMS_PER_CALLER} event streams open, "
                                          "the most one caller may")
        if refusal is not None:
            return error_response(refusal)
        assert who is not None
        if request.query_params:
            key = next(iter(request.query_params))
            return error_response(ValidationError(f"{key}: unknown parameter (allowed: none)"))
        readable = [n for n in service.libraries.names() if who.may(n, "read")]
        seen = await anyio.to_thread.run_sync(newest_ids, service, readable)
        # sse-starlette sets `stopping` at the server's shutdown (the drain's AppStatus.should_exit):
        # the stream returns and its body ends as a body ends, instead of being cancelled mid-response
        stopping = anyio.Event()
        return EventSourceResponse(stream(request, who, seen, stopping), headers=NO_STORE, ping=None,
                                   shutdown_event=stopping, shutdown_grace_period=STOP_GRACE_SECONDS)

    async def stream(request: Request, who: Who, seen: dict[str, int],
                     stopping: anyio.Event) -> AsyncIterator[ServerSentEvent]:
        key = caller_key(request, who)
        open_streams[key] = open_streams.get(key, 0) + 1
        try:
            async with contextlib.aclosing(changes_of(request, who, seen, stopping)) as stream_of:
                async for event in stream_of:
                    yield event
        finally:
            open_streams[key] -= 1
            if not open_streams[key]:
                del open_streams[key]

    async def changes_of(request: Request, who: Who, seen: dict[str, int],
                         stopping: anyio.Event) -> AsyncGenerator[ServerSentEvent, None]:
        yield ServerSentEvent(comment="ready")
        ping_at = time.monotonic() + PING_SECONDS
        while True:
            await changes.wait(min(POLL_SECONDS, max(0.0, ping_at - time.monotonic())), stopping)
            if stopping.is_set():
                return
            for change in await anyio.to_thread.run_sync(new_entries, service, seen):
                yield ServerSentEvent(json.dumps(change, ensure_ascii=False), event="change", id=str(change["change_id"]))
            if time.monotonic() >= ping_at:
                if who.via != "open" and await access.who(request) is None:
                    return  # signed out, expired or revoked: the stream ends
                yield ServerSentEvent(comment="ping")
                ping_at = time.monotonic() + PING_SECONDS

    return events
