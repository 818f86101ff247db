"""Time phrases: "yesterday", "last week", "in March", "3 days ago", "latest", and their
Chinese and Japanese counterparts (昨日, 先週, 先月, 3日前, 去年, 上周, 上个月, 三天前, 最新).

`parse_time_phrase` reads one phrase (the `time` argument); `split_time_phrase` finds one
inside a query ("what did I store last week about auth") and returns the query without it.
Chinese and Japanese are written without spaces, so their phrases are found as substrings
("先週の会議"); English ones only as whole words ("last weekend" is not "last week").
A whole `time` argument may also name a month alone ("November", "Oct 2026", "2026-10", "10月").
Ranges are [after, before) in UTC. A phrase that names a date on the calendar ("in March",
"2026-03-04") is `absolute`: its words may also be what the memory says, so a query keeps them.

How retrieve_memory uses them (service.retrieve_memory): a `time` argument is a hard filter,
and words that match nothing never empty it (its newest memories come, with a note). A phrase
inside the query is soft: it ranks its range first and is neither searched for nor embedded,
but it hides nothing better: when nothing in its range matches, memories elsewhere that match
the query's words come before the range's newest ("bugs two weeks ago" shows the bugs of
other days). With both, `time` is the range; the query's phrase only loses its words.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from memloci.core.errors import ValidationError

MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
MONTHS.update({name.lower(): i for i, name in enumerate(calendar.month_abbr) if name})
_UNITS = {"day": 1, "week": 7, "month": 30, "year": 365}


@dataclass(frozen=True, slots=True)
class TimeRange:
    after: datetime | None
    before: datetime | None
    latest: bool = False  # "latest", "most recent": newest first
    phrase: str = ""
    absolute: bool = False  # a calendar date or month rather than a time relative to now

    def iso(self) -> tuple[str | None, str | None]:
        fmt = "%Y-%m-%dT%H:%M:%SZ"
        return (self.after.strftime(fmt) if self.after else None, self.before.strftime(fmt) if self.before else None)


def _day(now: datetime) -> datetime:
    return now.replace(hour=0, minute=0, second=0, microsecond=0)


def _month_range(year: int, month: int) -> tuple[datetime, datetime]:
    start = datetime(year, month, 1, tzinfo=UTC)
    end = datetime(year + (month == 12), month % 12 + 1, 1, tzinfo=UTC)
    return start, end


# A rule takes the match and now, and gives the range (after, before)
_Rule = Callable[["re.Match[str]", datetime], tuple[datetime | None, datetime | None]]
_PATTERNS: list[tuple[re.Pattern[str], _Rule]] = []


def _rule(pattern: str, words: bool = True):
    """Register a phrase; `words=False` for Chinese/Japanese, found anywhere in a run of text."""
    def register(fn):
        _PATTERNS.append((re.compile(rf"\b(?:{pattern})\b" if words else pattern, re.IGNORECASE), fn))
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
    return _this_unit(m.group(1).lower(), now)


def _this_unit(unit: str, now: datetime) -> tuple[datetime, None]:
    if unit == "week":
        return _day(now) - timedelta(days=now.weekday()), None
    if unit == "month":
        return _day(now).replace(day=1), None
    return _day(now).replace(month=1, day=1), None


@_rule(r"last (week|month|year)")
def _last(m, now):
    return _last_unit(m.group(1).lower(), now)


def _last_unit(unit: str, now: datetime) -> tuple[datetime, datetime]:
    if unit == "week":
        start = _day(now) - timedelta(days=now.weekday() + 7)
        return start, start + timedelta(days=7)
    if unit == "month":
        year, month = (now.year, now.month - 1) if now.month > 1 else (now.year - 1, 12)
        return _month_range(year, month)
    return datetime(now.year - 1, 1, 1, tzinfo=UTC), datetime(now.year, 1, 1, tzinfo=UTC)


@_rule(r"(\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten) (day|week|month|year)s? ago")
def _ago(m, now):
    words = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
             "eight": 8, "nine": 9, "ten": 10}
    count = int(m.group(1)) if m.group(1).isdigit() else words[m.group(1).lower()]
    return _around(count * _UNITS[m.group(2).lower()], now)


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
    start = datetime(int(m.group(1)), int(m.group(2)), int(m.group(3)), tzinfo=UTC)
    if m.group(0).lower().startswith("since"):
        return start, None
    return start, start + timedelta(days=1)


@_rule(r"(?:the )?day before yesterday")
def _day_before_yesterday(m, now):
    return _day(now) - timedelta(days=2), _day(now) - timedelta(days=1)


@_rule(r"(?:the )?past (week|month|year)")
def _past_unit(m, now):
    return now - timedelta(days=_UNITS[m.group(1).lower()]), None


_WEEKDAYS = {name.lower(): i for i, name in enumerate(calendar.day_name)}
_WEEKDAYS.update({name.lower(): i for i, name in enumerate(calendar.day_abbr)})


@_rule(r"(last|this) (" + "|".join(sorted(_WEEKDAYS, key=len, reverse=True)) + r")")
def _weekday(m, now):
    """"last Monday" is the latest Monday before today; "this Monday" the one of this week."""
    day = _WEEKDAYS[m.group(2).lower()]
    if m.group(1).lower() == "last":
        start = _day(now) - timedelta(days=(now.weekday() - day - 1) % 7 + 1)
    else:
        start = _day(now) + timedelta(days=day - now.weekday())
    return start, start + timedelta(days=1)


# -- Chinese and Japanese -------------------------------------------------------------------
# Numerals: Arabic (also full-width, which \d and int() read) or kanji up to 99 (三, 十, 十二, 二十一).
_KANJI_DIGITS = {"一": 1, "二": 2, "两": 2, "兩": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
_CJK_NUMBER = r"\d+|[一二两兩三四五六七八九十]+"
_CJK_UNITS = {"日": "day", "天": "day", "週間": "week", "週": "week", "周": "week", "个星期": "week",
              "個星期": "week", "星期": "week", "か月": "month", "ヶ月": "month", "カ月": "month", "ヵ月": "month",
              "箇月": "month", "个月": "month", "個月": "month", "年": "year"}


def cjk_number(text: str) -> int:
    """3, ３, 三, 十, 十二, 二十一 as an integer (ValueError for anything else)."""
    if text.isdigit():
        return int(text)
    if "十" in text:
        tens, _, ones = text.partition("十")
        if "十" in ones or len(tens) > 1 or len(ones) > 1:
            raise ValueError(f"'{text}' is not a number memloci reads")
        return (_KANJI_DIGITS[tens] if tens else 1) * 10 + (_KANJI_DIGITS[ones] if ones else 0)
    if len(text) != 1:
        raise ValueError(f"'{text}' is not a number memloci reads")
    return _KANJI_DIGITS[text]


def _around(days: int, now: datetime) -> tuple[datetime, datetime]:
    """"N days/weeks ago" is a day give or take a day a week: people round."""
    centre = _day(now) - timedelta(days=days)
    slack = timedelta(days=max(1, days // 7))
    return centre - slack, centre + timedelta(days=1) + slack


# (?!半|後): 2026年前半 is "the first half of 2026", 10日前後 "around the 10th"
@_rule(rf"({_CJK_NUMBER})\s*({'|'.join(sorted(_CJK_UNITS, key=len, reverse=True))})\s*前(?!半|後)", words=False)
def _cjk_ago(m, now):
    return _around(cjk_number(m.group(1)) * _UNITS[_CJK_UNITS[m.group(2)]], now)


@_rule(r"一昨日|おととい|前天", words=False)
def _cjk_day_before_yesterday(m, now):
    return _day_before_yesterday(m, now)


@_rule(r"今日|今天", words=False)
def _cjk_today(m, now):
    return _day(now), None


@_rule(r"昨日|昨天", words=False)
def _cjk_yesterday(m, now):
    return _day(now) - timedelta(days=1), _day(now)


# (?<!日): 日本周辺 ("around Japan") holds 本周 ("this week") but does not say it
_CJK_THIS = {"week": r"今週|(?<!日)本周|(?<!日)本週|这周|這週|这个星期|這個星期|本星期|这星期",
             "month": r"今月|(?<!日)本月|这个月|這個月",
             "year": r"今年"}
_CJK_LAST = {"week": r"先週|上周|上週|上个星期|上個星期|上星期", "month": r"先月|上个月|上個月|上月",
             "year": r"去年|昨年"}
for _unit in ("week", "month", "year"):
    _rule(_CJK_THIS[_unit], words=False)(lambda m, now, unit=_unit: _this_unit(unit, now))
    _rule(_CJK_LAST[_unit], words=False)(lambda m, now, unit=_unit: _last_unit(unit, now))


_LATEST = re.compile(r"\b(latest|most recent(?:ly)?|newest|last (?:thing|one|memory))\b|最新|最近", re.IGNORECASE)
_ABSOLUTE = {_in_month, _date}  # rules naming a date on the calendar, not a time relative to now


def _match(text: str, now: datetime) -> TimeRange | None:
    if (m := _LATEST.search(text)) is not None:
        return TimeRange(None, None, True, m.group(0))
    best: tuple[re.Match[str], _Rule] | None = None
    for pattern, fn in _PATTERNS:  # the first phrase in the text; at one place, the longest
        m = pattern.search(text)
        if m and (best is None or (m.start(), -len(m.group(0))) < (best[0].start(), -len(best[0].group(0)))):
            best = (m, fn)
    if best is None:
        return None
    m, fn = best
    try:
        after, before = fn(m, now)
    except (ValueError, KeyError, OverflowError) as exc:  # "2026-02-30", "十十日前", "5000 years ago"
        raise ValidationError(f"time: '{m.group(0)}' is not a real date ({exc})") from exc
    return TimeRange(after, before, False, m.group(0), fn in _ABSOLUTE)


# Read only as a whole `time` argument, never inside a query: "May", "2026-10" and "10月" alone
# name a month there, while in a sentence they may be a verb, a version or part of a date.
_MONTH_ALONE = re.compile(r"(" + "|".join(sorted(MONTHS, key=len, reverse=True)) + r")\.?,?(?: (\d{4}))?",
                          re.IGNORECASE)
_YEAR_MONTH = re.compile(r"(\d{4})-(\d{1,2})")
_CJK_MONTH = re.compile(rf"(?:(\d{{4}})\s*年\s*)?({_CJK_NUMBER})\s*月")


def _argument_month(text: str, now: datetime) -> TimeRange | None:
    """A month named alone: "November", "Oct 2026", "2026-10", "10月", "2026年10月". Without a
    year, the most recent such month (this year unless it is still to come)."""
    if m := _MONTH_ALONE.fullmatch(text):
        month, year = MONTHS[m.group(1).lower()], m.group(2)
    elif m := _YEAR_MONTH.fullmatch(text):
        month, year = int(m.group(2)), m.group(1)
    elif m := _CJK_MONTH.fullmatch(text):
        month, year = cjk_number(m.group(2)), m.group(1)
    else:
        return None
    if not 1 <= month <= 12:
        raise ValidationError(f"time: '{text}' names no month (month {month})")
    year = int(year) if year else (now.year if month <= now.month else now.year - 1)
    after, before = _month_range(year, month)
    return TimeRange(after, before, False, text, True)


def parse_time_phrase(text: str, now: datetime) -> TimeRange:
    """The range a `time` argument names, counted from `now`; VALIDATION_ERROR if it names none."""
    if not isinstance(text, str):
        raise ValidationError(f"time: must be a time phrase (text), got {type(text).__name__}")
    if not text.strip():
        raise ValidationError("time: must not be empty (an empty string names no time)",
                              hint="Leave `time` out for no time filter, or say e.g. yesterday, last week, 昨日.")
    found = _argument_month(text.strip(), now) or _match(text.strip(), now)
    if found is None:
        raise ValidationError(
            f"time: '{text}' is not a time phrase memloci understands",
            hint="Use e.g. today, yesterday, this week, last week, last Monday, last month, November, "
                 "Oct 2026, 2026-10, 3 days ago, past 30 days, latest, 2026-03-04, 昨日, 先週, 3日前, 上个月, 10月; "
                 "or pass after/before as ISO dates.",
        )
    return found


def split_time_phrase(query: str, now: datetime) -> tuple[str, TimeRange | None]:
    """(query without the phrase, its range) when the query carries a time phrase. A query is
    never refused for its wording: what reads as an impossible date is left to the words."""
    try:
        found = _match(query, now)
    except ValidationError:
        return query, None
    if found is None:
        return query, None
    # A Chinese or Japanese phrase takes the particle tying it to the rest along (先週の, 上个月的):
    # "のバグ" is not a word of any memory, "バグ" is.
    particle = r"(?:には|では|の|は|に|で|的)?" if not found.phrase.isascii() else ""
    rest = re.sub(re.escape(found.phrase) + particle, " ", query, count=1)
    return re.sub(r"\s+", " ", rest).strip(), found
