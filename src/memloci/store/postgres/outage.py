"""Whether a library's PostgreSQL server answers, as this process last found it.

An outage (the server stopped, crashed, or unreachable) is found by the connection that
listens for other servers' writes (it breaks the moment the server stops: Database's
ChangeListener callbacks), or by a call: its connection breaks, or the pool cannot hand one
out in time, and a connection made there and then fails too. From then on a call of the
library first connects once to see whether the server is back (one call at a time; the calls
waiting meanwhile share its answer) and fails at once with the outage's error
(STORAGE_UNAVAILABLE, "cannot reach PostgreSQL", the library and the masked URL) while it is
not; the first that finds it back lets the engine make its connections again (`on_back`),
and it and the calls after it are served; the listener's reconnection ends an outage too.
The log gets one line when an outage begins and one when it ends.

Not an outage: a server that answers but refuses the login, or lacks the database (those calls
fail with their own codes), and a pool whose connections are all in use while the server
answers, or takes no more connections (that is contention: CONFLICT "busy", as before).
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable

from memloci.core.errors import StorageUnavailableError
from memloci.core.secrets import masked_url
from memloci.store.postgres.connection import CONNECT_TIMEOUT, connect_options, engine_error, scrubbed

log = logging.getLogger(__name__)

# What a server that answers but takes no more connections says (SQLSTATE 53300, which libpq
# does not pass on for a connection it refused): its connections are in use, it is not down.
_FULL = re.compile(r"too many clients already|remaining connection slots are reserved")


class Reachability:
    """The outage of one library's server, if one is under way. `reason` is what the last
    connection tried said (None while the server answers)."""

    def __init__(self, library: str, url: str, *, on_lost: Callable[[], None], on_back: Callable[[], None]):
        """`on_lost()` runs once when an outage begins (the engine lets its dead connections
        go); `on_back()` runs, under this object's lock, when the server answers again and
        before any call is let through (the engine makes its connections anew)."""
        self.library = library
        self.url = url  # never shown: it may hold a password
        self.on_lost = on_lost
        self.on_back = on_back
        self.reason: str | None = None  # while an outage lasts: what the last connection tried said
        self.since = 0.0  # time.monotonic() when the outage began
        self.tried = 0.0  # time.monotonic() when the last connection tried ended
        self.said: str | None = None  # and what it said (None: the server answered)
        self.lock = threading.Lock()  # one outage's state changes at a time
        self.trying = threading.Lock()  # one connection tried at a time

    @property
    def down(self) -> bool:
        return self.reason is not None

    def error(self) -> StorageUnavailableError:
        """The error a call gets while the outage lasts (a new one per call: an exception
        raised in several threads at once must not share its traceback)."""
        return StorageUnavailableError(
            f"library '{self.library}': cannot reach PostgreSQL at {masked_url(self.url)}: {self.reason}",
            hint="Nothing was changed. Check that the database server runs; memloci connects again by itself once it "
                 "answers (no restart needed), and the same call then succeeds.")

    def probe(self, since: float) -> str | None:
        """Whether the server answers a connection tried after `since` (a time.monotonic()):
        None if it does, else what libpq said (password masked). One connection is tried at a
        time, and the callers waiting for it take its answer when it ended after their `since`
        instead of trying too: a burst of calls (or many callers waiting for a busy pool) makes
        one connection, and waits for one at most."""
        if not self.trying.acquire(timeout=CONNECT_TIMEOUT + 1.0):  # the try in flight hangs, as the server does
            return self.reason or f"no answer to a connection within {CONNECT_TIMEOUT + 1:g} s"
        try:
            if self.tried < since:
                self.said = self._try_connect()
                self.tried = time.monotonic()
            return self.said
        finally:
            self.trying.release()

    def _try_connect(self) -> str | None:
        """Connect once (within CONNECT_TIMEOUT): None when the server answers (even if it
        refuses the login, or takes no more connections: neither is an outage), else what
        libpq said, password masked."""
        import psycopg

        try:
            with psycopg.connect(self.url, autocommit=True, application_name="memloci-probe",
                                 **connect_options(self.url)) as conn:
                conn.execute("SELECT 1")
        except psycopg.Error as exc:
            if _FULL.search(str(exc)):
                return None
            mapped = engine_error(self.library, self.url, exc)
            if mapped is exc or isinstance(mapped, StorageUnavailableError):
                return " ".join(scrubbed(self.url, exc).split())  # libpq's text runs over several lines
        return None

    def lost(self, reason: str) -> StorageUnavailableError:
        """A call found the server unreachable (`reason`, from probe): the outage begins, unless
        it is under way already; returns the error the call fails with."""
        begins = False
        with self.lock:
            self.reason = reason
            if not self.since:
                self.since, begins = time.monotonic(), True
        if begins:
            log.warning("library '%s': cannot reach PostgreSQL at %s (%s); every call of the library fails until it "
                        "answers again", self.library, masked_url(self.url), reason)
            self.on_lost()
        return self.error()

    def check(self, arrived: float | None = None) -> None:
        """Before a call (that arrived at `arrived`, a time.monotonic(); by default now):
        nothing while the server answers. During an outage, the outage's error, unless a
        connection tried since the call arrived (probe) finds the server back; so the first
        call after the server is back is served."""
        if self.reason is None:
            return
        said = self.probe(time.monotonic() if arrived is None else arrived)
        with self.lock:
            if self.reason is None:  # another call found it back meanwhile
                return
            if said is not None:
                self.reason = said
                raise self.error()
            self.on_back()
            lasted = time.monotonic() - self.since
            self.reason, self.since = None, 0.0
        log.warning("library '%s': PostgreSQL at %s answers again after %.1f s; calls are served again",
                    self.library, masked_url(self.url), lasted)

    def opened(self) -> None:
        """The library was opened (its first connection made): an outage found while it could
        not be opened is over."""
        if self.reason is None:
            return
        with self.lock:
            was, self.reason, self.since = self.reason, None, 0.0
        if was is not None:
            log.warning("library '%s': PostgreSQL at %s answers again; calls are served again",
                        self.library, masked_url(self.url))

