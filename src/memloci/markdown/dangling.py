"""Links to entities that no longer exist, in one entity document: where each one is, and the
document without them (garbage_collect_relations). Pure functions over LF text.

What goes, and what stays, when a link's target is gone:
- a front-matter `relations:` entry (`- {type: knows, to: Gone}`) is only a relation: the
  entry's bytes go (its lines in a block list, the item in a flow list; `relations:` stays);
- a link in the body turns into its plain text: `[[Gone]]` -> `Gone`, `[[Gone|label]]` ->
  `label`, `[[Gone#Part]]` -> `Gone#Part`, an embed `![[Gone]]` -> `Gone`; links in code stay;
- a link in a front-matter value (`company: "[[Gone]]"`) turns into its plain text the same way
  (`company: "Gone"`), its quoting kept.
Every other byte stays. An edit that cannot keep them (a relations mapping, a value whose
quoting would change) is refused with a ValidationError naming the key.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import yaml

from memloci.markdown import frontmatter
from memloci.markdown.properties import KNOWN_KEYS, property_links
from memloci.markdown.syntax import LINES, WIKILINK, YAML_LOADER, link_target, note_name, prose_spans

LINKS_TO = "links_to"


@dataclass(frozen=True, slots=True)
class Place:
    """One link to a gone target: `where` is "relations" (a front-matter entry), "property:KEY"
    (a front-matter value) or "body"; `line` counts from 1 in the document's text; `text` is the
    link (or the entry's line) as written; `becomes` the plain text it leaves (None: it goes)."""

    where: str
    relation_type: str
    target: str
    line: int
    text: str
    becomes: str | None


def plain(m: re.Match[str]) -> str:
    """The text a link leaves: its label, else its target as written (`#heading` kept)."""
    if m.group(3) and m.group(3)[1:].strip():
        return m.group(3)[1:]
    return link_target(m.group(1))[1] + (m.group(2) or "")


def _target(m: re.Match[str]) -> str:
    return note_name(link_target(m.group(1))[1])


def _unlinked(text: str, gone: Callable[[str], bool], spans: list[tuple[int, int]] | None = None) -> str:
    """`text` with each link to a gone target as its plain text; `spans`: where links are
    links (outside code), else anywhere."""
    out, last = [], 0
    for start, end in spans if spans is not None else [(0, len(text))]:
        for m in WIKILINK.finditer(text, start, end):
            t = _target(m)
            if not t or not gone(t):
                continue
            at = m.start() - 1 if m.start() > start and text[m.start() - 1] == "!" else m.start()
            out += [text[last:at], plain(m)]
            last = m.end()
    return "".join(out) + text[last:]


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def places(text: str, gone: Callable[[str], bool], *, body_links: bool = True) -> list[Place]:
    """Every link of the document to a target `gone(target)` says no longer exists, in the
    order of the text. `body_links` False: only `relations:` entries are relations (a schema
    that lists its relation types keeps links in text as text)."""
    out: list[Place] = []
    parts = frontmatter.split(text)
    rest_at = 0
    if parts is not None:
        opening, yaml_text, rest = parts
        rest_at = len(opening) + len(yaml_text)
        lines = LINES.findall(yaml_text)
        for i, rtype, to in frontmatter.relation_entries(yaml_text):
            if gone(to):
                out.append(Place("relations", rtype, to, i + 2, lines[i].rstrip("\n"), None))
        if body_links:
            out += _value_places(yaml_text, gone, lines)
    if body_links:
        for start, end in prose_spans(text[rest_at:]):
            for m in WIKILINK.finditer(text, rest_at + start, rest_at + end):
                t = _target(m)
                if t and gone(t):
                    embed = m.start() > rest_at + start and text[m.start() - 1] == "!"
                    out.append(Place("body", LINKS_TO, t, _line_of(text, m.start()),
                                     ("!" if embed else "") + m.group(0), plain(m)))
    return out


def _value_places(yaml_text: str, gone: Callable[[str], bool], lines: list[str]) -> list[Place]:
    """The links to gone targets in the values of front-matter keys memloci does not know."""
    try:
        data = yaml.load(yaml_text, Loader=YAML_LOADER) or {}
    except yaml.YAMLError:
        return []
    keys = {k for k, t in property_links(data) if gone(t)}
    out = []
    for key, first, end in frontmatter.key_lines(yaml_text):
        if key not in keys or key in KNOWN_KEYS:
            continue
        for n in range(first, end):
            line = lines[n] if n > first else lines[n].split(":", 1)[1]
            if line.lstrip().startswith("#"):
                continue
            for m in WIKILINK.finditer(line):
                t = _target(m)
                if t and gone(t):
                    out.append(Place(f"property:{key}", key, t, n + 2, m.group(0), plain(m)))
    return out


def unlinked(text: str, gone: Callable[[str], bool], key_of: Callable[[str], str], *,
             body_links: bool = True) -> str:
    """The document without its links to gone targets (the rules above), every other byte kept."""
    parts = frontmatter.split(text)
    if parts is None:
        opening, yaml_text, rest = "", "", text
    else:
        opening, yaml_text, rest = parts
        drop = {(rtype, key_of(to)) for _, rtype, to in frontmatter.relation_entries(yaml_text) if gone(to)}
        if drop:
            yaml_text = frontmatter.drop_relation_entries(yaml_text, drop, key_of)
        if body_links:
            for key in dict.fromkeys(p.relation_type for p in _value_places(yaml_text, gone, LINES.findall(yaml_text))):
                yaml_text = frontmatter.unlink_values(yaml_text, key, lambda v: _unlinked(v, gone))
    if body_links:
        rest = _unlinked(rest, gone, list(prose_spans(rest)))
    return opening + yaml_text + rest
