"""Duplicates and contradictions among memories: pure functions over texts and vectors.

Nothing here reads a store or writes anything: the service turns what these find into previews.
Every result is deterministic: ties are broken by the memories' order.

- Exact duplicates: texts equal after `normalized_text` (NFKC, casefold, whitespace collapsed,
  trailing punctuation stripped). The keeper is the oldest; the merge keeps the union of tags
  (first-seen spelling), the summed access counts, the oldest created_at, the highest importance.
- Near duplicates by meaning: cosine >= NEAR_DUPLICATE_MIN and no changed number, name,
  negation or time (search/changes.py) and no swapped word (`swapped_words`: a small edit that
  puts other content words in place of some, the same words in another order, or a Chinese or
  Japanese word swapped). Offered, never merged blindly.
- Contradictions: cosine >= SAME_SUBJECT_MIN and a changed number, name, negation or time:
  "newer supersedes older", with the reason ("number 3 -> 5").

Measured on `bench/data/near_duplicates.json`: 51 facts (41 English, 5 Chinese, 5 Japanese),
each with 3 paraphrases (153 true near-duplicate pairs) and 6 variants that change one fact about
the same subject (306 hard negatives: 73 number, 108 name or thing, 77 negation, 48 time).
Meaning alone cannot separate them: to the default model (all-MiniLM-L6-v2 int8) a variant is as
close to its fact (English median cosine 0.89) as a paraphrase is (0.91), and no cosine threshold
reaches a precision above 0.42. With the changed-words test, on the English pairs (123
paraphrases, 246 variants), precision / recall:

    cosine >=   minilm         multilingual (USE v3)
      0.72      0.959 / 0.577  0.958 / 0.561
      0.80      0.957 / 0.537  0.968 / 0.496
      0.84      0.969 / 0.512  0.964 / 0.439    <- NEAR_DUPLICATE_MIN
      0.90      0.976 / 0.333  0.971 / 0.276

Chinese and Japanese (30 paraphrases, 60 variants) at 0.84 with the multilingual model: 1.00 /
0.70. The English-only default model's vectors of CJK text carry little meaning: callers pass
only what it understands (`embedder.understands`), so with it CJK memories get exact duplicates
only: near duplicates and contradictions need a model that reads them (cross-subject CJK pairs
reach cosine 0.87 under the default model).

Contradictions at SAME_SUBJECT_MIN 0.70 (default model): 183 of the 246 English variants are
proposed (all 64 changed numbers and 38 times, 48 of 59 negations, 33 of 85 changed names or
things: a changed lower-case thing is no name), and 9 of the 123 paraphrases wrongly (precision
0.95); no English pair of different facts reaches 0.70 (the highest of 82,000 is 0.60). Chinese
and Japanese with the multilingual model: 48 of 60 proposed, 5 of 30 paraphrases wrongly
(precision 0.91). `memloci bench lifecycle [--embedder multilingual]` prints these tables.
"""

from __future__ import annotations

import difflib
import functools
import re
import unicodedata
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from memloci.core.errors import ValidationError
from memloci.core.lazy import on_first_use
from memloci.core.model import IMPORTANCE, Memory
from memloci.search.changes import Change, changes, facts_of, number_value, stem

if TYPE_CHECKING:
    import numpy as np
else:  # imported on first use: the server's start does not need it (core/lazy.py)
    np = on_first_use("numpy", globals(), "np")

NEAR_DUPLICATE_MIN = 0.84
NEAR_WORDS_SHARE = 0.3  # of the content words of the shorter text, that a near duplicate shares (may_be_near)
SAME_SUBJECT_MIN = 0.70
MOVED_SPAN = 7  # words (or CJK letters) that trade places within this stretch swap roles
STRIP_CELLS = 16 << 20  # cosines computed at once: 64 MB of float32
CONTRADICTION_KINDS = ("number", "name", "negation", "time")
_SPACE = re.compile(r"\s+")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
_STOP = frozenset(
    "a an the this that these those there is are was were be been being it its of for to in on at by with from "
    "and or but so as our we us my i you your he she they his her their them has have had do does did will would "
    "can could should may might must just only also then than very each every all some any what which who whom "
    "when where why how get gets got make makes made because since times time".split())


