"""What a token may see and do: library scopes `LIBRARY:read|write|admin`, enforced per call.

`write` includes `read`; `admin` includes `write` and the maintenance tools (ADMIN_TOOLS,
which write files on the server or force a sync). `*` as LIBRARY means every library.
A tool's level comes from its MCP annotations: read-only tools need `read`, every other
tool `write` (a tool added later is a write until it says otherwise).

- `tools/list` shows only the tools the token's best scope allows;
- a call on a library outside the token's scopes, or above its level, is refused with
  PERMISSION_DENIED naming the scope needed (`needs scope team:write`);
- `list_libraries` lists only the token's libraries (paths only to their admins), and an
  unknown library name is answered without naming the others;
- `project_path` (the n2n tools' `projectPath`) opens a folder on the server's own disk,
  beyond any mounted library: only a token with `*:admin` may pass it, or read a project's
  graph resource.

With no token (stdio, or an HTTP server without tokens on loopback) nothing here applies.
The token is the SDK's: `get_access_token()`, set by its auth middleware for the request.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp_types import CallToolResult

from memloci.core.errors import MemlociError, NotFoundError, PermissionDeniedError, ValidationError

LEVELS = {"read": 1, "write": 2, "admin": 3}
ADMIN_TOOLS = {"export_markdown", "flush_memory", "n2n_export_markdown"}
# These write into a project folder only (never a mounted library), so only `*:admin` can use them
PROJECT_ONLY_TOOLS = {"export_markdown", "n2n_export_markdown"}
PROJECT_ARGS = ("project_path", "projectPath")  # a folder on the server's disk (n2n tools: projectPath)
access_log = logging.getLogger("memloci.access")


def _project(arguments: Any) -> bool:
    return isinstance(arguments, dict) and any(arguments.get(k) is not None for k in PROJECT_ARGS)


def _parsed(scopes: list[str]) -> list[tuple[str, int]]:
    out = []
    for scope in scopes:
        library, _, level = scope.rpartition(":")
        if level in LEVELS and library:
            out.append((library.casefold(), LEVELS[level]))
    return out


def grants(scopes: list[str], library: str, level: str) -> bool:
    """Whether `scopes` allow `level` on `library` (`*` in a scope: every library)."""
    want, lib = LEVELS[level], library.casefold()
    return any(have >= want and name in ("*", lib) for name, have in _parsed(scopes))


def best_level(scopes: list[str]) -> int:
    return max((have for _, have in _parsed(scopes)), default=0)


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
    """The tools a token's scopes allow it to call on at least one library."""
    token = get_access_token()
    if token is None:
        return tools
    best, everything = best_level(token.scopes), grants(token.scopes, "*", "admin")
    return [t for t in tools if LEVELS[tool_level(server, t.name)] <= best
            and (everything or t.name not in PROJECT_ONLY_TOOLS)]


def _mine(token: Any, mounted: list[str]) -> list[str]:
    return [m for m in mounted if grants(token.scopes, m, "read")]


def _denied(what: str, library: str, level: str, token: Any) -> PermissionDeniedError:
    return PermissionDeniedError(
        f"{what} needs scope {library}:{level}",
        hint=f"This token has {', '.join(token.scopes) or 'no scopes'}; use a token with {library}:{level} "
             f"(memloci token create NAME --scope {library}:{level}). Nothing was changed.")


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
    """Why the current token may not make this call, or None (no token: nothing to check)."""
    token = get_access_token()
    if token is None or server._tool_manager.get_tool(name) is None or not isinstance(arguments, dict):
        return None  # an unknown tool or malformed arguments get their own error
    level = tool_level(server, name)
    if _project(arguments) or name in PROJECT_ONLY_TOOLS:
        if not grants(token.scopes, "*", "admin"):
            why = ("with project_path (a folder on the server's disk)" if _project(arguments)
                   else "(it writes only into a project folder on the server's disk)")
            return _denied(f"{name} {why}", "*", "admin", token)
        return None
    if not _takes_library(server, name):  # list_libraries: filtered instead
        if LEVELS[level] > best_level(token.scopes):
            return _denied(name, "*", level, token)
        return None
    mounted = server.library_names()
    named = arguments.get("library") or arguments.get("library_name")
    if named is not None and not isinstance(named, str):
        return None  # the argument check names the wrong type
    if named is None and len(mounted) > 1:
        return ValidationError(f"library: several libraries are mounted; name one of: "
                               f"{', '.join(_mine(token, mounted)) or '(none for this token)'}")
    library = resolve_library(server, arguments)
    if library is None:
        assert named is not None  # with none named, the only library mounted is the one
        if not grants(token.scopes, named, "read"):
            return _denied(f"{name} on library '{named}'", named, level, token)
        return NotFoundError(f"library '{named}' is not mounted; this token's libraries: "
                             f"{', '.join(_mine(token, mounted)) or '(none mounted)'}",
                             hint="Name one of the libraries list_libraries shows.")
    if not grants(token.scopes, library, level):
        return _denied(f"{name} on library '{library}'", library, level, token)
    return None


def visible_result(name: str, result: Any) -> Any:
    """list_libraries with a token: only the token's libraries, their paths only to an admin."""
    token = get_access_token()
    if token is None or name != "list_libraries" or not isinstance(result, CallToolResult) or result.is_error:
        return result
    from memloci.mcp.replies import reply

    rows = (result.structured_content or {}).get("libraries", [])
    mine = [r for r in rows if grants(token.scopes, str(r.get("name", "")), "read")]
    # where a library lives on the server's disk is for its administrators only
    return reply({"libraries": [r if grants(token.scopes, str(r.get("name", "")), "admin")
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


def may_use_roots() -> bool:
    """Whether the client's roots may name the project (mcp/roots.py). Over HTTP a root is a path
    on the client's machine, not the server's: only a `*:admin` token, which may open any folder
    on the server anyway, has them used; for any other token they are ignored, so its call goes
    to its library as without roots (no refusal, and no answer that differs by whether that
    path happens to exist on the server)."""
    token = get_access_token()
    return token is None or grants(token.scopes, "*", "admin")


def resource_refusal(server: Any, uri: str) -> MemlociError | None:
    """Reading a resource: the default graph needs read on that library; a project's graph, `*:admin`."""
    token = get_access_token()
    if token is None:
        return None
    if "?" in uri:
        return None if grants(token.scopes, "*", "admin") else _denied("a project's graph resource", "*", "admin", token)
    mounted = server.library_names()
    library = mounted[0] if len(mounted) == 1 else "*"
    return None if grants(token.scopes, library, "read") else _denied(f"resource {uri}", library, "read", token)


def call_started(name: str) -> float:
    access_log.debug("call started tool=%s", name)
    return time.monotonic()


def log_call(server: Any, name: str, arguments: Any, started: float, result: Any) -> None:
    """One access-log line per tool call: who, what, where, how long, how it ended; never the arguments."""
    if not access_log.isEnabledFor(logging.INFO):
        return
    token = get_access_token()
    if isinstance(arguments, dict) and _project(arguments):
        library = "(project)"  # never the path: paths stay out of logs
    else:
        library = resolve_library(server, arguments) or "-"
    if isinstance(result, MemlociError):
        outcome = result.code
    else:
        outcome = "error" if getattr(result, "is_error", False) else "ok"
    tool = name if server._tool_manager.get_tool(name) is not None else "(unknown)"
    access_log.info("call token=%s tool=%s library=%s ms=%.1f outcome=%s", token.client_id if token else "-",
                    tool, library, (time.monotonic() - started) * 1000, outcome)
