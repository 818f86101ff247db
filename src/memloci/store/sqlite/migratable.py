"""store.Migratable of a SQLite library: what `memloci migrate` sets that no tool call can
(service/migrate.py), each one transaction."""

from __future__ import annotations

from collections.abc import Sequence

from memloci.core.model import JournalEntry
from memloci.store.migratable import journal_rows
from memloci.store.sqlite.database import Database


class SQLiteMigration:
    def __init__(self, db: Database):
        self.db = db

    def restore_memory_state(self, items: Sequence[tuple[int, str, str, int, str | None]]) -> None:
        with self.db.write() as tx:
            tx.conn.executemany("""UPDATE memories SET created_at = ?, updated_at = ?, access_count = ?,
                                   last_accessed_at = ? WHERE id = ?""",
                                [(c, u, n, a, i) for i, c, u, n, a in items])

    def replace_journal(self, entries: Sequence[JournalEntry]) -> None:
        with self.db.write() as tx:
            tx.conn.execute("DELETE FROM journal")
            tx.conn.executemany("INSERT INTO journal (id, at, tool, action, entities, detail) VALUES (?, ?, ?, ?, ?, ?)",
                                journal_rows(entries))
