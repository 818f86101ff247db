"""basic-memory: a project folder of Markdown notes into entities, observations and relations.

Its note format (basic-memory's markdown/entity_parser.py and markdown/plugins.py):

```markdown
---
title: Coffee Brewing Methods
type: note
tags: [coffee, brewing]
permalink: coffee/coffee-brewing-methods
---
# Coffee Brewing Methods
Prose, with an inline [[Link]].
## Observations
- [method] Pour over gives clarity #brewing (light roasts)
## Relations
- relates_to [[Coffee Bean Origins]]
```

| basic-memory                          | memloci                                                        |
|---------------------------------------|----------------------------------------------------------------|
| a note (`*.md`, hidden folders left out) | an entity named by `title` (else the file name); in a Markdown library its file keeps the note's path (`people/anna.md`) |
| `type` (default `note`)               | `entity_type`                                                  |
| `tags` (list or comma-separated)      | the entity's `tags`                                            |
| `permalink` and other front matter keys | kept in the entity's front matter as written values          |
| `created`, `modified` (else the file's mtime, as basic-memory does) | `created_at`, `updated_at`; observations date from `created` |
| `- [category] text #tag (context)`, and a list item with a `#tag` | an observation holding the item's whole text: the `[category]` prefix, `#tags` and `(context)` stay in it, so it reads as in the note and stays searchable by category |
| `- relation_type [[Target]] (context)` | the relation `relation_type`; Target by title, permalink or file name |
| `[[Target]]` anywhere else in prose    | stays in the body: memloci reads body links as `links_to`, as basic-memory does |
| the rest of the body                  | the entity's body, as written (the `# Title` line and emptied `## Observations` / `## Relations` headings left out) |

A relation whose target is no note of the folder keeps its type: it goes into the entity's
front matter `relations:` (its line leaves the body), where it is that relation at once if
the library holds the target, else a typed link that waits and becomes that relation when
the target is created. Under a schema that lists relation types its line stays in the body as
written (the schema wants both ends). It is listed as a warning.
Lines inside code fences and block quotes (Obsidian callouts) are prose, as in basic-memory;
unlike basic-memory, a paragraph outside a list is never an observation. An entity that
already has prose of its own (a person's entity of the same name) gets the note's observations
and relations and nothing else.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Any

import yaml

from memloci.core.errors import MemlociError, ValidationError
from memloci.core.model import name_key
from memloci.formats.official import OfficialFile, check_storable, shown
from memloci.formats.source import (
    YEARS,
    ImportSource,
    entity_input,
    read_inside,
    relation_input,
    utc_from_epoch,
    utc_from_text,
)
from memloci.markdown import document as md
from memloci.markdown import frontmatter

_FENCE = re.compile(r"^\s*(```|~~~)")
_ITEM = re.compile(r"^\s*[-*+]\s+(.*?)\s*$")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_CATEGORY = re.compile(r"^\[([^\[\]()]+)\]\s+(.+)")
_TIMECODE = re.compile(r"^\d{1,3}:\d{2}(?::\d{2})?(?:[.,]\d{1,3})?(?:\s+-\s+\d{1,3}:\d{2}(?::\d{2})?(?:[.,]\d{1,3})?)?$")
KNOWN_KEYS = {"title", "type", "tags", "created", "modified"}


def is_observation(text: str) -> bool:
    """basic-memory's rule for a list item: `[category] text` (not a task box, a timecode or a
    one-symbol marker), or text holding a `#tag` word; a lone link is never one."""
    if text.startswith(("[ ]", "[x]", "[-]")) or re.match(r"^\[.*?\]\(.*?\)$", text) or re.match(r"^\[\[.*?\]\]$", text):
        return False
    m = _CATEGORY.match(text)
    if m:
        category = m.group(1).strip()
        if not (_TIMECODE.match(category) or (len(category) == 1 and (category in "xX" or not category.isalnum()))):
            return True
    return any(part.startswith("#") for part in text.split())


def explicit_relation(text: str) -> tuple[str, str] | None:
    """(relation_type, target) of `type [[Target]] (context)`; a quoted type may hold spaces.
    A line with prose after the link is not a relation (basic-memory reads it as inline links)."""
    before = text.partition("[[")[0].strip()
    if not before:
        return None
    if before[0] in "'\"" and before.endswith(before[0]) and len(before) > 1:
        rel_type = before[1:-1].strip()
    elif any(c.isspace() for c in before):
        return None
    else:
        rel_type = before
    start = text.find("[[")
    end = text.find("]]", start + 2)
    if not rel_type or end == -1:
        return None
    target = text[start + 2 : end].strip()
    after = text[end + 2 :].strip()
    if not target or (after and not _one_group(after)):
        return None
    return rel_type, target


def _one_group(text: str) -> bool:
    if not text.startswith("("):
        return False
    depth = 0
    for i, c in enumerate(text):
        depth += (c == "(") - (c == ")")
        if depth == 0:
            return i == len(text) - 1
    return False


@dataclass
class Note:
    rel: str  # path inside the folder, with /
    title: str
    entity_type: str
    tags: list[str]
    extra: dict[str, Any]
    created: str
    modified: str
    lines: list[str]  # body lines (after the front matter), with their ends
    first_line: int  # file line number of lines[0]
    observations: list[tuple[range, str]] = field(default_factory=list)  # (its lines, text)
    relations: list[tuple[range, str, str]] = field(default_factory=list)  # (its lines, type, target)


def _front_matter(text: str) -> tuple[dict[str, Any], str, int]:
    """(front matter, body, lines before the body); YAML that does not parse makes the whole
    file body, as basic-memory reads it."""
    if text.startswith("---\n"):
        end = text.find("\n---", 3)  # from 3: an empty front matter closes on the next line
        close = text.find("\n", end + 4) if end != -1 else -1
        if end != -1 and text[end + 4 : close if close != -1 else len(text)].strip() == "":
            try:
                data = yaml.safe_load(text[4:end] if end > 3 else "") or {}
            except (yaml.YAMLError, ValueError, OverflowError, RecursionError):  # ValueError: a date in year 0
                data = None
            if isinstance(data, dict):
                body = text[close + 1 :] if close != -1 else ""
                return data, body, text[: len(text) - len(body)].count("\n")
    return {}, text, 0


def _time(value: Any, fallback: str, where: str) -> str:
    if value is None or value == "":
        return fallback
    if isinstance(value, datetime):
        value = value.isoformat()
    elif isinstance(value, date):
        value = datetime(value.year, value.month, value.day).isoformat()
    try:
        if isinstance(value, str) and re.fullmatch(r"\d{4}-\d\d-\d\d(T\d\d:\d\d(:\d\d(\.\d+)?)?)?", value.strip()):
            # A time with no zone is the note writer's wall clock, as basic-memory reads it
            value = datetime.fromisoformat(value.strip()).astimezone().isoformat()
    except (ValueError, OverflowError) as exc:  # month 13; or year 1 or 9999 moved to this zone
        raise ValidationError(f"{where}: {shown(value)} is no time in {YEARS}") from exc
    return utc_from_text(value, where)


def _tags(value: Any) -> list[str]:
    if value is None:
        return []
    items = value if isinstance(value, list) else str(value).split(",")
    return [t.strip().lstrip("#") for t in (str(i) for i in items) if t.strip().lstrip("#")]


def read_note(root: Path, rel: str) -> Note:
    text = read_inside(root, rel).removeprefix("\ufeff").replace("\r\n", "\n")
    check_storable(text, rel)
    fm, body, offset = _front_matter(text)
    mtime = utc_from_epoch(int(os.stat(root / rel, follow_symlinks=False).st_mtime))
    created = _time(fm.get("created"), mtime, f"{rel}: created")
    title = fm.get("title")
    title = ", ".join(map(str, title)) if isinstance(title, list) else str(title) if title not in (None, "") else ""
    note = Note(rel, title.strip() or Path(rel).stem, str(fm.get("type") or "note"), _tags(fm.get("tags")),
                {k: v for k, v in fm.items() if k not in KNOWN_KEYS}, created,
                _time(fm.get("modified"), mtime, f"{rel}: modified"), body.splitlines(keepends=True), offset + 1)
    check_storable([note.title, note.entity_type, note.tags, note.extra], f"{rel}: front matter")
    fenced = False
    lines = note.lines
    for i, line in enumerate(lines):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        m = _ITEM.match(line)
        if fenced or line.lstrip().startswith(">") or not m or not m.group(1):
            continue
        # An item's wrapped lines (indented, not an item of their own) are part of its text,
        # as in Markdown: "- [idea] one\n  two" is the observation "[idea] one\ntwo".
        end = i + 1
        while end < len(lines) and lines[end][:1] in " \t" and lines[end].strip() and not _ITEM.match(lines[end]) \
                and not _FENCE.match(lines[end]):
            end += 1
        item = "\n".join([m.group(1), *(x.strip() for x in lines[i + 1 : end])])
        rel_pair = explicit_relation(item) if "[[" in item else None
        if rel_pair:
            note.relations.append((range(i, end), *rel_pair))
        elif is_observation(item):
            note.observations.append((range(i, end), item))
    return note


def _body(note: Note, removed: set[int]) -> str:
    """The note's prose: its lines less the observation and relation items taken out, the title
    line, and Observations/Relations headings left with nothing under them."""
    lines = [(i, line) for i, line in enumerate(note.lines) if i not in removed]
    first = next((k for k, (_, line) in enumerate(lines) if line.strip()), None)
    if first is not None:
        m = _HEADING.match(lines[first][1])
        if m and len(m.group(1)) == 1 and m.group(2).strip().casefold() == note.title.casefold():
            del lines[first]
    out: list[str] = []
    for k, (_, line) in enumerate(lines):
        m = _HEADING.match(line)
        if m and md.normalize_heading(m.group(2)) in ("observations", "relations"):
            rest = []
            for _, nxt in lines[k + 1 :]:
                h = _HEADING.match(nxt)
                if h and len(h.group(1)) <= len(m.group(1)):
                    break
                rest.append(nxt)
            if not "".join(rest).strip():
                continue
        out.append(line)
    text = re.sub(r"\n{3,}", "\n\n", "".join(out))
    return text.strip("\n") + "\n" if text.strip() else ""


def _prose(body: str) -> str:
    """A body without its Observations list: the part a note's prose would fill."""
    return md.remove_empty_section(md.set_observations(body, []), "Observations").strip()


