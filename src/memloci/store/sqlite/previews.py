"""Lifecycle previews kept in a SQLite library (a Markdown library's index keeps them too: a
rebuilt index forgets them, and a forgotten preview is simply made again)."""

from __future__ import annotations

import json
from typing import Any

from memloci.core.model import now_iso
from memloci.store.sqlite.database import Database


def _row(row: tuple) -> dict[str, Any]:
    id_, kind, created_at, plan, executed_at, change_id = row
    return {"id": id_, "kind": kind, "created_at": created_at, "plan": json.loads(plan), "executed_at": executed_at,
            "change_id": change_id}


class SQLitePreviews:
    def __init__(self, db: Database):
        self.db = db

    def save_preview(self, kind: str, plan: dict[str, Any]) -> int:
        with self.db.write() as tx:
            cur = tx.conn.execute("INSERT INTO previews (kind, created_at, plan) VALUES (?, ?, ?)",
                                  (kind, now_iso(), json.dumps(plan, ensure_ascii=False)))
            assert cur.lastrowid is not None  # an INSERT's row
            return cur.lastrowid

    def load_preview(self, preview_id: int) -> dict[str, Any] | None:
        with self.db.read() as conn:
            row = conn.execute("SELECT id, kind, created_at, plan, executed_at, change_id FROM previews WHERE id = ?",
                               (preview_id,)).fetchone()
            return _row(row) if row else None

    def list_previews(self, *, pending: bool, limit: int) -> list[dict[str, Any]]:
        with self.db.read() as conn:
            return [_row(r) for r in conn.execute(
                "SELECT id, kind, created_at, plan, executed_at, change_id FROM previews "
                f"{'WHERE executed_at IS NULL' if pending else ''} ORDER BY id DESC LIMIT ?", (limit,))]

    def mark_executed(self, preview_id: int, change_id: int) -> bool:
        """Mark a preview executed by journal entry `change_id`; False if it already was."""
        with self.db.write() as tx:
            cur = tx.conn.execute("UPDATE previews SET executed_at = ?, change_id = ? WHERE id = ? AND executed_at IS NULL",
                                  (now_iso(), change_id, preview_id))
            return cur.rowcount == 1
