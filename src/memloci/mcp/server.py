"""The MCP server: the official SDK's `MCPServer`, our tool groups, our error format."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import mcp_types
import pydantic
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.subscriptions import ResourceUpdated
from mcp_types import CallToolResult, TextContent

from memloci import __version__
from memloci.app.config import config_file, default_specs, extraction_on, lifecycle_schedule
from memloci.app.projects import resolve_project_root
from memloci.app.registry import LibraryRegistry
from memloci.core.errors import InternalError, MemlociError, NotFoundError, ValidationError
from memloci.core.settings import Settings
from memloci.mcp import access, documents, graph, maintenance, memory, n2n, project, prompts, strict, workspace
from memloci.mcp.access import Callers, NoCallers
from memloci.mcp.replies import as_json, error_reply
from memloci.mcp.roots import ClientRoots, connection_of
from memloci.mcp.surface import accepted_schema, describe_validation_error, fit_hint, harden, tool_size
from memloci.search.embedder import REQUESTS, EmbedderHandle
from memloci.service.background import SCHEDULES, Schedule
from memloci.service.facade import MemoryService
from memloci.service.projects import CONTEXT_HINT

log = logging.getLogger("memloci.mcp")

INTRO = ("memloci is your durable memory. Before answering about the user or their work, recall what you "
         "know; record what you learn.")
# One line per group, naming only that group's tools: the instructions mention only exposed tools.
GROUP_INSTRUCTIONS = {
    "graph": "Knowledge graph: search_nodes and open_nodes to recall; create_entities, add_observations and "
             "create_relations to record people, projects, decisions and dated facts.",
    "strict": "Knowledge graph (strict schema): search_memory and get_entity to recall; create_entities, "
              "add_observation and create_relation to record.",
    "memory": "Free-form memories: retrieve_memory recalls by meaning and time; store_memory records.",
    "documents": "Entity documents: get_entities_toc and read_entities_sections to read long ones; "
                 "add_entity_content and replace_entity_content to edit.",
    "project": "In a code project, pass project_path (its absolute root) to any tool to keep memory in the "
               "project's .mcp/ folder, and call update_context before each commit.",
    "maintenance": "Maintenance: dry_run=true makes a preview that changes nothing; execute_preview applies it. "
                   "Every change is undoable (`memloci undo`).",
    "workspace": "Coding agents' rules: list_rules shows every agent's rules with duplicates and conflicts; "
                 "preview_rules_sync shows a sync's diff; sync_rules writes it.",
    "n2n": "Project memory (n2n-memory tools): pass projectPath (the project's absolute root; optional when the "
           "client shares its roots) to every n2n_ tool, and call n2n_update_context before each commit.",
}
# Strict-mode clients send every argument; this says what they send for one they do not mean.
ARGUMENTS_INSTRUCTION = 'Optional arguments: null, or "" for text, means not given (the default applies).'
# The reads of these groups take max_tokens and compact (mcp/budget.py); explained once here.
READ_INSTRUCTION = ("Reads and searches take max_tokens (the reply fitted to about that many tokens: trailing "
                    "sentences of the lower-ranked items cut first, \"…\" where text was cut) and compact: true "
                    "(ids and first lines); the reply says how to get what it left out.")
READ_GROUPS = {"graph", "memory"}
LIBRARY_INSTRUCTION = ("Several libraries are mounted: pass `library` to any tool to name one; a search also takes "
                       "\"*\" or a list of names, to search them together (list_libraries lists them).")


def instructions(groups: list[str], several_libraries: bool) -> str:
    lines = [INTRO] + [GROUP_INSTRUCTIONS[g] for g in groups] + [ARGUMENTS_INSTRUCTION]
    if READ_GROUPS & set(groups):
        lines.append(READ_INSTRUCTION)
    if several_libraries and groups != ["n2n"]:  # n2n tools name a project, never a library
        lines.append(LIBRARY_INSTRUCTION if "documents" in groups else LIBRARY_INSTRUCTION.split(" (")[0] + ".")
    return "\n".join(lines)


GROUPS = {"graph": graph.register, "memory": memory.register, "documents": documents.register,
          "project": project.register, "strict": strict.register, "n2n": n2n.register,
          "maintenance": maintenance.register, "workspace": workspace.register}
# Not read-only (an export writes a file; a flush syncs one), yet no change to the memory itself.
NOT_CHANGING_MEMORY = {"export_markdown", "flush_memory", "n2n_export_markdown"}
DEFAULT_GROUPS = ["graph", "memory", "documents", "project"]  # strict's tools share names with graph's
KNOWN_TOOLS = {*graph.TOOLS, *memory.TOOLS, *documents.TOOLS, *project.TOOLS, *strict.TOOLS, *n2n.TOOLS,
               *maintenance.TOOLS, *workspace.TOOLS}
# Tools that work on the client's root project (roots.py) when called with no library and no
# project path, and the argument that names the project in each.
ROOT_TOOLS = {**{t: "project_path" for t in project.TOOLS}, **{t: n2n.PROJECT_ARG for t in n2n.TOOLS}}


class MemlociServer(MCPServer):
    """MCPServer whose tools take strict, closed arguments (see surface.py), whose tool failures
    all reach the client as `{error: {code, message, hint}}` text, and whose graph resources notify subscribers (`resources/subscribe` on protocol versions
    before 2026-07-28, `subscriptions/listen` after) when a tool changes them."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._subscribers: dict[str, set[Any]] = {}
        self.change_listeners: list[Callable[[], None]] = []  # told after each changing call (the dashboard's events)
        low = self._lowlevel_server
        low.add_request_handler("resources/subscribe", mcp_types.SubscribeRequestParams, self._subscribe)
        low.add_request_handler("resources/unsubscribe", mcp_types.UnsubscribeRequestParams, self._unsubscribe)
        listen = low._request_handlers.get("subscriptions/listen")
        if listen is not None:  # its resource URIs need the scopes reading them needs (HTTP)
            async def checked_listen(ctx: Any, params: Any) -> Any:
                for uri in params.notifications.resource_subscriptions or ():
                    access.check_resource(self, str(uri))
                return await listen.handler(ctx, params)

            low.add_request_handler("subscriptions/listen", listen.params_type, checked_listen)
        self.roots = ClientRoots()
        low.add_notification_handler("notifications/roots/list_changed", mcp_types.NotificationParams,
                                     self._roots_changed)

    async def _roots_changed(self, ctx: Any, params: Any) -> None:
        self.roots.forget(ctx)

    async def _subscribe(self, ctx: Any, params: Any) -> mcp_types.EmptyResult:
        access.check_resource(self, str(params.uri))  # the scope reading it needs (HTTP)
        self._subscribers.setdefault(_canonical(str(params.uri)), set()).add(connection_of(ctx))
        return mcp_types.EmptyResult()

    async def _unsubscribe(self, ctx: Any, params: Any) -> mcp_types.EmptyResult:
        self._subscribers.get(_canonical(str(params.uri)), set()).discard(connection_of(ctx))
        return mcp_types.EmptyResult()

    strict_tools: set[str] = set()
    hidden: set[str] = set()  # accepted, not advertised (set by build_server before the groups register)

    # The SDK's keyword arguments pass through unchanged, whatever its minor version adds.
    def add_tool(self, fn: Any, name: str | None = None, **kwargs: Any) -> None:  # type: ignore[override]
        """Every tool is registered here: strict, closed arguments and a slim advertised schema."""
        super().add_tool(fn, name=name, **kwargs)
        harden(self._tool_manager.get_tool(name or fn.__name__), self.hidden)

    def exposed_tools(self) -> set[str]:
        return {t.name for t in self._tool_manager.list_tools()}

    calls_in_flight = 0  # the HTTP server's shutdown waits for these (http/app.py)
    library_names: Any = list  # set by build_server: the mounted libraries, for token scopes
    unreachable_libraries: Any = list  # set by build_server: those whose database is down (http/app.py /healthz)
    callers: Callers = NoCallers()  # who calls, request by request: server mode sets its tokens' (access.py)

    async def list_tools(self) -> list[Any]:
        return access.visible_tools(self, await super().list_tools())  # a token sees only what it may call

    async def read_resource(self, uri: Any, context: Any = None) -> Any:
        access.check_resource(self, str(uri))  # a token's scopes (HTTP); refused as a client error
        return await super().read_resource(uri, context)

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        started = access.call_started(name)
        self.calls_in_flight += 1
        try:
            # a backlog being embedded waits for a quiet moment (search/embedder.py), but not out a stream of stores
            with REQUESTS.answering(given_way=name not in memory.NOT_WAITED_FOR):
                arguments = await self._with_root(name, arguments, context)
                # a token's scopes first (HTTP; over stdio there is no token and nothing is refused)
                result = access.refusal(self, name, arguments) or await self._call(
                    name, access.readable_only(self, name, arguments), context)  # "*": the caller's libraries
        finally:
            self.calls_in_flight -= 1
        access.log_call(self, name, arguments, started, result)
        result = access.visible_result(self, name, result)
        if isinstance(result, MemlociError):
            if name in n2n.TOOLS:  # hints name the n2n_ tools first, so fit_hint keeps them
                result.hint = n2n.n2n_fields(result.hint or "")
            result.hint = fit_hint(result.hint, self.exposed_tools(), KNOWN_TOOLS)
            if name in self.strict_tools:  # that server's clients read {success, error, error_type}
                return error_reply(result, strict.error_body(result, name), structured=True)
            if name in n2n.TOOLS:  # its argument names; the handshake also in n2n-memory's keys
                return error_reply(result, n2n.error_body(result))
            return error_reply(result)
        return result

    async def _with_root(self, name: str, arguments: dict[str, Any], context: Any) -> dict[str, Any]:
        """A project tool called without a project (no path, no library) gets the client's root
        project as its path (roots.py), so every check an explicit path meets applies to it.
        Over HTTP only for a `*:admin` token (access.may_use_roots): a root is a client's path."""
        key = ROOT_TOOLS.get(name)
        if key is None or not access.may_use_roots(self) or not isinstance(arguments, dict) or any(
                arguments.get(k) not in (None, "") for k in (key, "library", "library_name")):
            return arguments
        root = await self.roots.project_root(context)
        return arguments if root is None else {**arguments, key: root}

    async def _call(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        """The tool's result, or the MemlociError to report (shaped by call_tool for the tool's set)."""
        try:
            result = await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, MemlociError):  # messages may name project paths: only at debug level
                log.info("tool %s: %s", name, cause.code)
                log.debug("tool %s: %s %s", name, cause.code, cause.message)
                return cause
            if isinstance(exc, UnexpectedToolError):
                # A fault of ours (say, a result failing its own output schema), possibly after a
                # write: never blamed on the caller's arguments.
                log.error("tool %s crashed", name, exc_info=cause or exc)
                return InternalError(f"tool {name} failed unexpectedly: {type(cause or exc).__name__}")
            if isinstance(cause, pydantic.ValidationError):
                tool = self._tool_manager.get_tool(name)
                return describe_validation_error(cause, tool.parameters if tool else None,
                                                 accepted_schema(tool) if tool else None)
            if str(exc).startswith("Unknown tool"):
                return NotFoundError(f"no tool named '{name}'", hint="List the tools with tools/list.")
            log.error("tool %s failed", name, exc_info=cause or exc)
            return InternalError(f"tool {name} failed: {exc}")
        tool = self._tool_manager.get_tool(name)
        changes = (tool is not None and tool.annotations is not None and not tool.annotations.read_only_hint
                   and name not in NOT_CHANGING_MEMORY)
        if changes and isinstance(result, CallToolResult) and not result.is_error:
            await self._changed(arguments)
            if arguments.get("project_path") and name != "update_context" and name not in self.strict_tools \
                    and isinstance(result.structured_content, dict) and "update_context" in self.exposed_tools():
                result = _with_hint(result)
        return result

    async def _changed(self, arguments: dict[str, Any]) -> None:
        """Tell `subscriptions/listen` subscribers that a graph resource may have changed, and the
        change listeners that something did."""
        for listener in self.change_listeners:
            listener()
        path = arguments.get("project_path") or arguments.get(n2n.PROJECT_ARG)
        uri = _canonical(f"memloci://graph?path={path}" if path else "memloci://graph")
        try:
            await self._subscriptions.publish(ResourceUpdated(uri=uri))
            for connection in list(self._subscribers.get(uri, ())):
                try:
                    await connection.send_resource_updated(uri)
                except Exception:  # that client is gone
                    self._subscribers[uri].discard(connection)
        except Exception as exc:  # a notification must never fail the call it follows
            log.warning("resource notification failed: %s", type(exc).__name__)


