"""Links in front-matter values renamed in place, each in its value's own quoting.

`related: "[[Bob \\"The Builder\\"]]"` holds the link `[[Bob "The Builder"]]`: the backslashes
belong to YAML, not to the name, so the link cannot be found, nor rewritten, in the raw text.
A rename reads each value scalar as YAML does (PyYAML's parser gives its text, its style and
where it sits in the front matter), finds the links to the old name in that text, and writes
the new name over the bytes of the old one in the same style, escaped as the style needs
(`\\"` and `\\\\` in double quotes, `''` in single quotes). Nothing else moves.

The result is read back: when it does not parse to the same values with only those links
renamed (a plain value cannot hold `: `, say), the rename is refused, naming the key, and the
caller writes nothing.
"""

from __future__ import annotations

from typing import Any

import yaml

from memloci.core.errors import ValidationError
from memloci.markdown.document import renamed_spans, rewrite_wikilinks

# YAML double-quoted escapes (YAML 1.1 as PyYAML reads them) -> the character each means
_ESCAPES = {"0": "\0", "a": "\x07", "b": "\x08", "t": "\t", "\t": "\t", "n": "\n", "v": "\x0b",
            "f": "\x0c", "r": "\r", "e": "\x1b", " ": " ", '"': '"', "/": "/", "\\": "\\",
            "N": "\x85", "_": "\xa0", "L": "\u2028", "P": "\u2029"}
_HEX = {"x": 2, "u": 4, "U": 8}


def refused(key: str, old: str, new: str, note: str | None = None) -> ValidationError:
    """The one refusal of a rename a front-matter value cannot hold, naming the key and, where
    known, the note that holds it."""
    where = f"in '{note}'; " if note else ""
    return ValidationError(
        f"{key}: the link [[{old}]] in this front-matter value cannot be rewritten as [[{new}]] "
        f"without changing what the value says ({where}nothing was changed)",
        hint=f"Edit the '{key}:' value{f' of {note!r}' if note else ''} by hand, or choose a name "
             "the value's quoting can hold.")


def _positions(raw: str, style: str | None) -> tuple[str, list[int]] | None:
    """The text a flow scalar's source `raw` means, and for each of its characters (and its
    end) the offset in `raw` it comes from; None for block scalars (`|`, `>`), which the
    caller rewrites as raw text. Folding as YAML does it: a line break between text is a
    space, n breaks are n-1 newlines, spaces around breaks go."""
    if style in ("|", ">"):
        return None
    quoted = style in ("'", '"')
    lo, hi = (1, len(raw) - 1) if quoted else (0, len(raw))
    out: list[str] = []
    pos: list[int] = []
    i = lo
    while i < hi:
        c = raw[i]
        if c in " \t":
            j = i
            while j < hi and raw[j] in " \t":
                j += 1
            if j < hi and raw[j] == "\n":  # trailing spaces of a line are not text
                i = j
                continue
        if c == "\n":
            j, breaks = i, 0
            while j < hi and raw[j] in " \t\n":
                breaks += raw[j] == "\n"
                j += 1
            for ch in " " if breaks == 1 else "\n" * (breaks - 1):
                out.append(ch)
                pos.append(i)
            i = j
            continue
        if style == "'" and c == "'" and raw[i + 1:i + 2] == "'":
            out.append("'")
            pos.append(i)
            i += 2
            continue
        if style == '"' and c == "\\":
            e = raw[i + 1:i + 2]
            if e == "\n":  # an escaped line break: joins the lines, nothing is text
                i += 2
                while i < hi and raw[i] in " \t":
                    i += 1
                continue
            if e in _HEX:
                digits = raw[i + 2:i + 2 + _HEX[e]]
                try:
                    out.append(chr(int(digits, 16)))
                except ValueError:
                    return None
                pos.append(i)
                i += 2 + _HEX[e]
                continue
            if e not in _ESCAPES:
                return None
            out.append(_ESCAPES[e])
            pos.append(i)
            i += 2
            continue
        out.append(c)
        pos.append(i)
        i += 1
    pos.append(hi)
    return "".join(out), pos


def _written(name: str, style: str | None) -> str:
    """`name` as a part of a scalar of this style."""
    if style == '"':
        return name.replace("\\", "\\\\").replace('"', '\\"')
    if style == "'":
        return name.replace("'", "''")
    return name  # plain and block scalars: as it is (the read-back refuses what they cannot hold)


