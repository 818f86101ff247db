"""What the caller of a request may see and do, enforced per call: the interface server mode
fills (`Callers`), and the rules over it.

A caller holds library scopes: `read`, `write` (which includes `read`) or `admin` (which
includes `write` and the maintenance tools, ADMIN_TOOLS, which write files on the server or
force a sync) on a library, or on `*`, every library. A tool's level comes from its MCP
annotations: read-only tools need `read`, every other tool `write` (a tool added later is a
write until it says otherwise).

- `tools/list` shows only the tools the caller's best scope allows;
- a call on a library outside the caller's scopes, or above its level, is refused with
  PERMISSION_DENIED naming the scope needed (`needs scope team:write`);
- `list_libraries` lists only the caller's libraries (paths only to their admins), and an
  unknown library name is answered without naming the others;
- `project_path` (the n2n tools' `projectPath`) opens a folder on the server's own disk,
  beyond any mounted library: only a caller with `*:admin` may pass it, or read a project's
  graph resource.

With no caller to check (stdio, or an HTTP server without tokens on loopback) nothing here
applies. Server mode (http/scopes.py) tells the server who calls: a token and its scopes.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Protocol

from mcp_types import CallToolResult

from memloci.core.errors import MemlociError, NotFoundError, ValidationError
from memloci.mcp.arguments import SEARCHES_SEVERAL
from memloci.mcp.replies import reply
from memloci.service.across import EVERY_LIBRARY, asks_every

ADMIN_TOOLS = {"export_markdown", "flush_memory", "n2n_export_markdown", "sync_rules"}
# These write into a project folder only (never a mounted library), so only `*:admin` can use them;
# the workspace tools read (or write) a project's rule files on the server's disk.
PROJECT_ONLY_TOOLS = {"export_markdown", "n2n_export_markdown",
                      "list_rules", "preview_rules_sync", "sync_rules", "remember_rules"}
PROJECT_ARGS = ("project_path", "projectPath")  # a folder on the server's disk (n2n tools: projectPath)
access_log = logging.getLogger("memloci.access")


class Caller(Protocol):
    """The caller of the request being served, as its credentials allow."""

    @property
    def name(self) -> str:
        """Who calls, for the access log (never a secret)."""
        ...

    def grants(self, library: str, level: str) -> bool:
        """Whether it may do `level` (read, write or admin) on `library` (`*`: on every library)."""
        ...

    def grants_some(self, level: str) -> bool:
        """Whether it may do `level` on at least one library."""
        ...

    def denied(self, what: str, library: str, level: str) -> MemlociError:
        """The refusal of `what`, which needs `level` on `library`: names the scope it needs."""
        ...


class Callers(Protocol):
    """Who calls, request by request."""

    def current(self) -> Caller | None:
        """The caller of the request being served; None: nothing to check."""
        ...


class NoCallers:
    """Over stdio: the one client is the one that started the server; nothing to check."""

    def current(self) -> Caller | None:
        return None


def _project(arguments: Any) -> bool:
    # as the tools read them (surface.relaxed): null or "" is a project not named
    return isinstance(arguments, dict) and any(arguments.get(k) not in (None, "") for k in PROJECT_ARGS)


def tool_level(server: Any, name: str) -> str:
    if name in ADMIN_TOOLS:
        return "admin"
    tool = server._tool_manager.get_tool(name)
    annotations = getattr(tool, "annotations", None)
    return "read" if annotations is not None and annotations.read_only_hint else "write"


def _takes_library(server: Any, name: str) -> bool:
    tool = server._tool_manager.get_tool(name)
    return tool is not None and "library" in tool.fn_metadata.arg_model.model_fields


def visible_tools(server: Any, tools: list[Any]) -> list[Any]:
    """The tools the caller may call on at least one library."""
    caller = server.callers.current()
    if caller is None:
        return tools
    everything = caller.grants("*", "admin")
    return [t for t in tools if caller.grants_some(tool_level(server, t.name))
            and (everything or t.name not in PROJECT_ONLY_TOOLS)]


def _mine(caller: Caller, mounted: list[str]) -> list[str]:
    return [m for m in mounted if caller.grants(m, "read")]


def resolve_library(server: Any, arguments: Any) -> str | None:
    """The mounted library a call works on, as mounted (None: unknown, or a project)."""
    if not isinstance(arguments, dict) or _project(arguments):
        return None
    mounted = server.library_names()
    named = arguments.get("library") or arguments.get("library_name")
    if named is None:
        return mounted[0] if len(mounted) == 1 else None
    if not isinstance(named, str):
        return None
    return next((m for m in mounted if m.casefold() == named.casefold()), None)


def refusal(server: Any, name: str, arguments: Any) -> MemlociError | None:
    """Why the current caller may not make this call, or None (no caller: nothing to check)."""
    caller = server.callers.current()
    if caller is None or server._tool_manager.get_tool(name) is None or not isinstance(arguments, dict):
        return None  # an unknown tool or malformed arguments get their own error
    level = tool_level(server, name)
    if _project(arguments) or name in PROJECT_ONLY_TOOLS:
        if not caller.grants("*", "admin"):
            why = ("with project_path (a folder on the server's disk)" if _project(arguments)
                   else "(it writes only into a project folder on the server's disk)")
            return caller.denied(f"{name} {why}", "*", "admin")
        return None
    if not _takes_library(server, name):  # list_libraries: filtered instead
        if not caller.grants_some(level):
            return caller.denied(name, "*", level)
        return None
    if _asks_several(name, arguments):
        return _several_refusal(server, caller, name, arguments["library"], level)
    mounted = server.library_names()
    named = arguments.get("library") or arguments.get("library_name")
    if named is not None and not isinstance(named, str):
        return None  # the argument check names the wrong type
    if named is None and len(mounted) > 1:
        return ValidationError(f"library: several libraries are mounted; name one of: "
                               f"{', '.join(_mine(caller, mounted)) or '(none for this token)'}")
    library = resolve_library(server, arguments)
    if library is None:
        assert named is not None  # with none named, the only library mounted is the one
        if not caller.grants(named, "read"):
            return caller.denied(f"{name} on library '{named}'", named, level)
        return NotFoundError(f"library '{named}' is not mounted; this token's libraries: "
                             f"{', '.join(_mine(caller, mounted)) or '(none mounted)'}",
                             hint="Name one of the libraries list_libraries shows.")
    if not caller.grants(library, level):
        return caller.denied(f"{name} on library '{library}'", library, level)
    return None


def _asks_several(name: str, arguments: dict[str, Any]) -> bool:
    asked = arguments.get("library")
    return name in SEARCHES_SEVERAL and (asked == EVERY_LIBRARY or isinstance(asked, list))


def _several_refusal(server: Any, caller: Caller, name: str, asked: Any, level: str) -> MemlociError | None:
    """A search of several libraries: `"*"` needs one library the caller may search (the others are
    left out, not refused); every library a list names must be mounted and the caller's."""
    mounted = server.library_names()
    if asks_every(asked):
        if not any(caller.grants(m, level) for m in mounted):
            return caller.denied(f"{name} on every library", EVERY_LIBRARY, level)
        return None
    for named in asked:
        if not isinstance(named, str):
            return None  # the argument check names the wrong type
        library = next((m for m in mounted if m.casefold() == named.casefold()), None)
        if library is None:
            if not caller.grants(named, "read"):  # never say whether a library outside its scopes exists
                return caller.denied(f"{name} on library '{named}'", named, level)
            return NotFoundError(f"library '{named}' is not mounted; this token's libraries: "
                                 f"{', '.join(_mine(caller, mounted)) or '(none mounted)'}",
                                 hint="Name the libraries list_libraries shows, or \"*\" for all of them.")
        if not caller.grants(library, level):
            return caller.denied(f"{name} on library '{library}'", library, level)
    return None


