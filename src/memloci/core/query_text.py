"""Turning a user's query into full-text search expressions (FTS5 MATCH and LIKE syntax, and
the words PostgreSQL's tsquery is built from): the engines' own business, kept under store/.

User text never reaches FTS syntax directly: every term is quoted, so `"`, `*`, `AND`,
`NEAR(` and friends are searched as words, never parsed as operators.
"""

from __future__ import annotations

import re

_WORD = re.compile(r"\w+", re.UNICODE)
MAX_TERMS = 16
# In a prefix search, terms of this length or more match as prefixes ("postgre" finds
# "postgresql"); shorter ones stay whole words, since a one-letter prefix matches nearly every row.
PREFIX_MIN = 3


def query_terms(query: str) -> list[str]:
    """Distinct lowercase words of a query, in order, at most MAX_TERMS."""
    seen: dict[str, None] = {}
    # lower(), not casefold(): the index lowercases ("ß" stays "ß"; casefold would make it "ss")
    for word in _WORD.findall(query.lower()):
        word = word.strip("_")
        if word and word not in seen:
            seen[word] = None
    return list(seen)[:MAX_TERMS]


def fts_term(term: str, prefix: bool = False) -> str:
    quoted = '"' + term.replace('"', '""') + '"'
    return quoted + "*" if prefix and len(term) >= PREFIX_MIN else quoted


def match_all(terms: list[str], prefix: bool = False) -> str:
    return " AND ".join(fts_term(t, prefix) for t in terms)


def match_any(terms: list[str], prefix: bool = False) -> str:
    return " OR ".join(fts_term(t, prefix) for t in terms)


def like_pattern(text: str) -> str:
    """A LIKE pattern finding `text` as a substring (with `\\` as the escape character)."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"
