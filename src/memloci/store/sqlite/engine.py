"""The embedded engine: one SQLite file per library (DESIGN.md §3).

Concurrency: WAL mode; every write is one `BEGIN IMMEDIATE` transaction, serialized
in-process by a lock and across processes by SQLite's own write lock (with a generous
busy timeout), so concurrent callers queue instead of overwriting each other. A process
killed mid-transaction leaves nothing behind: uncommitted WAL frames are ignored on the
next open. Calls borrow a connection from a small pool for one transaction each.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import sqlite3
import threading
import urllib.parse
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from memloci.core.errors import (
    READ_ONLY_HINT,
    ConflictError,
    LibraryMissingError,
    LibraryUnreadableError,
    PermissionDeniedError,
    StorageFullError,
    storage_error,
)
from memloci.core.model import (
    AddedObservations,
    CreatedEntity,
    Entity,
    EntityInput,
    LibraryStats,
    Observation,
    ObservationBatch,
    Relation,
    RelationInput,
    RemovedObservations,
    content_hash,
    name_key,
    now_iso,
)
from memloci.core.query_text import cjk_grams
from memloci.core.schema import DEFAULT_SCHEMA, LibrarySchema
from memloci.core.writable import DISK_FULL, write_problem
from memloci.rules import graph as rules
from memloci.rules.graph import RelationsCreated
from memloci.store.migratable import SQLiteMigratable
from memloci.store.sqlite.documents import SQLiteDocuments
from memloci.store.sqlite.graph_reads import SQLiteGraphReads, _chunks, _marks
from memloci.store.sqlite.graph_tx import SQLiteGraphTx
from memloci.store.sqlite.memories import SQLiteMemories
from memloci.store.sqlite.passages import SQLitePassages
from memloci.store.sqlite.schema import MIGRATIONS, SCHEMA_VERSION
from memloci.store.sqlite.undo import SQLiteUndo

log = logging.getLogger(__name__)

BUSY_TIMEOUT_S = 60.0
class SQLiteStore(SQLiteGraphReads, SQLiteMemories, SQLitePassages, SQLiteDocuments, SQLiteUndo, SQLiteMigratable):
    """A library kept in one SQLite file."""

    kind = "sqlite"
    schema: LibrarySchema = DEFAULT_SCHEMA  # set per library by the registry

    def __init__(self, path: str | os.PathLike[str], name: str = "default"):
        self.path = str(Path(path).expanduser())
        self.name = name
        # Idle connections, shared by all threads: a call borrows one for one transaction.
        # (Per-thread connections would pile up as the event loop's worker threads come and go.)
        self._idle: queue.SimpleQueue[sqlite3.Connection] = queue.SimpleQueue()
        self._write_lock = threading.Lock()
        self._open_lock = threading.Lock()
        self._opened = False

    # -- connections -------------------------------------------------------------------

    def open(self, *, create: bool = True) -> None:
        """Check the file, create (unless `create` is false) or migrate the schema. Idempotent."""
        if self._opened:
            return
        with self._open_lock:
            if self._opened:
                return
            p = Path(self.path)
            if p.is_dir():
                raise LibraryUnreadableError(f"library '{self.name}': {self.path} is a folder, not a SQLite file")
            if p.exists() and not os.access(p, os.R_OK):
                raise LibraryUnreadableError(f"library '{self.name}': {self.path} cannot be read (permission denied)")
            if not p.exists():
                if not create:
                    raise LibraryMissingError(f"library '{self.name}' does not exist yet: {self.path}")
                try:
                    # A library is private: a folder memloci makes for it is 0700, the file 0600
                    # (SQLite gives its -wal and -shm files the database file's mode).
                    p.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
                    os.close(os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600))
                except FileExistsError:
                    pass  # made meanwhile by another process
                except OSError as exc:
                    raise storage_error(exc, f"library '{self.name}': cannot create {p}") from exc
            try:
                conn = self._connect()
            except sqlite3.OperationalError as exc:
                raise _storage_error(self, exc) from exc
            except sqlite3.DatabaseError as exc:
                raise LibraryUnreadableError(
                    f"library '{self.name}' at {self.path} is not a readable SQLite database: {exc}"
                ) from exc
            try:
                version = conn.execute("PRAGMA user_version").fetchone()[0]
                if version > SCHEMA_VERSION:
                    raise LibraryUnreadableError(
                        f"library '{self.name}' at {self.path} has schema version {version}; "
                        f"this memloci knows up to {SCHEMA_VERSION}",
                        hint="Upgrade memloci to open this library.",
                    )
                if version < SCHEMA_VERSION:
                    self._migrate(conn)
            except BaseException:
                conn.close()
                raise
            self._idle.put(conn)
            self._opened = True

    def _connect(self) -> sqlite3.Connection:
        # On a read-only mount SQLite cannot make the -shm file that WAL reads need; the file cannot
        # change under us there, so it is opened as immutable: reads work, writes are refused.
        frozen = _read_only_mount(self.path)
        target = "file:" + urllib.parse.quote(os.fspath(self.path)) + "?immutable=1" if frozen else self.path
        conn = sqlite3.connect(target, uri=frozen, timeout=BUSY_TIMEOUT_S, isolation_level=None,
                               check_same_thread=False)
        try:
            # For migrations and renames that recompute hashes in SQL (never used by a trigger,
            # so another tool can still open the file).
            conn.create_function("memloci_content_hash", 2, content_hash, deterministic=True)
            conn.create_function("memloci_name_key", 1, name_key, deterministic=True)
            conn.create_function("memloci_cjk_grams", 1, cjk_grams, deterministic=True)
            conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            # A file that is not SQLite fails here, before anything could be written to it.
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
            mode = conn.execute("PRAGMA journal_mode" if frozen else "PRAGMA journal_mode = WAL").fetchone()[0]
            if mode != "wal" and not frozen:
                log.warning("library %s: journal mode is %s, not wal", self.name, mode)
            # FULL: a committed call survives power loss too, for ~0.25 ms per commit.
            conn.execute("PRAGMA synchronous = FULL")
            conn.execute("PRAGMA foreign_keys = ON")
            conn.execute("PRAGMA temp_store = MEMORY")
            conn.execute("PRAGMA cache_size = -16000")
        except BaseException:
            conn.close()
            raise
        return conn

    @contextmanager
    def _borrow(self) -> Iterator[sqlite3.Connection]:
        self.open()
        try:
            conn = self._idle.get_nowait()
        except queue.Empty:
            conn = self._connect()
        try:
            yield conn
        finally:
            if conn.in_transaction:  # only after an error inside the rollback itself
                conn.close()
            else:
                self._idle.put(conn)

    def close(self) -> None:
        """Close the idle connections (those still lent out close when returned to a closed store)."""
        while True:
            try:
                self._idle.get_nowait().close()
            except queue.Empty:
                break
        self._opened = False

    def _migrate(self, conn: sqlite3.Connection) -> None:
        with self._write_lock:
            conn.execute("BEGIN IMMEDIATE")
            try:
                # Read again under the write lock: another process may have migrated meanwhile.
                version = conn.execute("PRAGMA user_version").fetchone()[0]
                for number in range(version, SCHEMA_VERSION):
                    log.info("library %s: applying schema migration %d", self.name, number + 1)
                    for statement in _split_sql(MIGRATIONS[number]):
                        conn.execute(statement)
                    if number == 0:
                        conn.execute("INSERT OR IGNORE INTO library_meta VALUES ('created_at', ?)", (now_iso(),))
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction: committed whole, or rolled back whole."""
        with self._borrow() as conn, self._write_lock:
            self._forget_kept()  # undo records are per transaction
            try:
                conn.execute("BEGIN IMMEDIATE")
                yield conn
                self._seal_journal(conn)  # what a destructive change removed goes into its journal entry
                self._before_commit(conn)
                conn.execute("COMMIT")
            except BaseException as exc:
                if conn.in_transaction:
                    with suppress(sqlite3.Error):
                        conn.execute("ROLLBACK")
                self._after_rollback()  # still under the lock: no other writer sees a half-undone change
                if isinstance(exc, sqlite3.DatabaseError):
                    raise _storage_error(self, exc) from exc
                raise
            finally:
                self._forget_kept()

    def _before_commit(self, conn: sqlite3.Connection) -> None:
        """The last step inside a write transaction (a Markdown library puts its files in place here)."""

    def _after_rollback(self) -> None:
        """Right after a write transaction rolled back, before its lock is released (a Markdown
        library puts its files back here)."""

    def _reading_files(self) -> bool:
        """Whether this thread's write takes in files people wrote (a Markdown library's scan):
        what comes from a file is indexed as it is, never refused by the schema."""
        return False

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        """A consistent snapshot for several SELECTs."""
        with self._borrow() as conn:
            try:
                conn.execute("BEGIN")
                yield conn
            except sqlite3.DatabaseError as exc:
                raise _storage_error(self, exc) from exc
            finally:
                if conn.in_transaction:
                    with suppress(sqlite3.Error):  # _borrow drops a connection left mid-transaction
                        conn.execute("ROLLBACK")

    # -- helpers -----------------------------------------------------------------------

    @staticmethod
    def _resolve(conn: sqlite3.Connection, names: Iterable[str]) -> dict[str, tuple[int, str]]:
        """name_key -> (id, stored name) for the names that exist."""
        keys = list(dict.fromkeys(name_key(n) for n in names))
        found: dict[str, tuple[int, str]] = {}
        for chunk in _chunks(keys):
            for id_, name, key in conn.execute(
                f"SELECT id, name, name_key FROM entities WHERE name_key IN ({_marks(len(chunk))})", chunk
            ):
                found[key] = (id_, name)
        return found

    @staticmethod
    def _refresh_fts(conn: sqlite3.Connection, ids: Iterable[int]) -> None:
        ids = list(dict.fromkeys(ids))
        conn.executemany("DELETE FROM entity_fts WHERE rowid = ?", [(i,) for i in ids])
        conn.executemany("DELETE FROM entity_grams WHERE rowid = ?", [(i,) for i in ids])
        for chunk in _chunks(ids):
            # the columns of migration 7 (sqlite_search.py ranks over them)
            conn.execute(
                f"""INSERT INTO entity_fts (rowid, name, aliases, tags, entity_type, text, name_grams, text_grams)
                    SELECT id, name, aliases, tags, entity_type, text,
                           memloci_cjk_grams(name || char(10) || aliases || char(10) || tags || char(10) || entity_type),
                           memloci_cjk_grams(text)
                    FROM (SELECT e.*, ifnull((SELECT group_concat(m.content, char(10)) FROM memories m
                                              WHERE m.entity_id = e.id), '') || char(10) || e.body AS text
                          FROM entities e WHERE e.id IN ({_marks(len(chunk))}))""",
                chunk,
            )
            conn.execute(
                f"""INSERT INTO entity_grams (rowid, label, body)
                    SELECT id, name || char(10) || entity_type || char(10) || aliases || char(10) || tags, body
                    FROM entities WHERE id IN ({_marks(len(chunk))})""",
                chunk,
            )

    def _journal(self, conn: sqlite3.Connection, tool: str, action: str, entities: Sequence[str], detail: dict | None) -> None:
        cur = conn.execute(
            "INSERT INTO journal (at, tool, action, entities, detail) VALUES (?, ?, ?, ?, ?)",
            (now_iso(), tool, action, json.dumps(list(entities), ensure_ascii=False),
             json.dumps(detail, ensure_ascii=False) if detail is not None else None),
        )
        assert cur.lastrowid is not None  # an INSERT's row
        self._note_journal_row(cur.lastrowid)  # a change that kept undo records gets them at the commit

    def _load_entities(self, conn: sqlite3.Connection, ids: Sequence[int], observations: bool = True) -> dict[int, Entity]:
        """Entities by id, in the order of `ids` (ids with no entity are left out)."""
        rows: dict[int, tuple] = {}
        for chunk in _chunks(list(ids)):
            for row in conn.execute(
                f"""SELECT id, name, entity_type, aliases, tags, metadata, body, created_at, updated_at
                    FROM entities WHERE id IN ({_marks(len(chunk))})""",
                chunk,
            ):
                rows[row[0]] = row
        obs: dict[int, list[Observation]] = {i: [] for i in rows}
        if observations and rows:
            for chunk in _chunks(list(rows)):
                for entity_id, content, created_at in conn.execute(
                    f"""SELECT entity_id, content, created_at FROM memories
                        WHERE entity_id IN ({_marks(len(chunk))}) ORDER BY id""",
                    chunk,
                ):
                    obs[entity_id].append(Observation(content, created_at))
        return {i: _entity(rows[i], obs[i]) for i in ids if i in rows}

    @staticmethod
    def _relations_where(conn: sqlite3.Connection, where: str, params: Sequence[Any]) -> list[Relation]:
        return [
            Relation(f, t, to, c)
            for f, t, to, c in conn.execute(
                f"""SELECT a.name, r.relation_type, b.name, r.created_at
                    FROM relations r JOIN entities a ON a.id = r.from_id JOIN entities b ON b.id = r.to_id
                    WHERE {where} ORDER BY r.created_at, a.name_key, r.relation_type, b.name_key""",
                params,
            )
        ]

    def _relations_touching(self, conn: sqlite3.Connection, ids: Sequence[int]) -> list[Relation]:
        seen: dict[tuple, Relation] = {}
        for chunk in _chunks(list(ids)):
            m = _marks(len(chunk))
            for rel in self._relations_where(conn, f"r.from_id IN ({m}) OR r.to_id IN ({m})", [*chunk, *chunk]):
                seen.setdefault((rel.from_entity, rel.relation_type, rel.to_entity), rel)
        return list(seen.values())

    # -- writes: the rules are rules.py's, over this engine's GraphTx (sqlite_graph_tx.py) ----

    def _graph_tx(self, conn: sqlite3.Connection, at: str | None = None, *, link_pending: bool = False) -> SQLiteGraphTx:
        return SQLiteGraphTx(self, conn, at or now_iso(), link_pending=link_pending)

    def create_entities(self, entities: Sequence[EntityInput], *, origin: str) -> list[CreatedEntity]:
        at = now_iso()
        with self._write() as conn:
            return rules.create_entities(self._graph_tx(conn, at, link_pending=True), self.schema, entities, origin)

    def create_relations(self, relations: Sequence[RelationInput], *, origin: str) -> RelationsCreated:
        at = now_iso()
        with self._write() as conn:
            return rules.create_relations(self._graph_tx(conn, at), self.schema, relations, origin)

    def add_observations(self, batches: Sequence[ObservationBatch], *, origin: str) -> list[AddedObservations]:
        at = now_iso()
        with self._write() as conn:
            return rules.add_observations(self._graph_tx(conn, at), self.schema, batches, origin)

    def delete_entities(self, names: Sequence[str], *, origin: str) -> list[str]:
        with self._write() as conn:
            return rules.delete_entities(self._graph_tx(conn), self.schema, names, origin)

    def delete_observations(self, batches: Sequence[ObservationBatch], *, origin: str) -> list[RemovedObservations]:
        at = now_iso()
        with self._write() as conn:
            return rules.delete_observations(self._graph_tx(conn, at), self.schema, batches, origin)

    def delete_relations(self, relations: Sequence[RelationInput], *, origin: str) -> list[Relation]:
        with self._write() as conn:
            return rules.delete_relations(self._graph_tx(conn), self.schema, relations, origin)

    def checkpoint(self) -> None:
        with self._borrow() as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def stats(self) -> LibraryStats:
        with self._read() as conn:
            entities, observations, memories, relations, journal = conn.execute(
                """SELECT (SELECT count(*) FROM entities),
                          (SELECT count(*) FROM memories WHERE entity_id IS NOT NULL),
                          (SELECT count(*) FROM memories WHERE entity_id IS NULL),
                          (SELECT count(*) FROM relations),
                          (SELECT count(*) FROM journal)"""
            ).fetchone()
        size = sum(os.path.getsize(p) for p in (self.path, self.path + "-wal") if os.path.exists(p))
        return LibraryStats(self.name, self.kind, self.path, entities, observations, memories, relations,
                            journal, size, SCHEMA_VERSION)


