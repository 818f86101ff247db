"""Decay by age, importance and use: recent, important, often used memories rank higher.

    decay = importance_base x exp(-age_days / retention_days) x min(2, 1 + 0.1 x access_count)

with base/retention 1.0/365 (critical), 0.8/180 (high), 0.5/90 (medium), 0.3/30 (low).
Critical and high memories, memories used 3 times or more, and memories tagged keep,
important or pinned never fall below 0.5. Relevance is multiplied by
(decay / 0.5) ** DECAY_STRENGTH: a fresh medium memory is neutral (x1); a much-used one
gains up to x1.11, a 90-day-old medium one keeps x0.86, a year-old low one x0.15, so
relevance stays the main signal and stale, unimportant memories sink.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

from memloci.core.model import Memory

IMPORTANCE_BASE = {"critical": 1.0, "high": 0.8, "medium": 0.5, "low": 0.3}
RETENTION_DAYS = {"critical": 365, "high": 180, "medium": 90, "low": 30}
PROTECTED_TAGS = frozenset({"keep", "important", "pinned"})
FLOOR = 0.5
DECAY_STRENGTH = 0.15


def parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def decay(memory: Memory, now: datetime) -> float:
    importance = memory.importance if memory.importance in IMPORTANCE_BASE else "medium"
    age_days = max(0.0, (now - parse_time(memory.created_at)).total_seconds() / 86400)
    value = (IMPORTANCE_BASE[importance] * math.exp(-age_days / RETENTION_DAYS[importance])
             * min(2.0, 1.0 + 0.1 * memory.access_count))
    if importance in ("critical", "high") or memory.access_count >= 3 or PROTECTED_TAGS.intersection(memory.tags):
        value = max(value, FLOOR)
    return value


def decay_factor(memory: Memory, now: datetime | None = None) -> float:
    """The multiplier applied to a memory's relevance."""
    return (decay(memory, now or datetime.now(UTC)) / FLOOR) ** DECAY_STRENGTH
