"""Memories in the SQLite engine: storing, filtering, full text, vectors.

Every memory (a free one, or an observation of an entity) lives in `memories`, is indexed
in `memory_fts` (its words; its thread neighbours' words and its tags and type in
lower-weight columns) and in `memory_grams` (trigrams, for Chinese/Japanese and substrings),
and gets a vector when the embedder reaches it (`embedded` flags the ones still waiting).
Tags and types compare case-insensitively and keep the case they were written in:
`memory_tags` holds each tag's key (model.name_key), `memories.tags` the tags as written.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from memloci.core import bm25, query_text
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
from memloci.core.query_text import cjk_grams
from memloci.rules import graph as rules
from memloci.store.sqlite.host import SQLiteHost

_MEMORY_COLUMNS = """m.id, m.content, m.content_hash, m.tags, m.memory_type, m.importance, m.metadata,
    m.created_at, m.updated_at, m.access_count, m.last_accessed_at, e.name"""
# own words, neighbours' words, tags and type: a label counts as a word of its own, below the text,
# so machine tags ("dia:D1:3") never outweigh what a memory says
_BM25 = bm25.fts5_weights("memory_fts", bm25.MEMORY_WEIGHTS)
_HIRAGANA = re.compile(r"[\u3040-\u309f]")


def labels_text(tags: Sequence[str], memory_type: str) -> str:
    """What memory_fts.labels holds (as the trigger of migration 6 computes it)."""
    return " ".join(sorted({t.lower() for t in tags} | {memory_type.lower()}))


def _memory(row: tuple) -> Memory:
    (id_, content, chash, tags, mtype, importance, metadata, created, updated, count, accessed, entity) = row
    return Memory(id_, content, chash, tuple(json.loads(tags)), mtype, importance or "medium", json.loads(metadata),
                  created, updated, count, accessed, entity)


def memory_hash(conn: sqlite3.Connection, content: str, entity_id: int | None) -> str:
    """The content_hash of a memory of this owner: its text and its entity's name, never a row id."""
    if entity_id is None:
        return content_hash(content)
    return content_hash(content, conn.execute("SELECT name FROM entities WHERE id = ?", (entity_id,)).fetchone()[0])


