"""Passages of note bodies in the SQLite engine, so a note's own words carry meaning.

An entity's Markdown body is cut into passages by the rule every engine shares
(rules/passages.py: paragraphs, merged or split to at most PASSAGE_WORDS words, each
carrying the heading it sits under) and every passage gets a
vector from the same background worker that embeds memories. Observations are memories and
have vectors already; the body had none.

Keeping passages in step with bodies: a body changes by many paths (tool edits, documents
written whole, a person's editor picked up by the scan, rename and merge rewriting links,
undo, delete). Rather than trusting each path to remember, schema triggers (migration 8)
mark every entity whose body changed in `passages_stale`; the worker re-splits marked
bodies before it embeds. A passage whose text is unchanged keeps its vector, so editing one
paragraph of a long note re-embeds one passage. Writes never wait for any of this.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import TYPE_CHECKING

from memloci.core.lazy import on_first_use
from memloci.core.model import PassageVectors, PendingPassage, SavedVectors, name_key

# The splitting rule is the same on every engine (rules/passages.py).
from memloci.rules.passages import (
    SHORT_CHARS,
    plan_passages,
    split_passages,
    still_says_something,
)
from memloci.store.sqlite.database import Database
from memloci.store.sqlite.vectors import claim_model, library_meta, pack, unpack_many

if TYPE_CHECKING:
    import numpy as np
else:  # imported on first use: the server's start does not need it (core/lazy.py)
    np = on_first_use("numpy", globals(), "np")


class SQLitePassages:
    """The passages of one library's Database."""

    def __init__(self, db: Database):
        self.db = db

    def refresh_passages(self, limit: int = 64) -> int:
        """Split again the bodies changed since their passages were made (up to `limit` entities,
        one transaction); returns how many entities were done."""
        with self.db.read() as conn:  # the worker asks often: a write (and its sync to disk) only when needed
            if conn.execute("SELECT 1 FROM passages_stale LIMIT 1").fetchone() is None:
                return 0
        with self.db.write() as tx:
            conn = tx.conn
            stale = [r[0] for r in conn.execute("SELECT entity_id FROM passages_stale ORDER BY entity_id LIMIT ?",
                                                (limit,))]
            for entity_id in stale:
                row = conn.execute("SELECT body FROM entities WHERE id = ?", (entity_id,)).fetchone()
                remake_passages(conn, entity_id, split_passages(row[0]) if row else [])
            conn.executemany("DELETE FROM passages_stale WHERE entity_id = ?", [(i,) for i in stale])
            return len(stale)

    def pending_passages(self, limit: int) -> list[PendingPassage]:
        """Passages waiting for a vector, in id order."""
        with self.db.read() as conn:
            return [PendingPassage(*row) for row in conn.execute(
                "SELECT id, text, text_hash, entity_id FROM passages WHERE vector IS NULL ORDER BY id LIMIT ?", (limit,))]

    def save_passage_vectors(self, items: Sequence[tuple[int, str, np.ndarray]], model: str) -> SavedVectors:
        """Store vectors of (passage id, text_hash it was computed from, vector); returns the ids
        saved (a passage re-made meanwhile is skipped) and the new passages version."""
        saved = []
        with self.db.write() as tx:
            conn = tx.conn
            claim_model(conn, self.db.name, model, len(items[0][2]) if items else 0)
            for passage_id, text_hash, vector in items:
                cur = conn.execute("UPDATE passages SET vector = ? WHERE id = ? AND text_hash = ?",
                                   (pack(vector), passage_id, text_hash))
                if cur.rowcount:
                    saved.append(passage_id)
            return SavedVectors(tuple(saved), passages_version(conn))

    def load_passage_vectors(self) -> PassageVectors:
        """Every embedded passage (ids, their entity ids, matrix, passages version, model), in id order."""
        with self.db.read() as conn:
            model = library_meta(conn, "embedding_model")
            dimension = int(library_meta(conn, "embedding_dimension") or 0)
            rows = conn.execute("SELECT id, entity_id, vector, CASE WHEN length(text) < ? THEN text END FROM passages "
                                "WHERE vector IS NOT NULL ORDER BY id", (SHORT_CHARS,)).fetchall()
            version = passages_version(conn)
        rows = [r for r in rows if still_says_something(r[3])]
        ids = np.array([r[0] for r in rows], dtype=np.int64)
        owners = np.array([r[1] for r in rows], dtype=np.int64)
        return PassageVectors(ids, owners, unpack_many([r[2] for r in rows], dimension or 1), version, model)

    def passages_version(self) -> int:
        with self.db.read() as conn:
            return passages_version(conn)

    def passage_pending_count(self) -> int:
        """Passages waiting for a vector, plus bodies waiting to be split (each makes at least one)."""
        with self.db.read() as conn:
            return pending_passage_count(conn)

    def entity_names_by_id(self, ids: Sequence[int]) -> dict[int, str]:
        with self.db.read() as conn:
            found: dict[int, str] = {}
            ids = list(ids)
            for i in range(0, len(ids), 500):
                chunk = ids[i:i + 500]
                found.update(conn.execute(f"SELECT id, name FROM entities WHERE id IN ({','.join('?' * len(chunk))})",
                                          chunk).fetchall())
            return found

    def passages_of(self, name: str) -> list[str]:
        """The passages of an entity as they stand (a body changed a moment ago may not be split yet)."""
        with self.db.read() as conn:
            return [r[0] for r in conn.execute(
                "SELECT p.text FROM passages p JOIN entities e ON e.id = p.entity_id WHERE e.name_key = ? ORDER BY p.id",
                (name_key(name),))]


def remake_passages(conn: sqlite3.Connection, entity_id: int, texts: list[str]) -> None:
    """Make the entity's passages `texts`, keeping the rows (and vectors) of texts it already has."""
    added, dropped = plan_passages(conn.execute("SELECT id, text_hash FROM passages WHERE entity_id = ? ORDER BY id",
                                                (entity_id,)), texts)
    conn.executemany("INSERT INTO passages (entity_id, text, text_hash) VALUES (?, ?, ?)",
                     [(entity_id, text, digest) for text, digest in added])
    conn.executemany("DELETE FROM passages WHERE id = ?", [(i,) for i in dropped])


def passages_version(conn: sqlite3.Connection) -> int:
    return int(library_meta(conn, "passages_version") or 0)


def pending_passage_count(conn: sqlite3.Connection) -> int:
    return conn.execute("SELECT (SELECT count(*) FROM passages WHERE vector IS NULL) "
                        "+ (SELECT count(*) FROM passages_stale)").fetchone()[0]


def reset_passage_vectors(conn: sqlite3.Connection) -> int:
    """Forget every passage vector (inside reset_vectors' transaction); returns how many wait now."""
    conn.execute("UPDATE passages SET vector = NULL WHERE vector IS NOT NULL")
    return pending_passage_count(conn)
