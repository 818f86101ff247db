"""Obsidian's conventions over entity documents: `#tags` in a body, and the links kept in
front-matter values. Pure functions over text (document.py parses the front matter)."""

from __future__ import annotations

import re

import yaml

from memloci.markdown.document import EntityDocument, set_observations
from memloci.markdown.properties import property_links
from memloci.markdown.syntax import WIKILINK, YAML_LOADER, prose_spans

# An Obsidian tag: `#` after whitespace (or at a line's start), then letters, digits, `_`, `-`
# and `/` (nested tags); `# Heading`, `a#b`, `url/#frag` and `[[note#heading]]` are not tags.
_TAG = re.compile(r"(?<!\S)#([\w/-]+)")


def tag_text(item: str) -> str:
    """A front-matter tag item as the parser reads it (for in-place edits that compare items)."""
    return item.strip().removeprefix("#").strip()


def inline_tags(body: str) -> list[str]:
    """`#tags` in a body, outside code and links, in first-seen order, each once (compared
    case-insensitively, spelled as first written). A tag has at least one non-digit."""
    out: dict[str, str] = {}
    for start, end in prose_spans(body):
        spans = [(m.start(), m.end()) for m in WIKILINK.finditer(body, start, end)]
        for m in _TAG.finditer(body, start, end):
            tag = m.group(1).strip("/")
            if not tag or tag.replace("/", "").replace("-", "").isdigit() or \
                    any(a <= m.start() < b for a, b in spans):
                continue
            out.setdefault(tag.casefold(), tag)
    return list(out.values())


def all_tags(doc: EntityDocument) -> tuple[list[str], list[str]]:
    """(every tag of the entity, the ones only the body carries): front matter first."""
    have = {t.casefold() for t in doc.tags}
    body_only = [t for t in inline_tags(doc.body) if t.casefold() not in have]
    return [*doc.tags, *body_only], body_only


def retagged(tags: list[str], body_tags: list[str], body: str, observations: list[str]) -> tuple[list[str], list[str]]:
    """An entity's tags after its observations changed (every engine's upkeep, written once):
    (every tag, the ones only the body's `#tags` give). `tags` are its tags as stored, of which
    `body_tags` came from the body before; the rest were given it and stay first."""
    body_only = {t.casefold() for t in body_tags}
    own = [t for t in tags if t.casefold() not in body_only]
    return all_tags(EntityDocument("", tags=own, body=set_observations(body, observations)))


def block_links(blocks: list[str]) -> list[tuple[str, str]]:
    """property_links of raw front-matter key blocks (an entity's kept unknown keys)."""
    return block_links_or_none(blocks) or []


def block_links_or_none(blocks: list[str]) -> list[tuple[str, str]] | None:
    """block_links, or None when the blocks no longer parse (an edit broke their YAML)."""
    if not blocks or "[[" not in "".join(blocks):
        return []
    try:
        return property_links(yaml.load("".join(b if b.endswith("\n") else b + "\n" for b in blocks), Loader=YAML_LOADER))
    except yaml.YAMLError:
        return None
