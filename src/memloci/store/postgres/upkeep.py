"""What the postgres engine says of a library and of itself (stats, health), and the hot
context, kept in `meta` as SQLite keeps it in library_meta."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from memloci.core.model import LibraryStats, now_iso
from memloci.store.postgres.database import Database
from memloci.store.postgres.schema import SCHEMA_VERSION
from memloci.store.postgres.transaction import WriteTx


class PostgresUpkeep:
    """Stats and engine health of one library."""

    def __init__(self, db: Database):
        self.db = db

    def stats(self, kind: str) -> LibraryStats:
        with self.db.read() as conn:
            entities, observations, memories, relations, journal, size = conn.execute(
                """SELECT (SELECT count(*) FROM entities),
                          (SELECT count(*) FROM memories WHERE entity_id IS NOT NULL),
                          (SELECT count(*) FROM memories WHERE entity_id IS NULL),
                          (SELECT count(*) FROM relations),
                          (SELECT count(*) FROM journal),
                          (SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c
                           WHERE c.relnamespace = %s::regnamespace AND c.relkind IN ('r', 'm'))""",
                (self.db.schema_name,)).fetchone()
        return LibraryStats(self.db.name, kind, self.db.path, entities, observations, memories, relations,
                            journal, int(size), SCHEMA_VERSION)

    def engine_health(self) -> dict[str, Any]:
        """What health says of the engine: PostgreSQL's and pgvector's versions, the pool's
        figures, the change notices heard."""
        with self.db.read() as conn:
            server = conn.execute("SHOW server_version").fetchone()[0]
            rows = conn.execute("SELECT extname, extversion FROM pg_extension WHERE extname IN ('vector', 'pg_trgm')")
            extensions = dict(rows.fetchall())
        stats = self.db.pool_stats()
        return {
            "engine": "postgres",
            "server_version": server,
            "pgvector": extensions.get("vector"),
            "pg_trgm": extensions.get("pg_trgm"),
            "schema": self.db.schema_id,
            "pool": {"max": self.db.pool_size, "size": stats.get("pool_size", 0),
                     "idle": stats.get("pool_available", 0), "waiting": stats.get("requests_waiting", 0)},
            "changes_heard": self.db.changes(),
        }


class PostgresContext:
    """The hot context of one library (kept in `meta`)."""

    def __init__(self, db: Database):
        self.db = db

    def read_context(self) -> dict[str, Any]:
        with self.db.read() as conn:
            row = conn.execute("SELECT value FROM meta WHERE key = 'context'").fetchone()
        return json.loads(row[0]) if row else {}

    def update_context(self, change: Callable[[dict[str, Any]], dict[str, Any]], *, origin: str) -> dict[str, Any]:
        """Read, merge and write the context in one transaction (under the library's lock, so two
        servers' updates merge instead of one overwriting the other)."""
        def body(tx: WriteTx) -> dict[str, Any]:
            conn = tx.conn
            tx.keep_meta("context")  # undo puts it back
            row = conn.execute("SELECT value FROM meta WHERE key = 'context'").fetchone()
            before = json.loads(row[0]) if row else {}
            ctx = change(before)
            conn.execute("""INSERT INTO meta VALUES ('context', %s)
                            ON CONFLICT (key) DO UPDATE SET value = excluded.value""",
                         (json.dumps(ctx, ensure_ascii=False),))
            tx.journal(origin, origin, [], {k: {"before": before.get(k), "after": v}
                                            for k, v in ctx.items() if before.get(k) != v and k != "updated_at"},
                       now_iso())
            return ctx

        return self.db.transact(body, "context")
