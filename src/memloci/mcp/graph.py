"""The nine knowledge-graph tools of the official MCP memory server, same names and arguments.

Additions are optional arguments only (`library`, `limit`, `offset`, `summary_mode`, `max_tokens`,
`compact`), so
prompts and clients written for the official server work unchanged. The text content keeps
the official server's JSON shape (clients parse it); the structured content says more.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

from mcp_types import CallToolResult
from pydantic import BaseModel, ConfigDict, Field, model_validator

from memloci.core import schema
from memloci.core.model import (
    AddedObservations,
    CreatedEntity,
    Entity,
    EntityInput,
    ObservationBatch,
    Relation,
    RelationInput,
)
from memloci.mcp.arguments import (
    Compact,
    ConfirmRoot,
    Libraries,
    Library,
    LibraryName,
    MaxTokens,
    ProjectPath,
    selected,
    several,
    tool_annotations,
)
from memloci.mcp.budget import (
    ENTITIES,
    ENTITY_DETAILS,
    compact_entity,
    compact_relation,
    fit,
    kept_relations,
    relations_size,
)
from memloci.mcp.replies import reply
from memloci.mcp.surface import Args, hide
from memloci.service.across import AcrossSearch
from memloci.service.facade import DEFAULT_GRAPH_LIMIT, DEFAULT_SEARCH_LIMIT, MemoryService

# -- arguments (the official shapes) -----------------------------------------------------


TOOLS = ("create_entities", "create_relations", "add_observations", "delete_entities", "delete_observations",
         "delete_relations", "read_graph", "search_nodes", "open_nodes")


class EntityArg(Args):
    name: str
    entityType: str = Field(description="e.g. person, project")
    observations: list[str] = Field(default_factory=list, description="Facts about it")


class RelationArg(Args):
    # The official shape `{from, to, relationType}`, advertised as is; the Markdown-library shape
    # says `type` (accepted, not advertised). No docstring: it would be sent in every tools/list.

    model_config = ConfigDict(json_schema_extra=lambda s: hide(s, "type", require="relationType"))

    from_: str = Field(alias="from", description="Source entity name")
    to: str = Field(description="Target entity name")
    relationType: str | None = Field(None, description="In active voice, e.g. works_at")
    type: str | None = None

    @model_validator(mode="after")
    def _one_type(self) -> RelationArg:
        if (self.relationType is None) == (self.type is None):
            raise ValueError("give exactly one of relationType and type" if self.type else
                             "relationType: Field required")
        return self

    @property
    def relation_type(self) -> str:
        return self.relationType if self.relationType is not None else self.type  # type: ignore[return-value]


class ObservationArg(Args):
    entityName: str
    contents: list[str] = Field(description="Observations to add")


class DeletionArg(Args):
    entityName: str
    observations: list[str] = Field(description="Observations to delete")


# -- results -----------------------------------------------------------------------------


class EntityOut(BaseModel):
    name: str
    entityType: str
    observations: list[str] | None = None
    observationDates: list[str] | None = Field(None, description="When each observation was recorded (UTC), same order")
    createdAt: str | None = None
    updatedAt: str | None = None


class RelationOut(BaseModel):
    model_config = ConfigDict(populate_by_name=True)
    from_: str = Field(alias="from")
    to: str
    relationType: str
    createdAt: str | None = None


class GraphOut(BaseModel):
    entities: list[EntityOut]
    relations: list[RelationOut]


class PagedGraphOut(GraphOut):
    total_entity_count: int
    is_truncated: bool
    offset: int
    next_offset: int | None = None
    hint: str | None = None


# A search of several libraries adds `library` (and `why`) to each entity, `library` to each
# relation and `libraries` to the reply: keys the schema leaves open rather than advertises on
# every listing of the tools (the tools' size is budgeted, tests/test_surface.py).
class SearchOut(GraphOut):
    is_truncated: bool
    total_count: int
    offset: int
    next_offset: int | None = None
    why: dict[str, str]


class CreatedEntityOut(EntityOut):
    status: Literal["created", "merged"]
    skippedObservations: list[str] | None = None
    note: str | None = None


class CreateEntitiesOut(BaseModel):
    entities: list[CreatedEntityOut]
    created: list[str]
    merged: list[str]


class CreateRelationsOut(BaseModel):
    relations: list[RelationOut]
    already_existed: list[RelationOut]


class AddedOut(BaseModel):
    entityName: str
    addedObservations: list[str]
    skippedObservations: list[str]


class AddObservationsOut(BaseModel):
    results: list[AddedOut]


class DeleteOut(BaseModel):
    success: bool
    message: str
    deleted: list[Any] = Field(default_factory=list, description="What was actually removed")


# -- shaping -----------------------------------------------------------------------------


def entity_out(e: Entity, *, observations: bool = True, dates: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"name": e.name, "entityType": e.entity_type}
    if observations:
        out["observations"] = [o.content for o in e.observations]
        if dates:
            out["observationDates"] = [o.created_at for o in e.observations]
    out["createdAt"] = e.created_at
    out["updatedAt"] = e.updated_at
    return out


def relation_out(r: Relation, *, dates: bool = False) -> dict[str, Any]:
    out = {"from": r.from_entity, "to": r.to_entity, "relationType": r.relation_type}
    if dates and r.created_at:
        out["createdAt"] = r.created_at
    return out


def extracted_out(result: AddedObservations | CreatedEntity) -> dict[str, Any]:
    """What extraction made of an entity's new observations, only what there is: `relations_added`
    (to the existing entities they mention) and `entities_suggested` (names no entity has; none
    is created). Keys the output schemas leave open, like SearchOut's `library`."""
    out: dict[str, Any] = {}
    if result.relations_added:
        out["relations_added"] = [relation_out(r) for r in result.relations_added]
    if result.entities_suggested:
        out["entities_suggested"] = list(result.entities_suggested)
    return out


