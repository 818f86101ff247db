"""The entity document: YAML front matter plus a Markdown body, parsed, rendered and edited.

Pure functions over text; the stores do the file I/O. A heading is an ATX heading at column
0 outside fenced code: indented `#` lines belong to list items (an observation's
continuation lines) and must never split a section. Edits return new text or raise before
changing anything, so a caller writes the whole result or nothing.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date
from functools import lru_cache

import yaml

from memloci.core.errors import NotFoundError, ValidationError
from memloci.markdown.outline import Outline, list_items, normalize_heading, observations_region, outline
from memloci.markdown.properties import KNOWN_KEYS, front_matter_tags, property_links
from memloci.markdown.syntax import (
    LINES,
    UNFOLDED,
    WIKILINK,
    YAML_LOADER,
    fold_name,
    link_target,
    note_name,
    parse_heading,
    prose_spans,
    value_text,
    value_texts,
    yaml_scalar,
)

_KEY = re.compile(r"(\"[^\"\n]*\"|'[^'\n]*'|[^:\n]+):(?:[ \t]|$)")
# When memloci wrote an observation line: a trailing HTML comment, invisible in rendered
# Markdown, only ever on lines memloci writes (a person's lines get their file's time).
_DATE_MARK = re.compile(r"[ \t]<!-- (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z) -->[ \t]*$")


@dataclass
class EntityDocument:
    """One entity as a Markdown document (DESIGN.md section 1). `relations` holds the
    front-matter relations as (relation_type, to_name); `body` is everything after the
    title line; `extra` is the raw text of unknown front-matter keys, one block per key."""

    name: str
    entity_type: str = "note"
    aliases: list[str] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    relations: list[tuple[str, str]] = field(default_factory=list)
    observations: list[str] = field(default_factory=list)
    body: str = ""
    created: str | None = None
    modified: str | None = None
    extra: list[str] = field(default_factory=list)
    dates: dict[str, str] = field(default_factory=dict)  # observation -> when memloci wrote it
    # Links in the values of unknown front-matter keys, as (key, target): `company: "[[Globex]]"`
    # is a relation `company` to Globex. Their text lives in `extra`, never rendered twice.
    links: list[tuple[str, str]] = field(default_factory=list)


def observation_line(text: str, date: str | None = None) -> str:
    """An observation as a list item: `- text <!-- 2026-11-21T04:50:00Z -->` (continuation
    lines indented two spaces, the date after the last line)."""
    return "- " + text.replace("\n", "\n  ") + (f" <!-- {date} -->" if date else "") + "\n"


def split_date(item: str) -> tuple[str, str | None]:
    """An item's text without its trailing date comment, and the date."""
    m = _DATE_MARK.search(item)
    return (item[:m.start()], m.group(1)) if m else (item, None)


def set_observations(body: str, observations: list[str], dates: dict[str, str] | None = None) -> str:
    """Make the body's `## Observations` section list exactly `observations`.

    Prose in that section and everything outside it stay byte for byte. Without such a
    section, and with observations to write, one is inserted before the first level-2+
    heading, or at the end: `set_observations("Intro\\n", ["a"])` ->
    `"Intro\\n\\n## Observations\\n- a\\n"`.
    """
    doc = outline(body, front_matter=False)
    lines, region = doc.lines, observations_region(doc)
    new = [observation_line(o, (dates or {}).get(o)) for o in observations]
    if region is None:
        if not new:
            return body
        at = next((line for line, level, _ in doc.headings if level >= 2), len(lines))
        before, after = lines[:at], lines[at:]
        if before and not before[-1].endswith("\n"):
            before[-1] += "\n"
        sep = ["\n"] if before and before[-1].strip() else []
        return "".join(before + sep + ["## Observations\n"] + new + (["\n"] if after else []) + after)
    head, end = region
    items = list_items(doc, head + 1, end)
    dropped = {i for first, stop, _ in items for i in range(first, stop)}
    own = [line for i, line in enumerate(lines[head + 1:end], head + 1) if i not in dropped]
    if items:  # the new list goes where the old one began
        at = items[0][0] - head - 1
    else:  # no list yet: after the section's last prose line
        at = len(own)
        while at and not own[at - 1].strip():
            at -= 1
    before = lines[:head + 1] + own[:at]
    if new and not before[-1].endswith("\n"):
        before[-1] += "\n"
    if new and at == len(own) and end < len(lines):  # keep a blank line before the next heading
        new.append("\n")
    return "".join(before + new + own[at:] + lines[end:])


