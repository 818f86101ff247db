"""The official MCP memory server's file format (memory.jsonl, and the older memory.json).

One JSON object per line, `type` first: `entity` lines, then `relation` lines; lines of
another type are ignored, as the official server does. A single JSON object
`{"entities": [...], "relations": [...]}` (n2n-memory's memory.json) is read too.

memloci's export adds what the official format has no room for, where the official server
ignores it: `createdAt`/`updatedAt` and `observationDates` (one per observation) on entity
lines, `createdAt` on relation lines (the official server reads only its own keys), and after
them one `memory` line per free memory (a type it skips):
`{"type": "memory", "content", "tags", "memory_type", "importance", "metadata", "created_at", "updated_at"}`.
Reading such a file back restores all of it, timestamps included.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memloci.core import schema
from memloci.core.errors import ValidationError
from memloci.core.model import Entity, EntityInput, Memory, Relation, RelationInput, name_key

_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")


def _field(obj: dict[str, Any], key: str, where: str, kind: type) -> Any:
    if key not in obj:
        raise ValidationError(f"{where}: has no '{key}'")
    value = obj[key]
    if not isinstance(value, kind):
        raise ValidationError(f"{where}.{key}: must be {'an array' if kind is list else 'a string'}, got {type(value).__name__}")
    return value


def _object(obj: Any, where: str) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise ValidationError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    return obj


def _entity(obj: Any, where: str) -> EntityInput:
    obj = _object(obj, where)
    observations = obj.get("observations", [])
    if not isinstance(observations, list):
        raise ValidationError(f"{where}.observations: must be an array, got {type(observations).__name__}")
    return EntityInput(_field(obj, "name", where, str), _field(obj, "entityType", where, str), tuple(observations))


def _relation(obj: Any, where: str) -> RelationInput:
    obj = _object(obj, where)
    return RelationInput(_field(obj, "from", where, str), _field(obj, "relationType", where, str),
                         _field(obj, "to", where, str))


@dataclass(frozen=True, slots=True)
class MemoryLine:
    """A free memory as exported, timestamps included."""

    content: str
    tags: tuple[str, ...]
    memory_type: str
    importance: str
    metadata: dict[str, Any]
    created_at: str
    updated_at: str


@dataclass(slots=True)
class OfficialFile:
    entities: list[tuple[int, EntityInput]]  # (line, entity)
    relations: list[tuple[int, RelationInput]]
    ignored_lines: list[int]  # lines of another `type`, skipped as the official server does
    memories: list[tuple[int, MemoryLine]] = field(default_factory=list)
    # memloci's own dates, where the file has them: name_key -> (created, updated, observation dates)
    entity_dates: dict[str, tuple[str, str, list[str]]] = field(default_factory=dict)
    relation_dates: dict[tuple[str, str, str], str] = field(default_factory=dict)  # (from key, type, to key)
    # importers of richer formats (importers/): name_key -> an idempotent edit of the entity's
    # document text, applied after the graph is written (e.g. a note's prose as the body). It
    # returns the new text and whether the entity is the source's own (then it takes the
    # source's dates), not a person's entity of the same name that the import merged into.
    entity_edits: dict[str, Callable[[str], tuple[str, bool]]] = field(default_factory=dict)
    # set when the source is one JSON object (n2n-memory's memory.json): the name errors give
    # it, and then an item's number is its index in the `entities` or `relations` array
    object_name: str | None = None

    def where(self, kind: str, number: int) -> str:
        """How a message names an item of the source: `line 3` of a JSONL file, or
        `.mcp/memory.json relations[0]` of a JSON object. `kind`: "entity" or "relation"."""
        if self.object_name is None:
            return f"line {number}"
        return f"{self.object_name} {'entities' if kind == 'entity' else 'relations'}[{number}]"


def _time(obj: dict[str, Any], key: str, line: int) -> str:
    value = obj.get(key)
    if not isinstance(value, str) or not _TIME.match(value):
        raise ValidationError(f"line {line}.{key}: must be a UTC time like 2026-11-21T04:50:00Z, got {value!r}")
    return value


def _memory(obj: dict[str, Any], line: int) -> MemoryLine:
    where = f"line {line}"
    known = {"type", "content", "tags", "memory_type", "importance", "metadata", "created_at", "updated_at"}
    unknown = sorted(set(obj) - known)
    if unknown:
        raise ValidationError(f"{where}: unknown key '{unknown[0]}' in a memory line (known: {', '.join(sorted(known))})")
    importance = obj.get("importance", "medium")
    return MemoryLine(
        content=schema.clean_text(obj.get("content"), f"{where}.content", schema.MEMORY_MAX),
        tags=tuple(schema.validate_tags(obj.get("tags", []), f"{where}.tags")),
        memory_type=schema.clean_label(obj.get("memory_type", "note"), f"{where}.memory_type", schema.TAG_MAX),
        importance=schema.validate_importance(importance, f"{where}.importance"),
        metadata=schema.validate_metadata(obj.get("metadata", {}), f"{where}.metadata"),
        created_at=_time(obj, "created_at", line),
        updated_at=_time(obj, "updated_at", line),
    )


def _dates(obj: dict[str, Any], line: int, observations: int) -> tuple[str, str, list[str]] | None:
    if "createdAt" not in obj:
        return None
    dates = obj.get("observationDates", [])
    if not isinstance(dates, list) or len(dates) != observations:
        raise ValidationError(f"line {line}.observationDates: must be an array with one time per observation")
    return (_time(obj, "createdAt", line), _time(obj, "updatedAt", line),
            [_time({"t": d}, "t", line) for d in dates])


def read_graph_object(whole: Any, name: str) -> OfficialFile:
    """`{"entities": [...], "relations": [...]}`: n2n-memory's memory.json (and the official
    server's oldest files). The one reader of that form, for `import jsonl` and a project's
    carry-over alike; `name` is how messages call the file."""
    if not isinstance(whole, dict):
        raise ValidationError(f"{name}: expected a JSON object, got {type(whole).__name__}")
    arrays = {}
    for key in ("entities", "relations"):
        items = whole.get(key) or []
        if not isinstance(items, list):
            raise ValidationError(f"{name} {key}: must be an array, got {type(items).__name__}")
        arrays[key] = items
    return OfficialFile([(i, _entity(obj, f"{name} entities[{i}]")) for i, obj in enumerate(arrays["entities"])],
                        [(i, _relation(obj, f"{name} relations[{i}]")) for i, obj in enumerate(arrays["relations"])],
                        [], object_name=name)


def read_official(path: Path) -> OfficialFile:
    """Entities and relations of a memory.jsonl / memory.json, each with its line number."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValidationError(f"{path}: not UTF-8 text ({exc})") from exc
    stripped = text.lstrip()
    if stripped.startswith("{") and '"entities"' in text and "\n{" not in stripped:
        try:
            whole = json.loads(text)
        except json.JSONDecodeError:
            whole = None
        if isinstance(whole, dict) and "entities" in whole:
            return read_graph_object(whole, path.name)
    entities: list[tuple[int, EntityInput]] = []
    relations: list[tuple[int, RelationInput]] = []
    ignored: list[int] = []
    memories: list[tuple[int, MemoryLine]] = []
    entity_dates: dict[str, tuple[str, str, list[str]]] = {}
    relation_dates: dict[tuple[str, str, str], str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        where = f"line {number}"
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ValidationError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})") from exc
        if _object(obj, where).get("type") == "entity":
            entity = _entity(obj, where)
            entities.append((number, entity))
            dates = _dates(obj, number, len(entity.observations))
            if dates is not None:
                entity_dates[name_key(entity.name)] = dates
        elif obj.get("type") == "relation":
            relation = _relation(obj, where)
            relations.append((number, relation))
            if "createdAt" in obj:
                relation_dates[(name_key(relation.from_entity), relation.relation_type,
                                name_key(relation.to_entity))] = _time(obj, "createdAt", number)
        elif obj.get("type") == "memory":
            memories.append((number, _memory(obj, number)))
        else:
            ignored.append(number)
    return OfficialFile(entities, relations, ignored, memories, entity_dates, relation_dates)


