"""History, undo, free memories in exports, backup and restore: the service operations that
keep a library's data recoverable. A part MemoryService holds; writes go through
Stores.writing (the post-write hook).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from memloci.app.projects import ProjectRef
from memloci.core import schema
from memloci.core.errors import ValidationError
from memloci.core.model import Graph, ImportedMemories, JournalEntry, Memory, name_key
from memloci.formats.official import OfficialFile
from memloci.service.backup import PortableStore, backup_library, restore_library
from memloci.service.stores import Stores
from memloci.store.protocols import Portable, Store, Undoable


def _portable(store: Store) -> PortableStore:
    if not isinstance(store, Portable):
        raise ValidationError(f"library '{store.name}': a {store.kind} library cannot export free memories yet")
    return store


class HistoryOperations:
    """Journal reading and undo, export and import of everything, backup and restore."""

    def __init__(self, stores: Stores, import_graph: Callable[..., Any]):
        """`import_graph` is MemoryService.import_graph: the one path a graph is imported by."""
        self.stores = stores
        self.import_graph = import_graph

    def history(self, *, limit: int = 50, internal: bool = False, library: str | ProjectRef | None = None) -> list[JournalEntry]:
        """The newest changes; rescans of the files and vector resets only with `internal`."""
        limit = schema.check_int(limit, "limit", 1, schema.PAGE_MAX)
        return self.stores.store(library).journal(limit=limit, internal=internal)

    def undo(self, change_id: int, *, library: str | ProjectRef | None = None) -> dict[str, Any]:
        """Revert one change of the journal (see store/sqlite_undo.py); the undo is journaled too."""
        change_id = schema.check_int(change_id, "id", 1, 2**62)
        with self.stores.writing(library) as store:  # observations put back wait for their vectors again
            if not isinstance(store, Undoable):
                raise ValidationError(f"library '{store.name}': a {store.kind} library cannot undo changes yet")
            return store.undo_change(change_id, origin="undo")

    # -- export and import of everything -------------------------------------------------

    def export_everything(self, *, library: str | ProjectRef | None = None) -> tuple[Graph, list[Memory]]:
        """The graph (entities in insertion order, relations) and every free memory."""
        store = self.stores.store(library)
        return store.export_graph(order="id"), _portable(store).free_memories()

    def import_everything(self, source: OfficialFile, *, library: str | ProjectRef | None = None,
                          progress: Callable[[int], None] | None = None) -> tuple[Any, int, int]:
        """Load a JSONL file, or what an importer read (importers/): the graph (merged into what is
        there), then the importer's edits of entity documents, then the times the source gives the
        entities and relations it creates, then its free memories with their own times.
        Returns (the graph's ImportReport, memories added, memories already there)."""
        store = self.stores.store(library)
        portable = _portable(store)
        names = [e.name for _, e in source.entities]
        existed = {name_key(e.name) for e in store.open_entities(names).entities} if names else set()
        report = self.import_graph(source.entities, source.relations, library=library, progress=progress,
                                   where=source.where)
        new = {name_key(e.name): e for _, e in source.entities if name_key(e.name) not in existed}
        given = {name_key(e.name): e for _, e in source.entities}
        owned: set[str] = set()  # the source's own entities (not a person's that the import merged into)
        for key, change in source.entity_edits.items():  # one transaction each; an edit that changes nothing writes nothing
            if key in given:
                def text_of(text: str, change=change, key=key) -> str:
                    new_text, own = change(text)
                    (owned.add if own else owned.discard)(key)
                    return new_text

                # dated as the source dates the entity (its `modified`), not as the time of the import
                stamp = source.entity_dates[key][1] if key in source.entity_dates else None
                store.edit_document(given[key].name, text_of, origin="import", detail={"imported": "document"},
                                    stamp=stamp)
            if progress:
                progress(1)
        # The source's dates go to what this run created, and to its own entities still without
        # them: a rerun after a stopped import finishes it (restore_dates is one transaction).
        stored = {name_key(e.name): e.created_at for e in store.open_entities(
            [given[k].name for k in owned if k in source.entity_dates]).entities} if owned else {}
        dates = {k: (c, u, given[k].observations, obs) for k, (c, u, obs) in source.entity_dates.items()
                 if k in new or (k in stored and stored[k] != c)}
        relation_dates = {key: at for key, at in source.relation_dates.items() if key[0] in new and key[2] in new}
        if dates or relation_dates:
            portable.restore_dates(dates, relation_dates, origin="import")
        imported = portable.import_memories([m for _, m in source.memories], origin="import") \
            if source.memories else ImportedMemories(0, 0)
        added, existing = imported.added, imported.existing
        self.stores.written(store)  # the post-write hook: what was written waits for its vectors
        if progress and source.memories:
            progress(len(source.memories))
        return report, added, existing

    # -- backup and restore ----------------------------------------------------------------

    def backup(self, path: str | Path, *, library: str | ProjectRef | None = None) -> dict[str, Any]:
        """A consistent copy of the whole library in the new file `path` (see backup.py)."""
        return backup_library(_portable(self.stores.store(library)), Path(path))

    def restore(self, path: str | Path, *, force: bool = False, library: str | ProjectRef | None = None) -> dict[str, Any]:
        """Put a backup back into the library; one that holds data only with `force` (saved first)."""
        with self.stores.writing(library) as store:  # memories without vectors, if any, get them
            return restore_library(_portable(store), Path(path), force=force)

    def last_backup(self, store: Store) -> str | None:
        """When the library's last successful backup was made (None: never)."""
        if not isinstance(store, Portable):
            return None
        found = store.last_backup()
        return found["at"] if found else None
