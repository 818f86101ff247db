"""Connections of the postgres engine: names derived from a library, the pool, and the
LISTEN thread that tells a server about other servers' writes.

Nothing here imports psycopg at module level: a server without the `postgres` extra still
starts, and only a call that opens a PostgreSQL library says what is missing.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from ...errors import LibraryUnreadableError, PermissionDeniedError, StorageFullError
from ...libraries import masked_url

log = logging.getLogger(__name__)

# PostgreSQL cuts identifiers at 63 bytes: a longer schema name would silently be another one.
_IDENTIFIER_MAX = 63
# Taken by every migration transaction in a database: migrations of all libraries (and the
# CREATE EXTENSION they may run, which is database-wide) never race each other.
MIGRATION_LOCK = int.from_bytes(hashlib.sha256(b"memloci:migrations").digest()[:8], "big", signed=True)


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


def connection_error(library: str, url: str, exc: Exception) -> LibraryUnreadableError:
    """A failed connection as memloci reports it, the password masked wherever it appears."""
    text = str(exc).strip()
    secret = _password(url)
    if secret:
        text = text.replace(secret, "***")
    return LibraryUnreadableError(f"library '{library}': cannot reach PostgreSQL at {masked_url(url)}: {text}",
                                  hint="Check that the server runs and that the URL, user and password are right.")


def engine_error(library: str, url: str, exc: Exception) -> Exception:
    """The error code a failed call on the server deserves: a full disk, a write refused (a
    read-only standby, missing privileges), a server that cannot be reached; anything else (a
    bug of ours) surfaces as it is."""
    import psycopg
    import psycopg_pool

    where = f"library '{library}' at {masked_url(url)}"
    if isinstance(exc, psycopg.errors.DiskFull):
        return StorageFullError(f"{where}: the database server's disk is full: {exc}")
    if isinstance(exc, psycopg.errors.ReadOnlySqlTransaction):
        return PermissionDeniedError(f"{where} is read-only: {exc}",
                                     hint="The URL names a read-only server (a standby?); point it at the primary.")
    if isinstance(exc, psycopg.errors.InsufficientPrivilege):
        return PermissionDeniedError(f"{where}: the database user may not do this: {exc}",
                                     hint="Grant the user rights on the library's schema, or use another user.")
    if isinstance(exc, (psycopg.OperationalError, psycopg_pool.PoolTimeout)):
        return connection_error(library, url, exc)
    return exc


def _password(url: str) -> str | None:
    import urllib.parse

    parts = urllib.parse.urlsplit(url)
    if parts.password:
        return urllib.parse.unquote(parts.password)
    for key, value in urllib.parse.parse_qsl(parts.query):
        if key == "password":
            return value
    return None


def open_pool(url: str, schema: str, size: int) -> Any:
    """A small pool whose connections see the library's schema first (then `public`, where the
    extensions live)."""
    import psycopg_pool

    search_path = f"SET search_path TO {quoted(schema)}, public"

    def configure(conn: Any) -> None:  # autocommit: the setting holds for the connection's life
        conn.execute(search_path)

    # min_size 1: an idle server holds one connection per library, not `size`. Autocommit, so
    # each `conn.transaction()` is an explicit BEGIN ... COMMIT.
    return psycopg_pool.ConnectionPool(url, min_size=1, max_size=size, open=True, configure=configure,
                                       kwargs={"autocommit": True}, timeout=30.0, num_workers=1,
                                       name=f"memloci-{schema}")


class ChangeListener:
    """LISTEN on a library's channel in a daemon thread; every notification (another server's
    write, or this one's) bumps `count` and calls the callbacks. A dropped connection is made
    again, and the reconnection counts as a change too: notifications sent meanwhile are lost,
    so whatever a reader holds must be treated as stale."""

    def __init__(self, url: str, channel: str):
        self.url = url
        self.channel = channel
        self.count = 0
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

    def _run(self) -> None:
        import psycopg

        backoff = 0.5
        first = True
        while not self._stop.is_set():
            try:
                with psycopg.connect(self.url, autocommit=True, connect_timeout=10) as conn:
                    conn.execute(f"LISTEN {quoted(self.channel)}")
                    if not first:
                        self._bump("reconnected")
                    first, backoff = False, 0.5
                    self._ready.set()
                    while not self._stop.is_set():
                        for note in conn.notifies(timeout=1.0):
                            self._bump(note.payload)
            except Exception as exc:
                self._ready.set()  # open() must not hang on a listener that cannot connect
                if self._stop.is_set():
                    return
                first = False  # whatever was sent while we were away is lost: count the reconnection
                log.warning("LISTEN %s: %s; connecting again in %.1f s", self.channel,
                            str(exc).splitlines()[0] if str(exc) else type(exc).__name__, backoff)
                time.sleep(backoff)
                backoff = min(backoff * 2, 30.0)
