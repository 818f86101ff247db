"""store.Migratable for each engine: what `memloci migrate` (migrate.py) sets that no tool
call can, so a copied library holds the same dates, use counts and journal as the original.

Mixed into SQLiteStore, MarkdownStore and PostgresStore; each method is one transaction of
the engine it is mixed into (its `_write`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..model import JournalEntry


def _rows(entries: Sequence[JournalEntry]) -> list[tuple[int, str, str, str, str, str | None]]:
    """(id, at, tool, action, entities JSON, detail JSON) of each entry."""
    return [(e.id, e.at, e.tool, e.action, json.dumps(list(e.entities), ensure_ascii=False),
             json.dumps(e.detail, ensure_ascii=False) if e.detail is not None else None) for e in entries]


class SQLiteMigratable:
    """(mixed into SQLiteStore; uses its _write)"""

    def finish_copy(self) -> None:
        """Nothing is derived outside the database."""

    def restore_memory_state(self, items: Sequence[tuple[int, str, str, int, str | None]]) -> None:
        with self._write() as conn:  # type: ignore[attr-defined]
            conn.executemany("""UPDATE memories SET created_at = ?, updated_at = ?, access_count = ?,
                                last_accessed_at = ? WHERE id = ?""",
                             [(c, u, n, a, i) for i, c, u, n, a in items])

    def replace_journal(self, entries: Sequence[JournalEntry]) -> None:
        with self._write() as conn:  # type: ignore[attr-defined]
            conn.execute("DELETE FROM journal")
            conn.executemany("INSERT INTO journal (id, at, tool, action, entities, detail) VALUES (?, ?, ?, ?, ?, ?)",
                             _rows(entries))


class MarkdownMigratable:
    """(mixed into MarkdownStore before SQLiteStore) The journal of a Markdown library is
    journal.md: the file is written whole, then the index reads it back (its ids follow the
    file's order, and an entry lists at most five names there, as every journal.md entry does)."""

    def replace_journal(self, entries: Sequence[JournalEntry]) -> None:
        from .markdown import journal_text
        from .markdown_files import JOURNAL

        text = journal_text([row[1:] for row in _rows(entries)], new_file=True)
        self.replace_files({JOURNAL: text.encode("utf-8")}, [])  # type: ignore[attr-defined]
        self.reload_journal()  # type: ignore[attr-defined]

    def finish_copy(self) -> None:
        """The dates were restored in the index after the files were written (an entity's file
        on its creation, a free memory into today's day file): render every file this library
        created again from the index, as a new file is rendered, so the files hold the copied
        dates too and a rebuilt index reads them back. A person's file is never rendered."""
        from ..markdown.document import render_document
        from .markdown_files import MEMORIES_DIR

        store: Any = self
        with store._write() as conn:
            stamps, texts = {}, {}
            for entity_id, key, updated in conn.execute(
                    """SELECT e.id, e.name_key, e.updated_at FROM entities e JOIN md_files f ON f.entity_id = e.id
                       JOIN md_created c ON c.path = f.path""").fetchall():
                doc = store._document(conn, entity_id)
                doc.dates = dict(conn.execute("SELECT content, created_at FROM memories WHERE entity_id = ? "
                                              "ORDER BY id", (entity_id,)).fetchall())
                texts[key], stamps[key] = render_document(doc), updated
                conn.execute("INSERT OR IGNORE INTO md_dirty VALUES (?)", (entity_id,))
            store._verbatim.texts, store._verbatim.stamps = texts, stamps  # read by this transaction's flush
            # every day that holds free memories now, and every day file there is (emptied ones go)
            conn.execute("""INSERT OR IGNORE INTO md_dirty_days SELECT DISTINCT substr(created_at, 1, 10)
                            FROM memories WHERE entity_id IS NULL""")
            conn.execute("INSERT OR IGNORE INTO md_dirty_days SELECT substr(path, ?, 10) FROM md_files "
                         "WHERE path GLOB ? AND entity_id IS NULL",
                         (len(MEMORIES_DIR) + 2, f"{MEMORIES_DIR}/[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9].md"))


class PostgresMigratable:
    """(mixed into PostgresStore; uses its _write)"""

    def restore_memory_state(self, items: Sequence[tuple[int, str, str, int, str | None]]) -> None:
        if not items:
            return
        with self._write("memories") as conn:  # type: ignore[attr-defined]
            ids, created, updated, counts, accessed = (list(column) for column in zip(*items))
            conn.execute("""UPDATE memories m SET created_at = x.c, updated_at = x.u, access_count = x.n,
                                last_accessed_at = x.a
                            FROM unnest(%s::bigint[], %s::text[], %s::text[], %s::int[], %s::text[])
                                AS x(id, c, u, n, a)
                            WHERE m.id = x.id""", (ids, created, updated, counts, accessed))

    def replace_journal(self, entries: Sequence[JournalEntry]) -> None:
        rows: list[Any] = _rows(entries)
        with self._write("journal") as conn:  # type: ignore[attr-defined]
            conn.execute("DELETE FROM journal")
            with conn.cursor() as cur:
                cur.executemany("INSERT INTO journal (id, at, tool, action, entities, detail) "
                                "VALUES (%s, %s, %s, %s, %s::jsonb, %s::json)", rows)
            # the next entry written here follows the copied ones
            conn.execute("SELECT setval(pg_get_serial_sequence('journal', 'id'), "
                         "coalesce((SELECT max(id) FROM journal), 0) + 1, false)")

    def finish_copy(self) -> None:
        """Nothing is derived outside the database."""
