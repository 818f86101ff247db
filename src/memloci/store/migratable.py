"""store.Migratable for each engine: what `memloci migrate` (migrate.py) sets that no tool
call can, so a copied library holds the same dates, use counts and journal as the original.

Mixed into SQLiteStore, MarkdownStore and PostgresStore; each method is one transaction of
the engine it is mixed into (its `_write`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from memloci.core.model import JournalEntry


def _rows(entries: Sequence[JournalEntry]) -> list[tuple[int, str, str, str, str, str | None]]:
    """(id, at, tool, action, entities JSON, detail JSON) of each entry."""
    return [(e.id, e.at, e.tool, e.action, json.dumps(list(e.entities), ensure_ascii=False),
             json.dumps(e.detail, ensure_ascii=False) if e.detail is not None else None) for e in entries]


def _dated(text: str, created: str, updated: str, dates: dict[str, str]) -> str:
    """`text` with its date marks set: `created:`/`modified:` where its front matter has them
    (no key added), and the `<!-- date -->` mark of each observation line that has one (the
    observation's date from `dates`, by its text). Every other byte stays."""
    from memloci.markdown import frontmatter as fm
    from memloci.markdown.document import split_date
    from memloci.markdown.outline import list_items, observations_region, outline

    doc = outline(text)
    lines = list(doc.lines)
    region = observations_region(doc)
    for _, stop, item in list_items(doc, region[0] + 1, region[1]) if region else []:
        content, date = split_date(item)
        want = dates.get(content)
        if date and want and want != date:
            lines[stop - 1] = lines[stop - 1].replace(f"<!-- {date} -->", f"<!-- {want} -->")
    text = "".join(lines)
    parts = fm.split(text)
    for k, value in (("created", created), ("modified", updated)):
        if parts and fm.has_key(parts[1], k):
            text = fm.with_front_matter(text, lambda y, k=k, value=value: fm.set_scalar(y, k, value, timestamp=True))
    return text


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
        from memloci.store.markdown.engine import journal_text
        from memloci.store.markdown.files import JOURNAL

        text = journal_text([row[1:] for row in _rows(entries)], new_file=True)
        self.replace_files({JOURNAL: text.encode("utf-8")}, [])  # type: ignore[attr-defined]
        self.reload_journal()  # type: ignore[attr-defined]

    def restore_dates(self, entities: Mapping[str, tuple[str, str, Sequence[str], Sequence[str]]],
                      relations: Mapping[tuple[str, str, str], str], *, origin: str) -> None:
        """As on SQLite, and in the same transaction the files this library created for those
        entities are rendered again from the index, so their `created`/`modified` and observation
        dates say what the index says (a file a person wrote keeps its bytes: its dates are its own)."""
        store: Any = self
        with store._write() as conn:
            store._restore_dates_in(conn, entities, relations, origin)
            ids = [row[0] for key in entities
                   for row in conn.execute("SELECT id FROM entities WHERE name_key = ?", (key,)).fetchall()]
            self._render_created(conn, ids)

    def _render_created(self, conn: Any, entity_ids: Sequence[int] | None) -> None:
        """Set the date marks of the files this library created for these entities (None: all)
        to the index's dates, read by this transaction's flush: `created:` and `modified:` where
        the front matter has them, and the `<!-- date -->` of each observation line that has one.
        Nothing else in a file changes (its text may be a person's, brought in by an import)."""
        from memloci.markdown import patch

        store: Any = self
        query = """SELECT e.id, e.name_key, e.created_at, e.updated_at, f.path FROM entities e
                   JOIN md_files f ON f.entity_id = e.id JOIN md_created c ON c.path = f.path"""
        rows = conn.execute(query).fetchall() if entity_ids is None else [
            row for i in dict.fromkeys(entity_ids) for row in conn.execute(query + " WHERE e.id = ?", (i,)).fetchall()]
        texts, stamps = dict(getattr(store._verbatim, "texts", {})), dict(getattr(store._verbatim, "stamps", {}))
        for entity_id, key, created, updated, path in rows:
            source = store._check_fresh(conn, path)
            if source is None:
                continue
            dates = dict(conn.execute("SELECT content, created_at FROM memories WHERE entity_id = ? ORDER BY id",
                                      (entity_id,)).fetchall())
            text = patch.decode(source)[0]
            dated = _dated(text, created, updated, dates)
            if dated != text:
                texts[key], stamps[key] = dated, updated
                conn.execute("INSERT OR IGNORE INTO md_dirty VALUES (?)", (entity_id,))
        store._verbatim.texts, store._verbatim.stamps = texts, stamps

    def finish_copy(self) -> None:
        """Free memories were written into today's day file before restore_memory_state gave them
        their dates: render every day file again from the index (emptied ones go). Entity files
        took their dates with restore_dates."""
        from memloci.store.markdown.files import MEMORIES_DIR

        store: Any = self
        with store._write() as conn:
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