def render_official(entities: Iterable[Entity], relations: Iterable[Relation],
                    memories: Iterable[Memory] = (), *, dates: bool = False) -> str:
    """JSONL the official server loads: entities first, then relations, one object per line;
    with `dates`, memloci's timestamps too, and then the free memories (which it skips)."""
    lines = []
    for e in entities:
        item: dict[str, Any] = {"type": "entity", "name": e.name, "entityType": e.entity_type,
                                "observations": [o.content for o in e.observations]}
        if dates:
            item.update(createdAt=e.created_at, updatedAt=e.updated_at,
                        observationDates=[o.created_at for o in e.observations])
        lines.append(json.dumps(item, ensure_ascii=False))
    for r in relations:
        item = {"type": "relation", "from": r.from_entity, "to": r.to_entity, "relationType": r.relation_type}
        if dates and r.created_at:
            item["createdAt"] = r.created_at
        lines.append(json.dumps(item, ensure_ascii=False))
    lines += [json.dumps({"type": "memory", "content": m.content, "tags": list(m.tags), "memory_type": m.memory_type,
                          "importance": m.importance, "metadata": m.metadata, "created_at": m.created_at,
                          "updated_at": m.updated_at}, ensure_ascii=False)
              for m in memories]
    return "".join(line + "\n" for line in lines)
