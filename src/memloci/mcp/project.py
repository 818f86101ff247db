"""Project memory: the hot context, the graph summary, the Markdown export into a project;
and the `memloci://graph` resources (graph and context of the default library or a project)."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from mcp.server.mcpserver.exceptions import ResourceError
from mcp.server.mcpserver.resources.templates import ResourceSecurity
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, CallToolResult
from pydantic import BaseModel, ConfigDict, Field

from memloci.app.projects import ProjectRef
from memloci.core import schema
from memloci.core.errors import AwaitingConfirmationError, MemlociError, NotFoundError, ValidationError
from memloci.mcp.arguments import ConfirmRoot, Library, LibraryName, ProjectPath, selected, tool_annotations
from memloci.mcp.graph import entity_out, relation_out
from memloci.mcp.replies import reply
from memloci.service.facade import DEFAULT_GRAPH_LIMIT, MemoryService

TOOLS = ("update_context", "get_graph_summary", "export_markdown")
Status = Literal["IN_PROGRESS", "COMPLETED", "BLOCKED", "PLANNING"]


class Out(BaseModel):
    model_config = ConfigDict(extra="allow")


def graph_document(service: MemoryService, library: str | ProjectRef | None) -> str:
    """The whole graph and the context as JSON (what the resources return)."""
    try:
        graph = service.export_graph(order="name", library=library)
        context = service.read_context(library=library)  # a refused context.md link is an error too
    except MemlociError as exc:  # reaches the client as a resource error with our code and hint
        text = f"{exc.code}: {exc.message}" + (f" ({exc.hint})" if exc.hint else "")
        if isinstance(exc, (ValidationError, NotFoundError, AwaitingConfirmationError)):
            # the URI asked for something wrong (a bad path, no such project): invalid params,
            # not the -32603 of a fault of ours
            raise MCPError(code=INVALID_PARAMS, message=text, data={"code": exc.code}) from exc
        raise ResourceError(text) from exc
    return json.dumps({"entities": [entity_out(e) for e in graph.entities],
                       "relations": [relation_out(r) for r in graph.relations],
                       "context": context}, ensure_ascii=False, indent=1, allow_nan=False)


def with_project(body: dict[str, Any], service: MemoryService, where: str | ProjectRef | None) -> dict[str, Any]:
    """A reply about a project names it: `project: {id, root}` (the id is the same in every clone)."""
    info = service.project_info(where)
    return {**body, "project": info} if info else body


def register(server: Any, service: MemoryService) -> None:
    def update_context(
        active_task: Annotated[str | None, Field(description="What you are working on now")] = None,
        status: Annotated[Status | None, Field(description="IN_PROGRESS, COMPLETED, BLOCKED or PLANNING")] = None,
        reason: Annotated[str | None, Field(description="Why: the goal, or what blocks it")] = None,
        next_steps: Annotated[list[str] | None, Field(description="The next steps, in order")] = None,
        last_commit: Annotated[str | None, Field(description="The last commit (hash or message)")] = None,
        library: Library = None, library_name: LibraryName = None,
        project_path: ProjectPath = None, confirm_new_project_root: ConfirmRoot = None,
    ) -> Annotated[CallToolResult, Out]:
        where = selected(library, library_name, project_path, confirm_new_project_root)
        ctx = service.update_context(active_task=active_task, status=status, reason=reason, next_steps=next_steps,
                                     last_commit=last_commit, library=where)
        return reply(with_project({"context": ctx}, service, where))

    def get_graph_summary(
        limit: Annotated[int | None, Field(ge=1, le=schema.PAGE_MAX, json_schema_extra={"default": DEFAULT_GRAPH_LIMIT},
                                           description="Entities per page")] = None,
        offset: Annotated[int, Field(ge=0, le=schema.OFFSET_MAX, description="Entities to skip")] = 0,
        library: Library = None, library_name: LibraryName = None,
        project_path: ProjectPath = None, confirm_new_project_root: ConfirmRoot = None,
    ) -> Annotated[CallToolResult, Out]:
        where = selected(library, library_name, project_path, confirm_new_project_root)
        return reply(with_project(service.graph_summary(limit=limit, offset=offset, library=where), service, where))

    def export_markdown(
        output_path: Annotated[str, Field(description="File inside the project root")] = "KNOWLEDGE_GRAPH.md",
        library: Library = None, library_name: LibraryName = None,
        project_path: ProjectPath = None, confirm_new_project_root: ConfirmRoot = None,
    ) -> Annotated[CallToolResult, Out]:
        return reply(service.export_markdown(output_path,
                                             library=selected(library, library_name, project_path, confirm_new_project_root)))

    server.add_tool(update_context, title="Update Context", annotations=tool_annotations("Update Context", idempotent=True),
                    description="Record the hot context of the current work (merged into what is there; updated_at is "
                                "set by the server). Call it before each git commit.\n"
                                'Example: {"project_path": "/home/me/app", "active_task": "Move sessions to Redis", '
                                '"status": "IN_PROGRESS", "next_steps": ["load-test"]}')
    server.add_tool(get_graph_summary, title="Get Graph Summary",
                    annotations=tool_annotations("Get Graph Summary", read_only=True, idempotent=True),
                    description="Entity names and types only, with the relation count: a cheap overview.\n"
                                'Example: {"project_path": "/home/me/app", "limit": 100}')
    server.add_tool(export_markdown, title="Export Markdown", annotations=tool_annotations("Export Markdown", idempotent=True),
                    description="Write the project's graph and context as one Markdown file inside the project root.\n"
                                'Example: {"project_path": "/home/me/app", "output_path": "docs/KNOWLEDGE_GRAPH.md"}')

    @server.resource("memloci://graph", name="graph", mime_type="application/json",
                     description="The default library's graph and hot context")
    def default_graph() -> str:
        return graph_document(service, None)

    # `path` is an absolute path by design; resolve_project_root checks it (NUL, relative, markers).
    @server.resource("memloci://graph{?path}", name="project-graph", mime_type="application/json",
                     security=ResourceSecurity(exempt_params={"path"}),
                     description="A project's graph and hot context: memloci://graph?path=/abs/project/root "
                                 "(an established project only; resources never create one)")
    def project_graph(path: str = "") -> str:
        if not path:
            return graph_document(service, None)
        return graph_document(service, ProjectRef(path, None, may_create=False))
