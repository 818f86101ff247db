"""What a question tells about the statement that answers it, beyond its words.

A question is not worded like its answer. "When did Caroline go to the support group?" is
answered by "Caroline: I went to a support group yesterday": a statement by the person the
question names, holding a time reference, in a conversation held near the date asked about.
These cues read that from the question and from each candidate memory:

- a *when* question ("when", "how long", "what year") looks for a statement that says when
  (yesterday, last week, a weekday, a month, a year, "3 years ago", "for two months");
- a date in the question ("on 1 May, 2022", "in July 2023", "the week before 9 June 2023")
  looks for memories of that time, by the date their metadata gives (a conversation's session
  date; when a memory was stored is the business of time phrases, search/timephrases.py);
  since people speak of an event after it happens, a memory dated up to a week after the
  range still counts;
- a person the question names ("Caroline") looks for that person's statements: a memory
  written as "<speaker>: <text>" whose speaker the question names.

A memory's date is its `metadata.date`, a string: an ISO date or timestamp ("2023-05-08",
"2023-05-08T13:56:00+02:00", read as the calendar date written, with no time zone shift) or a
written date ("1:56 pm on 8 May, 2023", LoCoMo's session dates; "8 May 2023", "May 8, 2023").

Where these come from: the cue features themselves (the question words, the date formats, the
"Name: " speaker prefix, the `metadata.date` key) were designed by reading the five
conversations of LoCoMo's development split. Leave-one-conversation-out (`memloci bench
locomo --folds`) chooses only the three boosts of search/hybrid.py; it does not protect the
features from having been fitted to those conversations, so a held-out split is the honest
measure of them.
"""

from __future__ import annotations

import calendar
import re
from datetime import UTC, datetime, timedelta
from functools import lru_cache

_MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
_MONTHS.update({name.lower(): i for i, name in enumerate(calendar.month_abbr) if name and name != "May"})
_MONTH = "|".join(sorted(_MONTHS, key=len, reverse=True))
_DAYS = "monday|tuesday|wednesday|thursday|friday|saturday|sunday"
_NUM = r"\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|few|couple of|several"
_UNIT = r"days?|weeks?|weekends?|months?|years?"

# Questions about time: "When did…", "How long has…", "What year…", "Since when…".
_WHEN_QUESTION = re.compile(r"\b(when|how long|what (?:year|month|date|day|time)|which (?:year|month))\b", re.IGNORECASE)

# A statement that says when: relative ("yesterday", "last Friday", "two weeks ago", "for 3
# years") or absolute ("in June", "2019"). Capitalized month names only, so "may" the verb and
# "march" the walk do not count.
_TIME_REFERENCE = re.compile(
    rf"\b(?:yesterday|today|tonight|tomorrow|recently|lately|the other day|this morning|this evening"
    rf"|(?:last|this|next|past) (?:{_UNIT}|night|summer|winter|spring|fall|autumn|{_DAYS}|time)"
    rf"|(?:{_NUM}) (?:{_UNIT}) (?:ago|back|later|before|earlier)"
    rf"|(?:for|in|about|over|nearly|almost) (?:the (?:last|past) )?(?:{_NUM}) (?:{_UNIT})"
    rf"|since (?:I|we|he|she|they|last|\d|the)"
    rf"|on (?:{_DAYS})|(?:{_DAYS}) (?:morning|afternoon|evening|night)"
    rf"|(?:19|20)\d\d)\b"
    rf"|\b(?:{'|'.join(m.capitalize() for m in _MONTHS)})\b",
    re.IGNORECASE,
)
_MONTH_CASE = re.compile(rf"\b(?:{'|'.join(m.capitalize() for m in _MONTHS)})\b")


def is_when_question(query: str) -> bool:
    return _WHEN_QUESTION.search(query) is not None


# A memory's text is asked about at every question that names a "when". The cache keeps whole
# texts as keys, so it is kept small: a long-running server must not hold its library twice.
@lru_cache(maxsize=4096)
def says_when(text: str) -> bool:
    """Whether a statement holds a time reference (month names count only capitalized)."""
    for m in _TIME_REFERENCE.finditer(text):
        word = m.group(0)
        if word.lower() in _MONTHS and not _MONTH_CASE.fullmatch(word):
            continue
        return True
    return False


# Dates in a question. Ranges are [start, end) in UTC.
_DAY_MONTH_YEAR = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)? ({_MONTH})\.?(?:,\s*|\s+)(\d{{4}})\b", re.IGNORECASE)
_MONTH_DAY_YEAR = re.compile(rf"\b({_MONTH})\.? (\d{{1,2}})(?:st|nd|rd|th)?(?:,\s*|\s+)(\d{{4}})\b", re.IGNORECASE)
_MONTH_YEAR = re.compile(rf"\b({_MONTH})\.?,? (\d{{4}})\b", re.IGNORECASE)
_IN_MONTH = re.compile(rf"\b(?:in|of|during) ({_MONTH})\b", re.IGNORECASE)
_YEAR = re.compile(r"\b(?:in|of|during|since|summer|winter|spring|fall|autumn) ((?:19|20)\d\d)\b", re.IGNORECASE)
_BEFORE = re.compile(rf"\b(?:the )?(?:({_NUM}) )?(days?|weeks?|weekends?|months?) before\b", re.IGNORECASE)
_COUNT = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
          "eight": 8, "nine": 9, "ten": 10, "few": 3, "couple of": 2, "several": 3}