def _with_body(note: Note, body_with_links: str, body_typed: str, observations: list[str],
               waiting: list[tuple[str, str]]) -> Callable[[str, bool], tuple[str, bool]]:
    """The edit that gives an imported entity its note's prose, tags, creation date and other
    front matter keys; what the import put there (type, observations, relations) stays.

    It edits the text in place (front matter keys set where they are, the body after the
    title replaced), so every other byte stays, and it is idempotent: it runs on every import,
    a second run changes nothing, and a run after an interrupted one finishes the entities it
    made. An entity with prose of its own that is not the note's (a person's entity of the
    same name) is left as the graph import leaves it. The dates go into the text too, so a
    Markdown library's files carry them (its index is rebuilt from the files). Returns the
    text and whether the entity is the note's own (its dates then follow).

    `waiting`: the note's relations to a name no note of the source has, (type, target). Where
    the library keeps links that wait for their target (`links_wait`: its schema does not list
    relation types), they go into the front matter's `relations:`, so each becomes a relation
    of its own type when its target appears (or at once, if the library has it), and their
    lines leave the body (`body_typed`); else their lines stay in the body as written
    (`body_with_links`), plain text under such a schema."""
    tags, extra = note.tags, note.extra

    def with_relations(text: str, add: list[tuple[str, str]]) -> str:
        if not add:
            return text
        try:
            return frontmatter.with_front_matter(text, lambda y: frontmatter.edit_relations(y, [], add, key_of=name_key))
        except ValidationError:  # `relations:` written by a person in a form memloci does not edit: left as it is
            return text

    def change(text: str, links_wait: bool) -> tuple[str, bool]:
        doc = md.parse_document(text, fallback_name="")
        related = {(rt, name_key(to)) for rt, to in doc.relations}
        add = list(dict.fromkeys((rt, to) for rt, to in waiting if links_wait and (rt, name_key(to)) not in related))
        body = body_with_links if not (links_wait and waiting) else body_typed
        prose = _prose(doc.body)
        if prose and prose != _prose(body):  # a person's entity: its relations, and nothing else
            return with_relations(text, add), False
        if not prose and text.endswith(doc.body):  # the body after the title is the Observations list alone
            dates = {**doc.dates, **{o: note.created for o in observations if o in doc.dates}}  # dated: a Markdown file
            text = text[: len(text) - len(doc.body)] + md.set_observations(body, doc.observations, dates)
        yaml_edits = []
        if tags and list(dict.fromkeys([*doc.tags, *tags])) != doc.tags:
            yaml_edits.append(lambda y: frontmatter.set_list(y, "tags", list(dict.fromkeys([*doc.tags, *tags]))))
        if doc.created is not None and doc.created != note.created:
            yaml_edits.append(lambda y: frontmatter.set_scalar(y, "created", note.created, timestamp=True))
        have = {block.split(":", 1)[0].strip() for block in doc.extra} | {"name", "aliases", "relations"}
        missing = "".join(yaml.safe_dump({k: v}, allow_unicode=True, sort_keys=False, default_flow_style=False,
                                         width=1 << 20) for k, v in extra.items() if str(k) not in have)
        if missing:
            yaml_edits.append(lambda y: y + missing)
        for edit in yaml_edits:
            text = frontmatter.with_front_matter(text, edit)
        return with_relations(text, add), True

    return change


