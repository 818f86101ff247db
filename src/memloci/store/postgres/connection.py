"""Connections of the postgres engine: names derived from a library, the pool, and the
LISTEN thread that tells a server about other servers' writes.

Nothing here imports psycopg at module level: a server without the `postgres` extra still
starts, and only a call that opens a PostgreSQL library says what is missing.
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
import time
from collections.abc import Callable
from typing import Any

from memloci.core.errors import (
    ConflictError,
    LibraryUnreadableError,
    NotFoundError,
    PermissionDeniedError,
    StorageFullError,
    StorageUnavailableError,
)
from memloci.core.secrets import masked_url, url_secrets

log = logging.getLogger(__name__)

# PostgreSQL cuts identifiers at 63 bytes: a longer schema name would silently be another one.
_IDENTIFIER_MAX = 63
# Taken by every migration transaction in a database: migrations of all libraries (and the
# CREATE EXTENSION they may run, which is database-wide) never race each other.
MIGRATION_LOCK = int.from_bytes(hashlib.sha256(b"memloci:migrations").digest()[:8], "big", signed=True)
# Seconds a connection attempt may take (libpq's connect_timeout, per address tried), unless
# the URL sets its own: a server that accepts TCP and never answers is given up on in time for
# a call to fail within 5 s; a stopped one refuses at once anyway.
CONNECT_TIMEOUT = 3
# Seconds the check of a pooled connection (one empty round trip) may take: a server that holds
# the connection open and never answers fails the check instead of holding the call.
CHECK_TIMEOUT = 1.0
# A statement already sent when the server's host hangs or drops off the network: TCP keepalives
# and a user timeout (libpq's names, each unless the URL sets it) end the connection within about
# 10 s instead of the kernel's minutes, so the call fails and frees the library's write lock. A
# slow statement on a live server is not cut: its server still acknowledges the packets.
DEAD_PEER = {"keepalives": 1, "keepalives_idle": 5, "keepalives_interval": 2, "keepalives_count": 2,
             "tcp_user_timeout": 10_000}


def schema_for(library: str) -> str:
    """The (unquoted) schema holding library `library`: `memloci_<name>` in lower case, since
    library names match case-insensitively; a name too long for an identifier keeps its start
    and gains a hash of the whole, so two long names never share a schema."""
    base = "memloci_" + library.lower()
    if len(base.encode()) <= _IDENTIFIER_MAX:
        return base
    digest = hashlib.sha256(library.lower().encode()).hexdigest()[:12]
    return base[: _IDENTIFIER_MAX - 13] + "_" + digest


def quoted(identifier: str) -> str:
    """`identifier` as SQL text: double-quoted, so `.` and `-` (allowed in library names) stay part of it."""
    return '"' + identifier.replace('"', '""') + '"'


def lock_key(schema: str) -> int:
    """The advisory-lock key of a library: a signed 64-bit number from its schema's name."""
    return int.from_bytes(hashlib.sha256(b"memloci:library:" + schema.encode()).digest()[:8], "big", signed=True)


def require_psycopg(library: str) -> Any:
    """The psycopg module, or an error that says how to install it."""
    try:
        import psycopg
        import psycopg_pool  # noqa: F401  (the pool ships separately)
    except ImportError as exc:
        raise LibraryUnreadableError(
            f"library '{library}' is stored in PostgreSQL, and psycopg is not installed ({exc.name} is missing)",
            hint="Install the postgres extra: pip install 'memloci[postgres]' (psycopg 3 with its pool).") from exc
    return psycopg


def connection_error(library: str, url: str, exc: BaseException) -> StorageUnavailableError:
    """A failed connection as memloci reports it, the password masked wherever it appears."""
    return StorageUnavailableError(f"library '{library}': cannot reach PostgreSQL at {masked_url(url)}: "
                                   f"{scrubbed(url, exc)}",
                                   hint="Nothing was changed. Check that the server runs and that the URL is right; "
                                        "memloci connects again by itself once it answers (no restart needed).")


