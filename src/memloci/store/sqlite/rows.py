"""Rows every part of the SQLite engine reads and writes: names resolved to ids, entities
loaded whole, relations, the search index rows of entities, and the journal."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

from memloci.core.model import Entity, Observation, Relation, name_key, now_iso
from memloci.rules import undo
from memloci.store.sqlite.sql import chunks, marks
from memloci.store.sqlite.tx import WriteTx


def resolve(conn: sqlite3.Connection, names: Iterable[str]) -> dict[str, tuple[int, str]]:
    """name_key -> (id, stored name) for the names that exist."""
    keys = list(dict.fromkeys(name_key(n) for n in names))
    found: dict[str, tuple[int, str]] = {}
    for chunk in chunks(keys):
        for id_, name, key in conn.execute(
            f"SELECT id, name, name_key FROM entities WHERE name_key IN ({marks(len(chunk))})", chunk
        ):
            found[key] = (id_, name)
    return found


def refresh_fts(conn: sqlite3.Connection, ids: Iterable[int]) -> None:
    ids = list(dict.fromkeys(ids))
    conn.executemany("DELETE FROM entity_fts WHERE rowid = ?", [(i,) for i in ids])
    conn.executemany("DELETE FROM entity_grams WHERE rowid = ?", [(i,) for i in ids])
    for chunk in chunks(ids):
        # the columns of migration 7 (search.py ranks over them)
        conn.execute(
            f"""INSERT INTO entity_fts (rowid, name, aliases, tags, entity_type, text, name_grams, text_grams)
                SELECT id, name, aliases, tags, entity_type, text,
                       memloci_cjk_grams(name || char(10) || aliases || char(10) || tags || char(10) || entity_type),
                       memloci_cjk_grams(text)
                FROM (SELECT e.*, ifnull((SELECT group_concat(m.content, char(10)) FROM memories m
                                          WHERE m.entity_id = e.id), '') || char(10) || e.body AS text
                      FROM entities e WHERE e.id IN ({marks(len(chunk))}))""",
            chunk,
        )
        conn.execute(
            f"""INSERT INTO entity_grams (rowid, label, body)
                SELECT id, name || char(10) || entity_type || char(10) || aliases || char(10) || tags, body
                FROM entities WHERE id IN ({marks(len(chunk))})""",
            chunk,
        )


def journal(tx: WriteTx, tool: str, action: str, entities: Sequence[str], detail: dict | None) -> None:
    """A journal entry for this transaction's change."""
    cur = tx.conn.execute(
        "INSERT INTO journal (at, tool, action, entities, detail) VALUES (?, ?, ?, ?, ?)",
        (now_iso(), tool, action, json.dumps(list(entities), ensure_ascii=False),
         json.dumps(detail, ensure_ascii=False) if detail is not None else None),
    )
    assert cur.lastrowid is not None  # an INSERT's row
    undo.note_row(tx.record, cur.lastrowid)  # a change that kept undo records gets them at the commit


def load_entities(conn: sqlite3.Connection, ids: Sequence[int], observations: bool = True) -> dict[int, Entity]:
    """Entities by id, in the order of `ids` (ids with no entity are left out)."""
    rows: dict[int, tuple] = {}
    for chunk in chunks(list(ids)):
        for row in conn.execute(
            f"""SELECT id, name, entity_type, aliases, tags, metadata, body, created_at, updated_at
                FROM entities WHERE id IN ({marks(len(chunk))})""",
            chunk,
        ):
            rows[row[0]] = row
    obs: dict[int, list[Observation]] = {i: [] for i in rows}
    if observations and rows:
        for chunk in chunks(list(rows)):
            for entity_id, content, created_at in conn.execute(
                f"""SELECT entity_id, content, created_at FROM memories
                    WHERE entity_id IN ({marks(len(chunk))}) ORDER BY id""",
                chunk,
            ):
                obs[entity_id].append(Observation(content, created_at))
    return {i: _entity(rows[i], obs[i]) for i in ids if i in rows}


def _entity(row: tuple, observations: list[Observation]) -> Entity:
    _, name, entity_type, aliases, tags, metadata, body, created_at, updated_at = row
    return Entity(
        name=name,
        entity_type=entity_type,
        observations=tuple(observations),
        aliases=tuple(json.loads(aliases)),
        tags=tuple(json.loads(tags)),
        metadata=json.loads(metadata),
        body=body,
        created_at=created_at,
        updated_at=updated_at,
    )


def relations_where(conn: sqlite3.Connection, where: str, params: Sequence[Any]) -> list[Relation]:
    return [
        Relation(f, t, to, c)
        for f, t, to, c in conn.execute(
            f"""SELECT a.name, r.relation_type, b.name, r.created_at
                FROM relations r JOIN entities a ON a.id = r.from_id JOIN entities b ON b.id = r.to_id
                WHERE {where} ORDER BY r.created_at, a.name_key, r.relation_type, b.name_key""",
            params,
        )
    ]


def relations_touching(conn: sqlite3.Connection, ids: Sequence[int]) -> list[Relation]:
    seen: dict[tuple, Relation] = {}
    for chunk in chunks(list(ids)):
        m = marks(len(chunk))
        for rel in relations_where(conn, f"r.from_id IN ({m}) OR r.to_id IN ({m})", [*chunk, *chunk]):
            seen.setdefault((rel.from_entity, rel.relation_type, rel.to_entity), rel)
    return list(seen.values())


def alias_holders(conn: sqlite3.Connection, names: Sequence[str], also: Sequence[int] = ()) -> dict[str, list[int]]:
    """name_key -> ids of the entities listing that name among their aliases (case-insensitive,
    NFC), oldest first. The word index's `aliases` column finds the candidates (a scan of
    every alias costs seconds at 50,000 entities); `also`: ids written in this transaction,
    whose index rows may not be refreshed yet. Each candidate is checked exactly."""
    keys = {name_key(n) for n in names}
    if not keys:
        return {}
    phrases = " OR ".join('"' + n.replace('"', '""') + '"' for n in dict.fromkeys(names)
                          if any(c.isalnum() for c in n))
    ids = set(also)
    if phrases:
        ids.update(r for (r,) in conn.execute("SELECT rowid FROM entity_fts WHERE entity_fts MATCH ?",
                                              (f"aliases : ({phrases})",)))
    found: dict[str, list[int]] = {}
    for chunk in chunks(sorted(ids)):
        for entity_id, aliases in conn.execute(
                f"SELECT id, aliases FROM entities WHERE id IN ({marks(len(chunk))}) AND aliases != '[]'", chunk):
            for alias in json.loads(aliases):
                key = name_key(str(alias))
                if key in keys and entity_id not in found.get(key, []):
                    found.setdefault(key, []).append(entity_id)
    return found
