"""Entity documents: read by table of contents and section, edit by exact context, rename and
merge with every link repaired, the library manual; and `list_libraries`. Works on every
library kind (a SQLite library keeps the body in the database)."""

from __future__ import annotations

from typing import Annotated, Any

from mcp_types import CallToolResult
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, model_validator

from memloci.core.errors import NotFoundError
from memloci.mcp.arguments import ConfirmRoot, Library, LibraryName, ProjectPath, selected, tool_annotations
from memloci.mcp.replies import reply
from memloci.mcp.surface import Args, hide
from memloci.service.documents import NewEntityDocument
from memloci.service.facade import MemoryService

Names = list[str]


TOOLS = ("list_libraries", "list_entities", "read_entities", "get_entities_toc", "read_entities_sections",
         "add_entities", "add_entity_content", "delete_entity_content", "replace_entity_content",
         "replace_entity_section", "rename_entity", "merge_entities", "find_relations", "read_manual",
         "update_manual_section", "add_manual_section", "delete_manual_section")


class RelationIn(Args):
    # The Markdown-library shape `{type, to}`; `relation_type`/`relationType` accepted, not advertised.

    model_config = ConfigDict(json_schema_extra=lambda s: hide(s, "relation_type", "relationType", require="type"))

    type: str | None = Field(None, description="e.g. uses, depends_on")
    relation_type: str | None = Field(None, validation_alias=AliasChoices("relation_type", "relationType"),
                                      description="Same as type")
    to: str = Field(description="Target entity name")

    @model_validator(mode="after")
    def _one_type(self) -> RelationIn:
        if (self.type is None) == (self.relation_type is None):
            raise ValueError("give exactly one of type and relation_type" if self.type else "type: Field required")
        return self

    @property
    def kind(self) -> str:
        return self.type if self.type is not None else self.relation_type  # type: ignore[return-value]


class NewEntity(Args):
    name: str
    entity_type: str | None = Field(None, validation_alias=AliasChoices("entity_type", "entityType"),
                                    description="Default: the content's front matter type, else note")
    aliases: list[str] = []
    relations: list[RelationIn] = []
    content: str = Field("", description="Markdown body: sections, [[wikilinks]], '## Observations' list")


class Out(BaseModel):
    model_config = ConfigDict(extra="allow")


def _relation(r: Any) -> dict[str, str]:
    return {"from": r.from_entity, "relationType": r.relation_type, "to": r.to_entity}


