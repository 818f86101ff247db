"""A library's vectors in the SQLite engine: their bytes, their model, and the versions that tell
running servers to reload them (memories' and passages' alike)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import TYPE_CHECKING

from memloci.core.lazy import on_first_use

if TYPE_CHECKING:
    import numpy as np
else:  # imported on first use: the server's start does not need it (core/lazy.py)
    np = on_first_use("numpy", globals(), "np")



def vectors_version(conn: sqlite3.Connection) -> int:
    row = conn.execute("SELECT value FROM library_meta WHERE key = 'vectors_version'").fetchone()
    return int(row[0]) if row else 0


def library_meta(conn: sqlite3.Connection, key: str) -> str | None:
    row = conn.execute("SELECT value FROM library_meta WHERE key = ?", (key,)).fetchone()
    return row[0] if row else None


def claim_model(conn: sqlite3.Connection, library: str, model: str, dimension: int) -> None:
    """Vectors about to be saved are of `model`: the library's first ones name its model; any
    other model's are refused (the library must be reindexed, never hold two kinds)."""
    current = library_meta(conn, "embedding_model")
    if current is None:
        set_library_meta(conn, "embedding_model", model)
        set_library_meta(conn, "embedding_dimension", str(dimension))
    elif current != model:
        raise RuntimeError(f"library '{library}' holds vectors of {current}, not {model}: reindex it")


def set_library_meta(conn: sqlite3.Connection, key: str, value: str) -> None:
    conn.execute("INSERT INTO library_meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                 (key, value))


def pack(vector: np.ndarray) -> bytes:
    return np.asarray(vector, dtype="<f4").tobytes()


def unpack_many(blobs: Sequence[bytes], dimension: int) -> np.ndarray:
    if not blobs:
        return np.zeros((0, dimension), dtype=np.float32)
    return np.frombuffer(b"".join(blobs), dtype="<f4").reshape(len(blobs), dimension).astype(np.float32)
