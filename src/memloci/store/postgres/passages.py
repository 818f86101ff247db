"""Passages of note bodies in the postgres engine, so a note's own words carry meaning (the
store's `Passages` capability; the splitting rule is rules/passages.py, as on SQLite).

Kept as the SQLite engine keeps them (store/sqlite/passages.py): a body changes by many paths
(documents written whole, edits, rename and merge rewriting links, undo, delete), so rather
than trusting each path to remember, triggers (search_schema.PASSAGES_MIGRATION) mark every
entity whose body changed in `passages_stale`, whoever wrote it; the embedding worker re-splits marked
bodies before it embeds, keeping the vector of every passage whose text did not change.
Writes never wait for any of this.

The vectors live in pgvector `vector` columns beside their text, so a copy of the database,
`memloci migrate` and every other server see them. They are searched in each process by
search/vectors.py PassageIndex (a library holds far fewer passages than memories), which
reloads when `passages_version` moves: saving vectors moves it by their number (a process
that saved them appends them without reloading), deleting embedded passages moves it once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memloci.core.model import PassageVectors, PendingPassage, SavedVectors, name_key
from memloci.rules.passages import SHORT_CHARS, plan_passages, split_passages, still_says_something
from memloci.store.postgres.database import Database
from memloci.store.postgres.transaction import WriteTx
from memloci.store.postgres.vectors import claim_model, library_meta, vector_text


def passages_version(conn: Any) -> int:
    return int(library_meta(conn, "passages_version") or 0)


def bump_passages(conn: Any, by: int = 1) -> int:
    """Move the passages' counter by `by`; returns the new value."""
    row = conn.execute("""UPDATE library_meta SET value = (value::bigint + %s)::text WHERE key = 'passages_version'
                          RETURNING value""", (by,)).fetchone()
    return int(row[0])


def pending_passage_count(conn: Any) -> int:
    return int(conn.execute("SELECT (SELECT count(*) FROM passages WHERE embedding IS NULL) "
                            "+ (SELECT count(*) FROM passages_stale)").fetchone()[0])


def reset_passage_vectors(conn: Any) -> int:
    """Forget every passage vector (inside reset_vectors' transaction); returns how many wait now."""
    if conn.execute("UPDATE passages SET embedding = NULL WHERE embedding IS NOT NULL").rowcount:
        bump_passages(conn)
    return pending_passage_count(conn)


