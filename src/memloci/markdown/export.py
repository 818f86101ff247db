"""A library as one Markdown file (`memloci export markdown`, the `export_markdown` tool): the
graph, one section per entity sorted by name so diffs stay clean, then the free memories and
the hot context. `render_export` is the one renderer of it; an entity's own Markdown file (front
matter and body) is markdown/document.py's `render_document`."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from memloci.core.model import Entity, Memory, Relation


def _line(text: str) -> str:
    # An observation may span lines; indent continuation lines so the list item stays one item.
    return text.replace("\n", "\n  ")


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def render_export(entities: Iterable[Entity], relations: Iterable[Relation], memories: Iterable[Memory] = (),
                  context: Mapping[str, Any] | None = None, *, title: str = "Knowledge graph") -> str:
    """The export: `# title`, the graph, then `## Memories` and `## Current context` when there are any."""
    text = _graph(entities, relations, title) + _memories(memories)
    if context:
        text += "\n## Current context\n\n" + "".join(
            f"- {k.replace('_', ' ')}: {', '.join(v) if isinstance(v, list) else v}\n" for k, v in context.items())
    return text


def _graph(entities: Iterable[Entity], relations: Iterable[Relation], title: str) -> str:
    outgoing: dict[str, list[Relation]] = defaultdict(list)
    for r in relations:
        outgoing[r.from_entity.casefold()].append(r)
    ordered = sorted(entities, key=lambda e: (e.name.casefold(), e.name))
    n_relations = sum(len(v) for v in outgoing.values())
    parts = [f"# {title}\n", f"{_count(len(ordered), 'entity', 'entities')}, {_count(n_relations, 'relation', 'relations')}.\n"]
    for e in ordered:
        parts.append(f"\n## {e.name}\n\n")
        parts.append(f"- type: {e.entity_type}\n")
        if e.aliases:
            parts.append(f"- aliases: {', '.join(e.aliases)}\n")
        parts.append(f"- created: {e.created_at}\n")
        if e.observations:
            parts.append("\n### Observations\n\n")
            parts.extend(f"- {_line(o.content)}\n" for o in e.observations)
        rels = sorted(outgoing.get(e.name.casefold(), []), key=lambda r: (r.relation_type, r.to_entity.casefold()))
        if rels:
            parts.append("\n### Relations\n\n")
            parts.extend(f"- {r.relation_type} → {r.to_entity}\n" for r in rels)
    return "".join(parts)


def _memories(memories: Iterable[Memory]) -> str:
    """Free memories as a section after the graph: oldest first, each with its time, type, importance and tags."""
    items = list(memories)
    if not items:
        return ""
    parts = [f"\n## Memories\n\n{_count(len(items), 'memory', 'memories')}, oldest first.\n\n"]
    for m in items:
        marks = f"{m.memory_type}" + (f", {m.importance}" if m.importance != "medium" else "")
        tags = "".join(f" #{t}" for t in m.tags)
        parts.append(f"- {m.created_at} ({marks}): {_line(m.content)}{tags}\n")
    return "".join(parts)
