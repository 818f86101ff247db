"""Consolidation's algorithms: which memories a time horizon takes, associations by meaning,
clusters with a size limit and a measured quality, and an extractive summary of a cluster.

Pure functions over memories and their vectors; nothing is read from a store or the clock (the
caller passes `now`) and nothing is written: the service turns the results into a preview.
Deterministic: the same input gives the same clusters and the same summary.

Associations are pairs with cosine >= ASSOCIATION_MIN (0.60). Measured with the default model on
`bench/data/near_duplicates.json` (English): 91% of the 1,845 pairs of statements about one
subject reach it and none of the 82,000 pairs about different subjects does (their highest is
0.599; 99.9% are below 0.49).

Clusters grow by average linkage: the strongest association first, two groups joined only when
the mean cosine across them stays >= the association threshold, so no chain of neighbours pulls
unrelated memories together. A cluster is refused, with the reason in the report, when it is
larger than the size limit (default `default_max_size`: one run once put 989 of 1,104 memories in
one cluster), when its members' mean cosine is below MIN_COHESION, or when that mean is not
MIN_SEPARATION above their mean cosine to the rest of the memories considered.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from memloci.core.errors import ValidationError
from memloci.core.lazy import on_first_use
from memloci.core.model import Memory
from memloci.search.changes import stem
from memloci.search.similar import check_rows, normalized_text, similar_pairs

if TYPE_CHECKING:
    import numpy as np
else:  # imported on first use: the server's start does not need it (core/lazy.py)
    np = on_first_use("numpy", globals(), "np")

ASSOCIATION_MIN = 0.60
MIN_COHESION = 0.60
MIN_SEPARATION = 0.25
HORIZONS = {"daily": 1, "weekly": 7, "monthly": 30, "quarterly": 91, "yearly": 365}  # days
SUMMARY_CHARS = 600
_CJK_RUN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+")
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
# A sentence ends at . ! ? followed by a space or the end (not inside "4.2" or "api.example.com"), at 。！？
# (closing quotes and brackets stay with it), or at a line break.
_SENTENCE = re.compile(r"[^\n]+?(?:[。！？]+[」』）”’\"')\]]*|[.!?]+[”’\"')\]]*(?=\s|$)|(?=\n)|$)")
_ABBREVIATIONS = frozenset({"e.g.", "i.e.", "etc.", "vs.", "mr.", "mrs.", "ms.", "dr.", "no.", "approx."})
_STOP = frozenset(
    "a an the this that these those there is are was were be been it its of for to in on at by with from and or "
    "but so as our we us my i you your he she they his her their them has have had do does did will would can "
    "could should may might must not no".split())


def within_horizon(memories: Sequence[Memory], time_horizon: str, now: datetime) -> list[Memory]:
    """The memories created in the horizon's days before `now` (daily 1, weekly 7, monthly 30,
    quarterly 91, yearly 365), in their given order. `now` comes from the caller's clock."""
    if time_horizon not in HORIZONS:
        raise ValidationError(f"time_horizon: must be one of {', '.join(HORIZONS)}, got {time_horizon!r}")
    if now.tzinfo is None:
        raise ValidationError("now: must carry a time zone (UTC), got a naive datetime")
    start = now - timedelta(days=HORIZONS[time_horizon])
    return [m for m in memories if start < _parsed(m.created_at) <= now]


