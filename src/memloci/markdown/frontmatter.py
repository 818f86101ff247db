"""In-place edits of a document's front matter: one key at a time, every other byte kept.

A person's front matter has its own key order, list style (block `- a` or flow `[a, b]`),
quoting and comments. A write that must change one key edits that key's lines only; a new
key goes at the end of the front matter; a file without front matter gets one only when a
key must be written. Pure functions over LF text (the caller strips a BOM and CRLF first).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import yaml

from memloci.core.errors import ValidationError
from memloci.markdown.syntax import LINES, WIKILINK, YAML_LOADER, link_target, note_name, value_text, yaml_scalar
from memloci.markdown.value_links import refused

_KEY_LINE = re.compile(r"(\"[^\"\n]*\"|'[^'\n]*'|[^\s:#\-][^:\n]*):(?:[ \t]|$)")
_ITEM = re.compile(r"([ \t]*)-(?:[ \t]|$)")
_QUOTED = r"\"(?:[^\"\\\n]|\\.)*\"|'(?:[^'\n]|'')*'"  # a quoted scalar on one line, escapes and all


def split(text: str) -> tuple[str, str, str] | None:
    """(opening `---` line, YAML between, rest from the closing `---` line on); None without
    front matter. An unclosed `---` is a thematic break, not front matter."""
    lines = LINES.findall(text)
    if not lines or lines[0].rstrip() != "---":
        return None
    for i in range(1, len(lines)):
        if lines[i].rstrip() == "---":
            return lines[0], "".join(lines[1:i]), "".join(lines[i:])
    return None


def _blocks(yaml_text: str) -> list[tuple[str, int, int]]:
    """(key, first line, end line) of each top-level key; trailing blank and comment lines
    belong to whatever follows, not to the block."""
    lines = LINES.findall(yaml_text)
    starts = []
    for i, line in enumerate(lines):
        m = _KEY_LINE.match(line)
        if m and not line.startswith("#"):
            starts.append((m.group(1).strip().strip("\"'"), i))
    out = []
    for n, (key, i) in enumerate(starts):
        end = starts[n + 1][1] if n + 1 < len(starts) else len(lines)
        while end > i + 1 and (not lines[end - 1].strip() or lines[end - 1].lstrip().startswith("#")):
            end -= 1
        out.append((key, i, end))
    return out


def _quoted_like(old: str, value: str) -> str:
    """`value` written with the quoting `old` used (when that quoting can hold it)."""
    old = old.strip()
    if old.startswith('"') and "\n" not in value:  # escaped as double quotes need
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if old.startswith("'") and "\n" not in value:  # a quote in single quotes is written twice
        return "'" + value.replace("'", "''") + "'"
    return yaml_scalar(value)


def _split_key(head: str) -> tuple[str, str]:
    """A key's line as (through its colon, what follows; a quoted key may hold a colon of its own)."""
    colon = head.index(":", len(head) - len(head.lstrip()) if not head.startswith(("'", '"'))
                       else head.index(head[0], 1))
    return head[:colon + 1], head[colon + 1:].rstrip("\n")


def _quoted_end(text: str, i: int) -> int:
    """The index just past the quoted scalar opening at `text[i]` (`"..."` with its `\\`
    escapes, `'...'` with `''` for a quote), or len(text) when it does not close on this text."""
    quote, j = text[i], i + 1
    while j < len(text):
        if quote == '"' and text[j] == "\\":
            j += 2
            continue
        if text[j] == quote:
            if quote == "'" and text[j + 1:j + 2] == "'":
                j += 2
                continue
            return j + 1
        j += 1
    return len(text)


def _value_and_comment(rest: str) -> tuple[str, str]:
    """Split the text after `key:` into (value, ` # comment` or '') outside quotes."""
    i = 0
    while i < len(rest):
        c = rest[i]
        if c in "\"'" and not rest[:i].strip():
            i = _quoted_end(rest, i)
            continue
        if c == "#" and i and rest[i - 1] in " \t":
            j = i
            while j and rest[j - 1] in " \t":
                j -= 1
            return rest[:j], rest[j:]
        i += 1
    return rest, ""


