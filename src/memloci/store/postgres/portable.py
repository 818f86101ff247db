"""Everything in and out with its timestamps, and notes of backups (store.Portable), for the
postgres engine: what `memloci export`, `memloci import` and `memloci backup` use. The same
answers as the SQLite engine's, each one transaction."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from memloci.core.errors import NotFoundError, ValidationError
from memloci.core.model import ImportedMemories, Memory, content_hash, name_key, now_iso, tag_keys, thread_key
from memloci.rules.graph import MISSING_ENTITY
from memloci.store.postgres.database import Database
from memloci.store.postgres.entities import reindex
from memloci.store.postgres.graph import retag
from memloci.store.postgres.memory_rows import drop_secondary_indexes, insert_memory, select_memories, vectors_copy_data
from memloci.store.postgres.vectors import bump_vectors, claim_model

COPY_BATCH = 5000  # rows per COPY (and per progress step) of copy_memories


class PostgresPortable:
    """Exports, imports, copies and backups of one library."""

    def __init__(self, db: Database):
        self.db = db

    def free_memories(self) -> list[Memory]:
        """Every free memory (no entity), oldest first by id: what an export writes."""
        with self.db.read() as conn:
            return select_memories(conn, "m.entity_id IS NULL", (), order="m.id")

    def import_memories(self, items: Sequence[Any], *, origin: str) -> ImportedMemories:
        """Free memories with their own timestamps (MemoryLine-like items): how many added, how many there already."""
        added = 0
        with self.db.write("memories") as tx:
            conn = tx.conn
            for m in items:
                memory_id = insert_memory(conn, None, m.content, m.memory_type, m.tags,
                                          None if m.importance == "medium" else m.importance, m.metadata, m.created_at)
                if memory_id is not None:
                    conn.execute("UPDATE memories SET updated_at = %s WHERE id = %s", (m.updated_at, memory_id))
                    added += 1
            if added:
                tx.journal(origin, "import_memories", [], {"added": added}, now_iso())
        return ImportedMemories(added, len(items) - added)

    def restore_dates(self, entities: Mapping[str, tuple[str, str, Sequence[str], Sequence[str]]],
                      relations: Mapping[tuple[str, str, str], str], *, origin: str) -> None:
        """Give entities (name_key -> created, updated, observations, their dates) and relations
        ((from key, type, to key) -> created) the times a file says they have."""
        with self.db.write() as tx:
            conn = tx.conn
            for key, (created, updated, contents, dates) in entities.items():
                row = conn.execute("SELECT id FROM entities WHERE name_key = %s", (key,)).fetchone()
                if row is None:
                    continue
                for content, at in zip(contents, dates):
                    conn.execute("""UPDATE memories SET created_at = %s, updated_at = %s
                                    WHERE entity_id = %s AND content = %s""", (at, at, row[0], content))
                conn.execute("UPDATE entities SET created_at = %s, updated_at = %s WHERE id = %s",
                             (created, updated, row[0]))
            for (f, rt, t), at in relations.items():
                conn.execute("""UPDATE relations SET created_at = %s WHERE relation_type = %s
                                AND from_id = (SELECT id FROM entities WHERE name_key = %s)
                                AND to_id = (SELECT id FROM entities WHERE name_key = %s)""", (at, rt, f, t))
            if entities or relations:
                tx.journal(origin, "restore_dates", [],
                              {"entities": len(entities), "relations": len(relations)}, now_iso())

    def copy_memories(self, memories: Sequence[Memory], vectors: Mapping[int, Any], model: str | None,
                      *, origin: str, on_batch: Callable[[int], None] | None = None) -> int:
        """Every memory of a library, observations included (store.MemoryCopies): each as the
        source holds it (its type, tags, importance, metadata, dates and use counts), in the
        given order (conversation threads keep their neighbours), with its vector where
        `vectors` (source memory id -> vector, of `model`) has one; the owners are the entities
        already here, by name. One write transaction, the rows by COPY: one INSERT a memory
        costs a round trip each, and keeping the full-text, trigram and HNSW indexes row by row
        far more than building them once, so they are dropped and built again at the end
        (the unique index of texts per owner with them: a text given twice for one owner fails
        it, rolling the whole copy back). Into a library whose memories table is empty only
        (service/migrate.py's target). Content hashes are computed here from the text and the owner's
        name, as every write computes them. Returns how many memories were copied."""
        at = now_iso()
        with self.db.write("memories") as tx:
            conn = tx.conn
            if conn.execute("SELECT EXISTS (SELECT 1 FROM memories)").fetchone()[0]:
                raise ValidationError(f"library '{self.db.name}' holds memories already: "
                                      "memories are copied only into a library that has none")
            owners = {key: (int(i), name) for i, key, name in conn.execute("SELECT id, name_key, name FROM entities")}
            missing = sorted({m.entity for m in memories if m.entity and name_key(m.entity) not in owners})
            if missing:
                raise NotFoundError(f"entity: '{missing[0]}' does not exist ({len(missing)} owner(s) missing)",
                                    details={MISSING_ENTITY: missing[0]})
            deferred = drop_secondary_indexes(conn)
            if vectors:
                if model is None:
                    raise ValueError("model: vectors given without the model that made them")
                claim_model(conn, self.db.name, model, len(next(iter(vectors.values()))))
                deferred.update(drop_secondary_indexes(conn))  # (claim_model made the HNSW index)
            sequence = conn.execute("SELECT pg_get_serial_sequence('memories', 'id')").fetchone()[0]
            ids = [int(r[0]) for r in conn.execute("SELECT nextval(%s) FROM generate_series(1, %s)",
                                                   (sequence, len(memories)))] if memories else []
            threads = [thread_key(owners[name_key(m.entity)][0] if m.entity else None, m.memory_type, m.metadata)
                       for m in memories]
            contexts = _thread_contexts(memories, threads)
            for start in range(0, len(memories), COPY_BATCH):
                chunk = range(start, min(start + COPY_BATCH, len(memories)))
                with conn.cursor().copy("""COPY memories (id, entity_id, content, content_hash, memory_type, tags,
                                           importance, metadata, created_at, updated_at, access_count,
                                           last_accessed_at, thread, context, embedded) FROM STDIN""") as copy:
                    for k in chunk:
                        m = memories[k]
                        owner = owners[name_key(m.entity)] if m.entity else None
                        copy.write_row((ids[k], owner[0] if owner else None, m.content,
                                        content_hash(m.content, owner[1] if owner else None), m.memory_type,
                                        json.dumps(list(m.tags), ensure_ascii=False),
                                        None if m.importance == "medium" else m.importance,
                                        json.dumps(m.metadata, ensure_ascii=False), m.created_at, m.updated_at,
                                        m.access_count, m.last_accessed_at, threads[k], contexts[k],
                                        m.id in vectors))
                with conn.cursor().copy("COPY memory_tags (tag, memory_id) FROM STDIN") as copy:
                    for k in chunk:
                        for key in tag_keys(memories[k].tags):
                            copy.write_row((key, ids[k]))
                with_vectors = [k for k in chunk if memories[k].id in vectors]
                if with_vectors:
                    with conn.cursor().copy("COPY memory_vectors (memory_id, embedding) FROM STDIN (FORMAT binary)") as copy:
                        copy.write(vectors_copy_data([ids[k] for k in with_vectors],
                                                     [vectors[memories[k].id] for k in with_vectors]))
                if on_batch is not None:
                    on_batch(len(chunk))
            # as every other write leaves them: each index built once now, over every row
            conn.execute(f"SET LOCAL maintenance_work_mem = '{min(4096, max(256, len(memories) // 400))}MB'")
            for ddl in deferred.values():
                conn.execute(ddl)
            conn.execute("ANALYZE memories, memory_tags, memory_vectors")
            # the owners: their #tags and their full text take in their observations
            held = sorted({owners[name_key(m.entity)][0] for m in memories if m.entity})
            retag(conn, sorted({owners[name_key(m.entity)][0] for m in memories if m.entity and "#" in m.content}))
            reindex(conn, held)
            copied = sum(1 for m in memories if m.id in vectors)
            if copied:
                bump_vectors(conn, copied)
            tx.journal(origin, "copy_memories", [],
                          {"memories": len(memories), "vectors": copied}, at)
        return len(memories)

    # -- backups ---------------------------------------------------------------------------

    def note_backup(self, at: str, path: str) -> None:
        """Remember the last successful backup (health reports it)."""
        with self.db.write("meta") as tx:
            conn = tx.conn
            conn.execute("""INSERT INTO meta VALUES ('last_backup', %s)
                            ON CONFLICT (key) DO UPDATE SET value = excluded.value""",
                         (json.dumps({"at": at, "path": path}, ensure_ascii=False),))

    def last_backup(self) -> dict[str, str] | None:
        with self.db.read() as conn:
            row = conn.execute("SELECT value FROM meta WHERE key = 'last_backup'").fetchone()
        return json.loads(row[0]) if row else None

    def note_event(self, action: str, detail: dict[str, Any], *, vectors_floor: int = 0) -> None:
        """A journal entry for a change made outside the tools (a restore). `vectors_floor`: the
        vectors' version before it; the new one is higher, so running servers reload their vectors."""
        with self.db.write("vectors") as tx:
            conn = tx.conn
            tx.journal(action, action, [], detail, now_iso())
            current = bump_vectors(conn)
            if current <= vectors_floor:
                bump_vectors(conn, vectors_floor + 1 - current)

    def holds_data(self) -> int:
        """How many entities, memories and relations the library holds."""
        with self.db.read() as conn:
            return conn.execute("SELECT (SELECT count(*) FROM entities) + (SELECT count(*) FROM memories) "
                                "+ (SELECT count(*) FROM relations)").fetchone()[0]


def _thread_contexts(memories: Sequence[Memory], threads: Sequence[str]) -> list[str]:
    """Each memory's context: the texts of the memories just before and after it in its thread
    (in the given order, which is id order once copied), as insert_memory keeps it."""
    contexts = [""] * len(memories)
    last: dict[str, int] = {}
    for k, thread in enumerate(threads):
        if not thread:
            continue
        before = last.get(thread)
        if before is not None:
            contexts[k] = memories[before].content
            contexts[before] = "\n".join(t for t in (contexts[before], memories[k].content) if t)
        last[thread] = k
    return contexts