def found_across(result: AcrossSearch) -> dict[str, Any]:
    """search_nodes' reply for a search of several libraries: each entity and relation names its
    library, and each entity says why it matched (`why`, by name, keeps the best hit of a name)."""
    why: dict[str, str] = {}
    for h in result.hits:
        why.setdefault(h.entity.name, h.why)
    structured: dict[str, Any] = {
        "entities": [{**entity_out(h.entity, dates=True), "library": h.library, "why": h.why} for h in result.hits],
        "relations": [{**relation_out(r, dates=True), "library": library} for library, r in result.relations],
        "is_truncated": result.is_truncated, "total_count": result.total_count, "offset": result.offset,
        "why": why, "libraries": list(result.libraries)}
    if result.is_truncated:
        structured["next_offset"] = result.offset + len(result.hits)
    return structured


def fitted(structured: dict[str, Any], max_tokens: int | None, compact: bool, needs: Literal["both", "either"],
           rest: Callable[[dict[str, Any], list[dict[str, Any]], int], str]) -> dict[str, Any]:
    """A graph read's reply, compact if asked, fitted to max_tokens (mcp/budget.py). Relations
    leave with the entities they need (`both` ends, or `either`); `rest(reply, kept entities,
    how many left out)` sets the paging fields and says how to get the rest."""
    entities, relations = structured["entities"], structured["relations"]
    why = structured.get("why")
    if compact:
        entities = [compact_entity(e) for e in entities]
        relations = [compact_relation(r) for r in relations]
        structured = {**structured, "relations": relations, "details": ENTITY_DETAILS}
        if why is not None:
            why = structured["why"] = {}
    if max_tokens is None:
        return {**structured, "entities": entities}

    def finish(kept: list[dict[str, Any]], omitted: int) -> dict[str, Any]:
        out = {**structured, "entities": kept}
        if omitted:
            names = {e["name"] for e in kept}
            out["relations"] = kept_relations(relations, names, needs)
            if why is not None:
                out["why"] = {n: w for n, w in why.items() if n in names}
            out["more"] = (f"{omitted} more {'entity' if omitted == 1 else 'entities'} left out: "
                           f"{rest(out, kept, omitted)}, or a larger max_tokens")
        return out

    return fit(entities, ENTITIES, max_tokens, finish, relations_size(entities, relations, needs, why))


