"""One write transaction of the postgres engine, as an object every write inside it is given:
its connection (under the library's advisory lock, database.Database.write), when it began,
and its undo record (rules/undo.py).

A destructive write keeps what it is about to change (`keep`, `keep_meta`) before it changes
anything; `journal` writes its journal entry, and `seal`, just before the commit, writes the
kept rows with the after-fingerprints into that entry. Both the change and its undo run under
the library's lock, so the fingerprints an undo compares cannot move between its check and
its writes, whichever server on whichever host writes next. A transaction run once more (after
a deadlock) is a new WriteTx with a new record: nothing kept by the first attempt survives.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from memloci.core.model import now_iso
from memloci.rules import undo
from memloci.store.postgres.undo_rows import PostgresUndoRows


@dataclass
class WriteTx:
    """A write transaction under way: `conn` inside it, `at` when it began (after the lock),
    `kept` its undo record (undo.new_record)."""

    conn: Any
    at: str = field(default_factory=now_iso)
    kept: dict[str, Any] = field(default_factory=undo.new_record)

    def rows(self) -> PostgresUndoRows:
        """The rows as undo reads and writes them, in this transaction."""
        return PostgresUndoRows(self.conn)

    def keep(self, entity_ids: Iterable[int] = (), memory_ids: Iterable[int] = ()) -> None:
        """Keep the state of these entities and memories before this transaction changes them."""
        undo.keep_before(self.rows(), self.kept, entity_ids, memory_ids)

    def keep_meta(self, key: str) -> None:
        """Keep a library-wide value (the context; the manual) before this transaction changes it."""
        undo.keep_meta(self.rows(), self.kept, key)

    def journal(self, tool: str, action: str, entities: Iterable[str], detail: dict | None, at: str) -> None:
        """Write the change's journal entry; a change that kept undo records gets them at the commit (seal)."""
        (row_id,) = self.conn.execute(
            "INSERT INTO journal (at, tool, action, entities, detail) VALUES (%s, %s, %s, %s, %s) RETURNING id",
            (at, tool, action, json.dumps(list(entities), ensure_ascii=False),
             json.dumps(detail, ensure_ascii=False) if detail is not None else None)).fetchone()
        undo.note_row(self.kept, int(row_id))

    def seal(self) -> dict[str, Any] | None:
        """Write the kept rows and the after-fingerprints into this transaction's journal entry
        (just before the commit); the entry's detail as written, None if nothing was kept."""
        record = undo.seal(self.rows(), self.kept)
        if record is None:
            return None
        (detail,) = self.conn.execute("SELECT detail FROM journal WHERE id = %s", (self.kept["row"],)).fetchone()
        detail = dict(detail or {})
        detail["undo"] = record
        self.conn.execute("UPDATE journal SET detail = %s WHERE id = %s",
                          (json.dumps(detail, ensure_ascii=False), self.kept["row"]))
        self.kept["row"] = None
        return detail
