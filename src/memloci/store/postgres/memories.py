"""Memories in the postgres engine: storing, filtering, and their vectors' bookkeeping.

The same semantics as the SQLite engine (store/sqlite/memories.py): a memory is stored once per
owner (an entity, or the free memories) by content hash, a memory told again with more tags
keeps them all, tags and types compare case-insensitively and keep the case they were written
in, a free memory of a conversation (`metadata.session`) is indexed with its neighbours' words.
Full text, CJK pieces and tag keys are columns PostgreSQL computes (search_schema.py); what
is searched, and how, is in search.py; the rows themselves are memory_rows.py's.

A memory waits for a vector while `embedded` is false: a text changed after its vector was
made sets it back. Tags are kept as written (`tags`) and by key (`memory_tags`, model.name_key)
for filters, as in SQLite.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from memloci.core.model import (
    ChangedMemories,
    Memory,
    MemoryEdit,
    MemoryFilter,
    MemoryInput,
    MemoryPage,
    MemoryVectors,
    NewMemory,
    PendingMemory,
    SavedVectors,
    StoredMemory,
    content_hash,
    links_data,
    name_key,
    now_iso,
    tag_keys,
)
from memloci.rules import graph as rules
from memloci.rules import lifecycle, undo
from memloci.store.postgres.database import Database
from memloci.store.postgres.entities import reindex
from memloci.store.postgres.graph import retag
from memloci.store.postgres.json_columns import as_json, as_jsonb
from memloci.store.postgres.memory_rows import (
    BulkMemory,
    add_tags,
    drop_secondary_indexes,
    filter_sql,
    insert_memory,
    load_memories,
    memory_hash,
    neighbours,
    refresh_context,
    select_memories,
    vectors_copy_data,
)
from memloci.store.postgres.passages import pending_passage_count, reset_passage_vectors
from memloci.store.postgres.vectors import (
    bump_vectors,
    claim_model,
    drop_memory_vectors,
    library_meta,
    set_library_meta,
    set_vector_column,
    vector_text,
    vectors_version,
)


def memory_owner(conn: Any, name: str | None) -> int | None:
    """The id of the entity a memory call names (None: a free memory); NOT_FOUND if there is none."""
    if not name:
        return None
    row = conn.execute("SELECT id FROM entities WHERE name_key = %s", (name_key(name),)).fetchone()
    if not row:
        raise rules.memory_owner_missing(name)
    return int(row[0])


def observations_changed(conn: Any, entity_ids: Sequence[int]) -> None:
    """Upkeep after an entity's observations changed through a memory call: its tags from
    the #tags they carry, as a graph write keeps them, and its search index (entities.reindex)."""
    retag(conn, list(entity_ids))
    reindex(conn, list(entity_ids))


