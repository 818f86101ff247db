"""Ranking entities with SQLite FTS5: BM25, every word first, then fallbacks.

Words match whole, with English stemming ("deploying" finds "deployed"). If no word
matches, they are tried as prefixes ("postgre" finds "postgresql"). A substring of a name,
type or alias matches too, below word matches, as the official server's search would; a
substring inside observations is looked for only when nothing else matched (it scans them).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from ..search import lexical

# Column weights: name, type, aliases, observations.
_BM25 = "bm25(entity_fts, 5.0, 2.0, 4.0, 1.0)"
_RANKED = f"SELECT rowid, {_BM25} AS s FROM entity_fts WHERE entity_fts MATCH ? ORDER BY s LIMIT ?"


@dataclass(frozen=True, slots=True)
class Score:
    matched: int  # query words the entity holds
    bm25: float  # FTS5 bm25: lower is better; 0 for substring matches
    why: str


def rank_entities(conn: sqlite3.Connection, query: str, want: int) -> dict[int, Score]:
    """Up to `want` entity ids with their scores (unordered; sort by (-matched, bm25))."""
    terms = lexical.query_terms(query)
    scored: dict[int, Score] = {}
    if terms:
        _rank_words(conn, terms, want, scored, prefix=False)
        if not scored:
            _rank_words(conn, terms, want, scored, prefix=True)
    text = query.strip()
    if len(scored) < want and text:
        # names compare casefolded (name_key); elsewhere LIKE ignores case for ASCII letters only
        pattern = lexical.like_pattern(text.lower())
        for (rowid,) in conn.execute(
            r"""SELECT id FROM entities
                WHERE name_key LIKE ?1 ESCAPE '\' OR entity_type LIKE ?2 ESCAPE '\' OR aliases LIKE ?2 ESCAPE '\'
                LIMIT ?3""",
            (lexical.like_pattern(text.casefold()), pattern, want + len(scored)),
        ):
            if rowid not in scored and len(scored) < want:
                scored[rowid] = Score(0, 0.0, "substring of name, type or alias")
        if len(scored) < want:  # the official server's guarantee: a substring of any observation is found
            for (rowid,) in conn.execute(
                r"""SELECT DISTINCT entity_id FROM memories
                    WHERE entity_id IS NOT NULL AND content LIKE ?1 ESCAPE '\' LIMIT ?2""",
                (pattern, want + len(scored)),
            ):
                if rowid not in scored and len(scored) < want:
                    scored[rowid] = Score(0, 0.0, "substring of an observation")
    return scored


def _rank_words(conn: sqlite3.Connection, terms: list[str], want: int, scored: dict[int, Score], *, prefix: bool) -> None:
    """Entities matching all words, then (if room is left) those matching most of them."""
    how = "prefix" if prefix else "word"
    n = len(terms)
    for rowid, bm25 in conn.execute(_RANKED, (lexical.match_all(terms, prefix), want)):
        scored[rowid] = Score(n, bm25, _why(f"all {n} {how}s" if n > 1 else how, bm25))
    if len(scored) >= want or n == 1:
        return
    pool = [(rowid, bm25) for rowid, bm25 in
            conn.execute(_RANKED, (lexical.match_any(terms, prefix), max(4 * want, 100) + len(scored)))
            if rowid not in scored]
    if not pool:
        return
    counts = dict.fromkeys((rowid for rowid, _ in pool), 0)
    marks = ",".join("?" * len(pool))
    for term in terms:
        for (rowid,) in conn.execute(
            f"SELECT rowid FROM entity_fts WHERE entity_fts MATCH ? AND rowid IN ({marks})",
            (lexical.fts_term(term, prefix), *counts),
        ):
            counts[rowid] += 1
    pool.sort(key=lambda p: (-counts[p[0]], p[1]))
    for rowid, bm25 in pool[: want - len(scored)]:
        scored[rowid] = Score(counts[rowid], bm25, _why(f"{counts[rowid]} of {n} {how}s", bm25))


def _why(what: str, bm25: float) -> str:
    return f"{what}, bm25 {-bm25:.3g}"
