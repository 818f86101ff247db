"""Entity search (search_nodes): words, respelled names, meaning, and other signals, fused.

1. Words: the store ranks entities by BM25 over all of the query's words, stop words dropped
   (store/sqlite/search.py). A word found nowhere is respelled from the words of names, types
   and aliases ("alcie" and "Aliec" mean "alice", so "Alice Chen" is found), within one edit for
   words of up to five letters and two for longer ones.
   A word that begins words of names ("Ali", "Che") stands for them too.
2. When the words leave room on the page (or always, with `fuse`): entities whose observations
   mean what the query says (vectors, above MEANING_FLOOR; not for a query the model does not
   understand, search/embedder.py `understands`), plus whatever signals the caller
   brings (`signals`, e.g. the meaning of note bodies).
Fusion: a word match scores its BM25 over the best one's (0..1]; another signal adds its score.
The best FUSION_POOL word matches keep their word score in the fusion, not only the page's: a
note the words rank 12th and its meaning ranks first keeps both.

The words of names, types and aliases are kept in memory per library; a search reads only the
names created or changed since the last one (a log that triggers write, migration 7).
"""

from __future__ import annotations

import bisect
import logging
import re
import threading
import weakref
from collections.abc import Callable, Sequence

from memloci.core.schema import SEARCH_LIMIT_MAX
from memloci.search.embedder import QUERY_VECTORS, understands
from memloci.search.hybrid import STOP_WORDS
from memloci.store.protocols import ChangeNotices

log = logging.getLogger(__name__)

Signal = tuple[str, float, str]  # (entity name, score 0..1, why)

OBSERVATION_WEIGHT = 0.6
MEANING_FLOOR = 0.35  # cosine below which an observation is not "about" the query
RESPELL_MIN = 4  # shorter words are not respelled: one edit makes another word of most of them
RESPELLINGS = 3  # name words a misspelled word may stand for
COMPLETIONS = 8  # name words a prefix may stand for
COUNT_CAP = SEARCH_LIMIT_MAX  # a page's total counts the matches up to this
# Word matches whose word score the fusion keeps. With the page's 11 only, a note just below the
# page by words, but first by meaning, got its meaning's score alone; on `memloci bench notes`
# pools of 50, 100 and 200 scored within 0.004 nDCG@10 of each other, all above 11.
FUSION_POOL = 100
_WORD = re.compile(r"\w+", re.UNICODE)


class NameWords:
    """The distinct lowercase words of a library's names, types and aliases (words with digits
    left out: "4711" has no typos worth guessing), kept up to date from the name log."""

    def __init__(self) -> None:
        self.seq = -1
        self.mark: int | None = None  # the store's change mark at the last read of the name log
        self.words: set[str] = set()
        self.sorted: list[str] = []  # for prefixes
        self.by_length: dict[int, list[str]] = {}  # for typos: only words of about the same length
        self.lock = threading.Lock()

    def refresh(self, store) -> None:
        """Take in what the name log holds since the last refresh (everything the first time).
        Searches may read meanwhile: words are only added (a full reload swaps in new lists).
        A store that hears of every write (ChangeNotices: a PostgreSQL library, whose other
        servers' writes arrive by LISTEN/NOTIFY) is not asked while its change mark stands
        still; the mark is read before the log, so a change that lands in between moves it
        and is read the next time."""
        with self.lock:
            mark = store.change_mark() if isinstance(store, ChangeNotices) else None
            if mark is not None and mark == self.mark:
                return
            changes = store.name_changes(self.seq)
            self.mark = mark
            seq, full = changes.position, changes.complete
            if not full and not changes.names and seq == self.seq:
                return
            new = {word for e in changes.names
                   for word in _WORD.findall(f"{e.name} {e.entity_type} {e.aliases if e.aliases != '[]' else ''}".lower())
                   if not any(c.isdigit() for c in word)}
            if full:
                by_length: dict[int, list[str]] = {}
                for word in new:
                    by_length.setdefault(len(word), []).append(word)
                self.words, self.sorted, self.by_length = new, sorted(new), by_length
            else:
                for word in new - self.words:
                    self.words.add(word)
                    bisect.insort(self.sorted, word)
                    self.by_length.setdefault(len(word), []).append(word)
            self.seq = seq

    def complete(self, prefix: str, limit: int = COMPLETIONS) -> list[str]:
        """Name words that `prefix` begins, when it is not a name word itself ("ali" -> ["alice"])."""
        if prefix in self.words or prefix.isdigit():
            return []
        words = self.sorted
        i = bisect.bisect_right(words, prefix)
        out: list[str] = []
        while i < len(words) and words[i].startswith(prefix) and len(out) < limit:
            out.append(words[i])
            i += 1
        return out

    def respell(self, word: str) -> tuple[list[str], str] | None:
        """Name words within one edit (two for words of six letters or more) of `word`, closest
        first: ("alcie") -> (["alice"], "alcie→alice")."""
        from rapidfuzz import process
        from rapidfuzz.distance import OSA  # a swap of two letters is one edit

        if len(word) < RESPELL_MIN or any(c.isdigit() for c in word):
            return None
        edits = 1 if len(word) <= 5 else 2
        by_length = self.by_length
        found: list[tuple[int, str]] = []
        for length in range(len(word) - edits, len(word) + edits + 1):
            bucket = by_length.get(length)
            if bucket:
                found += [(d, w) for w, d, _ in process.extract(word, bucket, scorer=OSA.distance,
                                                                score_cutoff=edits, limit=RESPELLINGS)]
        if not found:
            return None
        found.sort()
        best = found[0][0]
        words = [w for d, w in found if d == best][:RESPELLINGS]
        return words, f"{word}→{'|'.join(words)}"


