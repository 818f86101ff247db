"""Memories in the SQLite engine: the calls of the Store protocols over memory_rows.py's rows
and vectors.py's vectors.

Every memory (a free one, or an observation of an entity) lives in `memories`, is indexed
in `memory_fts` (its words; its thread neighbours' words and its tags and type in
lower-weight columns) and in `memory_grams` (trigrams, for Chinese/Japanese and substrings),
and gets a vector when the embedder reaches it (`embedded` flags the ones still waiting).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from memloci.core.lazy import on_first_use
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
    links_data,
    now_iso,
    tag_keys,
)
from memloci.rules import graph as rules
from memloci.rules import lifecycle, undo
from memloci.store.sqlite.database import Database
from memloci.store.sqlite.memory_rows import (
    filter_sql,
    insert_memory,
    lexical_candidates,
    load_memories,
    memory_hash,
    neighbours,
    refresh_context,
    reindex_content,
    retired_exist,
    select_memories,
    set_tags,
)
from memloci.store.sqlite.passages import pending_passage_count, reset_passage_vectors
from memloci.store.sqlite.rows import journal, refresh_fts, resolve
from memloci.store.sqlite.tx import WriteTx
from memloci.store.sqlite.undo_rows import keep_before
from memloci.store.sqlite.vault import retag
from memloci.store.sqlite.vectors import claim_model, library_meta, pack, set_library_meta, unpack_many, vectors_version

if TYPE_CHECKING:
    import numpy as np
else:  # imported on first use: the server's start does not need it (core/lazy.py)
    np = on_first_use("numpy", globals(), "np")


class SQLiteMemories:
    """Memories and their vectors in one library's Database."""

    def __init__(self, db: Database):
        self.db = db

    def store_memory(self, m: MemoryInput, *, origin: str) -> StoredMemory:
        """Store one memory; `created` False if its owner already holds the same text."""
        at = now_iso()
        with self.db.write() as tx:
            conn = tx.conn
            entity_id = _entity_id(conn, m.entity)
            memory_id = insert_memory(conn, entity_id, m.content, m.memory_type, m.tags, m.importance, m.metadata, at)
            if memory_id is None:
                (existing,) = conn.execute(
                    "SELECT id FROM memories WHERE ifnull(entity_id, 0) = ? AND content_hash = ?",
                    (entity_id or 0, memory_hash(conn, m.content, entity_id))).fetchone()
                memory = load_memories(conn, [existing])[existing]
                new_tags = rules.tags_told_again(memory.tags, m.tags)
                if new_tags:  # the same memory, told again with more tags: keep them all
                    keep_before(tx, memory_ids=[existing])  # a change like update_memory: journaled, undoable
                    tags = [*memory.tags, *new_tags]
                    conn.execute("UPDATE memories SET tags = ?, updated_at = ? WHERE id = ?",
                                 (json.dumps(tags, ensure_ascii=False), at, existing))
                    conn.executemany("INSERT OR IGNORE INTO memory_tags (tag, memory_id) VALUES (?, ?)",
                                     [(t, existing) for t in tag_keys(new_tags)])
                    memory = load_memories(conn, [existing])[existing]
                    journal(tx, origin, "store_memory", [memory.entity] if memory.entity else [],
                            rules.tags_added_detail(memory, new_tags))
                return StoredMemory(memory, False)
            if m.links and entity_id is None:  # what a free memory mentions, stored with it
                conn.execute("UPDATE memories SET links = ? WHERE id = ?",
                             (json.dumps(links_data(m.links), ensure_ascii=False), memory_id))
            if entity_id is not None:
                conn.execute("UPDATE entities SET updated_at = ? WHERE id = ?", (at, entity_id))
                retag(conn, [entity_id])  # an observation's #tags are its entity's tags
                refresh_fts(conn, [entity_id])
            memory = load_memories(conn, [memory_id])[memory_id]
            if entity_id is None:  # a free memory stored is undone by removing it (an observation: by a delete)
                undo.keep_new_memory(tx.record, memory.content_hash)
            journal(tx, origin, "store_memory", [memory.entity] if memory.entity else [],
                    {"content_hash": memory.content_hash, "content": memory.content, "tags": list(memory.tags)})
        return StoredMemory(memory, True)

    def memories_by_hash(self, content_hash: str) -> list[Memory]:
        with self.db.read() as conn:
            return select_memories(conn, "m.content_hash = ?", (content_hash,))

    def update_memory(self, memory_id: int, *, content: str | None, tags: Sequence[str] | None,
                      metadata: dict[str, Any] | None, importance: str | None, origin: str) -> Memory:
        at = now_iso()
        with self.db.write() as tx:
            conn = tx.conn
            before = load_memories(conn, [memory_id]).get(memory_id)
            if before is None:
                raise rules.memory_gone()
            keep_before(tx, memory_ids=[memory_id])
            sets, params = ["updated_at = ?"], [at]
            if content is not None and content != before.content:
                owner = conn.execute("SELECT entity_id FROM memories WHERE id = ?", (memory_id,)).fetchone()[0]
                new_hash = memory_hash(conn, content, owner)
                clash = conn.execute("SELECT 1 FROM memories WHERE ifnull(entity_id, 0) = (SELECT ifnull(entity_id, 0) "
                                     "FROM memories WHERE id = ?) AND content_hash = ? AND id != ?",
                                     (memory_id, new_hash, memory_id)).fetchone()
                if clash:
                    raise rules.memory_text_taken()
                sets += ["content = ?", "content_hash = ?", "embedded = 0"]
                params += [content, new_hash]
                conn.execute("DELETE FROM memory_vectors WHERE memory_id = ?", (memory_id,))
                reindex_content(conn, memory_id, content)
            if tags is not None:
                sets.append("tags = ?")
                params.append(json.dumps(list(tags), ensure_ascii=False))
                conn.execute("DELETE FROM memory_tags WHERE memory_id = ?", (memory_id,))
                conn.executemany("INSERT OR IGNORE INTO memory_tags (tag, memory_id) VALUES (?, ?)",
                                 [(t, memory_id) for t in tag_keys(tags)])
            if metadata is not None:
                sets.append("metadata = ?")
                params.append(json.dumps({**before.metadata, **metadata}, ensure_ascii=False))
            if importance is not None:
                sets.append("importance = ?")
                params.append(importance)
            conn.execute(f"UPDATE memories SET {', '.join(sets)} WHERE id = ?", (*params, memory_id))
            if content is not None and content != before.content:
                refresh_context(conn, neighbours(conn, memory_id))
                owner = conn.execute("SELECT entity_id FROM memories WHERE id = ?", (memory_id,)).fetchone()[0]
                if owner is not None:
                    retag(conn, [owner])  # an observation's #tags are its entity's tags
                    refresh_fts(conn, [owner])
            after = load_memories(conn, [memory_id])[memory_id]
            journal(tx, origin, "update_memory", [after.entity] if after.entity else [], rules.update_detail(before, after))
        return after

    def delete_memories(self, ids: Sequence[int], *, origin: str) -> list[Memory]:
        with self.db.write() as tx:
            conn = tx.conn
            removed = list(load_memories(conn, ids).values())
            keep_before(tx, memory_ids=[m.id for m in removed])
            around = {n for m in removed for n in neighbours(conn, m.id)} - {m.id for m in removed}
            owners = {r[0] for r in conn.execute(
                f"SELECT DISTINCT entity_id FROM memories WHERE entity_id IS NOT NULL AND id IN ({','.join('?' * len(ids))})",
                list(ids))} if ids else set()
            conn.executemany("DELETE FROM memories WHERE id = ?", [(m.id,) for m in removed])
            refresh_context(conn, around)
            if owners:
                retag(conn, list(owners))  # an observation's #tags are its entity's tags
                refresh_fts(conn, owners)
            if removed:
                journal(tx, origin, "delete_memory", [m.entity for m in removed if m.entity],
                              {"removed": [{"content": m.content, "tags": list(m.tags), "memory_type": m.memory_type,
                                            "metadata": m.metadata} for m in removed]})
        return removed

    def change_memories(self, edits: Sequence[MemoryEdit], new: Sequence[NewMemory], *, origin: str, action: str,
                        detail: dict[str, Any], expect: Sequence[MemoryEdit] = (),
                        preview_id: int | None = None) -> ChangedMemories:
        """Apply a lifecycle change to free memories in one transaction with one journal entry
        (rules/lifecycle.py `apply`): refused with nothing changed if any memory differs from what
        the preview saw."""
        at = now_iso()
        with self.db.write() as tx:
            return lifecycle.apply(_LifecycleRows(tx), edits, new, origin=origin, action=action, detail=detail,
                                   expect=expect, preview_id=preview_id, at=at)

    def list_memories(self, *, offset: int, limit: int, filters: MemoryFilter, count: bool = True) -> MemoryPage:
        with self.db.read() as conn:
            where, params = filter_sql(filters, conn)
            total = conn.execute(f"SELECT count(*) FROM memories m WHERE {where}", params).fetchone()[0] if count else -1
            return MemoryPage(tuple(select_memories(conn, where, params, "m.created_at DESC, m.id DESC", limit, offset)),
                              total)

    def lexical_memory_candidates(self, terms: list[str], grams: list[str], k: int,
                                  filters: MemoryFilter) -> dict[int, float]:
        with self.db.read() as conn:
            where, params = filter_sql(filters, conn)
            return lexical_candidates(conn, terms, grams, k, where, params)

    def memory_ids(self, filters: MemoryFilter) -> set[int]:
        with self.db.read() as conn:
            if (filters.tags and not filters.match_all and filters == MemoryFilter(tags=filters.tags)
                    and not retired_exist(conn)):
                keys = tag_keys(filters.tags)  # tags only: the tag index alone answers
                return {r[0] for r in conn.execute(f"SELECT memory_id FROM memory_tags WHERE tag IN ({','.join('?' * len(keys))})",
                                                   keys)}
            where, params = filter_sql(filters, conn)
            return {r[0] for r in conn.execute(f"SELECT m.id FROM memories m WHERE {where}", params)}

    def load_memories(self, ids: Sequence[int]) -> dict[int, Memory]:
        with self.db.read() as conn:
            return load_memories(conn, ids)

    def touch_memories(self, ids: Sequence[int]) -> None:
        """Count a retrieval of each memory (access_count, last_accessed_at)."""
        if not ids:
            return
        at = now_iso()
        with self.db.write() as tx:
            conn = tx.conn
            conn.executemany("UPDATE memories SET access_count = access_count + 1, last_accessed_at = ? WHERE id = ?",
                             [(at, i) for i in ids])  # one count per retrieval, repeats included

    # -- vectors ---------------------------------------------------------------------------

    def pending_embeddings(self, limit: int) -> list[PendingMemory]:
        """Memories still waiting for a vector, in id order."""
        with self.db.read() as conn:
            return [PendingMemory(*row) for row in conn.execute(
                "SELECT id, content, content_hash, thread FROM memories WHERE embedded = 0 ORDER BY id LIMIT ?", (limit,))]

    def save_vectors(self, items: Sequence[tuple[int, str, np.ndarray]], model: str) -> SavedVectors:
        """Store vectors of (id, content_hash it was computed from, vector); returns the ids
        saved (a memory whose text changed meanwhile is skipped) and the new vectors version."""
        saved = []
        with self.db.write() as tx:
            conn = tx.conn
            claim_model(conn, self.db.name, model, len(items[0][2]) if items else 0)
            for memory_id, chash, vector in items:
                cur = conn.execute("UPDATE memories SET embedded = 1 WHERE id = ? AND content_hash = ?", (memory_id, chash))
                if cur.rowcount:
                    conn.execute("INSERT OR REPLACE INTO memory_vectors (memory_id, vector) VALUES (?, ?)",
                                 (memory_id, pack(vector)))
                    saved.append(memory_id)
            return SavedVectors(tuple(saved), vectors_version(conn))

    def load_vectors(self) -> MemoryVectors:
        """Every stored vector (ids, threads, matrix, vectors version, model), in id order."""
        with self.db.read() as conn:
            model = library_meta(conn, "embedding_model")
            dimension = int(library_meta(conn, "embedding_dimension") or 0)
            rows = conn.execute("""SELECT v.memory_id, m.thread, v.vector FROM memory_vectors v
                                   JOIN memories m ON m.id = v.memory_id ORDER BY v.memory_id""").fetchall()
            version = vectors_version(conn)
        ids = np.array([r[0] for r in rows], dtype=np.int64)
        return MemoryVectors(ids, [r[1] for r in rows], unpack_many([r[2] for r in rows], dimension or 1), version, model)

    def vectors_version(self) -> int:
        with self.db.read() as conn:
            return vectors_version(conn)

    def reset_vectors(self, model: str, dimension: int) -> int:
        """Forget every vector (the library switches to `model`); returns how many memories wait."""
        with self.db.write() as tx:
            conn = tx.conn
            conn.execute("DELETE FROM memory_vectors")
            conn.execute("UPDATE memories SET embedded = 0")
            passages = reset_passage_vectors(conn)  # note bodies' passages wait for the new model too
            set_library_meta(conn, "embedding_model", model)
            set_library_meta(conn, "embedding_dimension", str(dimension))
            journal(tx, "reindex", "reset_vectors", [], {"model": model, "dimension": dimension})
            return conn.execute("SELECT count(*) FROM memories").fetchone()[0] + passages

    def vector_model(self) -> str | None:
        """The embedding model of the library's vectors (None before the first one)."""
        with self.db.read() as conn:
            return library_meta(conn, "embedding_model")

    def pending_count(self) -> int:
        """Memories still waiting for a vector (a partial index makes this cheap)."""
        with self.db.read() as conn:
            return conn.execute("SELECT count(*) FROM memories WHERE embedded = 0").fetchone()[0]

    def embedding_state(self) -> dict[str, Any]:
        with self.db.read() as conn:
            return {
                "model": library_meta(conn, "embedding_model"),
                "dimension": int(library_meta(conn, "embedding_dimension") or 0) or None,
                "pending": conn.execute("SELECT count(*) FROM memories WHERE embedded = 0").fetchone()[0]
                + pending_passage_count(conn),
                "tags": conn.execute("SELECT count(DISTINCT tag) FROM memory_tags").fetchone()[0],
            }