class PostgresMemories:
    """Free memories and observations through the memory calls, and their vectors."""

    def __init__(self, db: Database):
        self.db = db

    def store_memory(self, m: MemoryInput, *, origin: str) -> StoredMemory:
        """Store one memory; `created` False if its owner already holds the same text."""
        at = now_iso()
        with self.db.write("memories") as tx:
            conn = tx.conn
            entity_id = memory_owner(conn, m.entity)
            memory_id = insert_memory(conn, entity_id, m.content, m.memory_type, m.tags, m.importance, m.metadata, at)
            if memory_id is None:
                (existing,) = conn.execute(
                    "SELECT id FROM memories WHERE coalesce(entity_id, 0) = %s AND content_hash = %s",
                    (entity_id or 0, memory_hash(conn, m.content, entity_id))).fetchone()
                memory = load_memories(conn, [existing])[existing]
                new_tags = rules.tags_told_again(memory.tags, m.tags)
                if new_tags:  # the same memory, told again with more tags: keep them all
                    tx.keep(memory_ids=[existing])  # a change like update_memory: journaled, undoable
                    conn.execute("UPDATE memories SET tags = %s, updated_at = %s WHERE id = %s",
                                 (as_jsonb([*memory.tags, *new_tags]), at, existing))
                    add_tags(conn, existing, new_tags)
                    memory = load_memories(conn, [existing])[existing]
                    tx.journal(origin, "store_memory", [memory.entity] if memory.entity else [],
                               rules.tags_added_detail(memory, new_tags), at)
                return StoredMemory(memory, False)
            if m.links and entity_id is None:  # what a free memory mentions, stored with it
                conn.execute("UPDATE memories SET links = %s WHERE id = %s", (as_jsonb(links_data(m.links)), memory_id))
            if entity_id is not None:
                conn.execute("UPDATE entities SET updated_at = %s WHERE id = %s", (at, entity_id))
                observations_changed(conn, [entity_id])
            memory = load_memories(conn, [memory_id])[memory_id]
            if entity_id is None:  # a free memory stored is undone by removing it (an observation: by a delete)
                undo.keep_new_memory(tx.kept, memory.content_hash)
            tx.journal(origin, "store_memory", [memory.entity] if memory.entity else [],
                       {"content_hash": memory.content_hash, "content": memory.content, "tags": list(memory.tags)}, at)
        return StoredMemory(memory, True)

    def memories_by_hash(self, content_hash: str) -> list[Memory]:
        with self.db.read() as conn:
            return select_memories(conn, "m.content_hash = %s", (content_hash,))

    def update_memory(self, memory_id: int, *, content: str | None, tags: Sequence[str] | None,
                      metadata: dict[str, Any] | None, importance: str | None, origin: str) -> Memory:
        at = now_iso()
        with self.db.write("memories") as tx:
            conn = tx.conn
            before = load_memories(conn, [memory_id]).get(memory_id)
            if before is None:
                raise rules.memory_gone()
            tx.keep(memory_ids=[memory_id])  # the undo record keeps it as it is (undo.py)
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
                drop_memory_vectors(conn, [memory_id])
            if tags is not None:
                sets.append("tags = %s")
                params.append(as_jsonb(list(tags)))
                conn.execute("DELETE FROM memory_tags WHERE memory_id = %s", (memory_id,))
                add_tags(conn, memory_id, tags)
            if metadata is not None:
                sets.append("metadata = %s")
                params.append(as_json({**before.metadata, **metadata}))
            if importance is not None:
                sets.append("importance = %s")
                params.append(importance)
            conn.execute(f"UPDATE memories SET {', '.join(sets)} WHERE id = %s", (*params, memory_id))
            if changed_text:
                refresh_context(conn, neighbours(conn, memory_id))
                if owner is not None:
                    observations_changed(conn, [int(owner)])
            after = load_memories(conn, [memory_id])[memory_id]
            tx.journal(origin, "update_memory", [after.entity] if after.entity else [], rules.update_detail(before, after), at)
        return after

    def delete_memories(self, ids: Sequence[int], *, origin: str) -> list[Memory]:
        at = now_iso()
        with self.db.write("memories") as tx:
            conn = tx.conn
            removed = list(load_memories(conn, ids).values())
            gone = [m.id for m in removed]
            tx.keep(memory_ids=gone)  # the undo record keeps them as they are (undo.py)
            around = {n for i in gone for n in neighbours(conn, i)} - set(gone)
            owners = [int(r[0]) for r in conn.execute(
                "SELECT DISTINCT entity_id FROM memories WHERE entity_id IS NOT NULL AND id = ANY(%s)", (gone,))]
            if gone:
                if drop_memory_vectors(conn, gone):
                    bump_vectors(conn)
                conn.execute("DELETE FROM memories WHERE id = ANY(%s)", (gone,))
            refresh_context(conn, sorted(around))
            if owners:
                observations_changed(conn, owners)
            if removed:
                tx.journal(origin, "delete_memory", [m.entity for m in removed if m.entity],
                              {"removed": [{"content": m.content, "tags": list(m.tags), "memory_type": m.memory_type,
                                            "metadata": m.metadata} for m in removed]}, at)
        return removed

    def change_memories(self, edits: Sequence[MemoryEdit], new: Sequence[NewMemory], *, origin: str, action: str,
                        detail: dict[str, Any], expect: Sequence[MemoryEdit] = (),
                        preview_id: int | None = None) -> ChangedMemories:
        """As the SQLite engine's (rules/lifecycle.py `apply`): one transaction, one journal entry,
        refused if a memory changed."""
        at = now_iso()
        with self.db.write("memories") as tx:
            return lifecycle.apply(_LifecycleRows(tx), edits, new, origin=origin, action=action, detail=detail,
                                   expect=expect, preview_id=preview_id, at=at)

    def list_memories(self, *, offset: int, limit: int, filters: MemoryFilter, count: bool = True) -> MemoryPage:
        with self.db.read() as conn:
            where, params = filter_sql(filters, conn)
            (total,) = conn.execute(f"SELECT count(*) FROM memories m WHERE {where}", params).fetchone() if count else (-1,)
            return MemoryPage(tuple(select_memories(conn, where, params, "m.created_at DESC, m.id DESC", limit, offset)),
                              int(total))

    def memory_ids(self, filters: MemoryFilter) -> set[int]:
        with self.db.read() as conn:
            where, params = filter_sql(filters, conn)
            return {int(r[0]) for r in conn.execute(f"SELECT m.id FROM memories m WHERE {where}", params)}

    def load_memories(self, ids: Sequence[int]) -> dict[int, Memory]:
        with self.db.read() as conn:
            return load_memories(conn, ids)

    def touch_memories(self, ids: Sequence[int]) -> None:
        """Count a retrieval of each memory (access_count, last_accessed_at); repeats count each time."""
        if not ids:
            return
        counts: dict[int, int] = {}
        for i in ids:
            counts[i] = counts.get(i, 0) + 1
        at = now_iso()
        with self.db.write("accesses") as tx:
            conn = tx.conn
            conn.execute("""UPDATE memories m SET access_count = m.access_count + c.n, last_accessed_at = %s
                            FROM unnest(%s::bigint[], %s::int[]) AS c(id, n) WHERE m.id = c.id""",
                         (at, list(counts), list(counts.values())))

    # -- vectors (searched in search.py) -----------------------------------------------------

    def pending_embeddings(self, limit: int) -> list[PendingMemory]:
        """Memories still waiting for a vector, in id order, claimed by this process until
        save_vectors commits theirs (connection.EmbeddingClaims): another server on the library
        skips them, so no memory is embedded twice at once. The batch claimed before, if never
        saved, is let go first."""
        with self.db.engine_errors():
            return [PendingMemory(*row) for row in self.db.embedding_claims().claim(limit)]

    def save_vectors(self, items: Sequence[tuple[int, str, Any]], model: str) -> SavedVectors:
        """Store vectors of (id, content_hash it was computed from, vector); a memory whose text
        changed meanwhile is skipped. The first vectors of a library fix its model and the
        column's dimension (and build the HNSW index)."""
        saved: list[int] = []
        with self.db.write("vectors") as tx:
            conn = tx.conn
            if items:
                claim_model(conn, self.db.name, model, len(items[0][2]))
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
        self.db.release_claims([i for i, _, _ in items])  # committed: the batch may go
        return SavedVectors(tuple(saved), version)

    def load_vectors(self) -> MemoryVectors:
        """Every stored vector, in id order. The postgres engine searches its vectors in SQL
        (search.py, VectorSearch): this is for copying a library, not for an in-process index."""
        import numpy as np

        with self.db.read() as conn:
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
        with self.db.write("memories") as tx:
            conn = tx.conn
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
                        claim_model(conn, self.db.name, model, len(with_vectors[0][1]))
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
            tx.journal("bulk_load", "bulk_load_memories", [], {"memories": loaded}, at)
        return loaded

    def vectors_version(self) -> int:
        with self.db.read() as conn:
            return vectors_version(conn)

    def vector_model(self) -> str | None:
        """The embedding model of the library's vectors (None before the first one)."""
        with self.db.read() as conn:
            return library_meta(conn, "embedding_model")

    def reset_vectors(self, model: str, dimension: int) -> int:
        """Forget every vector (the library switches to `model`); returns how many memories and
        note passages wait."""
        at = now_iso()
        with self.db.write("vectors") as tx:
            conn = tx.conn
            conn.execute("DELETE FROM memory_vectors")
            conn.execute("UPDATE memories SET embedded = false WHERE embedded")
            passages = reset_passage_vectors(conn)  # note bodies' passages wait for the new model too
            set_vector_column(conn, dimension)
            set_library_meta(conn, "embedding_model", model)
            set_library_meta(conn, "embedding_dimension", str(dimension))
            bump_vectors(conn)
            tx.journal("reindex", "reset_vectors", [], {"model": model, "dimension": dimension}, at)
            return int(conn.execute("SELECT count(*) FROM memories").fetchone()[0]) + passages

    def pending_count(self) -> int:
        with self.db.read() as conn:
            return int(conn.execute("SELECT count(*) FROM memories WHERE NOT embedded").fetchone()[0])

    def embedding_state(self) -> dict[str, Any]:
        with self.db.read() as conn:
            return {
                "model": library_meta(conn, "embedding_model"),
                "dimension": int(library_meta(conn, "embedding_dimension") or 0) or None,
                "pending": int(conn.execute("SELECT count(*) FROM memories WHERE NOT embedded").fetchone()[0])
                + pending_passage_count(conn),
                "tags": int(conn.execute("SELECT count(DISTINCT tag) FROM memory_tags").fetchone()[0]),
            }