def correct_observation(text: str, old: str, new: str, entity: str) -> str:
    """`text` (an entity document) with the observation `old` (its list item in `## Observations`)
    now reading `new`, its date kept; every other byte as it was. NOT_FOUND when no observation
    reads `old`; VALIDATION_ERROR when another already reads `new`."""
    doc = outline(text)
    region = observations_region(doc)
    items = [(first, stop, *split_date(item))
             for first, stop, item in (list_items(doc, region[0] + 1, region[1]) if region else [])]
    found = next((i for i in items if i[2] == old), None)
    if found is None:
        raise NotFoundError(f"old: entity '{entity}' has no observation {old!r}",
                            hint="Give an observation's whole text as the entity lists it; nothing was changed.")
    if new == old:
        return text
    if any(i[2] == new for i in items):
        raise ValidationError(f"new: entity '{entity}' already has the observation {new!r}",
                              hint="Delete the old observation instead; nothing was changed.")
    first, stop, _, date = found
    lines = doc.lines
    line = observation_line(new, date)
    if not lines[stop - 1].endswith("\n"):  # the file's last line: no line break added
        line = line[:-1]
    return "".join(lines[:first] + [line] + lines[stop:])


def _blank_lead(text: str) -> int:
    """How many characters of blank lines `text` starts with."""
    m = re.match(r"(?:[ \t]*\n)*", text)
    assert m is not None  # the pattern matches the empty string
    return m.end()


def kept_body(body: str) -> str:
    """`body` as an entity document holds it: what `render_document` writes and `parse_document`
    reads back. The blank lines that lead it are dropped (the blank line after the title is the
    separator, so parse cannot tell them apart) and it ends in exactly one line break (a file
    memloci renders ends so); "" when it holds nothing else. SQLite and PostgreSQL store a body
    as given and a Markdown library as its file holds it: every engine's document shows this."""
    body = body.rstrip("\n")
    body = body[_blank_lead(body):]
    return body + "\n" if body else ""


def _relations(value: object) -> list[tuple[str, str]]:
    rule = "expected a list of {type: uses, to: fastapi} or a mapping like {uses: [fastapi]}"
    if value is None:
        return []
    if isinstance(value, dict):
        return [
            (value_text(rtype, "relations"), value_text(t, f"relations.{rtype}"))
            for rtype, targets in value.items()
            for t in (targets if isinstance(targets, list) else [targets])
        ]
    if not isinstance(value, list):
        raise ValidationError(f"relations: {rule}")
    out = []
    for i, item in enumerate(value):
        rtype = next((item[k] for k in ("type", "relation_type", "relationType") if k in item), None) \
            if isinstance(item, dict) else None
        if rtype in (None, "") or item.get("to") in (None, ""):
            raise ValidationError(f"relations[{i}]: needs a type and a to; {rule}")
        out.append((value_text(rtype, f"relations[{i}].type"), value_text(item["to"], f"relations[{i}].to")))
    return out


def _unknown_blocks(raw: str, data: dict) -> list[str]:
    """Raw text of the front-matter keys memloci does not know, one string per key block."""
    blocks: list[tuple[str | None, list[str]]] = []
    pending: list[str] = []  # column-0 comments describe the key that follows
    for line in LINES.findall(raw):
        m = None if line[:1].isspace() or line.startswith(("#", "- ")) else _KEY.match(line)
        if m:
            blocks.append((m.group(1).strip().strip("\"'"), pending + [line]))
            pending = []
        elif line.startswith("#") or (pending and not line.strip()) or not blocks:
            pending.append(line)
        else:
            blocks[-1][1].extend(pending + [line])
            pending = []
    if pending:
        blocks.append((None, pending))
    if {k for k, _ in blocks if k} != {str(k) for k in data}:
        # A layout the line scan cannot follow (flow or indented mapping): keep the values,
        # if not their spelling.
        return [yaml.safe_dump({k: v}, sort_keys=False, allow_unicode=True, width=UNFOLDED)
                for k, v in data.items() if str(k) not in KNOWN_KEYS]
    out = []
    for key, block in blocks:
        # Blank lines around a block separate it from the next; they are not its content.
        text = "".join(block).strip("\n")
        if key not in KNOWN_KEYS and text.strip():
            out.append(text[_blank_lead(text):] + "\n")
    return out