def _parsed(stamp: str) -> datetime:
    when = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    return when if when.tzinfo else when.replace(tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class Association:
    """Two memories close in meaning (a relation with a score)."""

    a: Memory  # the older
    b: Memory
    score: float


def associations(memories: Sequence[Memory], vectors: np.ndarray, min_score: float = ASSOCIATION_MIN,
                 per_row: int = 10) -> list[Association]:
    """Pairs with cosine >= min_score, each memory keeping its `per_row` best, best first."""
    out = []
    for i, j, score in similar_pairs(check_rows(memories, vectors), min_score, per_row):
        a, b = memories[i], memories[j]
        if (b.created_at, b.id) < (a.created_at, a.id):
            a, b = b, a
        out.append(Association(a, b, round(score, 4)))
    return sorted(out, key=lambda x: (-x.score, x.a.created_at, x.a.id, x.b.created_at, x.b.id))


def default_max_size(count: int) -> int:
    """The size limit for `count` memories: the square root, at least 5 and at most 50."""
    return max(5, min(50, math.isqrt(max(0, count))))


@dataclass(frozen=True, slots=True)
class Cluster:
    members: tuple[Memory, ...]  # oldest first
    cohesion: float  # mean cosine between members
    to_rest: float  # mean cosine of members to the other memories considered

    @property
    def separation(self) -> float:
        return round(self.cohesion - self.to_rest, 4)


@dataclass(frozen=True, slots=True)
class RefusedCluster:
    cluster: Cluster
    reason: str


@dataclass(frozen=True, slots=True)
class ClusterReport:
    clusters: tuple[Cluster, ...]  # largest first
    refused: tuple[RefusedCluster, ...]
    max_size: int
    considered: int  # memories the run looked at

    def sizes(self) -> dict[int, int]:
        """How many accepted clusters have each size."""
        out: dict[int, int] = {}
        for c in self.clusters:
            out[len(c.members)] = out.get(len(c.members), 0) + 1
        return dict(sorted(out.items()))


def clusters(memories: Sequence[Memory], vectors: np.ndarray, *, min_score: float = ASSOCIATION_MIN,
             max_size: int | None = None, min_size: int = 2, min_cohesion: float = MIN_COHESION,
             min_separation: float = MIN_SEPARATION, per_row: int = 10,
             pairs: Sequence[tuple[int, int, float]] | None = None) -> ClusterReport:
    """Clusters of associated memories (see the module docstring); `vectors[k]` is the unit vector
    of `memories[k]`. `pairs` (from `similar_pairs` with the same min_score) saves recomputing them.
    Groups smaller than `min_size` are not clusters and are not reported."""
    n = len(memories)
    limit = max_size if max_size is not None else default_max_size(n)
    if limit < 2:
        raise ValidationError(f"max_size: must be 2 or more, got {limit}")
    vectors = check_rows(memories, vectors)
    if pairs is None:
        pairs = similar_pairs(vectors, min_score, per_row)
    parent = list(range(n))
    size = [1] * n
    sums: dict[int, np.ndarray] = {}

    def root(k: int) -> int:
        while parent[k] != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
        return k

    for i, j, score in sorted(pairs, key=lambda p: (-p[2], p[0], p[1])):
        ri, rj = root(i), root(j)
        if ri == rj:
            continue
        si = sums[ri] if ri in sums else vectors[ri].astype(np.float64)
        sj = sums[rj] if rj in sums else vectors[rj].astype(np.float64)
        # the mean cosine across the two groups (two single memories: their own cosine)
        across = score if size[ri] == size[rj] == 1 else float(si @ sj) / (size[ri] * size[rj])
        if across < min_score:
            continue
        keep, gone = (ri, rj) if ri < rj else (rj, ri)
        parent[gone] = keep
        size[keep] += size[gone]
        sums[keep] = si + sj
        sums.pop(gone, None)
    groups: dict[int, list[int]] = {}
    for k in range(n):
        groups.setdefault(root(k), []).append(k)
    total = vectors.sum(axis=0, dtype=np.float64)
    accepted, refused = [], []
    for members in groups.values():
        if len(members) < min_size:
            continue
        cluster = _measured(memories, vectors, members, total)
        reason = _refusal(cluster, limit, min_cohesion, min_separation)
        if reason:
            refused.append(RefusedCluster(cluster, reason))
        else:
            accepted.append(cluster)

    def order(c: Cluster) -> tuple[int, str, int]:
        return (-len(c.members), c.members[0].created_at, c.members[0].id)

    return ClusterReport(tuple(sorted(accepted, key=order)), tuple(sorted(refused, key=lambda r: order(r.cluster))),
                         limit, n)


def _measured(memories: Sequence[Memory], vectors: np.ndarray, members: list[int], total: np.ndarray) -> Cluster:
    n, count = len(vectors), len(members)
    inside = vectors[members].sum(axis=0, dtype=np.float64)
    cohesion = float((inside @ inside - count) / (count * (count - 1)))
    to_rest = float(inside @ (total - inside)) / (count * (n - count)) if n > count else 0.0
    ordered = tuple(sorted((memories[k] for k in members), key=lambda m: (m.created_at, m.id)))
    return Cluster(ordered, round(cohesion, 4), round(to_rest, 4))


def _refusal(cluster: Cluster, limit: int, min_cohesion: float, min_separation: float) -> str | None:
    count = len(cluster.members)
    if count > limit:
        return (f"{count} memories, above the size limit of {limit}: raise the association threshold or take "
                f"a shorter time horizon")
    if cluster.cohesion < min_cohesion:
        return f"mean cosine between members {cluster.cohesion:.2f} is below {min_cohesion:.2f}"
    if cluster.separation < min_separation:
        return (f"mean cosine between members {cluster.cohesion:.2f} is only {cluster.separation:.2f} above their "
                f"mean cosine to the rest ({cluster.to_rest:.2f}); {min_separation:.2f} is needed")
    return None


def split_sentences(text: str) -> list[str]:
    """Sentences of a text, in order, stripped: split after . ! ? and a space, after 。！？ (and
    after a closing 」』） that follows them), and at line breaks; "4.2", "api.example.com" and
    "e.g. " do not end a sentence."""
    out: list[str] = []
    for piece in _SENTENCE.findall(text):
        piece = piece.strip()
        if not piece:
            continue
        if out and out[-1].split()[-1].casefold() in _ABBREVIATIONS:
            out[-1] = f"{out[-1]} {piece}"
        else:
            out.append(piece)
    return out


def _terms(sentence: str) -> dict[str, float]:
    """Words (stemmed, common ones left out) and two-character pieces of CJK runs, counted."""
    text = unicodedata.normalize("NFKC", sentence).casefold()
    counts: dict[str, float] = {}
    for run in _CJK_RUN.findall(text):
        for piece in ([run] if len(run) == 1 else [run[i:i + 2] for i in range(len(run) - 1)]):
            counts[piece] = counts.get(piece, 0.0) + 1.0
    for word in _WORD.findall(_CJK_RUN.sub(" ", text)):
        if word not in _STOP:
            term = stem(word)
            counts[term] = counts.get(term, 0.0) + 1.0
    norm = math.sqrt(sum(v * v for v in counts.values())) or 1.0
    return {k: v / norm for k, v in counts.items()}


def _cosine(a: dict[str, float], b: dict[str, float]) -> float:
    if len(b) < len(a):
        a, b = b, a
    return sum(v * b.get(k, 0.0) for k, v in a.items())


@dataclass(frozen=True, slots=True)
class Summary:
    text: str
    sources: tuple[str, ...]  # content_hash of every member, oldest first
    sentences: int  # how many sentences it took


def summarize(members: Sequence[Memory], max_chars: int = SUMMARY_CHARS, redundant: float = 0.8) -> Summary:
    """One text for a cluster, from its most central sentences: each sentence is scored by the
    cosine of its words to the words of the whole cluster; the best are taken while they fit in
    `max_chars`, skipping one that repeats a sentence already taken (same normalized text, or word
    cosine >= `redundant`), and are written in the order they were first said (oldest memory
    first). No language model; the same members give the same summary."""
    if max_chars < 1:
        raise ValidationError(f"max_chars: must be 1 or more, got {max_chars}")
    ordered = sorted(members, key=lambda m: (m.created_at, m.id))
    sentences: list[tuple[int, str, dict[str, float]]] = []
    for memory in ordered:
        for sentence in split_sentences(memory.content):
            sentences.append((len(sentences), sentence, _terms(sentence)))
    sources = tuple(m.content_hash for m in ordered)
    if not sentences:
        return Summary("", sources, 0)
    centre: dict[str, float] = {}
    for _, _, terms in sentences:
        for k, v in terms.items():
            centre[k] = centre.get(k, 0.0) + v
    norm = math.sqrt(sum(v * v for v in centre.values())) or 1.0
    centre = {k: v / norm for k, v in centre.items()}
    ranked = sorted(sentences, key=lambda s: (-round(_cosine(s[2], centre), 9), s[0]))
    taken: list[tuple[int, str, dict[str, float]]] = []
    seen: set[str] = set()
    used = 0
    for position, sentence, terms in ranked:
        key = normalized_text(sentence)
        if key in seen or any(_cosine(terms, t[2]) >= redundant for t in taken):
            continue
        cost = len(sentence) + (1 if taken else 0)
        if used + cost > max_chars:
            continue
        taken.append((position, sentence, terms))
        seen.add(key)
        used += cost
    if not taken:  # even the most central sentence is too long: cut it, and say so
        return Summary(ranked[0][1][: max(0, max_chars - 1)].rstrip() + "…", sources, 1)
    taken.sort(key=lambda t: t[0])
    text = ""
    for _, sentence, _ in taken:
        text += sentence if not text or _CJK_RUN.match(sentence[:1]) and not text[-1].isascii() else " " + sentence
    return Summary(text, sources, len(taken))
