"""A second pass seeded by the first: pseudo-relevance feedback over words and meaning.

A question is worded unlike most of its answers, but its best few hits are worded like the
others: "What video games does Nate play?" finds "I usually play CS:GO ... Street Fighter",
and that statement shares "tournament" with "I was in the final of a big Valorant
tournament", which the question itself does not. The first pass's best FEEDBACK_SEEDS hits
are the seeds, and two signals are read from them (search/hybrid.py adds both to the fused
score, before the cues' and decay's factors):

- words: the seeds' own words that the question lacks (expansion_terms) are searched for in a
  second word search, whose BM25, scaled to its best, is added with EXPANSION_WEIGHT; a memory
  only it finds comes with its meaning too;
- meaning: every candidate's cosine similarity to the seeds' mean vector, min-max scaled over
  the candidates, is added with FEEDBACK_WEIGHT (seeded).

Bounded work: one more word search of a few words, and for meaning only the candidates the
first pass scored (a few hundred rows of the in-process index, one small matrix product). A
store that searches its own vectors (VectorSearch) holds none in the process: no meaning part there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from memloci.core.lazy import on_first_use

if TYPE_CHECKING:
    import numpy as np
else:  # imported on first use (core/lazy.py)
    np = on_first_use("numpy", globals(), "np")

# Chosen by leave-one-conversation-out on the LoCoMo development split (`memloci bench locomo --folds`).
# The meaning part is off: beside the words' part it added nothing there (recall@10 82.99 with
# 0.1, 82.98 without), and a store that searches its own vectors could not do it.
FEEDBACK_WEIGHT = 0.0
FEEDBACK_SEEDS = 3


def seeded(index, first: Mapping[int, float], seeds: int = FEEDBACK_SEEDS) -> dict[int, float]:
    """Each candidate's closeness (0..1) to the mean vector of the `seeds` best of `first`
    (candidate id -> first-pass score); {} when there is nothing to seed from."""
    if seeds <= 0 or len(first) <= seeds:
        return {}
    ids, matrix = index.rows(list(first))
    if len(ids) <= seeds:
        return {}
    scores = np.fromiter((first[i] for i in ids), dtype=np.float64, count=len(ids))
    best = np.argpartition(-scores, seeds - 1)[:seeds]
    best = best[scores[best] > 0]  # seeds are matches (a query about nothing stored has none)
    if not len(best):
        return {}
    centroid = matrix[best].mean(axis=0)
    similarity = matrix @ centroid
    low, high = float(similarity.min()), float(similarity.max())
    if high - low < 1e-9:
        return {}
    return dict(zip(ids, ((similarity - low) / (high - low)).tolist()))


# Words: the seeds' own words that the question does not hold are searched for too (a second
# word search), and what that finds is added to the fused score with EXPANSION_WEIGHT.
EXPANSION_WEIGHT = 0.2
EXPANSION_TERMS = 8
# The second word search's best, at most: each new one is read and weighed. On the LoCoMo dev
# split 100 gave recall@10 83.0 for +2.7 ms of CPU per call, 30 gave 82.5 for +1.7 ms; none 82.0.
EXPANSION_CANDIDATES = 100


def expansion_terms(seeds: list[list[str]], asked: set[str], stop_words: frozenset[str]) -> list[str]:
    """The words to search for besides the question's: of the seeds' words (each seed's query
    terms, in order), those the question does not hold and that are not stop words or short,
    the ones in most seeds first, then the longer; at most EXPANSION_TERMS."""
    counts: dict[str, int] = {}
    for words in seeds:
        for word in set(words):
            if len(word) > 2 and word not in asked and word not in stop_words and not word.isdigit():
                counts[word] = counts.get(word, 0) + 1
    return sorted(counts, key=lambda word: (-counts[word], -len(word), word))[:EXPANSION_TERMS]