def parse_document(text: str, *, fallback_name: str) -> EntityDocument:
    """Parse an entity document (`\\r\\n` and a BOM are normalized first). The name is front
    matter `name`, else a leading `# Title`, else `fallback_name`. Bad front matter raises
    ValidationError naming the line or the field."""
    doc = outline(text.removeprefix("\ufeff").replace("\r\n", "\n"))
    lines, start = doc.lines, doc.start
    data: dict = {}
    if start:
        try:
            data = yaml.load("".join(lines[1:start - 1]), Loader=YAML_LOADER) or {}
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            at = f" at line {mark.line + 2}" if mark else ""  # 0-based, and after the `---` line
            ctx, ctx_mark = getattr(exc, "context", None), getattr(exc, "context_mark", None)
            at += f" ({ctx} that starts at line {ctx_mark.line + 2})" if ctx and ctx_mark else ""
            raise ValidationError(
                f"front matter: invalid YAML{at}: {getattr(exc, 'problem', None) or exc}",
                hint="Fix the YAML between the --- lines; quote values holding ': ' or starting with # [ { * &.",
            ) from exc
        if not isinstance(data, dict):
            raise ValidationError(f"front matter: must be a mapping of keys to values, got {type(data).__name__}",
                                  hint="Write one `key: value` per line between the --- lines.")
    i = start
    while i < len(lines) and not lines[i].strip():
        i += 1
    title = None
    named = data.get("name") not in (None, "")
    # A leading H1 is the name, not body; unless front matter names the entity otherwise: then
    # the H1 is the document's own title (content brought it) and stays in the body.
    if doc.headings and doc.headings[0][:2] == (i, 1) and not (
            named and doc.headings[0][2].casefold() != value_text(data["name"], "name").casefold()):
        title, i = doc.headings[0][2], i + 1
        while i < len(lines) and not lines[i].strip():
            i += 1
    region = observations_region(doc)  # level 2+, so never the title
    observations: list[str] = []
    dates: dict[str, str] = {}
    for _, _, item in list_items(doc, region[0] + 1, region[1]) if region else []:
        content, when = split_date(item)
        observations.append(content)
        if when:
            dates.setdefault(content, when)

    def scalar(key: str, default: str | None) -> str | None:
        return default if data.get(key) in (None, "") else value_text(data[key], key)

    return EntityDocument(
        name=scalar("name", title or fallback_name) or fallback_name,
        entity_type=value_text(data["type"], "type") if data.get("type") is not None else "note",
        aliases=value_texts(data.get("aliases"), "aliases"),
        tags=front_matter_tags(data.get("tags")),
        relations=_relations(data.get("relations")),
        links=property_links(data),
        observations=observations,
        body="".join(lines[i:]),
        created=scalar("created", None),
        modified=scalar("modified", None),
        extra=_unknown_blocks("".join(lines[1:start - 1]), data) if start else [],
        dates=dates,
    )


@lru_cache(maxsize=256)
def _timestamp(value: str) -> str:
    # Plain, as in DESIGN.md, when YAML reads it back to this same ISO text.
    try:
        loaded = yaml.safe_load(value)
    except yaml.YAMLError:
        loaded = None
    return value if isinstance(loaded, date) and value_text(loaded, "") == value else yaml_scalar(value)