def _events(text: str) -> list[yaml.Event]:
    # The pure-Python parser: its marks count characters of `text` (libyaml's count bytes).
    return list(yaml.parse(text, Loader=yaml.SafeLoader))


def _shape(events: list[yaml.Event], values: dict[int, str]) -> list[tuple[Any, ...]]:
    """What the events say, with the scalars at these indexes taking these values."""
    out: list[tuple[Any, ...]] = []
    for n, ev in enumerate(events):
        if isinstance(ev, yaml.ScalarEvent):
            out.append(("scalar", ev.anchor, ev.tag, ev.implicit, values.get(n, ev.value)))
        elif isinstance(ev, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            out.append((type(ev).__name__, ev.anchor, ev.tag))
        elif isinstance(ev, yaml.AliasEvent):
            out.append(("alias", ev.anchor))
        else:
            out.append((type(ev).__name__,))
    return out


def rename_value_links(yaml_text: str, old: str, new: str, note: str | None = None) -> str:
    """`yaml_text` (front matter, or one key's block of it) with every link to `old` in its
    values pointed at `new`, in each value's quoting. Raises ValidationError naming the key
    (and `note`, the document it is in) when a value cannot hold the new name."""
    if "[[" not in yaml_text:
        return yaml_text
    try:
        events = _events(yaml_text)
    except yaml.YAMLError:
        # Front matter that is no YAML holds no values to read links from; its text is what
        # a person wrote, renamed as text (and what parses it will say so).
        return rewrite_wikilinks(yaml_text, old, new)
    edits: dict[int, list[tuple[int, int, str]]] = {}  # event index -> (start, end, new text) in yaml_text
    expected: dict[int, str] = {}  # event index -> the value it must read back as
    where: dict[int, str] = {}  # event index -> the top-level key it sits under
    stack: list[list[Any]] = []  # open collections: [is a mapping, children so far]
    key = ""
    for n, ev in enumerate(events):
        if isinstance(ev, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            stack.pop()
            continue
        if not isinstance(ev, (yaml.ScalarEvent, yaml.MappingStartEvent, yaml.SequenceStartEvent, yaml.AliasEvent)):
            continue
        is_key = bool(stack) and stack[-1][0] and stack[-1][1] % 2 == 0
        if stack:
            stack[-1][1] += 1
        if isinstance(ev, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            stack.append([isinstance(ev, yaml.MappingStartEvent), 0])
            continue
        if not isinstance(ev, yaml.ScalarEvent):
            continue
        if is_key:
            if len(stack) == 1:
                key = ev.value
            continue
        if "[[" not in ev.value or not (spans := renamed_spans(ev.value, old, new)):
            continue
        expected[n], where[n] = rewrite_wikilinks(ev.value, old, new), key
        assert ev.start_mark is not None and ev.end_mark is not None  # the parser marks every event
        start, end = ev.start_mark.index, ev.end_mark.index
        raw = yaml_text[start:end]
        mapped = _positions(raw, ev.style)
        if mapped is None or mapped[0] != ev.value:  # a layout not followed: rename its text as text
            edits[n] = [(start, end, rewrite_wikilinks(raw, old, new))]
            continue
        pos = mapped[1]
        edits[n] = [(start + pos[a], start + pos[b], _written(new.strip(), ev.style)) for a, b in spans]
    if not edits:
        return yaml_text
    out = _applied(yaml_text, [e for group in edits.values() for e in group])
    # Read back: the same YAML, with only the renamed values changed, or nothing is written.
    if not _reads_as(out, events, expected):
        # the key to name: the first value that cannot take the new name on its own
        bad = next((n for n in edits if not _reads_as(_applied(yaml_text, edits[n]), events, {n: expected[n]})),
                   min(edits))
        raise refused(where[bad], old, new, note)
    return out


def _applied(text: str, edits: list[tuple[int, int, str]]) -> str:
    for start, end, new in sorted(edits, reverse=True):
        text = text[:start] + new + text[end:]
    return text


def _reads_as(text: str, events: list[yaml.Event], expected: dict[int, str]) -> bool:
    try:
        return _shape(_events(text), {}) == _shape(events, expected)
    except yaml.YAMLError:
        return False