def _entity(row: tuple, observations: list[Observation]) -> Entity:
    _, name, entity_type, aliases, tags, metadata, body, created_at, updated_at = row
    return Entity(
        name=name,
        entity_type=entity_type,
        observations=tuple(observations),
        aliases=tuple(json.loads(aliases)),
        tags=tuple(json.loads(tags)),
        metadata=json.loads(metadata),
        body=body,
        created_at=created_at,
        updated_at=updated_at,
    )


def _split_sql(script: str) -> list[str]:
    """Statements of a migration script; sqlite3.complete_statement keeps trigger bodies whole."""
    statements, buffer = [], ""
    for line in script.splitlines():
        line = line.split("--", 1)[0]
        buffer += line + "\n"
        if sqlite3.complete_statement(buffer):
            if buffer.strip().rstrip(";").strip():
                statements.append(buffer.strip())
            buffer = ""
    if buffer.strip():
        statements.append(buffer.strip())
    return statements


def _storage_error(store: SQLiteStore, exc: sqlite3.DatabaseError) -> Exception:
    """The error code a failed SQLite call deserves: a full disk, a read-only file or folder, a
    lock held too long, or (only when none of those) a file that cannot be read."""
    text = str(exc)
    where = f"library '{store.name}' at {store.path}"
    code = getattr(exc, "sqlite_errorname", "") or ""
    # SQLITE_FULL, or an I/O error with no space left (SQLite reports some ENOSPC writes as IOERR)
    if code.startswith("SQLITE_FULL") or (code.startswith("SQLITE_IOERR") and _disk_full(store.path)):
        return StorageFullError(f"{where}: the disk is full: {text}")
    if code.startswith(("SQLITE_READONLY", "SQLITE_CANTOPEN", "SQLITE_PERM", "SQLITE_AUTH")) \
            or "readonly" in text or "read-only" in text:
        problem = write_problem(store.path)
        if problem and problem.startswith(DISK_FULL):  # the -wal or journal file could not be created
            return StorageFullError(f"{where}: the disk is full: {text}")
        if problem or not code.startswith("SQLITE_CANTOPEN"):
            return PermissionDeniedError(f"{where} is read-only ({problem or text})", hint=READ_ONLY_HINT)
    if "locked" in text or "busy" in text:
        return ConflictError(
            f"{where} stayed locked by another process for {BUSY_TIMEOUT_S:.0f} s: {text}",
            hint="Another process holds a long write (an import?); retry shortly. Nothing was changed.",
        )
    if isinstance(exc, sqlite3.IntegrityError):
        return exc  # a bug of ours, not of the caller or the file: let it surface as one
    return LibraryUnreadableError(f"{where}: storage error: {text}",
                                  hint="Check the disk (full? failing?) and the file; run `memloci stats`.")


def _disk_full(path: str | Path) -> bool:
    problem = write_problem(path)
    return bool(problem and problem.startswith(DISK_FULL))


def _read_only_mount(path: str | Path) -> bool:
    try:
        return bool(os.statvfs(Path(path).parent).f_flag & os.ST_RDONLY)
    except OSError:
        return False