def render_document(doc: EntityDocument) -> str:
    """Render an entity document: the inverse of `parse_document`, byte-stable on its own
    output. The body's Observations section is made to list exactly `doc.observations`."""
    title = " ".join(doc.name.split())
    heading = parse_heading(f"# {title}")
    if heading is None:
        raise ValidationError(f"name: {doc.name!r} cannot be a Markdown title; give a name with text in it")
    body = kept_body(set_observations(doc.body, doc.observations, doc.dates))
    first = body.split("\n", 1)[0]
    own = parse_heading(first) if first.startswith("# ") else None
    if own and own[1].casefold() == doc.name.casefold():
        own = None  # the name itself, as a title: rendered as one
    fm = ["---\n"]
    if heading[1] != doc.name or own:  # the title line cannot carry this name exactly, or is the body's own
        fm.append(f"name: {yaml_scalar(doc.name)}\n")
    fm.append(f"type: {yaml_scalar(doc.entity_type)}\n")
    for key, values in (("aliases", doc.aliases), ("tags", doc.tags)):
        if values:
            fm.append(f"{key}: [{', '.join(yaml_scalar(str(v)) for v in values)}]\n")
    if doc.relations:
        fm.append("relations:\n")
        fm.extend(f"  - {{type: {yaml_scalar(t)}, to: {yaml_scalar(to)}}}\n" for t, to in doc.relations)
    for key, value in (("created", doc.created), ("modified", doc.modified)):
        if value is not None:
            fm.append(f"{key}: {_timestamp(value)}\n")
    fm.extend(b if b.endswith("\n") else b + "\n" for b in doc.extra)
    if own:  # content that brought its own H1 keeps it as the only title
        return "".join(fm) + f"---\n{body}"
    return "".join(fm) + f"---\n# {title}\n" + (f"\n{body}" if body else "")


def _links(text: str) -> Iterator[re.Match]:
    """Wikilink matches outside fenced code and inline code spans."""
    for start, end in prose_spans(text):
        yield from WIKILINK.finditer(text, start, end)


def wikilinks(text: str) -> list[str]:
    """Targets of `[[target]]`, `[[target#heading|label]]` and `![[embed]]` outside code, in
    first-seen order, deduplicated case-insensitively (entity names match that way)."""
    seen: dict[str, str] = {}
    for m in _links(text):
        t = note_name(link_target(m.group(1))[1])
        if t:
            seen.setdefault(fold_name(t), t)
    return list(seen.values())


def rewrite_wikilinks(text: str, old: str, new: str) -> str:
    """Point links to `old` (case-insensitive) at `new`, keeping `#heading`, `|label` and
    every other byte; links inside code stay as they are."""
    parts, last = [], 0
    for at, end in renamed_spans(text, old, new):
        parts += [text[last:at], new.strip()]
        last = end
    return "".join(parts) + text[last:]


def renamed_spans(text: str, old: str, new: str) -> list[tuple[int, int]]:
    """(start, end) in `text` of the name part of each link to `old` that a rename to `new`
    replaces (`[[dir/old.md#h|label]]`: just `old`), in order; links inside code are not links."""
    if not old.strip():
        raise ValidationError("old: must not be empty")
    if not new.strip() or any(c in new for c in "[]|#\n"):
        raise ValidationError("new: must be a non-empty name without [ ] | # or line breaks")
    want, spans = fold_name(old.strip()), []
    for m in _links(text):
        lead, t = link_target(m.group(1))
        if fold_name(note_name(t)) == want:  # only the name: [[dir/old.md]] -> [[dir/new.md]]
            suffix = 3 if t.casefold().endswith(".md") else 0
            prefix = t[:len(t) - suffix].rsplit("/", 1)[0] + "/" if "/" in t[:len(t) - suffix] else ""
            spans.append((m.start(1) + lead + len(prefix), m.start(1) + lead + len(t) - suffix))
    return spans


def toc(text: str) -> list[dict]:
    """`{"heading": "frontmatter", "level": 0}` when there is front matter, then every
    heading outside code as `{"heading": title, "level": n}`."""
    doc = outline(text)
    front = [{"heading": "frontmatter", "level": 0}] if doc.start else []
    return front + [{"heading": t, "level": lvl} for _, lvl, t in doc.headings]


def _heading_list(doc: Outline, limit: int = 30) -> str:
    names = [f"{'#' * lvl} {t}" for _, lvl, t in doc.headings[:limit]]
    return (", ".join(names) or "(none)") + (", ..." if len(doc.headings) > limit else "")


