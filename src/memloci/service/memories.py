"""Free memories, the MCP Memory Service's API: store, retrieve (words, meaning and time),
list, tag search, update and delete. A part MemoryService holds; writes go through
Stores.writing (the post-write hook), retrievals are counted by the vectors part's recorder.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from memloci.app.projects import ProjectRef
from memloci.core import schema
from memloci.core.errors import ConflictError, NotFoundError, ValidationError
from memloci.core.model import Memory, MemoryFilter, MemoryInput, MemoryLink
from memloci.rules import graph as rules
from memloci.rules.retention import Retention, retention
from memloci.search.embedder import understands
from memloci.search.hybrid import CJK_PAIRS, WEAK_MEANING, MemoryHit, retrieve, word_candidates, word_terms
from memloci.search.similar import NEAR_DUPLICATE_MIN, may_be_near
from memloci.search.timephrases import TimeRange, parse_time_phrase, split_time_phrase
from memloci.search.vectors import VectorSearch
from memloci.service.names import entity_name
from memloci.service.stores import Stores
from memloci.service.vectors import LibraryVectors
from memloci.store.protocols import Store

RECENT_WAIT_S = 10.0  # how long a search waits for memories stored a moment ago to be embedded ...
RECENT_BACKLOG = 2_000  # ... if no more than this many wait (a bulk backlog is searched as it stands)
RETENTION_PAGE = 5_000  # memories read at a time when every free memory's retention is counted


log = logging.getLogger(__name__)
NEAR_WORD_MATCHES = 10  # a new text's best word matches that may_be_near tries before it is embedded


@dataclass(frozen=True, slots=True)
class Retrieval:
    hits: list[MemoryHit]
    query: str
    time_range: TimeRange | None
    # a time range was asked for and nothing in it matched the words or meaning of the query:
    # the hits are the range's newest memories
    unmatched: bool = False
    note: str | None = None  # what the reply says about the hits: none matched, the range is empty, ...


class MemoryOperations:
    """Free memories: stored, retrieved, listed, updated and deleted."""

    def __init__(self, stores: Stores, vectors: LibraryVectors, clock: Callable[[], datetime]):
        self.stores = stores
        self.vectors = vectors
        self.clock = clock  # what "now" is for time phrases and decay (MemoryService.clock)

    def store_memory(self, content: str, *, tags: Sequence[str] = (), memory_type: str = "note",
                     metadata: dict[str, Any] | None = None, importance: str | None = None,
                     entity: str | None = None, links: Sequence[MemoryLink] = (),
                     library: str | ProjectRef | None = None) -> tuple[Memory, bool]:
        """Store a memory; (the existing one, False) when the same text is already stored."""
        m = replace(schema.validate_memory(MemoryInput(content, tuple(tags), memory_type, metadata or {},
                                                       importance or "medium", entity)), links=tuple(links))
        with self.stores.writing(library) as store:
            if m.entity:
                m = replace(m, entity=entity_name(store, m.entity, "entity"))  # an alias reaches its entity
                store.schema.check_observation(m.content, "content")
            stored = store.store_memory(m, origin="store_memory")
        memory, created = stored.memory, stored.created
        if not created and m.entity and store.schema.unique_observations:
            raise rules.repeated_observation(store.schema, memory.content, memory.entity or m.entity, "content")
        return memory, created

    def similar_to(self, memory: Memory, *, library: str | ProjectRef | None = None,
                   limit: int = 3) -> list[tuple[Memory, float]]:
        """Live free memories saying the same fact as `memory` in other words, best first: what
        store_memory reports. Those of its NEAR_WORD_MATCHES best word matches (BM25) that may be
        near duplicates by their words (search/similar.py may_be_near: the same facts, enough words
        shared) and whose vectors' cosine with the memory's is at least NEAR_DUPLICATE_MIN.
        Nothing while the embedder is still loading, or for text its model does not read.

        Most new texts have no such match: then nothing is embedded here, and the memory's vector
        is left to the embedding worker, which embeds in batches. Otherwise the text and its
        matches are embedded in one model call (LibraryVectors.batcher: concurrent checks share
        it), a match stored a moment ago and not embedded yet included, and the vectors go to the
        worker too, which does not compute them again."""
        embedder = self.vectors.embedder.get(timeout=0)
        if embedder is None or memory.entity is not None or not understands(embedder, memory.content):
            return []
        store = self.stores.store(library)
        if self.vectors.of(store) is None:
            return []
        near = [m for m in self._maybe_near(store, memory) if understands(embedder, m.content)]
        if not near:
            return []
        try:
            vector, *theirs = self.vectors.batcher.vectors(embedder, [memory.content, *(m.content for m in near)])
        except Exception as exc:  # the memory is stored: a model failing now leaves nothing said, not the store failed
            log.warning("near-duplicate check skipped, the model failed: %s", exc)
            return []
        close = sorted(((m, round(float(v @ vector), 3)) for m, v in zip(near, theirs, strict=True)),
                       key=lambda found: -found[1])
        return [(m, score) for m, score in close if score >= NEAR_DUPLICATE_MIN][:limit]

    @staticmethod
    def _maybe_near(store: Store, memory: Memory) -> list[Memory]:
        """The memory's best word matches (BM25) that may be near duplicates of it. Its words are
        those of its start, as long as a query may be (schema.QUERY_MAX): a text of 20,000 Chinese
        characters would search every pair of them (a second at each store), and the model reads
        the start of a long text alone too."""
        start = memory.content[:schema.QUERY_MAX]
        matches = word_candidates(store, word_terms(start), CJK_PAIRS.findall(start), NEAR_WORD_MATCHES + 1, MemoryFilter())
        others = [i for i in matches if i != memory.id]
        return [m for m in store.load_memories(others).values() if m.entity is None
                and not (m.superseded_by or m.archived_at) and may_be_near(m.content, memory.content)] if others else []

    def retrieve_memory(self, query: str, *, n_results: int = 5, min_similarity: float = 0.0,
                        tags: Sequence[str] = (), match_all: bool = False, memory_type: str | None = None,
                        entity: str | None = None, after: str | None = None, before: str | None = None,
                        time: str | None = None, include_superseded: bool = False, include_archived: bool = False,
                        library: str | ProjectRef | None = None, count_use: bool = True) -> Retrieval:
        """The best memories for `query`; `count_use=False`: the caller counts the retrieval of
        the hits it keeps (a search across libraries keeps only the best of each).

        Filters (`time`, `after`, `before`, `tags`, `memory_type`, `entity`) are hard: the query
        ranks within them, and words that match nothing never empty them. With no word match
        and no more than a faint meaning inside, the filtered memories come newest first, and
        the reply's note says so; an empty filter says that too.

        A time phrase inside the query ("last week", 先週) is soft: it ranks its range first and
        its words are neither searched for nor embedded (昨日の決定 is searched as 決定), as long
        as it separates the library (some memories inside, some outside). A phrase whose range
        holds every memory (a conversation imported at once) may be about what the memories say,
        so its words are kept; one whose range holds none is only words. When nothing inside the
        range matches, memories outside it that match the query's words come before the range's
        newest ("bugs two weeks ago" shows the bugs of other days rather than hiding them);
        meaning alone does not push the range aside. A query that is only a phrase (and stop
        words: "what did we work on last week") lists the range newest first.

        With `time` given too, `time` is the range (and the one reported); a relative phrase in
        the query then only loses its words, it ranks nothing within the range."""
        text = schema.validate_query(query)
        now = self.clock()
        n_results = schema.check_int(n_results, "n_results", 1, schema.SEARCH_LIMIT_MAX)
        after, before = schema.validate_time(after, "after"), schema.validate_time(before, "before")
        hard = parse_time_phrase(time, now) if time is not None else None
        if hard is not None:
            hard_after, hard_before = hard.iso()
            after, before = max(filter(None, [after, hard_after]), default=None), min(filter(None, [before, hard_before]), default=None)
        filters = schema.validate_filter(MemoryFilter(tuple(tags), match_all, memory_type, entity, after, before,
                                                      include_superseded, include_archived))
        if filters.after and filters.before and filters.after >= filters.before:
            raise ValidationError(f"after/before: after ({filters.after}) must be earlier than before ({filters.before})")
        store = self.stores.store(library)
        filters = _entity_named(store, filters)
        rest, soft = split_time_phrase(text, now)
        keywords = None  # the text words and meaning come from, when not the whole query
        everything = False  # the query's time range holds every memory the filters allow
        inside: MemoryFilter | None = None  # the query's time range within the filters
        if soft is not None and soft.latest:
            keywords = rest
        elif soft is not None and hard is not None:  # `time` is the range; the phrase is only not searched for
            keywords = None if soft.absolute else rest
            soft = None
        elif soft is not None:
            inside = _narrowed(filters, soft)
            counted = store.list_memories(offset=0, limit=0, filters=inside).total if inside is not None else 0
            everything = counted > 0 and counted == store.list_memories(offset=0, limit=0, filters=filters).total
            if counted == 0:
                soft, inside = None, None  # "what did Melanie do last week" in memories stored all at once
            elif not (everything or soft.absolute):  # "in May" may be what a memory says; "last week" is not
                keywords = rest
        latest = (hard is not None and hard.latest) or (soft is not None and soft.latest)
        filtered = hard is not None or not filters.empty
        shown = hard or soft  # the range the reply reports
        matched = 0
        outside = 0  # hits from outside the query's range put before its newest
        if not text.strip() or (keywords is not None and not _has_words(keywords)):
            if not (latest or filtered or inside is not None):
                raise ValidationError("query: must not be empty", hint="Say what to look for, or use list_memories.")
            listed = store.list_memories(offset=0, limit=n_results, filters=inside or filters, count=False).memories
            hits = [MemoryHit(m, 1.0, "newest" if latest else "in range") for m in listed]
            matched = len(hits)
        else:
            pair = self.vectors.of(store)
            embedder = self.vectors.embedder.get(timeout=0) if pair else None
            # memories stored a moment ago (here or by another process) are found by meaning too;
            # with none waiting the worker is not woken, which would read the store for nothing
            if pair and self.vectors.embed_pending and 0 < store.pending_count() <= RECENT_BACKLOG:
                pair[1].flush(timeout=RECENT_WAIT_S, memories_only=True)

            def ranked(where: MemoryFilter, time_range: TimeRange | None, n: int) -> list[MemoryHit]:
                return retrieve(store, pair[0] if pair else None, embedder, text, n, _untimed(store, where), now,
                                time_range, min_similarity, keywords=keywords, meaning_text=keywords)

            fill = min_similarity <= 0  # a memory that matched nothing has no similarity to keep
            if inside is not None:  # the query's range first, then what matches outside it
                hits = _matches(ranked(inside, soft, n_results))
                matched = len(hits)
                others: list[MemoryHit] | None = None  # the best outside the range, searched only when needed
                if not matched and not everything:  # nothing in the range matches: word matches elsewhere beat its newest
                    others = ranked(filters, None, 2 * n_results)
                    hits = [h for h in others if h.words > 0][:n_results]
                    outside = len(hits)
                if fill:
                    hits += _newest(store, inside, n_results - len(hits), hits)
                if len(hits) < n_results and not everything:
                    seen = {h.memory.id for h in hits}
                    others = others if others is not None else ranked(filters, None, 2 * n_results)
                    hits += [h for h in others if h.memory.id not in seen][: n_results - len(hits)]
            else:  # (a phrase left here is "latest": the best hits, newest first)
                hits = ranked(filters, soft or hard, n_results)
                if filtered:
                    hits = _matches(hits)
                matched = len(hits)
                if filtered and fill:
                    hits += _newest(store, filters, n_results - len(hits), hits)
        unmatched = (filtered or inside is not None) and matched == 0 and len(hits) > outside
        note = None
        if not hits and (filtered or inside is not None):
            note = f"No memories {_scope(shown, filters)}."
        elif unmatched and outside:
            note = (f"Nothing among the memories {_scope(soft, filters)} matched the query by words or meaning; "
                    f"the first {outside} hit(s) match its words outside that range, the rest are the range's "
                    "newest memories.")
        elif unmatched:
            note = (f"Nothing among the memories {_scope(shown, filters)} matched the query by words or meaning; "
                    "these are their newest memories.")
        if count_use:
            self.vectors.accesses.record(store, [h.memory.id for h in hits])
        return Retrieval(hits, query, shown, unmatched, note)

    def search_by_tag(self, tags: Sequence[str], *, match_all: bool = False, limit: int = 100,
                      library: str | ProjectRef | None = None) -> list[Memory]:
        return self.search_by_tag_page(tags, match_all=match_all, limit=limit, library=library)[0]

    def search_by_tag_page(self, tags: Sequence[str], *, match_all: bool = False, limit: int = 100,
                           offset: int = 0, include_superseded: bool = False,
                           library: str | ProjectRef | None = None) -> tuple[list[Memory], int]:
        """One page of the memories carrying the tags, newest first, and how many there are in all."""
        clean = schema.validate_tags(tags, "tags", allow_empty=False)
        limit = schema.check_int(limit, "limit", 1, schema.PAGE_MAX)
        offset = schema.check_int(offset, "offset", 0, schema.OFFSET_MAX)
        page = self.stores.store(library).list_memories(
            offset=offset, limit=limit, filters=MemoryFilter(tuple(clean), match_all, include_superseded=include_superseded))
        return list(page.memories), page.total

    def one_memory(self, content_hash: str, *, library: str | ProjectRef | None = None) -> Memory:
        """The memory with this hash (NOT_FOUND if none)."""
        return self._one_memory(self.stores.store(library), content_hash)

    def _one_memory(self, store: Store, content_hash: str) -> Memory:
        content_hash = schema.clean_label(content_hash, "content_hash", 64)
        found = store.memories_by_hash(content_hash)
        if not found:
            raise NotFoundError(f"content_hash: no memory has hash {content_hash}",
                                hint="Find the memory with retrieve_memory or list_memories; they return content_hash.")
        if len(found) > 1:  # hashes are unique per memory; two means a library from before that rule
            raise ConflictError(f"content_hash: {len(found)} memories share hash {content_hash}",
                                hint="Delete or edit them with delete_observations / add_observations.")
        return found[0]

    def delete_memory(self, content_hash: str, *, library: str | ProjectRef | None = None) -> list[Memory]:
        """Delete the memory with this hash (the free one if an observation has the same text);
        an unknown hash deletes nothing (idempotent)."""
        with self.stores.writing(library, new_text=False) as store:
            try:
                memory = self._one_memory(store, content_hash)
            except NotFoundError:
                return []
            return store.delete_memories([memory.id], origin="delete_memory")

    def update_memory(self, content_hash: str, *, content: str | None = None, tags: Sequence[str] | None = None,
                      metadata: dict[str, Any] | None = None, importance: str | None = None,
                      library: str | ProjectRef | None = None) -> Memory:
        if content is None and tags is None and metadata is None and importance is None:
            raise ValidationError("update_memory: give at least one of content, tags, metadata, importance")
        with self.stores.writing(library) as store:
            return self._update_memory(store, content_hash, content, tags, metadata, importance)

    def _update_memory(self, store: Store, content_hash: str, content: str | None, tags: Sequence[str] | None,
                       metadata: dict[str, Any] | None, importance: str | None) -> Memory:
        memory = self._one_memory(store, content_hash)
        if content is not None:
            content = schema.clean_text(content, "content", schema.MEMORY_MAX)
            if memory.entity:  # an observation keeps the observation rules
                store.schema.check_observation(content, "content")
        if tags is not None:
            tags = schema.validate_tags(tags, "tags")
        if metadata is not None:
            metadata = schema.validate_metadata(metadata, "metadata")
        if importance is not None:
            importance = schema.validate_importance(importance)
        return store.update_memory(memory.id, content=content, tags=tags, metadata=metadata,
                                   importance=importance, origin="update_memory")

    def list_memories(self, *, page: int = 1, page_size: int = 10, filters: MemoryFilter | None = None,
                      library: str | ProjectRef | None = None, time: str | None = None) -> tuple[list[Memory], int]:
        """One page of memories, newest first; `time` ("last week", 昨日) narrows `filters` as
        retrieve_memory's does."""
        page = schema.check_int(page, "page", 1, schema.OFFSET_MAX)
        page_size = schema.check_int(page_size, "page_size", 1, schema.PAGE_MAX)
        filters = schema.validate_filter(filters or MemoryFilter())
        if time is not None:
            narrowed = _narrowed(filters, parse_time_phrase(time, self.clock()))
            if narrowed is None:  # the range and after/before do not overlap: nothing to list
                return [], 0
            filters = narrowed
        store = self.stores.store(library)
        found = store.list_memories(offset=(page - 1) * page_size, limit=page_size, filters=_entity_named(store, filters))
        return list(found.memories), found.total

    # -- retention (rules/retention.py), as of the clock -------------------------------------

    def retentions(self, store: Store) -> Iterator[tuple[Memory, Retention]]:
        """Every free memory that search finds (not archived, not superseded), with its retention
        now; read a page at a time, newest first."""
        now = self.clock()
        offset = 0
        while True:
            page = store.list_memories(offset=offset, limit=RETENTION_PAGE, filters=MemoryFilter(), count=False).memories
            for memory in page:
                if memory.entity is None and not memory.archived_at and not memory.superseded_by:
                    yield memory, retention(memory, now)
            if len(page) < RETENTION_PAGE:
                return
            offset += len(page)

    def zone_counts(self, store: Store) -> dict[str, int]:
        """How many free memories are in each zone, and how many of them are immune."""
        counts = {"active": 0, "stale": 0, "archive_candidate": 0, "immune": 0}
        for _, kept in self.retentions(store):
            counts[kept.zone.replace("-", "_")] += 1
            counts["immune"] += kept.immune
        return counts

    def archive_candidates(self, library: str | ProjectRef | None = None) -> list[Memory]:
        """The free memories past their retention and not immune, newest first; writes nothing
        (moving them into the archive is the caller's, previewed)."""
        return [m for m, kept in self.retentions(self.stores.store(library)) if kept.zone == "archive-candidate"]

    def memories_by_hash(self, content_hashes: Sequence[str], *,
                         library: str | ProjectRef | None = None) -> tuple[list[Memory], list[str]]:
        """The memories with these hashes, in the order asked (each once), and the hashes no
        memory has: the details of a compact reply."""
        if len(content_hashes) > schema.PAGE_MAX:
            raise ValidationError(f"content_hashes: at most {schema.PAGE_MAX} hashes, got {len(content_hashes)}")
        clean = list(dict.fromkeys(schema.clean_label(h, f"content_hashes[{i}]", 64)
                                   for i, h in enumerate(content_hashes)))
        store = self.stores.store(library)
        found: list[Memory] = []
        missing: list[str] = []
        for content_hash in clean:
            memories = store.memories_by_hash(content_hash)
            if memories:
                found.extend(memories)
            else:
                missing.append(content_hash)
        return found, missing