def register(server: Any, service: MemoryService) -> None:
    # `name`, not `library`: list_libraries works on no one library (access.py filters its rows).
    def list_libraries(name: Annotated[str | None, Field(description="Only the library of this name")] = None,
                       ) -> Annotated[CallToolResult, Out]:
        found = service.list_libraries()
        if name is not None:
            found = [lib for lib in found if lib.get("name") == name]
            if not found:
                raise NotFoundError(f"name: no library named '{name}' is mounted",
                                    hint="Call list_libraries without a name to see them all.")
        return reply({"libraries": found})

    def list_entities(
        entity_glob: Annotated[str, Field(description="Glob over names, case-insensitive: 'project-*', '*auth*'; in a Markdown "
                                                     "library also over file paths: 'Daily/*', 'Daily/**', '*.md'")] = "*",
        library: Library = None, library_name: LibraryName = None,
        project_path: ProjectPath = None, confirm_new_project_root: ConfirmRoot = None,
    ) -> Annotated[CallToolResult, Out]:
        found = service.list_entities(entity_glob, library=selected(library, library_name, project_path, confirm_new_project_root))
        return reply({"entities": found, "total": len(found)})

    def read_entities(entity_names: Names, library: Library = None,
                      library_name: LibraryName = None, project_path: ProjectPath = None,
                      confirm_new_project_root: ConfirmRoot = None) -> Annotated[CallToolResult, Out]:
        return reply(service.read_entities(entity_names, library=selected(library, library_name, project_path, confirm_new_project_root)))

    def get_entities_toc(entity_names: Names, library: Library = None,
                         library_name: LibraryName = None, project_path: ProjectPath = None,
                      confirm_new_project_root: ConfirmRoot = None) -> Annotated[CallToolResult, Out]:
        return reply(service.get_entities_toc(entity_names, library=selected(library, library_name, project_path, confirm_new_project_root)))

    def read_entities_sections(
        entity_names: Names,
        section_globs: Annotated[list[str], Field(description="'frontmatter' or headings/globs: ['Architecture', 'api*']")],
        library: Library = None, library_name: LibraryName = None,
        project_path: ProjectPath = None, confirm_new_project_root: ConfirmRoot = None,
    ) -> Annotated[CallToolResult, Out]:
        return reply(service.read_entities_sections(entity_names, section_globs, library=selected(library, library_name, project_path, confirm_new_project_root)))

    def add_entities(entities: list[NewEntity], library: Library = None,
                     library_name: LibraryName = None, project_path: ProjectPath = None,
                      confirm_new_project_root: ConfirmRoot = None) -> Annotated[CallToolResult, Out]:
        names = service.add_entities(
            [NewEntityDocument(e.name, e.entity_type, tuple(e.aliases),
                               tuple((r.kind, r.to) for r in e.relations), e.content) for e in entities],
            library=selected(library, library_name, project_path, confirm_new_project_root))
        return reply({"created": names})

    def add_entity_content(
        entity_name: str,
        in_section: Annotated[str, Field(description="Heading to append under")],
        new_content: str, library: Library = None, library_name: LibraryName = None,
        project_path: ProjectPath = None, confirm_new_project_root: ConfirmRoot = None,
    ) -> Annotated[CallToolResult, Out]:
        return reply(service.add_entity_content(entity_name, in_section, new_content,
                                                library=selected(library, library_name, project_path, confirm_new_project_root)))

    def delete_entity_content(
        entity_name: str,
        content_to_delete: str,
        library: Library = None, library_name: LibraryName = None,
        project_path: ProjectPath = None, confirm_new_project_root: ConfirmRoot = None,
    ) -> Annotated[CallToolResult, Out]:
        return reply(service.delete_entity_content(entity_name, content_to_delete,
                                                   library=selected(library, library_name, project_path, confirm_new_project_root)))

    def replace_entity_content(
        entity_name: str,
        old_content: str,
        new_content: str, library: Library = None, library_name: LibraryName = None,
        project_path: ProjectPath = None, confirm_new_project_root: ConfirmRoot = None,
    ) -> Annotated[CallToolResult, Out]:
        return reply(service.replace_entity_content(entity_name, old_content, new_content,
                                                    library=selected(library, library_name, project_path, confirm_new_project_root)))

    def replace_entity_section(
        entity_name: str, old_heading: str, new_heading: str, new_body_content: str,
        library: Library = None, library_name: LibraryName = None,
        project_path: ProjectPath = None, confirm_new_project_root: ConfirmRoot = None,
    ) -> Annotated[CallToolResult, Out]:
        return reply(service.replace_entity_section(entity_name, old_heading, new_heading, new_body_content,
                                                    library=selected(library, library_name, project_path, confirm_new_project_root)))

    def rename_entity(old_name: str, new_name: str, library: Library = None,
                      library_name: LibraryName = None, project_path: ProjectPath = None,
                      confirm_new_project_root: ConfirmRoot = None) -> Annotated[CallToolResult, Out]:
        return reply(service.rename_entity(old_name, new_name, library=selected(library, library_name, project_path, confirm_new_project_root)))

    def merge_entities(source_names: Names, target_name: str, library: Library = None,
                       library_name: LibraryName = None, project_path: ProjectPath = None,
                      confirm_new_project_root: ConfirmRoot = None) -> Annotated[CallToolResult, Out]:
        return reply(service.merge_entities(source_names, target_name, library=selected(library, library_name, project_path, confirm_new_project_root)))

    def find_relations(
        to_entity: str | None = None, relation_type: str | None = None, from_entity: str | None = None,
        library: Library = None, library_name: LibraryName = None,
        project_path: ProjectPath = None, confirm_new_project_root: ConfirmRoot = None,
    ) -> Annotated[CallToolResult, Out]:
        found = service.find_relations(to_entity=to_entity, relation_type=relation_type, from_entity=from_entity,
                                       library=selected(library, library_name, project_path, confirm_new_project_root))
        return reply({"relations": [_relation(r) for r in found], "total": len(found)})

    def read_manual(library: Library = None, library_name: LibraryName = None,
        project_path: ProjectPath = None, confirm_new_project_root: ConfirmRoot = None) -> Annotated[CallToolResult, Out]:
        return reply(service.read_manual(library=selected(library, library_name, project_path, confirm_new_project_root)))

    def update_manual_section(toc: Annotated[str, Field(description="The section's heading")], old_content: str,
                              new_content: str, library: Library = None,
                              library_name: LibraryName = None, project_path: ProjectPath = None,
                      confirm_new_project_root: ConfirmRoot = None) -> Annotated[CallToolResult, Out]:
        return reply(service.update_manual_section(toc, old_content, new_content, library=selected(library, library_name, project_path, confirm_new_project_root)))

    def add_manual_section(toc: Annotated[str, Field(description="The section's heading")],
                           new_content: str, library: Library = None,
                           library_name: LibraryName = None, project_path: ProjectPath = None,
                      confirm_new_project_root: ConfirmRoot = None) -> Annotated[CallToolResult, Out]:
        return reply(service.add_manual_section(toc, new_content, library=selected(library, library_name, project_path, confirm_new_project_root)))

    def delete_manual_section(toc: str, deleting_content: str, library: Library = None,
                              library_name: LibraryName = None, project_path: ProjectPath = None,
                      confirm_new_project_root: ConfirmRoot = None) -> Annotated[CallToolResult, Out]:
        return reply(service.delete_manual_section(toc, deleting_content, library=selected(library, library_name, project_path, confirm_new_project_root)))

    ro = {"read_only": True, "idempotent": True}
    tools = [
        (list_libraries, ro, "The mounted libraries: name, kind (sqlite, markdown), path, counts, files that "
                             "could not be parsed. Pass a name as `library` to other tools."),
        (list_entities, ro, "Entity names matching a glob (also the way to check that a name exists). In a "
                            "Markdown library the glob also matches file paths: 'Daily/*' lists the notes in the "
                            "folder Daily, 'Daily/**' those below it too.\n"
                            'Example: {"entity_glob": "project-*"}'),
        (read_entities, ro, "Whole entity documents (front matter + Markdown body). Prefer get_entities_toc and "
                            "read_entities_sections for long ones.\nExample: {\"entity_names\": [\"python-project\"]}"),
        (get_entities_toc, ro, "Table of contents: 'frontmatter', then every heading with its level.\n"
                               'Example: {"entity_names": ["python-project"]}'),
        (read_entities_sections, ro, "Sections by heading or glob: a heading's text down to the next heading of the "
                                     "same or higher level; 'frontmatter' for the front matter.\n"
                                     'Example: {"entity_names": ["python-project"], "section_globs": ["arch*"]}'),
        (add_entities, {"idempotent": False}, "Create entities as documents; refuses names that exist.\n"
                        'Example: {"entities": [{"name": "python-project", "entity_type": "project", "aliases": '
                        '["pyproj"], "relations": [{"type": "uses", "to": "fastapi"}], "content": '
                        '"## Notes\\nSee [[deploy-guide]]."}]}'),
        (add_entity_content, {}, "Append text at the end of a section (created if missing). Headings match "
                                 "normalized: '## Notes', 'notes', 'NOTES'.\n"
                                 'Example: {"entity_name": "python-project", "in_section": "Notes", "new_content": "- uses uv"}'),
        (delete_entity_content, {"destructive": True}, "Delete text that occurs exactly once in the document; zero or "
                                 "several matches is an error listing the candidates (nothing changes).\n"
                                 'Example: {"entity_name": "python-project", "content_to_delete": "- uses pip\\n"}'),
        (replace_entity_content, {"destructive": True}, "Replace text that occurs exactly once in the document "
                                  "(zero or several matches: an error with the candidates, nothing changes).\n"
                                  'Example: {"entity_name": "python-project", "old_content": "pip", "new_content": "uv"}'),
        (replace_entity_section, {"destructive": True}, "Replace a section's heading and body.\n"
                                  'Example: {"entity_name": "python-project", "old_heading": "Notes", '
                                  '"new_heading": "Notes", "new_body_content": "Rewritten."}'),
        (rename_entity, {"destructive": True}, "Rename an entity; refuses a taken name; moves its file and rewrites "
                         "every relation and [[wikilink]] pointing to it.\n"
                         'Example: {"old_name": "pyproj", "new_name": "python-project"}'),
        (merge_entities, {"destructive": True}, "Merge sources into the target: aliases, tags, observations and "
                          "relations merged without duplicates, bodies appended under a separator naming each "
                          "source, links redirected, sources deleted (the journal keeps them).\n"
                          'Example: {"source_names": ["py-proj", "pyproject"], "target_name": "python-project"}'),
        (find_relations, ro, "Relations filtered by target, type and/or source (all optional).\n"
                             'Example: {"to_entity": "fastapi", "relation_type": "uses"}'),
        (read_manual, ro, "The library manual (meta.md): what this library holds and its conventions."),
        (update_manual_section, {"destructive": True}, "Replace text (exactly once) within one manual section.\n"
                                 'Example: {"toc": "Conventions", "old_content": "kebab", "new_content": "snake"}'),
        (add_manual_section, {}, "Append to a manual section (created if missing).\n"
                                 'Example: {"toc": "Conventions", "new_content": "- names are kebab-case"}'),
        (delete_manual_section, {"destructive": True}, "Delete text (exactly once) from a manual section; a section "
                                 "left empty loses its heading.\n"
                                 'Example: {"toc": "Conventions", "deleting_content": "- names are kebab-case"}'),
    ]
    for fn, flags, description in tools:
        title = fn.__name__.replace("_", " ").title()
        server.add_tool(fn, title=title, annotations=tool_annotations(title, **flags), description=description)
