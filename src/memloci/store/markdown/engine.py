"""A library kept as a folder of Markdown files: the files are the truth (DESIGN.md §3).

One entity per `.md` file (subfolders allowed) in the entity-document format; the library
manual in `meta.md` and the hot context in `context.md`, when a call writes them. Everything
else of memloci's own is in the hidden folder `.memloci/`, never beside the notes: free memories
in day files under `.memloci/memories/`, the journal in `.memloci/journal.md`, and the index, a
SQLite store in `.memloci/index.db` (rebuildable, kept out of git) with the same tables as a
SQLite library, so search, memories and the graph tools work unchanged. layout.py moves the
`journal.md` and `memories/` of libraries written before into `.memloci/` on open.

`MarkdownStore` is the facade of the Store protocols; it HAS its index (`self.index`, a
SQLiteStore built with this library's FileSide) and delegates to it, after opening the folder.
Its parts: writeback.py writes the files back at the edges of each index transaction (the
FileSide: staged, put in place just before the commit, all or nothing through intent.py);
scan.py reads the folder into the index; undo.py puts files back; importing.py imports a
graph with each file written once; migratable.py sets what `memloci migrate` copies. SQLite's
write lock is the library's lock: tool writes, the watcher, reindex and import never write
the folder at once, in one process or several.

Reads of outside edits: `sync()` compares every file's mtime and size with the index and
parses what changed (on open, then every second on a watcher thread). A file that cannot be
parsed is reported (`problems()`, the log) and left untouched; its entity keeps its last
indexed state.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memloci.core import confine
from memloci.core.errors import LibraryMissingError, LibraryUnreadableError, MemlociError, storage_error
from memloci.core.lazy import on_first_use
from memloci.core.model import (
    AddedObservations,
    ChangedMemories,
    CreatedEntity,
    DocumentEdit,
    EntityInput,
    Graph,
    GraphBatch,
    GraphPage,
    ImportedMemories,
    JournalEntry,
    LibraryStats,
    ListedEntity,
    Memory,
    MemoryEdit,
    MemoryFilter,
    MemoryInput,
    MemoryPage,
    MemoryVectors,
    NameChanges,
    NewMemory,
    ObservationBatch,
    PassageVectors,
    PendingMemory,
    PendingPassage,
    Relation,
    RelationInput,
    RemovedObservations,
    SavedVectors,
    SearchResult,
    StoredMemory,
    name_key,
)
from memloci.core.schema import LibrarySchema
from memloci.markdown.context import parse_context, render_context
from memloci.markdown.document import EntityDocument
from memloci.rules.graph import RelationsCreated
from memloci.store.markdown import importing
from memloci.store.markdown.files import CONTEXT, INDEX_DIR, MANUAL, OLD_JOURNAL, OLD_MEMORIES, WATCH_INTERVAL_S, SyncReport
from memloci.store.markdown.intent import INTENTS_TABLE, recover
from memloci.store.markdown.layout import GITIGNORE, OLD_GITIGNORES, drop_old_folder, move_to_hidden, to_move
from memloci.store.markdown.migratable import MarkdownMigration
from memloci.store.markdown.scan import Scanner
from memloci.store.markdown.undo import MarkdownUndo
from memloci.store.markdown.writeback import MarkdownFiles
from memloci.store.protocols import EditedDocuments, NameVocabulary
from memloci.store.sqlite.engine import SQLiteStore
from memloci.store.sqlite.rows import journal
from memloci.store.sqlite.schema import SCHEMA_VERSION
from memloci.store.sqlite.sql import split_sql

if TYPE_CHECKING:
    import numpy as np
else:  # imported on first use: the server's start does not need it (core/lazy.py)
    np = on_first_use("numpy", globals(), "np")

log = logging.getLogger(__name__)

__all__ = ["INDEX_DIR", "MarkdownStore"]  # INDEX_DIR: where the index lives, for the registry

# Installed in the index of a Markdown library only (on open): every change marks what to write
# back (writeback.py). The md_* tables they fill are the index schema's (sqlite/schema.py).
MARKDOWN_TRIGGERS = """
CREATE TRIGGER IF NOT EXISTS md_entity_insert AFTER INSERT ON entities BEGIN
    INSERT OR IGNORE INTO md_dirty VALUES (new.id);
