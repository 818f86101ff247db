"""Reading each agent's files into the model. The wrapping a format adds (front matter, a title
heading, memloci's own block markers and notes) is taken off, so the same words hash alike in
every format; a file that cannot be read is refused with its path and the rule it breaks."""

from __future__ import annotations

import re
import stat
from dataclasses import dataclass

import yaml

from memloci.core import confine
from memloci.core.errors import ValidationError
from memloci.markdown.syntax import YAML_LOADER, fenced_lines, parse_heading
from memloci.workspace.agents import Location
from memloci.workspace.model import Rule, Skill

BEGIN = "<!-- memloci:rules begin -->"
END = "<!-- memloci:rules end -->"
RULE_NOTE = re.compile(r"^<!-- memloci:(rule|skill) .*-->$")
APPLIES = re.compile(r"^Applies to files matching: .*$")
_STEP = re.compile(r"^\s{0,3}(?:\d+[.)]|[-*+])\s+(.*\S)\s*$")


@dataclass(frozen=True)
class Document:
    front: dict
    body: str


def _flat_front(lines: list[str], where: str) -> dict:
    """Cursor's own reader takes `globs: *.ts` (not YAML: an alias); its front matter is flat
    `key: value` lines, read here as that when YAML refuses it."""
    out: dict = {}
    for n, line in enumerate(lines, start=2):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key, sep, value = line.partition(":")
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", key.strip()):
            raise ValidationError(f"{where}: front matter line {n} is not 'key: value'",
                                  hint="Fix the front matter by hand; nothing was changed.")
        v = value.strip()
        if len(v) >= 2 and v[0] == v[-1] and v[0] in "\"'":
            v = v[1:-1]
        out[key.strip()] = {"true": True, "false": False}.get(v, v)
    return out


def split_front(text: str, where: str, *, lenient: bool = False) -> Document:
    """Front matter (a `---` line first, up to the next `---` line) and the body after it."""
    lines = text.replace("\r\n", "\n").split("\n")
    if not lines or lines[0].strip() != "---":
        return Document({}, text)
    try:
        end = next(i for i in range(1, len(lines)) if lines[i].strip() == "---")
    except StopIteration:
        raise ValidationError(f"{where}: the front matter opened on line 1 is never closed with '---'",
                              hint="Add the closing '---' line; nothing was changed.") from None
    raw = lines[1:end]
    body = "\n".join(lines[end + 1:])
    try:
        data = yaml.load("\n".join(raw), Loader=YAML_LOADER) if any(s.strip() for s in raw) else {}
    except yaml.YAMLError as exc:
        if lenient:
            return Document(_flat_front(raw, where), body)
        mark = getattr(exc, "problem_mark", None)
        at = f" (line {mark.line + 2})" if mark is not None else ""
        raise ValidationError(f"{where}: the front matter is not YAML{at}: {getattr(exc, 'problem', exc)}",
                              hint="Fix the front matter by hand; nothing was changed.") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ValidationError(f"{where}: the front matter must be a mapping of keys, not {type(data).__name__}")
    return Document(data, body)


def _text(front: dict, key: str, where: str) -> str:
    value = front.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ValidationError(f"{where}: front matter '{key}' must be text, not {type(value).__name__}")
    return value.strip()


