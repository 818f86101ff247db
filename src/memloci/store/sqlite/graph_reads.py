"""The graph's reads over the SQLite tables: pages, opened entities, ranked search, exports,
the journal."""

from __future__ import annotations

import json
from collections.abc import Sequence

from memloci.core.model import (
    Entity,
    Graph,
    GraphPage,
    JournalEntry,
    NameChanges,
    NamedEntity,
    Relation,
    SearchHit,
    SearchResult,
    name_key,
)
from memloci.store.protocols import NameVocabulary
from memloci.store.sqlite.database import Database
from memloci.store.sqlite.rows import alias_holders, load_entities, relations_touching, relations_where, resolve
from memloci.store.sqlite.search import count_entities as count_matches
from memloci.store.sqlite.search import name_changes, rank_entities
from memloci.store.sqlite.sql import chunks, marks


class SQLiteGraphReads:
    """Reads of one library's Database."""

    def __init__(self, db: Database):
        self.db = db

    def read_graph(self, *, limit: int, offset: int, summary: bool) -> GraphPage:
        with self.db.read() as conn:
            total = conn.execute("SELECT count(*) FROM entities").fetchone()[0]
            ids = [r[0] for r in conn.execute("SELECT id FROM entities ORDER BY id LIMIT ? OFFSET ?", (limit, offset))]
            entities = load_entities(conn, ids, observations=not summary)
            relations: list[Relation] = []
            if ids:
                # A page is every entity with an id in [first, last], so "both ends on the page"
                # is a range test the primary key and relations_to index answer directly.
                lo, hi = ids[0], ids[-1]
                relations = relations_where(
                    conn, "r.from_id BETWEEN ? AND ? AND r.to_id BETWEEN ? AND ?", (lo, hi, lo, hi)
                )
        return GraphPage(tuple(entities.values()), tuple(relations), total, offset, offset + len(ids) < total)

    def open_entities(self, names: Sequence[str]) -> Graph:
        """The entities named, or else holding the name as an alias (`aliases: [Anna]`); a name
        wins over an alias, and an alias two entities claim opens both (the reply shows which)."""
        with self.db.read() as conn:
            ids = {k: [v[0]] for k, v in resolve(conn, names).items()}
            ids.update(alias_holders(conn, [n for n in names if name_key(n) not in ids]))
            # Reply in the order asked, each entity once.
            ordered = list(dict.fromkeys(i for k in (name_key(n) for n in names) if k in ids for i in ids[k]))
            entities = load_entities(conn, ordered)
            relations = relations_touching(conn, ordered)
        return Graph(tuple(entities.values()), tuple(relations))

    def entity_names(self, names: Sequence[str]) -> dict[str, tuple[str, ...]]:
        with self.db.read() as conn:
            found: dict[str, tuple[str, ...]] = {k: (v[1],) for k, v in resolve(conn, names).items()}
            held = alias_holders(conn, [n for n in names if name_key(n) not in found])
            if held:
                ids = sorted({i for holders in held.values() for i in holders})
                named = {i: n for chunk in chunks(ids) for i, n in conn.execute(
                    f"SELECT id, name FROM entities WHERE id IN ({marks(len(chunk))})", chunk)}
                found.update({k: tuple(named[i] for i in holders) for k, holders in held.items()})
        return found

    def search_entities(self, query: str, *, limit: int, extra: Sequence[tuple[str, float, str]] = (),
                        stop_words: frozenset[str] = frozenset(), names: NameVocabulary | None = None,
                        count_cap: int = 0, pool: int = 0) -> SearchResult:
        """Entities ranked by BM25 over the query's words (search.py), substring matches
        after them; `extra` (name, score 0..1, why) found by other signals (meaning) is fused in:
        a word match scores its BM25 over the best one's, plus its signal; the best `pool` word
        matches keep their word score (at least limit + 1). With `count_cap`, a truncated result's
        total_count is every match up to it."""
        want = max(limit + 1, pool)  # one more than the page tells whether the result is truncated
        with self.db.read() as conn:
            scored, total = rank_entities(conn, query, want, stop_words=stop_words, names=names, count_cap=count_cap)
            if total is None and count_cap and len(scored) > limit:  # fewer than `want`: every match is scored
                # counted as count_entities counts: the word matches, or the substrings when no word matched
                total = min(sum(1 for s in scored.values() if s.matched) or len(scored), count_cap)
            best = max((-s.bm25 for s in scored.values()), default=0.0) or 1.0
            fused = {i: (-s.bm25 / best, s.matched, s.why) for i, s in scored.items()}
            if extra:
                ids = resolve(conn, [name for name, _, _ in extra])
                boosted: set[int] = set()
                for name, score, why in sorted(extra, key=lambda e: -e[1]):
                    entity_id = ids.get(name_key(name), (None,))[0]
                    if entity_id is None or entity_id in boosted:  # an entity's best signal counts, once
                        continue
                    boosted.add(entity_id)
                    if entity_id in fused:
                        words, matched, said = fused[entity_id]
                        fused[entity_id] = (words + score, matched, f"{said}; {why}")
                    else:
                        fused[entity_id] = (score, 0, why)
            ranked = sorted(fused, key=lambda i: -fused[i][0])
            truncated = len(ranked) > limit
            ranked = ranked[:limit]
            entities = load_entities(conn, ranked)
            hits = tuple(SearchHit(entities[i], *fused[i]) for i in ranked if i in entities)
            relations = relations_touching(conn, list(entities))
        return SearchResult(hits, tuple(relations), truncated, total if truncated else None)

    def count_entities(self, query: str, *, cap: int, stop_words: frozenset[str] = frozenset(),
                       names: NameVocabulary | None = None) -> int:
        """The matches search_entities ranks, counted without ranking or loading them (a page's total)."""
        with self.db.read() as conn:
            return count_matches(conn, query, cap, stop_words=stop_words, names=names)

    def name_changes(self, since: int) -> NameChanges:
        """The entities named, retyped or renamed after log position `since`: every one when `since`
        is -1 or older than the log kept."""
        with self.db.read() as conn:
            position, rows, complete = name_changes(conn, since)
        return NameChanges(position, tuple(NamedEntity(*row) for row in rows), complete)

    def export_graph(self, *, order: str = "id") -> Graph:
        """Every entity (insertion or `name` order) and relation, from one snapshot."""
        column = {"id": "id", "name": "name_key"}[order]
        with self.db.read() as conn:
            ids = [r[0] for r in conn.execute(f"SELECT id FROM entities ORDER BY {column}")]
            entities: list[Entity] = []
            for chunk in chunks(ids, 2000):
                entities.extend(load_entities(conn, chunk).values())
            relations = relations_where(conn, "1", ())
        return Graph(tuple(entities), tuple(relations))

    def journal(self, *, limit: int, internal: bool = True) -> list[JournalEntry]:
        """The newest `limit` changes; `internal=False` leaves out rescans and vector resets."""
        hide = "" if internal else ("WHERE NOT ((tool = 'files' AND action = 'sync') "
                                    "OR (tool = 'reindex' AND action = 'reset_vectors'))")
        with self.db.read() as conn:
            rows = conn.execute(
                f"SELECT id, at, tool, action, entities, detail FROM journal {hide} ORDER BY id DESC LIMIT ?", (limit,)
            ).fetchall()
        return [
            JournalEntry(i, at, tool, action, tuple(json.loads(ents)), json.loads(detail) if detail else None)
            for i, at, tool, action, ents, detail in rows
        ]

