"""store.Migratable of a Markdown library: what `memloci migrate` sets that no tool call can
(service/migrate.py). The journal is journal.md, the dates live in the files memloci created,
free memories in day files."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from memloci.core.model import JournalEntry
from memloci.markdown import patch
from memloci.markdown.patch import dated_text
from memloci.store.markdown.files import JOURNAL, MEMORIES_DIR, journal_text
from memloci.store.markdown.undo import MarkdownUndo
from memloci.store.markdown.writeback import MarkdownFiles
from memloci.store.migratable import journal_rows
from memloci.store.sqlite.database import Database
from memloci.store.sqlite.tx import WriteTx
from memloci.store.sqlite.undo import restore_dates_in


class MarkdownMigration:
    """(each call under the library's lock, its index open: MarkdownStore's)"""

    def __init__(self, db: Database, files: MarkdownFiles, undo: MarkdownUndo):
        self.db = db
        self.files = files
        self.undo = undo

    def replace_journal(self, entries: Sequence[JournalEntry]) -> None:
        """The journal of a Markdown library is journal.md: the file is written whole, then the
        index reads it back (its ids follow the file's order, and an entry lists at most five
        names there, as every journal.md entry does)."""
        text = journal_text([row[1:] for row in journal_rows(entries)], new_file=True)
        self.undo.replace_files({JOURNAL: text.encode("utf-8")}, [])
        self.undo.reload_journal()

    def restore_dates(self, entities: Mapping[str, tuple[str, str, Sequence[str], Sequence[str]]],
                      relations: Mapping[tuple[str, str, str], str], *, origin: str) -> None:
        """As on SQLite, and in the same transaction the files this library created for those
        entities are rendered again from the index, so their `created`/`modified` and observation
        dates say what the index says (a file a person wrote keeps its bytes: its dates are its own)."""
        with self.db.write() as tx:
            restore_dates_in(tx, entities, relations, origin)
            ids = [row[0] for key in entities
                   for row in tx.conn.execute("SELECT id FROM entities WHERE name_key = ?", (key,)).fetchall()]
            self._render_created(tx, ids)

    def _render_created(self, tx: WriteTx, entity_ids: Sequence[int] | None) -> None:
        """Set the date marks of the files this library created for these entities (None: all)
        to the index's dates, read by this transaction's flush: `created:` and `modified:` where
        the front matter has them, and the `<!-- date -->` of each observation line that has one.
        Nothing else in a file changes (its text may be a person's, brought in by an import)."""
        conn = tx.conn
        query = """SELECT e.id, e.name_key, e.created_at, e.updated_at, f.path FROM entities e
                   JOIN md_files f ON f.entity_id = e.id JOIN md_created c ON c.path = f.path"""
        rows = conn.execute(query).fetchall() if entity_ids is None else [
            row for i in dict.fromkeys(entity_ids) for row in conn.execute(query + " WHERE e.id = ?", (i,)).fetchall()]
        texts, stamps = dict(tx.texts), dict(tx.stamps)
        for entity_id, key, created, updated, path in rows:
            source = self.files.check_fresh(tx, path)
            if source is None:
                continue
            dates = dict(conn.execute("SELECT content, created_at FROM memories WHERE entity_id = ? ORDER BY id",
                                      (entity_id,)).fetchall())
            text = patch.decode(source)[0]
            dated = dated_text(text, created, updated, dates)
            if dated != text:
                texts[key], stamps[key] = dated, updated
                conn.execute("INSERT OR IGNORE INTO md_dirty VALUES (?)", (entity_id,))
        tx.texts, tx.stamps = texts, stamps

    def finish_copy(self) -> None:
        """Free memories were written into today's day file before restore_memory_state gave them
        their dates: render every day file again from the index (emptied ones go). Entity files
        took their dates with restore_dates."""
        with self.db.write() as tx:
            # every day that holds free memories now, and every day file there is (emptied ones go)
            tx.conn.execute("""INSERT OR IGNORE INTO md_dirty_days SELECT DISTINCT substr(created_at, 1, 10)
                               FROM memories WHERE entity_id IS NULL""")
            tx.conn.execute("INSERT OR IGNORE INTO md_dirty_days SELECT substr(path, ?, 10) FROM md_files "
                            "WHERE path GLOB ? AND entity_id IS NULL",
                            (len(MEMORIES_DIR) + 2, f"{MEMORIES_DIR}/[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9].md"))