def readable_only(server: Any, name: str, arguments: Any) -> Any:
    """The arguments of a search of every library (`library: "*"`) with `*` narrowed to the
    libraries the caller may search: those outside its scopes are left out, silently."""
    caller = server.callers.current()
    if caller is None or not isinstance(arguments, dict) or not _asks_several(name, arguments):
        return arguments
    if not asks_every(arguments["library"]):
        return arguments
    level = tool_level(server, name)
    return {**arguments, "library": [m for m in server.library_names() if caller.grants(m, level)]}


def visible_result(server: Any, name: str, result: Any) -> Any:
    """list_libraries with a caller to check: only its libraries, their paths only to an admin."""
    caller = server.callers.current()
    if caller is None or name != "list_libraries" or not isinstance(result, CallToolResult) or result.is_error:
        return result
    rows = (result.structured_content or {}).get("libraries", [])
    mine = [r for r in rows if caller.grants(str(r.get("name", "")), "read")]
    # where a library lives on the server's disk is for its administrators only
    return reply({"libraries": [r if caller.grants(str(r.get("name", "")), "admin")
                                else {k: v for k, v in r.items() if k != "path"} for r in mine]})


def check_resource(server: Any, uri: str) -> None:
    """Reading or subscribing to a resource (`resources/read`, `resources/subscribe`, the URIs of
    `subscriptions/listen`): raise the refusal as a client error (-32602 Invalid params, with
    our PERMISSION_DENIED text and the URI), not the SDK's -32603 for a failed read."""
    refused = resource_refusal(server, uri)
    if refused is not None:
        from mcp.shared.exceptions import MCPError
        from mcp_types import INVALID_PARAMS

        raise MCPError(INVALID_PARAMS, f"{refused.code}: {refused.message}",
                       data={"uri": uri, "code": refused.code, "hint": refused.hint})