def _canonical(uri: str) -> str:
    """One URI per project, however a client spelled its path (symlinks, "..", a trailing slash)."""
    prefix = "memloci://graph?path="
    if not uri.startswith(prefix):
        return uri
    path = unquote(uri[len(prefix):])
    with suppress(MemlociError, OSError):
        path = str(resolve_project_root(path))
    return prefix + quote(path, safe="/")


def _with_hint(result: CallToolResult) -> CallToolResult:
    """Tools that change a project's memory remind the agent to record the context before committing."""
    structured = {**result.structured_content, "hint": CONTEXT_HINT}
    text = result.content[0].text if result.content and isinstance(result.content[0], TextContent) else ""
    try:
        body = json.loads(text)
    except ValueError:
        body = None
    if isinstance(body, dict):
        text = as_json({**body, "hint": CONTEXT_HINT})
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=structured)


def tool_groups(spec: str | None) -> list[str]:
    """Parse `--tools graph,...`; every name must be a known group."""
    if not spec:
        return list(DEFAULT_GROUPS)
    groups = [g.strip() for g in spec.split(",") if g.strip()]
    unknown = [g for g in groups if g not in GROUPS]
    if unknown or not groups:
        raise ValidationError(f"tools: unknown tool group(s) {', '.join(unknown) or '(none given)'}; "
                              f"known groups: {', '.join(GROUPS)}")
    if "strict" in groups and "graph" in groups:
        raise ValidationError("tools: 'strict' and 'graph' cannot be combined: both have create_entities and "
                              "delete_entities, in different shapes", hint="Use --tools strict,memory,documents,project.")
    return groups


