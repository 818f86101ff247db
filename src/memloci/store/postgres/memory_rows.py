"""Rows of memories in the postgres engine, read and written inside a caller's transaction:
the filters, loading, inserting (with a conversation's context), tags; and the bulk helpers a
large load or a copy uses (its indexes dropped and built again, vectors in COPY's binary form).

The same semantics as the SQLite engine (store/sqlite/memories.py): a memory is stored once per
owner (an entity, or the free memories) by content hash, tags compare by key (model.tag_keys),
a free memory of a conversation (`metadata.session`) is indexed with its neighbours' words.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from typing import Any

from memloci.core.model import Memory, MemoryFilter, content_hash, links_from, name_key, tag_keys, thread_key
from memloci.rules.graph import memory_owner_missing
from memloci.store.postgres.connection import quoted
from memloci.store.postgres.json_columns import as_json, as_jsonb

# One row of bulk_load_memories: content, tags, memory_type, created_at, vector (or None).
BulkMemory = tuple[str, Sequence[str], str, str, Any]

_COLUMNS = """m.id, m.content, m.content_hash, m.tags, m.memory_type, m.importance, m.metadata,
    m.created_at, m.updated_at, m.access_count, m.last_accessed_at, e.name, m.superseded_by, m.archived_at, m.links"""


def _memory(row: Sequence[Any]) -> Memory:
    (id_, content, chash, tags, mtype, importance, metadata, created, updated, count, accessed, entity,
     superseded_by, archived_at, links) = row
    return Memory(int(id_), content, chash, tuple(tags or ()), mtype, importance or "medium", dict(metadata or {}),
                  created, updated, int(count or 0), accessed, entity, superseded_by, archived_at, links_from(links))


def retired_exist(conn: Any) -> bool:
    """Whether any memory is superseded or archived (one probe of a partial index)."""
    return conn.execute("SELECT 1 FROM memories WHERE superseded_by IS NOT NULL OR archived_at IS NOT NULL "
                        "LIMIT 1").fetchone() is not None


def filter_sql(f: MemoryFilter, conn: Any) -> tuple[str, list[Any]]:
    """A WHERE clause over `memories m` for a filter (NOT_FOUND for an unknown entity)."""
    where: list[str] = ["TRUE"]
    params: list[Any] = []
    if not (f.include_superseded and f.include_archived) and retired_exist(conn):
        # (asked only when the library holds any: most never do, and their searches stay unfiltered)
        if not f.include_superseded:
            where.append("m.superseded_by IS NULL")
        if not f.include_archived:
            where.append("m.archived_at IS NULL")
    if f.memory_type:  # case-insensitive, any script (an index on lower(memory_type) answers)
        where.append("lower(m.memory_type) = lower(%s)")
        params.append(unicodedata.normalize("NFC", f.memory_type))
    if f.entity:
        row = conn.execute("SELECT id FROM entities WHERE name_key = %s", (name_key(f.entity),)).fetchone()
        if not row:
            raise memory_owner_missing(f.entity, hint=None)
        where.append("m.entity_id = %s")
        params.append(row[0])
    if f.after:
        where.append("m.created_at >= %s")
        params.append(f.after)
    if f.before:
        where.append("m.created_at < %s")
        params.append(f.before)
    if f.tags:  # IN (the tag index): one pass over the tags' rows, not a probe per memory
        keys = tag_keys(f.tags)
        if f.match_all:
            where.append("m.id IN (SELECT memory_id FROM memory_tags WHERE tag = ANY(%s) "
                         "GROUP BY memory_id HAVING count(*) = %s)")
            params += [keys, len(keys)]
        else:
            where.append("m.id IN (SELECT memory_id FROM memory_tags WHERE tag = ANY(%s))")
            params.append(keys)
    return " AND ".join(where), params


def load_memories(conn: Any, ids: Sequence[int]) -> dict[int, Memory]:
    if not ids:
        return {}
    found = {}
    for row in conn.execute(f"""SELECT {_COLUMNS} FROM memories m LEFT JOIN entities e ON e.id = m.entity_id
                                WHERE m.id = ANY(%s)""", (list(ids),)):
        found[int(row[0])] = _memory(row)
    return {i: found[i] for i in ids if i in found}


def select_memories(conn: Any, where: str, params: Sequence[Any], order: str = "m.id",
                    limit: int | None = None, offset: int = 0) -> list[Memory]:
    return [_memory(r) for r in conn.execute(
        f"""SELECT {_COLUMNS} FROM memories m LEFT JOIN entities e ON e.id = m.entity_id
            WHERE {where} ORDER BY {order} LIMIT %s OFFSET %s""", (*params, limit, offset))]


def memory_hash(conn: Any, content: str, entity_id: int | None) -> str:
    """The content_hash of a memory of this owner: its text and its entity's name, never a row id."""
    if entity_id is None:
        return content_hash(content)
    return content_hash(content, conn.execute("SELECT name FROM entities WHERE id = %s", (entity_id,)).fetchone()[0])