def may_use_roots(server: Any) -> bool:
    """Whether the client's roots may name the project (mcp/roots.py). Over HTTP a root is a path
    on the client's machine, not the server's: only a `*:admin` caller, which may open any folder
    on the server anyway, has them used; for any other caller they are ignored, so its call goes
    to its library as without roots (no refusal, and no answer that differs by whether that
    path happens to exist on the server)."""
    caller = server.callers.current()
    return caller is None or caller.grants("*", "admin")


def resource_refusal(server: Any, uri: str) -> MemlociError | None:
    """Reading a resource: the default graph needs read on that library; a project's graph, `*:admin`."""
    caller = server.callers.current()
    if caller is None:
        return None
    if "?" in uri:
        return None if caller.grants("*", "admin") else caller.denied("a project's graph resource", "*", "admin")
    mounted = server.library_names()
    library = mounted[0] if len(mounted) == 1 else "*"
    return None if caller.grants(library, "read") else caller.denied(f"resource {uri}", library, "read")


def call_started(name: str) -> float:
    access_log.debug("call started tool=%s", name)
    return time.monotonic()


def log_call(server: Any, name: str, arguments: Any, started: float, result: Any) -> None:
    """One access-log line per tool call: who, what, where, how long, how it ended; never the arguments."""
    if not access_log.isEnabledFor(logging.INFO):
        return
    caller = server.callers.current()
    if isinstance(arguments, dict) and _project(arguments):
        library = "(project)"  # never the path: paths stay out of logs
    elif isinstance(arguments, dict) and _asks_several(name, arguments):  # as narrowed to the caller's ("*")
        library = ",".join(str(n) for n in readable_only(server, name, arguments)["library"]) or "-"
    else:
        library = resolve_library(server, arguments) or "-"
    if isinstance(result, MemlociError):
        outcome = result.code
    else:
        outcome = "error" if getattr(result, "is_error", False) else "ok"
    tool = name if server._tool_manager.get_tool(name) is not None else "(unknown)"
    access_log.info("call token=%s tool=%s library=%s ms=%.1f outcome=%s", caller.name if caller else "-",
                    tool, library, (time.monotonic() - started) * 1000, outcome)