END;
CREATE TRIGGER IF NOT EXISTS md_entity_update AFTER UPDATE ON entities BEGIN
    INSERT OR IGNORE INTO md_dirty VALUES (new.id);
END;
CREATE TRIGGER IF NOT EXISTS md_entity_rename AFTER UPDATE OF name ON entities BEGIN
    INSERT OR IGNORE INTO md_dirty SELECT from_id FROM relations WHERE to_id = new.id;
END;
CREATE TRIGGER IF NOT EXISTS md_entity_delete AFTER DELETE ON entities BEGIN
    INSERT OR IGNORE INTO md_dirty VALUES (old.id);
END;
CREATE TRIGGER IF NOT EXISTS md_memory_insert AFTER INSERT ON memories BEGIN
    INSERT OR IGNORE INTO md_dirty SELECT new.entity_id WHERE new.entity_id IS NOT NULL;
    INSERT OR IGNORE INTO md_new_memories SELECT new.id WHERE new.entity_id IS NULL;
END;
CREATE TRIGGER IF NOT EXISTS md_memory_delete AFTER DELETE ON memories BEGIN
    INSERT OR IGNORE INTO md_dirty SELECT old.entity_id WHERE old.entity_id IS NOT NULL;
    INSERT OR IGNORE INTO md_dirty_days SELECT substr(old.created_at, 1, 10) WHERE old.entity_id IS NULL;
END;
CREATE TRIGGER IF NOT EXISTS md_memory_update
AFTER UPDATE OF content, tags, importance, metadata, memory_type, entity_id ON memories BEGIN
    INSERT OR IGNORE INTO md_dirty SELECT old.entity_id WHERE old.entity_id IS NOT NULL;
    INSERT OR IGNORE INTO md_dirty SELECT new.entity_id WHERE new.entity_id IS NOT NULL;
    INSERT OR IGNORE INTO md_dirty_days SELECT substr(old.created_at, 1, 10) WHERE old.entity_id IS NULL;
END;
CREATE TRIGGER IF NOT EXISTS md_memory_lifecycle
AFTER UPDATE OF superseded_by, archived_at, links ON memories BEGIN
    INSERT OR IGNORE INTO md_dirty_days SELECT substr(old.created_at, 1, 10) WHERE old.entity_id IS NULL;
END;
CREATE TRIGGER IF NOT EXISTS md_relation_insert AFTER INSERT ON relations BEGIN
    INSERT OR IGNORE INTO md_dirty VALUES (new.from_id);
END;
CREATE TRIGGER IF NOT EXISTS md_relation_delete AFTER DELETE ON relations BEGIN
    INSERT OR IGNORE INTO md_dirty VALUES (old.from_id);