def _bool(front: dict, key: str, where: str, default: bool) -> bool:
    value = front.get(key, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ValidationError(f"{where}: front matter '{key}' must be true or false, not {value!r}")
    return value


def split_globs(text: str) -> list[str]:
    """Comma-separated globs, a comma inside braces (`*.{ts,tsx}`) or brackets kept in its glob."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
        elif ch == "," and depth <= 0:
            out.append(text[start:i])
            start, depth = i + 1, 0
    return [*out, text[start:]]


def _globs(front: dict, key: str, where: str) -> tuple[str, ...]:
    """Globs as text (comma-separated, as Cursor and Copilot write them) or a list of text."""
    value = front.get(key)
    if value is None or value == "":
        return ()
    if isinstance(value, str):
        items = split_globs(value)
    elif isinstance(value, list) and all(isinstance(v, str) for v in value):
        items = value
    else:
        raise ValidationError(f"{where}: front matter '{key}' must be a glob, comma-separated globs "
                              f"or a list of globs, not {value!r}")
    return tuple(g.strip() for g in items if g.strip())


def _title_and_body(body: str) -> tuple[str, str]:
    """A leading heading is the rule's title (wrapping); the rest is its content."""
    lines = body.replace("\r\n", "\n").split("\n")
    i = 0
    while i < len(lines) and not lines[i].strip():
        i += 1
    if i < len(lines):
        heading = parse_heading(lines[i])
        if heading is not None:
            return heading[1], "\n".join(lines[i + 1:])
    return "", body


def _unmanaged(text: str) -> str:
    """A copy's text without memloci's notes (the source line, the globs line)."""
    return "\n".join(s for s in text.split("\n") if not RULE_NOTE.match(s.strip()) and not APPLIES.match(s.strip()))


def copied(text: str) -> bool:
    """Whether a file's text is a copy `rules sync` wrote: it carries memloci's note on a line
    of its own, outside a code block (a note a person quotes in one does not make it a copy)."""
    lines = text.split("\n")
    fenced = fenced_lines([s.rstrip("\r") for s in lines])
    return any(RULE_NOTE.match(s.strip()) and not in_fence for s, in_fence in zip(lines, fenced, strict=True))


def _marker_lines(text: str, marker: str) -> list[int]:
    """Where `marker` stands on a line of its own outside a code fence (its offset): a marker a
    person quotes in their prose or in a code block is theirs, not memloci's block."""
    lines = text.splitlines(keepends=True)
    fenced = fenced_lines([line.rstrip("\r\n") for line in lines])
    found, at = [], 0
    for line, in_fence in zip(lines, fenced, strict=True):
        if not in_fence and line.rstrip("\r\n") == marker:
            found.append(at)
        at += len(line)
    return found


def block_span(text: str, where: str) -> tuple[int, int] | None:
    """Where memloci's block is: from its begin marker to the end of its end marker's line (each
    marker a line of its own, outside code fences, as memloci writes them)."""
    begins, ends = _marker_lines(text, BEGIN), _marker_lines(text, END)
    if not begins:
        if ends:
            raise ValidationError(f"{where}: memloci's end marker '{END}' has no begin marker",
                                  hint="Put back the begin marker, or delete both by hand; nothing was changed.")
        return None
    if len(begins) > 1 or len(ends) > 1:
        raise ValidationError(f"{where}: memloci's block appears twice",
                              hint="Delete one of them by hand; nothing was changed.")
    if not ends or ends[0] < begins[0]:
        raise ValidationError(f"{where}: memloci's block begun by '{BEGIN}' is never ended with '{END}'",
                              hint="Put back the end marker, or delete the block by hand; nothing was changed.")
    return begins[0], ends[0] + len(END)


def sections(text: str) -> list[tuple[str, str]]:
    """A Markdown file of instructions as (title, content) sections: split at the shallowest
    heading level used (a single top heading first is the document's title, not a section);
    text before the first section is a section titled by that document title, or untitled."""
    lines = text.replace("\r\n", "\n").split("\n")
    fenced = fenced_lines(lines)
    heads = [(i, h) for i, s in enumerate(lines) if not fenced[i] and (h := parse_heading(s)) is not None]
    doc_title = ""
    if heads and heads[0][1][0] == 1 and sum(1 for _, h in heads if h[0] == 1) == 1 \
            and not any(s.strip() for s in lines[:heads[0][0]]):
        doc_title = heads[0][1][1]
        first = heads.pop(0)[0]
        lines_before = lines[first + 1:heads[0][0]] if heads else lines[first + 1:]
    else:
        lines_before = lines[:heads[0][0]] if heads else lines
    out: list[tuple[str, str]] = []
    if any(s.strip() for s in lines_before):
        out.append((doc_title, "\n".join(lines_before)))
    if not heads:
        return out
    level = min(h[0] for _, h in heads)
    cuts = [(i, h[1]) for i, h in heads if h[0] == level]
    for n, (i, title) in enumerate(cuts):
        stop = cuts[n + 1][0] if n + 1 < len(cuts) else len(lines)
        out.append((title, "\n".join(lines[i + 1:stop])))
    return out


def read_text(loc: Location, rel: str) -> str | None:
    """A file's text through confine (no link followed); None if it is not there."""
    try:
        data = confine.read_bytes(loc.root, rel)
    except (FileNotFoundError, NotADirectoryError):
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValidationError(f"{loc.root / rel}: not UTF-8 text (byte {exc.start})",
                              hint="Save it as UTF-8; nothing was read or changed.") from None
    return text.removeprefix("\ufeff")  # a byte-order mark is not the text's (a write keeps it: sync reads its own)


def _memory_rules(loc: Location, text: str) -> list[Rule]:
    where = loc.shown
    scope = "project" if loc.scope == "project" else "global"
    span = block_span(text, where)
    own, block = (text, "") if span is None else (text[:span[0]] + text[span[1]:], text[span[0]:span[1]])
    rules: list[Rule] = []
    for managed, part in ((False, own), (True, block[len(BEGIN):-len(END)] if block else "")):
        for n, (title, content) in enumerate(sections(part)):
            body = _unmanaged(content) if managed else content
            if managed and not title:
                continue  # the block's own note
            if not body.strip():
                continue
            shown_title = title or loc.rel.rsplit("/", 1)[-1]
            rules.append(Rule(id=f"{loc.agent}:{where}#{n + 1 if not title else title}", agent=loc.agent,
                              path=where, title=shown_title, content=body, scope=scope, priority=loc.priority,
                              managed=managed))
    return rules


def _rule_file(loc: Location, rel: str, text: str) -> Rule:
    where = f"{loc.shown}/{rel}"
    doc = split_front(text, where, lenient=loc.fmt == "mdc")
    front = doc.front
    description = _text(front, "description", where)
    globs: tuple[str, ...] = ()
    always = True
    if loc.fmt == "mdc":
        globs = _globs(front, "globs", where)
        always = _bool(front, "alwaysApply", where, False)
    elif loc.fmt == "claude":
        globs = _globs(front, "paths", where)
    elif loc.fmt == "windsurf":
        trigger = _text(front, "trigger", where) or "always_on"
        if trigger not in ("always_on", "manual", "model_decision", "glob"):
            raise ValidationError(f"{where}: front matter 'trigger' must be always_on, manual, model_decision "
                                  f"or glob, not {trigger!r}")
        globs = _globs(front, "globs", where) if trigger == "glob" else ()
        always = trigger == "always_on"
        if trigger == "glob" and not globs:
            raise ValidationError(f"{where}: trigger glob needs 'globs'")
    elif loc.fmt == "copilot":
        globs = _globs(front, "applyTo", where)
        if not globs:
            raise ValidationError(f"{where}: front matter 'applyTo' is required (the globs the file applies to)",
                                  hint="Add applyTo: \"**\" for every file; nothing was changed.")
        if globs == ("**",) or globs == ("**/*",):
            globs = ()
    title, content = _title_and_body(doc.body)
    name = rel.rsplit("/", 1)[-1]
    stem = name[:-len(loc.pattern)] if loc.pattern and name.endswith(loc.pattern) else name
    scope = "path" if globs else ("project" if loc.scope == "project" else "global")
    if loc.fmt == "mdc" and not globs and not always and not description:
        always = False  # a manual rule (@-mentioned): still a rule of the project
    return Rule(id=f"{loc.agent}:{where}", agent=loc.agent, path=where,
                title=title or description or stem.replace("-", " ").replace("_", " "),
                content=_unmanaged(content) if copied(content) else content,
                description=description, scope=scope, globs=globs, always_apply=always,
                priority=loc.priority + (5 if globs else 0), managed=copied(content))


def steps_of(body: str) -> tuple[str, ...]:
    """The numbered or bulleted items of a body, outside code fences, in order."""
    lines = body.split("\n")
    fenced = fenced_lines(lines)
    return tuple(m.group(1) for i, s in enumerate(lines) if not fenced[i] and (m := _STEP.match(s)))


def _skill(loc: Location, rel: str, text: str, name: str) -> Skill:
    where = f"{loc.shown}/{rel}"
    doc = split_front(text, where)
    if loc.kind == "skills":
        declared = _text(doc.front, "name", where)
        # Claude Code's `name` is optional, the folder's name standing in for it
        # (code.claude.com/docs/en/skills#frontmatter-reference); Codex's SKILL.md must hold it
        # (developers.openai.com/codex/skills)
        if not declared and loc.agent != "claude-code":
            raise ValidationError(f"{where}: SKILL.md front matter needs 'name'",
                                  hint="Add name: <the skill's folder name>; nothing was changed.")
        name = declared or name
    title, body = _title_and_body(doc.body)
    description = _text(doc.front, "description", where) or title
    managed = copied(body)
    body = _unmanaged(body) if managed else body
    return Skill(name=name, agent=loc.agent, path=where, description=description, body=body,
                 kind="workflow" if loc.kind == "workflows" else "skill", steps=steps_of(body),
                 managed=managed)


# Rule folders their agents read with their sub-folders: Claude Code's .claude/rules
# (code.claude.com/docs/en/memory), Cursor's .cursor/rules (cursor.com/docs/context/rules),
# Copilot's .github/instructions ("within or below", docs.github.com ... add-repository-instructions)
NESTED = ("claude", "mdc", "copilot")
NESTED_DEPTH = 8


def _names(loc: Location, below: str = "", depth: int = 0) -> list[str]:
    """The names in the location's folder (for a nested rules folder, its files in sub-folders
    too, as `sub/name`); a link is refused, never followed."""
    folder = f"{loc.rel}/{below}" if below else loc.rel
    if confine.is_link(loc.root, folder):
        raise confine.LinkRefusedError(folder)
    names = sorted(confine.names_in(loc.root, folder))
    if loc.kind != "rules" or loc.fmt not in NESTED or depth >= NESTED_DEPTH:
        return names
    out: list[str] = []
    for name in names:
        rel = f"{below}/{name}" if below else name
        mode = confine.lstat(loc.root, f"{loc.rel}/{rel}").st_mode
        if stat.S_ISLNK(mode):
            raise confine.LinkRefusedError(f"{loc.rel}/{rel}")
        if not name.startswith(".") and stat.S_ISDIR(mode):
            out += _names(loc, rel, depth + 1)
        else:
            out.append(rel)
    return out


def read_location(loc: Location) -> tuple[list[Rule], list[Skill]]:
    """The rules and skills one location holds (nothing if it is not there). A link anywhere
    below the root is refused (PERMISSION_DENIED naming it), never followed."""
    if loc.kind == "memory":
        text = read_text(loc, loc.rel)
        return (_memory_rules(loc, text) if text is not None else []), []
    rules: list[Rule] = []
    skills: list[Skill] = []
    for name in _names(loc):
        rel = f"{loc.rel}/{name}"
        if loc.kind == "skills":
            if confine.is_link(loc.root, rel):
                raise confine.LinkRefusedError(rel)
            text = read_text(loc, f"{rel}/SKILL.md")
            if text is not None:
                skills.append(_skill(loc, f"{name}/SKILL.md", text, name))
            continue
        if not name.endswith(loc.pattern) or name.rsplit("/", 1)[-1].startswith("."):
            continue
        if confine.is_link(loc.root, rel):
            raise confine.LinkRefusedError(rel)
        text = read_text(loc, rel)
        if text is None:
            continue
        if loc.kind == "workflows":
            skills.append(_skill(loc, name, text, name[:-len(loc.pattern)]))
        else:
            rules.append(_rule_file(loc, name, text))
    return rules, skills
