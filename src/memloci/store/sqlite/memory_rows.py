"""Memory rows in the SQLite engine: storing, filtering, full text (memories.py holds the
calls of the Store protocols over them, vectors.py the bytes of their vectors).

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
from functools import lru_cache
from typing import Any

from memloci.core import bm25, query_text
from memloci.core.model import (
    Memory,
    MemoryFilter,
    content_hash,
    links_from,
    name_key,
    tag_keys,
    thread_key,
)
from memloci.core.query_text import cjk_grams
from memloci.rules.graph import memory_owner_missing

_MEMORY_COLUMNS = """m.id, m.content, m.content_hash, m.tags, m.memory_type, m.importance, m.metadata,
    m.created_at, m.updated_at, m.access_count, m.last_accessed_at, e.name, m.superseded_by, m.archived_at, m.links"""
# own words, neighbours' words, tags and type: a label counts as a word of its own, below the text,
# so machine tags ("dia:D1:3") never outweigh what a memory says
_BM25 = bm25.fts5_weights("memory_fts", bm25.MEMORY_WEIGHTS)
_HIRAGANA = re.compile(r"[\u3040-\u309f]")


def set_tags(conn: sqlite3.Connection, memory_id: int, tags: Sequence[str]) -> None:
    """A memory's tags as written (`memories.tags`) and their keys (`memory_tags`), both at once."""
    conn.execute("UPDATE memories SET tags = ? WHERE id = ?", (json.dumps(list(tags), ensure_ascii=False), memory_id))
    conn.execute("DELETE FROM memory_tags WHERE memory_id = ?", (memory_id,))
    conn.executemany("INSERT OR IGNORE INTO memory_tags (tag, memory_id) VALUES (?, ?)",
                     [(t, memory_id) for t in tag_keys(tags)])


def labels_text(tags: Sequence[str], memory_type: str) -> str:
    """What memory_fts.labels holds (as the trigger of migration 6 computes it)."""
    return " ".join(sorted({t.lower() for t in tags} | {memory_type.lower()}))


@lru_cache(maxsize=8192)
def _tags(text: str) -> tuple[str, ...]:
    """A tags column read (a tuple: shared safely). Searches load the same memories again and again."""
    return tuple(json.loads(text))


@lru_cache(maxsize=8192)
def _flat_metadata(text: str) -> dict[str, Any] | None:
    """A metadata column read, when its values are all plain (str, number, bool, null); None
    when one is a list or an object. Callers get a copy: a Memory's dict is its own."""
    value = json.loads(text)
    if isinstance(value, dict) and all(v is None or isinstance(v, (str, int, float)) for v in value.values()):
        return value
    return None


def _metadata(text: str) -> dict[str, Any]:
    if text == "{}":
        return {}
    flat = _flat_metadata(text)
    return dict(flat) if flat is not None else json.loads(text)


def _memory(row: tuple) -> Memory:
    (id_, content, chash, tags, mtype, importance, metadata, created, updated, count, accessed, entity,
     superseded_by, archived_at, links) = row
    # (no tags, no metadata, no links are most rows' columns: read without the JSON parser)
    return Memory(id_, content, chash, () if tags == "[]" else _tags(tags), mtype, importance or "medium",
                  _metadata(metadata), created, updated, count, accessed, entity,
                  superseded_by, archived_at, () if links == "[]" else links_from(json.loads(links)))


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
    if not (f.include_superseded and f.include_archived) and retired_exist(conn):
        # (asked only when the library holds any: most never do, and their searches stay unfiltered)
        if not f.include_superseded:
            where.append("m.superseded_by IS NULL")
        if not f.include_archived:
            where.append("m.archived_at IS NULL")
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
            raise memory_owner_missing(f.entity, hint=None)
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


def retired_exist(conn: sqlite3.Connection) -> bool:
    """Whether any memory is superseded or archived (one probe of a partial index)."""
    return conn.execute("SELECT 1 FROM memories WHERE superseded_by IS NOT NULL OR archived_at IS NOT NULL "
                        "LIMIT 1").fetchone() is not None


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
