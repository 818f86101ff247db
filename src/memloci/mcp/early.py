"""The first replies of `memloci serve` (stdio), from the SDK's own replies of an earlier start.

A client waits for `initialize` and `tools/list` when it launches its servers, and some give up
after a few seconds on a busy machine. Importing the MCP SDK and building the server is most of
a start (the SDK's types, its HTTP stack, the tools' schemas: about a second of CPU on a busy
2-core machine); the replies themselves depend only on the configuration and the code. So a
start records the SDK's reply to each of the two requests, byte for byte, in a per-user cache
(`cache_for("handshake")`, one small file per configuration), and a later start with the same
configuration and the same request answers it from there before anything heavy is imported:
the program's arguments after its name, the working folder, the environment memloci reads, the
config file's bytes, memloci's source files (size and time of each) and the installed
packages beside the SDK (the name and time of each dist-info folder) all go into the file's name, so a change to any
of them is a new file, never a stale reply. The file holds that digest and a digest of its
replies: a file of another configuration, cut short or edited since it was written is not used.

Nothing is skipped: the answered requests are still handed to the SDK once it is loaded, in
order and before anything the client sent after them; the SDK's replies to them are not sent
again (the client has them) but compared with what was sent, and a difference is logged and
written to the cache for the next start. A line that is not exactly a recorded request (another
protocol version, another client's capabilities, a malformed line, a `tools/call`) ends the
early replies: it and everything after it go to the SDK as they would without them. So the
bytes a client receives are the SDK's, and every error is answered as before.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memloci.core import handshake

log = logging.getLogger("memloci.stdio")

INITIALIZE = "initialize"
TOOLS_LIST = "tools/list"
INITIALIZED = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}, sort_keys=True)
READ_LIMIT = 1 << 20  # a first line longer than this is not a handshake this cache knows


@dataclass
class Early:
    """The early replies of this start: where they are recorded, which were sent, and what the
    transport must hand to the SDK before it reads the wire again."""

    path: Path  # the cache file of this configuration
    digest: str  # the configuration's digest (the file's name is its start), written inside the file
    recorded: dict[str, dict[str, str]]  # method -> {"request": canonical request, "reply": reply without its id}
    # lines read here, for the SDK, in order, each with whether it was answered here (so the
    # transport does not count it as in flight: the client has its reply and may use its id again)
    replayed: list[tuple[bytes, bool]] = field(default_factory=list)
    unread: bytes = b""  # bytes read past the last whole line
    sent: dict[str, tuple[Any, bytes]] = field(default_factory=dict)  # method -> (request id, reply bytes sent)
    fresh: dict[str, dict[str, str]] = field(default_factory=dict)  # this start's replies, as `recorded`

    def answered(self, method: str) -> bool:
        return method in self.sent

    def reply_checked(self, method: str, request: str, request_id: Any, reply: bytes) -> bool | None:
        """A reply with the id of the first request of `method`: True when it answers that request
        and was sent early (so it is not sent again), False when it is to be sent, None when it
        answers another request that used the same id (a client may use an id again once it has
        its reply, and an early reply comes before the SDK answers the request again). Both
        replies of this start are recorded together, for the next start."""
        if not _answers(method, request_id, reply):
            return False if method not in self.sent else None
        self.fresh[method] = {"request": request, "reply": reply_rest(request_id, reply) or ""}
        if method not in self.sent:
            return False
        sent = self.sent.pop(method)[1]
        if sent != reply:
            log.warning("the early %s reply differed from the server's; the next start sends the server's", method)
        return True

    def save(self) -> None:
        """Write this start's replies (when both are known and differ from those recorded), for the
        next start; never fails this one."""
        if self.fresh == self.recorded or {INITIALIZE, TOOLS_LIST} - set(self.fresh):
            return
        self.recorded = dict(self.fresh)
        handshake.write(self.path, self.digest, self.recorded)


EARLY: Early | None = None  # this process's, set by begin() (`memloci serve` over stdio only)


# What only a result of each request has (the early replies are never errors).
RESULT_MARKS = {INITIALIZE: (b'"serverInfo":', b'"protocolVersion":'), TOOLS_LIST: (b'"tools":[',)}


def _answers(method: str, request_id: Any, reply: bytes) -> bool:
    """Whether `reply` is a result of `method` for `request_id` (not an error, not another
    request's result)."""
    return reply_rest(request_id, reply) is not None and all(mark in reply for mark in RESULT_MARKS[method])


def canonical(message: dict[str, Any]) -> str:
    """A request without its id, in one spelling (a recorded request matches whatever the spacing)."""
    return json.dumps({k: v for k, v in message.items() if k != "id"}, sort_keys=True, ensure_ascii=True)


def _id_text(request_id: Any) -> str | None:
    """The id as the SDK writes it, when its spelling is certain: an integer, or plain ASCII text."""
    if isinstance(request_id, int) and not isinstance(request_id, bool):
        return str(request_id)
    if isinstance(request_id, str) and request_id.isascii() and request_id.isprintable() \
            and '"' not in request_id and "\\" not in request_id:
        return f'"{request_id}"'
    return None


def reply_rest(request_id: Any, reply: bytes) -> str | None:
    """The SDK's reply line after its id (`,"result":...}`), or None when it is not a plain result."""
    text = _id_text(request_id)
    if text is None:
        return None
    head = f'{{"jsonrpc":"2.0","id":{text},"result":'.encode()
    if not reply.startswith(head) or not reply.endswith(b"\n"):
        return None
    return reply[len(head) - len(',"result":'):].decode("utf-8")


def serve_arguments(args: list[str]) -> tuple[str | None, str | None] | None:
    """(--home, --config) when `args` is `[--home H] [--config C] serve [options]` serving over
    stdio, else None (help, HTTP, anything else: the command line handles it as before)."""
    home = config = None
    i = 0
    while i < len(args) and args[i] != "serve":
        option, eq, value = args[i].partition("=")
        if option not in ("--home", "--config"):
            return None
        if not eq:
            if i + 1 >= len(args):
                return None
            value, i = args[i + 1], i + 1
        if not value or (home if option == "--home" else config) is not None:
            return None
        home, config = (value, config) if option == "--home" else (home, value)
        i += 1
    rest = args[i + 1:]
    if i >= len(args) or any(a in ("--help", "-h") for a in rest):
        return None
    for k, a in enumerate(rest):
        if a == "--transport" and rest[k + 1:k + 2] != ["stdio"]:
            return None
        if a.startswith("--transport=") and a != "--transport=stdio":
            return None
    return home, config


def fingerprint(args: list[str], home: str | None, config: str | None) -> tuple[Path, str] | None:
    """The cache file of this configuration, and the configuration's digest (core/handshake.py);
    None when the settings cannot be read (the command line reports why)."""
    from memloci.core.errors import MemlociError
    from memloci.core.settings import Settings

    try:
        return handshake.configuration(Settings.from_env().with_flags(home=home, config=config), args)
    except (MemlociError, OSError, ValueError):
        return None


def _recorded(content: bytes, digest: str) -> dict[str, dict[str, str]]:
    """The replies a cache file records for the configuration `digest`; nothing when the file is of
    another configuration, was changed since it was written (its digest differs), or records
    anything but a request this module can match and a plain one-line result of it."""
    try:
        record = json.loads(content)
        replies = record["replies"]
        if record["configuration"] != digest or record["sha256"] != handshake.seal(digest, replies):
            return {}
        for method in (INITIALIZE, TOOLS_LIST):
            request, reply = replies[method]["request"], replies[method]["reply"]
            message = json.loads(request)
            line = f'{{"jsonrpc":"2.0","id":0{reply}'.encode()
            if set(replies[method]) != {"request", "reply"} or message.get("method") != method \
                    or canonical(message) != request or reply.count("\n") != 1 \
                    or not isinstance(json.loads(line).get("result"), dict) or not _answers(method, 0, line):
                return {}
        return {method: dict(replies[method]) for method in (INITIALIZE, TOOLS_LIST)} if len(replies) == 2 else {}
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError):
        return {}


