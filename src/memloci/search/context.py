"""Session context: a memory near other good matches of its conversation is likelier to belong.

A conversation talks about one thing for a while. When a question's words or meaning match
several turns close together in one thread (free memories of one type and one session,
core/model.thread_key), the turns between and around them are about the same thing even when
they share no word with the question: "Yeah, our trip got off to a bad start" two turns after
"that roadtrip this past weekend was insane". The immediate neighbours already lend each other
their words and similarity (the `context` column of the word index, search/vectors.py's
NEIGHBOUR_WEIGHT); this reaches further, over the candidates the first pass scored only:
each candidate gains SESSION_WEIGHT times the best fused score of another candidate of its
thread at most SESSION_REACH memories away (by id: a thread's memories are stored in order).
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping

from memloci.core.model import Memory, thread_key

# Chosen by leave-one-conversation-out on the LoCoMo development split (`memloci bench locomo --folds`).
SESSION_WEIGHT = 0.5
SESSION_REACH = 2


def thread_of(memory: Memory) -> str:
    """The thread a free memory belongs to ('' for none, and for an entity's observations)."""
    if memory.entity is not None:
        return ""
    return thread_key(None, memory.memory_type, memory.metadata)


def session_support(threads: Mapping[int, str], scores: Mapping[int, float], reach: int | None = None) -> dict[int, float]:
    """For each candidate with a thread, the best score of another candidate of the same thread
    at most `reach` ids away (SESSION_REACH when not given); `threads`: candidate id -> its thread."""
    reach = SESSION_REACH if reach is None else reach
    by_thread: dict[str, list[int]] = {}
    for memory_id in sorted(threads):
        if threads[memory_id]:
            by_thread.setdefault(threads[memory_id], []).append(memory_id)
    support: dict[int, float] = {}
    for ids in by_thread.values():
        if len(ids) < 2:
            continue
        for k, memory_id in enumerate(ids):
            start = bisect.bisect_left(ids, memory_id - reach)
            stop = bisect.bisect_right(ids, memory_id + reach)
            best = max((scores[ids[j]] for j in range(start, stop) if j != k), default=0.0)
            if best > 0:
                support[memory_id] = best
    return support