END;
"""

# Files memloci created itself: only their `modified:` is stamped on later writes. A clone or
# a lost index forgets this, and then memloci treats them as a person's files (no stamp).
CREATED_FILES = "CREATE TABLE IF NOT EXISTS md_created (path TEXT PRIMARY KEY)"
# A person's file memloci added to: its bytes before (`base`) and the sha256 of what memloci
# last wrote from them, so removing every addition gives back exactly `base` (writeback.py).
PERSON_BASES = "CREATE TABLE IF NOT EXISTS md_base (path TEXT PRIMARY KEY, base BLOB NOT NULL, written TEXT NOT NULL)"


def _corrupt(exc: Exception) -> bool:
    """Whether SQLite found the index damaged (not locked, not read-only, not a full disk)."""
    cause = exc.__cause__
    return (isinstance(cause, sqlite3.DatabaseError)
            and not isinstance(cause, (sqlite3.OperationalError, sqlite3.IntegrityError)))


class MarkdownStore:
    """A library kept as a folder of Markdown files, with its SQLite index."""

    kind = "markdown"

    def __init__(self, folder: str | os.PathLike[str], name: str = "default"):
        self.root = Path(folder).expanduser().absolute()
        self.name = name
        self._files = MarkdownFiles(self.root, name)
        self.index = SQLiteStore(self.root / INDEX_DIR / "index.db", name, files=self._files)
        self.path = self.index.path
        self._scanner = Scanner(self.root, name, self.index.db, self._files)
        self._undo = MarkdownUndo(self.root, self.index.db, self._files)
        self._migration = MarkdownMigration(self.index.db, self._files, self._undo)
        self._md_lock = threading.RLock()
        self._md_ready = False
        self._opening = False
        self._watcher: threading.Thread | None = None
        self._stop = threading.Event()
        self.index_moved_to: str | None = None  # where a corrupt index was moved aside, if it was

    @property
    def schema(self) -> LibrarySchema:
        """The library's rules (set per library by the registry): the index's and the files'."""
        return self.index.schema

    @schema.setter
    def schema(self, value: LibrarySchema) -> None:
        self.index.schema = value
        self._files.schema = value

    @property
    def refused_links(self) -> dict[str, str]:
        """Links the last walk of the folder found (rel path -> why): never followed."""
        return self._files.refused_links

    @property
    def last_sync(self) -> SyncReport | None:
        """The last scan that found something to index."""
        return self._scanner.last_sync

    # -- opening ---------------------------------------------------------------------

    def open(self, *, create: bool = True) -> None:
        if self._md_ready:
            return
        with self._md_lock:
            if self._md_ready or self._opening:  # _opening: this thread is already inside open()
                return
            self._opening = True
            try:
                try:
                    self._open(create)
                    self._move_to_hidden()
                    self._undo.load_journal()  # a fresh index gets its history back from the journal
                    self._scanner.scan()  # other threads wait here until the folder is indexed
                except LibraryUnreadableError as exc:
                    if not _corrupt(exc):
                        raise
                    self._move_index_aside(exc)  # damage found past the first page: start again from the files
                    self._open(create)
                    self._move_to_hidden()
                    self._undo.load_journal()
                    self._scanner.scan()
                self._md_ready = True
            finally:
                self._opening = False

    def _open(self, create: bool) -> None:
        if self.root.exists() and not self.root.is_dir():
            raise LibraryUnreadableError(f"library '{self.name}': {self.root} is a file, not a folder")
        if not self.root.exists():
            if not create:
                raise LibraryMissingError(f"library '{self.name}' does not exist yet: {self.root}")
            try:
                self.root.mkdir(parents=True)
            except OSError as exc:
                raise storage_error(exc, f"library '{self.name}': cannot create {self.root}") from exc
        index = self.root / INDEX_DIR
        try:
            # The index is memloci's own: private (0700, files 0600), never reached through a link
            # (a clone's `.memloci -> /elsewhere` must not put an index there).
            confine.private_dir(self.root, INDEX_DIR)
            ignore = f"{INDEX_DIR}/.gitignore"  # the index is rebuilt from the files: not for git
            if not confine.exists(self.root, ignore) or confine.read_bytes(self.root, ignore) in OLD_GITIGNORES:
                confine.write_atomic(self.root, ignore, GITIGNORE, mode=confine.PRIVATE_FILE)
            # No .gitattributes: memloci adds nothing to a person's folder beyond .memloci/ and the
            # files the README names (it documents `.memloci/journal.md merge=union` for git users).
            # SQLite opens its files by name: check them for links just before, and make them private.
            for folder in ("", INDEX_DIR):  # a writer killed between its temp file and the rename
                confine.remove_stray_temps(self.root, folder)
            for suffix in ("", "-wal", "-shm", "-journal"):
                confine.check(self.root, f"{INDEX_DIR}/index.db{suffix}")
                confine.private_file(self.root, f"{INDEX_DIR}/index.db{suffix}", create=not suffix)
        except OSError as exc:
            raise storage_error(exc, f"library '{self.name}': cannot write {index}") from exc
        try:
            self.index.open(create=True)
            conn = self.index.db.connect()
        except LibraryUnreadableError as exc:
            if not _corrupt(exc):
                raise
            self._move_index_aside(exc)
            self.index.open(create=True)
            conn = self.index.db.connect()
        try:
            with self.index.db.write_lock:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    for statement in split_sql(MARKDOWN_TRIGGERS):
                        conn.execute(statement)
                    conn.execute(CREATED_FILES)
                    conn.execute(PERSON_BASES)
                    conn.execute(INTENTS_TABLE)
                    recover(self.root, conn, self.name)  # a change a killed process left half done
                    conn.execute("COMMIT")
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
        finally:
            conn.close()

    def _move_to_hidden(self) -> None:
        """Move the `journal.md` and `memories/` an older memloci kept at the root into `.memloci/`
        (layout.py): one change, all or nothing; a kill mid-way is finished here next time."""
        if not (confine.exists(self.root, OLD_JOURNAL) or confine.exists(self.root, OLD_MEMORIES)):
            return
        with self.index.db.read() as conn:
            if not to_move(conn, self.root):
                return
        with self.index.db.write(reading_files=True) as tx:
            moved = move_to_hidden(tx, self.root)
        with self.index.db.write(reading_files=True) as tx:
            drop_old_folder(tx, self.root)
        if moved:
            log.info("library %s: moved %d file(s) of memloci's (journal.md, memories/) into %s/",
                     self.name, moved, INDEX_DIR)

    def recover(self) -> None:
        """Open the index and finish or undo a change a killed process left half done, without
        scanning the folder (`open()` does this too, then scans)."""
        with self._md_lock:
            self._open(create=False)

    def _move_index_aside(self, exc: Exception) -> None:
        """The index is only a cache of the files: a corrupt one is kept aside (for a post-mortem)
        and built again from the files."""
        self.index.close()  # its connections only: a watcher keeps running
        stamp = time.strftime("%Y%m%dT%H%M%S")
        moved = self.root / INDEX_DIR / f"index.db.corrupt-{stamp}"
        for suffix in ("", "-wal", "-shm"):
            src = self.root / INDEX_DIR / f"index.db{suffix}"
            if src.exists() and not src.is_symlink():
                os.replace(src, moved.with_name(moved.name + suffix))
        self.index_moved_to = str(moved)
        log.warning("library %s: the index %s was unreadable (%s); moved it to %s and rebuilding it from the files",
                    self.name, self.path, exc, moved)
        confine.private_file(self.root, f"{INDEX_DIR}/index.db", create=True)

    def start_watching(self, interval: float = WATCH_INTERVAL_S) -> None:
        """Pick up outside edits every `interval` seconds while the process runs."""
        if self._watcher is not None:
            return

        def watch() -> None:
            try:
                self.open()  # the first scan runs here, not on the caller's thread
            except MemlociError as exc:
                log.error("library %s: %s", self.name, exc)
                return
            while not self._stop.wait(interval):
                try:
                    self.sync()
                except Exception as exc:  # keep watching; the next round retries
                    log.warning("library %s: scanning %s failed: %s", self.name, self.root, exc)

        self._watcher = threading.Thread(target=watch, name=f"memloci-watch-{self.name}", daemon=True)
        self._watcher.start()

    def close(self) -> None:
        self._stop.set()
        if self._watcher is not None and self._watcher is not threading.current_thread():
            self._watcher.join(5)
        self._watcher = None
        self.index.close()
        self._md_ready = False
        self._stop = threading.Event()

    # -- the folder ------------------------------------------------------------------

    def sync(self) -> SyncReport:
        """Bring the index up to the files: parse what changed since the last look."""
        self.open()
        with self._md_lock:
            self._move_to_hidden()  # a restored backup, or a git pull, of the older layout
            return self._scanner.scan()

    def rebuild_index(self) -> SyncReport:
        """Index every file again, as if for the first time (scan.py: one write transaction,
        under the library's write lock); what no file holds leaves the index."""
        self.open()
        with self._md_lock:
            report = self._scanner.rebuild_index()
        report.index_moved_to = self.index_moved_to
        return report

    @contextmanager
    def files_frozen(self) -> Iterator[None]:
        """Hold the library's write lock: no tool, scan or other process changes the folder or
        the index meanwhile (they wait, as for any write)."""
        self.open()
        with self._md_lock, self._undo.frozen():
            yield

    def replace_files(self, put: dict[str, bytes], remove: list[str]) -> None:
        """Write and remove files as one change under the write lock: all of it or none, also
        under SIGKILL (intent.py). The index catches up with the next `sync()`."""
        self.open()
        with self._md_lock:
            self._undo.replace_files(put, remove)

    def reload_journal(self) -> int:
        """The journal table becomes the journal file's entries again (after a restore put the file back)."""
        self.open()
        return self._undo.reload_journal()

    def undo_change(self, change_id: int, *, origin: str = "undo") -> dict[str, Any]:
        self.sync()  # what people changed by hand is known before deciding
        with self._md_lock:
            return self._undo.undo_change(change_id, origin=origin)

    def create_graph(self, entities: Sequence[EntityInput], relations: Sequence[RelationInput], *, origin: str,
                     paths: Mapping[str, str] | None = None) -> GraphBatch:
        """Create (or merge) `entities` and the `relations` going out of them in one transaction,
        each file written once, a new one at its source's path (importing.py)."""
        self.open()
        return importing.create_graph(self.index, entities, relations, origin=origin, paths=paths)

    # -- reporting ---------------------------------------------------------------------

    def problems(self) -> dict[str, str]:
        """Files that could not be indexed, with why."""
        with self._read() as conn:
            broken = dict(conn.execute("SELECT path, error FROM md_broken ORDER BY path").fetchall())
        return dict(sorted({**broken, **self.refused_links}.items()))

    def entity_listing(self) -> list[ListedEntity]:
        """Every entity with its file path (None: no file yet), by name, in one query
        (list_entities matches a glob against both)."""
        with self._read() as conn:
            return [ListedEntity(*row) for row in conn.execute(
                "SELECT e.name, e.entity_type, m.path FROM entities e "
                "LEFT JOIN md_files m ON m.entity_id = e.id ORDER BY e.name_key")]

    def stats(self) -> LibraryStats:
        self.open()
        base = self.index.stats()
        size = sum(st[1] for st in self._scanner.walk().values())
        return LibraryStats(base.name, self.kind, str(self.root), base.entities, base.observations, base.memories,
                            base.relations, base.journal_entries, size, SCHEMA_VERSION)

    def entity_file_text(self, name: str) -> str | None:
        """The entity's file as it is on disk (None if it has none yet)."""
        with self._read() as conn:
            row = conn.execute("SELECT m.path FROM md_files m JOIN entities e ON e.id = m.entity_id "
                               "WHERE e.name_key = ?", (name_key(name),)).fetchone()
        if row is None:
            return None
        try:
            return confine.read_text(self.root, row[0])
        except (FileNotFoundError, UnicodeDecodeError):
            return None

    # -- the context and the manual: files of their own ------------------------------------

    def read_context(self) -> dict:
        try:
            return parse_context(confine.read_text(self.root, CONTEXT))
        except FileNotFoundError:
            return {}

    def update_context(self, change: Callable[[dict[str, Any]], dict[str, Any]], *, origin: str) -> dict[str, Any]:
        self.open()
        with self.index.db.write() as tx:  # the library's write lock: read, merge, write as one step
            before = self.read_context()
            ctx = change(before)
            self._files.put(tx, CONTEXT, render_context(ctx), None)
            tx.conn.execute("DELETE FROM md_files WHERE path = ?", (CONTEXT,))  # not an entity, never scanned
            journal(tx, origin, origin, [], {k: {"before": before.get(k), "after": v}
                                             for k, v in ctx.items() if before.get(k) != v and k != "updated_at"})
        return ctx

    def manual_text(self) -> str | None:
        try:
            return confine.read_text(self.root, MANUAL)
        except FileNotFoundError:
            return None

    def edit_manual(self, change: Callable[[str | None], str], *, origin: str, detail: dict[str, Any]) -> str:
        self.open()
        with self.index.db.write() as tx:  # the library's write lock: read and write as one step
            text = change(self.manual_text())
            self._files.put(tx, MANUAL, text, None)
            tx.conn.execute("DELETE FROM md_files WHERE path = ?", (MANUAL,))  # not an entity, never scanned
            journal(tx, origin, origin, [], detail)
        return text

    # -- what `memloci migrate` sets --------------------------------------------------------

    def restore_dates(self, entities: Mapping[str, tuple[str, str, Sequence[str], Sequence[str]]],
                      relations: Mapping[tuple[str, str, str], str], *, origin: str) -> None:
        self.open()
        self._migration.restore_dates(entities, relations, origin=origin)

    def replace_journal(self, entries: Sequence[JournalEntry]) -> None:
        self.open()
        with self._md_lock:
            self._migration.replace_journal(entries)

    def finish_copy(self) -> None:
        self.open()
        self._migration.finish_copy()

    # -- the index's connections (tests and tools reading the tables) -----------------------

    @contextmanager
    def _read(self) -> Iterator[Any]:
        self.open()
        with self.index.db.read() as conn:
            yield conn

    @contextmanager
    def _write(self) -> Iterator[Any]:
        self.open()
        with self.index.db.write() as tx:
            yield tx.conn

    # -- the Store protocols: the index's, once the folder is open ---------------------------

    def checkpoint(self) -> None:
        self.open()
        self.index.checkpoint()

    def create_entities(self, entities: Sequence[EntityInput], *, origin: str) -> list[CreatedEntity]:
        self.open()
        return self.index.create_entities(entities, origin=origin)

    def create_relations(self, relations: Sequence[RelationInput], *, origin: str) -> RelationsCreated:
        self.open()
        return self.index.create_relations(relations, origin=origin)

    def add_observations(self, batches: Sequence[ObservationBatch], *, origin: str) -> list[AddedObservations]:
        self.open()
        return self.index.add_observations(batches, origin=origin)

    def delete_entities(self, names: Sequence[str], *, origin: str) -> list[str]:
        self.open()
        return self.index.delete_entities(names, origin=origin)

    def delete_observations(self, batches: Sequence[ObservationBatch], *, origin: str) -> list[RemovedObservations]:
        self.open()
        return self.index.delete_observations(batches, origin=origin)

    def delete_relations(self, relations: Sequence[RelationInput], *, origin: str) -> list[Relation]:
        self.open()
        return self.index.delete_relations(relations, origin=origin)

    def read_graph(self, *, limit: int, offset: int, summary: bool) -> GraphPage:
        self.open()
        return self.index.read_graph(limit=limit, offset=offset, summary=summary)

    def open_entities(self, names: Sequence[str]) -> Graph:
        self.open()
        return self.index.open_entities(names)

    def entity_names(self, names: Sequence[str]) -> dict[str, tuple[str, ...]]:
        self.open()
        return self.index.entity_names(names)

    def export_graph(self, *, order: str = "id") -> Graph:
        self.open()
        return self.index.export_graph(order=order)

    def search_entities(self, query: str, *, limit: int, extra: Sequence[tuple[str, float, str]] = (),
                        stop_words: frozenset[str] = frozenset(), names: NameVocabulary | None = None,
                        count_cap: int = 0, pool: int = 0) -> SearchResult:
        self.open()
        return self.index.search_entities(query, limit=limit, extra=extra, stop_words=stop_words, names=names,
                                          count_cap=count_cap, pool=pool)

    def count_entities(self, query: str, *, cap: int, stop_words: frozenset[str] = frozenset(),
                       names: NameVocabulary | None = None) -> int:
        self.open()
        return self.index.count_entities(query, cap=cap, stop_words=stop_words, names=names)

    def name_changes(self, since: int) -> NameChanges:
        self.open()
        return self.index.name_changes(since)

    def journal(self, *, limit: int, internal: bool = True) -> list[JournalEntry]:
        self.open()
        return self.index.journal(limit=limit, internal=internal)

    def store_memory(self, m: MemoryInput, *, origin: str) -> StoredMemory:
        self.open()
        return self.index.store_memory(m, origin=origin)

    def memories_by_hash(self, content_hash: str) -> list[Memory]:
        self.open()
        return self.index.memories_by_hash(content_hash)

    def update_memory(self, memory_id: int, *, content: str | None, tags: Sequence[str] | None,
                      metadata: dict[str, Any] | None, importance: str | None, origin: str) -> Memory:
        self.open()
        return self.index.update_memory(memory_id, content=content, tags=tags, metadata=metadata, importance=importance, origin=origin)

    def delete_memories(self, ids: Sequence[int], *, origin: str) -> list[Memory]:
        self.open()
        return self.index.delete_memories(ids, origin=origin)

    def change_memories(self, edits: Sequence[MemoryEdit], new: Sequence[NewMemory], *, origin: str, action: str,
                        detail: dict[str, Any], expect: Sequence[MemoryEdit] = (),
                        preview_id: int | None = None) -> ChangedMemories:
        self.open()
        return self.index.change_memories(edits, new, origin=origin, action=action, detail=detail, expect=expect,
                                          preview_id=preview_id)

    def save_preview(self, kind: str, plan: dict[str, Any]) -> int:
        self.open()
        return self.index.save_preview(kind, plan)

    def load_preview(self, preview_id: int) -> dict[str, Any] | None:
        self.open()
        return self.index.load_preview(preview_id)

    def list_previews(self, *, pending: bool, limit: int) -> list[dict[str, Any]]:
        self.open()
        return self.index.list_previews(pending=pending, limit=limit)

    def mark_executed(self, preview_id: int, change_id: int) -> bool:
        self.open()
        return self.index.mark_executed(preview_id, change_id)

    def list_memories(self, *, offset: int, limit: int, filters: MemoryFilter, count: bool = True) -> MemoryPage:
        self.open()
        return self.index.list_memories(offset=offset, limit=limit, filters=filters, count=count)

    def lexical_memory_candidates(self, terms: list[str], grams: list[str], k: int,
                                  filters: MemoryFilter) -> dict[int, float]:
        self.open()
        return self.index.lexical_memory_candidates(terms, grams, k, filters)

    def memory_ids(self, filters: MemoryFilter) -> set[int]:
        self.open()
        return self.index.memory_ids(filters)

    def load_memories(self, ids: Sequence[int]) -> dict[int, Memory]:
        self.open()
        return self.index.load_memories(ids)

    def touch_memories(self, ids: Sequence[int]) -> None:
        self.open()
        self.index.touch_memories(ids)

    def pending_embeddings(self, limit: int) -> list[PendingMemory]:
        self.open()
        return self.index.pending_embeddings(limit)

    def pending_count(self) -> int:
        self.open()
        return self.index.pending_count()

    def save_vectors(self, items: Sequence[tuple[int, str, np.ndarray]], model: str) -> SavedVectors:
        self.open()
        return self.index.save_vectors(items, model)

    def load_vectors(self) -> MemoryVectors:
        self.open()
        return self.index.load_vectors()

    def vectors_version(self) -> int:
        self.open()
        return self.index.vectors_version()

    def vector_model(self) -> str | None:
        self.open()
        return self.index.vector_model()

    def reset_vectors(self, model: str, dimension: int) -> int:
        self.open()
        return self.index.reset_vectors(model, dimension)

    def embedding_state(self) -> dict[str, Any]:
        self.open()
        return self.index.embedding_state()

    def refresh_passages(self, limit: int = 64) -> int:
        self.open()
        return self.index.refresh_passages(limit)

    def pending_passages(self, limit: int) -> list[PendingPassage]:
        self.open()
        return self.index.pending_passages(limit)

    def save_passage_vectors(self, items: Sequence[tuple[int, str, np.ndarray]], model: str) -> SavedVectors:
        self.open()
        return self.index.save_passage_vectors(items, model)

    def load_passage_vectors(self) -> PassageVectors:
        self.open()
        return self.index.load_passage_vectors()

    def passages_version(self) -> int:
        self.open()
        return self.index.passages_version()

    def passage_pending_count(self) -> int:
        self.open()
        return self.index.passage_pending_count()

    def entity_names_by_id(self, ids: Sequence[int]) -> dict[int, str]:
        self.open()
        return self.index.entity_names_by_id(ids)

    def passages_of(self, name: str) -> list[str]:
        self.open()
        return self.index.passages_of(name)

    def entity_documents(self, names: Sequence[str]) -> dict[str, EntityDocument]:
        self.open()
        return self.index.entity_documents(names)

    def list_entities(self, pattern: str = "*") -> list[ListedEntity]:
        self.open()
        return self.index.list_entities(pattern)

    def find_relations(self, *, to_entity: str | None, relation_type: str | None,
                       from_entity: str | None) -> list[Relation]:
        self.open()
        return self.index.find_relations(to_entity=to_entity, relation_type=relation_type, from_entity=from_entity)

    def check_document(self, doc: EntityDocument, field: str) -> None:
        self.open()
        self.index.check_document(doc, field)

    def apply_documents(self, docs: Sequence[EntityDocument], *, origin: str, action: str,
                        create: bool | None = None, detail: dict[str, Any] | None = None) -> list[str]:
        self.open()
        return self.index.apply_documents(docs, origin=origin, action=action, create=create, detail=detail)

    def edit_document(self, name: str, change: Callable[[str], str], *, origin: str,
                      detail: dict[str, Any], stamp: str | None = None) -> DocumentEdit:
        self.open()
        return self.index.edit_document(name, change, origin=origin, detail=detail, stamp=stamp)

    def edit_documents(self, changes: Sequence[tuple[str, Callable[[str], str]]], *, origin: str, action: str,
                       detail: dict[str, Any], absent: Sequence[str] = ()) -> EditedDocuments:
        self.open()
        return self.index.edit_documents(changes, origin=origin, action=action, detail=detail, absent=absent)

    def rename_entity(self, old: str, new: str, *, origin: str) -> dict[str, Any]:
        self.open()
        return self.index.rename_entity(old, new, origin=origin)

    def merge_entities(self, sources: Sequence[str], target: str, *, origin: str) -> dict[str, Any]:
        self.open()
        return self.index.merge_entities(sources, target, origin=origin)

    def note_backup(self, at: str, path: str) -> None:
        self.open()
        self.index.note_backup(at, path)

    def last_backup(self) -> dict[str, str] | None:
        self.open()
        return self.index.last_backup()

    def note_event(self, action: str, detail: dict[str, Any], *, vectors_floor: int = 0) -> None:
        self.open()
        self.index.note_event(action, detail, vectors_floor=vectors_floor)

    def holds_data(self) -> int:
        self.open()
        return self.index.holds_data()

    def free_memories(self) -> list[Memory]:
        self.open()
        return self.index.free_memories()

    def import_memories(self, items: Sequence[Any], *, origin: str) -> ImportedMemories:
        self.open()
        return self.index.import_memories(items, origin=origin)

    def restore_memory_state(self, items: Sequence[tuple[int, str, str, int, str | None]]) -> None:
        self.open()
        self.index.restore_memory_state(items)
