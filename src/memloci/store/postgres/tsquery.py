"""tsquery texts for the postgres engine's word search: a word stemmed and as written, any of
several queries, and the pieces of Chinese and Japanese runs; and how many rows PostgreSQL's
statistics say hold a word. Query words never reach tsquery syntax unquoted: PostgreSQL's own
parser makes each word's lexemes."""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Sequence
from typing import Any

_HIRAGANA = re.compile(r"[\u3040-\u309f]")
LEXEME = re.compile(r"'((?:[^']|'')*)'")  # a lexeme in tsquery or tsvector text, escaped as there
_STATISTICS_TTL = 30.0  # seconds a library's most-common-words statistics are reused
_statistics: dict[tuple[str, str, str], tuple[float, dict[str, float]]] = {}


def term_tsqueries(conn: Any, terms: Sequence[str]) -> list[str]:
    """Each term as tsquery text: stemmed (`english`) or as written (`simple`), once if both are
    the same ('' for a word neither keeps, a stop word). One round trip; the queries that use
    them then hold constants, which GIN indexes and the planner's estimates take best."""
    if not terms:
        return []
    row = conn.execute("SELECT " + ", ".join(
        "plainto_tsquery('english', memloci_fold(%s))::text, plainto_tsquery('simple', memloci_fold(%s))::text"
        for _ in terms), [t for term in terms for t in (term, term)]).fetchone()
    return [any_of(dict.fromkeys(q for q in row[2 * i: 2 * i + 2] if q)) for i in range(len(terms))]


def any_of(queries: Iterable[str]) -> str:
    """tsquery text matching any of these tsquery texts."""
    return " | ".join(f"({q})" for q in queries if q)


def cjk_pieces(runs: Sequence[str]) -> list[str]:
    """The two- and three-character pieces of CJK runs, each as tsquery text (pairs holding a
    hiragana character are left out: mostly particles and endings, "の旅")."""
    trigrams = [run[i:i + 3] for run in runs if len(run) >= 3 for i in range(len(run) - 2)]
    pairs = [p for run in runs for p in (run[i:i + 2] for i in range(len(run) - 1)) if not _HIRAGANA.search(p)]
    return ["'" + p.replace("\\", "\\\\").replace("'", "''") + "'" for p in dict.fromkeys(trigrams + pairs)]


def estimated_holders(conn: Any, table: str, column: str, queries: Sequence[str], above: int) -> dict[str, float]:
    """The tsquery texts holding a word that PostgreSQL's statistics of `table.column` (its most
    common elements, kept by ANALYZE and autovacuum) put in more than `above` rows, with how
    many rows those statistics say hold it. Nothing before the first ANALYZE, or for words the
    statistics do not list (those are counted). The statistics change only at an ANALYZE, so
    each process reuses them for _STATISTICS_TTL seconds."""
    if not queries:
        return {}
    (schema,) = conn.execute("SELECT current_schema()").fetchone()
    cached = _statistics.get((schema, table, column))
    if cached is None or time.monotonic() - cached[0] > _STATISTICS_TTL:
        row = conn.execute(
            """SELECT s.most_common_elems::text::text[], s.most_common_elem_freqs, c.reltuples
               FROM pg_stats s JOIN pg_class c ON c.relname = s.tablename AND c.relnamespace = s.schemaname::regnamespace
               WHERE s.schemaname = current_schema() AND s.tablename = %s AND s.attname = %s""",
            (table, column)).fetchone()
        holders: dict[str, float] = {}
        if row and row[0] and row[1] and row[2] and row[2] > 0:
            holders = {lexeme: freq * row[2] for lexeme, freq in zip(row[0], row[1])}
        cached = _statistics[(schema, table, column)] = (time.monotonic(), holders)
    holders = cached[1]
    found = {q: max((holders.get(w.replace("''", "'"), 0.0) for w in LEXEME.findall(q)), default=0.0) for q in queries}
    return {q: n for q, n in found.items() if n > above}
