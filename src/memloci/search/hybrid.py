"""Hybrid retrieval of memories: words, meaning and substrings, fused, then decayed.

1. Words: BM25 over each memory's own words (weight 1), its thread neighbours' words
   (weight 0.4) and its tags and type (weight 0.5), English stemming, stop words dropped.
2. Meaning: cosine similarity of query and memory vectors, lifted by the neighbours'
   similarity (search/vectors.py: the in-process index, or the store's own vector search,
   filtered in its query, for a store that offers one: VectorSearch, pgvector).
3. Substrings: runs of Chinese/Japanese characters are looked up in a trigram index, so CJK
   text is found by keyword too.
Each signal is min-max normalized over the candidates and the two are averaged; the result
is multiplied by the memory's decay factor (search/decay.py), and by 1.5 inside a time
range the query mentions ("last week"), and by the question's cues (search/cues.py): a
"when" question lifts statements that say when, a date it names the memories whose metadata
`date` falls there, a person it names that person's "Name: ..." statements. Two more signals
are added to the fused score before those factors: session context (search/context.py: the
best match of the same conversation close by) and a second pass seeded by the first pass's best
hits (search/feedback.py: their own words searched for too, and nearness to their mean vector).
With a multilingual model, memories of another language than the query's that are nearer in
meaning than any memory in its language rank first (search/languages.py: the query's words
cannot reach them). Ranking a time range's memories ahead of the rest,
and filling a range with its newest memories when few match, is the caller's part
(service.retrieve_memory): this function ranks what matches.

`keywords` and `meaning_text`, when given, are the texts the words and substrings, and the
meaning, come from (the query without its time phrase: "last" and "week" in "what did we work
on last week", or 昨日 in "昨日の決定", are not about the memory's text).
"""

from __future__ import annotations

import logging
import math
import re
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memloci.core import bm25
from memloci.core.model import Memory, MemoryFilter
from memloci.rules.retention import parse_time
from memloci.search import context, cues, feedback, languages, lexical
from memloci.search.decay import MOST_DECAY, decay_factor
from memloci.search.embedder import QUERY_VECTORS, understands
from memloci.search.timephrases import TimeRange
from memloci.search.vectors import VectorSearch
from memloci.store.protocols import WordScores

log = logging.getLogger(__name__)
_POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="memloci-query")
WORDS_WEIGHT = 0.5
MEANING_NOISE, MEANING_SPAN = 0.2, 0.3  # best cosine <= 0.2: meaning ignored; >= 0.5: fully trusted
CANDIDATES = 100
# What a question tells of its answer (search/cues.py): a "when" question ranks statements that
# say when up, a date in the question the memories of that date (their metadata `date`), a
# person it names that person's statements ("Caroline: ..."). Chosen by leave-one-conversation-
# out on the LoCoMo development split (`memloci bench locomo --folds`); each is a factor on the score.
WHEN_BOOST, DATE_BOOST, SPEAKER_BOOST = 0.5, 2.0, 0.2
_NAMES_SOMEONE = re.compile(r"(?<=\W)[A-Z][a-z]")  # a capitalized word after the first: a name
TIME_BOOST = 1.5

STOP_WORDS = frozenset("""
a an the and or but if so of to in on at for with from by as about into than then
is are was were be been being am do does did have has had will would can could should may might
i me my you your he him his she her it its we us our they them their this that these those there here
what when where who whom which why how not no yes
""".split())

CJK_PAIRS = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]{2,}")


@dataclass(frozen=True, slots=True)
class MemoryHit:
    memory: Memory
    score: float
    why: str
    words: float = 0.0  # the word signal (0..1) that found it
    meaning: float = 0.0  # the meaning signal (0..1, already weighed by how near anything is at all)
    library: str | None = None  # the library it was found in, in a search across libraries


# A hit found by meaning alone below this is a guess, not a match: "anything" is nearest to some
# memory, yet about none (a time range then answers with its newest memories instead).
WEAK_MEANING = 0.3