def read_sections(text: str, section_globs: list[str]) -> list[dict]:
    """Sections whose normalized heading matches a glob (`arch*`, `frontmatter`), in
    document order, as `{"heading", "level", "content"}`. Content runs from the heading
    line to the next heading of the same or higher level; for front matter, its raw YAML."""
    doc = outline(text)
    names = ["frontmatter"] * bool(doc.start) + [normalize_heading(t) for _, _, t in doc.headings]
    chosen: set[int] = set()
    for glob in section_globs:
        hits = [i for i, n in enumerate(names) if fnmatch.fnmatchcase(n, normalize_heading(glob))]
        if not hits:
            raise NotFoundError(f"section_globs: no heading matches {glob!r}",
                                hint=f"Headings here: {_heading_list(doc)}" + ("; frontmatter" if doc.start else ""))
        chosen.update(hits)
    out, skip = [], bool(doc.start)
    for i in sorted(chosen):
        if skip and i == 0:
            out.append({"heading": "frontmatter", "level": 0, "content": "".join(doc.lines[1:doc.start - 1])})
            continue
        line, level, title = doc.headings[i - skip]
        out.append({"heading": title, "level": level, "content": "".join(doc.lines[line:doc.ends[i - skip]])})
    return out


def _find_heading(doc: Outline, section: str, where: str) -> int | None:
    """Index in doc.headings of the one heading matching `section`; None when none does."""
    want = normalize_heading(section)
    if not want:
        raise ValidationError(f"{where}: must name a heading")
    if want == "frontmatter":
        raise ValidationError(f"{where}: the front matter is not a section; edit it with replace_entity_content")
    found = [i for i, (_, _, t) in enumerate(doc.headings) if normalize_heading(t) == want]
    if len(found) > 1:
        listed = "; ".join(f"line {doc.headings[i][0] + 1}: {doc.lines[doc.headings[i][0]].rstrip()}" for i in found)
        raise ValidationError(f"{where}: {len(found)} headings match {section!r}: {listed}",
                              hint="Rename one with replace_entity_section, or edit with replace_entity_content; nothing was changed.")
    return found[0] if found else None


def _heading_arg(heading: str) -> tuple[int | None, str]:
    """(level if it starts with #'s, title) of a heading given by a caller."""
    m = re.match(r"\s*(#{1,6})(?:\s+|$)(.*)", heading, re.DOTALL)
    return (len(m.group(1)) if m else None), " ".join((m.group(2) if m else heading).split())


def add_to_section(text: str, section: str, new_content: str) -> str:
    """Append `new_content` at the end of a section (before the next heading of the same or
    higher level), keeping one blank line before that heading. A missing section is created
    at the end as `## {section}`. `## Title`, `title` and `TITLE` name the same section."""
    doc = outline(text)
    hi = _find_heading(doc, section, "section")
    if not new_content.strip():
        raise ValidationError("new_content: must not be empty")
    content = new_content.rstrip("\n") + "\n"  # leading newlines stay: they ask for a blank line
    if hi is None:
        level, title = _heading_arg(section)
        head = text if not text or text.endswith("\n") else text + "\n"
        sep = "\n" if head.strip() and not head.endswith("\n\n") else ""
        return f"{head}{sep}{'#' * (level or 2)} {title}\n\n{content.lstrip(chr(10))}"
    line, end = doc.headings[hi][0], doc.ends[hi]
    last = end - 1
    while last > line and not doc.lines[last].strip():
        last -= 1
    before, after = doc.lines[:last + 1], doc.lines[end:]
    if not before[-1].endswith("\n"):
        before[-1] += "\n"
    return "".join(before) + content + "\n" * bool(after) + "".join(after)


def replace_section(text: str, old_heading: str, new_heading: str, new_body: str) -> str:
    """Replace a heading and its section (down to the next heading of the same or higher
    level). The level is kept unless `new_heading` starts with #'s."""
    doc = outline(text)
    hi = _find_heading(doc, old_heading, "old_heading")
    if hi is None:
        raise NotFoundError(f"old_heading: no heading matches {old_heading!r}",
                            hint=f"Headings here: {_heading_list(doc)}")
    level, title = _heading_arg(new_heading)
    if not title:
        raise ValidationError("new_heading: must not be empty")
    line, old_level, _ = doc.headings[hi]
    block = f"{'#' * (level or old_level)} {title}\n"
    if new_body.strip():
        block += new_body.strip("\n") + "\n"
    after = doc.lines[doc.ends[hi]:]
    return "".join(doc.lines[:line]) + block + "\n" * bool(after) + "".join(after)