def _entity_named(store: Store, filters: MemoryFilter) -> MemoryFilter:
    """The filters with their `entity` as its stored name: an alias filters by its entity (names.py)."""
    return replace(filters, entity=entity_name(store, filters.entity, "entity")) if filters.entity else filters


def _narrowed(filters: MemoryFilter, phrase: TimeRange) -> MemoryFilter | None:
    """The filters narrowed to a time phrase's range; None if the two do not overlap."""
    after, before = phrase.iso()
    after = max(filter(None, [filters.after, after]), default=None)
    before = min(filter(None, [filters.before, before]), default=None)
    if after and before and after >= before:
        return None
    return replace(filters, after=after, before=before)


def _untimed(store: Store, filters: MemoryFilter) -> MemoryFilter:
    """The filters without their time bounds when those exclude nothing ("this year" in a library
    started this month): the same memories, searched without first listing every id in range.
    A store that searches its own vectors (VectorSearch) puts the range into its queries, where
    an index answers it: counting both (a million rows each) would cost more than it saves."""
    if not (filters.after or filters.before) or isinstance(store, VectorSearch):
        return filters
    untimed = replace(filters, after=None, before=None)
    counts = [store.list_memories(offset=0, limit=0, filters=f).total for f in (filters, untimed)]
    return untimed if counts[0] == counts[1] else filters


