"""What two statements about one subject say differently: a number, a name, a negation or a time.

Meaning alone cannot tell a restatement from a correction: to the default model "the review is
on Friday at 3 pm" and "... at 10 am" are closer (cosine 0.97) than most true paraphrases are to
each other (median 0.91; bench data `near_duplicates.json`). So a pair close in meaning is judged
by the words that differ: a changed number, name, negation or time makes it a contradiction
(newer supersedes older, offered in a preview), and only a pair with none of those is a near
duplicate. Pure functions over text; deterministic.

- numbers: digits ("4.2", "1,450", "9:30", "4th", "Q3" gives 3), English number and ordinal words
  up to twenty ("twice" is 2), Chinese/Japanese numerals up to 99 (三, 十二: `timephrases.cjk_number`);
- names: capitalised words not among common sentence openers, and words with a capital or digit
  inside ("A100", "iOS"); in Chinese and Japanese text, katakana runs and Han runs the other text
  lacks are compared as names;
- negations: not, no, never, n't, none, nothing, nobody, neither, nor, without, no longer;
  不, 没, 没有, 未, 无, 非, ない, ません, ず;
- times: weekday and month names, and words such as yesterday, tomorrow, last, next, daily,
  weekly, hour, day, week, month, quarter, year, am, pm, morning, evening.
"""

from __future__ import annotations

import difflib
import functools
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass

from memloci.search.timephrases import cjk_number

_TOKEN = re.compile(r"\d+(?:[.,:]\d+)*(?:st|nd|rd|th)?|[^\W\d_]+(?:[-'][^\W\d_]+)*|\w+", re.UNICODE | re.IGNORECASE)
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_KATAKANA_RUN = re.compile(r"[\u30a0-\u30ffー]{2,}")
_HAN_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
_CJK_NUMBER = re.compile(r"[一二两兩三四五六七八九十]+")
_WORDS_NUMBER: dict[str, float] = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty".split())}
_WORDS_NUMBER |= {w: i + 1 for i, w in enumerate(
    "first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth".split())}
_WORDS_NUMBER |= {w: 10 * (i + 2) for i, w in enumerate("twenty thirty forty fifty sixty seventy eighty ninety".split())}
_WORDS_NUMBER |= {"once": 1, "twice": 2, "thrice": 3, "single": 1, "pair": 2, "couple": 2, "dozen": 12,
                  "half": 0.5}
NEGATIONS_EN = frozenset({"not", "no", "never", "none", "nothing", "nobody", "neither", "nor", "without",
                          "cannot", "longer", "stopped", "anymore"})
NEGATIONS_CJK = ("没有", "不", "没", "未", "无", "無", "非", "ない", "ません", "なかった", "ず")
_TIME_WORDS = frozenset(
    "monday tuesday wednesday thursday friday saturday sunday mondays tuesdays wednesdays thursdays fridays "
    "saturdays sundays weekday weekdays weekend january february march april june july august september "
    "october november december yesterday today tomorrow tonight last next ago daily weekly monthly yearly "
    "quarterly hourly nightly annually second seconds minute minutes hour hours day days week weeks month months "
    "quarter quarters year years am pm morning afternoon evening night noon midnight".split())
# Capitalised for the sentence's sake, not a name.
_OPENERS = frozenset(
    "the a an this that these those there it its our we us my i you your he she they his her their what when "
    "where which who why how every each all some any on in at for to of from by with until after before since "
    "during remember note keep ask please if as and but or so because then also only just".split())
_TIME_CJK = ("周一", "周二", "周三", "周四", "周五", "周六", "周日", "星期", "月曜", "火曜", "水曜", "木曜", "金曜",
             "土曜", "日曜", "昨天", "今天", "明天", "上周", "下周", "去年", "明年", "先月", "来月", "今週", "先週",
             "来週", "昨日", "明日", "上午", "下午", "午前", "午後", "早上", "晚上")


HAN_ALIGNED = 0.75  # a character alignment at least this close is one sentence with a word swapped
_TIME_SAME = {"am": "am", "morning": "am", "pm": "pm", "afternoon": "pm", "evening": "pm", "daily": "day",
              "weekly": "week", "monthly": "month", "quarterly": "quarter", "nightly": "night",
              "annually": "year", "yearly": "year", "hourly": "hour"}