# A memory's speaker ("Caroline: ..."), by the start of its text that decides it (cues.SPEAKER_SPAN):
# read once, not at every question. Not by content_hash: texts apart in whitespace alone share a
# hash, and "Caroline:\n..." names no speaker where "Caroline: ..." does.
_SPEAKERS: dict[str, str | None] = {}
SPEAKERS_KEPT = 16_384


def _speaker(memory: Memory) -> str | None:
    start = memory.content[:cues.SPEAKER_SPAN]
    try:
        return _SPEAKERS[start]
    except KeyError:
        pass
    if len(_SPEAKERS) >= SPEAKERS_KEPT:
        _SPEAKERS.clear()  # (rare: a server searching that many texts; refilled as they come)
    who = _SPEAKERS[start] = cues.speaker(start)
    return who


def _most_lift(in_range: bool, asks_when: bool, dated: bool, names: bool) -> float:
    """The most a memory's factors (decay, time range, cues) can multiply its fused score by,
    with a margin for rounding."""
    lift = MOST_DECAY
    for applies, factor in ((in_range, TIME_BOOST), (asks_when, 1 + WHEN_BOOST), (dated, 1 + DATE_BOOST),
                            (names, 1 + SPEAKER_BOOST)):
        if applies:
            lift *= factor
    return lift * (1 + 1e-9)


def _scale(scores: dict[int, float], low: float, high: float) -> dict[int, float]:
    """Map scores onto [0, 1] given the range over the whole library (not just the candidates)."""
    if high - low < 1e-12:
        return dict.fromkeys(scores, 1.0)
    return {k: (v - low) / (high - low) for k, v in scores.items()}


def word_terms(query: str, stop_words_alone: bool = True) -> list[str]:
    """The query's words without stop words; a query of stop words only still searches them,
    unless `stop_words_alone` is False (what is left of "what did we do yesterday")."""
    terms = [t for t in lexical.query_terms(query) if t not in STOP_WORDS]
    return terms or (lexical.query_terms(query) if stop_words_alone else [])


def word_candidates(store, terms: list[str], grams: list[str], k: int, filters: MemoryFilter) -> dict[int, float]:
    """The best `k` memories by words (BM25, core/bm25.py: scored by the engine's index, or here
    from the statistics it hands over), plus those found by CJK pieces."""
    if isinstance(store, WordScores):
        return store.lexical_memory_candidates(terms, grams, k, filters)
    counted = store.memory_word_counts(terms, grams, k, filters)
    corpus = bm25.Corpus(counted.documents, counted.tokens)
    scores = {i: bm25.score(counts, counted.lengths[i], counted.holders, corpus, bm25.MEMORY_WEIGHTS)
              for i, counts in counted.counts.items()}
    # best first, ties by id (as FTS5 returns rows of equal score in rowid order)
    found = {i: scores[i] for i in sorted(scores, key=lambda i: (-scores[i], i))[:k]}
    for i, score in counted.grams.items():
        found[i] = found.get(i, 0.0) + score
    return found


def _hidden(memory: Memory, filters: MemoryFilter) -> bool:
    """Superseded or archived, and not asked for (a vector search over the whole library may
    name one; words never do)."""
    return bool((memory.superseded_by and not filters.include_superseded)
                or (memory.archived_at and not filters.include_archived))


def _weighed(score: float, factors: list[float]) -> float:
    for factor in factors:  # one at a time, in this order: the same float as ever
        score *= factor
    return score