def connect_options(url: str) -> dict[str, Any]:
    """What every connection of the engine passes to libpq beside the URL: CONNECT_TIMEOUT and
    DEAD_PEER, each unless the URL sets it itself (then the person's choice holds)."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        given = conninfo_to_dict(url)
    except Exception:  # a URL libpq cannot parse fails at the connection, with its own words
        given = {}
    return {k: v for k, v in {"connect_timeout": CONNECT_TIMEOUT, **DEAD_PEER}.items() if k not in given}


def check_connection(conn: Any) -> None:
    """The pool's check of a connection before it is handed out: one empty round trip, given
    CHECK_TIMEOUT seconds (psycopg_pool's own check waits for ever on a server that holds the
    connection and never answers). Raises when the connection does not work."""
    import select

    import psycopg

    if conn.closed or conn.pgconn.transaction_status != psycopg.pq.TransactionStatus.IDLE:
        raise psycopg.OperationalError("the connection is closed or inside a transaction")
    pgconn = conn.pgconn
    pgconn.send_query(b"")
    deadline = time.monotonic() + CHECK_TIMEOUT
    while pgconn.flush() != 0:  # the query is tiny: one send, as a rule
        if not select.select([], [pgconn.socket], [], max(0.0, deadline - time.monotonic()))[1]:
            raise psycopg.OperationalError(f"the server did not answer within {CHECK_TIMEOUT:g} s")
    while True:
        pgconn.consume_input()
        if not pgconn.is_busy():
            break
        if not select.select([pgconn.socket], [], [], max(0.0, deadline - time.monotonic()))[0]:
            raise psycopg.OperationalError(f"the server did not answer within {CHECK_TIMEOUT:g} s")
    failed = None
    while (result := pgconn.get_result()) is not None:
        if result.status == psycopg.pq.ExecStatus.FATAL_ERROR:
            failed = result.get_error_message()
    if failed is not None:
        raise psycopg.OperationalError(failed)


def scrubbed(url: str, exc: BaseException) -> str:
    """`exc`'s text with the URL's password (and the pieces libpq may quote of one it could not
    parse: "invalid integer value "s3cr" for ... port") masked."""
    text = str(exc).strip() or type(exc).__name__
    pieces = {piece for secret in url_secrets(url)
              for piece in (secret, *(p for p in re.split(r"[/@?#:]", secret) if len(p) >= 3))}
    for piece in sorted(pieces, key=len, reverse=True):
        text = text.replace(piece, "***")
    return text


def busy_error(library: str, what: str) -> ConflictError:
    return ConflictError(f"library '{library}' is busy: {what}",
                         hint="Nothing was changed; send the call again in a moment.")


class TransientError(ConflictError):
    """A write PostgreSQL rolled back to break a deadlock or a serialization failure: sending it
    again is safe (PostgresStore retries it once itself, before giving up)."""


# SQLSTATEs (https://www.postgresql.org/docs/current/errcodes-appendix.html) with a meaning of their own
_DEADLOCK, _SERIALIZATION = "40P01", "40001"
_LOCK_NOT_AVAILABLE, _CANCELED = "55P03", "57014"
_SHUTDOWN = {"57P01": "an administrator shut the connection down", "57P02": "the server crashed",
             "57P03": "the server is starting up or shutting down"}


def engine_error(library: str, url: str, exc: Exception) -> Exception:
    """The error code a failed call on the server deserves. Only a connection that failed or
    broke (SQLSTATE class 08, or psycopg's own connection failures, which carry no SQLSTATE)
    "cannot reach PostgreSQL"; a full disk, a write refused (a read-only standby, missing
    privileges), a lock not granted in time, a deadlock or serialization failure, a cancelled
    statement and a server shutting down each say so; anything else (a bug of ours) surfaces as it is."""
    import psycopg
    import psycopg_pool

    where = f"library '{library}' at {masked_url(url)}"
    if isinstance(exc, psycopg_pool.PoolTimeout):  # every connection of this process stayed in use
        return busy_error(library, f"every connection of this server to PostgreSQL stayed in use ({scrubbed(url, exc)})")
    if not isinstance(exc, psycopg.Error):
        return exc
    state = exc.sqlstate or ""
    if isinstance(exc, psycopg.errors.DiskFull):
        return StorageFullError(f"{where}: the database server's disk is full: {exc}")
    if isinstance(exc, psycopg.errors.ReadOnlySqlTransaction):
        return PermissionDeniedError(f"{where} is read-only: {exc}",
                                     hint="The URL names a read-only server (a standby?); point it at the primary.")
    if isinstance(exc, psycopg.errors.InsufficientPrivilege) and "extension" in str(exc):
        return PermissionDeniedError(f"{where}: the database user may not create the extensions memloci needs: "
                                     f"{scrubbed(url, exc)}",
                                     hint="A superuser must run `CREATE EXTENSION vector; CREATE EXTENSION pg_trgm;` "
                                          "once in that database; then send the call again.")
    if isinstance(exc, psycopg.errors.InsufficientPrivilege):
        return PermissionDeniedError(f"{where}: the database user may not do this: {exc}",
                                     hint="Grant the user rights on the library's schema, or use another user.")
    if state in (_DEADLOCK, _SERIALIZATION):
        kind = "a deadlock" if state == _DEADLOCK else "a serialization failure"
        return TransientError(f"library '{library}': PostgreSQL rolled the call back to resolve {kind} with "
                              f"another transaction: {scrubbed(url, exc)}",
                              hint="Nothing was changed; send the call again.")
    if state == _LOCK_NOT_AVAILABLE:
        return busy_error(library, f"another server holds its write lock ({scrubbed(url, exc)})")
    if state == _CANCELED:
        return ConflictError(f"{where}: the statement was cancelled or ran past statement_timeout: {scrubbed(url, exc)}",
                             hint="Nothing was changed; send the call again, or raise statement_timeout for this user.")
    if state in _SHUTDOWN:
        return StorageUnavailableError(f"{where}: {_SHUTDOWN[state]}: {scrubbed(url, exc)}",
                                       hint="Nothing was changed; send the call again in a moment (memloci connects "
                                            "again by itself).")
    refused = login_error(library, url, exc, state)
    if refused is not None:
        return refused
    if state.startswith("08") or (isinstance(exc, psycopg.OperationalError) and not state):
        return connection_error(library, url, exc)
    if isinstance(exc, psycopg.OperationalError):  # resources (53...), system errors (58...): the server's words
        return LibraryUnreadableError(f"{where}: PostgreSQL refused the call (SQLSTATE {state}): {scrubbed(url, exc)}",
                                      hint="See the server's log; send the call again once it is fixed.")
    return exc


# What the server says when it refuses a connection. libpq gives no SQLSTATE for a failed
# connection (only its text), so the server's (English) words are read as well as the code.
_NO_LOGIN = re.compile(r'password authentication failed for user "([^"]*)"|role "([^"]*)" does not exist'
                       r'|role "([^"]*)" is not permitted to log in|no pg_hba\.conf entry for host .*? user "([^"]*)"'
                       r'|fe_sendauth: no password supplied')
_NO_DATABASE = re.compile(r'database "([^"]*)" does not exist')


def login_error(library: str, url: str, exc: Exception, state: str) -> Exception | None:
    """A connection the server refused: a login (wrong password, unknown role, not allowed:
    28P01, 28000) is PERMISSION_DENIED, a database that does not exist (3D000) NOT_FOUND, each
    naming the library and the URL (password masked). None for any other failure."""
    text = str(exc)
    where = f"library '{library}' at {masked_url(url)}"
    # (the text is read only when no SQLSTATE came: a statement's error has one, and its words
    # may quote anything)
    database = _NO_DATABASE.search(text) if not state else None
    if state == "3D000" or database:
        named = database or _NO_DATABASE.search(text)
        name = named.group(1) if named else "?"
        return NotFoundError(f"{where}: database '{name}' does not exist on the server; create it, or fix the URL",
                             hint=f"A user allowed to may run CREATE DATABASE \"{name}\"; or point the URL at an "
                                  "existing database. memloci creates the library's schema there itself.")
    login = _NO_LOGIN.search(text) if not state else None
    if state in ("28P01", "28000") or login:
        user = next((g for g in login.groups() if g), None) if login else None
        who = f"user '{user}'" if user else "the user"
        return PermissionDeniedError(f"{where}: PostgreSQL refused the login of {who}: {scrubbed(url, exc)}",
                                     hint="Check the user and password in the URL (or PGPASSWORD, ~/.pgpass), and that "
                                          "pg_hba.conf lets this user connect to this database.")
    return None


def open_pool(url: str, schema: str, size: int, timeout: float = 30.0) -> Any:
    """A small pool of plain connections. Nothing is set per session: each transaction sets
    its own search_path (SET LOCAL), so a pooler in transaction mode (PgBouncer), which hands
    one server session to many clients, can never send a statement to another library's schema."""
    import psycopg_pool

    # The pool's own warnings ("error connecting", "discarding closed connection") repeat, every
    # few seconds of an outage, what database.Database reports once at its start and once at its
    # end: only its errors are let through.
    quiet = logging.getLogger("psycopg.pool")
    quiet.setLevel(max(quiet.getEffectiveLevel(), logging.ERROR))
    # min_size 1: an idle server holds one connection per library, not `size`. Autocommit, so
    # each `conn.transaction()` is an explicit BEGIN ... COMMIT. `check`: a connection is tried
    # (one empty round trip, bounded: check_connection) before it is handed out, and one the
    # server closed meanwhile (a restart, pg_terminate_backend, an idle timeout) is replaced, so
    # the first call after a server restart answers instead of failing. The application name
    # (unless the URL sets one) lets an administrator tell a library's connections in
    # pg_stat_activity.
    return psycopg_pool.ConnectionPool(url, min_size=1, max_size=size, open=True,
                                       kwargs={"autocommit": True, "fallback_application_name": f"memloci-{schema}",
                                               **connect_options(url)},
                                       timeout=timeout, num_workers=1, name=f"memloci-{schema}",
                                       check=check_connection)


class ChangeListener:
    """LISTEN on a library's channel in a daemon thread; every notification (another server's
    write, or this one's) bumps `count` and calls the callbacks. The connection is pinged every
    `keepalive` seconds, so one a network dropped silently is noticed; a dropped connection is
    made again (with a growing pause between tries), and the reconnection counts as a change
    too: notifications sent meanwhile are lost, so whatever a reader holds must be treated as
    stale. `listening` is false while no connection listens: nothing heard then proves nothing."""

    KEEPALIVE = 30.0  # seconds between pings of a quiet connection
    BACKOFF_MAX = 10.0  # seconds between tries to connect again, at most: changes are heard soon after an outage

    def __init__(self, url: str, channel: str, *, keepalive: float | None = None,
                 on_drop: Callable[[], None] | None = None, on_back: Callable[[], None] | None = None):
        """`on_drop()` runs on the listener's thread when its connection breaks (once per
        loss), `on_back()` when it is made again: the first to notice a server stopping or
        returning is often this connection, before any call."""
        self.url = url
        self.channel = channel
        self.keepalive = self.KEEPALIVE if keepalive is None else keepalive
        self.on_drop, self.on_back = on_drop, on_back
        self.count = 0
        self.listening = False
        self.callbacks: list[Callable[[str], None]] = []
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"memloci-listen-{channel}", daemon=True)

    def start(self, wait: float = 10.0) -> None:
        self._thread.start()
        self._ready.wait(wait)  # so a write made right after open() is heard

    def stop(self) -> None:
        self._stop.set()

    def _bump(self, payload: str) -> None:
        self.count += 1  # one writer (this thread): no lock needed for a counter others only read
        for callback in list(self.callbacks):
            try:
                callback(payload)
            except Exception:  # a reader's bug must not stop the listening
                log.exception("change callback failed on %s", self.channel)

    def _tell(self, callback: Callable[[], None] | None) -> None:
        if callback is not None:
            try:
                callback()
            except Exception:  # its bug must not stop the listening
                log.exception("listener callback failed on %s", self.channel)

    def _run(self) -> None:
        import psycopg

        backoff = 0.5
        first = True
        while not self._stop.is_set():
            try:
                with psycopg.connect(self.url, autocommit=True, application_name="memloci-listen",
                                     **connect_options(self.url)) as conn:
                    conn.execute(f"LISTEN {quoted(self.channel)}")
                    self.listening = True
                    if not first:
                        self._bump("reconnected")
                        self._tell(self.on_back)
                    first, backoff = False, 0.5
                    self._ready.set()
                    pinged = time.monotonic()
                    while not self._stop.is_set():
                        for note in conn.notifies(timeout=1.0):
                            self._bump(note.payload)
                        if time.monotonic() - pinged >= self.keepalive:
                            conn.execute("SELECT 1")  # a dead connection fails here, not never
                            pinged = time.monotonic()
            except Exception as exc:
                self.listening = False
                self._ready.set()  # open() must not hang on a listener that cannot connect
                if self._stop.is_set():
                    return
                first = False  # whatever was sent while we were away is lost: count the reconnection
                # Once per loss, not per try: a server down for minutes is reported by the calls
                # (database.Reachability), and the tries say nothing new.
                log.log(logging.INFO if backoff == 0.5 else logging.DEBUG, "LISTEN %s at %s: %s; connecting again in "
                        "%.1f s", self.channel, masked_url(self.url), scrubbed(self.url, exc).splitlines()[0], backoff)
                if backoff == 0.5:
                    self._tell(self.on_drop)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, self.BACKOFF_MAX)
        self.listening = False


