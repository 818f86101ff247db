"""tsquery texts for the postgres engine's word search: a word stemmed and as written, any of
several queries, and the pieces of Chinese and Japanese runs. Query words never reach
tsquery syntax unquoted: PostgreSQL's own parser makes each word's lexemes."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

_HIRAGANA = re.compile(r"[\u3040-\u309f]")


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


def cjk_query(runs: Sequence[str]) -> str | None:
    """A tsquery (text) matching any two- or three-character piece of the runs."""
    return any_of(cjk_pieces(runs)) or None
