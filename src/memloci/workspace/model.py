"""The workspace's concepts as frozen dataclasses: a rule, a skill (or a Windsurf workflow), and
the merged view of every agent's files."""

from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import dataclass, field


def normalize(text: str) -> str:
    """The text a hash is taken over: line endings unified, trailing spaces and blank lines at
    either end dropped, runs of blank lines made one. Two formats holding the same words hash alike."""
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
    out: list[str] = []
    for line in lines:
        if not line and (not out or not out[-1]):
            continue
        out.append(line)
    while out and not out[-1]:
        out.pop()
    return "\n".join(out)


_FENCE = re.compile(r"^ {0,3}(```|~~~)")
# A line that begins a Markdown block of its own (a heading, a list item, a quote, a table row,
# a fence, HTML): never the soft-wrapped rest of the line before it.
_BLOCK_START = re.compile(r"^\s*(#|>|[-*+]\s|\d+[.)]\s|\||```|~~~|<)")
_NOT_A_PARAGRAPH = re.compile(r"^(\s*(#|\||```|~~~|<)|    |\t)")  # a heading, table row, fence, HTML, code


def _unwrapped(lines: list[str]) -> list[str]:
    """A paragraph's soft-wrapped lines joined with a space, as Markdown renders them, so the
    same words wrapped at another column hash alike; code fences and block starts are kept."""
    out: list[str] = []
    fenced = False
    for line in lines:
        if _FENCE.match(line):
            fenced = not fenced
            out.append(line)
            continue
        prev = out[-1] if out else ""
        if (not fenced and line.strip() and prev.strip() and not _BLOCK_START.match(line)
                and not _NOT_A_PARAGRAPH.match(prev)):
            out[-1] = prev + " " + line.strip()
        else:
            out.append(line)
    return out


def content_hash(text: str) -> str:
    """The hash of a rule's words: normalized, a paragraph's soft-wrapped lines joined, and runs of
    spaces inside a line made one (indentation kept: it nests lists)."""
    lines = [re.sub(r"(?<=\S)[ \t]+", " ", line) for line in _unwrapped(normalize(text).split("\n"))]
    return hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()[:16]


def slug(text: str, fallback: str = "rule") -> str:
    """A file name part from a title: lower-case words joined by '-' (at most 60 characters, cut between words);
    `fallback` for a title with no Latin letter or digit (a title in Chinese, say)."""
    latin = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")  # Ünïcode: unicode
    out = ""
    for word in re.findall(r"[a-z0-9]+", latin.lower()):
        joined = f"{out}-{word}" if out else word
        if len(joined) > 60:  # cut between words, a single long word cut at 60
            out = out or word[:60]
            break
        out = joined
    return out or fallback


@dataclass(frozen=True)
class Rule:
    """One rule as an agent holds it, with the wrapping of its format taken off.

    `content` is the rule's text without its title heading and front matter; `hash` is over it,
    normalized. `managed`: it sits in memloci's own block or file (a copy `rules sync` wrote),
    so it is neither a source of a sync nor a party to a conflict."""

    id: str
    agent: str
    path: str  # as shown: relative to the project, or ~/... for a user-wide file
    title: str
    content: str
    description: str = ""
    scope: str = "project"  # global (user-wide) | project | path (files matching globs)
    globs: tuple[str, ...] = ()
    always_apply: bool = True
    priority: int = 0
    managed: bool = False

    @property
    def hash(self) -> str:
        return content_hash(self.content)

    @property
    def key(self) -> tuple[str, tuple[str, ...], str]:
        """What two rules must share to be about the same thing: scope, globs, title."""
        return (self.scope, self.globs if self.scope == "path" else (), self.title.casefold().strip())


@dataclass(frozen=True)
class Skill:
    """A skill (a folder with SKILL.md) or a Windsurf workflow: a named set of steps an agent runs
    when asked. `steps` are the numbered or bulleted items of its body, in order."""

    name: str
    agent: str
    path: str
    description: str
    body: str
    kind: str = "skill"  # skill | workflow
    steps: tuple[str, ...] = ()
    managed: bool = False

    @property
    def hash(self) -> str:
        return content_hash(self.body)


@dataclass(frozen=True)
class Duplicate:
    """Rules with one content hash: `kept` (the highest priority) stands for all of them."""

    kept: Rule
    dropped: tuple[Rule, ...]


@dataclass(frozen=True)
class Conflict:
    """Rules about the same thing (scope, globs, title) that say different things; for a person."""

    key: tuple[str, tuple[str, ...], str]
    rules: tuple[Rule, ...]


@dataclass(frozen=True)
class SkillClash:
    name: str
    kept: Skill
    dropped: tuple[Skill, ...]


@dataclass(frozen=True)
class Workspace:
    """Every agent's rules and skills merged: one rule per hash, conflicts and clashes listed."""

    rules: tuple[Rule, ...]  # deduplicated, the person's own (managed copies aside)
    skills: tuple[Skill, ...]  # one per name, the first found
    duplicates: tuple[Duplicate, ...] = ()
    conflicts: tuple[Conflict, ...] = ()
    skill_clashes: tuple[SkillClash, ...] = ()
    managed: tuple[Rule | Skill, ...] = field(default=())  # what earlier syncs wrote
    problems: tuple[str, ...] = ()  # user-wide locations not read (reached through a link)
