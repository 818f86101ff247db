"""The bookkeeping of vectors in the postgres engine, inside a caller's transaction: the
library's embedding model and dimension (`library_meta`), the vector column's type and HNSW
index, and the counter (`vectors_version`) that tells a process holding vectors in memory to
reload. Memories (memories.py) and note passages (passages.py) share one model."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def library_meta(conn: Any, key: str) -> str | None:
    row = conn.execute("SELECT value FROM library_meta WHERE key = %s", (key,)).fetchone()
    return row[0] if row else None


def set_library_meta(conn: Any, key: str, value: str) -> None:
    conn.execute("INSERT INTO library_meta (key, value) VALUES (%s, %s) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                 (key, value))


def vectors_version(conn: Any) -> int:
    row = conn.execute("SELECT value FROM library_meta WHERE key = 'vectors_version'").fetchone()
    return int(row[0]) if row else 0


def bump_vectors(conn: Any, by: int = 1) -> int:
    """Move the vectors' counter (an in-process index elsewhere knows to reload)."""
    row = conn.execute("""INSERT INTO library_meta (key, value) VALUES ('vectors_version', %s)
                          ON CONFLICT (key) DO UPDATE SET value = (library_meta.value::bigint + %s)::text
                          RETURNING value""", (str(by), by)).fetchone()
    return int(row[0])


def drop_memory_vectors(conn: Any, ids: Sequence[int]) -> int:
    """Delete the vectors of these memories; how many there were (the caller moves the counter)."""
    return int(conn.execute("DELETE FROM memory_vectors WHERE memory_id = ANY(%s)", (list(ids),)).rowcount)


def drop_vectors_of(conn: Any, memories_where: str, params: Sequence[Any]) -> None:
    """Delete the vectors of the memories `memories_where` selects before those go, moving the
    counter when any went (as SQLite's trigger does on every vector delete)."""
    gone = conn.execute(f"DELETE FROM memory_vectors WHERE memory_id IN (SELECT id FROM memories WHERE {memories_where})",
                        params).rowcount
    if gone:
        bump_vectors(conn)


def vector_text(vector: Any) -> str:
    """A vector as pgvector's text form (no numpy adapter needed on the connection)."""
    return "[" + ",".join(repr(float(x)) for x in vector) + "]"


def claim_model(conn: Any, library: str, model: str, dimension: int) -> None:
    """Vectors about to be saved are of `model`: the library's first ones name its model and
    give the vector column its dimension; any other model's are refused (reindex instead)."""
    current = library_meta(conn, "embedding_model")
    if current is None:
        set_library_meta(conn, "embedding_model", model)
        set_library_meta(conn, "embedding_dimension", str(dimension))
        set_vector_column(conn, dimension)
    elif current != model:
        raise RuntimeError(f"library '{library}' holds vectors of {current}, not {model}: reindex it")


def set_vector_column(conn: Any, dimension: int) -> None:
    """memory_vectors.embedding becomes vector(dimension) with an HNSW index (cosine): the
    column is typed once the model is known, as an HNSW index needs one dimension. Done only
    when the table is empty (a new library, or one being reindexed)."""
    conn.execute("DROP INDEX IF EXISTS memory_vectors_hnsw")
    conn.execute(f"ALTER TABLE memory_vectors ALTER COLUMN embedding TYPE vector({int(dimension)})")
    conn.execute("CREATE INDEX memory_vectors_hnsw ON memory_vectors USING hnsw (embedding vector_cosine_ops)")
