"""Recall by time: time-stamped memories imported with `memloci import jsonl` (which keeps
`created_at`), then asked about over MCP with the real embedder, in English, Chinese and
Japanese, as a time filter and as a phrase inside the query.

Expected ranges are computed here from the calendar, not by the parser under test. The
fixtures are built from "now"; test_fixtures_hold_on_any_day builds them for each weekday, for
both sides of a month and a year boundary and for both ends of a day, and checks what the tests
assume of them: no two memories at one instant (an order by time is then one order), this
file's calendar and the parser's agreeing on every phrase the tests use, and each range holding
what the tests expect.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from conftest import Client, run_session, server_env

from memloci.core.errors import ValidationError
from memloci.search.timephrases import parse_time_phrase, split_time_phrase


@dataclass(frozen=True)
class Calendar:
    """The days the fixtures and the expected ranges are counted from."""

    now: datetime

    @property
    def today(self) -> datetime:
        return self.now.replace(hour=0, minute=0, second=0, microsecond=0)

    @property
    def monday(self) -> datetime:
        return self.today - timedelta(days=self.today.weekday())

    @property
    def last_week(self) -> tuple[datetime, datetime]:
        return self.monday - timedelta(days=7), self.monday

    @property
    def yesterday(self) -> tuple[datetime, datetime]:
        return self.today - timedelta(days=1), self.today

    @property
    def month_start(self) -> datetime:
        return self.today.replace(day=1)

    @property
    def last_month(self) -> tuple[datetime, datetime]:
        return (self.month_start - timedelta(days=1)).replace(day=1), self.month_start

    def created(self, days_ago: int) -> datetime:
        """Noon of that day (a minute ago for today, never in the future)."""
        if days_ago == 0:
            return max(self.today, self.now - timedelta(minutes=1))
        return self.today - timedelta(days=days_ago) + timedelta(hours=12)


NOW = Calendar(datetime.now(UTC))  # the calendar of this run: the server's clock is the real one

# One memory a day for the last 40 days, each on its own subject: no two share a content word,
# so only time can bring a day's memory up.
SUBJECTS = [
    "Painted the garden fence green", "Booked flights to Lisbon for the conference",
    "Replaced the kitchen faucet washer", "Read a paper about sparse attention",
    "Tuned the piano in the living room", "Renewed the passport at the town hall",
    "Fixed the bicycle chain before the ride", "Sorted the photo archive by year",
    "Baked sourdough with rye flour", "Migrated the wiki to a static site",
    "Interviewed a candidate for the data role", "Planted tulip bulbs along the path",
    "Calibrated the 3D printer bed", "Filed the quarterly VAT return",
    "Cleaned the aquarium filter", "Rewired the doorbell transformer",
    "Adopted a grey kitten from the shelter", "Upgraded the router firmware",
    "Hiked the ridge trail with Sam", "Archived old invoices into folders",
    "Learned three chords on the ukulele", "Drafted the onboarding checklist",
    "Repaired the leaking roof gutter", "Composted the autumn leaves",
    "Benchmarked the parser on large inputs", "Cooked a Thai green curry",
    "Changed the car's winter tyres", "Organised the toolbox drawers",
    "Wrote thank-you cards to the volunteers", "Trimmed the hedge by the gate",
    "Set up the new monitor arm", "Visited grandma at the care home",
    "Watered the orchids on the balcony", "Donated clothes to the charity shop",
    "Measured the hallway for a rug", "Polished the silver candlesticks",
    "Vacuumed the attic insulation dust", "Sharpened the chef's knives",
    "Defrosted the chest freezer", "Oiled the squeaky hinges",
    "Tested the smoke alarms upstairs",
]


def stamp(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def memory_line(content: str, at: datetime, memory_type: str = "note", tags: tuple[str, ...] = ()) -> str:
    return json.dumps({"type": "memory", "content": content, "tags": list(tags), "memory_type": memory_type,
                       "created_at": stamp(at), "updated_at": stamp(at)}, ensure_ascii=False)


# Alone on its day whatever the weekday: the memories placed by the week (below) fall 8 to 15
# days ago, and this one is 16 days old.
KITTEN = "Adopted a grey kitten from the shelter"
KITTEN_DAYS_AGO = SUBJECTS.index(KITTEN)


def dataset(cal: Calendar) -> tuple[list[str], dict[str, datetime]]:
    lines, when = [], {}
    for days_ago, subject in enumerate(SUBJECTS):
        at = cal.created(days_ago)
        lines.append(memory_line(subject, at))
        when[subject] = at
    # Words a time phrase uses, in memories outside its range: the phrase must not match them.
    # At 18:00, not noon: no two memories share an instant, so "newest first" is one order.
    for content, at in [("CSV export drops the last row", cal.last_week[0] - timedelta(hours=6)),
                        ("Weekly sync moved to a later slot", cal.monday - timedelta(days=8, hours=6))]:
        lines.append(memory_line(content, at, "bug"))
        when[content] = at
    for content in ("We decided to ship the mobile app in two phases",
                    "We decided to keep PostgreSQL for billing"):
        at = cal.created(1) + timedelta(hours=-2 if "mobile" in content else 2)
        lines.append(memory_line(content, at, "decision", ("decision",)))
        when[content] = at
    return lines, when


def in_range(at: datetime, span: tuple[datetime, datetime | None]) -> bool:
    return span[0] <= at and (span[1] is None or at < span[1])


def filter_spans(cal: Calendar) -> dict[str, tuple[datetime, datetime | None]]:
    """The `time` arguments test_a_time_filter_returns_its_range_when_no_word_matches passes, and
    the range each names by the calendar."""
    month_ago = cal.today - timedelta(days=30)
    first = month_ago.replace(day=1)
    after_month = (first + timedelta(days=32)).replace(day=1)
    day = cal.today - timedelta(days=12)
    return {
        "today": (cal.today, None), "this week": (cal.monday, None), "yesterday": cal.yesterday,
        "last month": cal.last_month, f"in {month_ago.strftime('%B')}": (first, after_month),
        day.strftime("%Y-%m-%d"): (day, day + timedelta(days=1)), "先月": cal.last_month,
    }


def three_days_ago(cal: Calendar) -> tuple[datetime, datetime]:
    """3日前: that day, give or take one."""
    return cal.today - timedelta(days=4), cal.today - timedelta(days=1)


def kitten_day(cal: Calendar) -> tuple[datetime, datetime]:
    day = cal.today - timedelta(days=KITTEN_DAYS_AGO)
    return day, day + timedelta(days=1)


@pytest.fixture(scope="module")
def library(tmp_path_factory) -> tuple[Path, dict[str, datetime]]:
    home = tmp_path_factory.mktemp("recall-time") / "home"
    lines, when = dataset(NOW)
    source = home.parent / "memories.jsonl"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "memloci", "import", "jsonl", str(source)], capture_output=True,
                          text=True, env=server_env(home, COLUMNS="200"), timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert f"{len(lines)} memories" in proc.stdout, proc.stdout
    return home, when


def run(home: Path, body) -> None:
    run_session(home, body, MEMLOCI_EMBEDDER="minilm")


def test_time_phrases_in_a_query_bring_their_range_first(library):
    home, when = library
    last_week = sorted((c for c, at in when.items() if in_range(at, NOW.last_week)), key=when.get)
    yesterday = [c for c, at in when.items() if in_range(at, NOW.yesterday)]
    assert len(last_week) >= 7 and len(yesterday) == 3

    async def body(c: Client):
        for query in ("what did we work on last week", "先週は何をしましたか", "上周做了什么", "last week"):
            found, _ = await c.ok("retrieve_memory", query=query, n_results=len(last_week) + 1)
            top = [m["content"] for m in found["memories"]][: len(last_week)]
            assert sorted(top, key=when.get) == last_week, (query, top)
        for query in ("what happened yesterday", "昨日のこと", "昨天的事情"):
            found, _ = await c.ok("retrieve_memory", query=query, n_results=5)
            top = [m["content"] for m in found["memories"]][:3]
            assert sorted(top) == sorted(yesterday), (query, top)
            assert found["time_range"]["after"] == stamp(NOW.yesterday[0])
        # "three days ago" is that day give or take one
        found, _ = await c.ok("retrieve_memory", query="3日前に何をした", n_results=3)
        for m in found["memories"]:
            assert in_range(when[m["content"]], three_days_ago(NOW)), m

    run(home, body)


def test_a_time_filter_returns_its_range_when_no_word_matches(library):
    home, when = library
    spans = filter_spans(NOW)

    async def body(c: Client):
        found, _ = await c.ok("retrieve_memory", query="decisions", memory_type="decision", time="yesterday")
        assert sorted(m["content"] for m in found["memories"]) == sorted(
            c for c in when if c.startswith("We decided")), found
        for phrase, span in spans.items():
            expected = sorted((c for c, at in when.items() if in_range(at, span)), key=when.get, reverse=True)
            found, text = await c.ok("retrieve_memory", query="anything", time=phrase, n_results=50)
            got = [m["content"] for m in found["memories"]]
            assert got == expected, (phrase, got, expected)
            assert found["note"] and "newest" in found["note"] and text["note"] == found["note"], phrase
        # words that match rank first within the range; the range's newest fill the rest, unmarked
        found, _ = await c.ok("retrieve_memory", query="kitten shelter", time="this month", n_results=3)
        if in_range(when[KITTEN], (NOW.month_start, None)):
            assert found["memories"][0]["content"] == KITTEN and "note" not in found, found
        found, _ = await c.ok("retrieve_memory", query="kitten shelter", time=kitten_day(NOW)[0].strftime("%Y-%m-%d"))
        assert [m["content"] for m in found["memories"]] == [KITTEN] and "note" not in found, found

    run(home, body)


def test_chinese_and_japanese_time_phrases():
    now = datetime(2026, 11, 21, 5, 0, tzinfo=UTC)  # a Saturday
    expected = {
        ("今日", "今天"): ("2026-11-21T00:00:00Z", None),
        ("昨日", "昨天"): ("2026-11-20T00:00:00Z", "2026-11-21T00:00:00Z"),
        ("一昨日", "前天"): ("2026-11-19T00:00:00Z", "2026-11-20T00:00:00Z"),
        ("今週", "本周", "这周"): ("2026-11-16T00:00:00Z", None),
        ("先週", "上周", "上星期"): ("2026-11-09T00:00:00Z", "2026-11-16T00:00:00Z"),
        ("今月",): ("2026-11-01T00:00:00Z", None),
        ("先月", "上个月"): ("2026-10-01T00:00:00Z", "2026-11-01T00:00:00Z"),
        ("今年",): ("2026-01-01T00:00:00Z", None),
        ("去年", "昨年"): ("2025-01-01T00:00:00Z", "2026-01-01T00:00:00Z"),
        ("3日前", "三日前", "三天前", "３日前"): ("2026-11-17T00:00:00Z", "2026-11-20T00:00:00Z"),
        ("两天前",): ("2026-11-18T00:00:00Z", "2026-11-21T00:00:00Z"),
        ("二週間前", "2週間前"): ("2026-11-05T00:00:00Z", "2026-11-10T00:00:00Z"),
        ("十日前",): ("2026-11-10T00:00:00Z", "2026-11-13T00:00:00Z"),
    }
    for phrases, span in expected.items():
        for phrase in phrases:
            found = parse_time_phrase(phrase, now)
            assert found.iso() == span and not found.latest, phrase
    assert parse_time_phrase("一か月前", now).iso() == ("2026-10-18T00:00:00Z", "2026-10-27T00:00:00Z")
    assert parse_time_phrase("最新", now).latest and parse_time_phrase("最近", now).latest
    # inside a query, as a substring; the rest of the query is what words are searched for
    # (the particle tying the phrase to the rest goes with it: "のバグ" is no memory's word)
    rest, found = split_time_phrase("先週の会議で決めたこと", now)
    assert (rest, found.phrase) == ("会議で決めたこと", "先週")
    rest, found = split_time_phrase("上个月的旅行计划", now)
    assert (rest, found.phrase) == ("旅行计划", "上个月")
    assert split_time_phrase("先週のバグ", now)[0] == "バグ" and split_time_phrase("昨日の決定", now)[0] == "決定"
    assert split_time_phrase("一昨日の打ち合わせ", now)[1].phrase == "一昨日"
    assert split_time_phrase("日本周辺の地図", now)[1] is None, "日本周辺 is a place, not 本周 (this week)"
    assert split_time_phrase("東京の旅行計画", now)[1] is None
    rest, found = split_time_phrase("what did we work on last week", now)
    assert rest == "what did we work on" and not found.absolute
    assert parse_time_phrase("in October", now).absolute and parse_time_phrase("2026-11-11", now).absolute
    assert parse_time_phrase("the day before yesterday", now).iso() == ("2026-11-19T00:00:00Z", "2026-11-20T00:00:00Z")
    with pytest.raises(ValidationError, match="time:"):
        parse_time_phrase("明後日", now)
    # what only looks like a phrase is left to the words, and a query is never refused for it
    for query in ("2026年前半の計画", "10日前後に届く", "3000年前の遺跡", "5000 years ago"):
        assert split_time_phrase(query, now) == (query, None), query


def test_a_time_argument_names_months_and_weekdays_alone():
    now = datetime(2026, 11, 21, 5, 0, tzinfo=UTC)  # a Saturday
    november, october = ("2026-11-01T00:00:00Z", "2026-12-01T00:00:00Z"), ("2026-10-01T00:00:00Z", "2026-11-01T00:00:00Z")
    expected = {
        "November": november, "nov": november, "December": ("2025-12-01T00:00:00Z", "2026-01-01T00:00:00Z"),
        "2026-10": october, "Oct 2026": october, "October, 2026": october, "10月": october, "2026年10月": october,
        "十月": october, " 2026-10 ": october,
        "last Monday": ("2026-11-16T00:00:00Z", "2026-11-17T00:00:00Z"),
        "last Friday": ("2026-11-20T00:00:00Z", "2026-11-21T00:00:00Z"),
        "last Saturday": ("2026-11-14T00:00:00Z", "2026-11-15T00:00:00Z"),  # today is Saturday: a week ago
        "this Monday": ("2026-11-16T00:00:00Z", "2026-11-17T00:00:00Z"),
    }
    for phrase, span in expected.items():
        assert parse_time_phrase(phrase, now).iso() == span, phrase
    # alone only: in a query "may" is a verb and "2026-10" may be a version
    assert split_time_phrase("we may ship it", now) == ("we may ship it", None)
    assert split_time_phrase("release 2026-10 notes", now) == ("release 2026-10 notes", None)
    assert split_time_phrase("bugs last Monday", now)[1].iso() == expected["last Monday"]
    for bad, rule in (("", "must not be empty"), ("   ", "must not be empty"), ("2026-13", "names no month"),
                      ("13月", "names no month"), ("Smarch", "not a time phrase")):
        with pytest.raises(ValidationError, match=rule):
            parse_time_phrase(bad, now)


# What a tester tried on a small library: time words in the query when `time` is given too,
# Chinese and Japanese time words, filters that leave nothing to match, an empty range.
TESTER = [  # (content, days ago or None for last week's Friday, memory_type, tags)
    ("昨日のメモ: 証明書の更新手順を確認した", 1, "note", ()),
    ("決定: リリースは金曜日に延期する", 1, "decision", ("decision",)),
    ("決定: 認証には OAuth を使う", 1, "decision", ("decision",)),
    ("先週: デプロイ手順を更新した", None, "note", ()),
    ("バグ: ログイン画面が固まる", None, "note", ()),
    ("バグ: CSV の最終行が消える", None, "note", ()),
    ("会議室を予約した", None, "note", ()),
    ("Painted the garden fence green", 13, "note", ()),
    ("Read a paper about sparse attention", 14, "note", ()),
    ("Booked flights to Lisbon", 15, "note", ()),
    ("Bug: the login button ignores double clicks", 4, "bug", ()),
    ("Bug: export times out on large files", 22, "bug", ()),
    ("CSV export drops the last row", 2, "note", ()),
]


def rows_tried_by_the_tester(cal: Calendar) -> tuple[list[str], dict[str, datetime]]:
    lines, when = [], {}
    for i, (content, days_ago, memory_type, tags) in enumerate(TESTER):
        # No two at one time. Last week's on its Friday, 3 to 9 days ago: never in "two weeks ago"
        # (11 to 16 days ago), whatever the weekday.
        at = (cal.created(days_ago) - timedelta(minutes=2 + i) if days_ago is not None
              else cal.last_week[0] + timedelta(days=4, hours=10 + i))
        lines.append(memory_line(content, at, memory_type, tags))
        when[content] = at
    return lines, when


# Filled by "bugs two weeks ago" after the bugs (test_word_matches_outside_a_phrase_range_beat_...).
TWO_WEEKS = {"Painted the garden fence green", "Read a paper about sparse attention", "Booked flights to Lisbon"}


def empty_phrases(cal: Calendar) -> tuple[str, ...]:
    """`time` arguments naming a range that holds no memory of the tester's (the oldest is 22
    days old): a month name, in English and in Japanese, and last year unless it is January."""
    month = ("in March", "3月") if cal.today.month > 4 else ("in August", "8月")
    return (*month, *(("去年",) if cal.today.month > 1 else ()))


@pytest.fixture(scope="module")
def tester(tmp_path_factory) -> tuple[Path, dict[str, datetime]]:
    home = tmp_path_factory.mktemp("recall-tester") / "home"
    lines, when = rows_tried_by_the_tester(NOW)
    source = home.parent / "memories.jsonl"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "memloci", "import", "jsonl", str(source)], capture_output=True,
                          text=True, env=server_env(home, COLUMNS="200"), timeout=300)
    assert proc.returncode == 0, proc.stderr
    return home, when


def scores_in_range(found: dict) -> None:
    for m in found["memories"]:
        assert 0 <= m["similarity_score"] <= 1, m


def test_a_time_argument_wins_over_a_phrase_in_the_query(tester):
    home, when = tester
    decisions = sorted(c for c in when if c.startswith("決定"))

    async def body(c: Client):
        found, _ = await c.ok("retrieve_memory", query="decisions last week", time="yesterday", n_results=3)
        assert found["time_range"]["phrase"] == "yesterday", found["time_range"]
        assert found["time_range"]["after"] == stamp(NOW.yesterday[0]), found["time_range"]
        got = [m["content"] for m in found["memories"]]
        assert sorted(got[:2]) == decisions and "CSV export drops the last row" not in got, got
        assert all("last week" not in m["why"] for m in found["memories"]), found
        scores_in_range(found)

    run(home, body)


def test_chinese_and_japanese_time_words_are_not_searched_for_meaning(tester):
    home, when = tester
    last_week_bugs = sorted(c for c in when if c.startswith("バグ"))

    async def body(c: Client):
        found, _ = await c.ok("retrieve_memory", query="昨日の決定", n_results=3)
        got = [m["content"] for m in found["memories"]]
        assert sorted(got[:2]) == sorted(c for c in when if c.startswith("決定")), got
        found, _ = await c.ok("retrieve_memory", query="先週のバグ", n_results=3)
        got = [m["content"] for m in found["memories"]]
        assert sorted(got[:2]) == last_week_bugs, got
        scores_in_range(found)
        # only the phrase: the range, newest first
        found, _ = await c.ok("retrieve_memory", query="先週", n_results=10)
        got = [m["content"] for m in found["memories"]]
        expected = sorted((c for c, at in when.items() if in_range(at, NOW.last_week)), key=when.get, reverse=True)
        assert got == expected, got

    run(home, body)


def test_word_matches_outside_a_phrase_range_beat_its_unrelated_memories(tester):
    """"bugs two weeks ago" where that range holds no bug: the bugs of other days come first
    (a soft phrase ranks its range up, it does not hide better matches), then the range."""
    home, when = tester
    bugs = sorted(c for c in when if c.startswith("Bug:"))

    async def body(c: Client):
        found, _ = await c.ok("retrieve_memory", query="bugs two weeks ago", n_results=5)
        got = [m["content"] for m in found["memories"]]
        assert sorted(got[:2]) == bugs and set(got[2:]) == TWO_WEEKS, got
        assert "outside" in found["note"] and "two weeks ago" in found["note"], found["note"]
        scores_in_range(found)

    run(home, body)


def test_filters_are_never_emptied_by_words_and_empty_ones_say_so(tester):
    home, when = tester
    decisions = sorted((c for c in when if c.startswith("決定")), key=when.get, reverse=True)

    async def body(c: Client):
        for filters in ({"tags": ["decision"]}, {"memory_type": "decision"}, {"tags": ["DECISION"]}):
            found, _ = await c.ok("retrieve_memory", query="anything", **filters)
            assert sorted(m["content"] for m in found["memories"]) == sorted(decisions), (filters, found)
            assert "newest" in found["note"] and "decision" in found["note"].lower(), found["note"]
        for phrase in empty_phrases(NOW):
            found, text = await c.ok("retrieve_memory", query="anything", time=phrase)
            assert found["memories"] == [] and found["note"].startswith("No memories in"), found
            assert phrase in found["note"] and text["note"] == found["note"]
        # a time argument is text that names a time, never blank ("" is "not given", like null)
        error = await c.error("retrieve_memory", query="anything", time="  ")
        assert error["code"] == "VALIDATION_ERROR" and "time" in error["message"], error

    run(home, body)


def test_list_memories_takes_a_time_too(tester):
    home, when = tester

    async def body(c: Client):
        found, _ = await c.ok("list_memories", time="last week", page_size=50)
        expected = sorted((c for c, at in when.items() if in_range(at, NOW.last_week)), key=when.get, reverse=True)
        assert [m["content"] for m in found["memories"]] == expected and found["total"] == len(expected)
        found, _ = await c.ok("list_memories", time="yesterday", tags=["decision"])
        assert found["total"] == 2, found
        error = await c.error("list_memories", after="last week")
        assert "`time`" in error["hint"] and "list_memories" in error["hint"], error
        error = await c.error("list_memories", time="someday")
        assert error["code"] == "VALIDATION_ERROR" and error["message"].startswith("time:"), error

    run(home, body)


# ----- the fixtures on any day ----------------------------------------------------------------

def iso(span: tuple[datetime, datetime | None]) -> tuple[str, str | None]:
    return stamp(span[0]), None if span[1] is None else stamp(span[1])


def holding(when: dict[str, datetime], span: tuple[datetime, datetime | None]) -> set[str]:
    return {c for c, at in when.items() if in_range(at, span)}


def parsed(phrase: str, cal: Calendar) -> tuple[datetime, datetime | None]:
    found = parse_time_phrase(phrase, cal.now)
    assert found.after is not None, phrase
    return found.after, found.before


# Each weekday of a week inside a month and of one across a month's end (2026-11-30 is a
# Monday), a year's end, a leap day's month, and both ends of a day.
CLOCKS = ([datetime(2026, 11, 23 + i, 10, 0, tzinfo=UTC) for i in range(7)]
          + [datetime(2026, 11, 30, 12, 0, tzinfo=UTC) + timedelta(days=i) for i in range(7)]
          + [datetime(2026, 11, 30, 23, 59, 50, tzinfo=UTC), datetime(2026, 12, 1, 0, 0, 10, tzinfo=UTC),
             datetime(2026, 12, 31, 23, 59, 50, tzinfo=UTC), datetime(2027, 1, 1, 0, 0, 10, tzinfo=UTC),
             datetime(2028, 3, 1, 6, 0, tzinfo=UTC), datetime(2027, 5, 3, 9, 0, tzinfo=UTC)])


@pytest.mark.parametrize("now", CLOCKS, ids=[f"{c:%Y-%m-%d-%a-%H%M}" for c in CLOCKS])
def test_fixtures_hold_on_any_day(now):
    """The tests above run on the real clock; this builds their fixtures on other days and checks
    what each test takes for granted, the parser's ranges included (parse_time_phrase takes `now`)."""
    cal = Calendar(now)
    for _, when in (dataset(cal), rows_tried_by_the_tester(cal)):
        assert len(set(when.values())) == len(when), "two memories at one instant: their order is a coin toss"
        assert all(at <= cal.now for at in when.values()), "a memory from the future"
    _, when = dataset(cal)
    # test_time_phrases_in_a_query_bring_their_range_first
    for phrase in ("last week", "先週", "上周"):
        assert parsed(phrase, cal) == cal.last_week, phrase
    for phrase in ("yesterday", "昨日", "昨天"):
        assert parsed(phrase, cal) == cal.yesterday, phrase
    assert parsed("3日前", cal) == three_days_ago(cal)
    assert len(holding(when, cal.last_week)) >= 7 and len(holding(when, cal.yesterday)) == 3
    assert len(holding(when, three_days_ago(cal))) >= 3
    # test_a_time_filter_returns_its_range_when_no_word_matches
    for phrase, span in filter_spans(cal).items():
        assert iso(parsed(phrase, cal)) == iso(span), phrase
    assert holding(when, cal.yesterday) >= {c for c in when if c.startswith("We decided")}
    assert holding(when, kitten_day(cal)) == {KITTEN}, "the kitten's day holds only the kitten"
    assert parsed(kitten_day(cal)[0].strftime("%Y-%m-%d"), cal) == kitten_day(cal)
    # the tester's library
    _, when = rows_tried_by_the_tester(cal)
    assert holding(when, cal.yesterday) >= {c for c in when if c.startswith("決定")}
    assert "CSV export drops the last row" not in holding(when, cal.yesterday)
    assert holding(when, cal.last_week) >= {c for c in when if c.startswith("バグ")}
    two_weeks = holding(when, parsed("two weeks ago", cal))
    assert two_weeks == TWO_WEEKS, two_weeks
    for phrase in empty_phrases(cal):
        assert not holding(when, parsed(phrase, cal)), phrase