def _expand(store, index, vector, fused: dict[int, float], weigh, weighed, asked: list[str],
            filters: MemoryFilter, low: float, high: float, confidence: float) -> set[int]:
    """The second word search (search/feedback.py): the best few hits' own words not in the
    question; what it finds joins `fused`, a memory it alone finds with its meaning too. Returns
    the ids it found."""
    # seeds are matches (a query about nothing stored has none: every score is 0)
    seeds = [i for i in sorted(fused, key=fused.__getitem__, reverse=True)[:feedback.FEEDBACK_SEEDS] if fused[i] > 0]
    if not seeds:
        return set()
    weigh(seeds)
    terms = feedback.expansion_terms([lexical.query_terms(weighed[i][0].content) for i in seeds if i in weighed],
                                     set(asked), STOP_WORDS)
    more = word_candidates(store, terms, [], feedback.EXPANSION_CANDIDATES, filters) if terms else {}
    if not more:
        return set()
    top = max(more.values())
    new = [i for i in more if i not in fused]
    similar = index.search(vector, 0, also=new)[0] if new and vector is not None and high - low > 1e-12 else {}
    for i, score in more.items():
        meaning = (1 - WORDS_WEIGHT) * confidence * (similar[i] - low) / (high - low) if i in similar else 0.0
        fused[i] = fused.get(i, meaning) + feedback.EXPANSION_WEIGHT * (score / top if top > 0 else 0.0)
    return set(more)