def insert_memory(conn: sqlite3.Connection, entity_id: int | None, content: str, memory_type: str,
                  tags: Sequence[str], importance: str | None, metadata: dict[str, Any], at: str) -> int | None:
    """Insert one memory with its index rows; None if its owner already holds the same text."""
    thread = thread_key(entity_id, memory_type, metadata)
    cur = conn.execute(
        """INSERT OR IGNORE INTO memories (entity_id, content, content_hash, memory_type, tags, importance, metadata,
                                           created_at, updated_at, thread)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
        (entity_id, content, memory_hash(conn, content, entity_id), memory_type, json.dumps(list(tags), ensure_ascii=False),
         importance, json.dumps(metadata, ensure_ascii=False), at, at, thread),
    )
    if not cur.rowcount:
        return None
    memory_id = cur.lastrowid
    assert memory_id is not None  # a row was inserted
    conn.executemany("INSERT OR IGNORE INTO memory_tags (tag, memory_id) VALUES (?, ?)",
                     [(t, memory_id) for t in tag_keys(tags)])
    around = _neighbours(conn, memory_id, thread)
    conn.execute("INSERT INTO memory_fts (rowid, content, context, labels) VALUES (?, ?, ?, ?)",
                 (memory_id, content, "\n".join(text for _, text in around), labels_text(tags, memory_type)))
    conn.execute("INSERT INTO memory_grams (rowid, content) VALUES (?, ?)", (memory_id, content))
    _index_pairs(conn, memory_id, content)
    refresh_context(conn, [i for i, _ in around])  # the previous one now has this one as its next neighbour
    return memory_id


def _index_pairs(conn: sqlite3.Connection, memory_id: int, content: str) -> None:
    """A memory's Chinese/Japanese runs as two-character tokens (memory_pairs), only for memories
    that have any: a question shares words such as 東京 and 旅行 with a memory, rarely three
    characters in a row, and a two-character word is below the trigram index's reach."""
    pairs = cjk_grams(content)
    if pairs:
        conn.execute("INSERT INTO memory_pairs (rowid, content) VALUES (?, ?)", (memory_id, pairs))


def reindex_content(conn: sqlite3.Connection, memory_id: int, content: str) -> None:
    """Point the full-text indexes of a memory at its new text (its labels and context stay)."""
    conn.execute("UPDATE memory_fts SET content = ? WHERE rowid = ?", (content, memory_id))
    conn.execute("UPDATE memory_grams SET content = ? WHERE rowid = ?", (content, memory_id))
    conn.execute("DELETE FROM memory_pairs WHERE rowid = ?", (memory_id,))
    _index_pairs(conn, memory_id, content)


def _neighbours(conn: sqlite3.Connection, memory_id: int, thread: str) -> list[tuple[int, str]]:
    """(id, content) of the memories just before and after this one in its thread."""
    if not thread:
        return []
    return conn.execute(
        """SELECT * FROM (SELECT id, content FROM memories WHERE thread = ?1 AND id < ?2 ORDER BY id DESC LIMIT 1)
           UNION ALL
           SELECT * FROM (SELECT id, content FROM memories WHERE thread = ?1 AND id > ?2 ORDER BY id LIMIT 1)""",
        (thread, memory_id),
    ).fetchall()


def neighbours(conn: sqlite3.Connection, memory_id: int) -> list[int]:
    row = conn.execute("SELECT thread FROM memories WHERE id = ?", (memory_id,)).fetchone()
    return [i for i, _ in _neighbours(conn, memory_id, row[0])] if row else []


def refresh_context(conn: sqlite3.Connection, ids: Iterable[int]) -> None:
    for memory_id in ids:
        row = conn.execute("SELECT thread FROM memories WHERE id = ?", (memory_id,)).fetchone()
        if row:
            context = "\n".join(text for _, text in _neighbours(conn, memory_id, row[0]))
            conn.execute("UPDATE memory_fts SET context = ? WHERE rowid = ?", (context, memory_id))


def filter_sql(f: MemoryFilter, conn: sqlite3.Connection) -> tuple[str, list[Any]]:
    """A WHERE clause over `memories m` for a filter (raises NOT_FOUND for an unknown entity)."""
    where: list[str] = ["1"]
    params: list[Any] = []
    if f.memory_type:  # case-insensitive; NOCASE folds ASCII only, so other scripts go through name_key
        if f.memory_type.isascii():
            where.append("m.memory_type = ? COLLATE NOCASE")
            params.append(f.memory_type)
        else:
            where.append("memloci_name_key(m.memory_type) = ?")
            params.append(name_key(f.memory_type))
    if f.entity:
        row = conn.execute("SELECT id FROM entities WHERE name_key = ?", (name_key(f.entity),)).fetchone()
        if not row:
            raise NotFoundError(f"entity: '{f.entity}' does not exist")
        where.append("m.entity_id = ?")
        params.append(row[0])
    if f.after:
        where.append("m.created_at >= ?")
        params.append(f.after)
    if f.before:
        where.append("m.created_at < ?")
        params.append(f.before)
    if f.tags:
        # IN (subquery on the tag index) is one pass over the tag's rows, not a probe per memory
        keys = tag_keys(f.tags)
        marks = ",".join("?" * len(keys))
        if f.match_all:
            where.append(f"m.id IN (SELECT memory_id FROM memory_tags WHERE tag IN ({marks}) "
                         f"GROUP BY memory_id HAVING count(*) = ?)")
            params += [*keys, len(keys)]
        else:
            where.append(f"m.id IN (SELECT memory_id FROM memory_tags WHERE tag IN ({marks}))")
            params += keys
    return " AND ".join(where), params


def load_memories(conn: sqlite3.Connection, ids: Sequence[int]) -> dict[int, Memory]:
    found: dict[int, Memory] = {}
    for i in range(0, len(ids), 500):
        chunk = list(ids[i : i + 500])
        for row in conn.execute(
            f"""SELECT {_MEMORY_COLUMNS} FROM memories m LEFT JOIN entities e ON e.id = m.entity_id
                WHERE m.id IN ({",".join("?" * len(chunk))})""", chunk):
            found[row[0]] = _memory(row)
    return {i: found[i] for i in ids if i in found}


def select_memories(conn: sqlite3.Connection, where: str, params: Sequence[Any], order: str = "m.id",
                    limit: int = -1, offset: int = 0) -> list[Memory]:
    return [_memory(r) for r in conn.execute(
        f"""SELECT {_MEMORY_COLUMNS} FROM memories m LEFT JOIN entities e ON e.id = m.entity_id
            WHERE {where} ORDER BY {order} LIMIT ? OFFSET ?""", (*params, limit, offset))]


def lexical_candidates(conn: sqlite3.Connection, terms: list[str], grams: list[str], k: int,
                       where: str, params: Sequence[Any]) -> dict[int, float]:
    """memory id -> BM25 relevance (higher is better) for the query words, and trigram hits."""
    found: dict[int, float] = {}
    filtered = where != "1"
    if terms:
        sql = f"""SELECT f.rowid, {_BM25} AS s FROM memory_fts f
                  {"JOIN memories m ON m.id = f.rowid" if filtered else ""}
                  WHERE memory_fts MATCH ? {"AND " + where if filtered else ""} ORDER BY s LIMIT ?"""
        for rowid, score in conn.execute(sql, (query_text.match_any(terms), *params, k) if filtered
                                         else (query_text.match_any(terms), k)):
            found[rowid] = -score
    # Runs of Chinese/Japanese: BM25 over the trigram index with every trigram of the run, so a
    # question finds a memory sharing part of its wording, and over the two-character index with
    # every pair of the run, so it finds one sharing its words (東京, 旅行) in another order.
    trigrams = list(dict.fromkeys(run[i : i + 3] for run in grams if len(run) >= 3 for i in range(len(run) - 2)))
    # (pairs with a hiragana character are mostly particles and endings, "の旅", "行の": left out)
    pairs = list(dict.fromkeys(p for run in grams for p in (run[i : i + 2] for i in range(len(run) - 1))
                               if not _HIRAGANA.search(p)))
    for table, tokens in (("memory_grams", trigrams), ("memory_pairs", pairs)):
        if not tokens:
            continue
        expr = " OR ".join('"' + t.replace('"', '""') + '"' for t in tokens)
        sql = f"""SELECT g.rowid, bm25({table}) AS s FROM {table} g
                  {"JOIN memories m ON m.id = g.rowid" if filtered else ""}
                  WHERE {table} MATCH ? {"AND " + where if filtered else ""} ORDER BY s LIMIT ?"""
        for rowid, score in conn.execute(sql, (expr, *params, k) if filtered else (expr, k)):
            found[rowid] = found.get(rowid, 0.0) - score
    return found


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



class SQLiteMemories(SQLiteHost):
    """The memory half of SQLiteStore (mixed in; uses its _write, _read, _resolve, _journal)."""

    def store_memory(self, m: MemoryInput, *, origin: str) -> StoredMemory:
        """Store one memory; `created` False if its owner already holds the same text."""
        at = now_iso()
        with self._write() as conn:
            entity_id = self._entity_id(conn, m.entity)
            memory_id = insert_memory(conn, entity_id, m.content, m.memory_type, m.tags, m.importance, m.metadata, at)
            if memory_id is None:
                (existing,) = conn.execute(
                    "SELECT id FROM memories WHERE ifnull(entity_id, 0) = ? AND content_hash = ?",
                    (entity_id or 0, memory_hash(conn, m.content, entity_id))).fetchone()
                memory = load_memories(conn, [existing])[existing]
                new_tags = rules.tags_told_again(memory.tags, m.tags)
                if new_tags:  # the same memory, told again with more tags: keep them all
                    tags = [*memory.tags, *new_tags]
                    conn.execute("UPDATE memories SET tags = ?, updated_at = ? WHERE id = ?",
                                 (json.dumps(tags, ensure_ascii=False), at, existing))
                    conn.executemany("INSERT OR IGNORE INTO memory_tags (tag, memory_id) VALUES (?, ?)",
                                     [(t, existing) for t in tag_keys(new_tags)])
                    memory = load_memories(conn, [existing])[existing]
                return StoredMemory(memory, False)
            if entity_id is not None:
                conn.execute("UPDATE entities SET updated_at = ? WHERE id = ?", (at, entity_id))
                self._retag(conn, [entity_id])  # an observation's #tags are its entity's tags
                self._refresh_fts(conn, [entity_id])
            memory = load_memories(conn, [memory_id])[memory_id]
            self._journal(conn, origin, "store_memory", [memory.entity] if memory.entity else [],
                          {"content_hash": memory.content_hash, "tags": list(memory.tags)})
        return StoredMemory(memory, True)

    def _entity_id(self, conn: sqlite3.Connection, name: str | None) -> int | None:
        if not name:
            return None
        found = self._resolve(conn, [name])
        if not found:
            raise rules.memory_owner_missing(name)
        return next(iter(found.values()))[0]

    def memories_by_hash(self, content_hash: str) -> list[Memory]:
        with self._read() as conn:
            return select_memories(conn, "m.content_hash = ?", (content_hash,))

    def update_memory(self, memory_id: int, *, content: str | None, tags: Sequence[str] | None,
                      metadata: dict[str, Any] | None, importance: str | None, origin: str) -> Memory:
        at = now_iso()
        with self._write() as conn:
            before = load_memories(conn, [memory_id]).get(memory_id)
            if before is None:
                raise rules.memory_gone()
            self._before(conn, memory_ids=[memory_id])
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
                    self._retag(conn, [owner])  # an observation's #tags are its entity's tags
                    self._refresh_fts(conn, [owner])
            after = load_memories(conn, [memory_id])[memory_id]
            self._journal(conn, origin, "update_memory", [after.entity] if after.entity else [],
                          {"content_hash": before.content_hash, "before": {"content": before.content,
                           "tags": list(before.tags), "metadata": before.metadata, "importance": before.importance}})
        return after

    def delete_memories(self, ids: Sequence[int], *, origin: str) -> list[Memory]:
        with self._write() as conn:
            removed = list(load_memories(conn, ids).values())
            self._before(conn, memory_ids=[m.id for m in removed])
            around = {n for m in removed for n in neighbours(conn, m.id)} - {m.id for m in removed}
            owners = {r[0] for r in conn.execute(
                f"SELECT DISTINCT entity_id FROM memories WHERE entity_id IS NOT NULL AND id IN ({','.join('?' * len(ids))})",
                list(ids))} if ids else set()
            conn.executemany("DELETE FROM memories WHERE id = ?", [(m.id,) for m in removed])
            refresh_context(conn, around)
            if owners:
                self._retag(conn, list(owners))  # an observation's #tags are its entity's tags
                self._refresh_fts(conn, owners)
            if removed:
                self._journal(conn, origin, "delete_memory", [m.entity for m in removed if m.entity],
                              {"removed": [{"content": m.content, "tags": list(m.tags), "memory_type": m.memory_type,
                                            "metadata": m.metadata} for m in removed]})
        return removed

    def list_memories(self, *, offset: int, limit: int, filters: MemoryFilter, count: bool = True) -> MemoryPage:
        with self._read() as conn:
            where, params = filter_sql(filters, conn)
            total = conn.execute(f"SELECT count(*) FROM memories m WHERE {where}", params).fetchone()[0] if count else -1
            return MemoryPage(tuple(select_memories(conn, where, params, "m.created_at DESC, m.id DESC", limit, offset)),
                              total)

    def lexical_memory_candidates(self, terms: list[str], grams: list[str], k: int,
                                  filters: MemoryFilter) -> dict[int, float]:
        with self._read() as conn:
            where, params = filter_sql(filters, conn)
            return lexical_candidates(conn, terms, grams, k, where, params)

    def memory_ids(self, filters: MemoryFilter) -> set[int]:
        with self._read() as conn:
            if filters.tags and not filters.match_all and filters == MemoryFilter(tags=filters.tags):
                keys = tag_keys(filters.tags)  # tags only: the tag index alone answers
                return {r[0] for r in conn.execute(f"SELECT memory_id FROM memory_tags WHERE tag IN ({','.join('?' * len(keys))})",
                                                   keys)}
            where, params = filter_sql(filters, conn)
            return {r[0] for r in conn.execute(f"SELECT m.id FROM memories m WHERE {where}", params)}

    def load_memories(self, ids: Sequence[int]) -> dict[int, Memory]:
        with self._read() as conn:
            return load_memories(conn, ids)

    def touch_memories(self, ids: Sequence[int]) -> None:
        """Count a retrieval of each memory (access_count, last_accessed_at)."""
        if not ids:
            return
        at = now_iso()
        with self._write() as conn:
            conn.executemany("UPDATE memories SET access_count = access_count + 1, last_accessed_at = ? WHERE id = ?",
                             [(at, i) for i in ids])  # one count per retrieval, repeats included

    # -- vectors ---------------------------------------------------------------------------

    def pending_embeddings(self, limit: int) -> list[PendingMemory]:
        """Memories still waiting for a vector, in id order."""
        with self._read() as conn:
            return [PendingMemory(*row) for row in conn.execute(
                "SELECT id, content, content_hash, thread FROM memories WHERE embedded = 0 ORDER BY id LIMIT ?", (limit,))]

    def save_vectors(self, items: Sequence[tuple[int, str, np.ndarray]], model: str) -> SavedVectors:
        """Store vectors of (id, content_hash it was computed from, vector); returns the ids
        saved (a memory whose text changed meanwhile is skipped) and the new vectors version."""
        saved = []
        with self._write() as conn:
            claim_model(conn, self.name, model, len(items[0][2]) if items else 0)
            for memory_id, chash, vector in items:
                cur = conn.execute("UPDATE memories SET embedded = 1 WHERE id = ? AND content_hash = ?", (memory_id, chash))
                if cur.rowcount:
                    conn.execute("INSERT OR REPLACE INTO memory_vectors (memory_id, vector) VALUES (?, ?)",
                                 (memory_id, pack(vector)))
                    saved.append(memory_id)
            return SavedVectors(tuple(saved), vectors_version(conn))

    def load_vectors(self) -> MemoryVectors:
        """Every stored vector (ids, threads, matrix, vectors version, model), in id order."""
        with self._read() as conn:
            model = library_meta(conn, "embedding_model")
            dimension = int(library_meta(conn, "embedding_dimension") or 0)
            rows = conn.execute("""SELECT v.memory_id, m.thread, v.vector FROM memory_vectors v
                                   JOIN memories m ON m.id = v.memory_id ORDER BY v.memory_id""").fetchall()
            version = vectors_version(conn)
        ids = np.array([r[0] for r in rows], dtype=np.int64)
        return MemoryVectors(ids, [r[1] for r in rows], unpack_many([r[2] for r in rows], dimension or 1), version, model)

    def vectors_version(self) -> int:
        with self._read() as conn:
            return vectors_version(conn)

    def reset_vectors(self, model: str, dimension: int) -> int:
        """Forget every vector (the library switches to `model`); returns how many memories wait."""
        with self._write() as conn:
            conn.execute("DELETE FROM memory_vectors")
            conn.execute("UPDATE memories SET embedded = 0")
            from memloci.store.sqlite.passages import reset_passage_vectors  # (that module builds on this one)
            passages = reset_passage_vectors(conn)  # note bodies' passages wait for the new model too
            set_library_meta(conn, "embedding_model", model)
            set_library_meta(conn, "embedding_dimension", str(dimension))
            self._journal(conn, "reindex", "reset_vectors", [], {"model": model, "dimension": dimension})
            return conn.execute("SELECT count(*) FROM memories").fetchone()[0] + passages

    def vector_model(self) -> str | None:
        """The embedding model of the library's vectors (None before the first one)."""
        with self._read() as conn:
            return library_meta(conn, "embedding_model")

    def pending_count(self) -> int:
        """Memories still waiting for a vector (a partial index makes this cheap)."""
        with self._read() as conn:
            return conn.execute("SELECT count(*) FROM memories WHERE embedded = 0").fetchone()[0]

    def embedding_state(self) -> dict[str, Any]:
        from memloci.store.sqlite.passages import pending_passage_count
        with self._read() as conn:
            return {
                "model": library_meta(conn, "embedding_model"),
                "dimension": int(library_meta(conn, "embedding_dimension") or 0) or None,
                "pending": conn.execute("SELECT count(*) FROM memories WHERE embedded = 0").fetchone()[0]
                + pending_passage_count(conn),
                "tags": conn.execute("SELECT count(DISTINCT tag) FROM memory_tags").fetchone()[0],
            }
