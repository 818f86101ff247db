"""The strict-validation memory server's tool set (`--tools strict`), for clients written
against it: its names, its argument names and its reply shape `{success, data?, error?,
error_type?}`. The rules are the library's schema (`--schema strict` for that server's)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated, Any

from mcp_types import CallToolResult
from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from memloci.core.errors import MemlociError, NotFoundError
from memloci.core.model import Entity, EntityInput, ObservationBatch, RelationInput
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
from memloci.mcp.budget import ENTITIES, compact_entity, fit
from memloci.mcp.graph import entity_out, relation_out
from memloci.mcp.replies import reply
from memloci.mcp.surface import Args
from memloci.service.facade import MemoryService

TOOLS = ("get_entity", "get_graph", "create_entities", "add_observation", "create_relation", "search_memory",
         "delete_entities", "delete_relation", "flush_memory")
RECENCY = re.compile(r"\b(most\s+recent|latest|newest|last|recent(?:ly)?)\b", re.IGNORECASE)


# The service names the graph set's fields; this set's clients know these names instead.
FIELD_NAMES: dict[str, list[tuple[str, str]]] = {
    "create_entities": [(r"\b(entities\[\d+\])\.entityType\b", r"\1.entity_type")],
    "add_observation": [(r"^entities not found:", "entity: not found:"), (r"\bCreate them\b", "Create it"),
                        (r"\bobservations\[0\]\.entityName\b", "entity"),
                        (r"\bobservations\[0\]\.contents\[0\]", "observation"),
                        (r"\bobservations\[0\]\.contents\b", "observation"), (r"\bobservations\[0\]", "entity")],
    "create_relation": [(r"\brelations\[0\]\.from\b", "from_entity"), (r"\brelations\[0\]\.to\b", "to_entity"),
                        (r"\brelations\[0\]\.relationType\b", "relation_type"),
                        # only as a field (before a colon): "keeps relations acyclic" is about relations
                        (r"\brelations\[0\]", "from_entity, to_entity"), (r"\brelations(?=:)", "from_entity, to_entity")],
    "get_entity": [(r"\bnames\[0\]", "entity_name"), (r"\bnames\b", "entity_name")],
    "delete_relation": [(r"\bfrom\b(?=:)", "from_entity"), (r"\bto\b(?=:)", "to_entity")],
}
GRAPH_WORDS = [(r"\bentityType\b", "entity_type"), (r"\brelationType\b", "relation_type"),
               (r"\bentityName\b", "entity")]


def strict_fields(text: str, tool: str) -> str:
    for pattern, name in FIELD_NAMES.get(tool, []) + GRAPH_WORDS:
        text = re.sub(pattern, name, text)
    return text


class StrictEntity(Args):
    name: str
    entity_type: str = Field(validation_alias=AliasChoices("entity_type", "entityType"))
    observations: list[str] = []


class Out(BaseModel):
    model_config = ConfigDict(extra="allow")


def error_body(exc: MemlociError, tool: str = "") -> dict[str, Any]:
    """That server's form of an error (replies.error_reply shapes the reply): the code as
    `error_type`, the message and hint as `error` in its own field names, the details (say the
    project handshake's `detected_root`) as `data`."""
    message = strict_fields(exc.message, tool) + (f" ({strict_fields(exc.hint, tool)})" if exc.hint else "")
    body: dict[str, Any] = {"success": False, "error": message, "error_type": exc.code}
    if exc.details:
        body["data"] = dict(exc.details)
    return body


def _run(produce: Callable[[], Any]) -> CallToolResult:
    """A success in that server's shape; a MemlociError goes up to the server, which shapes it."""
    return reply({"success": True, "data": produce()})


def register(server: Any, service: MemoryService) -> None:
    def where(library, library_name, project_path, confirm):
        return selected(library, library_name, project_path, confirm)

    def one_entity(name: str, lib: Any) -> dict[str, Any]:
        graph = service.open_nodes([name], library=lib)
        if not graph.entities:
            raise NotFoundError(f"entity_name: '{name}' does not exist", hint="Check the name with search_memory.")
        e = graph.entities[0]
        return {**entity_out(e, dates=True), "relations": [relation_out(r) for r in graph.relations]}

    def get_entity(entity_name: str, library: Library = None, library_name: LibraryName = None,
                   project_path: ProjectPath = None, confirm_new_project_root: ConfirmRoot = None
                   ) -> Annotated[CallToolResult, Out]:
        return _run(lambda: one_entity(entity_name, where(library, library_name, project_path, confirm_new_project_root)))

    def get_graph(library: Library = None, library_name: LibraryName = None, project_path: ProjectPath = None,
                  confirm_new_project_root: ConfirmRoot = None) -> Annotated[CallToolResult, Out]:
        def produce():
            graph = service.export_graph(order="name", library=where(library, library_name, project_path,
                                                                     confirm_new_project_root))
            return {"entities": [entity_out(e) for e in graph.entities], "relations": [relation_out(r) for r in graph.relations]}
        return _run(produce)

    def create_entities(entities: list[StrictEntity], library: Library = None, library_name: LibraryName = None,
                        project_path: ProjectPath = None, confirm_new_project_root: ConfirmRoot = None
                        ) -> Annotated[CallToolResult, Out]:
        def produce():
            done = service.create_entities(
                [EntityInput(e.name, e.entity_type, tuple(e.observations)) for e in entities],
                library=where(library, library_name, project_path, confirm_new_project_root))
            return {"created": [{"name": c.name, "entity_type": c.entity_type, "observations": list(c.observations)}
                                for c in done]}
        return _run(produce)

    def add_observation(entity: str, observation: str, library: Library = None, library_name: LibraryName = None,
                        project_path: ProjectPath = None, confirm_new_project_root: ConfirmRoot = None
                        ) -> Annotated[CallToolResult, Out]:
        def produce():
            done = service.add_observations([ObservationBatch(entity, (observation,))],
                                            library=where(library, library_name, project_path, confirm_new_project_root))
            return {"entity": done[0].entity_name, "observation": observation}
        return _run(produce)

    def create_relation(from_entity: str, to_entity: str, relation_type: str, library: Library = None,
                        library_name: LibraryName = None, project_path: ProjectPath = None,
                        confirm_new_project_root: ConfirmRoot = None) -> Annotated[CallToolResult, Out]:
        def produce():
            created, existing = service.create_relations(
                [RelationInput(from_entity, relation_type, to_entity)],
                library=where(library, library_name, project_path, confirm_new_project_root))
            r = (created or existing)[0]
            return {"from_entity": r.from_entity, "to_entity": r.to_entity, "relation_type": r.relation_type,
                    "created": bool(created)}
        return _run(produce)

    def search_memory(query: str, max_tokens: MaxTokens = None, compact: Compact = False,
                      library: Libraries = None, library_name: LibraryName = None,
                      project_path: ProjectPath = None, confirm_new_project_root: ConfirmRoot = None
                      ) -> Annotated[CallToolResult, Out]:
        names = several(library, service.libraries.names(), library_name, project_path, confirm_new_project_root)
        lib = None if names is not None else where(library, library_name, project_path, confirm_new_project_root)

        def produce():
            recent = bool(RECENCY.search(query))
            words = " ".join(RECENCY.sub(" ", query).split())
            found: list[tuple[str | None, Entity]]
            if names is not None:  # several libraries: one ranking, each result naming its library
                found = [(h.library, h.entity) for h in service.search_nodes_across(words, libraries=names).hits]
            elif words:
                found = [(None, h.entity) for h in service.search_nodes(words, library=lib).hits]
            else:  # "latest": everything, newest first
                found = [(None, e) for e in service.read_graph(limit=100, library=lib).entities]
            if recent:  # "most recent workout": the newest matches first, by their last change
                found.sort(key=lambda f: max([f[1].updated_at, *(o.created_at for o in f[1].observations)]),
                           reverse=True)
            return {"query": query, "recency": recent,
                    "results": [entity_out(e, dates=True) if name is None else {**entity_out(e, dates=True), "library": name}
                                for name, e in found]}

        data = produce()
        if not data["results"]:
            return reply({"success": True, "data": data, "error": f"No results for '{query}'",
                                 "error_type": "NO_RESULTS"})
        results = data["results"]
        if compact:
            results = [compact_entity(e) for e in results]
            data["details"] = "Each entity's first observation's first line; get_entity gives one whole."

        def finish(kept: list[dict[str, Any]], omitted: int) -> dict[str, Any]:
            out: dict[str, Any] = {"success": True, "data": {**data, "results": kept}}
            if omitted:
                out["more"] = (f"{omitted} more {'entity' if omitted == 1 else 'entities'} left out: a narrower "
                               "query, or a larger max_tokens")
            return out

        return reply(fit(results, ENTITIES, max_tokens, finish))

    def delete_entities(names: list[str], library: Library = None, library_name: LibraryName = None,
                        project_path: ProjectPath = None, confirm_new_project_root: ConfirmRoot = None
                        ) -> Annotated[CallToolResult, Out]:
        lib = where(library, library_name, project_path, confirm_new_project_root)

        def produce():
            found = {e.name.casefold() for e in service.open_nodes(names, library=lib).entities}
            missing = [n for n in names if n.strip().casefold() not in found]
            if missing:
                raise NotFoundError(f"names: {', '.join(repr(n) for n in missing)} do not exist (nothing was deleted)")
            return {"deleted": service.delete_entities(names, library=lib)}
        return _run(produce)

    def delete_relation(from_entity: str, to_entity: str, library: Library = None, library_name: LibraryName = None,
                        project_path: ProjectPath = None, confirm_new_project_root: ConfirmRoot = None
                        ) -> Annotated[CallToolResult, Out]:
        lib = where(library, library_name, project_path, confirm_new_project_root)

        def produce():
            found = service.find_relations(from_entity=from_entity, to_entity=to_entity, library=lib)
            if not found:
                raise NotFoundError(f"from_entity, to_entity: no relation from '{from_entity}' to '{to_entity}'")
            service.delete_relations([RelationInput(r.from_entity, r.relation_type, r.to_entity) for r in found],
                                     library=lib)
            return {"deleted": [relation_out(r) for r in found]}
        return _run(produce)

    def flush_memory(library: Library = None, library_name: LibraryName = None, project_path: ProjectPath = None,
                     confirm_new_project_root: ConfirmRoot = None) -> Annotated[CallToolResult, Out]:
        def produce():
            stats = service.flush(library=where(library, library_name, project_path, confirm_new_project_root))
            return {"flushed": True, "entities": stats.entities, "relations": stats.relations}
        return _run(produce)

    ro: dict[str, bool] = {"read_only": True, "idempotent": True}
    write: dict[str, bool] = {}
    for fn, flags, description in [
        (get_entity, ro, 'One entity with its observations and relations.\nExample: {"entity_name": "python-project"}'),
        (get_graph, ro, "The whole graph: entities and relations."),
        (create_entities, write, "Create entities (all or none). Names: lowercase letters, digits, hyphens; types: "
                                 "person, concept, project, document, tool, organization, location, event (strict "
                                 'schema).\nExample: {"entities": [{"name": "user-john", "entity_type": "person", '
                                 '"observations": ["prefers tea"]}]}'),
        (add_observation, write, 'Add one observation to an entity.\nExample: {"entity": "user-john", '
                                 '"observation": "runs on Mondays"}'),
        (create_relation, write, "Relate two existing entities; no self-relations, no cycles (strict schema).\n"
                                 'Example: {"from_entity": "user-john", "to_entity": "python-project", '
                                 '"relation_type": "uses"}'),
        (search_memory, ro, "Search names (1.0), types (0.8) and observations (0.6), typo-tolerant; recency words "
                            "(latest, last, most recent) order the newest first. No match: success with error_type "
                            'NO_RESULTS.\nExample: {"query": "most recent workout"}'),
        (delete_entities, {"destructive": True}, 'Delete entities with their relations (all or none).\n'
                                                 'Example: {"names": ["user-john"]}'),
        (delete_relation, {"destructive": True}, "Delete the relations from one entity to another.\n"
                                                 'Example: {"from_entity": "user-john", "to_entity": "python-project"}'),
        (flush_memory, {"idempotent": True}, "Make sure everything is on disk (every call already is); returns counts."),
    ]:
        title = fn.__name__.replace("_", " ").title()
        server.add_tool(fn, title=title, annotations=tool_annotations(title, **flags), description=description)