_cache: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_cache_lock = threading.Lock()


def name_words(store) -> NameWords:
    """The library's name words, brought up to date (a read of the name log when nothing changed)."""
    with _cache_lock:
        words = _cache.get(store)
        if words is None:
            words = _cache[store] = NameWords()
    words.refresh(store)
    return words


def find_entities(store, query: str, limit: int, *,
                  signals: Callable[[], Sequence[Signal]] | None = None, fuse: bool = False):
    """The best `limit` entities for `query` (a SearchResult): words first, then, if the words
    leave room, `signals()` (called only then, since it may embed the query) fused in.
    `fuse`: the signals rank with the words even when the words fill the page (notes whose
    bodies carry meaning: a question asked in a sentence is answered better by both).
    This is the one entry point: a new signal joins through `signals`."""
    names = name_words(store)
    # Fused: the signals first, so the words are searched once (a search by words alone would
    # only be thrown away when a signal comes back).
    extra = list(signals()) if signals is not None and fuse else []
    if not extra:
        result = store.search_entities(query, limit=limit, stop_words=STOP_WORDS, names=names,
                                       count_cap=COUNT_CAP)
        if signals is None or fuse or len(result.hits) >= limit:
            return result
        extra = list(signals())
        if not extra:
            return result
    return store.search_entities(query, limit=limit, extra=extra, stop_words=STOP_WORDS, names=names,
                                   count_cap=COUNT_CAP, pool=FUSION_POOL)


def count_entities(store, query: str, cap: int) -> int:
    """How many entities find_entities matches by words and substrings, up to `cap` (a page's total)."""
    return store.count_entities(query, cap=cap, stop_words=STOP_WORDS, names=name_words(store))


def meaning_signals(store, query: str, index, embedder) -> list[Signal]:
    """Entities whose observations mean what `query` says (cosine >= MEANING_FLOOR); none for a
    query the model does not understand (a Chinese or Japanese one, to an English-only model)."""
    if index is None or embedder is None or not understands(embedder, query):
        return []
    try:
        vector = QUERY_VECTORS.vector(embedder, query)
    except Exception as exc:
        log.warning("query embedding failed, entity search without meaning: %s", exc)
        return []
    similar, _, _ = index.search(vector, 200)
    memories = store.load_memories(sorted(similar, key=similar.get, reverse=True))
    best: dict[str, Signal] = {}
    for memory_id, memory in memories.items():
        sim = similar[memory_id]
        if memory.entity and sim >= MEANING_FLOOR and (memory.entity not in best or best[memory.entity][1] < sim):
            best[memory.entity] = (memory.entity, OBSERVATION_WEIGHT * min(1.0, sim), f"observation means it ({sim:.2f})")
    return list(best.values())
