"""store.Migratable for the postgres engine: what `memloci migrate` (service/migrate.py) sets
that no tool call can, so a copied library holds the same dates, use counts and journal as the
original. Each method is one write transaction."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memloci.core.model import JournalEntry
from memloci.store.migratable import journal_rows
from memloci.store.postgres.database import Database


class PostgresMigratable:
    """Dates, use counts and the journal of a copied library."""

    def __init__(self, db: Database):
        self.db = db

    def restore_memory_state(self, items: Sequence[tuple[int, str, str, int, str | None]]) -> None:
        if not items:
            return
        with self.db.write("memories") as tx:
            ids, created, updated, counts, accessed = (list(column) for column in zip(*items))
            tx.conn.execute("""UPDATE memories m SET created_at = x.c, updated_at = x.u, access_count = x.n,
                                   last_accessed_at = x.a
                               FROM unnest(%s::bigint[], %s::text[], %s::text[], %s::int[], %s::text[])
                                   AS x(id, c, u, n, a)
                               WHERE m.id = x.id""", (ids, created, updated, counts, accessed))

    def replace_journal(self, entries: Sequence[JournalEntry]) -> None:
        rows: list[Any] = journal_rows(entries)
        with self.db.write("journal") as tx:
            conn = tx.conn
            conn.execute("DELETE FROM journal")
            with conn.cursor() as cur:
                cur.executemany("INSERT INTO journal (id, at, tool, action, entities, detail) "
                                "VALUES (%s, %s, %s, %s, %s::jsonb, %s::json)", rows)
            # the next entry written here follows the copied ones
            conn.execute("SELECT setval(pg_get_serial_sequence('journal', 'id'), "
                         "coalesce((SELECT max(id) FROM journal), 0) + 1, false)")

    def finish_copy(self) -> None:
        """Nothing is derived outside the database."""
