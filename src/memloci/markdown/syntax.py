"""The Markdown and YAML pieces the entity document's modules share: lines, headings, fenced
code and code spans, wikilinks and the names they point at, and front-matter values read and
written as text. Pure functions over text."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from datetime import date, datetime, timedelta
from functools import lru_cache
from itertools import accumulate, groupby

import yaml

from memloci.core.errors import ValidationError

# Not str.splitlines(): it also breaks on \x0c, \u2028 and friends, which Markdown does not.
LINES = re.compile(r"[^\n]*\n|[^\n]+")
_HEADING = re.compile(r"(#{1,6})[ \t]+(.*)")
_FENCE = re.compile(r"( {0,3})(`{3,}|~{3,})(.*)")
_TICKS = re.compile(r"`+")
WIKILINK = re.compile(r"\[\[([^\[\]|#\n]*)(#[^\[\]|\n]*)?(\|[^\[\]\n]*)?\]\]")
YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when present: ~10x faster, same rules
UNFOLDED = float("inf")  # yaml.safe_dump width: never fold a scalar over two lines
# Words, single spaces between: plain in YAML unless a word YAML 1.1 reads as a bool or null.
_PLAIN_SCALAR = re.compile(r"[A-Za-z][A-Za-z0-9_-]*(?: [A-Za-z0-9_-]+)*\Z")
_YAML_WORDS = frozenset({"yes", "no", "true", "false", "on", "off", "null", "y", "n"})


def fenced_lines(contents: list[str]) -> list[bool]:
    """True for each line inside a fenced code block, fence lines included."""
    flags: list[bool] = []
    fence: tuple[str, int, int] | None = None  # (char, length, indent)
    for s in contents:
        if fence is not None:
            ch, n, indent = fence
            # A fence indented under a list item ends with the item: a less indented
            # non-blank line closes it, as CommonMark nests it.
            if not (indent and s.strip() and len(s) - len(s.lstrip(" ")) < indent):
                c = s.strip()
                if len(c) >= n and c == ch * len(c):
                    fence = None
                flags.append(True)
                continue
            fence = None
        m = _FENCE.match(s)
        if m and not (m.group(2)[0] == "`" and "`" in m.group(3)):
            fence = (m.group(2)[0], len(m.group(2)), len(m.group(1)))
        flags.append(fence is not None)
    return flags


def parse_heading(s: str) -> tuple[int, str] | None:
    """An ATX heading line as (level, title), or None: `## Title ##` -> (2, "Title")."""
    m = _HEADING.match(s)
    if not m:
        return None
    title = m.group(2).strip()
    bare = title.rstrip("#")
    if bare != title and (not bare or bare[-1] in " \t"):  # optional closing #'s
        title = bare.rstrip()
    return (len(m.group(1)), title) if title else None


def prose_spans(text: str) -> Iterator[tuple[int, int]]:
    """(start, end) of the stretches of text outside fenced code and inline code spans."""
    lines = LINES.findall(text)
    code = fenced_lines([line.rstrip("\r\n") for line in lines])
    offsets = list(accumulate(map(len, lines), initial=0))
    # Paragraph by paragraph: a code span never crosses a blank line or a fence.
    for prose, group in groupby(range(len(lines)), key=lambda i: not code[i] and bool(lines[i].strip())):
        if not prose:
            continue
        rows = list(group)
        start, end = offsets[rows[0]], offsets[rows[-1] + 1]
        runs = list(_TICKS.finditer(text, start, end))
        # A run of n backticks opens a code span that the next run of exactly n closes;
        # finding those partners right to left keeps the pairing linear.
        partner: list[int | None] = [None] * len(runs)
        later: dict[int, int] = {}
        for r in range(len(runs) - 1, -1, -1):
            partner[r] = later.get(len(runs[r].group()))
            later[len(runs[r].group())] = r
        cur, r = start, 0
        while r < len(runs):
            j = partner[r]
            if j is None:  # an unmatched run is literal text
                r += 1
                continue
            yield cur, runs[r].start()
            cur, r = runs[j].end(), j + 1
        yield cur, end


def link_target(raw: str) -> tuple[int, str]:
    """(offset in raw, target) of a link's target part; tables escape the pipe as `\\|`."""
    t = raw.strip()
    if t.endswith("\\"):
        t = t[:-1].rstrip()
    return len(raw) - len(raw.lstrip()), t


def fold_name(name: str) -> str:
    """Names compare case-insensitively and in NFC (`résumé` typed or decomposed is one name)."""
    return unicodedata.normalize("NFC", unicodedata.normalize("NFC", name).casefold())


def note_name(target: str) -> str:
    """`[[note.md]]` and `[[folder/note]]` name the note `note`, as in Obsidian."""
    t = target[:-3] if target.casefold().endswith(".md") else target
    return t.rsplit("/", 1)[-1].strip() if "/" in t and not t.endswith("/") else t


def value_text(value: object, where: str) -> str:
    """A front-matter value as text, as YAML wrote it (booleans, dates, numbers); `where` names
    the value in the error for anything else."""
    if isinstance(value, bool):  # YAML 1.1 reads `yes`/`on` as booleans
        return "true" if value else "false"
    if isinstance(value, date):  # YAML reads timestamps to datetime; keep them ISO, UTC as Z
        utc = isinstance(value, datetime) and value.utcoffset() == timedelta(0)
        return value.isoformat().removesuffix("+00:00") + "Z" if utc else value.isoformat()
    if isinstance(value, (str, int, float)):
        return str(value)
    raise ValidationError(f"{where}: expected a text value, got {type(value).__name__}")


def value_texts(value: object, key: str) -> list[str]:
    """A front-matter value as a list of texts: a list item by item, one value as a list of one."""
    if isinstance(value, list):
        return [value_text(v, f"{key}[{i}]") for i, v in enumerate(value) if v is not None]
    return [] if value is None else [value_text(value, key)]


@lru_cache(maxsize=4096)  # types, relation types and dates repeat across a batch of files
def yaml_scalar(value: str) -> str:
    """A YAML scalar, quoted only when YAML needs it; safe inside flow lists and maps too. One
    quoting rule for rendered (document.py) and edited (frontmatter.py) front matter."""
    if _PLAIN_SCALAR.match(value) and value.casefold() not in _YAML_WORDS:
        return value  # what safe_dump gives for these (tested), at a hundredth of its cost
    out = yaml.safe_dump([value], default_flow_style=True, allow_unicode=True, width=UNFOLDED).strip()
    if "\n" in out:  # a multi-line string: escape its breaks rather than fold them
        out = yaml.safe_dump([value], default_flow_style=True, default_style='"', allow_unicode=True,
                             width=UNFOLDED).strip()
    return out[1:-1]