def _took(steps: dict[str, float], what: str, since: float) -> float:
    """Add the seconds since `since` to steps[what]; returns now."""
    import time

    now = time.perf_counter()
    steps[what] = steps.get(what, 0.0) + now - since
    return now


class _LifecycleRows:
    """rules/lifecycle.py's LifecycleTx over one PostgreSQL write transaction."""

    def __init__(self, tx: Any):
        self.tx = tx
        self.conn = tx.conn

    def load(self, ids: Sequence[int]) -> dict[int, Memory]:
        return load_memories(self.conn, ids)

    def claim_preview(self, preview_id: int, at: str) -> bool:
        return bool(self.conn.execute("UPDATE previews SET executed_at = %s WHERE id = %s AND executed_at IS NULL",
                                      (at, preview_id)).rowcount)

    def keep(self, ids: Sequence[int]) -> None:
        self.tx.keep(memory_ids=ids)  # the undo record keeps them as they are (undo.py)

    def absorb(self, keeper: int, ids: Sequence[int]) -> None:
        self.conn.execute("UPDATE memories SET access_count = access_count + (SELECT coalesce(sum(access_count), 0) "
                          "FROM memories WHERE id = ANY(%s)) WHERE id = %s", (list(ids), keeper))

    def delete(self, ids: Sequence[int]) -> None:
        if not ids:
            return
        around = {n for i in ids for n in neighbours(self.conn, i)} - set(ids)
        if drop_memory_vectors(self.conn, list(ids)):
            bump_vectors(self.conn)
        self.conn.execute("DELETE FROM memories WHERE id = ANY(%s)", (list(ids),))
        refresh_context(self.conn, sorted(around))

    def update(self, memory_id: int, fields: Mapping[str, Any], at: str) -> None:
        names = list(fields)  # checked against EDITABLE_FIELDS (rules/lifecycle.py check_edits)
        values = [as_jsonb(list(v)) if k in ("tags", "links") else as_json(v) if k == "metadata" else v
                  for k, v in fields.items()]
        self.conn.execute(f"UPDATE memories SET updated_at = %s, {', '.join(f'{k} = %s' for k in names)} WHERE id = %s",
                          (at, *values, memory_id))
        if "tags" in fields:
            self.conn.execute("DELETE FROM memory_tags WHERE memory_id = %s", (memory_id,))
            add_tags(self.conn, memory_id, fields["tags"])

    def insert(self, new: NewMemory, at: str) -> int | None:
        m = new.memory
        memory_id = insert_memory(self.conn, None, m.content, m.memory_type, m.tags, m.importance, m.metadata, at)
        if memory_id is not None and new.links:
            self.conn.execute("UPDATE memories SET links = %s WHERE id = %s", (as_jsonb(links_data(new.links)), memory_id))
        return memory_id

    def created(self, content_hash: str) -> None:
        undo.keep_new_memory(self.tx.kept, content_hash)

    def journal(self, origin: str, action: str, detail: dict[str, Any], at: str) -> int:
        self.tx.journal(origin, action, [], detail, at)
        return int(self.tx.kept["last_row"])

    def record_change(self, preview_id: int, change_id: int) -> None:
        self.conn.execute("UPDATE previews SET change_id = %s WHERE id = %s", (change_id, preview_id))
