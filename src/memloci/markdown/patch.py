"""Changes to an existing entity file, made as edits to its bytes (DESIGN.md §3, "a person's bytes").

A file memloci did not create is never rendered again: each change a call makes (a link
renamed, an observation added or removed, a relation, a tag, a merged section) is applied to
the text as it is, and every other byte stays. CRLF, a BOM and a missing final newline are
kept. Pure functions over text; the store does the I/O.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from memloci.core.errors import ValidationError
from memloci.markdown import frontmatter as fm
from memloci.markdown.document import (
    EntityDocument,
    observation_line,
    parse_document,
    rewrite_wikilinks,
    split_date,
    wikilinks,
)
from memloci.markdown.obsidian import tag_text
from memloci.markdown.outline import list_items, observations_region, outline
from memloci.markdown.syntax import parse_heading
from memloci.markdown.value_links import rename_value_links

LINKS_TO = "links_to"


@dataclass(frozen=True)
class Style:
    """How a file spells what the parser normalizes away."""

    bom: bool = False
    crlf: bool = False
    final_newline: bool = True


def decode(data: bytes) -> tuple[str, Style]:
    """UTF-8 bytes -> (LF text ending in a newline, the file's style)."""
    text = data.decode("utf-8")
    bom = text.startswith("\ufeff")
    text = text.removeprefix("\ufeff")
    crlf = "\r\n" in text and text.count("\r\n") == text.count("\n")  # mixed endings are left as they are
    if crlf:
        text = text.replace("\r\n", "\n")
    final = not text or text.endswith("\n")
    return (text if final else text + "\n"), Style(bom, crlf, final)


def encode(text: str, style: Style) -> bytes:
    """The inverse of `decode`."""
    if not style.final_newline and text.endswith("\n"):
        text = text[:-1]
    if style.crlf:
        text = text.replace("\r\n", "\n").replace("\n", "\r\n")
    return (("\ufeff" if style.bom else "") + text).encode("utf-8")


@dataclass
class Wanted:
    """What the index says the file must hold after this write."""

    doc: EntityDocument  # name, type, aliases, tags, observations (+ their dates)
    relations: list[tuple[str, str]]  # every outgoing relation and pending link, (type, to name)
    renames: list[tuple[str, str]]  # (old, new) names renamed in this change
    tail: str = ""  # text appended to the body (a merge)
    stamp: str | None = None  # set `modified:` in place to this (files memloci created)
    # name keys of link texts -> the key of the entity they reach by an alias (`[[Anna]]`)
    resolve: Callable[[list[str]], dict[str, str]] | None = None


def patch_document(text: str, want: Wanted, *, fallback_name: str, key_of: Callable[[str], str],
                   new_stem: str | None = None) -> str:
    """The file's LF text changed exactly as far as `want` differs from it. `fallback_name`:
    the stem of the file read; `new_stem`: the stem it is written under (a rename moves it)."""
    original = text
    if want.renames:  # parsing costs: only when a name may be in the text
        before = parse_document(text, fallback_name=fallback_name)
        titled = parse_document(text, fallback_name="\x00").name != "\x00"  # else the file name says it
        links: list[tuple[str, str]] | None = before.links  # None: the front matter no longer parses
    for old, new in want.renames:
        if titled and key_of(before.name) == key_of(old):
            text = _set_title(text, new)
        if new.strip() and not any(c in new for c in "[]|#\n"):  # else a name no link can carry
            # the body's links as text; the front matter's in each value's YAML quoting
            parts = fm.split(text)
            text = rewrite_wikilinks(text, old, new) if parts is None else \
                parts[0] + rename_value_links(parts[1], old, new, want.doc.name) + rewrite_wikilinks(parts[2], old, new)
        text = fm.with_front_matter(text, lambda y, old=old, new=new: fm.rename_relation_targets(y, old, new, key_of) if y else y)
        if links:  # a link in a value must read back renamed, or nothing is written
            after = _links_or_none(text, fallback_name)
            fm.check_renamed_links(links, after, old, new, key_of)
            links = after
    if want.tail:
        text = text.rstrip("\n") + want.tail
        text = text if text.endswith("\n") else text + "\n"
    text = _patch_observations(text, want.doc.observations, want.doc.dates)
    text = _patch_front_matter(text, want, fallback_name, key_of)
    moved = want.renames or (new_stem or fallback_name) != fallback_name
    if moved and parse_document(text, fallback_name=new_stem or fallback_name).name != want.doc.name:
        text = _set_title(text, want.doc.name)
    stamp = want.stamp
    if stamp and text != original and (parts := fm.split(text)) and fm.has_key(parts[1], "modified"):
        text = fm.with_front_matter(text, lambda y: fm.set_scalar(y, "modified", stamp, timestamp=True))
    return text


def _set_title(text: str, name: str) -> str:
    """The document names `name`: by its `name:` key, else its leading `# title`, else a
    `name:` key is written (the file name no longer says it)."""
    parts = fm.split(text)
    if parts is not None and fm.has_key(parts[1], "name"):
        return fm.with_front_matter(text, lambda y: fm.set_scalar(y, "name", name))
    doc = outline(text)
    i = doc.start
    while i < len(doc.lines) and not doc.lines[i].strip():
        i += 1
    if doc.headings and doc.headings[0][:2] == (i, 1):
        line = doc.lines[i]
        m = re.match(r"(#[ \t]+)(.*?)([ \t]+#+[ \t]*)?(\n?)$", line)
        if m and parse_heading(f"# {name}") == (1, name):
            doc.lines[i] = m.group(1) + name + (m.group(3) or "") + m.group(4)
            return "".join(doc.lines)
    return fm.with_front_matter(text, lambda y: fm.set_scalar(y, "name", name))


def _patch_observations(text: str, wanted: list[str], dates: dict[str, str]) -> str:
    doc = outline(text)
    region = observations_region(doc)
    items = list_items(doc, region[0] + 1, region[1]) if region else []
    parsed = [split_date(item)[0] for _, _, item in items]
    # The index holds each text once: a line a person wrote twice stays twice, and goes (both
    # times) only when its text is deleted.
    keep = set(wanted)
    drop = {i for (first, stop, _), content in zip(items, parsed) if content not in keep for i in range(first, stop)}
    have = set(parsed)
    new = [observation_line(o, dates.get(o)) for o in dict.fromkeys(wanted) if o not in have]
    lines = list(doc.lines)
    # An edited observation (one text out, another in) keeps its place: the new lines take the
    # places of the removed ones, in order; the rest are appended.
    removed = [(first, stop) for (first, stop, _), content in zip(items, parsed) if content not in keep]
    for (first, _stop), line in zip(removed, new):
        lines[first] = line
        drop.discard(first)
    new = new[len(removed):]
    if not new:
        return "".join(line for i, line in enumerate(lines) if i not in drop)
    if region is None:
        sep = "\n" if lines and lines[-1].strip() else ""
        return "".join(lines) + sep + "## Observations\n" + "".join(new)
    head, end = region
    at = items[-1][1] if items else end
    while not items and at > head + 1 and not lines[at - 1].strip():
        at -= 1
    out = [line for i, line in enumerate(lines[:at]) if i not in drop] + new
    return "".join(out + [line for i, line in enumerate(lines[at:], at) if i not in drop])


def _patch_front_matter(text: str, want: Wanted, fallback_name: str, key_of: Callable[[str], str]) -> str:
    have = parse_document(text, fallback_name=fallback_name)
    doc = want.doc
    parts = fm.split(text)
    present = (lambda k: fm.has_key(parts[1], k)) if parts else (lambda k: False)
    if have.entity_type != doc.entity_type:
        text = fm.with_front_matter(text, lambda y: fm.set_scalar(y, "type", doc.entity_type))
    for key, old, new in (("aliases", have.aliases, doc.aliases), ("tags", have.tags, doc.tags)):
        if old != new and (new or present(key)):
            norm = tag_text if key == "tags" else (lambda s: s)
            text = fm.with_front_matter(text, lambda y, k=key, v=new, n=norm: fm.set_list(y, k, list(v), n))
    own = key_of(doc.name)
    body_links = wikilinks(have.body)
    texts = [*body_links, *(to for _, to in [*have.relations, *have.links])]
    alias = want.resolve(texts) if want.resolve and texts else {}

    def reach(name: str) -> str:  # the entity a text in the file names, by name or by an alias
        return alias.get(key_of(name), key_of(name))

    linked = {reach(t) for t in body_links}
    written = {(t, reach(to)) for t, to in [*have.relations, *have.links]}
    index = {(t, key_of(to)): to for t, to in want.relations if not (t == LINKS_TO and key_of(to) == own)}
    remove = [(t, to) for t, to in have.relations if (t, reach(to)) not in index]
    add = [(t, to) for (t, k), to in index.items()
           if (t, k) not in written and not (t == LINKS_TO and k in linked)]
    if remove or add:
        text = fm.with_front_matter(text, lambda y: fm.edit_relations(y, remove, add, key_of))
    # A link in a front-matter value (`company: "[[Acme]]"`) goes only when the relation is
    # gone from the index and its key's text from the entity's kept front matter (delete_relations).
    kept = {(t, key_of(to)) for t, to in doc.links}
    dropped = []
    for k, to in have.links:
        if (k, reach(to)) not in index and (k, key_of(to)) not in kept:
            text = fm.with_front_matter(text, lambda y, k=k, to=to: fm.drop_link(y, k, to, key_of))
            dropped.append((k, to))
    # Read back: a deletion is reported only when the file no longer holds the link.
    left = _links_or_none(text, fallback_name) if dropped else []
    for k, to in dropped:
        if left is None or (k, reach(to)) in {(a, reach(b)) for a, b in left}:
            raise ValidationError(f"{k}: the link [[{to}]] could not be removed from this front-matter value "
                                  "(nothing was changed)", hint=f"Edit the '{k}:' value of the note by hand.")
    return text


def _links_or_none(text: str, fallback_name: str) -> list[tuple[str, str]] | None:
    """The front-matter value links of a document; None when its front matter no longer parses."""
    try:
        return parse_document(text, fallback_name=fallback_name).links
    except ValidationError:
        return None


def dated_text(text: str, created: str, updated: str, dates: dict[str, str]) -> str:
    """`text` with its date marks set: `created:`/`modified:` where its front matter has them
    (no key added), and the `<!-- date -->` mark of each observation line that has one (the
    observation's date from `dates`, by its text). Every other byte stays."""
    doc = outline(text)
    lines = list(doc.lines)
    region = observations_region(doc)
    for _, stop, item in list_items(doc, region[0] + 1, region[1]) if region else []:
        content, date = split_date(item)
        want = dates.get(content)
        if date and want and want != date:
            lines[stop - 1] = lines[stop - 1].replace(f"<!-- {date} -->", f"<!-- {want} -->")
    text = "".join(lines)
    parts = fm.split(text)
    for k, value in (("created", created), ("modified", updated)):
        if parts and fm.has_key(parts[1], k):
            text = fm.with_front_matter(text, lambda y, k=k, value=value: fm.set_scalar(y, k, value, timestamp=True))
    return text
