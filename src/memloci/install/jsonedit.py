"""Edit a person's JSON (or JSONC) config file by splicing text, never by re-serialising it.

A client's config file was written by a person or by the client itself; everything outside the
one member or array element we add must keep its bytes: key order, indentation, comments and
trailing commas (VS Code and Gemini read JSONC). So the file is parsed by a small tolerant
reader that remembers where every value starts and ends, and a change is a list of `Splice`s
(insert or replace a span). Removal is written as the exact inverse of insertion, so
install-then-uninstall gives back the original bytes.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any


class JsonSyntaxError(ValueError):
    """The file does not parse; line and column are 1-based, as editors show them."""

    def __init__(self, message: str, text: str, pos: int):
        self.line = text.count("\n", 0, pos) + 1
        self.column = pos - (text.rfind("\n", 0, pos) + 1) + 1
        super().__init__(f"line {self.line}, column {self.column}: {message}")


@dataclass
class Node:
    kind: str  # object, array, string, number, true, false, null
    start: int
    end: int  # one past the last character
    children: list[Child] = field(default_factory=list)
    py: Any = None  # the parsed value of a scalar


@dataclass
class Child:
    """A member of an object (key set) or an element of an array (key None)."""

    key: str | None
    start: int  # where the key (or the element) begins
    value: Node
    comma: int | None = None  # position of the comma after it, if any


@dataclass(frozen=True)
class Splice:
    pos: int
    old: str
    new: str


def apply(text: str, splices: list[Splice]) -> str:
    """Apply non-overlapping splices given against the same original text."""
    for s in sorted(splices, key=lambda s: s.pos, reverse=True):
        if text[s.pos:s.pos + len(s.old)] != s.old:
            raise ValueError(f"splice at {s.pos} does not match the text")
        text = text[:s.pos] + s.new + text[s.pos + len(s.old):]
    return text


def invert(splices: list[Splice]) -> list[Splice]:
    """The splices that undo `splices` on the text they produced."""
    out, shift = [], 0
    for s in sorted(splices, key=lambda s: s.pos):
        out.append(Splice(s.pos + shift, s.new, s.old))
        shift += len(s.new) - len(s.old)
    return out


# ---------------------------------------------------------------------------------------------
# The tolerant reader: JSON plus // and /* */ comments and trailing commas (JSONC, as VS Code).

_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")


class _Reader:
    def __init__(self, text: str, comments: bool = True, trailing_commas: bool = True):
        self.text = text
        self.pos = 0
        self.comments = comments  # False: a // or /* */ comment is an error (strict JSON)
        self.trailing_commas = trailing_commas  # False: a comma before } or ] is an error

    def fail(self, message: str, pos: int | None = None) -> JsonSyntaxError:
        return JsonSyntaxError(message, self.text, self.pos if pos is None else pos)

    def skip(self) -> None:
        t = self.text
        while self.pos < len(t):
            c = t[self.pos]
            if c in " \t\r\n\ufeff":
                self.pos += 1
            elif t.startswith(("//", "/*"), self.pos) and not self.comments:
                raise self.fail("a comment, which strict JSON does not allow")
            elif t.startswith("//", self.pos):
                nl = t.find("\n", self.pos)
                self.pos = len(t) if nl < 0 else nl
            elif t.startswith("/*", self.pos):
                close = t.find("*/", self.pos + 2)
                if close < 0:
                    raise self.fail("unclosed /* comment")
                self.pos = close + 2
            else:
                return

    def value(self, depth: int = 0) -> Node:
        if depth > 200:
            raise self.fail("nested too deeply")
        self.skip()
        t, start = self.text, self.pos
        if start >= len(t):
            raise self.fail("unexpected end of file, expected a value")
        c = t[start]
        if c == "{":
            return self.container(start, "object", "}", depth)
        if c == "[":
            return self.container(start, "array", "]", depth)
        if c == '"':
            return Node("string", start, self.string_end(), py=self.decoded(start))
        for word, py in (("true", True), ("false", False), ("null", None)):
            if t.startswith(word, start):
                self.pos += len(word)
                return Node(word, start, self.pos, py=py)
        m = _NUMBER.match(t, start)
        if m:
            self.pos = m.end()
            return Node("number", start, self.pos, py=json.loads(m.group()))
        raise self.fail(f"unexpected character {c!r}")

    def string_end(self) -> int:
        t, i = self.text, self.pos + 1
        while i < len(t):
            c = t[i]
            if c == "\\":
                i += 2
                continue
            if c == '"':
                self.pos = i + 1
                return self.pos
            if c == "\n" or ord(c) < 0x20:
                raise self.fail("control character or line break inside a string", i)
            i += 1
        raise self.fail("unclosed string")

    def decoded(self, start: int) -> str:
        try:
            return json.loads(self.text[start:self.pos])
        except json.JSONDecodeError as exc:
            raise self.fail(f"bad string: {exc.msg}", start) from None

    def container(self, start: int, kind: str, close: str, depth: int) -> Node:
        node = Node(kind, start, start)
        self.pos += 1
        keys: set[str] = set()
        while True:
            self.skip()
            if self.pos >= len(self.text):
                raise self.fail(f"unexpected end of file, expected '{close}'")
            if self.text[self.pos] == close:
                if not self.trailing_commas and node.children and node.children[-1].comma is not None:
                    raise self.fail(f"a comma before '{close}', which strict JSON does not allow",
                                    node.children[-1].comma)
                self.pos += 1
                node.end = self.pos
                return node
            if node.children and node.children[-1].comma is None:
                raise self.fail(f"expected ',' or '{close}'")
            child_start = self.pos
            key = None
            if kind == "object":
                if self.text[self.pos] != '"':
                    raise self.fail("expected a key in double quotes")
                self.string_end()
                key = self.decoded(child_start)
                if key in keys:  # clients disagree on which of two equal keys wins: refuse to guess
                    raise self.fail(f"duplicate key {key!r}", child_start)
                keys.add(key)
                self.skip()
                if self.pos >= len(self.text) or self.text[self.pos] != ":":
                    raise self.fail("expected ':' after the key")
                self.pos += 1
            child = Child(key, child_start, self.value(depth + 1))
            node.children.append(child)
            self.skip()
            if self.pos < len(self.text) and self.text[self.pos] == ",":
                child.comma = self.pos
                self.pos += 1


# What a client's JSON reader accepts: "jsonc" (VS Code: comments and trailing commas),
# "comments" (comments only: JSON.parse after strip-json-comments, as Gemini CLI), "strict".
DIALECTS = {"jsonc": (True, True), "comments": (True, False), "strict": (False, False)}


def parse(text: str, dialect: str = "jsonc") -> Node:
    """The tree of a JSON/JSONC document whose top level is an object."""
    reader = _Reader(text, *DIALECTS[dialect])
    root = reader.value()
    reader.skip()
    if reader.pos != len(text):
        raise reader.fail("unexpected text after the end of the document")
    if root.kind != "object":
        raise JsonSyntaxError("the top level must be an object ({...})", text, root.start)
    return root


def to_py(node: Node) -> Any:
    if node.kind == "object":
        return {c.key: to_py(c.value) for c in node.children}
    if node.kind == "array":
        return [to_py(c.value) for c in node.children]
    return node.py


def member(node: Node, key: str) -> Child | None:
    return next((c for c in node.children if c.key == key), None)


def is_strict_json(text: str) -> bool:
    """Plain JSON (no comments, no trailing commas): then the result must stay plain JSON."""
    try:
        json.loads(text)
        return True
    except ValueError:
        return False


# ---------------------------------------------------------------------------------------------
# Style: how the file indents and ends its lines, so inserted text looks like its neighbours.

@dataclass(frozen=True)
class Style:
    newline: str = "\n"
    unit: str = "  "


def style_of(text: str, root: Node | None) -> Style:
    newline = "\r\n" if "\r\n" in text else "\n"
    unit = "  "
    if root is not None:
        for c in root.children:
            ind = line_indent(text, c.start)
            if ind:
                unit = ind
                break
    return Style(newline, unit)


def line_indent(text: str, pos: int) -> str | None:
    """The whitespace before `pos` on its line, or None if something else comes first."""
    begin = text.rfind("\n", 0, pos) + 1
    lead = text[begin:pos]
    return lead if lead.strip() == "" else None


def render(value: Any, style: Style, base: str) -> str:
    """`value` as indented JSON whose continuation lines start at `base`; a list of plain
    values stays on one line, as people write `"args": ["serve"]`."""
    if isinstance(value, dict) and value:
        inner = base + style.unit
        items = [f"{inner}{json.dumps(k, ensure_ascii=False)}: {render(v, style, inner)}" for k, v in value.items()]
        return "{" + style.newline + ("," + style.newline).join(items) + style.newline + base + "}"
    if isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value):
        inner = base + style.unit
        items = [inner + render(v, style, inner) for v in value]
        return "[" + style.newline + ("," + style.newline).join(items) + style.newline + base + "]"
    return _compact(value)


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


def _line_end(text: str, pos: int) -> int:
    """After `pos`, skip blanks and comments that stay on the same line."""
    while pos < len(text):
        if text[pos] in " \t":
            pos += 1
        elif text.startswith("//", pos):
            nl = text.find("\n", pos)
            return len(text) if nl < 0 else (nl - 1 if text[nl - 1] == "\r" else nl)
        elif text.startswith("/*", pos):
            close = text.find("*/", pos + 2)
            if close < 0 or "\n" in text[pos:close]:
                return pos
            pos = close + 2
        else:
            return pos
    return pos


def _after(child: Child) -> int:
    return child.value.end if child.comma is None else child.comma + 1


def _multiline(text: str, node: Node) -> bool:
    return "\n" in text[node.start:node.end]


def _container_indent(text: str, node: Node, owner_start: int) -> str:
    ind = line_indent(text, owner_start)
    return ind if ind is not None else ""


def _item(key: str | None, value: Any, style: Style, base: str, inline: bool) -> str:
    body = _compact(value) if inline else render(value, style, base)
    return body if key is None else json.dumps(key, ensure_ascii=False) + ": " + body


def insert_child(text: str, node: Node, owner_start: int, key: str | None, value: Any,
                 style: Style) -> list[Splice]:
    """Splices that append `key: value` (or the element `value`) at the end of `node`."""
    outer = _container_indent(text, node, owner_start)
    if node.children:
        last = node.children[-1]
        ind = line_indent(text, last.start)
        if ind is None:  # the last one shares its line with what precedes it: follow suit
            item = _item(key, value, style, "", inline=True)
            if last.comma is not None:
                return [Splice(last.comma + 1, "", " " + item + ",")]
            return [Splice(last.value.end, "", ", " + item)]
        item = _item(key, value, style, ind, inline=False)
        end = _line_end(text, _after(last))
        if last.comma is not None:
            return [Splice(end, "", style.newline + ind + item + ",")]
        if end == last.value.end:
            return [Splice(end, "", "," + style.newline + ind + item)]
        return [Splice(last.value.end, "", ","), Splice(end, "", style.newline + ind + item)]
    inner_start, inner = node.start + 1, text[node.start + 1:node.end - 1]
    ind = outer + style.unit
    inline = "\n" not in inner and owner_start != node.start and line_indent(text, owner_start) is None
    if inline:  # `[]` inside a one-line object stays on its line
        return [Splice(inner_start, inner, _item(key, value, style, "", inline=True))]
    item = _item(key, value, style, ind, inline=False)
    if inner.strip() == "":
        return [Splice(inner_start, inner, style.newline + ind + item + style.newline + outer)]
    # Only comments inside: keep them, put the item on its own line after the brace.
    return [Splice(_line_end(text, inner_start), "", style.newline + ind + item)]


def remove_child(text: str, node: Node, index: int) -> list[Splice]:
    """Splices that take out child `index` of `node`: the inverse of `insert_child`."""
    kids = node.children
    child = kids[index]
    if line_indent(text, child.start) is None:  # written inline: take it out inline
        if index > 0:
            prev = kids[index - 1]
            assert prev.comma is not None  # a child with one after it
            return [Splice(prev.comma, text[prev.comma:child.value.end], "")]
        if len(kids) > 1:
            nxt = kids[1].start
            return [Splice(child.start, text[child.start:nxt], "")]
        inner = text[node.start + 1:node.end - 1]
        return [Splice(node.start + 1, inner, "")]
    end = _line_end(text, _after(child))
    if index > 0:
        prev = kids[index - 1]
        start = _line_end(text, _after(prev))
        out = [Splice(start, text[start:end], "")]
        if child.comma is None and index == len(kids) - 1 and prev.comma is not None:
            out.append(Splice(prev.comma, ",", ""))
        return out
    start = _line_end(text, node.start + 1)
    if len(kids) == 1:
        rest = text[node.start + 1:start] + text[end:node.end - 1]
        if rest.strip() == "":  # nothing else inside: back to the bare braces it was made from
            return [Splice(node.start + 1, text[node.start + 1:node.end - 1], "")]
    return [Splice(start, text[start:end], "")]


def replace_value(text: str, child: Child, value: Any, style: Style) -> list[Splice]:
    ind = line_indent(text, child.start)
    inline = not _multiline(text, child.value) and ind is None
    body = _compact(value) if inline else render(value, style, ind or "")
    return [Splice(child.value.start, text[child.value.start:child.value.end], body)]