@contextmanager
def _rich_unused() -> Iterator[None]:
    """MCPServer's constructor calls the SDK's configure_logging, which imports Rich (a few
    hundredths of a second of a start) to build a RichHandler for logging.basicConfig; and
    basicConfig does nothing when the root logger has handlers already, as `memloci serve` sets
    them first. Then, for that moment, Rich is not importable: the SDK falls back to a plain
    handler, which basicConfig leaves unused just the same. Logging is the same either way."""
    if not logging.getLogger().handlers or "rich.console" in sys.modules:
        yield
        return
    sys.modules["rich.console"] = None  # type: ignore[assignment]  # an import of it raises ImportError
    try:
        yield
    finally:
        if sys.modules.get("rich.console", False) is None:
            del sys.modules["rich.console"]


def build_server(service: MemoryService, *, name: str = "memloci", groups: list[str] | None = None) -> MemlociServer:
    groups = list(groups or DEFAULT_GROUPS)
    several = len(service.libraries.names()) > 1
    with _rich_unused():
        server = MemlociServer(name=name, version=__version__, instructions=instructions(groups, several),
                               log_level="WARNING")
    # Accepted everywhere but advertised only where they can apply, since each costs context.
    server.hidden = {"library_name", "client_hostname"}
    if not several:
        server.hidden.add("library")
    if "project" not in groups:
        server.hidden |= {"project_path", "confirm_new_project_root"}
    for group in groups:
        GROUPS[group](server, service)
    prompts.register(server, service)  # after the tools: a prompt names only exposed tools
    server.strict_tools = set(strict.TOOLS) if "strict" in groups else set()
    server.library_names = service.libraries.names
    server.unreachable_libraries = service.unreachable_libraries
    return server


