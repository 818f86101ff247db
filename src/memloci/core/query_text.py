"""Turning a user's query into full-text search expressions (FTS5 MATCH and LIKE syntax, and
the words PostgreSQL's tsquery is built from): the engines' own business, kept under store/.

User text never reaches FTS syntax directly: every term is quoted, so `"`, `*`, `AND`,
`NEAR(` and friends are searched as words, never parsed as operators.
"""

from __future__ import annotations

import re

_WORD = re.compile(r"\w+", re.UNICODE)
# A run of Chinese, Japanese or Korean characters: indexed as overlapping two-character tokens.
CJK_RUN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+")
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


def cjk_grams(text: str) -> str:
    """The CJK runs of `text` as overlapping two-character tokens ("東京の" -> "東京 京の"), and
    the other letters of words that mix scripts ("東京api" -> "東京 api"), which the word index
    holds only as one token. Registered on every connection as memloci_cjk_grams."""
    out: list[str] = []
    for word in _WORD.findall(text or ""):
        runs = CJK_RUN.findall(word)
        if not runs:
            continue
        for run in runs:
            out.extend([run] if len(run) == 1 else [run[i:i + 2] for i in range(len(run) - 1)])
        out.extend(CJK_RUN.sub(" ", word).split())
    return " ".join(out)


def entity_query_terms(query: str, stop_words: frozenset[str] = frozenset()) -> list[tuple[str, str]]:
    """(word, kind) of a query: kind is 'cjk' for a run of CJK characters, else 'word'.
    Stop words are dropped unless nothing else is left."""
    terms: list[tuple[str, str]] = []
    # every word, not query_terms' first 16: a long question's stop words come first
    for word in dict.fromkeys(w.strip("_") for w in _WORD.findall(query.lower()) if w.strip("_")):
        for run in CJK_RUN.findall(word):
            terms.append((run, "cjk"))
        terms.extend((piece, "word") for piece in CJK_RUN.sub(" ", word).split())
    kept = [t for t in terms if t[0] not in stop_words]
    return list(dict.fromkeys(kept or terms))[:MAX_TERMS]
