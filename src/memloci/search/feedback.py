"""A second pass seeded by the first: pseudo-relevance feedback over meaning.

A question is worded unlike most of its answers, but its best few hits are worded like the
others: "What video games does Nate play?" finds "I usually play CS:GO ... Street Fighter",
and that statement is close to "I was in the final of a big Valorant tournament", which the
question itself is not. So the first pass's best SEEDS hits (by their final score, cues and
decay included) are the seeds; every candidate's cosine similarity to the seeds' mean vector,
min-max scaled over the candidates, is added to its fused score with FEEDBACK_WEIGHT before
the cues' factors apply again (search/hybrid.py).

Bounded work: only the candidates the first pass scored are looked at (a few hundred rows of
the in-process index, one small matrix product), never the whole library. A store that searches
its own vectors (VectorSearch) holds none in the process: no second pass there.
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
    centroid = matrix[best].mean(axis=0)
    similarity = matrix @ centroid
    low, high = float(similarity.min()), float(similarity.max())
    if high - low < 1e-9:
        return {}
    return dict(zip(ids, ((similarity - low) / (high - low)).tolist()))
