"""Lifecycle previews kept in a PostgreSQL library, as the SQLite engine keeps them."""

from __future__ import annotations

from typing import Any

from memloci.core.model import now_iso
from memloci.store.postgres.database import Database
from memloci.store.postgres.json_columns import as_jsonb

_COLUMNS = "id, kind, created_at, plan, executed_at, change_id"


def _row(row: tuple) -> dict[str, Any]:
    id_, kind, created_at, plan, executed_at, change_id = row
    return {"id": int(id_), "kind": kind, "created_at": created_at, "plan": plan, "executed_at": executed_at,
            "change_id": int(change_id) if change_id is not None else None}


class PostgresPreviews:
    def __init__(self, db: Database):
        self.db = db

    def save_preview(self, kind: str, plan: dict[str, Any]) -> int:
        with self.db.write("memories") as tx:
            (preview_id,) = tx.conn.execute("INSERT INTO previews (kind, created_at, plan) VALUES (%s, %s, %s) RETURNING id",
                                            (kind, now_iso(), as_jsonb(plan))).fetchone()
            return int(preview_id)

    def load_preview(self, preview_id: int) -> dict[str, Any] | None:
        with self.db.read() as conn:
            row = conn.execute(f"SELECT {_COLUMNS} FROM previews WHERE id = %s", (preview_id,)).fetchone()
            return _row(row) if row else None

    def list_previews(self, *, pending: bool, limit: int) -> list[dict[str, Any]]:
        with self.db.read() as conn:
            return [_row(r) for r in conn.execute(
                f"SELECT {_COLUMNS} FROM previews {'WHERE executed_at IS NULL' if pending else ''} "
                "ORDER BY id DESC LIMIT %s", (limit,))]

    def mark_executed(self, preview_id: int, change_id: int) -> bool:
        with self.db.write("memories") as tx:
            cur = tx.conn.execute("UPDATE previews SET executed_at = %s, change_id = %s "
                                  "WHERE id = %s AND executed_at IS NULL", (now_iso(), change_id, preview_id))
            return cur.rowcount == 1