def _has_words(text: str) -> bool:
    """Whether a query left without its time phrase still says what to look for: a word that
    is not a stop word, or a run of Chinese/Japanese ("what did we work on" says nothing)."""
    return bool(word_terms(text, False)) or bool(CJK_PAIRS.search(text))


def _scope(time_range: TimeRange | None, filters: MemoryFilter) -> str:
    """The filtered memories, named for a note: "in 'last week' (2026-11-09T00:00:00Z to ...), tagged bug"."""
    parts = []
    if time_range is not None and not time_range.latest:
        after, before = time_range.iso()
        parts.append(f"in '{time_range.phrase}' ({after or 'the start'} to {before or 'now'})")
    elif filters.after or filters.before:
        parts.append(f"in the time range {filters.after or 'the start'} to {filters.before or 'now'}")
    if filters.tags:
        parts.append("tagged " + (" and " if filters.match_all else " or ").join(filters.tags))
    if filters.memory_type:
        parts.append(f"of type {filters.memory_type}")
    if filters.entity:
        parts.append(f"about {filters.entity}")
    return ", ".join(parts) or "in the library"


def _matches(hits: list[MemoryHit]) -> list[MemoryHit]:
    """The hits, unless none of them is more than a guess (no word, only a faint meaning): then
    none, and a time range answers with its newest memories rather than with noise."""
    if any(h.words > 0 or h.meaning >= WEAK_MEANING for h in hits):
        return hits
    return []


def _newest(store: Store, filters: MemoryFilter, n: int, hits: list[MemoryHit]) -> list[MemoryHit]:
    """Up to `n` of the newest memories within `filters` that are not among `hits`: a time range
    is answered with its memories even when the query's words and meaning find none of them."""
    if n <= 0:
        return []
    seen = {h.memory.id for h in hits}
    listed = store.list_memories(offset=0, limit=n + len(seen), filters=filters, count=False).memories
    return [MemoryHit(m, 0.0, "in range, newest (no word or meaning match)") for m in listed if m.id not in seen][:n]
