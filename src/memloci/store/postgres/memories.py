"""Memories in the postgres engine: storing, filtering, and their vectors' bookkeeping.

The same semantics as the SQLite engine (store/sqlite_memories.py): a memory is stored once per
owner (an entity, or the free memories) by content hash, a memory told again with more tags
keeps them all, tags and types compare case-insensitively and keep the case they were written
in, a free memory of a conversation (`metadata.session`) is indexed with its neighbours' words.
Full text, CJK pieces and tag keys are columns PostgreSQL computes (search_schema.py); what
is searched, and how, is in search.py.

A memory waits for a vector while `embedded` is false: a text changed after its vector was
made sets it back. Tags are kept as written (`tags`) and by key (`memory_tags`, model.name_key)
for filters, as in SQLite.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from memloci.core.errors import NotFoundError
from memloci.core.model import (
    Memory,
    MemoryFilter,
    MemoryInput,
    MemoryPage,
    MemoryVectors,
    PendingMemory,
    SavedVectors,
    StoredMemory,
    content_hash,
    name_key,
    now_iso,
    tag_keys,
    thread_key,
)
from memloci.rules import graph as rules
from memloci.store.postgres.connection import EmbeddingClaims, quoted
from memloci.store.postgres.graph import bump_vectors, retag

# One row of bulk_load_memories: content, tags, memory_type, created_at, vector (or None).
BulkMemory = tuple[str, Sequence[str], str, str, Any]

_COLUMNS = """m.id, m.content, m.content_hash, m.tags, m.memory_type, m.importance, m.metadata,
    m.created_at, m.updated_at, m.access_count, m.last_accessed_at, e.name"""


def _jsonb(value: Any) -> Any:
    from psycopg.types.json import Jsonb

    return Jsonb(value)


def _json(value: Any) -> Any:
    """For `json` columns (metadata): the keys stay in the order they were written."""
    from psycopg.types.json import Json

    return Json(value)


def _memory(row: Sequence[Any]) -> Memory:
    (id_, content, chash, tags, mtype, importance, metadata, created, updated, count, accessed, entity) = row
    return Memory(int(id_), content, chash, tuple(tags or ()), mtype, importance or "medium", dict(metadata or {}),
                  created, updated, int(count or 0), accessed, entity)


def filter_sql(f: MemoryFilter, conn: Any) -> tuple[str, list[Any]]:
    """A WHERE clause over `memories m` for a filter (NOT_FOUND for an unknown entity)."""
    where: list[str] = ["TRUE"]
    params: list[Any] = []
    if f.memory_type:  # case-insensitive, any script (an index on lower(memory_type) answers)
        where.append("lower(m.memory_type) = lower(%s)")
        params.append(unicodedata.normalize("NFC", f.memory_type))
    if f.entity:
        row = conn.execute("SELECT id FROM entities WHERE name_key = %s", (name_key(f.entity),)).fetchone()
        if not row:
            raise NotFoundError(f"entity: '{f.entity}' does not exist")
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
        (entity_id, content, memory_hash(conn, content, entity_id), memory_type, _jsonb(list(tags)), importance,
         _json(metadata), at, at, thread)).fetchone()
    if row is None:
        return None
    memory_id = int(row[0])
    _add_tags(conn, memory_id, tags)
    around = _neighbours(conn, memory_id, thread)
    if around:
        conn.execute("UPDATE memories SET context = %s WHERE id = %s", ("\n".join(t for _, t in around), memory_id))
        refresh_context(conn, [i for i, _ in around])  # the previous one now has this one as its next neighbour
    return memory_id


def _add_tags(conn: Any, memory_id: int, tags: Sequence[str]) -> None:
    keys = tag_keys(tags)
    if keys:
        conn.execute("""INSERT INTO memory_tags (tag, memory_id) SELECT t, %s FROM unnest(%s::text[]) AS t
                        ON CONFLICT DO NOTHING""", (memory_id, keys))


def vectors_version(conn: Any) -> int:
    row = conn.execute("SELECT value FROM library_meta WHERE key = 'vectors_version'").fetchone()
    return int(row[0]) if row else 0


def library_meta(conn: Any, key: str) -> str | None:
    row = conn.execute("SELECT value FROM library_meta WHERE key = %s", (key,)).fetchone()
    return row[0] if row else None


def set_library_meta(conn: Any, key: str, value: str) -> None:
    conn.execute("INSERT INTO library_meta (key, value) VALUES (%s, %s) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                 (key, value))


class PostgresMemories:
    """The memory half of PostgresStore (mixed in; uses its _write, _read, _journal and
    _entities_written)."""

    if TYPE_CHECKING:  # what PostgresStore gives its mixins
        name: str
        url: str
        schema_id: str
        _search_path: str
        _open_lock: Any
        _claims: EmbeddingClaims | None

        def open(self, *, create: bool = True) -> None: ...
        def _engine_errors(self) -> AbstractContextManager[None]: ...
        def _read(self) -> AbstractContextManager[Any]: ...
        def _write(self, what: str = "graph") -> AbstractContextManager[Any]: ...
        def _journal(self, conn: Any, tool: str, action: str, entities: Any, detail: dict | None, at: str) -> None: ...
        def _entities_written(self, conn: Any, ids: Sequence[int]) -> None: ...
        def _before(self, conn: Any, entity_ids: Iterable[int] = (), memory_ids: Iterable[int] = ()) -> None: ...

    def store_memory(self, m: MemoryInput, *, origin: str) -> StoredMemory:
        """Store one memory; `created` False if its owner already holds the same text."""
        at = now_iso()
        with self._write("memories") as conn:
            entity_id = self._memory_owner(conn, m.entity)
            memory_id = insert_memory(conn, entity_id, m.content, m.memory_type, m.tags, m.importance, m.metadata, at)
            if memory_id is None:
                (existing,) = conn.execute(
                    "SELECT id FROM memories WHERE coalesce(entity_id, 0) = %s AND content_hash = %s",
                    (entity_id or 0, memory_hash(conn, m.content, entity_id))).fetchone()
                memory = load_memories(conn, [existing])[existing]
                new_tags = rules.tags_told_again(memory.tags, m.tags)
                if new_tags:  # the same memory, told again with more tags: keep them all
                    conn.execute("UPDATE memories SET tags = %s, updated_at = %s WHERE id = %s",
                                 (_jsonb([*memory.tags, *new_tags]), at, existing))
                    _add_tags(conn, existing, new_tags)
                    memory = load_memories(conn, [existing])[existing]
                return StoredMemory(memory, False)
            if entity_id is not None:
                conn.execute("UPDATE entities SET updated_at = %s WHERE id = %s", (at, entity_id))
                self._observations_changed(conn, [entity_id])
            memory = load_memories(conn, [memory_id])[memory_id]
            self._journal(conn, origin, "store_memory", [memory.entity] if memory.entity else [],
                          {"content_hash": memory.content_hash, "tags": list(memory.tags)}, at)
        return StoredMemory(memory, True)

    def _memory_owner(self, conn: Any, name: str | None) -> int | None:
        if not name:
            return None
        row = conn.execute("SELECT id FROM entities WHERE name_key = %s", (name_key(name),)).fetchone()
        if not row:
            raise rules.memory_owner_missing(name)
        return int(row[0])

    def _observations_changed(self, conn: Any, entity_ids: Sequence[int]) -> None:
        """Upkeep after an entity's observations changed through a memory call: its tags from
        the #tags they carry, as a graph write keeps them (the full-text index follows by
        itself: triggers, search_schema.py)."""
        retag(conn, list(entity_ids))
        self._entities_written(conn, list(entity_ids))

    def memories_by_hash(self, content_hash: str) -> list[Memory]:
        with self._read() as conn:
            return select_memories(conn, "m.content_hash = %s", (content_hash,))

    def update_memory(self, memory_id: int, *, content: str | None, tags: Sequence[str] | None,
                      metadata: dict[str, Any] | None, importance: str | None, origin: str) -> Memory:
        at = now_iso()
        with self._write("memories") as conn:
            before = load_memories(conn, [memory_id]).get(memory_id)
            if before is None:
                raise rules.memory_gone()
            self._before(conn, memory_ids=[memory_id])  # the undo record keeps it as it is (undo.py)
            (owner,) = conn.execute("SELECT entity_id FROM memories WHERE id = %s", (memory_id,)).fetchone()
            sets: list[str] = ["updated_at = %s"]
            params: list[Any] = [at]
            changed_text = content is not None and content != before.content
            if changed_text:
                assert content is not None  # changed_text says so
                new_hash = memory_hash(conn, content, owner)
                clash = conn.execute("SELECT 1 FROM memories WHERE coalesce(entity_id, 0) = %s AND content_hash = %s "
                                     "AND id <> %s", (owner or 0, new_hash, memory_id)).fetchone()
                if clash:
                    raise rules.memory_text_taken()
                sets += ["content = %s", "content_hash = %s", "embedded = false"]
                params += [content, new_hash]
                self._drop_vectors(conn, [memory_id])
            if tags is not None:
                sets.append("tags = %s")
                params.append(_jsonb(list(tags)))
                conn.execute("DELETE FROM memory_tags WHERE memory_id = %s", (memory_id,))
                _add_tags(conn, memory_id, tags)
            if metadata is not None:
                sets.append("metadata = %s")
                params.append(_json({**before.metadata, **metadata}))
            if importance is not None:
                sets.append("importance = %s")
                params.append(importance)
            conn.execute(f"UPDATE memories SET {', '.join(sets)} WHERE id = %s", (*params, memory_id))
            if changed_text:
                refresh_context(conn, neighbours(conn, memory_id))
                if owner is not None:
                    self._observations_changed(conn, [int(owner)])
            after = load_memories(conn, [memory_id])[memory_id]
            self._journal(conn, origin, "update_memory", [after.entity] if after.entity else [],
                          {"content_hash": before.content_hash, "before": {"content": before.content,
                           "tags": list(before.tags), "metadata": before.metadata, "importance": before.importance}}, at)
        return after

    def delete_memories(self, ids: Sequence[int], *, origin: str) -> list[Memory]:
        at = now_iso()
        with self._write("memories") as conn:
            removed = list(load_memories(conn, ids).values())
            gone = [m.id for m in removed]
            self._before(conn, memory_ids=gone)  # the undo record keeps them as they are (undo.py)
            around = {n for i in gone for n in neighbours(conn, i)} - set(gone)
            owners = [int(r[0]) for r in conn.execute(
                "SELECT DISTINCT entity_id FROM memories WHERE entity_id IS NOT NULL AND id = ANY(%s)", (gone,))]
            if gone:
                if self._drop_vectors(conn, gone):
                    bump_vectors(conn)
                conn.execute("DELETE FROM memories WHERE id = ANY(%s)", (gone,))
            refresh_context(conn, sorted(around))
            if owners:
                self._observations_changed(conn, owners)
            if removed:
                self._journal(conn, origin, "delete_memory", [m.entity for m in removed if m.entity],
                              {"removed": [{"content": m.content, "tags": list(m.tags), "memory_type": m.memory_type,
                                            "metadata": m.metadata} for m in removed]}, at)
        return removed

    def list_memories(self, *, offset: int, limit: int, filters: MemoryFilter, count: bool = True) -> MemoryPage:
        with self._read() as conn:
            where, params = filter_sql(filters, conn)
            (total,) = conn.execute(f"SELECT count(*) FROM memories m WHERE {where}", params).fetchone() if count else (-1,)
            return MemoryPage(tuple(select_memories(conn, where, params, "m.created_at DESC, m.id DESC", limit, offset)),
                              int(total))

    def memory_ids(self, filters: MemoryFilter) -> set[int]:
        with self._read() as conn:
            where, params = filter_sql(filters, conn)
            return {int(r[0]) for r in conn.execute(f"SELECT m.id FROM memories m WHERE {where}", params)}

    def load_memories(self, ids: Sequence[int]) -> dict[int, Memory]:
        with self._read() as conn:
            return load_memories(conn, ids)

    def touch_memories(self, ids: Sequence[int]) -> None:
        """Count a retrieval of each memory (access_count, last_accessed_at); repeats count each time."""
        if not ids:
            return
        counts: dict[int, int] = {}
        for i in ids:
            counts[i] = counts.get(i, 0) + 1
        at = now_iso()
        with self._write("accesses") as conn:
            conn.execute("""UPDATE memories m SET access_count = m.access_count + c.n, last_accessed_at = %s
                            FROM unnest(%s::bigint[], %s::int[]) AS c(id, n) WHERE m.id = c.id""",
                         (at, list(counts), list(counts.values())))

    # -- vectors (searched in search.py) -----------------------------------------------------

    @staticmethod
    def _drop_vectors(conn: Any, ids: Sequence[int]) -> int:
        return conn.execute("DELETE FROM memory_vectors WHERE memory_id = ANY(%s)", (list(ids),)).rowcount

    def pending_embeddings(self, limit: int) -> list[PendingMemory]:
        """Memories still waiting for a vector, in id order, claimed by this process until
        save_vectors commits theirs (connection.EmbeddingClaims): another server on the library
        skips them, so no memory is embedded twice at once. The batch claimed before, if never
        saved, is let go first."""
        with self._engine_errors():
            return [PendingMemory(*row) for row in self._embedding_claims().claim(limit)]

    def _embedding_claims(self) -> EmbeddingClaims:
        self.open()
        with self._open_lock:
            if self._claims is None:
                self._claims = EmbeddingClaims(self.url, self.schema_id, self._search_path)
            return self._claims

    def save_vectors(self, items: Sequence[tuple[int, str, Any]], model: str) -> SavedVectors:
        """Store vectors of (id, content_hash it was computed from, vector); a memory whose text
        changed meanwhile is skipped. The first vectors of a library fix its model and the
        column's dimension (and build the HNSW index)."""
        saved: list[int] = []
        with self._write("vectors") as conn:
            if items:
                claim_model(conn, self.name, model, len(items[0][2]))
                ids = [int(i) for i, _, _ in items]
                kept = {int(r[0]) for r in conn.execute(
                    """UPDATE memories m SET embedded = true FROM unnest(%s::bigint[], %s::text[]) AS x(id, h)
                       WHERE m.id = x.id AND m.content_hash = x.h RETURNING m.id""", (ids, [h for _, h, _ in items]))}
                saved = [i for i in ids if i in kept]  # in the order given (the worker's id order)
                conn.execute("""INSERT INTO memory_vectors (memory_id, embedding)
                                SELECT x.id, x.v::vector FROM unnest(%s::bigint[], %s::text[]) AS x(id, v)
                                WHERE x.id = ANY(%s)
                                ON CONFLICT (memory_id) DO UPDATE SET embedding = excluded.embedding""",
                             (ids, [vector_text(v) for _, _, v in items], saved))
            version = bump_vectors(conn, len(saved)) if saved else vectors_version(conn)
        if self._claims is not None:  # committed: the batch may go (another server would find it embedded)
            self._claims.release([i for i, _, _ in items])
        return SavedVectors(tuple(saved), version)

    def load_vectors(self) -> MemoryVectors:
        """Every stored vector, in id order. The postgres engine searches its vectors in SQL
        (search.py, VectorSearch): this is for copying a library, not for an in-process index."""
        import numpy as np

        with self._read() as conn:
            model = library_meta(conn, "embedding_model")
            dimension = int(library_meta(conn, "embedding_dimension") or 0) or 1
            # pgvector's binary form: a 4-byte header, then big-endian float4s
            rows = conn.execute("""SELECT v.memory_id, m.thread, vector_send(v.embedding) FROM memory_vectors v
                                   JOIN memories m ON m.id = v.memory_id ORDER BY v.memory_id""").fetchall()
            version = vectors_version(conn)
        matrix = np.zeros((len(rows), dimension), dtype=np.float32)
        for k, row in enumerate(rows):
            matrix[k] = np.frombuffer(row[2], dtype=">f4", offset=4)
        return MemoryVectors(np.array([r[0] for r in rows], dtype=np.int64), [r[1] for r in rows], matrix, version, model)

    def bulk_load_memories(self, batches: Iterable[Sequence[BulkMemory]], model: str | None,
                           on_batch: Callable[[int], None] | None = None,
                           timings: dict[str, float] | None = None) -> int:
        """Load many free memories at once with COPY, in one write transaction (for benchmarks and
        large loads; one store_memory per memory costs a round trip and a lock each). Each row
        is (content, tags, memory_type, created_at, vector (numpy) or None); rows are not checked
        against the library's existing memories (no merging of repeated texts), threads and
        journal entries per memory are not written (one journal entry for the load).

        Into a library holding no memories yet, the rows go in without the memory tables'
        secondary indexes (full text, trigrams, tags, HNSW, ...), which are built again once
        over every row at the end, then ANALYZEd: keeping a GIN or HNSW index row by row costs
        far more than one build. Meanwhile the load holds those tables exclusively (other
        calls on the library wait), and a text loaded twice fails the rebuilt unique index,
        rolling the whole load back. `timings`, if given, receives the seconds of each step.
        Returns how many memories were loaded."""
        import time

        loaded = 0
        at = now_iso()
        steps = timings if timings is not None else {}
        started = time.perf_counter()
        with self._write("memories") as conn:
            empty = not conn.execute("SELECT EXISTS (SELECT 1 FROM memories)").fetchone()[0]
            deferred = drop_secondary_indexes(conn) if empty else {}
            claimed = False
            sequence = conn.execute("SELECT pg_get_serial_sequence('memories', 'id')").fetchone()[0]
            for batch in batches:
                if not batch:
                    continue
                ids = [int(r[0]) for r in conn.execute(
                    "SELECT nextval(%s) FROM generate_series(1, %s)", (sequence, len(batch)))]
                step = time.perf_counter()
                with conn.cursor().copy("""COPY memories (id, content, content_hash, memory_type, tags, metadata,
                                           created_at, updated_at, embedded) FROM STDIN""") as copy:
                    for memory_id, (content, tags, mtype, created, vector) in zip(ids, batch):
                        copy.write_row((memory_id, content, content_hash(content), mtype,
                                        json.dumps(list(tags), ensure_ascii=False), "{}", created, created,
                                        vector is not None))
                step = _took(steps, "copy memories_s", step)
                with conn.cursor().copy("COPY memory_tags (tag, memory_id) FROM STDIN") as copy:
                    for memory_id, row in zip(ids, batch):
                        for key in tag_keys(row[1]):
                            copy.write_row((key, memory_id))
                step = _took(steps, "copy memory_tags_s", step)
                with_vectors = [(i, r[4]) for i, r in zip(ids, batch) if r[4] is not None]
                if with_vectors:
                    if model is None:
                        raise ValueError("model: vectors given without the model that made them")
                    if not claimed:
                        claim_model(conn, self.name, model, len(with_vectors[0][1]))
                        if empty:  # claim_model may have made the HNSW index on the empty table
                            deferred.update(drop_secondary_indexes(conn))
                        claimed = True
                    with conn.cursor().copy("COPY memory_vectors (memory_id, embedding) FROM STDIN (FORMAT binary)") as copy:
                        copy.write(vectors_copy_data([i for i, _ in with_vectors], [v for _, v in with_vectors]))
                    _took(steps, "copy memory_vectors_s", step)
                loaded += len(batch)
                if on_batch is not None:
                    on_batch(len(batch))
            steps["copy_s"] = time.perf_counter() - started
            if deferred:
                started = time.perf_counter()
                # Each built once over every row; an HNSW graph is built far faster in memory
                # (about 2 KB a 384-dimension vector), and PostgreSQL 18 builds GIN and HNSW
                # indexes with parallel workers.
                conn.execute(f"SET LOCAL maintenance_work_mem = '{min(4096, max(256, loaded // 400))}MB'")
                for name, ddl in deferred.items():
                    step = time.perf_counter()
                    conn.execute(ddl)
                    steps[f"index {name}_s"] = time.perf_counter() - step
                steps["indexes_s"] = time.perf_counter() - started
            started = time.perf_counter()
            conn.execute("ANALYZE memories, memory_tags, memory_vectors")  # a planner's first look at a big library
            steps["analyze_s"] = time.perf_counter() - started
            if claimed:
                bump_vectors(conn, loaded)
            self._journal(conn, "bulk_load", "bulk_load_memories", [], {"memories": loaded}, at)
        return loaded

    def vectors_version(self) -> int:
        with self._read() as conn:
            return vectors_version(conn)

    def vector_model(self) -> str | None:
        """The embedding model of the library's vectors (None before the first one)."""
        with self._read() as conn:
            return library_meta(conn, "embedding_model")

    def reset_vectors(self, model: str, dimension: int) -> int:
        """Forget every vector (the library switches to `model`); returns how many memories and
        note passages wait."""
        from memloci.store.postgres.passages import reset_passage_vectors  # (that module builds on this one)

        at = now_iso()
        with self._write("vectors") as conn:
            conn.execute("DELETE FROM memory_vectors")
            conn.execute("UPDATE memories SET embedded = false WHERE embedded")
            passages = reset_passage_vectors(conn)  # note bodies' passages wait for the new model too
            set_vector_column(conn, dimension)
            set_library_meta(conn, "embedding_model", model)
            set_library_meta(conn, "embedding_dimension", str(dimension))
            bump_vectors(conn)
            self._journal(conn, "reindex", "reset_vectors", [], {"model": model, "dimension": dimension}, at)
            return int(conn.execute("SELECT count(*) FROM memories").fetchone()[0]) + passages

    def pending_count(self) -> int:
        with self._read() as conn:
            return int(conn.execute("SELECT count(*) FROM memories WHERE NOT embedded").fetchone()[0])

    def embedding_state(self) -> dict[str, Any]:
        from memloci.store.postgres.passages import pending_passage_count

        with self._read() as conn:
            return {
                "model": library_meta(conn, "embedding_model"),
                "dimension": int(library_meta(conn, "embedding_dimension") or 0) or None,
                "pending": int(conn.execute("SELECT count(*) FROM memories WHERE NOT embedded").fetchone()[0])
                + pending_passage_count(conn),
                "tags": int(conn.execute("SELECT count(DISTINCT tag) FROM memory_tags").fetchone()[0]),
            }


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


def _took(steps: dict[str, float], what: str, since: float) -> float:
    """Add the seconds since `since` to steps[what]; returns now."""
    import time

    now = time.perf_counter()
    steps[what] = steps.get(what, 0.0) + now - since
    return now


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