@functools.lru_cache(maxsize=65536)  # asked of every word of both texts at every near-duplicate check
def stem(word: str) -> str:
    """A crude English stem, enough to see "walked" in "walk" and "Mondays" in "Monday"."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"  # entries: entry
    for suffix in ("ment", "ing", "ed", "ly", "es", "s"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            word = word[: -len(suffix)]
            break
    return word[:-1] if len(word) > 3 and word.endswith("e") else word  # expire, expires, expired: expir


@dataclass(frozen=True, slots=True)
class Change:
    """One kind of difference between an older and a newer statement."""

    kind: str  # number | name | negation | time
    old: tuple[str, ...]  # what only the older text says
    new: tuple[str, ...]  # what only the newer text says

    def describe(self) -> str:
        """"number 3 -> 5", "negation + not", "name Anna -> Maria"."""
        if self.old and self.new:
            return f"{self.kind} {', '.join(self.old)} -> {', '.join(self.new)}"
        if self.new:
            return f"{self.kind} + {', '.join(self.new)}"
        return f"{self.kind} - {', '.join(self.old)}"


def number_value(token: str) -> str | None:
    """The number a word or numeral says, written one way ("4th", "four", "fourth" -> "4";
    "9:30" stays "9:30", "3:00" is "3"); None for a word that is not one."""
    if token[0].isdigit():
        core = re.sub(r"(st|nd|rd|th)$", "", token, flags=re.IGNORECASE).replace(",", "")
        if ":" in core:  # 9:30 is a time of day, kept as written (3:00 and 3 are the same hour)
            hours, _, minutes = core.partition(":")
            return hours.lstrip("0") or "0" if minutes.strip("0") == "" else f"{hours.lstrip('0') or '0'}:{minutes}"
        try:
            value = float(core)
        except ValueError:
            return core
        return f"{value:g}"
    parts = token.lower().split("-")  # sixty-four
    if all(p in _WORDS_NUMBER for p in parts):
        return f"{sum(_WORDS_NUMBER[p] for p in parts):g}"
    return None


@dataclass(frozen=True, slots=True)
class Facts:
    """The checkable parts of one statement."""

    numbers: Counter[str]
    names: frozenset[str]  # casefolded
    negations: int
    times: frozenset[str]
    words: frozenset[str]  # every word, casefolded (a name the other text has in lower case is no new name)
    shown: dict[str, str]  # casefolded name -> as written


@functools.lru_cache(maxsize=1 << 14)  # a memory meets each of its neighbours: read it once
def facts_of(text: str) -> Facts:
    """The numbers, names, negations and times a statement holds (see the module docstring)."""
    text = unicodedata.normalize("NFKC", text)
    numbers: Counter[str] = Counter()
    names: set[str] = set()
    shown: dict[str, str] = {}
    times: set[str] = set()
    words: set[str] = set()
    negations = 0
    latin = _CJK.sub(" ", text)
    tokens = _TOKEN.findall(latin)
    letters = [c for c in latin if c.isalpha()]
    shouting = len(letters) > 8 and sum(c.isupper() for c in letters) > 0.6 * len(letters)
    for position, token in enumerate(tokens):
        token = re.sub(r"'s$", "", token, flags=re.IGNORECASE)  # Sara's is Sara
        folded = token.casefold()
        words.add(folded)
        for part in re.split(r"[-']", folded):
            words.add(part)
        # "per second", "5 seconds": a unit of time; "the second floor": 2
        unit = folded in ("second", "seconds") and position > 0 and (
            tokens[position - 1].casefold() in ("per", "a", "every", "each") or tokens[position - 1][0].isdigit())
        number = None if unit else number_value(token)
        if number is not None:
            numbers[number] += 1
        elif any(c.isdigit() for c in token):  # Q3, A100, sunflower42: the digits count as a number
            numbers.update(f"{float(d):g}" for d in re.findall(r"\d+", token))
        if folded in NEGATIONS_EN or folded.endswith("n't"):
            negations += 1
        if number is None and (folded in _TIME_WORDS or (token == "May" and position > 0)):  # "may" alone is a verb
            times.add(_TIME_SAME.get(folded) or (folded[:-1] if folded[:-1] in _TIME_WORDS else folded))
            continue
        if shouting:  # every word in capitals: a capital says nothing about a name
            continue
        if number is None and token[:1].isupper() and folded not in _OPENERS and folded not in NEGATIONS_EN:
            names.add(folded)
            shown.setdefault(folded, token)
        elif any(c.isupper() for c in token[1:]) or (any(c.isdigit() for c in token) and not token[0].isdigit()):
            names.add(folded)  # iOS, A100, sunflower42
            shown.setdefault(folded, token)
    for run in _CJK_NUMBER.findall(text):
        try:
            numbers[f"{cjk_number(run):g}"] += 1
        except ValueError:  # not a numeral memloci reads (above 99): left out
            pass
    for marker in NEGATIONS_CJK:
        negations += text.count(marker)
    if "没有" in text:  # 没有 holds 没: one negation, not two
        negations -= text.count("没有")
    for marker in _TIME_CJK:
        if marker in text:
            times.add(marker)
    for run in _KATAKANA_RUN.findall(text):
        names.add(run)
        shown.setdefault(run, run)
    return Facts(numbers, frozenset(names), negations, frozenset(times), frozenset(words), shown)


def _cjk_pieces_missing(run: str, other: str) -> bool:
    """Whether a CJK run says something the other text lacks: none of its two-character pieces
    occurs there (a reordered sentence keeps its pieces; a new name brings new ones)."""
    if len(run) < 2:
        return run not in other
    return not any(run[i:i + 2] in other for i in range(len(run) - 1))


def changes(older: str, newer: str) -> tuple[Change, ...]:
    """The numbers, names, negations and times that differ between two statements, in that order;
    empty when they agree on all four (what a near duplicate must do)."""
    a, b = facts_of(older), facts_of(newer)
    found: list[Change] = []
    if a.numbers != b.numbers:
        only_a, only_b = a.numbers - b.numbers, b.numbers - a.numbers
        if only_a or only_b:
            found.append(Change("number", tuple(sorted(only_a)), tuple(sorted(only_b))))
    old_names = _names_missing(a, b, unicodedata.normalize("NFKC", newer))
    new_names = _names_missing(b, a, unicodedata.normalize("NFKC", older))
    cjk_old, cjk_new = _han_replaced(unicodedata.normalize("NFKC", older), unicodedata.normalize("NFKC", newer))
    old_names, new_names = old_names + cjk_old, new_names + cjk_new
    if old_names or new_names:
        found.append(Change("name", old_names, new_names))
    if a.negations != b.negations:
        found.append(Change("negation", ("not",) * max(0, a.negations - b.negations),
                            ("not",) * max(0, b.negations - a.negations)))
    if a.times != b.times:
        found.append(Change("time", tuple(sorted(a.times - b.times)), tuple(sorted(b.times - a.times))))
    return tuple(found)


def _han_replaced(older: str, newer: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Han words one text puts where the other has different ones (张伟 -> 李娜, 东京 -> 大阪): the
    replaced spans of a character alignment, two characters or more on one side, neither found
    anywhere in the other text (a reordered sentence keeps its words, only moved)."""
    a, b = "".join(_HAN_RUN.findall(older)), "".join(_HAN_RUN.findall(newer))
    if not a or not b:
        return (), ()
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    if matcher.ratio() < HAN_ALIGNED:  # reworded: its spans are not words put in another's place
        return (), ()
    old: list[str] = []
    new: list[str] = []
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op != "replace" or max(i2 - i1, j2 - j1) < 2:
            continue
        gone, came = a[i1:i2], b[j1:j2]
        if gone not in newer and came not in older:
            old.append(gone)
            new.append(came)
    return tuple(old), tuple(new)


def _names_missing(mine: Facts, theirs: Facts, their_text: str) -> tuple[str, ...]:
    out = []
    stems: set[str] | None = None  # the stems of their words, once
    for name in sorted(mine.names):
        if _CJK.match(name):
            if _cjk_pieces_missing(name, their_text):
                out.append(mine.shown[name])
        elif name not in theirs.words:
            stems = stems if stems is not None else {stem(w) for w in theirs.words}
            if stem(name) not in stems:
                out.append(mine.shown[name])
    return tuple(out)
