"""What every tool group's tools share: the library selectors they take, the library or project a
call names, and the MCP annotations each tool is registered with."""

from __future__ import annotations

from typing import Annotated

from mcp_types import ToolAnnotations
from pydantic import Field

from memloci.app.projects import ProjectRef
from memloci.core.errors import ValidationError
from memloci.service.across import EVERY_LIBRARY, selection

# The selectors carry no description: they repeat on every tool, and the server's instructions
# explain them once (and the AWAITING_CONFIRMATION error explains confirm_new_project_root).
Library = Annotated[str | None, Field()]
LibraryName = Annotated[str | None, Field()]  # accepted as `library`, never advertised
ProjectPath = Annotated[str | None, Field()]
ConfirmRoot = Annotated[str | None, Field()]
# The searches also take several libraries ("*" or a list); the instructions say so with several
# mounted (LIBRARY_INSTRUCTION), the only time `library` is advertised.
Libraries = Annotated[str | list[str] | None, Field()]
# The tools that search several libraries at once (`library: "*"` or a list; access.py checks
# each library named, and narrows "*" to the caller's own). A project library (project_path) is
# not among "*": it is a folder on the server's disk, not a mounted library.
SEARCHES_SEVERAL = frozenset({"search_nodes", "retrieve_memory", "search_memory"})


def selected(library: str | None, library_name: str | None, project_path: str | None = None,
                     confirm_new_project_root: str | None = None) -> str | ProjectRef | None:
    """The library (or project) a call's selectors name; None: the only one mounted."""
    if EVERY_LIBRARY in (library, library_name):
        raise ValidationError(f"library: '{EVERY_LIBRARY}' (every library) is taken by the searches only "
                              f"({', '.join(sorted(SEARCHES_SEVERAL))})",
                              hint="Name one library here; list_libraries lists them.")
    if library and library_name and library != library_name:
        raise ValidationError(f"library: got library='{library}' and library_name='{library_name}'; give one")
    if project_path is not None:
        if library or library_name:
            raise ValidationError("project_path: give a library or a project_path, not both")
        return ProjectRef(project_path, confirm_new_project_root)
    if confirm_new_project_root:
        raise ValidationError("confirm_new_project_root: only with project_path")
    return library or library_name


def several(library: str | list[str] | None, mounted: list[str], library_name: str | None = None,
            project_path: str | None = None, confirm_new_project_root: str | None = None) -> list[str] | None:
    """The libraries a search names when it names several (service/across.py `selection`: `"*"`
    is every mounted one, `mounted`; a list, those it names, each once, spelled as mounted), or
    None when it names one library or a project (then `selected` says which)."""
    if library != EVERY_LIBRARY and not isinstance(library, list):
        return None
    if library_name or project_path is not None or confirm_new_project_root:
        given = "library_name" if library_name else "project_path" if project_path is not None \
            else "confirm_new_project_root"
        raise ValidationError(f"{given}: not with library {library!r}; a search of several libraries names them "
                              "in `library` alone")
    return selection(library, mounted)


def tool_annotations(title: str, *, read_only: bool = False, destructive: bool = False,
                     idempotent: bool = False) -> ToolAnnotations:
    return ToolAnnotations(title=title, readOnlyHint=read_only, destructiveHint=destructive,
                           idempotentHint=idempotent, openWorldHint=False)


# The read tools' reply size and shape (mcp/budget.py; the server's instructions explain them once).
MaxTokens = Annotated[int | None, Field(ge=100)]
Compact = Annotated[bool, Field()]
