"""The MCP server: the official SDK's `MCPServer`, our tool groups, our error format."""

from __future__ import annotations

import logging
from typing import Any

import pydantic
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError

from .. import __version__
from ..errors import InternalError, MemlociError, NotFoundError, ValidationError
from ..service import MemoryService
from . import documents, graph, memory
from .replies import describe_validation_error, error_reply

log = logging.getLogger("memloci.mcp")

INSTRUCTIONS = """\
memloci is your durable memory: a knowledge graph of entities (people, projects, decisions),
their typed relations and dated observations, and free-form memories recalled by meaning.
Before answering about the user or their work, recall what you know (retrieve_memory,
search_nodes); record what you learn (store_memory, create_entities, add_observations,
create_relations). Every tool takes an optional `library`."""

GROUPS = {"graph": graph.register, "memory": memory.register, "documents": documents.register}


class MemlociServer(MCPServer):
    """MCPServer whose tool failures all reach the client as `{error: {code, message, hint}}`."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, MemlociError):
                log.info("tool %s: %s %s", name, cause.code, cause.message)
                return error_reply(cause)
            if isinstance(exc, UnexpectedToolError):
                # A fault of ours (say, a result failing its own output schema), possibly after a
                # write: never blamed on the caller's arguments.
                log.error("tool %s crashed", name, exc_info=cause or exc)
                return error_reply(InternalError(f"tool {name} failed unexpectedly: {type(cause or exc).__name__}"))
            if isinstance(cause, pydantic.ValidationError):
                return error_reply(describe_validation_error(cause))
            if str(exc).startswith("Unknown tool"):
                return error_reply(NotFoundError(f"no tool named '{name}'", hint="List the tools with tools/list."))
            log.error("tool %s failed", name, exc_info=cause or exc)
            return error_reply(InternalError(f"tool {name} failed: {exc}"))


def tool_groups(spec: str | None) -> list[str]:
    """Parse `--tools graph,...`; every name must be a known group."""
    if not spec:
        return list(GROUPS)
    groups = [g.strip() for g in spec.split(",") if g.strip()]
    unknown = [g for g in groups if g not in GROUPS]
    if unknown or not groups:
        raise ValidationError(f"tools: unknown tool group(s) {', '.join(unknown) or '(none given)'}; "
                              f"known groups: {', '.join(GROUPS)}")
    return groups


def build_server(service: MemoryService, *, name: str = "memloci", groups: list[str] | None = None) -> MemlociServer:
    server = MemlociServer(name=name, version=__version__, instructions=INSTRUCTIONS, log_level="WARNING")
    for group in groups or list(GROUPS):
        GROUPS[group](server, service)
    return server
