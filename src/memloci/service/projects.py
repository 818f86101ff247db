"""Project operations of the service: the hot context, the graph summary, the Markdown export
into a project, and carrying over n2n-memory's `.mcp/memory.json` and `context.json`.
A part MemoryService holds; writes go through Stores.writing (the post-write hook)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memloci.app.projects import ProjectRef, project_label
from memloci.core import confine, schema
from memloci.core.errors import AlreadyExistsError, PermissionDeniedError, ValidationError
from memloci.core.model import ObservationBatch, name_key, now_iso
from memloci.formats.n2n import read_n2n_context, read_n2n_graph
from memloci.markdown.export import render_export
from memloci.service.stores import Stores
from memloci.store.protocols import FolderLibrary, Portable, Store

log = logging.getLogger(__name__)

STATUSES = ("IN_PROGRESS", "COMPLETED", "BLOCKED", "PLANNING")
TEXT_MAX = 4000
STEPS_MAX = 100
EXPORT_TITLE = "# Knowledge graph"  # an existing file is only ever replaced if it starts so
CONTEXT_HINT = "Project memory changed: call update_context (task, status, next steps) before you git commit."


def _folder(store: Store) -> Path:
    """The folder of a project's library: a project library is a folder library (markdown)."""
    if not isinstance(store, FolderLibrary):
        raise ValidationError(f"library '{store.name}' is a {store.kind} library, not a project's folder")
    return Path(store.root)


