"""Search in the postgres engine: memories by words, CJK pieces and vectors; entities by words.

What each engine returns here are candidates with scores; the ranking (fusion, decay, cues)
is search/hybrid.py's and search/entities.py's, the same for every engine.

- Memories by words: `search @@ query` over the weighted tsvectors of search_schema.py picks a
  bounded pool; how often each query word occurs in each column of a pool memory (its lexemes'
  positions by weight), its length as FTS5 counts it, each word's holders and the library's
  totals (migration 4) are what BM25 needs. One statement scores the pool by core/bm25.py's
  formula inside PostgreSQL and returns the best (lexical_memory_candidates, which search/
  uses); memory_word_counts hands the same counts over for core/bm25.py to score, and the two
  agree to the last bit. The same BM25 as SQLite's FTS5, where the two stemmers agree. Each query word is looked up
  stemmed (`english`) and as written (`simple`), so a tag such as "decisions" is found as typed.
- Entities: entity_search.py, by the BM25 SQLite's FTS5 computes (core/bm25.py).
- Chinese/Japanese: the query's runs as two- and three-character pieces against the `grams`
  tsvectors (pairs holding a hiragana character are left out: mostly particles and endings).
- Vectors: pgvector's HNSW index (cosine), the filters in the same SQL (VectorSearch in
  search/vectors.py); each candidate is lifted by its thread neighbours' similarity, as the
  in-process index does.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import Any

from memloci.core import bm25
from memloci.core.model import MemoryFilter, SearchHit, SearchResult, name_key, tag_keys
from memloci.store.postgres import entity_search
from memloci.store.postgres.database import Database
from memloci.store.postgres.entities import load_entities, relations_touching, resolve
from memloci.store.postgres.memory_rows import filter_sql
from memloci.store.postgres.tsquery import LEXEME, any_of, cjk_pieces, estimated_holders, term_tsqueries
from memloci.store.postgres.vectors import vector_text
from memloci.store.protocols import MemoryWordCounts, NameVocabulary, VectorCandidates

NEIGHBOUR_WEIGHT = 0.3  # as search/vectors.py: a share of each thread neighbour's similarity
EF_SEARCH = 100  # HNSW candidates looked at per query (pgvector's default is 40)
EF_SEARCH_MAX = 1000  # the most pgvector accepts
MAX_SCAN = 2000  # index entries a filtered HNSW walk looks at, at most (pgvector's default: 20,000)
# ... and with a tag in the filter. Tags are topical: a tag's memories near the query are met in
# the walk's first few hundred entries or not for thousands. Measured at a million (a tag on a
# tenth), recall@10 against the exact answer within the tag: 1.00 at 500 and at 2,000 for a tag
# of the query's topic, 0.23 and 0.24 for another topic's, where the walk to 2,000 took twice
# as long. A time range cuts across topics, and walking on pays there (0.99 at 2,000, 0.86 at 500).
MAX_SCAN_TAGGED = 500
RECENT = 500  # a broad filter's newest memories compared one by one when that walk falls short
# A filter letting at most this many memories through is searched exactly. Measured at 100,000
# memories: comparing 10,000 vectors one by one took 197 ms, the HNSW index with an iterative
# scan 40-75 ms for the same 40 hits; about 20 microseconds a vector, so 4,000 stay near 80 ms.
EXACT_MAX = 4000
COMMON = 2000  # a word more memories hold is common: only its newest holders are ranked
COMMON_POOL = 500  # how many of a common word's newest holders are ranked
WINDOW = 10_000  # with a time range, the newest ids searched for those holders first


def _at_most(conn: Any, filters: MemoryFilter, where: str, params: Sequence[Any], cap: int) -> bool:
    """Whether at most `cap` memories pass the filter. Each part of it (tags, time range, type,
    entity) is counted up to cap + 1 on its own index first: one part within `cap` settles it
    (the whole lets through no more), and a tag is counted on the tag index alone (counting the
    memories `where` lets through built a hash of every memory with the tag: 50 ms for a tag
    on a tenth of a million). Only a filter whose every part is broad is counted whole."""
    parts: list[tuple[str, list[Any]]] = []
    if filters.tags:  # rows, not memories: a memory with two of the tags counts twice (an upper bound)
        parts.append(("SELECT 1 FROM memory_tags WHERE tag = ANY(%s)", [tag_keys(filters.tags)]))
    for part in (MemoryFilter(after=filters.after, before=filters.before), MemoryFilter(memory_type=filters.memory_type),
                 MemoryFilter(entity=filters.entity)):
        if not part.empty:
            part_where, part_params = filter_sql(part, conn)
            parts.append((f"SELECT 1 FROM memories m WHERE {part_where}", part_params))
    counts = conn.execute("SELECT " + ", ".join(f"(SELECT count(*) FROM ({sql} LIMIT {cap + 1}) x)" for sql, _ in parts),
                          [p for _, ps in parts for p in ps]).fetchone()
    if min(counts) <= cap:
        return True
    if len(parts) == 1:
        return False
    return conn.execute(f"SELECT count(*) FROM (SELECT 1 FROM memories m WHERE {where} LIMIT {cap + 1}) x",
                        params).fetchone()[0] <= cap


def _nearest(conn: Any, vector: str, k: int, filters: MemoryFilter, where: str,
             params: Sequence[Any]) -> tuple[dict[int, float], bool]:
    """The best `k` memories within the filter (`where`) by cosine similarity to `vector`, and
    whether every vector the filter allows was seen (then the lowest similarity is known)."""
    filtered = where != "TRUE"
    if filtered and _at_most(conn, filters, where, params, EXACT_MAX):
        # Few memories pass the filter: compare with each of them (exact, as the in-process
        # index is). Ordering by similarity, not by distance, keeps the HNSW index out: a
        # graph walk would look at many rows the filter then drops, and could miss some.
        rows = conn.execute(f"""SELECT v.memory_id, 1 - (v.embedding <=> %s::vector) AS sim FROM memories m
                                JOIN memory_vectors v ON v.memory_id = m.id WHERE {where} ORDER BY sim DESC LIMIT %s""",
                            (vector, *params, k)).fetchall()
        return {int(i): float(sim) for i, sim in rows}, len(rows) < k
    # The HNSW index. With a filter, pgvector's iterative scan keeps walking the graph until k
    # rows pass, but at most MAX_SCAN (MAX_SCAN_TAGGED) index entries: a filter whose memories
    # lie far from the query (a tag about hiring, a question about invoices) would walk tens of
    # thousands (2 s at a million). What it found then is the best of the nearest MAX_SCAN;
    # the word matches' own similarities are added by the caller.
    conn.execute("SELECT set_config('hnsw.ef_search', %s, true)", (str(min(EF_SEARCH_MAX, max(EF_SEARCH, k))),))
    if filtered:
        conn.execute("SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true), "
                     "set_config('hnsw.max_scan_tuples', %s, true)", (str(MAX_SCAN_TAGGED if filters.tags else MAX_SCAN),))
    rows = conn.execute(
        f"""SELECT v.memory_id, 1 - (v.embedding <=> %s::vector) FROM memory_vectors v
            {"JOIN memories m ON m.id = v.memory_id WHERE " + where if filtered else ""}
            ORDER BY v.embedding <=> %s::vector LIMIT %s""", (vector, *params, vector, k)).fetchall()
    found = {int(i): float(sim) for i, sim in rows}
    if filtered and len(found) < k:
        # The walk stopped at MAX_SCAN short of k: the filter's newest RECENT memories are
        # compared one by one too (10 ms), so a filter far from the query still has its
        # nearest-in-meaning among the memories decay favours anyway.
        found.update({int(i): float(sim) for i, sim in conn.execute(
            f"""SELECT v.memory_id, 1 - (v.embedding <=> %s::vector) AS sim
                FROM (SELECT m.id FROM memories m WHERE {where} ORDER BY m.id DESC LIMIT {RECENT}) r
                JOIN memory_vectors v ON v.memory_id = r.id ORDER BY sim DESC LIMIT %s""", (vector, *params, k))})
    # unfiltered, fewer than k rows means the library holds fewer vectors; filtered, the walk
    # may have stopped at MAX_SCAN
    return found, not filtered and len(found) < k


class PostgresSearch:
    """Memories and entities by words, CJK pieces and meaning: candidates with scores."""

    def __init__(self, db: Database):
        self.db = db

    # -- memories ------------------------------------------------------------------------

    def memory_word_counts(self, terms: list[str], grams: list[str], k: int,
                           filters: MemoryFilter) -> MemoryWordCounts:
        """The statistics BM25 needs for the memories within `filters` holding the query's words
        (core/bm25.py scores them, as FTS5 scores them on SQLite), plus the best `k` by CJK pieces."""
        with self.db.read() as conn:
            where, params = filter_sql(filters, conn)
            counted = _word_counts(conn, term_tsqueries(conn, terms), filters, where, params) if terms else None
            # CJK pieces: the count of pieces held, added to the words' score
            grams_found = _pooled_rank(conn, "grams", cjk_pieces(grams), "{0.1, 0.2, 0.4, 1.0}", 0, k,
                                       filters, where, params)
        if counted is None:
            return MemoryWordCounts(0, 0, (), {}, {}, grams_found)
        return dataclasses.replace(counted, grams=grams_found)

    def lexical_memory_candidates(self, terms: list[str], grams: list[str], k: int,
                                  filters: MemoryFilter) -> dict[int, float]:
        """The best `k` memories within `filters` by BM25 over the query's words, scored inside
        PostgreSQL (_word_scores: core/bm25.py's formula, to the last digit), plus those found
        by CJK pieces with their own score added, as search/hybrid.py adds them."""
        with self.db.read() as conn:
            where, params = filter_sql(filters, conn)
            found = _word_scores(conn, term_tsqueries(conn, terms), k, filters, where, params) if terms else {}
            for i, score in _pooled_rank(conn, "grams", cjk_pieces(grams), "{0.1, 0.2, 0.4, 1.0}", 0, k,
                                         filters, where, params).items():
                found[i] = found.get(i, 0.0) + score
        return found

    def vector_candidates(self, query: Any, k: int, filters: MemoryFilter, *, model: str | None = None,
                          also: Sequence[int] = ()) -> Any:
        """The best `k` memories within `filters` by cosine similarity to `query` (the filter in
        the same query: HNSW, or every allowed vector when the filter lets few through), each
        lifted by its thread neighbours', and the `also` ids'.
        Nothing when the library's vectors are of another model than `model`."""
        with self.db.read() as conn:
            meta = dict(conn.execute("SELECT key, value FROM library_meta WHERE key IN "
                                     "('embedding_model', 'embedding_dimension')").fetchall())  # one round trip
            have, dimension = meta.get("embedding_model"), int(meta.get("embedding_dimension") or 0)
            if have is None or (model is not None and have != model) or dimension != len(query):
                return VectorCandidates({}, 0.0, 0.0)
            where, params = filter_sql(filters, conn)
            vector = vector_text(query)
            own, exhausted = _nearest(conn, vector, k, filters, where, params) if k > 0 else ({}, False)
            extra = [i for i in dict.fromkeys(also) if i not in own]
            if extra:
                own.update({int(i): float(s) for i, s in conn.execute(
                    f"""SELECT v.memory_id, 1 - (v.embedding <=> %s::vector) FROM memory_vectors v
                        JOIN memories m ON m.id = v.memory_id WHERE v.memory_id = ANY(%s) AND {where}""",
                    (vector, extra, *params))})
            if not own:
                return VectorCandidates({}, 0.0, 0.0)
            lifted = dict(own)
            # neighbours: the memories just before and after in the same thread that have vectors
            for memory_id, before, after in conn.execute(
                    """SELECT m.id,
                              (SELECT 1 - (pv.embedding <=> %(q)s::vector) FROM memories p
                               JOIN memory_vectors pv ON pv.memory_id = p.id
                               WHERE p.thread = m.thread AND p.id < m.id ORDER BY p.id DESC LIMIT 1),
                              (SELECT 1 - (nv.embedding <=> %(q)s::vector) FROM memories n
                               JOIN memory_vectors nv ON nv.memory_id = n.id
                               WHERE n.thread = m.thread AND n.id > m.id ORDER BY n.id LIMIT 1)
                       FROM memories m WHERE m.id = ANY(%(ids)s) AND m.thread <> ''""",
                    {"q": vector, "ids": list(own)}):
                lifted[int(memory_id)] += NEIGHBOUR_WEIGHT * (float(before or 0.0) + float(after or 0.0))
        high = max(lifted.values())
        # The in-process index scales by the lowest similarity over every allowed memory; here
        # that is known only when all of them were seen, else 0 stands for it (what unrelated
        # text scores against a unit vector, near enough, in a large library).
        low = min(lifted.values()) if exhausted else min(0.0, min(lifted.values()))
        return VectorCandidates(lifted, low, high)

    # -- entities ------------------------------------------------------------------------

    def search_entities(self, query: str, *, limit: int, extra: Sequence[tuple[str, float, str]] = (),
                        stop_words: frozenset[str] = frozenset(), names: NameVocabulary | None = None,
                        count_cap: int = 0, pool: int = 0) -> SearchResult:
        """Entities ranked by BM25 over the query's words (entity_search.py), substring matches
        after them; `extra` (name, score 0..1, why) found by other signals (meaning) fused in: a
        word match scores its BM25 over the best one's, plus its signal; the best `pool` word
        matches keep their word score (at least limit + 1). With `count_cap`, a truncated result's
        total_count is every match up to it."""
        with self.db.read() as conn:
            terms = entity_search.plan(conn, query, stop_words, names)  # planned once, for the page and its total
            words = entity_search.rank(conn, terms, query, max(limit + 1, pool))  # one extra: truncated?
            best = max((score for score, _, _ in words.values()), default=0.0) or 1.0
            fused = {i: (score / best, n, why) for i, (score, n, why) in words.items()}
            if extra:
                ids = resolve(conn, [name for name, _, _ in extra])
                boosted: set[int] = set()
                for name, score, why in sorted(extra, key=lambda e: -e[1]):
                    ref = ids.get(name_key(name))
                    if ref is None or ref.id in boosted:  # an entity's best signal counts, once
                        continue
                    boosted.add(ref.id)
                    own, matched, said = fused.get(ref.id, (0.0, 0, ""))
                    fused[ref.id] = (own + score, matched, f"{said}; {why}" if said else why)
            ranked = sorted(fused, key=lambda i: -fused[i][0])
            truncated = len(ranked) > limit
            ranked = ranked[:limit]
            entities = load_entities(conn, ranked)
            hits = tuple(SearchHit(entities[i], *fused[i]) for i in ranked if i in entities)
            relations = relations_touching(conn, list(entities))
            total = entity_search.count(conn, terms, query, count_cap) if truncated and count_cap else None
        return SearchResult(hits, tuple(relations), truncated, total)

    def count_entities(self, query: str, *, cap: int, stop_words: frozenset[str] = frozenset(),
                       names: NameVocabulary | None = None) -> int:
        """How many entities search_entities finds by words and substrings, up to `cap`."""
        with self.db.read() as conn:
            return entity_search.count(conn, entity_search.plan(conn, query, stop_words, names), query, cap)


def _holders(conn: Any, column: str, queries: Sequence[str]) -> list[int]:
    """How many memories hold each query (tsquery text): counted up to COMMON + 1; a word the
    table's statistics (ANALYZE) show in far more than COMMON memories is estimated from them
    without counting (counting its holders up to COMMON + 1 reads some COMMON / share rows,
    20,000 for a word one memory in ten holds: the slowest step of a query of common words)."""
    known = estimated_holders(conn, "memories", column, queries, 4 * COMMON)
    unknown = [q for q in queries if q not in known]
    counted = dict(zip(unknown, conn.execute("SELECT " + ", ".join(
        f"(SELECT count(*) FROM (SELECT 1 FROM memories m WHERE m.{column} @@ %s::tsquery LIMIT {COMMON + 1}) x)"
        for _ in unknown), unknown).fetchone())) if unknown else {}
    return [int(known[q]) if q in known else int(counted[q]) for q in queries]


def _pool(conn: Any, column: str, queries: Sequence[str], holders: Sequence[int], filters: MemoryFilter,
          where: str, params: Sequence[Any], fields: str = "") -> list[tuple[Any, ...]]:
    """The rows (id, then `fields` of `m`) of a bounded pool of memories within the filter
    (`where`): every memory holding a word that at most COMMON memories hold, and of the newest
    COMMON_POOL holding the others (in the filter's time range) those the whole filter lets
    through. Ranking every holder of a common word ("upgrade" in a tenth of a million memories)
    would take seconds; a rare word decides the answer anyway, and among common words the
    newest holders stand for the rest.

    Each step is an index probe whatever the planner estimates: a query joining the pool's
    subquery back to `memories` left the plan to estimates, and one such plan unnested every
    tsvector of a million memories (91 s). Without a filter the probes read the fields too;
    with one, the pool's ids are checked against it and only those rows read."""
    rare = [q for q, n in zip(queries, holders) if 0 < n <= COMMON]
    common = [q for q, n in zip(queries, holders) if n > COMMON]
    read = "m.id" + "".join(f", m.{f.strip()}" for f in fields.split(",") if f.strip())
    probe = read if where == "TRUE" else "m.id"
    found: list[tuple[Any, ...]] = []
    if rare:  # at most COMMON a word: the GIN index gives them all
        found += conn.execute(f"SELECT {probe} FROM memories m WHERE m.{column} @@ %s::tsquery",
                              (any_of(rare),)).fetchall()
    if common:
        # The newest holders within the time range (a per-row check on the walk back through
        # ids); tags, type and entity are checked after, on these few.
        timed, timed_params = filter_sql(MemoryFilter(after=filters.after, before=filters.before), conn)
        found += conn.execute(
            f"""SELECT {probe} FROM memories m WHERE m.{column} @@ %s::tsquery AND {timed}
                ORDER BY m.id DESC LIMIT {COMMON_POOL}""", (any_of(common), *timed_params)).fetchall()
    rows = list({row[0]: tuple(row) for row in found}.values())
    if not rows or where == "TRUE":
        return rows
    return [tuple(r) for r in conn.execute(f"SELECT {read} FROM memories m WHERE m.id = ANY(%s) AND {where}",
                                           ([row[0] for row in rows], *params))]


# tsvector weights of memories.search (search_schema.py) -> BM25 columns (core/bm25.py:
# content, context, labels); D (no letter) is not one of them
_COLUMN_OF_WEIGHT = {"A": 0, "C": 1, "B": 2}


def _word_counts(conn: Any, queries: Sequence[str], filters: MemoryFilter, where: str,
                 params: Sequence[Any]) -> MemoryWordCounts:
    """What BM25 needs of the pool's memories (_pool) for these queries (one per query term):
    how often each term occurs in each column of each (the positions of its lexemes in
    `search`, by weight), their lengths, the terms' holders and the library's totals.

    The positions are read from each pool memory's tsvector as text, `'lexeme':1A,5,7B ...`
    (the query's lexemes are matched in the same escaped form tsquery text gives them): half
    the time of unnesting every tsvector in SQL."""
    holders = _holders(conn, "search", queries)
    documents, tokens = conn.execute("SELECT documents, tokens FROM search_totals").fetchone()
    rows = _pool(conn, "search", queries, holders, filters, where, params, "search_length, search::text")
    counts: dict[int, dict[int, list[int]]] = {}
    lengths: dict[int, int] = {}
    terms_of: dict[str, list[int]] = {}  # lexeme (escaped, as in tsvector text) -> its query terms
    for i, q in enumerate(queries):
        for lexeme in dict.fromkeys(LEXEME.findall(q)):
            terms_of.setdefault(lexeme, []).append(i)
    if rows and terms_of:
        # a lexeme starts the text or follows a space (lexemes hold no spaces); '' is a quote
        found = re.compile("(?:^| )'(" + "|".join(map(re.escape, terms_of)) + r")':([0-9A-D,]+)")
        for memory_id, length, text in rows:
            lengths[int(memory_id)] = int(length)
            for lexeme, positions in found.findall(text):
                mine = counts.setdefault(int(memory_id), {})
                columns_of = [_COLUMN_OF_WEIGHT.get(p[-1]) for p in positions.split(",")]
                for i in terms_of[lexeme]:
                    columns = mine.setdefault(i, [0, 0, 0])
                    for column in columns_of:
                        if column is not None:
                            columns[column] += 1
    return MemoryWordCounts(int(documents), int(tokens), tuple(max(n, 1) for n in holders),
                            {m: {i: tuple(c) for i, c in terms.items()} for m, terms in counts.items()}, lengths, {})


def _unescaped(lexeme: str) -> str:
    """A lexeme as tsquery and tsvector text show it (a quote and a backslash doubled) as it is."""
    return re.sub(r"''|\\\\", lambda m: m.group()[0], lexeme)


def _word_scores(conn: Any, queries: Sequence[str], k: int, filters: MemoryFilter, where: str,
                 params: Sequence[Any]) -> dict[int, float]:
    """The best `k` memories of the pool (as _pool picks it) by BM25, scored in one statement:
    core/bm25.py's formula over the same counts _word_counts hands over (each term's positions
    by tsvector weight, unnested from the pool's tsvectors once cut to the query's lexemes by
    ts_delete: unnesting whole tsvectors took 9 microseconds a row, four times this), the same
    holders and totals, each memory's terms summed in the order _word_counts meets them (their
    lexemes' order in the tsvector, then the terms' order), so the scores are the same
    floating-point numbers. Best first, ties by id."""
    holders = [max(n, 1) for n in _holders(conn, "search", queries)]
    documents, tokens = conn.execute("SELECT documents, tokens FROM search_totals").fetchone()
    corpus = bm25.Corpus(int(documents), int(tokens))
    lexemes = [(i, _unescaped(lexeme)) for i, q in enumerate(queries) for lexeme in dict.fromkeys(LEXEME.findall(q))]
    rare = any_of(q for q, n in zip(queries, holders) if 0 < n <= COMMON)
    common = any_of(q for q, n in zip(queries, holders) if n > COMMON)
    if not lexemes or not (rare or common):
        return {}
    # The pool's rows, read once by the scans that find them: the holders of rare words (the
    # GIN index), and the newest COMMON_POOL holders of common ones in the time range less
    # those already among the rare words' (the whole filter checked after the LIMIT, as _pool).
    pool: list[str] = []
    pool_params: list[Any] = []
    if rare:
        pool.append(f"SELECT m.id, m.search_length, m.search FROM memories m WHERE m.search @@ %s::tsquery AND {where}")
        pool_params += [rare, *params]
    newest = ""  # with a time range, the walk back through the newest WINDOW ids first (a CTE)
    newest_params: list[Any] = []
    if common:
        timed, timed_params = filter_sql(MemoryFilter(after=filters.after, before=filters.before), conn)
        holders_sql = f"""SELECT m.* FROM memories m WHERE m.search @@ %s::tsquery AND {timed}
                          ORDER BY m.id DESC LIMIT {COMMON_POOL}"""
        if filters.after or filters.before:
            # For a time range the planner walks the `created_at` index through every memory in
            # the range (19,000 for "this week" at a million) and sorts the holders, not knowing
            # that ids follow dates; the walk back from the newest id stops at COMMON_POOL (some
            # 5,000 rows). So that walk is made first, over the newest WINDOW ids: when it finds
            # COMMON_POOL holders they are the newest ones (every id outside is smaller), else
            # the planner's query runs (a one-time filter: only then), the same rows either way.
            newest = f""", newest AS MATERIALIZED (
                SELECT m.* FROM (SELECT * FROM memories ORDER BY id DESC LIMIT {WINDOW}) m
                WHERE m.search @@ %s::tsquery AND {timed} ORDER BY m.id DESC LIMIT {COMMON_POOL})"""
            newest_params = [common, *timed_params]
            holders_sql = f"""SELECT * FROM newest WHERE (SELECT count(*) FROM newest) = {COMMON_POOL}
                              UNION ALL
                              SELECT * FROM ({holders_sql}) h WHERE (SELECT count(*) FROM newest) < {COMMON_POOL}"""
        pool.append(f"""SELECT m.id, m.search_length, m.search FROM ({holders_sql}) m
                        WHERE {where}{" AND NOT m.search @@ %s::tsquery" if rare else ""}""")
        pool_params += [common, *timed_params, *params, *([rare] if rare else [])]
    idf = [bm25.idf(n, corpus.documents) for n in holders]
    weights = dict(zip("ACB", bm25.MEMORY_WEIGHTS))  # tsvector weight -> BM25 column (_COLUMN_OF_WEIGHT)
    rows = conn.execute(
        f"""WITH terms AS (SELECT * FROM unnest(%s::int[], %s::text[], %s::float8[]) AS t(i, lexeme, idf)){newest},
            counted AS (
                SELECT m.id, m.search_length AS length, t.i, t.idf, min(u.n) AS first,
                       sum(cardinality(array_positions(u.weights, 'A'))) AS a,
                       sum(cardinality(array_positions(u.weights, 'C'))) AS c,
                       sum(cardinality(array_positions(u.weights, 'B'))) AS b
                FROM ({" UNION ALL ".join(pool)}) m
                CROSS JOIN LATERAL unnest(ts_delete(m.search, tsvector_to_array(ts_delete(m.search, %s::text[]))))
                    WITH ORDINALITY AS u(lexeme, positions, weights, n)
                JOIN terms t ON t.lexeme = u.lexeme
                GROUP BY m.id, m.search_length, t.i, t.idf),
            weighed AS (
                SELECT c.id, c.length, c.first, c.i, c.idf, %s::float8 * c.a + %s::float8 * c.c + %s::float8 * c.b AS f
                FROM counted c)
            SELECT w.id, sum(CASE WHEN w.f > 0 THEN w.idf * (w.f * %s::float8)
                                  / (w.f + %s::float8 * (%s::float8 + %s::float8 * w.length / %s::float8))
                                  ELSE 0 END ORDER BY w.first, w.i) AS score
            FROM weighed w GROUP BY w.id ORDER BY score DESC, w.id LIMIT %s""",
        ([i for i, _ in lexemes], [lexeme for _, lexeme in lexemes], [idf[i] for i, _ in lexemes], *newest_params,
         *pool_params,
         list(dict.fromkeys(lexeme for _, lexeme in lexemes)),
         weights["A"], weights["C"], weights["B"], bm25.K1 + 1.0, bm25.K1, 1 - bm25.B, bm25.B,
         corpus.average_length, k)).fetchall()
    return {int(i): float(score) for i, score in rows}


def _pooled_rank(conn: Any, column: str, queries: Sequence[str], weights: str, normalization: int, k: int,
                 filters: MemoryFilter, where: str, params: Sequence[Any]) -> dict[int, float]:
    """The best k memories of the pool (_pool) by ts_rank of `column` against any of `queries`
    (CJK pieces: how many a memory holds)."""
    if not queries:
        return {}
    ids = [row[0] for row in _pool(conn, column, queries, _holders(conn, column, queries), filters, where, params)]
    if not ids:
        return {}
    rows = conn.execute(
        f"""SELECT m.id, ts_rank('{weights}', m.{column}, w.q, {int(normalization)}) AS s
            FROM memories m, (SELECT %s::tsquery) AS w(q) WHERE m.id = ANY(%s) ORDER BY s DESC, m.id DESC LIMIT %s""",
        (any_of(queries), ids, k))
    return {int(i): float(score) for i, score in rows}