def normalized_text(text: str) -> str:
    """The text as exact-duplicate detection compares it: NFKC, casefolded, runs of white space
    made one space, trailing punctuation and spaces stripped."""
    folded = _SPACE.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()
    end = len(folded)
    while end and (folded[end - 1].isspace() or unicodedata.category(folded[end - 1]).startswith("P")):
        end -= 1
    return folded[:end]


def _when(memory: Memory) -> tuple[str, int]:
    return (memory.created_at, memory.id)


@dataclass(frozen=True, slots=True)
class ExactGroup:
    """Memories that say the same text; `keeper` (the oldest) takes the merged fields."""

    keeper: Memory
    duplicates: tuple[Memory, ...]  # oldest first
    tags: tuple[str, ...]
    access_count: int
    created_at: str
    importance: str


def exact_duplicates(memories: Sequence[Memory]) -> list[ExactGroup]:
    """Groups of two or more memories whose `normalized_text` is equal, in the order of their
    keepers' creation. Tags merge in the order the memories were created, a tag's first spelling
    kept ("Work" then "work" is "Work")."""
    groups: dict[str, list[Memory]] = {}
    for memory in memories:
        groups.setdefault(normalized_text(memory.content), []).append(memory)
    out = []
    for members in groups.values():
        if len(members) < 2:
            continue
        members = sorted(members, key=_when)
        tags: dict[str, str] = {}
        for memory in members:
            for tag in memory.tags:
                tags.setdefault(tag.casefold(), tag)
        importance = min((m.importance for m in members),
                         key=lambda i: IMPORTANCE.index(i) if i in IMPORTANCE else len(IMPORTANCE))
        out.append(ExactGroup(members[0], tuple(members[1:]), tuple(tags.values()),
                              sum(m.access_count for m in members), members[0].created_at, importance))
    return sorted(out, key=lambda g: _when(g.keeper))