def claim_key(schema: str) -> int:
    """The first half of the two-number advisory-lock keys that claim a library's pending
    memories (the second is the memory's id): a signed 32-bit number from the schema's name.
    PostgreSQL keeps two-number keys apart from the one-number keys of lock_key."""
    return int.from_bytes(hashlib.sha256(b"memloci:embedding:" + schema.encode()).digest()[:4], "big", signed=True)


class EmbeddingClaims:
    """Which pending memories this process is embedding, so that several servers on one
    library never embed the same memory at once.

    A batch is claimed by transaction-level advisory locks (claim_key, memory id) taken on a
    connection of its own, whose transaction stays open while the batch is embedded and ends
    (ROLLBACK: it wrote nothing) once its vectors are committed. A server killed mid-batch
    leaves nothing behind: its transaction dies with its connection, and the locks with it.
    No row is written to claim, and a transaction-level lock also holds through a pooler in
    transaction mode (the server session stays with the open transaction).

    Locks are tried (pg_try_advisory_xact_lock), never waited for: a memory another server
    holds is skipped, and the next candidates in id order are tried instead. Once locked, a
    memory is read again in a new statement (READ COMMITTED: a new snapshot), since the
    server that held it may have saved its vector just before letting it go."""

    PAGE_TRIES = 8  # pages of candidates tried before a claim settles for what it has

    def __init__(self, url: str, schema: str, search_path: str):
        """`search_path`: the store's SET LOCAL search_path statement (its schema first)."""
        self.url = url
        self.key = claim_key(schema)
        self.search_path = search_path
        self.claimed: frozenset[int] = frozenset()
        self._conn: Any = None
        self._lock = threading.Lock()

    def claim(self, limit: int) -> list[tuple[int, str, str, str]]:
        """Up to `limit` pending memories (id, content, content_hash, thread), in id order, now
        held by this process until release(); a batch claimed before and never released (its
        embedding failed) is let go first."""
        import psycopg

        with self._lock:
            self._end()
            if self._conn is None or self._conn.closed:
                self._conn = psycopg.connect(self.url, autocommit=False, application_name="memloci-embed-claims",
                                             **connect_options(self.url))
            conn = self._conn
            try:
                conn.execute(f"SET TRANSACTION ISOLATION LEVEL READ COMMITTED; {self.search_path}")
                held: list[int] = []
                after = 0
                for _ in range(self.PAGE_TRIES):
                    # The candidates first (MATERIALIZED: a lock is tried once for each of
                    # them, and only for them), then a lock tried on each: every lock taken is
                    # returned, so none is held unknown to us.
                    want = limit - len(held)
                    rows = conn.execute(
                        """WITH candidates AS MATERIALIZED (
                               SELECT id FROM memories WHERE NOT embedded AND id > %(after)s ORDER BY id LIMIT %(n)s)
                           SELECT id, pg_try_advisory_xact_lock(%(key)s, (id %% 4294967296 - 2147483648)::int)
                           FROM candidates ORDER BY id""",
                        {"after": after, "n": want, "key": self.key}).fetchall()
                    held += [int(i) for i, got in rows if got]
                    if len(rows) < want or len(held) >= limit:
                        break  # no more candidates, or enough
                    after = int(rows[-1][0])
                if not held:
                    conn.rollback()
                    return []
                found = conn.execute("""SELECT id, content, content_hash, thread FROM memories
                                        WHERE id = ANY(%s) AND NOT embedded ORDER BY id""", (held,)).fetchall()
            except BaseException:
                self._drop()
                raise
            self.claimed = frozenset(int(r[0]) for r in found)
            if not found:
                self._end()
            return [(int(i), c, h, t) for i, c, h, t in found]

    def release(self, ids: Any = None) -> None:
        """Let the claimed batch go (its vectors are committed): `ids`, if given, must be some
        of the claimed ones, or nothing is released (vectors saved by another caller)."""
        with self._lock:
            if ids is not None and not self.claimed.intersection(int(i) for i in ids):
                return
            self._end()

    def _end(self) -> None:
        self.claimed = frozenset()
        if self._conn is not None and not self._conn.closed:
            try:
                self._conn.rollback()
            except Exception:  # a broken connection has let its locks go already
                self._drop()

    def _drop(self) -> None:
        self.claimed = frozenset()
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception:
                pass
            self._conn = None

    def close(self) -> None:
        with self._lock:
            self._drop()
