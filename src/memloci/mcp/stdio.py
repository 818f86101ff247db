"""The stdio transport: one JSON-RPC message per line, every malformed line answered.

The SDK's own stdio reader decodes with `errors="replace"` (invalid UTF-8 silently becomes
U+FFFD and is stored) and drops any line it cannot validate without a word, so a client
never learns why its call vanished. This reader checks each line first and answers what is
wrong with the JSON-RPC error the specification names:

- not UTF-8 JSON, or nested too deeply for the parser     -> -32700 Parse error (id null)
- not a JSON-RPC 2.0 message (jsonrpc, method, id, shape)  -> -32600 Invalid Request
- a request id still in flight used again                  -> -32600 Invalid Request
- `params` not an object, a string (key or value) with a lone
  surrogate or invalid UTF-8, a number too large for a double
  (1e400 would become Infinity, which JSON cannot carry), a key
  given twice in one object, or a `tools/call` without a string
  `name` or with non-object `arguments`                     -> -32602 Invalid params

A notification is never answered (JSON-RPC forbids it): a malformed one is dropped and
logged on stderr. On end of input the reader waits until every request in flight has been
answered, so a client that writes its last request and closes stdin still gets the reply.

Valid lines go to the SDK's session unchanged. Blank lines are skipped (they carry no
message). While serving, fd 0 reads /dev/null and fd 1 writes to stderr, so nothing a
library prints (warnings, progress bars, native code) can reach the protocol stream.
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from typing import Any, BinaryIO

import anyio
import mcp_types as types
from mcp.shared._context_streams import create_context_streams
from mcp.shared.dispatcher import coerce_request_id
from mcp.shared.message import SessionMessage

from memloci.core.stdio_claim import StdioClaim
from memloci.mcp.early import Early, canonical

RECORDED = ("initialize", "tools/list")  # the requests whose replies mcp/early.py can send next time

log = logging.getLogger("memloci.stdio")

MAX_DEPTH = 64  # arrays and objects inside each other; tool arguments never need more


class Refusal(Exception):
    """A line the server answers itself: the JSON-RPC error and the id it answers.
    `notification`: the line was a notification, so it is dropped (logged), never answered."""

    def __init__(self, code: int, message: str, request_id: Any = None, notification: bool = False):
        super().__init__(message)
        self.code, self.message, self.request_id = code, message, request_id
        self.notification = notification

    def reply(self) -> bytes:
        return _line({"jsonrpc": "2.0", "id": self.request_id, "error": {"code": self.code, "message": self.message}})


def _line(body: dict[str, Any]) -> bytes:
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


class _Duplicated(dict):
    """An object in which a key was given twice: `duplicate` names the key (found later with its path)."""

    duplicate: str = ""


def _added(seen: set[str], key: str) -> bool:
    """Add `key` to `seen`; False, so a scan goes on to the next key."""
    seen.add(key)
    return False


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """object_pairs_hook: json.loads would keep the last of two equal keys and drop the first silently."""
    result = dict(pairs)
    if len(result) == len(pairs):
        return result
    seen: set[str] = set()
    marked = _Duplicated(result)
    marked.duplicate = next(k for k, _ in pairs if k in seen or _added(seen, k))
    return marked


# Per method, the params fields the SDK would otherwise refuse as "Invalid request parameters"
# without naming any: (field, JSON type, required).
PARAM_FIELDS: dict[str, list[tuple[str, type, bool]]] = {
    "tools/call": [("name", str, True), ("arguments", dict, False)],
    "prompts/get": [("name", str, True), ("arguments", dict, False)],
    "resources/read": [("uri", str, True)],
    "resources/subscribe": [("uri", str, True)],
    "resources/unsubscribe": [("uri", str, True)],
}
JSON_TYPE: dict[type, str] = {str: "a string", dict: "an object"}


def _param_problem(method: str, params: dict[str, Any]) -> str | None:
    for field, kind, required in PARAM_FIELDS.get(method, []):
        if field not in params:
            if required:
                return f"params.{field}: required for {method}; give {JSON_TYPE[kind]}"
        elif not isinstance(params[field], kind):
            return f"params.{field}: must be {JSON_TYPE[kind]}, not {_describe(params[field])}"
    if method == "prompts/get" and isinstance(params.get("arguments"), dict):  # the protocol's are text
        for key, value in params["arguments"].items():
            if not isinstance(value, str):
                return f"params.arguments.{key}: must be a string (prompt arguments are text), not {_describe(value)}"
    return None


def _path(parent: str, key: Any) -> str:
    return f"{parent}[{key}]" if isinstance(key, int) else (f"{parent}.{key}" if parent else str(key))


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, float):
        return "a fraction" if not value.is_integer() else "a number written with a fraction part"
    return {dict: "an object", list: "an array", int: "a number", str: "a string"}.get(type(value), type(value).__name__)


def _bad_text(s: str) -> bool:
    """A lone surrogate: sent as an escape ("\\ud800"), or left by an invalid UTF-8 byte (surrogateescape)."""
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _check_tree(message: dict[str, Any]) -> tuple[str, str] | None:
    """The first problem in the message's values, as (kind, path): "depth", "text", "number"
    (overflowed to infinity) or "duplicate" (a key given twice; the path ends with that key)."""
    stack: list[tuple[Any, str, int]] = [(message, "", 1)]
    while stack:
        value, where, depth = stack.pop()
        if isinstance(value, dict):
            if depth > MAX_DEPTH:
                return "depth", where
            if isinstance(value, _Duplicated):
                return "duplicate", _path(where, value.duplicate)
            for key, item in value.items():
                if _bad_text(key):
                    return "text", _path(where, ascii(key)[1:-1])
                stack.append((item, _path(where, key), depth + 1))
        elif isinstance(value, list):
            if depth > MAX_DEPTH:
                return "depth", where
            stack.extend((item, _path(where, i), depth + 1) for i, item in enumerate(value))
        elif isinstance(value, str) and _bad_text(value):
            return "text", where
        elif isinstance(value, float) and math.isinf(value):
            return "number", where
    return None


PROBLEM_RULES = {
    "text": "contains a lone surrogate or invalid UTF-8; send valid UTF-8 text",
    "number": "number too large (beyond a 64-bit float, it would become Infinity, which JSON cannot carry)",
    "duplicate": "key given twice in one object; give each key once",
}


def parse_line(raw: bytes, in_flight: set[Any]) -> types.JSONRPCMessage | None:
    """One line off the wire: the message, None for a blank line, or a Refusal to answer."""
    raw = raw.rstrip(b"\r\n")
    if not raw.strip():
        return None
    # surrogateescape keeps invalid bytes visible (as lone surrogates) so the field can be named
    text = raw.decode("utf-8", errors="surrogateescape")
    try:
        message = json.loads(text, parse_constant=_no_constant, object_pairs_hook=_pairs)
    except RecursionError:
        raise Refusal(types.PARSE_ERROR, f"Parse error: JSON nested too deeply (the limit is {MAX_DEPTH} levels)") from None
    except ValueError as exc:
        raise Refusal(types.PARSE_ERROR, f"Parse error: not valid JSON ({exc})") from None
    if isinstance(message, list):
        raise Refusal(types.INVALID_REQUEST, "Invalid Request: batches (JSON arrays) are not supported; "
                                             "send one message per line")
    if not isinstance(message, dict):
        raise Refusal(types.INVALID_REQUEST, f"Invalid Request: a message is a JSON object, not {_describe(message)}")

    has_id = "id" in message
    request_id = message.get("id")
    id_ok = has_id and isinstance(request_id, (str, int)) and not isinstance(request_id, bool)
    answer_to = request_id if id_ok and _check_tree({"id": request_id}) is None else None

    def invalid(rule: str) -> Refusal:
        return Refusal(types.INVALID_REQUEST, f"Invalid Request: {rule}", answer_to)

    if message.get("jsonrpc") != "2.0":
        raise invalid('jsonrpc: must be "2.0"')
    if has_id and not id_ok:
        raise Refusal(types.INVALID_REQUEST,
                      f"Invalid Request: id must be a string or an integer, not {_describe(request_id)}")
    method = message.get("method")
    if "method" in message and not isinstance(method, str):
        raise invalid(f"method must be a string, not {_describe(method)}")
    if method is None and not has_id:
        raise invalid("a message needs a method (request or notification) or an id (response)")
    notification = method is not None and not has_id and _check_tree({"method": method}) is None
    if notification:  # from here on, what is wrong with it is logged, never answered
        def invalid(rule: str) -> Refusal:
            return Refusal(types.INVALID_REQUEST, f"dropped notification {method}: {rule}", notification=True)

    def bad_params(rule: str) -> Refusal:
        return invalid(rule) if notification else Refusal(types.INVALID_PARAMS, f"Invalid params: {rule}", answer_to)

    problem = _check_tree(message)
    if problem is not None and problem[0] == "depth":
        where = problem[1] if len(problem[1]) <= 60 else problem[1][:60] + "..."
        raise invalid(f"{where}: nested deeper than {MAX_DEPTH} levels")
    if method is not None and "params" in message and not isinstance(message["params"], dict):
        raise bad_params(f"params must be an object, not {_describe(message['params'])}")
    if problem is not None:  # bad text, an overflowing number, a doubled key: refused before any tool sees it
        rule = f"{problem[1]}: {PROBLEM_RULES[problem[0]]}"
        if method is not None and problem[1].startswith("params"):
            raise bad_params(rule)
        raise invalid(rule)
    if method is not None and has_id:
        wrong = _param_problem(method, message.get("params") or {})
        if wrong is not None:
            raise bad_params(wrong)
    try:
        parsed = types.jsonrpc_message_adapter.validate_python(message, by_name=False)
    except Exception:
        raise invalid("not a request, notification or response of JSON-RPC 2.0") from None
    if isinstance(parsed, types.JSONRPCRequest):
        key = coerce_request_id(parsed.id)
        if key in in_flight:
            raise invalid(f"id {json.dumps(parsed.id)} is already used by a request still in flight; "
                          "use a new id for each request")
        in_flight.add(key)
    elif isinstance(parsed, types.JSONRPCNotification) and parsed.method == "notifications/cancelled":
        # a cancelled request is never answered (the SDK drops its reply), so its id is free again
        cancelled = (parsed.params or {}).get("requestId")
        if isinstance(cancelled, (int, str)):  # a request id is one of these (JSON-RPC)
            with suppress(Exception):
                in_flight.discard(coerce_request_id(cancelled))
    return parsed


@asynccontextmanager
async def stdio_transport(claim: StdioClaim, on_tools_listed: Callable[[], None] | None = None,
                          early: Early | None = None) -> AsyncIterator[tuple[Any, Any]]:
    """(read stream, write stream) for the SDK's server over the claimed descriptors.
    `on_tools_listed` runs once, just after the first `tools/list` reply is written. `early`:
    the replies sent before the SDK was loaded and the lines read then (mcp/early.py), which go
    to the SDK first; its replies to the first `initialize` and `tools/list` are recorded there."""
    wire_out: BinaryIO = os.fdopen(claim.wire_out, "wb", closefd=False)
    read_send, read_stream = create_context_streams[SessionMessage | Exception](0)
    write_stream, write_receive = create_context_streams[SessionMessage](0)
    in_flight: set[Any] = set()
    listing: set[Any] = set()  # ids of tools/list requests, until the first is answered
    after_listing = [on_tools_listed] if on_tools_listed is not None else []
    lock = anyio.Lock()
    watched: dict[str, tuple[Any, Any, str]] = {}  # the first initialize and tools/list: (key, id, canonical request)
    seen: set[str] = set()

    def _answered_early(message: Any, data: bytes) -> bool:
        """Whether `data` answers a request mcp/early.py answered already; records it either way."""
        if early is None or not isinstance(message, (types.JSONRPCResponse, types.JSONRPCError)) or message.id is None:
            return False
        key = coerce_request_id(message.id)
        for method, (watched_key, request_id, request) in list(watched.items()):
            if watched_key == key:
                sent = early.reply_checked(method, request, request_id, data)
                if sent is None:  # another request that used the same id: still waiting for this one
                    continue
                del watched[method]
                if method == "tools/list":
                    early.save()
                return sent
        return False

    async def emit(data: bytes) -> None:
        async with lock:  # one whole line at a time: the reader's refusals and the server's replies
            await anyio.to_thread.run_sync(_write, wire_out, data)

    async def lines() -> AsyncIterator[tuple[bytes, bool]]:
        """The wire's lines, each with whether it was answered early; what mcp/early.py read first."""
        unread = b""
        if early is not None:
            for replayed in early.replayed:
                yield replayed
            *whole, unread = early.unread.split(b"\n")
            for line in whole:
                yield line + b"\n", False
        source = anyio.wrap_file(os.fdopen(claim.wire_in, "rb", closefd=False))
        async for raw in source:
            if unread:
                raw, unread = unread + raw, b""
            yield raw, False
        if unread:
            yield unread, False

    async def reader() -> None:
        try:
            async with read_send:
                async for raw, answered in lines():
                    try:
                        message = parse_line(raw, set() if answered else in_flight)
                    except Refusal as refusal:
                        log.warning("refused a message: %s", refusal.message)
                        if not refusal.notification:
                            await emit(refusal.reply())
                        continue
                    if message is not None:
                        if isinstance(message, types.JSONRPCRequest):
                            if after_listing and message.method == "tools/list":
                                listing.add(coerce_request_id(message.id))
                            if early is not None and message.method in RECORDED and message.method not in seen:
                                seen.add(message.method)
                                watched[message.method] = (coerce_request_id(message.id), message.id,
                                                           canonical(json.loads(raw)))
                        await read_send.send(SessionMessage(message))
                # End of input. Closing the read stream now would end the session and answer
                # every request still running with "Connection closed" although it completes:
                # wait for their real replies first (the writer empties in_flight).
                while in_flight:
                    await anyio.sleep(0.02)
        except anyio.ClosedResourceError:
            await anyio.lowlevel.checkpoint()

    async def writer() -> None:
        try:
            async with write_receive:
                async for session_message in write_receive:
                    message = session_message.message
                    data = message.model_dump_json(by_alias=True, exclude_unset=True).encode("utf-8") + b"\n"
                    # a reply sent early is not sent again, and frees no id: the request it answers
                    # never counted as in flight, while the id may now name the client's next request
                    answered_early = _answered_early(message, data)
                    if isinstance(message, (types.JSONRPCResponse, types.JSONRPCError)) and message.id is not None \
                            and not answered_early:
                        in_flight.discard(coerce_request_id(message.id))
                    if not answered_early:
                        await emit(data)
                    if listing and isinstance(message, (types.JSONRPCResponse, types.JSONRPCError)) \
                            and message.id is not None and coerce_request_id(message.id) in listing:
                        listing.clear()
                        after_listing.pop()()
        except anyio.ClosedResourceError:
            await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as tg:
        tg.start_soon(reader)
        tg.start_soon(writer)
        yield read_stream, write_stream


def _write(stream: BinaryIO, data: bytes) -> None:
    stream.write(data)
    stream.flush()


def serve_stdio(server: Any, claim: StdioClaim, on_tools_listed: Callable[[], None] | None = None,
                early: Early | None = None) -> None:
    """Run an MCPServer's session over the claimed stdio until the client closes stdin.
    `on_tools_listed` runs once, just after the first `tools/list` reply is written (what a client
    waits for when it starts its servers): the work that can wait begins then. `early`: what
    mcp/early.py answered and read before the server was built."""
    low = server._lowlevel_server  # what MCPServer.run_stdio_async drives, over our transport

    async def main() -> None:
        async with stdio_transport(claim, on_tools_listed, early) as (read_stream, write_stream):
            await low.run(read_stream, write_stream, low.create_initialization_options())

    try:
        anyio.run(main)
    finally:
        claim.release()
