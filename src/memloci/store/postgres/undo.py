"""Undo in the postgres engine: the rules of rules/undo.py (what a destructive change keeps in
its journal entry, when an undo is refused, how the kept rows come back) over this engine's
rows (undo_rows.py), exactly as in a SQLite library.

A destructive write keeps what it is about to change through its transaction
(transaction.WriteTx.keep, keep_meta; the graph writes through PostgresGraphTx.before_change),
and Database.write seals the record into the journal entry just before the commit. Both the
change and its undo run under the library's advisory write lock (database.py), so the
fingerprints an undo compares cannot move between its check and its writes, whichever server
on whichever host writes next.
"""

from __future__ import annotations

from typing import Any

from memloci.core.model import now_iso
from memloci.rules import undo
from memloci.store.postgres.database import Database
from memloci.store.postgres.transaction import WriteTx


class PostgresUndo:
    """undo_change: a journal entry reverted in one transaction."""

    def __init__(self, db: Database):
        self.db = db

    def undo_change(self, change_id: int, *, origin: str = "undo") -> dict[str, Any]:
        """Revert journal entry `change_id` in one transaction (itself journaled, and undoable);
        CONFLICT, with nothing changed, if a later change stands in the way."""
        def body(tx: WriteTx) -> dict[str, Any]:
            action, names, detail = undo.revert(tx.rows(), tx.kept, change_id)
            tx.journal(origin, "undo", names, detail, now_iso())
            return {"undid": change_id, "action": action, "entities": names}

        return self.db.transact(body, "undo")
