"""History, undo, export and import of everything (a graph, a whole source), backup and restore:
the service operations that keep a library's data recoverable. A part MemoryService holds;
writes go through Stores.writing (the post-write hook).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memloci.app.projects import ProjectRef
from memloci.core import schema
from memloci.core.errors import ValidationError
from memloci.core.model import EntityInput, Graph, ImportedMemories, JournalEntry, Memory, RelationInput, name_key
from memloci.formats.official import OfficialFile
from memloci.rules import lifecycle
from memloci.service.backup import PortableStore, backup_library, restore_library
from memloci.service.stores import Stores
from memloci.store.protocols import GraphBatches, Portable, Store, Undoable

IMPORT_CHUNK = 1_000


@dataclass(slots=True)
class ImportReport:
    entities_created: int = 0
    entities_merged: int = 0
    observations_added: int = 0
    relations_created: int = 0
    relations_existing: int = 0
    skipped_relations: list[tuple[int, str]] = field(default_factory=list)  # (line, reason)


def memory_text(entry: JournalEntry, width: int = 60) -> str | None:
    """The text of the memories a journal entry changed, trimmed to `width` characters (None: it
    changed no memory, or it was written before entries held it). An update names the old text
    and the new one; an undo the texts it took away and the ones it put back (rules/undo.py
    `undo_detail`; an older undo, the texts its own undo record kept)."""
    detail = entry.detail or {}
    before: list[str] = []  # the texts as the change found them
    after: list[str] = []  # the texts as it left them
    if entry.action in ("store_memory", "update_memory") and isinstance(detail.get("before"), dict):
        before.append(str(detail["before"].get("content", "")))
    if entry.action in ("store_memory", "update_memory") and isinstance(detail.get("content"), str):
        after.append(detail["content"])
    elif entry.action == "delete_memory":
        before += [str(m.get("content", "")) for m in detail.get("removed", []) if isinstance(m, dict)]
    elif entry.action == "undo" and ("texts_removed" in detail or "texts_restored" in detail):
        before += [str(t) for t in detail.get("texts_removed", [])]
        after += [str(t) for t in detail.get("texts_restored", []) if t not in detail.get("texts_removed", [])]
    elif entry.action in lifecycle.ACTIONS:  # the memories it changed, each with what it did
        before += [f"{i.get('action')}: {i.get('content', '')}" for i in detail.get("items", []) if isinstance(i, dict)][:3]
        after += [str(t) for t in detail.get("texts_added", [])]
    if not before and not after and isinstance(detail.get("undo"), dict) and not entry.entities:
        before += [str(m.get("content", "")) for m in detail["undo"].get("memories", []) if isinstance(m, dict)]
    shown = ["; ".join(t if len(t) <= width else t[: width - 1] + "…" for t in texts)
             for texts in ([" ".join(t.split()) for t in group if t] for group in (before, after)) if texts]
    return " → ".join(shown) or None


def undoable(entry: JournalEntry) -> bool:
    """Whether undo can take the entry back: its record keeps what undo needs (rules/undo.py)."""
    return bool(entry.detail and isinstance(entry.detail.get("undo"), dict))


def names_memory(entry: JournalEntry, content_hash: str) -> bool:
    """Whether the entry changed the memory `content_hash`: it stored, updated or deleted that
    one (its `content_hash`, or a memory its undo record puts back)."""
    detail = entry.detail or {}
    if detail.get("content_hash") == content_hash:
        return True
    kept = detail.get("undo", {}).get("memories", []) if isinstance(detail.get("undo"), dict) else []
    return any(isinstance(m, dict) and m.get("content_hash") == content_hash for m in kept)


def names_observations(entry: JournalEntry, entity: str, texts: Sequence[str], key: str) -> bool:
    """Whether the entry added (`key` "added") or removed ("removed") exactly `texts` as the
    entity's observations, or, for a document edit, changed that entity's `key` text."""
    if entity not in entry.entities:
        return False
    listed = (entry.detail or {}).get(key)
    if isinstance(listed, dict):
        return sorted(map(str, listed.get(entity, []))) == sorted(texts)
    return isinstance(listed, str) and [listed] == list(texts)


def own_changes(entries: Sequence[JournalEntry], since: int, actions: Sequence[str],
                names: Callable[[JournalEntry], bool]) -> list[int]:
    """The ids of the entries after `since` of one of `actions` that `names` (what a call just
    changed), oldest first: the call's own, never another writer's change of the same kind at
    the same moment, which names other things; none found: [] (never a guess)."""
    return sorted(e.id for e in entries if e.id > since and e.action in actions and names(e))


def _portable(store: Store) -> PortableStore:
    if not isinstance(store, Portable):
        raise ValidationError(f"library '{store.name}': a {store.kind} library cannot export free memories yet")
    return store


class HistoryOperations:
    """Journal reading and undo, export and import of everything, backup and restore."""

    def __init__(self, stores: Stores):
        self.stores = stores

    def history(self, *, limit: int = 50, internal: bool = False, library: str | ProjectRef | None = None) -> list[JournalEntry]:
        """The newest changes; rescans of the files and vector resets only with `internal`."""
        limit = schema.check_int(limit, "limit", 1, schema.PAGE_MAX)
        return self.stores.store(library).journal(limit=limit, internal=internal)

    def undo(self, change_id: int, *, library: str | ProjectRef | None = None) -> dict[str, Any]:
        """Revert one change of the journal (see store/sqlite/undo.py); the undo is journaled too."""
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
                                   where=source.where, paths=source.entity_paths)
        new = {name_key(e.name): e for _, e in source.entities if name_key(e.name) not in existed}
        given = {name_key(e.name): e for _, e in source.entities}
        owned: set[str] = set()  # the source's own entities (not a person's that the import merged into)
        links_wait = store.schema.relation_types is None  # a typed schema wants both ends of a relation
        for key, change in source.entity_edits.items():  # one transaction each; an edit that changes nothing writes nothing
            if key in given:
                def text_of(text: str, change=change, key=key) -> str:
                    new_text, own = change(text, links_wait)
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

    def import_graph(self, entities: Sequence[tuple[int, EntityInput]], relations: Sequence[tuple[int, RelationInput]],
                     *, library: str | ProjectRef | None = None, progress: Callable[[int], None] | None = None,
                     where: Callable[[str, int], str] | None = None,
                     paths: Mapping[str, str] | None = None) -> ImportReport:
        """Load a whole graph (e.g. the official server's memory.jsonl).

        Every item is validated first (errors name the source line), so a bad file changes
        nothing. Writes go in chunks of IMPORT_CHUNK, each its own transaction, so other
        writers are never locked out for the whole import. Relations whose endpoints exist
        neither in the file nor in the library are skipped and reported. `paths`: the source's
        file of an entity, by name_key (`people/anna.md`); a Markdown library puts one it creates there.
        """
        clean_entities, writable, skipped = self.plan_graph_import(entities, relations, library=library, where=where)
        with self.stores.writing(library) as store:
            return self._write_graph(store, clean_entities, writable, ImportReport(skipped_relations=skipped), progress,
                                     paths or {})

    def _write_graph(self, store: Store, clean_entities: list[EntityInput], writable: list[RelationInput],
                     report: ImportReport, progress: Callable[[int], None] | None,
                     paths: Mapping[str, str]) -> ImportReport:
        """import_graph's writes, a chunk (one transaction) at a time."""
        if isinstance(store, GraphBatches):
            return self._import_batches(store, clean_entities, writable, report, progress, paths)
        for i in range(0, len(clean_entities), IMPORT_CHUNK):
            chunk = clean_entities[i : i + IMPORT_CHUNK]
            results = store.create_entities(chunk, origin="import")
            report.entities_merged += len(chunk) - len(results)  # same name twice in the file
            for created in results:
                if created.status == "created":
                    report.entities_created += 1
                else:
                    report.entities_merged += 1
                report.observations_added += len(created.observations)
            if progress:
                progress(len(chunk))
        if progress and report.skipped_relations:
            progress(len(report.skipped_relations))
        return _import_relations(store, writable, report, progress)

    @staticmethod
    def _import_batches(store: Store, entities: list[EntityInput], relations: list[RelationInput],
                        report: ImportReport, progress: Callable[[int], None] | None,
                        paths: Mapping[str, str]) -> ImportReport:
        """import_graph for a store that writes entities with their outgoing relations: each
        batch of IMPORT_CHUNK entities goes with the relations going out of them (one file write
        per entity in a Markdown library); relations from entities already in the library, and
        those the store defers, follow once every entity exists."""
        assert isinstance(store, GraphBatches)  # import_graph sends only such stores here
        outgoing: dict[str, list[RelationInput]] = {}
        for r in relations:
            outgoing.setdefault(name_key(r.from_entity), []).append(r)
        imported = {name_key(e.name) for e in entities}
        later = [r for r in relations if name_key(r.from_entity) not in imported]
        for i in range(0, len(entities), IMPORT_CHUNK):
            chunk = entities[i : i + IMPORT_CHUNK]
            going = [r for e in chunk for r in outgoing.pop(name_key(e.name), [])]
            batch = store.create_graph(chunk, going, origin="import",
                                       paths={k: paths[k] for e in chunk if (k := name_key(e.name)) in paths})
            report.entities_merged += len(chunk) - len(batch.entities)  # same name twice in the file
            for entity in batch.entities:
                if entity.status == "created":
                    report.entities_created += 1
                else:
                    report.entities_merged += 1
                report.observations_added += len(entity.observations)
            report.relations_created += len(batch.created)
            report.relations_existing += len(batch.existing)
            later += batch.deferred
            if progress:
                progress(len(chunk) + len(going) - len(batch.deferred))
        if progress and report.skipped_relations:
            progress(len(report.skipped_relations))
        return _import_relations(store, later, report, progress)

    def plan_graph_import(self, entities: Sequence[tuple[int, EntityInput]],
                          relations: Sequence[tuple[int, RelationInput]], *, library: str | ProjectRef | None = None,
                          where: Callable[[str, int], str] | None = None
                          ) -> tuple[list[EntityInput], list[RelationInput], list[tuple[int, str]]]:
        """The checks of import_graph, writing nothing, so `--dry-run` and the import itself
        agree: (the entities, the relations it would write, the relations it would skip as
        (line, reason)). A relation is skipped when an endpoint is neither in the source nor in
        the library; an entity or relation breaking a rule refuses the whole import. `where(kind,
        number)` names an item in messages (OfficialFile.where); by default `line N`."""
        where = where or (lambda kind, number: f"line {number}")
        clean_entities = [schema.validate_entity(e, where("entity", line)) for line, e in entities]
        clean_relations = [(line, schema.validate_relation(r, where("relation", line))) for line, r in relations]
        store = self.stores.store(library)
        for (line, _), e in zip(entities, clean_entities):
            store.schema.check_entity(e, where("entity", line))
        for line, r in clean_relations:
            store.schema.check_relation(r, where("relation", line))
        known = {name_key(e.name) for e in clean_entities}
        dangling = [(line, r) for line, r in clean_relations
                    if name_key(r.from_entity) not in known or name_key(r.to_entity) not in known]
        if dangling:
            present = {name_key(e.name) for e in store.open_entities(
                list({n for _, r in dangling for n in (r.from_entity, r.to_entity)})).entities}
            known |= present
        writable, skipped = [], []
        for line, r in clean_relations:
            missing = [n for n in (r.from_entity, r.to_entity) if name_key(n) not in known]
            if missing:
                skipped.append((line, f"endpoint does not exist: {', '.join(missing)}"))
            else:
                writable.append(r)
        return clean_entities, writable, skipped

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


def _import_relations(store: Store, relations: list[RelationInput], report: ImportReport,
                      progress: Callable[[int], None] | None) -> ImportReport:
    """Create `relations` a chunk (one transaction) at a time, counting them in `report`."""
    for i in range(0, len(relations), IMPORT_CHUNK):
        chunk = relations[i : i + IMPORT_CHUNK]
        created, existing = store.create_relations(chunk, origin="import")
        report.relations_created += len(created)
        report.relations_existing += len(existing)
        if progress:
            progress(len(chunk))
    return report
