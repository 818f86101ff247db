"""The graph's reads over the SQLite tables (mixed into SQLiteStore; uses its _read, _resolve,
_load_entities and _relations_* helpers): pages, opened entities, ranked search, exports,
the journal."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

from ..model import (
    Entity,
    Graph,
    GraphPage,
    JournalEntry,
    Relation,
    SearchHit,
    SearchResult,
    name_key,
)
from .sqlite_search import rank_entities

_CHUNK = 500  # ids per IN (...) list


def _chunks(items: Sequence[Any], size: int = _CHUNK) -> Iterator[Sequence[Any]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


def _marks(n: int) -> str:
    return ",".join("?" * n)


class SQLiteGraphReads:
    def read_graph(self, *, limit: int, offset: int, summary: bool) -> GraphPage:
        with self._read() as conn:
            total = conn.execute("SELECT count(*) FROM entities").fetchone()[0]
            ids = [r[0] for r in conn.execute("SELECT id FROM entities ORDER BY id LIMIT ? OFFSET ?", (limit, offset))]
            entities = self._load_entities(conn, ids, observations=not summary)
            relations: list[Relation] = []
            if ids:
                # A page is every entity with an id in [first, last], so "both ends on the page"
                # is a range test the primary key and relations_to index answer directly.
                lo, hi = ids[0], ids[-1]
                relations = self._relations_where(
                    conn, "r.from_id BETWEEN ? AND ? AND r.to_id BETWEEN ? AND ?", (lo, hi, lo, hi)
                )
        return GraphPage(tuple(entities.values()), tuple(relations), total, offset, offset + len(ids) < total)

    def open_entities(self, names: Sequence[str]) -> Graph:
        """The entities named, or else holding the name as an alias (`aliases: [Anna]`); a name
        wins over an alias, and an alias two entities claim opens both (the reply shows which)."""
        with self._read() as conn:
            ids = {k: [v[0]] for k, v in self._resolve(conn, names).items()}
            ids.update(self._alias_holders(conn, [n for n in names if name_key(n) not in ids]))
            # Reply in the order asked, each entity once.
            ordered = list(dict.fromkeys(i for k in (name_key(n) for n in names) if k in ids for i in ids[k]))
            entities = self._load_entities(conn, ordered)
            relations = self._relations_touching(conn, ordered)
        return Graph(tuple(entities.values()), tuple(relations))

    @staticmethod
    def _alias_holders(conn, names: Sequence[str]) -> dict[str, list[int]]:
        """name_key -> ids of the entities listing that name among their aliases (case-insensitive,
        NFC), oldest first. Only asked for names no entity has, so most opens never scan."""
        keys = {name_key(n) for n in names}
        if not keys:
            return {}
        found: dict[str, list[int]] = {}
        for entity_id, alias in conn.execute(
                "SELECT e.id, j.value FROM entities e, json_each(e.aliases) j "
                "WHERE e.aliases != '[]' AND typeof(j.value) = 'text' ORDER BY e.id"):
            key = name_key(alias)
            if key in keys and entity_id not in found.get(key, []):
                found.setdefault(key, []).append(entity_id)
        return found

    def search_entities(self, query: str, *, limit: int,
                        extra: Sequence[tuple[str, float, str]] = ()) -> SearchResult:
        """Entities ranked by words (sqlite_search.py); `extra` (name, score, why) found by other
        signals (typo-tolerant names, meaning) follow the word matches, best score first."""
        with self._read() as conn:
            scored = rank_entities(conn, query, limit + 1)  # one extra tells whether the result is truncated
            ranked = sorted(scored, key=lambda i: (-scored[i].matched, scored[i].bm25))
            hits_by_id = {i: (-scored[i].bm25, scored[i].matched, scored[i].why) for i in ranked}
            if extra:
                ids = self._resolve(conn, [name for name, _, _ in extra])
                for name, score, why in sorted(extra, key=lambda e: -e[1]):
                    entity_id = ids.get(name_key(name), (None,))[0]
                    if entity_id is not None and entity_id not in hits_by_id:
                        hits_by_id[entity_id] = (score, 0, why)
                        ranked.append(entity_id)
            truncated = len(ranked) > limit
            ranked = ranked[:limit]
            entities = self._load_entities(conn, ranked)
            hits = tuple(SearchHit(entities[i], *hits_by_id[i]) for i in ranked if i in entities)
            relations = self._relations_touching(conn, list(entities))
        return SearchResult(hits, tuple(relations), truncated)

    def count_entities(self, query: str, *, cap: int) -> int:
        """The matches search_entities ranks, counted without loading them (a page's total)."""
        with self._read() as conn:
            return len(rank_entities(conn, query, cap))

    def entity_names(self) -> list[tuple[str, str, str]]:
        """(name, entity_type, aliases JSON) of every entity, for typo-tolerant matching."""
        with self._read() as conn:
            return conn.execute("SELECT name, entity_type, aliases FROM entities").fetchall()

    def export_graph(self, *, order: str = "id") -> Graph:
        """Every entity (insertion or `name` order) and relation, from one snapshot."""
        column = {"id": "id", "name": "name_key"}[order]
        with self._read() as conn:
            ids = [r[0] for r in conn.execute(f"SELECT id FROM entities ORDER BY {column}")]
            entities: list[Entity] = []
            for chunk in _chunks(ids, 2000):
                entities.extend(self._load_entities(conn, chunk).values())
            relations = self._relations_where(conn, "1", ())
        return Graph(tuple(entities), tuple(relations))

    def journal(self, *, limit: int, internal: bool = True) -> list[JournalEntry]:
        """The newest `limit` changes; `internal=False` leaves out rescans and vector resets."""
        hide = "" if internal else ("WHERE NOT ((tool = 'files' AND action = 'sync') "
                                    "OR (tool = 'reindex' AND action = 'reset_vectors'))")
        with self._read() as conn:
            rows = conn.execute(
                f"SELECT id, at, tool, action, entities, detail FROM journal {hide} ORDER BY id DESC LIMIT ?", (limit,)
            ).fetchall()
        return [
            JournalEntry(i, at, tool, action, tuple(json.loads(ents)), json.loads(detail) if detail else None)
            for i, at, tool, action, ents, detail in rows
        ]

