"""At session start, the project's rules as context: what a hook hands back to an agent that
takes context then (events.SESSION_START: Claude Code, Gemini CLI).

The rules are the memories `memloci rules remember` stored (type `rule`, tagged with the
project): those not superseded by a newer text of the same rule and not archived, newest first,
at most MAX_RULES of them and MAX_CONTEXT_CHARS characters in all. They are read from the
project's own library (when it has memory in `<root>/.mcp/`) and from each mounted library,
without the embedder and without creating a library: a plain read of SQLite or Markdown, within
the hook's deadline. A library that cannot be read is logged and skipped.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from memloci.core.settings import Settings
from memloci.core.tokens import clipped
from memloci.hooks.events import HookEvent

MAX_RULES = 20
MAX_CONTEXT_CHARS = 2000  # the whole reminder, its heading and its last line included
MIN_CUT = 200  # a rule that does not fit whole is shown cut only with this much room for it
SEPARATOR = "\n\n"

log = logging.getLogger("memloci.hook")


def rule_memories(root: Path, has_memory: bool, settings: Settings, most: int = MAX_RULES) -> list[Any]:
    """The project's current rule memories, newest first (at most `most`), from its own library
    and the mounted ones; one memory per rule (its newest text) and per content."""
    from memloci.app.config import default_specs
    from memloci.app.projects import ProjectRef, project_id
    from memloci.app.registry import LibraryRegistry
    from memloci.core.errors import LibraryMissingError
    from memloci.core.model import MemoryFilter
    from memloci.search.embedder import EmbedderHandle
    from memloci.service.facade import MemoryService
    from memloci.service.workspace import RULE_MEMORY_TYPE, rule_project_tag

    wanted = MemoryFilter(tags=(RULE_MEMORY_TYPE, rule_project_tag(project_id(root))), match_all=True,
                          memory_type=RULE_MEMORY_TYPE)
    registry = LibraryRegistry(default_specs(settings), create_missing=False, settings=settings)
    service = MemoryService(registry, EmbedderHandle("none", settings), embed_pending=False, extract=False)
    libraries: list[Any] = [ProjectRef(str(root), None, may_create=False)] if has_memory else []
    libraries += registry.names()
    found: list[Any] = []
    try:
        for library in libraries:
            name = "the project's" if isinstance(library, ProjectRef) else f"'{library}'"
            try:
                page, _ = service.list_memories(page_size=most, filters=wanted, library=library)
            except LibraryMissingError:
                continue  # not created yet: no rules there
            except Exception as exc:  # a broken library: the others' rules are still given
                log.error("rules of %s library not read: %s: %s", name, type(exc).__name__, exc)
                continue
            found += page
    finally:
        service.close()
    found.sort(key=lambda m: m.created_at, reverse=True)
    kept: list[Any] = []
    seen: set[str] = set()
    for memory in found:
        rule = memory.metadata.get("rule_id")
        keys = {memory.content_hash} | ({f"rule:{rule}"} if isinstance(rule, str) else set())
        if keys & seen:
            continue
        seen |= keys
        kept.append(memory)
    return kept[:most]


def reminder(project: str, texts: list[str], most_chars: int = MAX_CONTEXT_CHARS) -> str:
    """The rules as one text of at most `most_chars` characters: a heading, each rule whole
    while they fit (the first that does not is cut at a safe boundary, "…" marking the cut, when
    there is room for a useful part of it), and how many were left out. '' without rules."""
    if not texts:
        return ""
    parts = [f"Rules of this project ({project}) that memloci remembers, newest first:"]
    used = len(parts[0])

    def left_out(n: int) -> str:
        return f"({n} more rule(s) not shown: `memloci rules list`, or retrieve_memory with memory_type \"rule\".)"

    reserve = len(SEPARATOR) + len(left_out(len(texts)))  # room kept for the last line
    shown = 0
    for i, text in enumerate(t.strip() for t in texts):
        room = most_chars - used - len(SEPARATOR) - (0 if i == len(texts) - 1 else reserve)
        whole = len(text) <= room
        if not whole and room < MIN_CUT:
            break
        piece = text if whole else clipped(text, room - 1)  # clipped adds one character, the "…"
        parts.append(piece)
        used += len(SEPARATOR) + len(piece)
        shown += 1
        if not whole:
            break
    if shown < len(texts):
        parts.append(left_out(len(texts) - shown))
    return SEPARATOR.join(parts)


def remind(event: HookEvent, root: Path | None, has_memory: bool, settings: Settings) -> tuple[str, str]:
    """The context for a session starting in `root` (the event's project), and the log line.
    Outside a project, or a project without remembered rules: no context ('')."""
    from memloci.app.projects import project_id

    source = f" ({event.detail})" if event.detail else ""
    if root is None:
        return "", f"{event.agent} {event.event}{source}: outside a project, no rules to remind of"
    memories = rule_memories(root, has_memory, settings)
    pid = project_id(root)
    context = reminder(pid, [m.content for m in memories])
    if not context:
        return "", f"{event.agent} {event.event}{source}: no rules remembered for project {pid}"
    return context, (f"{event.agent} {event.event}{source}: reminded of {len(memories)} rule(s) of project {pid} "
                     f"({len(context)} characters)")