def _walk(root: Path, source: ImportSource) -> list[str]:
    """Markdown files below the root, in order; links are reported, never followed."""
    found = []
    for folder, dirs, files in os.walk(root, followlinks=False):
        here = Path(folder)
        for d in sorted(dirs):
            if (here / d).is_symlink():
                source.skipped.append((str((here / d).relative_to(root)), "a symbolic link to a folder: not followed"))
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and not (here / d).is_symlink())
        for f in sorted(files):
            if f.startswith(".") or not f.lower().endswith(".md"):
                continue
            rel = (here / f).relative_to(root).as_posix()
            if (here / f).is_symlink():
                source.skipped.append((rel, "a symbolic link: not followed"))
                continue
            found.append(rel)
    return found


def read_basic_memory(root: Path) -> ImportSource:
    """Every note of a basic-memory project folder; notes that cannot be read are skipped, by file."""
    if not root.is_dir():
        raise ValidationError(f"{root}: not a folder; give a basic-memory project folder (e.g. ~/basic-memory)")
    root = root.resolve()
    source = ImportSource("basic-memory", OfficialFile([], [], []), layout="Markdown notes")
    notes: list[Note] = []
    for rel in _walk(root, source):
        try:
            notes.append(read_note(root, rel))
        except MemlociError as exc:
            source.skipped.append((rel, exc.message))
        except OSError as exc:  # unreadable (permissions, a file gone meanwhile): that note only
            source.skipped.append((rel, f"cannot read: {exc.strerror or exc}"))
    if not notes and not source.skipped:
        raise ValidationError(f"{root}: no Markdown notes (*.md) found: not a basic-memory project folder")
    # A [[Target]] names a note by title, permalink, path or file name (basic-memory's link resolution).
    by_key: dict[str, str] = {}
    for note in notes:
        stem = note.rel[:-3]
        for key in (note.title, str(note.extra.get("permalink") or ""), stem, Path(stem).name, note.rel):
            if key:
                by_key.setdefault(name_key(key), note.title)
    taken: dict[str, str] = {}
    # relations to a name no note has, by the entity's name_key: (type, target), for its edit
    waiting: dict[str, list[tuple[str, str]]] = {}
    for number, note in enumerate(notes, start=1):
        where = f"{note.rel}:{note.first_line}"
        if name_key(note.title) in taken:
            source.warnings.append((where, f"a second note titled '{note.title}' (first: {taken[name_key(note.title)]}); "
                                          "its observations and relations are merged into that entity"))
        taken.setdefault(name_key(note.title), note.rel)
        removed = {i for span, _ in note.observations for i in span}
        try:
            entity = entity_input(note.title, note.entity_type, [text for _, text in note.observations], where)
        except MemlociError as exc:
            source.skipped.append((where, exc.message))
            continue
        source.data.entities.append((number, entity))
        key = name_key(note.title)
        waits = waiting.setdefault(key, [])
        waiting_lines: set[int] = set()
        for span, rel_type, target in note.relations:
            line_where = f"{note.rel}:{note.first_line + span.start}"
            plain = target.split("|")[0].split("#")[0].strip()  # [[Target|shown]], [[Target#Heading]]
            resolved = by_key.get(name_key(target)) or by_key.get(name_key(plain))
            try:
                relation = relation_input(note.title, rel_type, resolved or plain, line_where)
            except MemlociError as exc:
                source.skipped.append((line_where, exc.message))
                continue
            if resolved is None:  # the entity may be in the library, or come later: a typed link waits for it
                source.warnings.append((line_where, f"relation {rel_type} -> {shown(target)}: no note of that name; "
                                                    "it waits as a link of that type and becomes the relation when "
                                                    "such an entity exists"))
                waits.append((relation.relation_type, relation.to_entity))
                waiting_lines.update(span)
                continue
            removed.update(span)
            source.relation_where[len(source.relation_where) + 1] = line_where
            source.data.relations.append((len(source.relation_where), relation))
        if taken[key] == note.rel:
            change = _with_body(note, _body(note, removed), _body(note, removed | waiting_lines),
                                list(entity.observations), waits)
            usable = True
            try:  # the edit is tried here on the entity as the import will make it: a bad one stops nothing halfway
                made = md.render_document(md.EntityDocument(entity.name, entity.entity_type,
                                                            observations=list(entity.observations)))
                for links_wait in (True, False):
                    md.parse_document(change(made, links_wait)[0], fallback_name=entity.name)
            except MemlociError as exc:
                source.warnings.append((where, f"its prose, tags and front matter are left out: {exc.message}"))
                usable = False
            except (ValueError, TypeError, RecursionError, yaml.YAMLError) as exc:  # front matter YAML cannot write back
                source.warnings.append((where, "its prose, tags and front matter are left out: its front matter "
                                               f"cannot be written back ({shown(str(exc) or type(exc).__name__)})"))
                usable = False
            source.data.entity_dates[key] = (note.created, note.modified, [note.created] * len(entity.observations))
            try:  # a Markdown library keeps it: people/anna.md stays people/anna.md
                check_storable(note.rel, note.rel)
                source.data.entity_paths[key] = note.rel
            except ValidationError:
                source.warnings.append((where, "its file or folder name is not UTF-8: its entity is named "
                                               "after its title in the library's root"))
            if usable:
                source.data.entity_edits[key] = change
    return source
