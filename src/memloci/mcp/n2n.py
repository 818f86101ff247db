"""n2n-memory's tool set (`--tools n2n`), for clients and prompts written against it: its tool
names (`n2n_read_graph`, ...), its camelCase arguments (`projectPath`, `confirmNewProjectRoot`,
`summaryMode`, `entityNames`, `deletions`, `outputPath`) and its reply shapes
(`{status, message, _protocol}` for changes, `{graph, context, totalEntityCount, isTruncated,
_protocol}` for reads). Every tool works on the project's `.mcp/` library through the same
service calls as the project tools, so both sets see one memory.

Where n2n-memory and memloci differ, memloci's rule holds and is said in the reply or the
description: `n2n_read_graph` without `limit` returns a page of DEFAULT_GRAPH_LIMIT entities
(`isTruncated` says when there is more), `n2n_search` ranks with memloci's search (typos and
meaning included) so `fuzzy` and `minScore` are accepted and checked but do not change it, and
a sub-folder of a project is refused with the root named rather than walked up from.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from mcp_types import CallToolResult
from pydantic import BaseModel, ConfigDict, Field

from memloci.app.projects import ProjectRef
from memloci.core import schema
from memloci.core.errors import AwaitingConfirmationError, MemlociError, ValidationError
from memloci.core.model import Entity, EntityInput, ObservationBatch, Relation, RelationInput
from memloci.formats.n2n import CONTEXT_KEYS
from memloci.mcp.arguments import tool_annotations
from memloci.mcp.graph import DeletionArg, EntityArg, ObservationArg, RelationArg
from memloci.mcp.replies import reply
from memloci.service.facade import DEFAULT_GRAPH_LIMIT, DEFAULT_SEARCH_LIMIT, MemoryService

TOOLS = ("n2n_read_graph", "n2n_add_entities", "n2n_add_observations", "n2n_create_relations", "n2n_delete_entities",
         "n2n_delete_observations", "n2n_delete_relations", "n2n_open_nodes", "n2n_search", "n2n_update_context",
         "n2n_get_graph_summary", "n2n_export_markdown")
PROJECT_ARG = "projectPath"  # the argument MCP roots fill in when a client leaves it out (see roots.py)
REMINDER = "Remember to call n2n_update_context before 'git commit'."
Status = Literal["IN_PROGRESS", "COMPLETED", "BLOCKED", "PLANNING"]
# n2n-memory reports this for a project without a context.json; it is a reply only, never written.
EMPTY_CONTEXT = {"status": "PLANNING", "nextSteps": []}
# The service names its own arguments in errors; this set's clients know these names instead.
FIELD_NAMES = [(r"\bproject_path\b", "projectPath"), (r"\bconfirm_new_project_root\b", "confirmNewProjectRoot"),
               (r"\boutput_path\b", "outputPath"), (r"\bsummary_mode\b", "summaryMode"),
               (r"\bentity_names\b", "entityNames"), *((rf"\b{ours}\b", theirs) for ours, theirs in CONTEXT_KEYS.items()),
               # tools a hint names: this set's tool for the same job
               *((rf"\b{ours}\b", f"n2n_{theirs}") for ours, theirs in (
                   ("create_entities", "add_entities"), ("search_nodes", "search"), *((t, t) for t in (
                       "update_context", "read_graph", "open_nodes", "export_markdown", "get_graph_summary",
                       "add_observations", "create_relations", "delete_entities", "delete_observations",
                       "delete_relations"))))]

# Selectors carry no description: they repeat on all twelve tools; the server's instructions
# explain them once.
ProjectPath = Annotated[str | None, Field()]
ConfirmRoot = Annotated[str | None, Field()]
# The limits' defaults are the service's (None reaches it), advertised as what they are.
Limit = Annotated[int | None, Field(ge=1, le=schema.PAGE_MAX, json_schema_extra={"default": DEFAULT_GRAPH_LIMIT},
                                    description="Entities per page")]
Offset = Annotated[int, Field(ge=0, le=schema.OFFSET_MAX, description="Entities to skip")]
SearchLimit = Annotated[int | None, Field(ge=1, le=schema.SEARCH_LIMIT_MAX,
                                          json_schema_extra={"default": DEFAULT_SEARCH_LIMIT}, description="Entities per page")]
SearchOffset = Annotated[int, Field(ge=0, le=schema.SEARCH_LIMIT_MAX - 1, description="Entities to skip")]


class Out(BaseModel):
    model_config = ConfigDict(extra="allow")


def n2n_fields(text: str) -> str:
    """The service's field names as this set names them; an argument the caller sent under a wrong
    name ("summary_mode: unknown argument") keeps the name it was sent as."""
    for pattern, name in FIELD_NAMES:
        text = re.sub(pattern + r"(?!: unknown (?:argument|field))", name, text)
    return text


def error_body(exc: MemlociError) -> dict[str, Any]:
    """An error as memloci reports it (`{error: {code, message, hint}}`), with this set's argument
    names (replies.error_reply shapes the reply). The confirmation handshake also carries
    n2n-memory's own keys (`status`, `detectedRoot`, `message`) at the top, since its clients read
    `detectedRoot` from there."""
    body = exc.to_dict()
    err = body["error"]
    err["message"], err["hint"] = n2n_fields(err["message"]), n2n_fields(err.get("hint") or "")
    root = exc.details.get("detected_root")
    if isinstance(exc, AwaitingConfirmationError) and root:
        body = {"status": "AWAITING_CONFIRMATION", "detectedRoot": root,
                "message": f"{err['message']}. To initialize memory for this project, call the tool again with "
                           f"confirmNewProjectRoot set to detectedRoot.", **body}
    elif root:
        body = {"detectedRoot": root, **body}
    return body


def _project(project_path: str | None, confirm: str | None) -> ProjectRef:
    if project_path is None:
        raise ValidationError("projectPath: Field required; give the absolute path of the project root",
                              hint="For example /home/me/code/my-app (a client that shares its roots may leave it out).")
    return ProjectRef(project_path, confirm)


def entity_n2n(e: Entity, *, observations: bool = True) -> dict[str, Any]:
    return {"name": e.name, "entityType": e.entity_type,
            "observations": [o.content for o in e.observations] if observations else []}


def relation_n2n(r: Relation) -> dict[str, Any]:
    return {"from": r.from_entity, "to": r.to_entity, "relationType": r.relation_type}


def context_n2n(ctx: dict[str, Any]) -> dict[str, Any]:
    out = {CONTEXT_KEYS.get(k, k): v for k, v in ctx.items()}
    return out or dict(EMPTY_CONTEXT)


def changed(message: str, action: str = "MEMORY_UPDATED", **extra: Any) -> CallToolResult:
    return reply({"status": "success", "message": message, **extra, "_protocol": {"action": action, "reminder": REMINDER}})


def register(server: Any, service: MemoryService) -> None:
    def root_of(where: ProjectRef) -> str:
        return service.project_info(where)["root"]  # type: ignore[index]

    def n2n_add_entities(entities: list[EntityArg], projectPath: ProjectPath = None,
                         confirmNewProjectRoot: ConfirmRoot = None) -> Annotated[CallToolResult, Out]:
        where = _project(projectPath, confirmNewProjectRoot)
        results = service.create_entities([EntityInput(e.name, e.entityType, tuple(e.observations)) for e in entities],
                                          library=where, origin="n2n_add_entities")
        merged = [r.name for r in results if r.status == "merged"]
        return changed(f"Added {len(results) - len(merged)} entities and merged {len(merged)} into existing ones "
                       f"in root: {root_of(where)}", merged=merged)

    def n2n_add_observations(observations: list[ObservationArg], projectPath: ProjectPath = None,
                             confirmNewProjectRoot: ConfirmRoot = None) -> Annotated[CallToolResult, Out]:
        where = _project(projectPath, confirmNewProjectRoot)
        # n2n-memory skips entities that do not exist (and says how many facts it added)
        results, missing = service.add_observations_to_existing(
            [ObservationBatch(o.entityName, tuple(o.contents)) for o in observations], library=where,
            origin="n2n_add_observations")
        added = sum(len(r.added) for r in results)
        skipped: dict[str, Any] = {"skippedEntities": missing} if missing else {}
        return changed(f"Added {added} observation fragments to root: {root_of(where)}", added=added, **skipped)

    def n2n_create_relations(relations: list[RelationArg], projectPath: ProjectPath = None,
                             confirmNewProjectRoot: ConfirmRoot = None) -> Annotated[CallToolResult, Out]:
        where = _project(projectPath, confirmNewProjectRoot)
        created, existing = service.create_relations([RelationInput(r.from_, r.relation_type, r.to) for r in relations],
                                                     library=where, origin="n2n_create_relations")
        return changed(f"Created {len(created)} relations ({len(existing)} already existed) in root: {root_of(where)}")

    def n2n_delete_entities(entityNames: list[str], projectPath: ProjectPath = None,
                            confirmNewProjectRoot: ConfirmRoot = None) -> Annotated[CallToolResult, Out]:
        where = _project(projectPath, confirmNewProjectRoot)
        deleted = service.delete_entities(entityNames, library=where, origin="n2n_delete_entities")
        return changed(f"Deleted {len(deleted)} entities from root: {root_of(where)}")

    def n2n_delete_observations(deletions: list[DeletionArg], projectPath: ProjectPath = None,
                                confirmNewProjectRoot: ConfirmRoot = None) -> Annotated[CallToolResult, Out]:
        where = _project(projectPath, confirmNewProjectRoot)
        results = service.delete_observations([ObservationBatch(d.entityName, tuple(d.observations)) for d in deletions],
                                              library=where, origin="n2n_delete_observations")
        return changed(f"Deleted {sum(len(r.removed) for r in results)} observations from root: {root_of(where)}")

    def n2n_delete_relations(relations: list[RelationArg], projectPath: ProjectPath = None,
                             confirmNewProjectRoot: ConfirmRoot = None) -> Annotated[CallToolResult, Out]:
        where = _project(projectPath, confirmNewProjectRoot)
        deleted = service.delete_relations([RelationInput(r.from_, r.relation_type, r.to) for r in relations],
                                           library=where, origin="n2n_delete_relations")
        return changed(f"Deleted {len(deleted)} relations from root: {root_of(where)}")

    def n2n_read_graph(summaryMode: Annotated[bool, Field(description="Names and types only")] = False,
                       limit: Limit = None, offset: Offset = 0, projectPath: ProjectPath = None,
                       confirmNewProjectRoot: ConfirmRoot = None) -> Annotated[CallToolResult, Out]:
        where = _project(projectPath, confirmNewProjectRoot)
        page = service.read_graph(limit=limit, offset=offset, summary=summaryMode, library=where)
        return reply({"graph": {"entities": [entity_n2n(e, observations=not summaryMode) for e in page.entities],
                                "relations": [relation_n2n(r) for r in page.relations]},
                      "context": context_n2n(service.read_context(library=where)),
                      "totalEntityCount": page.total_entity_count, "isTruncated": page.is_truncated,
                      "_protocol": {"action": "CONTEXT_LOADED", "reminder": REMINDER}})

    def n2n_get_graph_summary(limit: Limit = None, offset: Offset = 0, projectPath: ProjectPath = None,
                              confirmNewProjectRoot: ConfirmRoot = None) -> Annotated[CallToolResult, Out]:
        where = _project(projectPath, confirmNewProjectRoot)
        summary = service.graph_summary(limit=limit, offset=offset, library=where)
        return reply({"entities": summary["entities"], "relationCount": summary["relation_count"],
                      "totalEntityCount": summary["total_entity_count"], "isTruncated": summary["is_truncated"]})

    def n2n_search(query: Annotated[str, Field(description="Words or part of a word")], limit: SearchLimit = None,
                   offset: SearchOffset = 0, fuzzy: Annotated[bool, Field(description="Accepted; typos always match")] = True,
                   minScore: Annotated[float, Field(ge=0, le=1, description="Accepted; ranking decides")] = 0.3,
                   projectPath: ProjectPath = None,
                   confirmNewProjectRoot: ConfirmRoot = None) -> Annotated[CallToolResult, Out]:
        where = _project(projectPath, confirmNewProjectRoot)
        result = service.search_nodes(query, limit=limit, offset=offset, library=where)
        return reply({"entities": [entity_n2n(h.entity) for h in result.hits],
                      "relations": [relation_n2n(r) for r in result.relations],
                      "totalResults": result.total_count if result.total_count is not None else len(result.hits),
                      "isTruncated": result.is_truncated})

    def n2n_open_nodes(names: list[str], projectPath: ProjectPath = None,
                       confirmNewProjectRoot: ConfirmRoot = None) -> Annotated[CallToolResult, Out]:
        graph = service.open_nodes(names, library=_project(projectPath, confirmNewProjectRoot))
        return reply({"entities": [entity_n2n(e) for e in graph.entities],
                      "relations": [relation_n2n(r) for r in graph.relations]})

    def n2n_update_context(activeTask: Annotated[str | None, Field(description="What you are working on")] = None,
                           status: Status | None = None, reason: str | None = None, nextSteps: list[str] | None = None,
                           lastCommit: str | None = None, projectPath: ProjectPath = None,
                           confirmNewProjectRoot: ConfirmRoot = None) -> Annotated[CallToolResult, Out]:
        where = _project(projectPath, confirmNewProjectRoot)
        ctx = service.update_context(active_task=activeTask, status=status, reason=reason, next_steps=nextSteps,
                                     last_commit=lastCommit, library=where)
        return changed(f"Project context (hot-state) updated for root: {root_of(where)}", "CONTEXT_UPDATED",
                       context=context_n2n(ctx))

    def n2n_export_markdown(outputPath: Annotated[str, Field(description="Relative to the project root")] =
                            "KNOWLEDGE_GRAPH.md", projectPath: ProjectPath = None,
                            confirmNewProjectRoot: ConfirmRoot = None) -> Annotated[CallToolResult, Out]:
        where = _project(projectPath, confirmNewProjectRoot)
        done = service.export_markdown(outputPath, library=where)
        return changed(f"Exported knowledge graph to {done['path']}", "EXPORTED", path=done["path"])

    graph_example = '{"projectPath": "/home/me/app", '
    for fn, title, kind, text in (
        (n2n_read_graph, "Read Graph", "read",
         f"Read the project's graph and hot context, a page at a time (default {DEFAULT_GRAPH_LIMIT} entities; "
         "isTruncated tells when to fetch the next offset). summaryMode=true: names and types only.\n"
         f'Example: {graph_example}"summaryMode": true}}'),
        (n2n_add_entities, "Add Entities", "write",
         "Add entities; a name that exists gets the new observations merged and keeps its type.\n"
         f'Example: {graph_example}"entities": [{{"name": "auth", "entityType": "module", "observations": ["uses JWT"]}}]}}'),
        (n2n_add_observations, "Add Observations", "write+",
         "Add observations to existing entities; entities not found are skipped (listed in skippedEntities).\n"
         f'Example: {graph_example}"observations": [{{"entityName": "auth", "contents": ["keys rotate daily"]}}]}}'),
        (n2n_create_relations, "Create Relations", "write+",
         "Relate existing entities (active voice); existing relations are left as they are, a missing end is refused.\n"
         f'Example: {graph_example}"relations": [{{"from": "api", "to": "auth", "relationType": "uses"}}]}}'),
        (n2n_delete_entities, "Delete Entities", "delete",
         f'Delete entities and their relations.\nExample: {graph_example}"entityNames": ["auth"]}}'),
        (n2n_delete_observations, "Delete Observations", "delete",
         "Delete observations from entities.\n"
         f'Example: {graph_example}"deletions": [{{"entityName": "auth", "observations": ["uses JWT"]}}]}}'),
        (n2n_delete_relations, "Delete Relations", "delete",
         "Delete relations.\n"
         f'Example: {graph_example}"relations": [{{"from": "api", "to": "auth", "relationType": "uses"}}]}}'),
        (n2n_open_nodes, "Open Nodes", "read",
         f'Open entities by name with the relations touching them.\nExample: {graph_example}"names": ["auth"]}}'),
        (n2n_search, "Search", "read",
         f"Search entities by words or part of a word, ranked (default {DEFAULT_SEARCH_LIMIT} a page).\n"
         f'Example: {graph_example}"query": "jwt"}}'),
        (n2n_update_context, "Update Context", "write+",
         "Record the hot context (merged; updatedAt set by the server). Call it before each git commit.\n"
         f'Example: {graph_example}"activeTask": "Rotate keys", "status": "IN_PROGRESS", "nextSteps": ["deploy"]}}'),
        (n2n_get_graph_summary, "Get Graph Summary", "read",
         f'Entity names and types with the relation count: a cheap map.\nExample: {graph_example}"limit": 100}}'),
        (n2n_export_markdown, "Export Markdown", "write+",
         "Write the graph and context as Markdown inside the project root.\n"
         f'Example: {graph_example}"outputPath": "KNOWLEDGE_GRAPH.md"}}'),
    ):
        annotations = tool_annotations(title, read_only=kind == "read", destructive=kind == "delete",
                                   idempotent=kind != "write")
        server.add_tool(fn, title=title, description=text, annotations=annotations)