def _neighbours(conn: Any, memory_id: int, thread: str) -> list[tuple[int, str]]:
    """(id, content) of the memories just before and after this one in its thread."""
    if not thread:
        return []
    return [(int(i), c) for i, c in conn.execute(
        """(SELECT id, content FROM memories WHERE thread = %(t)s AND id < %(id)s ORDER BY id DESC LIMIT 1)
           UNION ALL
           (SELECT id, content FROM memories WHERE thread = %(t)s AND id > %(id)s ORDER BY id LIMIT 1)""",
        {"t": thread, "id": memory_id})]


def refresh_context(conn: Any, ids: Sequence[int]) -> None:
    """`context` of these memories again: their neighbours' words (search.py weighs them low)."""
    for memory_id in ids:
        row = conn.execute("SELECT thread FROM memories WHERE id = %s", (memory_id,)).fetchone()
        if row:
            context = "\n".join(text for _, text in _neighbours(conn, memory_id, row[0]))
            conn.execute("UPDATE memories SET context = %s WHERE id = %s AND context <> %s", (context, memory_id, context))


def neighbours(conn: Any, memory_id: int) -> list[int]:
    row = conn.execute("SELECT thread FROM memories WHERE id = %s", (memory_id,)).fetchone()
    return [i for i, _ in _neighbours(conn, memory_id, row[0])] if row else []


def insert_memory(conn: Any, entity_id: int | None, content: str, memory_type: str, tags: Sequence[str],
                  importance: str | None, metadata: dict[str, Any], at: str) -> int | None:
    """Insert one memory with its context; None if its owner already holds the same text."""
    thread = thread_key(entity_id, memory_type, metadata)
    row = conn.execute(
        """INSERT INTO memories (entity_id, content, content_hash, memory_type, tags, importance, metadata,
                                 created_at, updated_at, thread)
           VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING RETURNING id""",
        (entity_id, content, memory_hash(conn, content, entity_id), memory_type, as_jsonb(list(tags)), importance,
         as_json(metadata), at, at, thread)).fetchone()
    if row is None:
        return None
    memory_id = int(row[0])
    add_tags(conn, memory_id, tags)
    around = _neighbours(conn, memory_id, thread)
    if around:
        conn.execute("UPDATE memories SET context = %s WHERE id = %s", ("\n".join(t for _, t in around), memory_id))
        refresh_context(conn, [i for i, _ in around])  # the previous one now has this one as its next neighbour
    return memory_id


def add_tags(conn: Any, memory_id: int, tags: Sequence[str]) -> None:
    keys = tag_keys(tags)
    if keys:
        conn.execute("""INSERT INTO memory_tags (tag, memory_id) SELECT t, %s FROM unnest(%s::text[]) AS t
                        ON CONFLICT DO NOTHING""", (memory_id, keys))



def drop_secondary_indexes(conn: Any) -> dict[str, str]:
    """Drop the memory tables' indexes that back no constraint (the primary keys stay: foreign
    keys need them); returns name -> the CREATE INDEX that makes each again."""
    rows = conn.execute("""SELECT c.relname, pg_get_indexdef(i.indexrelid) FROM pg_index i
                           JOIN pg_class c ON c.oid = i.indexrelid
                           JOIN pg_class t ON t.oid = i.indrelid
                           WHERE t.relnamespace = current_schema()::regnamespace
                             AND t.relname IN ('memories', 'memory_tags', 'memory_vectors')
                             AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid)
                           ORDER BY c.relname""").fetchall()
    for name, _ in rows:
        conn.execute(f"DROP INDEX {quoted(name)}")
    return dict(rows)


def vectors_copy_data(ids: Sequence[int], vectors: Sequence[Any]) -> bytes:
    """Rows (memory_id, embedding) in COPY's binary format, pgvector's binary form for the
    vector (dimension, a zero, big-endian float4s): formatting 384 floats as text costs Python
    some 400 microseconds a vector, this a few."""
    import numpy as np

    matrix = np.asarray(np.stack(vectors), dtype=np.float32)
    n, dimension = matrix.shape
    row = np.dtype([("fields", ">i2"), ("id_len", ">i4"), ("id", ">i8"), ("v_len", ">i4"),
                    ("dim", ">i2"), ("unused", ">i2"), ("v", ">f4", (dimension,))])
    out = np.zeros(n, dtype=row)
    out["fields"], out["id_len"], out["id"] = 2, 8, ids
    out["v_len"], out["dim"], out["v"] = 4 + 4 * dimension, dimension, matrix
    # signature, flags, header extension length; the rows; the trailer (-1 fields)
    return b"PGCOPY\n\xff\r\n\x00" + bytes(8) + out.tobytes() + b"\xff\xff"
