"""A token estimate for mixed-language text, and cuts that keep sentences and characters whole.

No tokenizer is loaded: a model's tokens are estimated from the characters. A CJK character
(Han, kana, Hangul, their punctuation and full-width forms) is about one token, as is an emoji
or any other character outside the Basic Multilingual Plane; the rest (Latin and other
alphabets, digits, spaces, JSON punctuation) about four characters a token. Sizes add up
(`TextSize`), so a reply's estimate can be kept as the sum of its parts and its parts changed
one at a time. Characters that extend the one before (combining marks, joiners, variation
selectors, emoji modifiers, the second of a surrogate pair or of a flag's two letters) count
nothing of their own and are never cut from it.
"""

from __future__ import annotations

import math
import re
import unicodedata
from dataclasses import dataclass

ELLIPSIS = "…"  # marks where text was cut
NARROW_PER_TOKEN = 4

# Ranges whose characters are about one token each (CJK scripts, their punctuation, full width).
_WIDE = ((0x1100, 0x11FF), (0x2E80, 0x2FDF), (0x2FF0, 0x303F), (0x3040, 0x33FF), (0x3400, 0x4DBF),
         (0x4E00, 0x9FFF), (0xA960, 0xA97F), (0xAC00, 0xD7AF), (0xD7B0, 0xD7FF), (0xF900, 0xFAFF),
         (0xFE30, 0xFE4F), (0xFF00, 0xFFEF), (0x2600, 0x27BF))  # (the last: symbols and dingbats, emoji-like)
_ZWJ = "\u200d"


@dataclass(frozen=True, slots=True)
class TextSize:
    """Characters by kind: `wide` (about a token each) and `narrow` (about four a token)."""

    wide: int = 0
    narrow: int = 0

    def __add__(self, other: TextSize) -> TextSize:
        return TextSize(self.wide + other.wide, self.narrow + other.narrow)

    def __sub__(self, other: TextSize) -> TextSize:
        return TextSize(self.wide - other.wide, self.narrow - other.narrow)

    @property
    def tokens(self) -> int:
        return self.wide + math.ceil(max(self.narrow, 0) / NARROW_PER_TOKEN)


def extends(ch: str) -> bool:
    """Whether `ch` belongs to the character before it (and must not be cut from it)."""
    code = ord(ch)
    return (unicodedata.category(ch) in ("Mn", "Mc", "Me") or ch == _ZWJ or 0xFE00 <= code <= 0xFE0F
            or 0xE0100 <= code <= 0xE01EF or 0x1F3FB <= code <= 0x1F3FF or 0xE0020 <= code <= 0xE007F
            or 0xDC00 <= code <= 0xDFFF)


def _wide(ch: str) -> bool:
    code = ord(ch)
    return code > 0xFFFF or any(low <= code <= high for low, high in _WIDE)


_ASCII = re.compile(r"[\x00-\x7f]+")


def size_of(text: str) -> TextSize:
    if text.isascii():
        return TextSize(0, len(text))
    rest = _ASCII.sub("", text)
    wide, narrow = 0, len(text) - len(rest)
    for ch in rest:
        if extends(ch):
            continue
        elif _wide(ch):
            wide += 1
        else:
            narrow += 1
    return TextSize(wide, narrow)


def estimate_tokens(text: str) -> int:
    """About how many tokens `text` costs a model: CJK characters and emoji one each, other
    text four characters a token."""
    return size_of(text).tokens


def _regional(ch: str) -> bool:
    return 0x1F1E6 <= ord(ch) <= 0x1F1FF


def boundary(text: str, at: int) -> int:
    """The largest index <= `at` where `text` may be cut: not before a character that extends the
    one before it, not after a joiner or a high surrogate, not between a flag's two letters."""
    at = max(0, min(at, len(text)))
    while 0 < at < len(text):
        before, here = text[at - 1], text[at]
        if extends(here) or before == _ZWJ or 0xD800 <= ord(before) <= 0xDBFF:
            at -= 1
            continue
        if _regional(before) and _regional(here):
            run = 0  # regional indicators pair up from the start of their run
            while at - 1 - run >= 0 and _regional(text[at - 1 - run]):
                run += 1
            if run % 2:
                at -= 1
                continue
        break
    return at


def clipped(text: str, chars: int) -> str:
    """`text` cut to about `chars` characters at a safe boundary, "…" added where it was cut."""
    if chars >= len(text):
        return text
    return text[:boundary(text, chars)].rstrip() + ELLIPSIS


# A sentence ends at . ! ? … (with closing quotes or brackets) before white space, at 。！？ ,
# or at a line break; the white space after it stays with it, so the pieces join to the text.
_SENTENCE_END = re.compile(r"[.!?…]+[\"'’”)\]」』]*\s+|[。！？]+[」』”’)）]*\s*|\n+")


def sentences(text: str) -> list[str]:
    """`text` in sentences, each with the white space that follows it: `"".join(sentences(t)) == t`."""
    pieces, start = [], 0
    for m in _SENTENCE_END.finditer(text):
        if m.end() > start and m.end() < len(text):
            pieces.append(text[start:m.end()])
            start = m.end()
    if start < len(text):
        pieces.append(text[start:])
    return pieces


def first_line(text: str, max_chars: int = 120) -> str:
    """The first line with words in it, at most `max_chars` characters with the "…" that marks
    what was left out (the rest of the line or further lines)."""
    lines = [line.strip() for line in text.splitlines()]
    at = next((i for i, line in enumerate(lines) if line), None)
    if at is None:
        return ""
    line = lines[at]
    more = any(lines[at + 1:])
    if len(line) > max_chars or (more and len(line) + 1 > max_chars):
        return line[:boundary(line, max_chars - 1)].rstrip() + ELLIPSIS
    return line + ELLIPSIS if more else line