def remove_empty_section(text: str, heading: str) -> str:
    """Drop the heading of each matching section that has no content and no subsections,
    with the blank lines it leaves. Text without such a section comes back unchanged."""
    doc = outline(text)
    want, lines = normalize_heading(heading), list(doc.lines)
    for hi in range(len(doc.headings) - 1, -1, -1):  # bottom up, so earlier indices hold
        line, level, title = doc.headings[hi]
        nxt = doc.headings[hi + 1] if hi + 1 < len(doc.headings) else None
        end = nxt[0] if nxt else len(lines)
        if normalize_heading(title) != want or (nxt and nxt[1] > level) or \
                any(lines[i].strip() for i in range(line + 1, end)):
            continue
        start = line
        while end >= len(lines) and start > doc.start and not lines[start - 1].strip():
            start -= 1  # at the end of the text, take the blank lines above along
        del lines[start:end]
    return "".join(lines)


def _line_at(text: str, pos: int) -> tuple[int, str]:
    """(1-based line number, excerpt of at most ~80 characters around pos)."""
    ls = text.rfind("\n", 0, pos) + 1
    le = text.find("\n", pos)
    line = text[ls:le if le >= 0 else len(text)].rstrip("\r")
    if len(line) > 80:
        cut = max(0, min(pos - ls - 30, len(line) - 80))
        line = "…" * bool(cut) + line[cut:cut + 80] + "…" * (cut + 80 < len(line))
    return text.count("\n", 0, pos) + 1, line


def _locate_once(text: str, old: str, where: str) -> int:
    """Offset of the one exact occurrence of `old`; raise naming `where` otherwise."""
    if not old:
        raise ValidationError(f"{where}: must not be empty", hint=f"Put the exact text to change in {where}.")
    positions = [text.find(old)]
    if positions[0] < 0:
        message, details = f"{where}: not found in the document", {}
        m = re.search(r"\s+".join(map(re.escape, old.split())), text, re.IGNORECASE) if old.strip() else None
        if m:
            n, excerpt = _line_at(text, m.start())
            message += f"; a match differing only in whitespace or case starts at line {n}: {excerpt!r}"
            details["candidates"] = [{"line": n, "excerpt": excerpt}]
        raise NotFoundError(message, details=details,
                            hint=f"Read the section and copy the text exactly, spaces and line breaks included, into {where}.")
    cap = 50  # enough to show the caller; counting every hit of a one-letter string helps no one
    while len(positions) < cap and (p := text.find(old, positions[-1] + 1)) >= 0:
        positions.append(p)
    if len(positions) == 1:
        return positions[0]
    candidates = [_line_at(text, p) for p in positions[:10]]
    listed = "\n".join(f"  line {n}: {excerpt!r}" for n, excerpt in candidates)
    count = f"{cap}+" if len(positions) == cap else len(positions)
    raise ValidationError(
        f"{where}: matches {count} places; give more surrounding text\n{listed}",
        hint=f"Include neighbouring words or lines in {where} so it matches exactly one place; nothing was changed.",
        details={"candidates": [{"line": n, "excerpt": e} for n, e in candidates]},
    )


def replace_exact(text: str, old: str, new: str, *, field: str = "old_content") -> str:
    """Replace the one exact occurrence of `old` with `new`; none or several is an error."""
    pos = _locate_once(text, old, field)
    return text[:pos] + new + text[pos + len(old):]


def delete_exact(text: str, old: str, *, field: str = "content_to_delete") -> str:
    """Delete the one exact occurrence of `old`. When it covers whole lines they go with
    their newline, and no doubled blank line is left where they were."""
    pos = _locate_once(text, old, field)
    end = pos + len(old)
    line_start = pos == 0 or text[pos - 1] == "\n"
    if line_start and not old.endswith("\n"):
        end += next((len(nl) for nl in ("\n", "\r\n") if text.startswith(nl, end)), 0)
    out = text[:pos] + text[end:]
    if not (line_start and (end == len(text) or text[end - 1] == "\n")):
        return out  # part of a line: nothing else to tidy
    prev_start = out.rfind("\n", 0, pos - 1) + 1 if pos else 0
    prev_blank = pos == 0 or not out[prev_start:pos].strip()
    nl = out.find("\n", pos)
    nxt = out[pos:] if nl < 0 else out[pos:nl + 1]
    if prev_blank and nxt and not nxt.strip():
        return out[:pos] + out[pos + len(nxt):]  # blank lines met at the cut: keep one
    if prev_blank and pos and not nxt:
        return out[:prev_start]  # the cut reached the end: no trailing blank line
    return out
