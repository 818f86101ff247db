"""Time phrases: "yesterday", "last week", "in March", "3 days ago", "latest".

`parse_time_phrase` reads one phrase (the `time` argument); `split_time_phrase` finds one
inside a query ("what did I store last week about auth") and returns the query without it.
Ranges are [after, before) in UTC.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from ..errors import ValidationError

MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
MONTHS.update({name.lower(): i for i, name in enumerate(calendar.month_abbr) if name})
_UNITS = {"day": 1, "week": 7, "month": 30, "year": 365}


@dataclass(frozen=True, slots=True)
class TimeRange:
    after: datetime | None
    before: datetime | None
    latest: bool = False  # "latest", "most recent": newest first
    phrase: str = ""

    def iso(self) -> tuple[str | None, str | None]:
        fmt = "%Y-%m-%dT%H:%M:%SZ"
        return (self.after.strftime(fmt) if self.after else None, self.before.strftime(fmt) if self.before else None)


def _day(now: datetime) -> datetime:
    return now.replace(hour=0, minute=0, second=0, microsecond=0)


def _month_range(year: int, month: int) -> tuple[datetime, datetime]:
    start = datetime(year, month, 1, tzinfo=timezone.utc)
    end = datetime(year + (month == 12), month % 12 + 1, 1, tzinfo=timezone.utc)
    return start, end


_PATTERNS: list[tuple[re.Pattern[str], object]] = []


def _rule(pattern: str):
    def register(fn):
        _PATTERNS.append((re.compile(rf"\b(?:{pattern})\b", re.IGNORECASE), fn))
        return fn
    return register


@_rule(r"today")
def _today(m, now):
    return _day(now), None


@_rule(r"yesterday")
def _yesterday(m, now):
    return _day(now) - timedelta(days=1), _day(now)


@_rule(r"this (week|month|year)")
def _this(m, now):
    unit = m.group(1).lower()
    if unit == "week":
        return _day(now) - timedelta(days=now.weekday()), None
    if unit == "month":
        return _day(now).replace(day=1), None
    return _day(now).replace(month=1, day=1), None


@_rule(r"last (week|month|year)")
def _last(m, now):
    unit = m.group(1).lower()
    if unit == "week":
        start = _day(now) - timedelta(days=now.weekday() + 7)
        return start, start + timedelta(days=7)
    if unit == "month":
        year, month = (now.year, now.month - 1) if now.month > 1 else (now.year - 1, 12)
        return _month_range(year, month)
    return datetime(now.year - 1, 1, 1, tzinfo=timezone.utc), datetime(now.year, 1, 1, tzinfo=timezone.utc)


@_rule(r"(\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten) (day|week|month|year)s? ago")
def _ago(m, now):
    words = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
             "eight": 8, "nine": 9, "ten": 10}
    count = int(m.group(1)) if m.group(1).isdigit() else words[m.group(1).lower()]
    days = count * _UNITS[m.group(2).lower()]
    centre = _day(now) - timedelta(days=days)
    slack = timedelta(days=max(1, days // 7))
    return centre - slack, centre + timedelta(days=1) + slack


@_rule(r"(?:past|last) (\d+) (day|week|month|year)s")
def _past(m, now):
    return now - timedelta(days=int(m.group(1)) * _UNITS[m.group(2).lower()]), None


@_rule(r"recently|lately")
def _recently(m, now):
    return now - timedelta(days=7), None


@_rule(r"in (" + "|".join(sorted(MONTHS, key=len, reverse=True)) + r")\.?(?: (\d{4}))?")
def _in_month(m, now):
    month = MONTHS[m.group(1).lower()]
    year = int(m.group(2)) if m.group(2) else (now.year if month <= now.month else now.year - 1)
    return _month_range(year, month)


@_rule(r"(?:on |since |in )?(\d{4})-(\d{2})-(\d{2})")
def _date(m, now):
    start = datetime(int(m.group(1)), int(m.group(2)), int(m.group(3)), tzinfo=timezone.utc)
    if m.group(0).lower().startswith("since"):
        return start, None
    return start, start + timedelta(days=1)


_LATEST = re.compile(r"\b(latest|most recent(?:ly)?|newest|last (?:thing|one|memory))\b", re.IGNORECASE)


def _match(text: str, now: datetime) -> TimeRange | None:
    if (m := _LATEST.search(text)) is not None:
        return TimeRange(None, None, True, m.group(0))
    best = None
    for pattern, fn in _PATTERNS:
        m = pattern.search(text)
        if m and (best is None or m.start() < best[0].start()):
            best = (m, fn)
    if best is None:
        return None
    m, fn = best
    try:
        after, before = fn(m, now)
    except ValueError as exc:  # "2026-02-30"
        raise ValidationError(f"time: '{m.group(0)}' is not a real date ({exc})") from exc
    return TimeRange(after, before, False, m.group(0))


def parse_time_phrase(text: str, now: datetime | None = None) -> TimeRange:
    """The range a `time` argument names; VALIDATION_ERROR if it names none."""
    found = _match(text.strip(), now or datetime.now(timezone.utc))
    if found is None:
        raise ValidationError(
            f"time: '{text}' is not a time phrase memloci understands",
            hint="Use e.g. today, yesterday, this week, last week, last month, in March, 3 days ago, "
                 "past 30 days, latest, or 2026-03-04; or pass after/before as ISO dates.",
        )
    return found


def split_time_phrase(query: str, now: datetime | None = None) -> tuple[str, TimeRange | None]:
    """(query without the phrase, its range) when the query carries a time phrase."""
    found = _match(query, now or datetime.now(timezone.utc))
    if found is None:
        return query, None
    rest = re.sub(r"\s+", " ", query.replace(found.phrase, " ", 1)).strip()
    return rest, found