def _entity_id(conn: sqlite3.Connection, name: str | None) -> int | None:
    if not name:
        return None
    found = resolve(conn, [name])
    if not found:
        raise rules.memory_owner_missing(name)
    return next(iter(found.values()))[0]


class _LifecycleRows:
    """rules/lifecycle.py's LifecycleTx over one SQLite write transaction."""

    def __init__(self, tx: WriteTx):
        self.tx = tx
        self.conn = tx.conn

    def load(self, ids: Sequence[int]) -> dict[int, Memory]:
        return load_memories(self.conn, ids)

    def claim_preview(self, preview_id: int, at: str) -> bool:
        return bool(self.conn.execute("UPDATE previews SET executed_at = ? WHERE id = ? AND executed_at IS NULL",
                                      (at, preview_id)).rowcount)

    def keep(self, ids: Sequence[int]) -> None:
        keep_before(self.tx, memory_ids=ids)

    def absorb(self, keeper: int, ids: Sequence[int]) -> None:
        self.conn.execute(f"UPDATE memories SET access_count = access_count + (SELECT ifnull(sum(access_count), 0) "
                          f"FROM memories WHERE id IN ({','.join('?' * len(ids))})) WHERE id = ?", (*ids, keeper))

    def delete(self, ids: Sequence[int]) -> None:
        around = {n for i in ids for n in neighbours(self.conn, i)} - set(ids)
        self.conn.executemany("DELETE FROM memories WHERE id = ?", [(i,) for i in ids])
        refresh_context(self.conn, around)

    def update(self, memory_id: int, fields: Mapping[str, Any], at: str) -> None:
        names = list(fields)  # checked against EDITABLE_FIELDS (rules/lifecycle.py check_edits)
        values = [json.dumps(list(v) if k == "tags" else v, ensure_ascii=False) if k in ("tags", "metadata", "links")
                  else v for k, v in fields.items()]
        self.conn.execute(f"UPDATE memories SET updated_at = ?, {', '.join(f'{k} = ?' for k in names)} WHERE id = ?",
                          (at, *values, memory_id))
        if "tags" in fields:
            set_tags(self.conn, memory_id, fields["tags"])

    def insert(self, new: NewMemory, at: str) -> int | None:
        m = new.memory
        memory_id = insert_memory(self.conn, None, m.content, m.memory_type, m.tags, m.importance, m.metadata, at)
        if memory_id is not None and new.links:
            self.conn.execute("UPDATE memories SET links = ? WHERE id = ?",
                              (json.dumps(links_data(new.links), ensure_ascii=False), memory_id))
        return memory_id

    def created(self, content_hash: str) -> None:
        undo.keep_new_memory(self.tx.record, content_hash)

    def journal(self, origin: str, action: str, detail: dict[str, Any], at: str) -> int:
        journal(self.tx, origin, action, [], detail)
        return int(self.tx.record["last_row"])

    def record_change(self, preview_id: int, change_id: int) -> None:
        self.conn.execute("UPDATE previews SET change_id = ? WHERE id = ?", (change_id, preview_id))