_UNIT_DAYS = {"day": 1, "week": 7, "weekend": 7, "month": 31}


def _month_span(year: int, month: int) -> tuple[datetime, datetime]:
    start = datetime(year, month, 1, tzinfo=UTC)
    return start, datetime(year + (month == 12), month % 12 + 1, 1, tzinfo=UTC)


def question_dates(query: str) -> tuple[datetime, datetime] | tuple[int, int] | None:
    """The time a question asks about: a (start, end) range, or (0, month) for a month of any
    year ("in June"); None if it names no date."""
    try:
        m = _DAY_MONTH_YEAR.search(query) or _MONTH_DAY_YEAR.search(query)
        if m is not None:
            day, month, year = ((m.group(1), m.group(2), m.group(3)) if m.re is _DAY_MONTH_YEAR
                                else (m.group(2), m.group(1), m.group(3)))
            start = datetime(int(year), _MONTHS[month.lower()], int(day), tzinfo=UTC)
            before = _BEFORE.search(query[: m.start()])
            if before is not None:  # "the week before 9 June 2023", "two weeks before August 11, 2023"
                count = _COUNT.get((before.group(1) or "one").lower(), None)
                count = count if count is not None else int(before.group(1))
                span = timedelta(days=count * _UNIT_DAYS[before.group(2).lower().rstrip("s")])
                return start - span - timedelta(days=2), start + timedelta(days=1)
            return start, start + timedelta(days=1)
        m = _MONTH_YEAR.search(query)
        if m is not None:
            return _month_span(int(m.group(2)), _MONTHS[m.group(1).lower()])
        m = _YEAR.search(query)
        if m is not None:
            year = int(m.group(1))
            return datetime(year, 1, 1, tzinfo=UTC), datetime(year + 1, 1, 1, tzinfo=UTC)
        m = _IN_MONTH.search(query)
        if m is not None and m.group(1)[0].isupper():
            return 0, _MONTHS[m.group(1).lower()]
    except ValueError:  # "31 February, 2023" names no day
        return None
    return None


# "1:56 pm on 8 May, 2023" (LoCoMo's session dates), "2023-05-08", "8 May 2023", "May 8, 2023".
_ISO_DATE = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})(?!\d)")


@lru_cache(maxsize=4096)
def parse_date(text: str) -> datetime | None:
    """The date a metadata value names, or None."""
    if not isinstance(text, str):
        return None
    try:
        if (m := _ISO_DATE.search(text)) is not None:
            return datetime(int(m.group(1)), int(m.group(2)), int(m.group(3)), tzinfo=UTC)
        if (m := _DAY_MONTH_YEAR.search(text)) is not None:
            return datetime(int(m.group(3)), _MONTHS[m.group(2).lower()], int(m.group(1)), tzinfo=UTC)
        if (m := _MONTH_DAY_YEAR.search(text)) is not None:
            return datetime(int(m.group(3)), _MONTHS[m.group(1).lower()], int(m.group(2)), tzinfo=UTC)
    except ValueError:
        return None
    return None


DATE_SLACK = timedelta(days=8)  # an event is told of up to about a week after it happens


def dated_within(when: datetime | None, wanted) -> bool:
    """Whether a memory dated `when` speaks of the time `wanted` (from question_dates)."""
    if when is None or wanted is None:
        return False
    if wanted[0] == 0:  # a month of any year
        return when.month == wanted[1] or (when - DATE_SLACK).month == wanted[1]
    return wanted[0] <= when < wanted[1] + DATE_SLACK


_SPEAKER = re.compile(r"^([A-Z][\w.'-]{0,30}(?: [A-Z][\w.'-]{0,30})?): ")
SPEAKER_SPAN = 65  # the longest text _SPEAKER matches (two words of 31 letters, a space, ": "): what decides speaker()


def speaker(content: str) -> str | None:
    """The speaker of a memory written as "<Name>: <text>"."""
    m = _SPEAKER.match(content)
    return m.group(1) if m else None


@lru_cache(maxsize=4096)  # a question asks it of each candidate, and a conversation has few speakers
def named_in(name: str, query: str) -> bool:
    """Whether the question names this person (by a whole word of the name, as written)."""
    return any(re.search(rf"\b{re.escape(part)}\b", query) for part in name.split() if len(part) > 1)

