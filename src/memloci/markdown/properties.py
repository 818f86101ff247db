"""Front-matter properties as Obsidian reads them: the keys memloci knows, the tags, and the
`[[links]]` in the values of every other key."""

from __future__ import annotations

import re

from memloci.markdown.syntax import WIKILINK, fold_name, link_target, note_name, value_texts

KNOWN_KEYS = ("name", "type", "aliases", "tags", "relations", "created", "modified")


def front_matter_tags(value: object) -> list[str]:
    """Front-matter tags as Obsidian reads them: a list, or one string of tags separated by
    commas or spaces; a leading `#` is not part of the tag (`tags: "#a, b/c"` -> a, b/c)."""
    raw = value_texts(value, "tags")
    if isinstance(value, str):
        raw = re.split(r"[,\s]+", value)
    out: dict[str, str] = {}
    for t in raw:
        t = t.strip().removeprefix("#").strip()
        if t:
            out.setdefault(t.casefold(), t)
    return list(out.values())


def property_links(data: object) -> list[tuple[str, str]]:
    """(key, target) of each `[[link]]` in the string values (or lists of strings) of front-matter
    keys memloci does not know: `people: ["[[Anna]]", "[[Bob|Bobby]]"]` -> people->Anna, people->Bob.
    `[[Target#Heading]]`, `[[Target|label]]` and `[[folder/Target.md]]` point at Target."""
    out: dict[tuple[str, str], tuple[str, str]] = {}
    if not isinstance(data, dict):
        return []
    for key, value in data.items():
        if str(key) in KNOWN_KEYS:
            continue
        for v in value if isinstance(value, list) else [value]:
            if isinstance(v, str):
                for m in WIKILINK.finditer(v):
                    t = note_name(link_target(m.group(1))[1])
                    if t:
                        out.setdefault((str(key), fold_name(t)), (str(key), t))
    return list(out.values())