class ProjectOperations:
    """A project's hot context, its graph summary and Markdown export, and n2n-memory's files."""

    def __init__(self, stores: Stores, *, read_graph: Callable[..., Any], add_observations: Callable[..., Any],
                 import_everything: Callable[..., Any]):
        """The three callables are MemoryService's own operations (each the one path of its kind):
        a page of the graph, adding observations, importing everything a source holds."""
        self.stores = stores
        self.read_graph = read_graph
        self.add_observations = add_observations
        self.import_everything = import_everything

    # -- which project ------------------------------------------------------------------

    def project_info(self, library: str | ProjectRef | None) -> dict[str, str] | None:
        """`{id, root}` of a project library (the id from its git remote, see projects.project_id;
        every clone of one repository has the same), None for a mounted library."""
        if not isinstance(library, ProjectRef):
            return None
        store = self.stores.store(library)
        return {"id": store.name, "root": str(_folder(store).parent)}

    # -- the hot context ---------------------------------------------------------------

    def read_context(self, *, library: str | ProjectRef | None = None) -> dict[str, Any]:
        return self.stores.store(library).read_context()

    def update_context(self, *, active_task: str | None = None, status: str | None = None, reason: str | None = None,
                       next_steps: list[str] | None = None, last_commit: str | None = None,
                       library: str | ProjectRef | None = None) -> dict[str, Any]:
        given: dict[str, Any] = {}
        for field, value in (("active_task", active_task), ("reason", reason), ("last_commit", last_commit)):
            if value is not None:
                if not isinstance(value, str) or len(value) > TEXT_MAX:
                    raise ValidationError(f"{field}: a text of at most {TEXT_MAX} characters")
                given[field] = value.strip()
        if status is not None:
            if status.strip().upper() not in STATUSES:
                raise ValidationError(f"status: '{status}' is not one of {', '.join(STATUSES)}")
            given["status"] = status.strip().upper()
        if next_steps is not None:
            if len(next_steps) > STEPS_MAX or any(not isinstance(s, str) or len(s) > TEXT_MAX for s in next_steps):
                raise ValidationError(f"next_steps: at most {STEPS_MAX} texts of at most {TEXT_MAX} characters")
            given["next_steps"] = [s.strip() for s in next_steps if s.strip()]
        if not given:
            raise ValidationError("update_context: give at least one of active_task, status, reason, next_steps, "
                                  "last_commit")
        with self.stores.writing(library, new_text=False) as store:
            return store.update_context(lambda before: {**before, **given, "updated_at": now_iso()},
                                        origin="update_context")

    # -- summaries and export ----------------------------------------------------------

    def graph_summary(self, *, limit: int | None = None, offset: int = 0,
                      library: str | ProjectRef | None = None) -> dict[str, Any]:
        page = self.read_graph(limit=limit, offset=offset, summary=True, library=library)
        return {"entities": [{"name": e.name, "type": e.entity_type} for e in page.entities],
                "relation_count": self.stores.store(library).stats().relations,
                "total_entity_count": page.total_entity_count, "is_truncated": page.is_truncated}

    def export_markdown(self, output_path: str = "KNOWLEDGE_GRAPH.md", *,
                        library: str | ProjectRef | None = None) -> dict[str, Any]:
        """Write the graph and context as one Markdown file inside the project root."""
        if not isinstance(library, ProjectRef):
            raise ValidationError("project_path: export_markdown writes into a project; give its project_path",
                                  hint="For a mounted library, use `memloci export markdown PATH` on the command line.")
        if not output_path or "\x00" in output_path:
            raise ValidationError("output_path: must be a file name inside the project, e.g. KNOWLEDGE_GRAPH.md")
        relative = Path(output_path)
        if relative.is_absolute():
            raise ValidationError(f"output_path: '{output_path}' is absolute; give a path relative to the project root")
        if ".." in relative.parts:
            raise ValidationError(f"output_path: '{output_path}' leads outside the project root")
        if relative.suffix.lower() not in (".md", ".markdown") or any(p.startswith(".") for p in relative.parts):
            raise ValidationError(f"output_path: '{output_path}' must be a .md file outside hidden folders "
                                  "(.mcp, .git, ...)", hint="For example KNOWLEDGE_GRAPH.md or docs/graph.md.")
        root = _folder(self.stores.store(library)).parent
        # No link anywhere on the way (core/confine.py): a `docs -> /elsewhere` in a clone is refused.
        try:
            current = confine.read_bytes(root, relative)
        except FileNotFoundError:
            current = None
            if relative.parent.parts and not confine.exists(root, relative.parent):
                raise ValidationError(f"output_path: the folder {relative.parent} does not exist in the project") from None
        except NotADirectoryError:
            raise ValidationError(f"output_path: the folder {relative.parent} does not exist in the project") from None
        except IsADirectoryError:
            raise ValidationError(f"output_path: '{output_path}' is not a regular file") from None
        except confine.LinkRefusedError as exc:
            raise ValidationError(f"output_path: '{output_path}' passes through a symbolic link; memloci does not "
                                  "follow links inside a project", hint="Pick a path without links.") from exc
        except PermissionDeniedError as exc:
            raise ValidationError(f"output_path: '{output_path}' is not a regular file") from exc
        if current is not None and not current.decode("utf-8", errors="replace").startswith(EXPORT_TITLE):
            raise AlreadyExistsError(f"output_path: '{output_path}' exists and is not an export of this graph; "
                                     "it is left as it is", hint="Pick another file name.")
        text, counts = self.markdown_export(title=f"{EXPORT_TITLE[2:]} of {root.name}", library=library)
        confine.write_atomic(root, relative, text.encode("utf-8"))
        return {"path": str(relative), **counts}

    def markdown_export(self, *, title: str = EXPORT_TITLE[2:], library: str | ProjectRef | None = None
                        ) -> tuple[str, dict[str, int]]:
        """The library as one Markdown text (markdown/export.py): the graph in name order, its free
        memories oldest first, its context; with how many entities, relations and memories it holds."""
        store = self.stores.store(library)
        graph = store.export_graph(order="name")
        memories = sorted(store.free_memories(), key=lambda m: (m.created_at, m.id)) \
            if isinstance(store, Portable) else []
        text = render_export(graph.entities, graph.relations, memories, store.read_context(), title=title)
        return text, {"entities": len(graph.entities), "relations": len(graph.relations), "memories": len(memories)}

    # -- n2n-memory ----------------------------------------------------------------------

    def add_observations_to_existing(self, batches: list[ObservationBatch], *, library: str | ProjectRef | None = None,
                                     origin: str = "add_observations") -> tuple[list[Any], list[str]]:
        """n2n-memory's add_observations: batches for entities that do not exist are skipped and
        named, not an error; the rest is one add_observations (all or nothing). Returns (what
        add_observations returned, the names skipped)."""
        clean = schema.validate_observation_batches(batches, "observations", "contents")
        if not clean:
            self.stores.store(library)  # a project is still checked (and its handshake asked) for an empty batch
            return [], []
        found = {name_key(e.name) for e in self.stores.store(library).open_entities([b.entity_name for b in clean]).entities}
        kept = [b for b in clean if name_key(b.entity_name) in found]
        skipped = list(dict.fromkeys(b.entity_name for b in clean if name_key(b.entity_name) not in found))
        return (self.add_observations(kept, library=library, origin=origin) if kept else []), skipped

    def carry_over_n2n(self, store: Store, folder: Path, project: ProjectRef) -> None:
        """Read n2n-memory's files in a project's `.mcp/` into its new library, through the import
        every importer takes (importers/n2n.py); the files stay as they were."""
        source = read_n2n_graph(folder)
        context = read_n2n_context(folder)  # both read before anything is written
        if source is not None:
            report, _, _ = self.import_everything(source.data, library=project)
            if report.skipped_relations:
                log.warning("project %s: .mcp/memory.json: %d relation(s) to missing entities skipped",
                            project_label(folder.parent), len(report.skipped_relations))
            log.info("project %s: carried over %d entities and %d relations from .mcp/memory.json",
                     project_label(folder.parent), len(source.data.entities),
                     report.relations_created + report.relations_existing)
        if context:
            store.update_context(lambda before: {**before, **context}, origin="import")
            self.stores.written(store)