GROUP_TOOLS = {"graph": graph.TOOLS, "memory": memory.TOOLS, "documents": documents.TOOLS, "project": project.TOOLS,
               "strict": strict.TOOLS, "n2n": n2n.TOOLS, "maintenance": maintenance.TOOLS,
               "workspace": workspace.TOOLS}


def tool_sizes(service: MemoryService, groups: list[str]) -> list[dict[str, Any]]:
    """What each exposed tool costs in `tools/list` (characters of its JSON as sent), by group:
    the numbers `memloci tools` prints, and the budget tests check."""
    import anyio

    server = build_server(service, groups=groups)
    listed = {t.name: t for t in anyio.run(server.list_tools)}
    return [{"group": g, "tool": name, "chars": tool_size(listed[name])}
            for g in groups for name in GROUP_TOOLS[g] if name in listed]


def serve_from(settings: Settings, *, name: str | None = None) -> tuple[MemoryService, MemlociServer]:
    """The service and the server `memloci serve` runs, from the program's settings: the libraries
    they mount (created on first use), the configured embedder, and the tool groups and name of
    the flags or the config file. The caller starts the embedder and the watcher once a client
    can connect, and closes the service when it is done."""
    config = config_file(settings)
    service = MemoryService(LibraryRegistry(default_specs(settings), create_missing=True, settings=settings),
                            EmbedderHandle(None, settings), embed_pending=True, extract=extraction_on(settings, config))
    try:
        server = build_server(service, name=name or config.get("name") or "memloci",
                              groups=tool_groups(settings.tools or config.get("tools")))
    except BaseException:
        service.close()
        raise
    every, horizon, execute = lifecycle_schedule(config)
    if every != "off":  # off by default; a run leaves a preview unless schedule_execute
        service.schedule = Schedule(service.libraries.specs, settings.home, SCHEDULES[every], horizon, execute=execute,
                                    config=Path(settings.config) if settings.config else None)
        service.schedule.start()
    return service, server
