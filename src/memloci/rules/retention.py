"""Retention, as memorix keeps it: how relevant a memory still is, and its zone.

    relevance = base(importance) x exp(-age_days / retention_days) x min(2, 1 + 0.1 x access_count)

with base/retention 1.0/365 days (critical), 0.8/180 (high), 0.5/90 (medium), 0.3/30 (low),
never under 7 days; a `probe` (an operational heartbeat) keeps 7 days whatever its importance.

Importance: a memory's own `importance` when it is not the default "medium", else its type's as
memorix assigns it: gotcha, decision, trade-off, reasoning are high; problem-solution,
how-it-works, why-it-exists medium; what-changed, discovery, session-request, probe low; any
other type (note, fact, dialogue, ...) medium. So a "decision" stored without an importance is
high, and one stored as "low" stays low.

Immunity, stricter than memorix's code (which no longer spares "high"): importance high or
critical, 3 or more uses, or a tag pinned, keep, important or critical (casefolded). A probe is
never immune, as in memorix. An immune memory's relevance is at least 0.5 and it is never an
archive candidate.

Zones: `active` when used within the last 7 days, immune, or no older than half its retention;
`stale` past half of it; `archive-candidate` past all of it (and not immune). A memory already
archived or superseded is in zone `archived` or `superseded`.

Every function takes `now`: nothing here reads the clock.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache

from memloci.core.model import Memory

IMPORTANCE_BASE = {"critical": 1.0, "high": 0.8, "medium": 0.5, "low": 0.3}
RETENTION_DAYS = {"critical": 365, "high": 180, "medium": 90, "low": 30}
DEFAULT_IMPORTANCE = "medium"  # what store_memory gives a memory stored without one
TYPE_IMPORTANCE = {
    "gotcha": "high", "decision": "high", "trade-off": "high", "reasoning": "high",
    "problem-solution": "medium", "how-it-works": "medium", "why-it-exists": "medium",
    "what-changed": "low", "discovery": "low", "session-request": "low", "probe": "low",
}
TYPE_RETENTION_DAYS = {"probe": 7}  # replaces the importance's retention
MIN_RETENTION_DAYS = 7
IMMUNE_IMPORTANCE = frozenset({"critical", "high"})
IMMUNE_USES = 3
IMMUNE_TAGS = frozenset({"pinned", "keep", "important", "critical"})
NEVER_IMMUNE_TYPES = frozenset({"probe"})
FLOOR = 0.5  # an immune memory's least relevance
MOST_USE_BOOST = 2.0  # uses lift relevance by 0.1 each, up to this factor
RECENT_USE_DAYS = 7  # used within this many days: active whatever its age
STALE_SHARE = 0.5  # past this share of its retention a memory is stale

ZONES = ("active", "stale", "archive-candidate", "archived", "superseded")


@dataclass(frozen=True, slots=True)
class Retention:
    """One memory's relevance at `now`, its parts, and its zone."""

    score: float  # base x decay x access_boost, at least FLOOR when immune
    base: float
    decay: float
    access_boost: float
    age_days: float
    retention_days: float
    immune: bool
    immunity_reason: str | None  # "importance high", "used 4 times", "tag pinned"
    zone: str  # one of ZONES


@lru_cache(maxsize=65536)  # ranking reads the same memories' times at every search
def parse_time(text: str) -> datetime:
    """A stored ISO 8601 UTC time ("2026-03-01T09:30:00Z")."""
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def type_importance(memory_type: str) -> str:
    return TYPE_IMPORTANCE.get(memory_type.casefold(), DEFAULT_IMPORTANCE)


def importance_of(memory: Memory) -> str:
    """The memory's own importance unless it is the default, else its type's."""
    if memory.importance in IMPORTANCE_BASE and memory.importance != DEFAULT_IMPORTANCE:
        return memory.importance
    return type_importance(memory.memory_type)


def retention_days(memory: Memory) -> float:
    days = TYPE_RETENTION_DAYS.get(memory.memory_type.casefold(), RETENTION_DAYS[importance_of(memory)])
    return float(max(MIN_RETENTION_DAYS, days))


def immunity(memory: Memory) -> str | None:
    """Why the memory is immune, or None."""
    if memory.memory_type.casefold() in NEVER_IMMUNE_TYPES:
        return None
    importance = importance_of(memory)
    if importance in IMMUNE_IMPORTANCE:
        return f"importance {importance}"
    if memory.access_count >= IMMUNE_USES:
        return f"used {memory.access_count} times"
    tag = next((t for t in memory.tags if t.casefold() in IMMUNE_TAGS), None)
    return f"tag {tag}" if tag is not None else None


def _days(earlier: str, now: datetime) -> float:
    return (now - parse_time(earlier)).total_seconds() / 86400


@lru_cache(maxsize=4096)
def _standing(memory_type: str, importance: str, access_count: int,
              immune_tag: str | None) -> tuple[float, float, float, str | None]:
    """(base, retention days, boost, immunity reason): what a memory's relevance takes from
    fields other than its age. Ranking asks it of every candidate at every search, and few
    memories differ in these four fields, so each combination is worked out once. Of the tags
    only the first that makes a memory immune counts: most memories' tags are their own
    ("dia:D1:3", "source:host"), and a cache keyed by them would miss every time."""
    tags = () if immune_tag is None else (immune_tag,)
    memory = Memory(0, "", "", tags, memory_type, importance, {}, "", "", access_count, None, None)  # those fields alone
    return (IMPORTANCE_BASE[importance_of(memory)], retention_days(memory),
            min(MOST_USE_BOOST, 1.0 + 0.1 * memory.access_count), immunity(memory))


def _scored(memory: Memory, now: datetime) -> tuple[float, float, float, float, float, float, str | None]:
    """(score, base, decay, boost, age in days, retention days, immunity reason)."""
    immune_tag = next((t for t in memory.tags if t.casefold() in IMMUNE_TAGS), None) if memory.tags else None
    base, days, boost, reason = _standing(memory.memory_type, memory.importance, memory.access_count, immune_tag)
    age = max(0.0, _days(memory.created_at, now))
    decay = math.exp(-age / days)
    score = base * decay * boost
    if reason is not None:
        score = max(score, FLOOR)
    return score, base, decay, boost, age, days, reason


def retention(memory: Memory, now: datetime) -> Retention:
    score, base, decay, boost, age, days, reason = _scored(memory, now)
    if memory.archived_at:
        zone = "archived"
    elif memory.superseded_by:
        zone = "superseded"
    elif (memory.last_accessed_at and _days(memory.last_accessed_at, now) < RECENT_USE_DAYS) or reason is not None:
        zone = "active"
    elif age > days:
        zone = "archive-candidate"
    elif age > STALE_SHARE * days:
        zone = "stale"
    else:
        zone = "active"
    return Retention(score, base, decay, boost, age, days, reason is not None, reason, zone)


def relevance(memory: Memory, now: datetime) -> float:
    """retention(memory, now).score, without the zone (ranking asks it of every candidate)."""
    return _scored(memory, now)[0]


def zone(memory: Memory, now: datetime) -> str:
    return retention(memory, now).zone