def retrieve(store, index, embedder, query: str, n: int, filters: MemoryFilter, now: datetime,
             time_range: TimeRange | None = None, min_similarity: float = 0.0,
             keywords: str | None = None, meaning_text: str | None = None) -> list[MemoryHit]:
    """The best `n` memories for `query` within `filters`, best first, decayed as of `now`
    (words from `keywords`, meaning from `meaning_text`, when given; cues always read the whole query)."""
    k = max(CANDIDATES, 4 * n)
    lexical_text = query if keywords is None else keywords
    meaning_text = query if meaning_text is None else meaning_text
    grams = CJK_PAIRS.findall(lexical_text)
    dense = index is not None and bool(meaning_text.strip()) and understands(embedder, meaning_text)  # not CJK to an English model
    # The model embeds the query on another thread while the engine ranks words (both release
    # the GIL). A store that searches its own vectors (VectorSearch: pgvector, the filter in its
    # query) is asked on that thread too, on a connection of its own, so words and meaning are
    # searched at once; the word matches' own similarities are looked up on this thread as soon
    # as both the words and the query's vector are there, while that search may still run.
    delegated = isinstance(store, VectorSearch)
    vector_ready: Future[Any] = Future()

    def embed_and_search() -> tuple[Any, tuple[dict[int, float], float, float] | None]:
        vector = None
        try:
            vector = QUERY_VECTORS.vector(embedder, meaning_text)
        except Exception as exc:  # the model or endpoint failed now: words still answer
            log.warning("query embedding failed, searching by words only: %s", exc)
            return None, None
        finally:
            vector_ready.set_result(vector)
        # (the store's own errors are the caller's, as from any other query)
        return vector, index.search(vector, k, filters=filters) if delegated else None

    embedding = _POOL.submit(embed_and_search) if dense else None
    words = word_candidates(store, word_terms(lexical_text, keywords is None), grams, k, filters)
    asks_when = bool(WHEN_BOOST) and cues.is_when_question(query)
    dates = cues.question_dates(query) if DATE_BOOST else None
    names = bool(SPEAKER_BOOST) and _NAMES_SOMEONE.search(query) is not None
    in_range = time_range is not None and (time_range.after or time_range.before)
    # What a memory's score is multiplied by (decay, time range, cues) depends on the memory and
    # the query alone, not on how well it matched: the word matches are read and weighed while
    # the model still embeds the query, and only the matches by meaning alone after it.
    weighed: dict[int, tuple[Memory, list[float], list[str]]] = {}
    named: dict[str, bool] = {}  # speaker -> whether the query names them (a conversation has few)

    # (A factor added here must be counted in _most_lift too: ranking skips the memories it
    # could not lift into the best n.)
    def weigh(ids: list[int]) -> None:
        wanted = [i for i in ids if i not in weighed]
        for memory_id, memory in (store.load_memories(wanted) if wanted else {}).items():
            factor = decay_factor(memory, now)
            factors, parts = [factor], []
            if in_range:
                assert time_range is not None
                created = parse_time(memory.created_at)
                if (time_range.after is None or created >= time_range.after) and (
                        time_range.before is None or created < time_range.before):
                    factors.append(TIME_BOOST)
                    parts.append(f"in '{time_range.phrase}'")
            if asks_when and cues.says_when(memory.content):
                factors.append(1 + WHEN_BOOST)
                parts.append("says when")
            if dates is not None and cues.dated_within(cues.parse_date(str(memory.metadata.get("date", ""))), dates):
                factors.append(1 + DATE_BOOST)
                parts.append(f"dated {memory.metadata['date']}")
            if names and (who := _speaker(memory)) is not None and (
                    named[who] if who in named else named.setdefault(who, cues.named_in(who, query))):
                factors.append(1 + SPEAKER_BOOST)
                parts.append(f"by {who}")
            if abs(factor - 1) > 0.005:
                parts.append(f"decay x{factor:.2f}")
            weighed[memory_id] = (memory, factors, parts)

    if embedding is not None and words and not embedding.done():
        weigh(list(words))
    meaning: dict[int, float] = {}
    low = high = 0.0
    if embedding is not None:
        of_words = None  # the word matches' own similarities, so fusion weighs them too
        if delegated and words and (early := vector_ready.result()) is not None:
            of_words = index.search(early, 0, also=list(words), filters=filters)
        vector, searched = embedding.result()
        if searched is not None:
            meaning, low, high = searched
            if of_words is not None:
                for i, similarity in of_words[0].items():
                    meaning.setdefault(i, similarity)
                high = max(high, of_words[2])
        elif vector is not None:
            allowed = None if filters.empty else store.memory_ids(filters)
            if allowed is None or allowed:
                meaning, low, high = index.search(vector, k, allowed, also=list(words))
    # BM25 is 0 for a memory without the words, so its scale starts at 0
    w = _scale(words, 0.0, max(words.values(), default=0.0))
    # Meaning is scaled over the library, then trusted as far as the best match is close at all:
    # for a query about nothing stored, the nearest vector is still "nearest", but not near.
    confidence = min(1.0, max(0.0, (high - MEANING_NOISE) / MEANING_SPAN))
    m = {i: v * confidence for i, v in _scale(meaning, low, high).items()}
    if meaning:
        fused = {i: WORDS_WEIGHT * w.get(i, 0.0) + (1 - WORDS_WEIGHT) * m.get(i, 0.0) for i in {*w, *m}}
    else:
        fused = dict(w)
    across: set[int] = set()  # other-language memories ranked by meaning alone (search/languages.py)
    if meaning and embedder is not None and embedder.multilingual:
        def texts(ids: list[int]) -> dict[int, str]:  # (a hidden memory is not the query's language's nearest)
            weigh(ids)
            return {i: weighed[i][0].content for i in ids if i in weighed and not _hidden(weighed[i][0], filters)}
        fused, across = languages.meaning_across(fused, m, lexical_text, texts, max(3 * n, 50), WEAK_MEANING)
    expanded: set[int] = set()
    # the seeds' own words, searched for too; without meaning nothing would tell whether a memory
    # that shares only the seeds' words is about the question, so a search by words alone keeps to them
    if feedback.EXPANSION_WEIGHT and fused and meaning:
        vector_now = embedding.result()[0] if embedding is not None and not delegated else None
        expanded = _expand(store, index, vector_now, fused, weigh, weighed, word_terms(lexical_text), filters, low, high,
                           confidence)
    ranked = sorted(fused, key=fused.__getitem__, reverse=True)
    if not (asks_when or dates is not None or names):  # cues re-rank every candidate; else the best few suffice
        ranked = ranked[: max(3 * n, 50)]
    candidates = set(ranked)
    reach = context.SESSION_REACH if context.SESSION_WEIGHT else 0

    def beside(memory_id: int) -> list[int]:
        """The candidates close enough to lend `memory_id` session context (search/context.py)."""
        return [j for j in range(memory_id - reach, memory_id + reach + 1) if j != memory_id and j in candidates]

    chosen: set[int] = set()  # read with every candidate beside them: their scores are exact

    def choose(ids: list[int]) -> None:
        ids = [i for i in ids if i not in chosen]
        chosen.update(ids)
        weigh(ids + [j for i in ids for j in beside(i)])

    support: dict[int, float] = {}
    closeness: dict[int, float] = {}

    def scored() -> dict[int, float]:
        """Every candidate read so far, scored: the fused score, plus session context and the
        second pass, times the memory's factors. Exact for the chosen; no more than the true
        score for the others (a neighbour not read lends nothing)."""
        live = [i for i in ranked if i in weighed and not _hidden(weighed[i][0], filters)]
        base = {i: fused[i] for i in live}
        support.clear()
        if context.SESSION_WEIGHT:
            support.update(context.session_support({i: context.thread_of(weighed[i][0]) for i in live}, base))
        for i, best in support.items():  # good matches close by in the same conversation
            base[i] += context.SESSION_WEIGHT * best
        closeness.clear()
        if feedback.FEEDBACK_WEIGHT and meaning:
            closeness.update(feedback.seeded(index, base))
        for i, near in closeness.items():  # the second pass: nearness to the first pass's best hits
            base[i] += feedback.FEEDBACK_WEIGHT * near
        return {i: _weighed(base[i], weighed[i][1]) for i in live}

    if feedback.FEEDBACK_WEIGHT and meaning:
        choose(ranked)  # the second pass seeds from the best of every candidate
    else:
        # The n best by fused score (and the word matches read while the model embedded the
        # query) are scored first. Only n are kept, so a candidate whose fused score, plus the
        # most context its neighbours could lend, lifted by the most its factors could give,
        # stays below the n-th of those scores cannot be among them, and is not read at all.
        choose(ranked[:n])
        kept = sorted((v for v in scored().values() if v > 0 and v >= min_similarity), reverse=True)
        floor = kept[n - 1] if len(kept) >= n else -math.inf
        lift = _most_lift(bool(in_range), asks_when, dates is not None, names)

        def most(i: int) -> float:
            lent = max((fused[j] for j in beside(i)), default=0.0)
            return (fused[i] + context.SESSION_WEIGHT * lent) * lift

        choose([i for i in ranked if i not in chosen and most(i) >= floor])
    scores = scored()
    order = [i for i in ranked if i in scores]  # best first, ties in fused order: as ever
    order.sort(key=scores.__getitem__, reverse=True)
    hits: list[MemoryHit] = []
    for memory_id in order:
        if len(hits) == n:
            break
        if not (scores[memory_id] > 0 and scores[memory_id] >= min_similarity):
            continue
        parts = []
        if memory_id in words:
            parts.append(f"words {w[memory_id]:.2f}")
        if memory_id in meaning:
            parts.append(f"meaning {m[memory_id]:.2f}" + (" (another language)" if memory_id in across else ""))
        if memory_id in expanded and memory_id not in words:
            parts.append("words of the best hits")
        if support.get(memory_id, 0.0) > 0:
            parts.append(f"beside matches {support[memory_id]:.2f}")
        if closeness.get(memory_id, 0.0) >= 0.5:
            parts.append(f"near the best hits {closeness[memory_id]:.2f}")
        memory, _, boosts = weighed[memory_id]
        hits.append(MemoryHit(memory, scores[memory_id], ", ".join(parts + boosts) or "match", w.get(memory_id, 0.0),
                              m.get(memory_id, 0.0)))
    if time_range is not None and time_range.latest:  # the best n, newest first
        hits.sort(key=lambda h: (h.memory.created_at, h.memory.id), reverse=True)
    return hits