def _strip(vectors: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
    """Rows in strips small enough that one strip against every later row stays near 64 MB."""
    n = len(vectors)
    rows = max(64, STRIP_CELLS // max(1, n))
    for start in range(0, n, rows):
        yield start, vectors[start:start + rows]


def similar_pairs(vectors: np.ndarray, min_score: float, per_row: int = 10) -> list[tuple[int, int, float]]:
    """Pairs (i, j, cosine) with i < j and cosine >= min_score among unit-length rows, keeping for each
    row its `per_row` best partners (a pair stays if either of its rows keeps it), sorted by i then j.

    The matrix is never held whole: each strip of rows is multiplied with the rows from its own
    first one on (the upper triangle, half the products), so memory stays bounded at 100,000 rows.
    A row's best partners among later rows are in its strip; among earlier ones, in their strips
    (kept per column there), so the result is exact.
    """
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    n = len(vectors)
    found_i: list[np.ndarray] = []
    found_j: list[np.ndarray] = []
    found_s: list[np.ndarray] = []
    for start, strip in _strip(vectors):
        scores = strip @ vectors[start:].T  # strip row r is row start + r; column c is row start + c
        height = len(strip)
        scores[:, :height][np.tril_indices(height)] = -np.inf  # self and earlier rows of the strip
        rows, cols = _best(scores, min_score, per_row)
        found_i.append(rows + start)
        found_j.append(cols + start)
        found_s.append(scores[rows, cols])
    if not found_i:
        return []
    i, j, s = np.concatenate(found_i), np.concatenate(found_j), np.concatenate(found_s)
    both = _per_row(np.concatenate((i, j)), np.concatenate((j, i)), np.concatenate((s, s)), per_row, n)
    keep = both[: len(i)] | both[len(i):]  # each row ranks all its pairs, as the first row or the second
    i, j, s = i[keep], j[keep], s[keep]
    order = np.lexsort((j, i))
    return [(int(a), int(b), float(c)) for a, b, c in zip(i[order], j[order], s[order], strict=True)]


def _best(scores: np.ndarray, min_score: float, per_row: int) -> tuple[np.ndarray, np.ndarray]:
    """Cells >= min_score, thinned to each row's and each column's `per_row` best when there are
    more (a library of near-identical memories must not fill memory with pairs)."""
    hits = scores >= min_score
    if int(hits.sum()) <= per_row * (scores.shape[0] + scores.shape[1]):
        rows, cols = np.nonzero(hits)
        return rows, cols
    keep = np.zeros_like(hits)
    k_row, k_col = min(per_row, scores.shape[1]), min(per_row, scores.shape[0])
    top_rows = np.argpartition(-scores, k_row - 1, axis=1)[:, :k_row]
    np.put_along_axis(keep, top_rows, True, axis=1)
    top_cols = np.argpartition(-scores, k_col - 1, axis=0)[:k_col, :]
    np.put_along_axis(keep, top_cols, True, axis=0)
    rows, cols = np.nonzero(keep & hits)
    return rows, cols


def _per_row(owner: np.ndarray, other: np.ndarray, score: np.ndarray, per_row: int, n: int) -> np.ndarray:
    """A mask of the entries that are among their owner row's `per_row` best (ties: lower other)."""
    order = np.lexsort((other, -score, owner))
    ranked_owner = owner[order]
    first = np.searchsorted(ranked_owner, np.arange(n))
    rank = np.arange(len(order)) - first[ranked_owner]
    mask = np.zeros(len(order), dtype=bool)
    mask[order] = rank < per_row
    return mask


@functools.lru_cache(maxsize=1 << 14)  # a stored memory meets many new texts as a word match (may_be_near)
def _content_stems(text: str) -> frozenset[str]:
    facts = facts_of(text)
    return frozenset({stem(w) for w in facts.words
            if w.isalpha() and w not in _STOP and len(w) > 1 and number_value(w) is None})  # numbers: see changes()


def swapped_words(a: str, b: str) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """The content words a small edit swapped ("billing service" -> "search service"), or None.

    A pair that keeps all but one or two content words and puts others in their place states
    another fact about the same subject (another thing, place or person), even with no capital
    letter to mark a name; a paraphrase rewords more than that, or only adds or drops words.
    """
    moved = _moved(normalized_text(a), normalized_text(b))
    if moved:
        return moved
    if _CJK.search(a) or _CJK.search(b):
        return _cjk_swapped(unicodedata.normalize("NFKC", a), unicodedata.normalize("NFKC", b))
    mine, theirs = _content_stems(a), _content_stems(b)
    gone, came = mine - theirs, theirs - mine
    if gone and came and len(gone) <= 2 and len(came) <= 2 and len(mine & theirs) >= 2 * max(len(gone), len(came)):
        return tuple(sorted(gone)), tuple(sorted(came))
    return None


def _cjk_swapped(a: str, b: str) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """Chinese and Japanese have no spaces to find words by: a pair that aligns character by character
    for the most part (SequenceMatcher ratio >= 0.8) and puts CJK letters found nowhere in the other
    text where it dropped others (女儿 -> 儿子, 季度 -> 年度, ピーナッツ -> そば) swapped a word."""
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    if matcher.ratio() < 0.8:
        return None
    gone = [a[i1:i2] for op, i1, i2, _, _ in matcher.get_opcodes() if op in ("replace", "delete")]
    came = [b[j1:j2] for op, _, _, j1, j2 in matcher.get_opcodes() if op in ("replace", "insert")]
    gone = [g for g in gone if any(c.isalpha() for c in g) and g.strip() not in b]
    came = [c for c in came if any(ch.isalpha() for ch in c) and c.strip() not in a]
    return (tuple(gone), tuple(came)) if gone and came else None


def _units(text: str) -> list[str]:
    # CJK letter by letter (no spaces to split at), other words whole
    return re.findall(_CJK.pattern + r"|[^\W\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+", text)


def _moved(a: str, b: str) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """The same words in another order ("Slack over email" -> "email over Slack"): another fact.
    Returns the stretch that differs on each side."""
    mine, theirs = _units(a), _units(b)
    if mine == theirs or Counter(mine) != Counter(theirs):
        return None
    first = next(k for k, (x, y) in enumerate(zip(mine, theirs, strict=True)) if x != y)
    last = max(k for k, (x, y) in enumerate(zip(mine, theirs, strict=True)) if x != y)
    if last - first >= MOVED_SPAN:  # a clause put first ("Until August, Carlos is ..."): the same fact
        return None
    return (" ".join(mine[first:last + 1]),), (" ".join(theirs[first:last + 1]),)


@dataclass(frozen=True, slots=True)
class NearDuplicate:
    """Two memories that say the same thing in other words: offered as a merge into `keeper`."""

    keeper: Memory  # the older
    duplicate: Memory
    score: float


@dataclass(frozen=True, slots=True)
class Contradiction:
    """A newer memory that says something else about the subject of an older one."""

    older: Memory
    newer: Memory
    score: float
    changes: tuple[Change, ...]

    @property
    def reason(self) -> str:
        """"number 3 -> 5; negation + not"."""
        return "; ".join(c.describe() for c in self.changes)


def check_rows(memories: Sequence[Memory], vectors: np.ndarray) -> np.ndarray:
    """The vectors as float32 rows, one per memory; refused (ValidationError) otherwise."""
    rows = np.asarray(vectors, dtype=np.float32)
    if rows.ndim != 2 or len(rows) != len(memories):
        raise ValidationError(f"vectors: one row per memory is needed, got shape {rows.shape} for "
                              f"{len(memories)} memories")
    return rows


def _ordered(a: Memory, b: Memory) -> tuple[Memory, Memory]:
    return (a, b) if _when(a) <= _when(b) else (b, a)


def may_be_near(older: str, newer: str) -> bool:
    """Whether `older` can be a near duplicate of `newer` by their words, before any vector is
    computed: it states the same facts (`same_fact`) and the two share at least NEAR_WORDS_SHARE
    of the content words of the text with fewer (one word at least). Chinese or Japanese text is
    not split into words here: it always may be. store_memory embeds a new text on the request
    path only when one of its best word matches may be near (service/memories.py similar_to).

    Measured with the default model: of the 103 pairs among the facts and paraphrases of
    `bench/data/near_duplicates.json` that are near duplicates (cosine >= NEAR_DUPLICATE_MIN and
    same_fact), the fewest shared are 1 of 3 words ("School for the kids runs from 8:15 to
    3:00." / "The children start school at 8:15 and finish at 3:00."); of the 17 among the
    turns of the five LoCoMo dev conversations, 3 of 8. In those conversations 18% of the turns
    have an earlier turn that may be near."""
    if _CJK.search(older) or _CJK.search(newer):
        return True
    mine, theirs = _content_stems(older), _content_stems(newer)
    shared = len(mine & theirs)
    return shared >= max(1.0, NEAR_WORDS_SHARE * min(len(mine), len(theirs))) and same_fact(older, newer)


def same_fact(older: str, newer: str) -> bool:
    """Two texts close in meaning say the same fact: no changed number, name, negation or time and
    no swapped word (and not one text twice: that is an exact duplicate)."""
    return (normalized_text(older) != normalized_text(newer) and not changes(older, newer)
            and not swapped_words(older, newer))


def near_duplicates(memories: Sequence[Memory], vectors: np.ndarray, min_score: float = NEAR_DUPLICATE_MIN,
                    per_row: int = 10) -> list[NearDuplicate]:
    """Pairs close in meaning that change no number, name, negation, time or word (see the module
    docstring), best first. `vectors[k]` is the unit vector of `memories[k]`; pass only memories
    the model understands (`embedder.understands`). Exact duplicates are left to `exact_duplicates`."""
    out = []
    for i, j, score in similar_pairs(check_rows(memories, vectors), min_score, per_row):
        older, newer = _ordered(memories[i], memories[j])
        if same_fact(older.content, newer.content):
            out.append(NearDuplicate(older, newer, round(score, 4)))
    return sorted(out, key=lambda d: (-d.score, _when(d.keeper), _when(d.duplicate)))


def contradictions(memories: Sequence[Memory], vectors: np.ndarray, min_score: float = SAME_SUBJECT_MIN,
                   per_row: int = 10, kinds: Sequence[str] = CONTRADICTION_KINDS) -> list[Contradiction]:
    """Pairs about the same subject (cosine >= min_score) whose words differ in a number, name,
    negation or time: the newer is proposed to supersede the older, best first. As for
    `near_duplicates`, pass only memories the model understands."""
    out = []
    for i, j, score in similar_pairs(check_rows(memories, vectors), min_score, per_row):
        older, newer = _ordered(memories[i], memories[j])
        found = tuple(c for c in changes(older.content, newer.content) if c.kind in kinds)
        if found:
            out.append(Contradiction(older, newer, round(score, 4), found))
    return sorted(out, key=lambda c: (-c.score, _when(c.older), _when(c.newer)))