def _flow_items(inner: str) -> list[str]:
    """The raw item texts of a flow list's inside, split at top-level commas."""
    items, depth, cur, i = [], 0, "", 0
    while i < len(inner):
        c = inner[i]
        if c in "\"'" and not cur.strip():  # a quoted item: commas and brackets in it are text
            stop = _quoted_end(inner, i)
            cur += inner[i:stop]
            i = stop
            continue
        if c in "[{":
            depth += 1
        elif c in "]}":
            depth -= 1
        elif c == "," and depth == 0:
            items.append(cur)
            cur = ""
            i += 1
            continue
        cur += c
        i += 1
    if cur.strip():
        items.append(cur)
    return items


def _as_text(item: str) -> str:
    """A list item as the parser reads it into a name (`yes` -> `true`, dates in ISO)."""
    loaded = _load(item) if item else None
    if loaded is None:
        return item
    try:
        return value_text(loaded, "item")
    except ValidationError:
        return item


def _load(text: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return None


def _block_list_style(lines: list[str]) -> str:
    """The item prefix (`- ` or `  - `) block lists use in this front matter; '' if none."""
    for line in lines:
        m = _ITEM.match(line)
        if m:
            return m.group(1)
    return ""


def _render_list(key: str, values: list[str], indent: str | None) -> str:
    if indent is None or not values:
        return f"{key}: [{', '.join(yaml_scalar(v) for v in values)}]\n"
    return f"{key}:\n" + "".join(f"{indent}- {yaml_scalar(v)}\n" for v in values)


def set_list(yaml_text: str, key: str, values: list[str],
             item_text: Callable[[str], str] = lambda s: s) -> str:
    """Make `key` list exactly `values`: kept items keep their spelling and lines, dropped
    ones lose theirs, new ones are appended in the list's own style. `item_text` reads an
    item as the parser does (a tag `"#a"` is `a`), so a kept item is recognized."""
    lines = LINES.findall(yaml_text)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    block = next((b for b in _blocks("".join(lines)) if b[0] == key), None)
    if block is None:
        if not values:
            return yaml_text
        style = _block_list_style(lines)
        return "".join(lines) + _render_list(key, values, style if any(_ITEM.match(x) for x in lines) else None)
    _, first, end = block
    head = lines[first]
    after = head.split(":", 1)[1] if not head.startswith(("'", '"')) else head[head.index(head[0], 1) + 2:]
    value, comment = _value_and_comment(after.rstrip("\n"))
    wanted = list(values)
    if value.strip().startswith("[") and value.strip().endswith("]"):  # flow list: [a, b]
        inner = value.strip()[1:-1]
        raw = _flow_items(inner)
        kept = []
        for item in raw:
            text = item_text(_as_text(item.strip()))
            if text in wanted:
                wanted.remove(text)
                kept.append(item)
        sep = "," if len(raw) > 1 and not raw[1].startswith((" ", "\t")) else ", "
        pad = " " if inner.startswith(" ") and inner.endswith(" ") and inner.strip() else ""
        joined = sep.join([k.strip() for k in kept] + [yaml_scalar(v) for v in wanted])
        lead = value[:len(value) - len(value.lstrip())] or " "
        new_head = head[:len(head) - len(after)] + f"{lead}[{pad}{joined}{pad}]" + comment + "\n"
        return "".join(lines[:first] + [new_head] + lines[first + 1:])
    if not value.strip():  # block list: one `- item` per line
        items = [i for i in range(first + 1, end) if _ITEM.match(lines[i])]
        indent = _item_indent(lines[items[0]]) if items else "  "
        keep_lines: list[int] = []
        for n, i in enumerate(items):
            stop = items[n + 1] if n + 1 < len(items) else end
            text = item_text(_as_text(lines[i].strip()[1:].strip()))
            if text in wanted:
                wanted.remove(text)
                keep_lines.extend(range(i, stop))
        others = [i for i in range(first + 1, end) if i < (items[0] if items else end)]
        body = [lines[i] for i in others + keep_lines]
        body += [f"{indent}- {yaml_scalar(v)}\n" for v in wanted]
        if not body:  # an empty block list reads as null; write it as []
            return "".join(lines[:first] + [head.rstrip("\n").rstrip() + " []\n"] + lines[end:])
        return "".join(lines[:first + 1] + body + lines[end:])
    # A single scalar (`tags: python`): becomes a flow list if it must hold more or other.
    if values == [item_text(_as_text(value.strip()))]:
        return yaml_text
    new_head = head[:len(head) - len(after)] + " " + (
        f"[{', '.join(yaml_scalar(v) for v in values)}]" if len(values) != 1 else yaml_scalar(values[0])) + comment + "\n"
    return "".join(lines[:first] + [new_head] + lines[first + 1:end] + lines[end:])


def set_scalar(yaml_text: str, key: str, value: str, *, timestamp: bool = False) -> str:
    """Set one scalar key in place (quoting and comment kept), or append it at the end.
    `timestamp`: the value is an ISO time, written plain as YAML reads it (unless quoted before)."""
    lines = LINES.findall(yaml_text)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    block = next((b for b in _blocks("".join(lines)) if b[0] == key), None)
    if block is None:
        return "".join(lines) + f"{key}: {yaml_scalar(value)}\n"
    _, first, end = block
    head = lines[first]
    keyed, after = _split_key(head)
    old, comment = _value_and_comment(after)
    lead = old[:len(old) - len(old.lstrip())] or " "
    plain = timestamp and not old.strip().startswith(("'", '"'))
    new_head = keyed + lead + (value if plain else _quoted_like(old, value)) + comment + "\n"
    return "".join(lines[:first] + [new_head] + lines[end:])


def has_key(yaml_text: str, key: str) -> bool:
    return any(b[0] == key for b in _blocks(yaml_text))


def with_front_matter(text: str, edit: Callable[..., str]) -> str:
    """Apply `edit(yaml_text) -> yaml_text` to the document's front matter, creating one at the
    top when there is none (and the edit writes something)."""
    parts = split(text)
    if parts is None:
        new = edit("")
        return f"---\n{new}---\n{text}" if new else text
    opening, body, rest = parts
    return opening + edit(body) + rest


def _item_indent(line: str) -> str:
    """The indent of a line already known to be a `- item`."""
    m = _ITEM.match(line)
    assert m is not None
    return m.group(1)


def _relation_items(lines: list[str], first: int, end: int) -> list[tuple[int, int]]:
    """(first line, end line) of each item of a block list whose key line is `first`."""
    items = [i for i in range(first + 1, end) if _ITEM.match(lines[i])]
    indent = len(_item_indent(lines[items[0]])) if items else 0
    items = [i for i in items if len(_item_indent(lines[i])) == indent]
    return [(i, items[n + 1] if n + 1 < len(items) else end) for n, i in enumerate(items)]


def _item_relation(text: str) -> tuple[str, str] | None:
    loaded = _load(text)
    if isinstance(loaded, list) and len(loaded) == 1 and isinstance(loaded[0], dict):
        item = loaded[0]
        rtype = next((item[k] for k in ("type", "relation_type", "relationType") if k in item), None)
        if rtype is not None and item.get("to") is not None:
            return str(rtype), str(item["to"])
    return None


def edit_relations(yaml_text: str, remove: list[tuple[str, str]], add: list[tuple[str, str]],
                   key_of: Callable[[str], str] = str.casefold) -> str:
    """Drop the `relations` items naming (type, to) in `remove` (compared by key_of(to)) and
    append `add` in the style of the items already there."""
    lines = LINES.findall(yaml_text)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    block = next((b for b in _blocks("".join(lines)) if b[0] == "relations"), None)
    drop = {(t, key_of(to)) for t, to in remove}
    if block is None:
        if not add:
            return yaml_text
        return "".join(lines) + "relations:\n" + "".join(
            f"  - {{type: {yaml_scalar(t)}, to: {yaml_scalar(to)}}}\n" for t, to in add)
    _, first, end = block
    value, comment = _value_and_comment(lines[first].split(":", 1)[1].rstrip("\n"))
    if value.strip().startswith("[") and value.strip().endswith("]") and value.strip() != "[]":
        # A flow list, `relations: [{type: a, to: b}]`: its items keep their spelling.
        kept = [i for i in _flow_items(value.strip()[1:-1])
                if not ((rel := _item_relation("- " + i.strip())) and (rel[0], key_of(rel[1])) in drop)]
        new = [f"{{type: {yaml_scalar(t)}, to: {yaml_scalar(to)}}}" for t, to in add]
        lines[first] = f"relations: [{', '.join([k.strip() for k in kept] + new)}]{comment}\n"
        return "".join(lines)
    if lines[first].split(":", 1)[1].split("#")[0].strip() not in ("", "[]"):
        raise ValidationError("relations: written in a form memloci edits only as a list of {type, to}; "
                              "edit it by hand", hint="Write relations as `- {type: uses, to: fastapi}` items.")
    if lines[first].split(":", 1)[1].split("#")[0].strip() == "[]" and add:
        lines[first] = "relations:\n"
    items = _relation_items(lines, first, end)
    keep: list[int] = []
    template = None
    for i, stop in items:
        rel = _item_relation("".join(lines[i:stop]))
        if rel and template is None:
            template = "".join(lines[i:stop])
        if rel and (rel[0], key_of(rel[1])) in drop:
            continue
        keep.extend(range(i, stop))
    new_items = [_like(template, t, to) for t, to in add]
    pre = [k for k in range(first + 1, end) if not items or k < items[0][0]]
    body = [lines[k] for k in pre + keep] + new_items
    if not body:
        return "".join(lines[:first] + ["relations: []\n"] + lines[end:])
    return "".join(lines[:first + 1] + body + lines[end:])


def _like(template: str | None, rtype: str, to: str) -> str:
    """A relations item for (rtype, to), laid out as `template` is."""
    if template is None:
        return f"  - {{type: {yaml_scalar(rtype)}, to: {yaml_scalar(to)}}}\n"
    out = re.sub(r"((?:type|relation_type|relationType)\s*:\s*)(" + _QUOTED + r"|[^,}\n#]+?)(\s*(?:[,}]|#|\n|$))",
                 lambda m: m.group(1) + _quoted_like(m.group(2), rtype) + m.group(3), template, count=1)
    out = re.sub(r"(\bto\s*:\s*)(" + _QUOTED + r"|[^,}\n#]+?)(\s*(?:[,}]|#|\n|$))",
                 lambda m: m.group(1) + _quoted_like(m.group(2), to) + m.group(3), out, count=1)
    return out if out.endswith("\n") else out + "\n"


def rename_relation_targets(yaml_text: str, old: str, new: str, key_of: Callable[[str], str] = str.casefold) -> str:
    """Point `to: old` values in `relations` items at `new`, quoting kept."""
    lines = LINES.findall(yaml_text)
    block = next((b for b in _blocks(yaml_text) if b[0] == "relations"), None)
    if block is None:
        return yaml_text
    _, first, end = block

    def swap(m: re.Match) -> str:
        loaded = _load(m.group(2))
        if loaded is not None and key_of(str(loaded)) == key_of(old):
            return m.group(1) + _quoted_like(m.group(2), new) + m.group(3)
        return m.group(0)

    mapping = _load("".join(lines[first:end]))
    by_type = isinstance(mapping, dict) and isinstance(mapping.get("relations"), dict)
    for i in range(first, end):  # the key line too: `relations: [{type: x, to: y}]`
        if by_type and i == first:  # `relations: {uses: [a, b], knows: c}` on one line
            head, colon, rest = lines[i].partition(":")
            lines[i] = head + colon + re.sub(
                r"((?:[{,][ \t]*[^:#\n,{}\[\]]+:[ \t]*\[?[ \t]*|,[ \t]*))(" + _QUOTED + r"|[^,\]}\n#]+?)"
                r"((?:))(?=\s*(?:[,\]}]|#|\n|$))", swap, rest)
        elif by_type:  # `relations: {uses: [a, b]}` written as `  uses: [a, b]` / `    - a`
            lines[i] = re.sub(r"((?:^[ \t]+-[ \t]+|^[ \t]+[^:#\n]+:[ \t]+\[?|,[ \t]*))(" + _QUOTED + r"|[^,\]\n#]+?)"
                              r"((?:))(?=\s*(?:[,\]]|#|\n|$))", swap, lines[i])
        else:
            lines[i] = re.sub(r"(\bto\s*:\s*)(" + _QUOTED + r"|[^,}\n#]+?)(\s*(?:[,}]|#|\n|$))", swap, lines[i])
    return "".join(lines)


def _holds_link(raw: str, key: str, target: str, key_of: Callable[[str], str]) -> bool:
    """Whether one YAML value (`"[[Anna|A.]]"`) is a link to `target`."""
    return _is_link(_load(raw.strip()) if raw.strip() else None, key, target, key_of)


def _is_link(loaded: Any, key: str, target: str, key_of: Callable[[str], str]) -> bool:
    """Whether a parsed value is a link to `target`. A link to it with other text around it,
    or beside other links, is refused: removing it alone would rewrite a person's sentence."""
    if not isinstance(loaded, str):
        return False
    hits = [m for m in WIKILINK.finditer(loaded) if key_of(note_name(link_target(m.group(1))[1])) == key_of(target)]
    if not hits:
        return False
    if len(hits) > 1 or WIKILINK.sub("", loaded).strip():
        raise ValidationError(
            f"{key}: the link [[{target}]] is part of the text {loaded!r}; memloci removes a front-matter link "
            "only when it is the whole value or a whole list item (nothing was changed)",
            hint=f"Edit the '{key}:' line of the note by hand, or with replace_entity_content.")
    return True


def _mapping(yaml_text: str) -> Any:
    """The front matter as the document parser reads it; None when it does not parse."""
    try:
        loaded = yaml.load(yaml_text, Loader=YAML_LOADER)
        return {} if loaded is None else loaded  # only comments, or nothing: no keys
    except yaml.YAMLError:
        return None


_BLOCK_SCALAR = re.compile(r"[ \t]*[|>][0-9+-]*[ \t]*(?:#.*)?$")  # `key: >` or `- |-`: lines that follow are text


def _outside(lines: list[str], first: int, stop: int, scalar_head: str) -> set[int]:
    """The lines of [first, stop) that hold the value, as opposed to a person's comment lines
    between them (`  # coworkers`), which stay when the value goes. In a block scalar
    (`key: >`) a line starting with `#` is text, so every line goes."""
    if _BLOCK_SCALAR.match(scalar_head):
        return set(range(first, stop))
    return {i for i in range(first, stop) if i == first or not lines[i].lstrip().startswith("#")}


def _scalar_end(lines: list[str], first: int, end: int) -> int:
    """A block scalar's last line: its indented lines run to the next key, even those that
    start with `#` (which _blocks leaves out of a block as comments)."""
    stop = end
    while stop < len(lines) and not _KEY_LINE.match(lines[stop]) and (
            lines[stop][:1] in (" ", "\t") or not lines[stop].strip()):
        stop += 1
    while stop > end and not lines[stop - 1].strip():  # blank lines belong to what follows
        stop -= 1
    return stop


def drop_link(yaml_text: str, key: str, target: str, key_of: Callable[[str], str] = str.casefold) -> str:
    """Remove the `[[target]]` link from the value of `key`, every other byte kept: the list
    item that holds it, or the whole key when it held only that link. Comment lines inside
    the value stay. The result is read back: unless it parses to exactly the old front
    matter less that link, nothing is changed and the call is refused, naming the key."""
    lines = LINES.findall(yaml_text)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    block = next((b for b in _blocks("".join(lines)) if b[0] == key), None)
    before = _mapping("".join(lines))
    if block is None or not isinstance(before, dict):
        return yaml_text
    name = next((k for k in before if str(k) == key), None)
    value = before.get(name)
    _, first, end = block
    head = lines[first]
    keyed, after = _split_key(head)
    flow, comment = _value_and_comment(after)
    expected = dict(before)
    if isinstance(value, list):
        hits = [n for n, v in enumerate(value) if _is_link(v, key, target, key_of)]
        if not hits:
            return yaml_text
        rest = [v for n, v in enumerate(value) if n not in hits]
        if rest:
            expected[name] = rest
        else:
            del expected[name]
        if flow.strip().startswith("[") and flow.strip().endswith("]"):  # flow list: [a, "[[b]]"]
            inner = flow.strip()[1:-1]
            raw = _flow_items(inner)
            kept = [item for item in raw if not _holds_link(item, key, target, key_of)]
            if not kept:
                out = [line for i, line in enumerate(lines) if i not in _outside(lines, first, end, "")]
            else:
                sep = "," if len(raw) > 1 and not raw[1].startswith((" ", "\t")) else ", "
                pad = " " if inner.startswith(" ") and inner.endswith(" ") and inner.strip() else ""
                lead = flow[:len(flow) - len(flow.lstrip())] or " "
                out = list(lines)
                out[first] = keyed + f"{lead}[{pad}{sep.join(k.strip() for k in kept)}{pad}]" + comment + "\n"
        else:  # block list: one `- item` per line (an item may go on over more lines)
            drop = set()
            for i, stop in _relation_items(lines, first, end):
                item = _load("".join(lines[i:stop]))
                if isinstance(item, list) and len(item) == 1 and _is_link(item[0], key, target, key_of):
                    dash = lines[i].lstrip()[1:]
                    if _BLOCK_SCALAR.match(dash.rstrip("\n")):
                        stop = _scalar_end(lines, i + 1, stop)
                    drop |= _outside(lines, i, stop, dash.rstrip("\n"))
            if not rest:
                drop |= {first}
            out = [line for i, line in enumerate(lines) if i not in drop]
    else:
        if not _is_link(value, key, target, key_of):
            return yaml_text
        del expected[name]
        # The whole key: its line and the lines its value goes on over (`people: >` / `  [[Anna]]`).
        stop = _scalar_end(lines, first + 1, end) if _BLOCK_SCALAR.match(after) else end
        out = [line for i, line in enumerate(lines) if i not in _outside(lines, first, stop, after)]
    text = "".join(out)
    if _mapping(text) != expected:
        raise ValidationError(
            f"{key}: memloci could not remove the link [[{target}]] from this value without changing "
            "anything else (nothing was changed)",
            hint=f"Edit the '{key}:' value of the note by hand, or with replace_entity_content.")
    return text


def check_renamed_links(before: list[tuple[str, str]], after: list[tuple[str, str]] | None,
                        old: str, new: str, key_of: Callable[[str], str] = str.casefold) -> None:
    """Refuse, naming the key, a rename whose edited front matter does not read back as the
    same value links with `old` turned into `new` (`after` None: it no longer parses, as when
    the new name holds the quote of a quoted value). The caller then writes nothing."""
    if not any(key_of(to) == key_of(old) for _, to in before):
        return
    want = {(k, key_of(new) if key_of(to) == key_of(old) else key_of(to)) for k, to in before}
    if after is None or {(k, key_of(to)) for k, to in after} != want:
        raise refused(next(k for k, to in before if key_of(to) == key_of(old)), old, new)


# -- links to entities that no longer exist (garbage_collect_relations) -------------------


def relation_entries(yaml_text: str) -> list[tuple[int, str, str]]:
    """(line index in `yaml_text`, type, to) of each `relations` entry: an item's first line
    (every item of a flow list sits on the key's line, as does every entry of the mapping
    form `relations: {uses: [a]}`)."""
    lines = LINES.findall(yaml_text)
    block = next((b for b in _blocks(yaml_text) if b[0] == "relations"), None)
    if block is None:
        return []
    _, first, end = block
    loaded = _mapping(yaml_text)
    value = loaded.get("relations") if isinstance(loaded, dict) else None
    head = _value_and_comment(_split_key(lines[first])[1])[0].strip()
    if isinstance(value, list) and not head:  # a block list: each item on its own lines
        out = []
        for i, stop in _relation_items(lines, first, end):
            rel = _item_relation("".join(lines[i:stop]))
            if rel:
                out.append((i, rel[0], rel[1]))
        return out
    if isinstance(value, list):
        return [(first, str(rel[0]), str(rel[1])) for item in value if isinstance(item, dict)
                and (rel := _item_relation(yaml.safe_dump([item], allow_unicode=True)))]
    if isinstance(value, dict):
        return [(first, str(t), str(to)) for t, tos in value.items() for to in (tos if isinstance(tos, list) else [tos])]
    return []


def drop_relation_entries(yaml_text: str, drop: set[tuple[str, str]], key_of: Callable[[str], str] = str.casefold) -> str:
    """Remove the `relations` entries naming (type, key_of(to)) in `drop`, only their bytes: a
    block list loses those items' lines (its `relations:` line stays, empty when no item is
    left), a flow list those items. Read back: unless the front matter parses to exactly the
    old one less those entries, nothing is changed and the call is refused."""
    lines = LINES.findall(yaml_text)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    block = next((b for b in _blocks("".join(lines)) if b[0] == "relations"), None)
    before = _mapping("".join(lines))
    if block is None or not isinstance(before, dict) or not isinstance(before.get("relations"), list):
        if block is not None and drop:
            raise ValidationError("relations: written in a form memloci edits only as a list of {type, to}; "
                                  "edit it by hand", hint="Write relations as `- {type: uses, to: fastapi}` items.")
        return yaml_text

    def dropped(item: Any) -> bool:
        rel = _item_relation(yaml.safe_dump([item], allow_unicode=True)) if isinstance(item, dict) else None
        return rel is not None and (rel[0], key_of(rel[1])) in drop

    kept = [item for item in before["relations"] if not dropped(item)]
    if len(kept) == len(before["relations"]):
        return yaml_text
    _, first, end = block
    if _value_and_comment(_split_key(lines[first])[1])[0].strip():  # a flow list: its key line is rewritten
        text = edit_relations("".join(lines), [(t, to) for t, to in drop], [], key_of)
        expected = {**before, "relations": kept}
    else:
        gone: set[int] = set()
        for i, stop in _relation_items(lines, first, end):
            rel = _item_relation("".join(lines[i:stop]))
            if rel and (rel[0], key_of(rel[1])) in drop:
                gone |= _outside(lines, i, stop, "")
        text = "".join(line for i, line in enumerate(lines) if i not in gone)
        expected = {**before, "relations": kept or None}
    if _mapping(text) != expected:
        raise ValidationError("relations: memloci could not remove these entries without changing anything "
                              "else (nothing was changed)", hint="Edit the note's relations by hand.")
    return text


def unlink_values(yaml_text: str, key: str, change: Callable[[str], str]) -> str:
    """Apply `change` (links to plain text) to the lines holding the value of `key`, comment
    lines aside. Read back: unless the value parses to exactly the old one with `change`
    applied to each string in it, nothing is changed and the call is refused, naming the key."""
    lines = LINES.findall(yaml_text)
    block = next((b for b in _blocks(yaml_text) if b[0] == key), None)
    before = _mapping(yaml_text)
    if block is None or not isinstance(before, dict):
        return yaml_text
    _, first, end = block
    head = _split_key(lines[first])[1]
    stop = _scalar_end(lines, first + 1, end) if _BLOCK_SCALAR.match(head) else end
    for i in _outside(lines, first, stop, head):
        if i == first:  # the key itself stays as it is
            keyed, rest = _split_key(lines[i])
            lines[i] = keyed + change(rest) + lines[i][len(keyed) + len(rest):]
        else:
            lines[i] = change(lines[i])
    text = "".join(lines)
    name = next((k for k in before if str(k) == key), None)
    value = before.get(name)
    expected = dict(before)
    expected[name] = [change(v) if isinstance(v, str) else v for v in value] if isinstance(value, list) \
        else change(value) if isinstance(value, str) else value
    if _mapping(text) != expected:
        raise ValidationError(f"{key}: memloci could not turn the links of this value into plain text without "
                              "changing anything else (nothing was changed)",
                              hint=f"Edit the '{key}:' value of the note by hand, or with replace_entity_content.")
    return text


def key_lines(yaml_text: str) -> list[tuple[str, int, int]]:
    """(key, first line, end line) of each top-level key of the front matter, in order."""
    return _blocks(yaml_text)