def _parse(line: bytes) -> dict[str, Any] | None:
    """A request or notification this module may answer or pass over, or None."""
    def unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        result = dict(pairs)
        if len(result) != len(pairs):
            raise ValueError("a key given twice")
        return result

    try:
        message = json.loads(line.decode("utf-8"), object_pairs_hook=unique,
                             parse_constant=lambda name: (_ for _ in ()).throw(ValueError(name)))
    except (ValueError, RecursionError):
        return None
    return message if isinstance(message, dict) else None


def begin(args: list[str]) -> None:
    """`memloci serve` over stdio: answer the client's `initialize` and `tools/list` from this
    configuration's recorded replies, if it has them, before the SDK is imported. Reads the wire
    (fd 0) only when there is something recorded to answer with; what it read is left in EARLY
    for the transport."""
    global EARLY
    parsed = serve_arguments(args)
    if parsed is None:
        return
    found = fingerprint(args, *parsed)
    if found is None:
        return
    path, digest = found
    try:
        recorded = _recorded(handshake.read_own(path), digest)
    except OSError:
        recorded = {}
    early = EARLY = Early(path, digest, recorded)
    if {INITIALIZE, TOOLS_LIST} - set(recorded):
        return
    expect = INITIALIZE
    buffer = b""
    while expect:
        newline = buffer.find(b"\n")
        if newline < 0:
            if len(buffer) > READ_LIMIT:
                break
            try:
                chunk = os.read(0, 65536)
            except OSError:
                break
            if not chunk:
                break
            buffer += chunk
            continue
        line, buffer = buffer[:newline + 1], buffer[newline + 1:]
        early.replayed.append((line, False))
        message = _parse(line)
        if message is None:
            break
        if expect == TOOLS_LIST and canonical(message) == INITIALIZED:
            continue
        request_id = message.get("id")
        if message.get("method") != expect or _id_text(request_id) is None \
                or canonical(message) != recorded[expect]["request"]:
            break
        reply = f'{{"jsonrpc":"2.0","id":{_id_text(request_id)}{recorded[expect]["reply"]}'.encode()
        try:
            _write_all(1, reply)
        except OSError:
            break
        early.sent[expect] = (request_id, reply)
        early.replayed[-1] = (line, True)
        expect = TOOLS_LIST if expect == INITIALIZE else ""
    early.unread = buffer


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
