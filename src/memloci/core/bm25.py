"""One word score for every engine: BM25 as SQLite's FTS5 computes it.

    score(D) = sum over query terms t of  IDF(t) * f(t, D) * (K1 + 1) / (f(t, D) + K1 * (1 - B + B * |D| / avgdl))
    IDF(t)   = ln((N - n(t) + 0.5) / (n(t) + 0.5)), at least 1e-6
    f(t, D)  = sum over D's columns c of weight(c) * (times t occurs in column c)

|D| counts every token of every column (stop words too), avgdl is the mean |D| over the N
documents, n(t) how many documents hold t. This is FTS5's bm25() (fts5_aux.c), so SQLite,
which computes it inside FTS5, and PostgreSQL, whose statistics this module scores (memories:
store.WordStatistics, scored by search/hybrid.py; entities: store/postgres/entity_search.py), score
and order the same documents alike. The column weights are declared here, once: SQLite's SQL
is built from them (fts5_weights). Pure arithmetic, no I/O: engines and search/ both use it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

K1 = 1.2
B = 0.75
IDF_FLOOR = 1e-6  # FTS5 gives a term held by half the documents or more this much, not less

# A memory's columns, weighted in this order: `content` (its own words), `context` (its thread
# neighbours' words), `labels` (its tags and type). A label counts as a word of its own, below
# the text, so machine tags ("dia:D1:3") never outweigh what a memory says.
MEMORY_WEIGHTS = (1.0, 0.4, 0.5)

# An entity's columns: name, aliases, tags, type, text (observations and body), and the CJK
# two-character tokens of the first four (name grams) and of the text (text grams).
ENTITY_WEIGHTS = (5.0, 4.0, 2.5, 2.0, 1.0, 4.0, 1.0)
# A word more than 500 entities hold is common: its BM25 would read every holder's positions,
# so it adds its IDF to the pooled entities holding it instead, times what one match in a
# column of weight 5 (a name) weighs against one of weight 1 in a document of average length.
LABEL_GAIN = 5.0 * (K1 + 1.0) / (5.0 + K1)

# FTS5's unicode61 tokenizer: a token is a run of letters and digits; `_` and punctuation separate.
_TOKEN = re.compile(r"[^\W_]+")


def token_count(text: str) -> int:
    """The tokens FTS5 (unicode61) counts in `text`, stop words included: a column's length."""
    return len(_TOKEN.findall(text or ""))


def fts5_weights(table: str, weights: Sequence[float]) -> str:
    """The SQL calling FTS5's bm25() on `table` with these column weights."""
    return f"bm25({table}, {', '.join(repr(float(w)) for w in weights)})"


@dataclass(frozen=True, slots=True)
class Corpus:
    """What BM25 needs of the whole library: documents, and their tokens in all."""

    documents: int
    tokens: int

    @property
    def average_length(self) -> float:
        return self.tokens / self.documents if self.documents > 0 and self.tokens > 0 else 1.0


def idf(holders: int, documents: int) -> float:
    """FTS5's IDF of a term `holders` of `documents` documents hold."""
    value = math.log((documents - holders + 0.5) / (holders + 0.5)) if documents > 0 else 0.0
    return value if value > 0 else IDF_FLOOR


def score(frequencies: Mapping[int, Sequence[int]], length: int, holders: Sequence[int], corpus: Corpus,
          weights: Sequence[float]) -> float:
    """BM25 of one document (higher is better): `frequencies` maps a query term's index to how
    often it occurs in each column (in the order of `weights`), `length` is the document's
    tokens in all columns, `holders[i]` how many documents hold term i."""
    lengthen = K1 * (1 - B + B * length / corpus.average_length)
    total = 0.0
    for i, counts in frequencies.items():
        f = sum(w * c for w, c in zip(weights, counts))
        if f > 0:
            total += idf(holders[i], corpus.documents) * (f * (K1 + 1.0)) / (f + lengthen)
    return total


def why(held: Sequence[tuple[str, str, str]], n: int, value: float) -> str:
    """What a hit's `why` says of its words, on every engine: "all 3 words, bm25 7.2" / "1 of 2
    words (postgre as prefix)" / "..., name ~ alcie→alice". `held`: (the query's word, how it
    matched: word, prefix or respelled, the respelling) of each query word the document holds,
    of `n`; `value`: its BM25 (higher is better)."""
    k = len(held)
    what = (f"all {n} words" if n > 1 else "word") if k == n else f"{k} of {n} words"
    prefixes = [label for label, how, _ in held if how == "prefix"]
    if prefixes:
        what += f" ({', '.join(prefixes)} as prefix)"
    respelled = [note for _, how, note in held if how == "respelled"]
    if respelled:
        what += ", name ~ " + " ".join(respelled)
    return f"{what}, bm25 {value:.3g}"