def next_page(out: dict[str, Any], kept: list[dict[str, Any]], omitted: int) -> str:
    out["is_truncated"] = True
    out["next_offset"] = out["offset"] + len(kept)
    return f"the next page (offset={out['next_offset']})"


# -- tools -------------------------------------------------------------------------------


def register(server: Any, service: MemoryService) -> None:
    def create_entities(
        entities: list[EntityArg], library: Library = None, library_name: LibraryName = None,
        project_path: ProjectPath = None, confirm_new_project_root: ConfirmRoot = None
    ) -> Annotated[CallToolResult, CreateEntitiesOut]:
        results = service.create_entities(
            [EntityInput(e.name, e.entityType, tuple(e.observations)) for e in entities],
            library=selected(library, library_name, project_path, confirm_new_project_root),
        )
        shaped = []
        for r in results:
            item: dict[str, Any] = {"name": r.name, "entityType": r.entity_type, "observations": list(r.observations),
                                    "createdAt": r.created_at, "status": r.status}
            if r.skipped_observations:
                item["skippedObservations"] = list(r.skipped_observations)
            if r.ignored_type:
                item["note"] = f"kept the existing type '{r.entity_type}'; entityType '{r.ignored_type}' was not applied"
            shaped.append({**item, **extracted_out(r)})
        structured = {"entities": shaped,
                      "created": [r.name for r in results if r.status == "created"],
                      "merged": [r.name for r in results if r.status == "merged"]}
        return reply(structured, text=shaped)

    def create_relations(
        relations: list[RelationArg], library: Library = None, library_name: LibraryName = None,
        project_path: ProjectPath = None, confirm_new_project_root: ConfirmRoot = None
    ) -> Annotated[CallToolResult, CreateRelationsOut]:
        created, existing = service.create_relations(
            [RelationInput(r.from_, r.relation_type, r.to) for r in relations], library=selected(library, library_name, project_path, confirm_new_project_root)
        )
        shaped = [relation_out(r) for r in created]
        return reply({"relations": shaped, "already_existed": [relation_out(r) for r in existing]}, text=shaped)

    def add_observations(
        observations: list[ObservationArg], library: Library = None, library_name: LibraryName = None,
        project_path: ProjectPath = None, confirm_new_project_root: ConfirmRoot = None
    ) -> Annotated[CallToolResult, AddObservationsOut]:
        results = service.add_observations(
            [ObservationBatch(o.entityName, tuple(o.contents)) for o in observations],
            library=selected(library, library_name, project_path, confirm_new_project_root),
        )
        shaped = [{"entityName": r.entity_name, "addedObservations": list(r.added),
                   "skippedObservations": list(r.skipped), **extracted_out(r)} for r in results]
        return reply({"results": shaped}, text=shaped)

    def delete_entities(
        entityNames: list[str],
        library: Library = None, library_name: LibraryName = None,
        project_path: ProjectPath = None, confirm_new_project_root: ConfirmRoot = None,
    ) -> Annotated[CallToolResult, DeleteOut]:
        deleted = service.delete_entities(entityNames, library=selected(library, library_name, project_path, confirm_new_project_root))
        message = "Entities deleted successfully"
        return reply({"success": True, "message": message, "deleted": deleted}, text=message)

    def delete_observations(
        deletions: list[DeletionArg], library: Library = None, library_name: LibraryName = None,
        project_path: ProjectPath = None, confirm_new_project_root: ConfirmRoot = None
    ) -> Annotated[CallToolResult, DeleteOut]:
        results = service.delete_observations(
            [ObservationBatch(d.entityName, tuple(d.observations)) for d in deletions],
            library=selected(library, library_name, project_path, confirm_new_project_root),
        )
        message = "Observations deleted successfully"
        deleted = [{"entityName": r.entity_name, "observations": list(r.removed)} for r in results]
        return reply({"success": True, "message": message, "deleted": deleted}, text=message)

    def delete_relations(
        relations: list[RelationArg],
        library: Library = None, library_name: LibraryName = None,
        project_path: ProjectPath = None, confirm_new_project_root: ConfirmRoot = None,
    ) -> Annotated[CallToolResult, DeleteOut]:
        deleted = service.delete_relations(
            [RelationInput(r.from_, r.relation_type, r.to) for r in relations], library=selected(library, library_name, project_path, confirm_new_project_root)
        )
        message = "Relations deleted successfully"
        return reply({"success": True, "message": message, "deleted": [relation_out(r) for r in deleted]}, text=message)

    def read_graph(
        summary_mode: Annotated[bool, Field(description="Names and types only, no observations")] = False,
        limit: Annotated[int | None, Field(ge=1, le=schema.PAGE_MAX, json_schema_extra={"default": DEFAULT_GRAPH_LIMIT},
                                           description="Entities per page")] = None,
        offset: Annotated[int, Field(ge=0, le=schema.OFFSET_MAX, description="Entities to skip (for the next page)")] = 0,
        max_tokens: MaxTokens = None, compact: Compact = False,
        library: Library = None, library_name: LibraryName = None,
        project_path: ProjectPath = None, confirm_new_project_root: ConfirmRoot = None,
    ) -> Annotated[CallToolResult, PagedGraphOut]:
        where = selected(library, library_name, project_path, confirm_new_project_root)
        page = service.read_graph(limit=limit, offset=offset, summary=summary_mode, library=where)
        structured: dict[str, Any] = {
            "entities": [entity_out(e, observations=not summary_mode) for e in page.entities],
            "relations": [relation_out(r) for r in page.relations],
            "total_entity_count": page.total_entity_count,
            "is_truncated": page.is_truncated,
            "offset": page.offset,
        }
        if page.is_truncated:
            nxt = page.offset + len(page.entities)
            structured["next_offset"] = nxt
            structured["hint"] = (f"Showing {len(page.entities)} of {page.total_entity_count} entities; "
                                  f"call read_graph with offset={nxt} for more, or use search_nodes.")
        context = service.read_context(library=where)
        if context or project_path:  # the hot context travels with the graph
            structured["context"] = context

        def rest(out: dict[str, Any], kept: list[dict[str, Any]], omitted: int) -> str:
            out.pop("hint", None)
            return next_page(out, kept, omitted)

        return reply(fitted(structured, max_tokens, compact, "both", rest))

    def search_nodes(
        query: Annotated[str, Field(description="Words or parts of words")],
        limit: Annotated[int | None, Field(ge=1, le=schema.SEARCH_LIMIT_MAX, json_schema_extra={"default": DEFAULT_SEARCH_LIMIT},
                                           description="Entities per page")] = None,
        offset: Annotated[int, Field(ge=0, le=schema.SEARCH_LIMIT_MAX - 1, description="Entities to skip (the next page)")] = 0,
        max_tokens: MaxTokens = None, compact: Compact = False,
        library: Libraries = None, library_name: LibraryName = None,
        project_path: ProjectPath = None, confirm_new_project_root: ConfirmRoot = None,
    ) -> Annotated[CallToolResult, SearchOut]:
        names = several(library, service.libraries.names(), library_name, project_path, confirm_new_project_root)
        if names is not None:
            return reply(fitted(found_across(service.search_nodes_across(query, libraries=names, limit=limit,
                                                                         offset=offset)),
                                max_tokens, compact, "either", next_page))
        assert not isinstance(library, list)  # several() took every list
        result = service.search_nodes(query, limit=limit, offset=offset,
                                      library=selected(library, library_name, project_path, confirm_new_project_root))
        structured: dict[str, Any] = {
            "entities": [entity_out(h.entity, dates=True) for h in result.hits],
            "relations": [relation_out(r, dates=True) for r in result.relations],
            "is_truncated": result.is_truncated,
            "total_count": result.total_count,
            "offset": result.offset,
            "why": {h.entity.name: h.why for h in result.hits},
        }
        if result.is_truncated:
            structured["next_offset"] = result.offset + len(result.hits)
        return reply(fitted(structured, max_tokens, compact, "either", next_page))

    def open_nodes(
        names: list[str],
        max_tokens: MaxTokens = None, compact: Compact = False,
        library: Library = None, library_name: LibraryName = None,
        project_path: ProjectPath = None, confirm_new_project_root: ConfirmRoot = None,
    ) -> Annotated[CallToolResult, GraphOut]:
        graph = service.open_nodes(names, library=selected(library, library_name, project_path, confirm_new_project_root))
        structured = {
            "entities": [entity_out(e, dates=True) for e in graph.entities],
            "relations": [relation_out(r, dates=True) for r in graph.relations],
        }

        def rest(out: dict[str, Any], kept: list[dict[str, Any]], omitted: int) -> str:
            shown = {e["name"] for e in kept}
            return f"open_nodes with names {[e.name for e in graph.entities if e.name not in shown]}"

        return reply(fitted(structured, max_tokens, compact, "either", rest))

    server.add_tool(
        create_entities, title="Create Entities",
        description=(
            "Create entities. A name that exists (any case) is not duplicated: the new observations merge into it "
            "and its type is kept; the reply marks each entity 'created' or 'merged'.\n"
            'Example: {"entities": [{"name": "Alice", "entityType": "person", "observations": ["Works at Acme"]}]}'
        ),
        annotations=tool_annotations("Create Entities"),
    )
    server.add_tool(
        create_relations, title="Create Relations",
        description=(
            "Create directed relations between existing entities. Fails with INVALID_RELATION, "
            "changing nothing, if an endpoint does not exist; an existing relation is left as is.\n"
            'Example: {"relations": [{"from": "Alice", "to": "Acme", "relationType": "works_at"}]}'
        ),
        annotations=tool_annotations("Create Relations", idempotent=True),
    )
    server.add_tool(
        add_observations, title="Add Observations",
        description=(
            "Add observations (dated facts) to existing entities. Fails with NOT_FOUND, changing nothing, if an "
            "entity does not exist; observations it already has are skipped.\n"
            'Example: {"observations": [{"entityName": "Alice", "contents": ["Prefers email"]}]}'
        ),
        annotations=tool_annotations("Add Observations", idempotent=True),
    )
    server.add_tool(
        delete_entities, title="Delete Entities",
        description="Delete entities with their observations and every relation touching them. Names not found are ignored.\n"
                    'Example: {"entityNames": ["Alice"]}',
        annotations=tool_annotations("Delete Entities", destructive=True, idempotent=True),
    )
    server.add_tool(
        delete_observations, title="Delete Observations",
        description="Delete specific observations from entities. Missing ones are ignored.\n"
                    'Example: {"deletions": [{"entityName": "Alice", "observations": ["Prefers email"]}]}',
        annotations=tool_annotations("Delete Observations", destructive=True, idempotent=True),
    )
    server.add_tool(
        delete_relations, title="Delete Relations",
        description="Delete specific relations. Missing ones are ignored.\n"
                    'Example: {"relations": [{"from": "Alice", "to": "Acme", "relationType": "works_at"}]}',
        annotations=tool_annotations("Delete Relations", destructive=True, idempotent=True),
    )
    server.add_tool(
        read_graph, title="Read Graph",
        description=(
            f"Read the knowledge graph a page at a time (default {DEFAULT_GRAPH_LIMIT} entities; next_offset), with "
            "the relations whose both ends are on the page. Prefer search_nodes to find something specific.\n"
            'Example: {"summary_mode": true, "limit": 100}'
        ),
        annotations=tool_annotations("Read Graph", read_only=True, idempotent=True),
    )
    server.add_tool(
        search_nodes, title="Search Nodes",
        description=(
            "Search entities by words or any part of a word in their names, types, aliases and observations, "
            "ranked; case-insensitive. An empty query lists every entity. A page at a time (next_offset).\n"
            'Example: {"query": "alice acme email", "limit": 10}'
        ),
        annotations=tool_annotations("Search Nodes", read_only=True, idempotent=True),
    )
    server.add_tool(
        open_nodes, title="Open Nodes",
        description=(
            "Open entities by name (case-insensitive) or alias with their dated observations and every relation "
            "touching them; an alias two entities share opens both.\n"
            'Example: {"names": ["Alice", "Acme"]}'
        ),
        annotations=tool_annotations("Open Nodes", read_only=True, idempotent=True),
    )
