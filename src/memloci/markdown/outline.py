"""A document's outline: its lines, where its front matter ends, which lines are fenced code, its
headings with where each section ends, and the list items of a stretch of lines (the
`## Observations` list among them)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from memloci.markdown.syntax import LINES, fenced_lines, parse_heading

_THEMATIC_BREAK = re.compile(r" {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")


@dataclass
class Outline:
    """A document split into lines, with what each line is."""

    lines: list[str]
    start: int  # first body line; > 0 means there is front matter
    code: list[bool]
    headings: list[tuple[int, int, str]]  # (line index, level, title)
    ends: list[int]  # per heading: line where its section ends


def outline(text: str, front_matter: bool = True) -> Outline:
    """The outline of `text`; with front_matter=False (a body) a leading `---` is not front matter."""
    lines = LINES.findall(text)
    start = 0
    if front_matter and lines and lines[0].rstrip() == "---":
        # An unclosed `---` is a thematic break, not front matter.
        start = next((i + 1 for i in range(1, len(lines)) if lines[i].rstrip() == "---"), 0)
    contents = [line.rstrip("\r\n") for line in lines]
    code = [False] * start + fenced_lines(contents[start:])
    headings = []
    for i in range(start, len(lines)):
        if not code[i] and contents[i].startswith("#") and (h := parse_heading(contents[i])):
            headings.append((i, h[0], h[1]))
    # A section ends at the next heading of the same or higher level; one pass with a stack
    # keeps a document with thousands of headings linear.
    ends, open_ = [len(lines)] * len(headings), list[int]()
    for hi, (line, level, _) in enumerate(headings):
        while open_ and headings[open_[-1]][1] >= level:
            ends[open_.pop()] = line
        open_.append(hi)
    return Outline(lines, start, code, headings, ends)


def normalize_heading(heading: str) -> str:
    """`"## My  Title "` -> `"my title"`: drop the ATX #'s, collapse whitespace, casefold."""
    words = heading.split()
    if words and words[0] == "#" * len(words[0]):
        words = words[1:]
    if words and words[-1] == "#" * len(words[-1]):
        words = words[:-1]
    return " ".join(words).casefold()


def list_items(doc: Outline, start: int, end: int) -> list[tuple[int, int, str]]:
    """List items in lines [start, end) as (first line, end line, text)."""
    items, i = [], start
    while i < end:
        s = doc.lines[i].rstrip("\r\n")
        if doc.code[i] or not (s[:2] in ("- ", "* ") or s in ("-", "*")) or _THEMATIC_BREAK.match(s):
            i += 1
            continue
        parts, i = [s[2:]], i + 1
        # Continuation lines are indented two spaces (as render writes them); dedent by
        # exactly two so deeper indentation inside an observation survives a round trip.
        while i < end and doc.lines[i].startswith("  "):
            parts.append(doc.lines[i].rstrip("\r\n")[2:])
            i += 1
        items.append((i - len(parts), i, "\n".join(parts)))
    return items


def observations_region(doc: Outline) -> tuple[int, int] | None:
    """(heading line, end line) of the own text of the first `## Observations` section."""
    for hi, (line, level, title) in enumerate(doc.headings):
        if level >= 2 and normalize_heading(title) == "observations":
            return line, doc.headings[hi + 1][0] if hi + 1 < len(doc.headings) else len(doc.lines)
    return None
