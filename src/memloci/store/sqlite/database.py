"""The connections of one SQLite file and its transactions (DESIGN.md §3).

Concurrency: WAL mode; every write is one `BEGIN IMMEDIATE` transaction, serialized
in-process by a lock and across processes by SQLite's own write lock (with a generous
busy timeout), so concurrent callers queue instead of overwriting each other. A process
killed mid-transaction leaves nothing behind: uncommitted WAL frames are ignored on the
next open. Calls borrow a connection from a small pool for one transaction each.

A library kept in files (Markdown) gives its index a FileSide (tx.py): its steps run at the
edges of every write transaction, under the same lock.
"""

from __future__ import annotations

import logging
import os
import queue
import re
import sqlite3
import threading
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from memloci.core.errors import (
    READ_ONLY_HINT,
    ConflictError,
    LibraryMissingError,
    LibraryUnreadableError,
    PermissionDeniedError,
    StorageFullError,
)
from memloci.core.errors import (
    storage_error as os_storage_error,
)
from memloci.core.model import content_hash, name_key, now_iso
from memloci.core.query_text import cjk_grams
from memloci.core.schema import DEFAULT_SCHEMA, LibrarySchema
from memloci.core.writable import DISK_FULL, write_problem
from memloci.store.sqlite.schema import MIGRATIONS, SCHEMA_VERSION
from memloci.store.sqlite.sql import split_sql
from memloci.store.sqlite.tx import NO_FILES, FileSide, WriteTx
from memloci.store.sqlite.undo_rows import seal_journal

log = logging.getLogger(__name__)

BUSY_TIMEOUT_S = 60.0


class Database:
    """One SQLite file: its connections, its schema's migrations, its read snapshots and write
    transactions. `schema`: the library's rules (set by the registry through the store)."""

    def __init__(self, path: str | os.PathLike[str], name: str, files: FileSide = NO_FILES):
        self.path = str(Path(path).expanduser())
        self.name = name
        self.files = files
        self.schema: LibrarySchema = DEFAULT_SCHEMA
        # Idle connections, shared by all threads: a call borrows one for one transaction.
        # (Per-thread connections would pile up as the event loop's worker threads come and go.)
        self._idle: queue.SimpleQueue[sqlite3.Connection] = queue.SimpleQueue()
        self.write_lock = threading.Lock()  # in this process; SQLite's lock across processes
        self._open_lock = threading.Lock()
        self._opened = False

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
                    raise os_storage_error(exc, f"library '{self.name}': cannot create {p}") from exc
            try:
                conn = self.connect()
            except sqlite3.OperationalError as exc:
                raise storage_error(self, exc) from exc
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

    def connect(self) -> sqlite3.Connection:
        # On a read-only mount SQLite cannot make the -shm file that WAL reads need; the file cannot
        # change under us there, so it is opened as immutable: reads work, writes are refused.
        frozen = read_only_mount(self.path)
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
    def borrow(self) -> Iterator[sqlite3.Connection]:
        self.open()
        try:
            conn = self._idle.get_nowait()
        except queue.Empty:
            conn = self.connect()
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
        with self.write_lock:
            conn.execute("BEGIN IMMEDIATE")
            try:
                # Read again under the write lock: another process may have migrated meanwhile.
                version = conn.execute("PRAGMA user_version").fetchone()[0]
                for number in range(version, SCHEMA_VERSION):
                    log.info("library %s: applying schema migration %d", self.name, number + 1)
                    for statement in split_sql(MIGRATIONS[number]):
                        _apply(conn, statement)
                    if number == 0:
                        conn.execute("INSERT OR IGNORE INTO library_meta VALUES ('created_at', ?)", (now_iso(),))
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise

    @contextmanager
    def write(self, *, reading_files: bool = False) -> Iterator[WriteTx]:
        """One write transaction: committed whole, or rolled back whole, with the file side's
        steps at its edges (tx.py). `reading_files`: it takes in files people wrote (a scan)."""
        with self.borrow() as conn, self.write_lock:
            tx = WriteTx(conn, reading_files=reading_files)  # its undo record is its own (undo.new_record)
            try:
                conn.execute("BEGIN IMMEDIATE")
                self.files.begin(tx)
                yield tx
                self.files.before_seal(tx)
                seal_journal(tx, self.files)  # what a destructive change removed goes into its journal entry
                self.files.before_commit(tx)
                conn.execute("COMMIT")
            except BaseException as exc:
                if conn.in_transaction:
                    with suppress(sqlite3.Error):
                        conn.execute("ROLLBACK")
                self.files.after_rollback(tx)  # still under the lock: no other writer sees a half-undone change
                if isinstance(exc, sqlite3.DatabaseError):
                    raise storage_error(self, exc) from exc
                raise
        self.files.after_commit(tx)

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """A consistent snapshot for several SELECTs."""
        with self.borrow() as conn:
            try:
                conn.execute("BEGIN")
                yield conn
            except sqlite3.DatabaseError as exc:
                raise storage_error(self, exc) from exc
            finally:
                if conn.in_transaction:
                    with suppress(sqlite3.Error):  # borrow drops a connection left mid-transaction
                        conn.execute("ROLLBACK")

    def checkpoint(self) -> None:
        with self.borrow() as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def storage_error(store: Database, exc: sqlite3.DatabaseError) -> Exception:
    """The error code a failed SQLite call deserves: a full disk, a read-only file or folder, a
    lock held too long, or (only when none of those) a file that cannot be read."""
    text = str(exc)
    where = f"library '{store.name}' at {store.path}"
    code = getattr(exc, "sqlite_errorname", "") or ""
    # SQLITE_FULL, or an I/O error with no space left (SQLite reports some ENOSPC writes as IOERR)
    if code.startswith("SQLITE_FULL") or (code.startswith("SQLITE_IOERR") and disk_full(store.path)):
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


def disk_full(path: str | Path) -> bool:
    problem = write_problem(path)
    return bool(problem and problem.startswith(DISK_FULL))


def read_only_mount(path: str | Path) -> bool:
    try:
        return bool(os.statvfs(Path(path).parent).f_flag & os.ST_RDONLY)
    except OSError:
        return False


_ADD_COLUMN = re.compile(r"^\s*ALTER\s+TABLE\s+\w+\s+ADD\s+COLUMN\b", re.IGNORECASE)


def _apply(conn: sqlite3.Connection, statement: str) -> None:
    """One statement of a migration. A column a migration adds may be there already (a library
    whose user_version was set back runs its migrations again): SQLite has no ADD COLUMN IF NOT
    EXISTS, so that one error is the statement's no-op."""
    try:
        conn.execute(statement)
    except sqlite3.OperationalError as exc:
        if not (_ADD_COLUMN.match(statement) and "duplicate column name" in str(exc)):
            raise
