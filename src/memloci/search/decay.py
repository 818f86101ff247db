"""Decay in ranking: the memory's retention relevance (rules/retention.py, memorix's formula,
importance by type and immunity included) as a gentle factor on its search score.

Relevance is multiplied by (relevance / 0.5) ** DECAY_STRENGTH: a fresh medium memory is neutral
(x1); a much-used one gains up to x1.11, a 90-day-old medium one keeps x0.86, a year-old low one
x0.15, so how well a memory matches stays the main signal and stale, unimportant memories sink.
"""

from __future__ import annotations

from datetime import datetime

from memloci.core.model import Memory
from memloci.rules.retention import FLOOR, IMPORTANCE_BASE, MOST_USE_BOOST, relevance

DECAY_STRENGTH = 0.15
# The largest factor decay_factor gives: the highest base, no age, the most uses (an immune
# memory's floor is below that).
MOST_DECAY = (max(max(IMPORTANCE_BASE.values()) * MOST_USE_BOOST, FLOOR) / FLOOR) ** DECAY_STRENGTH


def decay_factor(memory: Memory, now: datetime) -> float:
    """The multiplier applied to a memory's search score at `now`."""
    return (relevance(memory, now) / FLOOR) ** DECAY_STRENGTH
