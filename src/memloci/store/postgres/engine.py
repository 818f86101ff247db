"""The shared engine: a library kept in PostgreSQL (DESIGN.md §3), for teams whose agents on
several machines share one memory.

A library spec whose path is a `postgresql://` URL (any libpq URL, a socket `?host=/path`
included) selects it; the library's name chooses its schema (`memloci_<name>`, see
connection.schema_for), so several libraries share one database. Connections come from a
small psycopg 3 pool; the schema is created and migrated on open (schema.py).

Locking scheme. Every write transaction first takes `pg_advisory_xact_lock(<library key>)`
(connection.lock_key), so the writes to one library are serialized across every server
process on every host, and the lock goes with the transaction, whether it commits, rolls
back or its process dies. Under that lock a write reads what it needs (does the name exist?
would this relation close a cycle?) and no other write can change it before it commits, so
every rule of the library holds under concurrency with no retry loop, and the name log's
numbers follow commit order. Writes set READ COMMITTED themselves (whatever the database's
default_transaction_isolation says), before the lock: each statement after the lock sees
every write committed before the lock was granted (under REPEATABLE READ the snapshot would
be taken by the lock statement itself, before its wait, and miss them). Reads take no lock: each read runs in a READ ONLY REPEATABLE
READ transaction, one consistent snapshot for its several SELECTs, concurrent with writes
(such a transaction never fails to serialize). Writes to different libraries never wait
for each other.

Waiting. In one process, the writers of a library queue on a thread lock before they borrow a
connection: only one of them at a time holds a pooled connection while it waits for the
advisory lock, so waiting writers never starve the reads of connections. Both waits end
after `lock_timeout` seconds with a CONFLICT "library 'x' is busy" (the advisory one through
`SET LOCAL lock_timeout`), as does a pool with no connection free after `pool_timeout`. A
write PostgreSQL rolls back to resolve a deadlock or a serialization failure runs once more
by itself (`_transact`) before the error reaches the caller.

Sessions hold nothing. Every transaction sets its own `search_path` (`SET LOCAL`: the
library's schema, `public`, and wherever the host keeps the vector and pg_trgm extensions),
so a pooler in transaction mode, which hands one server session to many clients, cannot send
a statement to another library's schema.

Other servers' writes. Every write ends with `NOTIFY memloci_<name>, '<what changed>'`
(delivered only if it commits), except the access counts a retrieval bumps (they change
nothing another process holds). Each store LISTENs on its library's channel in a daemon
thread (connection.ChangeListener) and counts what it hears (`changes()`, `on_change()`), so
what a process holds in memory can tell it is stale without asking the database.

Notes with bodies (documents.py) are stored as in SQLite: body, front matter, `[[links]]` as
relations and links waiting for their target; renamed and merged with every link repaired
(rename.py, the rules in rename_rules.py). Undo works as in SQLite (undo.py, the rules in
memloci/undo.py): a destructive write keeps what it removed in its journal entry, sealed
under the library's lock just before the commit. Note bodies carry meaning as in SQLite
(passages.py): cut into passages, kept in step with every body by triggers, embedded by the
background worker into pgvector columns, and searched by meaning through search_nodes.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from memloci.core.errors import LibraryUnreadableError
from memloci.core.model import LibraryStats, now_iso
from memloci.core.schema import DEFAULT_SCHEMA, LibrarySchema
from memloci.core.secrets import masked_url
from memloci.store.migratable import PostgresMigratable
from memloci.store.postgres.connection import (
    ChangeListener,
    EmbeddingClaims,
    TransientError,
    busy_error,
    connection_error,
    engine_error,
    lock_key,
    open_pool,
    quoted,
    require_psycopg,
    schema_for,
)
from memloci.store.postgres.documents import PostgresDocuments
from memloci.store.postgres.graph import PostgresGraphWrites
from memloci.store.postgres.graph_reads import PostgresGraphReads
from memloci.store.postgres.memories import PostgresMemories
from memloci.store.postgres.passages import PostgresPassages
from memloci.store.postgres.portable import PostgresPortable
from memloci.store.postgres.rename import PostgresRename
from memloci.store.postgres.schema import SCHEMA_VERSION, extension_schemas, migrate
from memloci.store.postgres.search import PostgresSearch
from memloci.store.postgres.undo import PostgresUndo

log = logging.getLogger(__name__)

POOL_SIZE = 4  # connections per library and process; a write holds one for one transaction
LOCK_TIMEOUT = 30.0  # seconds a write waits for its library's lock before it is refused as busy
POOL_TIMEOUT = 30.0  # seconds a call waits for a free connection of the pool
QUIET = frozenset({"accesses"})  # what a write may change without telling other servers

T = TypeVar("T")

# The writers' queue of each library (url, schema) in this process: see "Waiting" above.
_WRITERS: dict[tuple[str, str], threading.RLock] = {}
_WRITERS_GUARD = threading.Lock()


def _writers(url: str, schema: str) -> threading.RLock:
    with _WRITERS_GUARD:
        return _WRITERS.setdefault((url, schema), threading.RLock())


class PostgresStore(PostgresMemories, PostgresSearch, PostgresGraphReads, PostgresGraphWrites, PostgresDocuments,
                    PostgresRename, PostgresPortable, PostgresMigratable, PostgresUndo, PostgresPassages):
    """A library kept in a schema of a PostgreSQL database."""

    kind = "postgres"
    schema: LibrarySchema = DEFAULT_SCHEMA  # set per library by the registry

    def __init__(self, url: str, name: str = "default", *, pool_size: int = POOL_SIZE,
                 pool_timeout: float = POOL_TIMEOUT, lock_timeout: float = LOCK_TIMEOUT):
        self.url = url  # never shown: it may hold a password
        self.name = name
        self.schema_id = schema_for(name)  # unquoted
        self.schema_name = quoted(self.schema_id)  # as SQL text
        # What errors, stats and health show, and what per-library state in a process is keyed
        # by (search/vectors.py library_key): the URL without its password, and the schema.
        self.path = f"{masked_url(url)}#{self.schema_id}"
        self.pool_size = pool_size
        self.pool_timeout = pool_timeout
        self.lock_timeout = lock_timeout
        self._lock_key = lock_key(self.schema_id)
        self._writers = _writers(url, self.schema_id)
        self._pool: Any = None
        self._listener: ChangeListener | None = None
        self._open_lock = threading.Lock()
        self._search_path = f"SET LOCAL search_path TO {self.schema_name}, public"  # and the extensions' (open)
        self._own_writes = 0  # committed by this store: its own changes are known at once
        self._claims: EmbeddingClaims | None = None  # the pending memories this process embeds (memories.py)

    # -- connections -------------------------------------------------------------------

    def open(self, *, create: bool = True) -> None:
        """Connect, create (unless `create` is false) or migrate the library's schema, start
        listening for other servers' writes. Idempotent."""
        if self._pool is not None:
            return
        with self._open_lock:
            if self._pool is not None:
                return
            psycopg = require_psycopg(self.name)
            try:
                with psycopg.connect(self.url, connect_timeout=10, autocommit=True) as conn:
                    migrate(conn, self.schema_id, self.name, create=create)
                    self._search_path = "SET LOCAL search_path TO " + ", ".join(
                        [self.schema_name, "public", *map(quoted, extension_schemas(conn))])
                pool = open_pool(self.url, self.schema_id, self.pool_size, self.pool_timeout)
            except psycopg.Error as exc:
                mapped = engine_error(self.name, self.url, exc)
                raise (connection_error(self.name, self.url, exc) if mapped is exc else mapped) from exc
            listener = ChangeListener(self.url, self.schema_id)
            listener.start()
            self._listener, self._pool = listener, pool

    def close(self) -> None:
        with self._open_lock:
            if self._listener is not None:
                self._listener.stop()
                self._listener = None
            if self._claims is not None:
                self._claims.close()
                self._claims = None
            if self._pool is not None:
                self._pool.close()
                self._pool = None

    @contextmanager
    def _read(self) -> Iterator[Any]:
        """A consistent snapshot for several SELECTs (READ ONLY, REPEATABLE READ)."""
        self.open()
        with self._engine_errors(), self._pool.connection() as conn:
            with conn.transaction():
                # one round trip (statements without parameters may share one)
                conn.execute(f"SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY; {self._search_path}")
                yield conn

    @contextmanager
    def _write(self, what: str = "graph") -> Iterator[Any]:
        """One write transaction under the library's advisory lock: committed whole, or rolled
        back whole; other servers hear `what` changed once it commits (unless it is QUIET)."""
        self.open()
        # In line before borrowing a connection (see "Waiting" in the module's docstring).
        if not self._writers.acquire(timeout=self.lock_timeout):
            raise busy_error(self.name, f"this server's other calls held its write lock for {self.lock_timeout:g} s")
        try:
            self._forget_kept()  # undo records are per transaction (a retried one starts again)
            with self._engine_errors(), self._pool.connection() as conn:
                with conn.transaction():
                    # Isolation first (before any snapshot), then the transaction's own settings
                    # and the lock, in one round trip; the key is our own integer, not user text.
                    conn.execute("SET TRANSACTION ISOLATION LEVEL READ COMMITTED; "
                                 f"{self._search_path}; SET LOCAL lock_timeout = '{int(self.lock_timeout * 1000)}ms'; "
                                 f"SELECT pg_advisory_xact_lock({int(self._lock_key)})")
                    yield conn
                    self._seal_journal(conn)  # what a destructive change removed goes into its journal entry (undo.py)
                    if what not in QUIET:
                        conn.execute("SELECT pg_notify(%s, %s)", (self.schema_id, what))
            if what not in QUIET:
                self._own_writes += 1
        finally:
            self._forget_kept()
            self._writers.release()

    def _transact(self, body: Callable[[Any], T], what: str = "graph") -> T:
        """`body(conn)` in one write transaction (_write); run once more if PostgreSQL rolled it
        back to resolve a deadlock or a serialization failure (nothing was returned or kept)."""
        try:
            with self._write(what) as conn:
                return body(conn)
        except TransientError as exc:
            log.info("library '%s': %s; running the write once more", self.name, exc)
        with self._write(what) as conn:
            return body(conn)

    @contextmanager
    def _engine_errors(self) -> Iterator[None]:
        """A failure of the server or the connection as memloci's error codes (connection.engine_error)."""
        import psycopg
        import psycopg_pool

        try:
            yield
        except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
            mapped = engine_error(self.name, self.url, exc)
            if mapped is exc:
                raise
            raise mapped from exc

    def changes(self) -> int:
        """How many change notices this process has heard on the library's channel (its own
        writes', other servers', and reconnections of the listener)."""
        return self._listener.count if self._listener is not None else 0

    def change_mark(self) -> int | None:
        """A number that moves whenever the library may have changed (a write of this store,
        at once; another server's, once its notice arrives); None while no listener is
        connected, when nothing can be known without asking the database."""
        if self._listener is None or not self._listener.listening:
            return None
        return self._listener.count + self._own_writes

    def on_change(self, callback: Any) -> None:
        """Call `callback(what)` on the listener's thread whenever a change notice arrives."""
        self.open()
        assert self._listener is not None
        self._listener.callbacks.append(callback)

    # -- upkeep ------------------------------------------------------------------------

    def checkpoint(self) -> None:
        """Every commit is durable on the server already; nothing to flush."""

    def stats(self) -> LibraryStats:
        with self._read() as conn:
            entities, observations, memories, relations, journal, size = conn.execute(
                """SELECT (SELECT count(*) FROM entities),
                          (SELECT count(*) FROM memories WHERE entity_id IS NOT NULL),
                          (SELECT count(*) FROM memories WHERE entity_id IS NULL),
                          (SELECT count(*) FROM relations),
                          (SELECT count(*) FROM journal),
                          (SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c
                           WHERE c.relnamespace = %s::regnamespace AND c.relkind IN ('r', 'm'))""",
                (self.schema_name,)).fetchone()
        return LibraryStats(self.name, self.kind, self.path, entities, observations, memories, relations,
                            journal, int(size), SCHEMA_VERSION)

    def engine_health(self) -> dict[str, Any]:
        """What health says of the engine: PostgreSQL's and pgvector's versions, the pool's
        figures, the change notices heard."""
        with self._read() as conn:
            server = conn.execute("SHOW server_version").fetchone()[0]
            rows = conn.execute("SELECT extname, extversion FROM pg_extension WHERE extname IN ('vector', 'pg_trgm')")
            extensions = dict(rows.fetchall())
        stats = self._pool.get_stats() if self._pool is not None else {}
        return {
            "engine": "postgres",
            "server_version": server,
            "pgvector": extensions.get("vector"),
            "pg_trgm": extensions.get("pg_trgm"),
            "schema": self.schema_id,
            "pool": {"max": self.pool_size, "size": stats.get("pool_size", 0),
                     "idle": stats.get("pool_available", 0), "waiting": stats.get("requests_waiting", 0)},
            "changes_heard": self.changes(),
        }

    def _journal(self, conn: Any, tool: str, action: str, entities: Any, detail: dict | None, at: str) -> None:
        (row_id,) = conn.execute(
            "INSERT INTO journal (at, tool, action, entities, detail) VALUES (%s, %s, %s, %s, %s) RETURNING id",
            (at, tool, action, json.dumps(list(entities), ensure_ascii=False),
             json.dumps(detail, ensure_ascii=False) if detail is not None else None)).fetchone()
        self._note_journal_row(int(row_id))  # a change that kept undo records gets them at the commit

    # -- the hot context (kept in `meta`, as SQLite keeps it in library_meta) -------------

    def read_context(self) -> dict[str, Any]:
        with self._read() as conn:
            row = conn.execute("SELECT value FROM meta WHERE key = 'context'").fetchone()
        return json.loads(row[0]) if row else {}

    def update_context(self, change: Callable[[dict[str, Any]], dict[str, Any]], *, origin: str) -> dict[str, Any]:
        """Read, merge and write the context in one transaction (under the library's lock, so two
        servers' updates merge instead of one overwriting the other)."""
        def body(conn: Any) -> dict[str, Any]:
            self._before_meta(conn, "context")  # undo puts it back
            row = conn.execute("SELECT value FROM meta WHERE key = 'context'").fetchone()
            before = json.loads(row[0]) if row else {}
            ctx = change(before)
            conn.execute("""INSERT INTO meta VALUES ('context', %s)
                            ON CONFLICT (key) DO UPDATE SET value = excluded.value""",
                         (json.dumps(ctx, ensure_ascii=False),))
            self._journal(conn, origin, origin, [], {k: {"before": before.get(k), "after": v}
                                                      for k, v in ctx.items() if before.get(k) != v and k != "updated_at"},
                          now_iso())
            return ctx

        return self._transact(body, "context")


__all__ = ["PostgresStore", "LibraryUnreadableError"]
