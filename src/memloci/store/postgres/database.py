"""One library's schema in a PostgreSQL database, as the postgres engine reaches it: the pool,
the library's write lock, the change listener; read snapshots and write transactions
(transaction.WriteTx). Every part of the engine (engine.PostgresStore's collaborators) works
through one Database.

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
by itself (`transact`) before the error reaches the caller.

Outages. A server that stopped or cannot be reached is not contention: a call whose
connection breaks, or that finds no connection within OUTAGE_CHECK seconds while a connection
made there and then fails too, fails with STORAGE_UNAVAILABLE "cannot reach PostgreSQL" (the
library, the masked URL, what libpq said), and so does every call after it, at once, until the
server answers again (outage.Reachability: one connection tried per call, shared by the calls
waiting meanwhile). The pool is let go when the outage begins (its background reconnection
would back off for minutes, and log each try) and made anew when the server answers, so the
first call after it is served. Every wait of a call is bounded: connecting by CONNECT_TIMEOUT,
the check of a pooled connection by CHECK_TIMEOUT (connection.py), the pool and the writers'
queue by OUTAGE_CHECK slices between which the outage is looked for.

Sessions hold nothing. Every transaction sets its own `search_path` (`SET LOCAL`: the
library's schema, `public`, and wherever the host keeps the vector and pg_trgm extensions),
so a pooler in transaction mode, which hands one server session to many clients, cannot send
a statement to another library's schema.

Other servers' writes. Every write ends with `NOTIFY memloci_<name>, '<what changed>'`
(delivered only if it commits), except the access counts a retrieval bumps (they change
nothing another process holds). Each store LISTENs on its library's channel in a daemon
thread (connection.ChangeListener) and counts what it hears (`changes()`, `on_change()`), so
what a process holds in memory can tell it is stale without asking the database.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from memloci.core.errors import StorageUnavailableError
from memloci.core.secrets import masked_url
from memloci.store.postgres.connection import (
    ChangeListener,
    EmbeddingClaims,
    TransientError,
    busy_error,
    connect_options,
    connection_error,
    engine_error,
    lock_key,
    open_pool,
    quoted,
    require_psycopg,
    schema_for,
    scrubbed,
)
from memloci.store.postgres.outage import Reachability
from memloci.store.postgres.schema import extension_schemas, migrate
from memloci.store.postgres.transaction import WriteTx

log = logging.getLogger(__name__)

POOL_SIZE = 4  # connections per library and process; a write holds one for one transaction
LOCK_TIMEOUT = 30.0  # seconds a write waits for its library's lock before it is refused as busy
POOL_TIMEOUT = 30.0  # seconds a call waits for a free connection of the pool
OUTAGE_CHECK = 1.0  # seconds a call waits for a connection (or its turn to write) before it looks for an outage
QUIET = frozenset({"accesses"})  # what a write may change without telling other servers

T = TypeVar("T")

# The writers' queue of each library (url, schema) in this process: see "Waiting" above.
_WRITERS: dict[tuple[str, str], threading.RLock] = {}
_WRITERS_GUARD = threading.Lock()


def _writers(url: str, schema: str) -> threading.RLock:
    with _WRITERS_GUARD:
        return _WRITERS.setdefault((url, schema), threading.RLock())


class Database:
    """A library's schema in a PostgreSQL database: connections, its lock, what other servers change."""

    def __init__(self, url: str, name: str, *, pool_size: int = POOL_SIZE, pool_timeout: float = POOL_TIMEOUT,
                 lock_timeout: float = LOCK_TIMEOUT):
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
        self.lock_key = lock_key(self.schema_id)
        self.writers = _writers(url, self.schema_id)
        self.pool: Any = None
        self.listener: ChangeListener | None = None
        self.open_lock = threading.Lock()
        self.search_path = f"SET LOCAL search_path TO {self.schema_name}, public"  # and the extensions' (open)
        self.own_writes = 0  # committed by this process's store: its own changes are known at once
        self.claims: EmbeddingClaims | None = None  # the pending memories this process embeds (memories.py)
        self.reach = Reachability(name, url, on_lost=self._let_pool_go, on_back=self._renew_pool)

    def open(self, *, create: bool = True) -> None:
        """Connect, create (unless `create` is false) or migrate the library's schema, start
        listening for other servers' writes. Idempotent."""
        if self.pool is not None:
            return
        unreachable: Exception | None = None
        with self.open_lock:
            if self.pool is not None:
                return
            psycopg = require_psycopg(self.name)
            try:
                with psycopg.connect(self.url, autocommit=True, **connect_options(self.url)) as conn:
                    migrate(conn, self.schema_id, self.name, create=create)
                    self.search_path = "SET LOCAL search_path TO " + ", ".join(
                        [self.schema_name, "public", *map(quoted, extension_schemas(conn))])
                pool = open_pool(self.url, self.schema_id, self.pool_size, self.pool_timeout)
            except psycopg.Error as exc:
                mapped = engine_error(self.name, self.url, exc)
                if not isinstance(mapped, StorageUnavailableError):
                    raise (connection_error(self.name, self.url, exc) if mapped is exc else mapped) from exc
                unreachable = exc
            else:
                listener = ChangeListener(self.url, self.schema_id, on_drop=self._listener_dropped,
                                          on_back=self._listener_back)
                listener.start()
                self.listener, self.pool = listener, pool
        if unreachable is not None:  # (outside open_lock, which the outage's own lock may wait for)
            raise self.reach.lost(" ".join(scrubbed(self.url, unreachable).split())) from unreachable
        self.reach.opened()

    def close(self) -> None:
        with self.open_lock:
            if self.listener is not None:
                self.listener.stop()
                self.listener = None
            if self.claims is not None:
                self.claims.close()
                self.claims = None
            if self.pool is not None:
                self.pool.close()
                self.pool = None

    def _let_pool_go(self) -> None:
        """An outage began: the pool is closed (its connections are dead, and its reconnection
        would back off for minutes and log every try), in the background, since closing waits
        for its worker. A call still waiting on it fails with PoolClosed, read as the outage."""
        pool = self.pool
        if pool is not None:
            threading.Thread(target=pool.close, name=f"memloci-pool-close-{self.schema_id}", daemon=True).start()

    def _listener_dropped(self) -> None:
        """The listening connection broke (on the listener's thread): when no new connection
        can be made either, the outage begins now, not at the next call (so /healthz says so
        before any call)."""
        failed = self.reach.probe(time.monotonic())
        if failed is not None:
            self.reach.lost(failed)

    def _listener_back(self) -> None:
        """The listening connection was made again: an outage under way is over, now, not at
        the next call."""
        try:
            self.reach.check()
        except StorageUnavailableError:  # down again meanwhile: the next call finds it
            pass

    def _renew_pool(self) -> None:
        """The server answers again: a new pool (under Reachability's lock, before any call
        is let through), so the next call is served on new connections."""
        with self.open_lock:
            if self.pool is not None:
                self.pool = open_pool(self.url, self.schema_id, self.pool_size, self.pool_timeout)

    @contextmanager
    def connection(self, arrived: float | None = None) -> Iterator[Any]:
        """A connection of the pool, for one transaction of a call that arrived at `arrived`
        (by default now). Waits at most pool_timeout for one (then CONFLICT "busy": every
        connection stayed in use), looking for an outage every OUTAGE_CHECK seconds of the wait
        (then STORAGE_UNAVAILABLE, within a few seconds)."""
        import psycopg_pool

        arrived = time.monotonic() if arrived is None else arrived
        deadline = time.monotonic() + self.pool_timeout
        while True:
            self.reach.check(arrived)
            self.open()
            pool = self.pool
            waited_from = time.monotonic()
            try:
                conn = pool.getconn(timeout=max(0.001, min(OUTAGE_CHECK, deadline - waited_from)))
                break
            except psycopg_pool.PoolClosed:  # let go by an outage another call found, or renewed meanwhile
                if not self.reach.down and pool is self.pool:
                    raise
                continue
            except psycopg_pool.PoolTimeout as exc:
                failed = self.reach.probe(waited_from)
                if failed is not None:
                    raise self.reach.lost(failed) from exc
                if time.monotonic() >= deadline:  # the server answers: every connection stayed in use
                    raise busy_error(self.name, "every connection of this server to PostgreSQL stayed in use for "
                                                f"{self.pool_timeout:g} s") from exc
        try:
            yield conn
        finally:
            pool.putconn(conn)  # a transaction left open is rolled back, a broken connection closed

    @contextmanager
    def read(self) -> Iterator[Any]:
        """A consistent snapshot for several SELECTs (READ ONLY, REPEATABLE READ): its connection."""
        with self.engine_errors(), self.connection() as conn:
            with conn.transaction():
                # one round trip (statements without parameters may share one)
                conn.execute(f"SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY; {self.search_path}")
                yield conn

    @contextmanager
    def write(self, what: str = "graph") -> Iterator[WriteTx]:
        """One write transaction under the library's advisory lock: committed whole, or rolled
        back whole; other servers hear `what` changed once it commits (unless it is QUIET)."""
        arrived = time.monotonic()
        self.reach.check(arrived)
        self.open()
        # In line before borrowing a connection (see "Waiting" in the module's docstring); an
        # outage found meanwhile by the call in front ends the wait (with that call's answer).
        waited_until = arrived + self.lock_timeout
        while not self.writers.acquire(timeout=max(0.001, min(OUTAGE_CHECK, waited_until - time.monotonic()))):
            self.reach.check(arrived)
            if time.monotonic() >= waited_until:
                raise busy_error(self.name, f"this server's other calls held its write lock for {self.lock_timeout:g} s")
        committing = False
        try:
            with self.engine_errors(), self.connection(arrived) as conn:
                with conn.transaction():
                    # Isolation first (before any snapshot), then the transaction's own settings
                    # and the lock, in one round trip; the key is our own integer, not user text.
                    conn.execute("SET TRANSACTION ISOLATION LEVEL READ COMMITTED; "
                                 f"{self.search_path}; SET LOCAL lock_timeout = '{int(self.lock_timeout * 1000)}ms'; "
                                 f"SELECT pg_advisory_xact_lock({int(self.lock_key)})")
                    tx = WriteTx(conn)  # its undo record is its own (a retried one starts again)
                    yield tx
                    tx.seal()  # what a destructive change removed goes into its journal entry
                    if what not in QUIET:
                        conn.execute("SELECT pg_notify(%s, %s)", (self.schema_id, what))
                    committing = True  # the COMMIT is sent as this block ends
            if what not in QUIET:
                self.own_writes += 1
        except StorageUnavailableError as exc:
            if not committing:
                raise
            # The server may have committed before the connection broke: "nothing was changed"
            # would be a guess.
            raise StorageUnavailableError(
                exc.message + " (the connection broke while the write was being committed)",
                hint="The write may or may not have been applied: read before sending it again. memloci connects "
                     "again by itself once the database server answers.") from exc
        finally:
            self.writers.release()

    def transact(self, body: Callable[[WriteTx], T], what: str = "graph") -> T:
        """`body(tx)` in one write transaction (write); run once more if PostgreSQL rolled it
        back to resolve a deadlock or a serialization failure (nothing was returned or kept)."""
        try:
            with self.write(what) as tx:
                return body(tx)
        except TransientError as exc:
            log.info("library '%s': %s; running the write once more", self.name, exc)
        with self.write(what) as tx:
            return body(tx)

    @contextmanager
    def engine_errors(self) -> Iterator[None]:
        """A failure of the server or the connection as memloci's error codes (connection.engine_error).
        A broken connection is an outage when a new one cannot be made either (outage.Reachability)."""
        import psycopg
        import psycopg_pool

        try:
            yield
        except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
            mapped = engine_error(self.name, self.url, exc)
            if isinstance(mapped, StorageUnavailableError):
                failed = self.reach.probe(time.monotonic())
                if failed is not None:
                    raise self.reach.lost(failed) from exc
            if mapped is exc:
                raise
            raise mapped from exc

    def embedding_claims(self) -> EmbeddingClaims:
        """The pending memories this process embeds (connection.EmbeddingClaims), made on first use."""
        self.reach.check()
        self.open()
        with self.open_lock:
            if self.claims is None:
                self.claims = EmbeddingClaims(self.url, self.schema_id, self.search_path)
            return self.claims

    def release_claims(self, ids: Any) -> None:
        """A batch's vectors committed: its claims may go (another server would find it embedded)."""
        if self.claims is not None:
            self.claims.release(ids)

    def changes(self) -> int:
        """How many change notices this process has heard on the library's channel (its own
        writes', other servers', and reconnections of the listener)."""
        return self.listener.count if self.listener is not None else 0

    def change_mark(self) -> int | None:
        """A number that moves whenever the library may have changed (a write of this process,
        at once; another server's, once its notice arrives); None while no listener is
        connected, when nothing can be known without asking the database."""
        if self.listener is None or not self.listener.listening:
            return None
        return self.listener.count + self.own_writes

    def on_change(self, callback: Any) -> None:
        """Call `callback(what)` on the listener's thread whenever a change notice arrives."""
        self.open()
        assert self.listener is not None
        self.listener.callbacks.append(callback)

    def pool_stats(self) -> dict[str, Any]:
        return self.pool.get_stats() if self.pool is not None else {}