class PostgresPassages:
    """The passages of note bodies: split again, embedded, loaded."""

    def __init__(self, db: Database):
        self.db = db

    def refresh_passages(self, limit: int = 64) -> int:
        """Split again the bodies changed since their passages were made (up to `limit` entities,
        one transaction); returns how many entities were done."""
        with self.db.read() as conn:  # the worker asks often: the library's write lock only when needed
            if conn.execute("SELECT 1 FROM passages_stale LIMIT 1").fetchone() is None:
                return 0

        def body(tx: WriteTx) -> int:
            conn = tx.conn
            stale = conn.execute("""SELECT s.entity_id, e.body FROM passages_stale s JOIN entities e ON e.id = s.entity_id
                                    ORDER BY s.entity_id LIMIT %s""", (limit,)).fetchall()
            ids = [int(r[0]) for r in stale]
            if not ids:
                return 0
            existing: dict[int, list[tuple[int, str]]] = {}
            for entity_id, passage_id, digest in conn.execute(
                    "SELECT entity_id, id, text_hash FROM passages WHERE entity_id = ANY(%s) ORDER BY id", (ids,)):
                existing.setdefault(int(entity_id), []).append((int(passage_id), digest))
            owners: list[int] = []
            texts: list[str] = []
            hashes: list[str] = []
            dropped: list[int] = []
            for entity_id, text in stale:
                added, gone = plan_passages(existing.get(int(entity_id), []), split_passages(text))
                for passage, digest in added:
                    owners.append(int(entity_id))
                    texts.append(passage)
                    hashes.append(digest)
                dropped += gone
            if dropped:
                conn.execute("DELETE FROM passages WHERE id = ANY(%s)", (dropped,))
            if texts:  # in the order split, so ids follow the body's order
                conn.execute("""INSERT INTO passages (entity_id, text, text_hash)
                                SELECT x.e, x.t, x.h FROM unnest(%s::bigint[], %s::text[], %s::text[])
                                    WITH ORDINALITY AS x(e, t, h, n) ORDER BY x.n""", (owners, texts, hashes))
            conn.execute("DELETE FROM passages_stale WHERE entity_id = ANY(%s)", (ids,))
            return len(ids)

        return self.db.transact(body, "passages")

    def pending_passages(self, limit: int) -> list[PendingPassage]:
        """Passages waiting for a vector, in id order."""
        with self.db.read() as conn:
            return [PendingPassage(int(i), t, h, int(e)) for i, t, h, e in conn.execute(
                "SELECT id, text, text_hash, entity_id FROM passages WHERE embedding IS NULL ORDER BY id LIMIT %s",
                (limit,))]

    def save_passage_vectors(self, items: Sequence[tuple[int, str, Any]], model: str) -> SavedVectors:
        """Store vectors of (passage id, text_hash it was computed from, vector); returns the ids
        saved (a passage re-made meanwhile is skipped) and the new passages version."""
        def body(tx: WriteTx) -> SavedVectors:
            conn = tx.conn
            if not items:
                return SavedVectors((), passages_version(conn))
            claim_model(conn, self.db.name, model, len(items[0][2]))
            ids = [int(i) for i, _, _ in items]
            kept = {int(r[0]) for r in conn.execute(
                """UPDATE passages p SET embedding = x.v::vector
                   FROM unnest(%s::bigint[], %s::text[], %s::text[]) AS x(id, h, v)
                   WHERE p.id = x.id AND p.text_hash = x.h RETURNING p.id""",
                (ids, [h for _, h, _ in items], [vector_text(v) for _, _, v in items]))}
            saved = tuple(i for i in ids if i in kept)  # in the order given (the worker's id order)
            return SavedVectors(saved, bump_passages(conn, len(saved)) if saved else passages_version(conn))

        return self.db.transact(body, "passages")

    def load_passage_vectors(self) -> PassageVectors:
        """Every embedded passage (ids, their entity ids, matrix, passages version, model), in id order."""
        import numpy as np

        with self.db.read() as conn:
            model = library_meta(conn, "embedding_model")
            dimension = int(library_meta(conn, "embedding_dimension") or 0) or 1
            # pgvector's binary form: a 4-byte header, then big-endian float4s
            rows = conn.execute("""SELECT id, entity_id, vector_send(embedding),
                                          CASE WHEN length(text) < %s THEN text END
                                   FROM passages WHERE embedding IS NOT NULL ORDER BY id""", (SHORT_CHARS,)).fetchall()
            version = passages_version(conn)
        rows = [r for r in rows if still_says_something(r[3])]
        matrix = np.zeros((len(rows), dimension), dtype=np.float32)
        for k, row in enumerate(rows):
            matrix[k] = np.frombuffer(row[2], dtype=">f4", offset=4)
        return PassageVectors(np.array([r[0] for r in rows], dtype=np.int64),
                              np.array([r[1] for r in rows], dtype=np.int64), matrix, version, model)

    def passages_version(self) -> int:
        with self.db.read() as conn:
            return passages_version(conn)

    def passage_pending_count(self) -> int:
        """Passages waiting for a vector, plus bodies waiting to be split (each makes at least one)."""
        with self.db.read() as conn:
            return pending_passage_count(conn)

    def passages_of(self, name: str) -> list[str]:
        """The passages of an entity as they stand (a body changed a moment ago may not be split yet)."""
        with self.db.read() as conn:
            return [r[0] for r in conn.execute(
                "SELECT p.text FROM passages p JOIN entities e ON e.id = p.entity_id WHERE e.name_key = %s ORDER BY p.id",
                (name_key(name),))]
