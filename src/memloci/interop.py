"""The official MCP memory server's file format (memory.jsonl, and the older memory.json).

One JSON object per line, `type` first: `entity` lines, then `relation` lines; lines of
another type are ignored, as the official server does. A single JSON object
`{"entities": [...], "relations": [...]}` (n2n-memory's memory.json) is read too.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .errors import ValidationError
from .model import Entity, EntityInput, Relation, RelationInput


def _field(obj: dict[str, Any], key: str, line: int, kind: type) -> Any:
    if key not in obj:
        raise ValidationError(f"line {line}: {obj.get('type', 'item')} has no '{key}'")
    value = obj[key]
    if not isinstance(value, kind):
        raise ValidationError(f"line {line}.{key}: must be {'an array' if kind is list else 'a string'}, got {type(value).__name__}")
    return value


def _object(obj: Any, line: int) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise ValidationError(f"line {line}: expected a JSON object, got {type(obj).__name__}")
    return obj


def _entity(obj: Any, line: int) -> EntityInput:
    obj = _object(obj, line)
    observations = obj.get("observations", [])
    if not isinstance(observations, list):
        raise ValidationError(f"line {line}.observations: must be an array, got {type(observations).__name__}")
    return EntityInput(_field(obj, "name", line, str), _field(obj, "entityType", line, str), tuple(observations))


def _relation(obj: Any, line: int) -> RelationInput:
    obj = _object(obj, line)
    return RelationInput(_field(obj, "from", line, str), _field(obj, "relationType", line, str), _field(obj, "to", line, str))


@dataclass(slots=True)
class OfficialFile:
    entities: list[tuple[int, EntityInput]]  # (line, entity)
    relations: list[tuple[int, RelationInput]]
    ignored_lines: list[int]  # lines of another `type`, skipped as the official server does


def read_official(path: Path) -> OfficialFile:
    """Entities and relations of a memory.jsonl / memory.json, each with its line number."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValidationError(f"{path}: not UTF-8 text ({exc})") from exc
    entities: list[tuple[int, EntityInput]] = []
    relations: list[tuple[int, RelationInput]] = []
    stripped = text.lstrip()
    if stripped.startswith("{") and '"entities"' in text and "\n{" not in stripped:
        try:
            whole = json.loads(text)
        except json.JSONDecodeError:
            whole = None
        if isinstance(whole, dict) and "entities" in whole:
            # "line" numbers here count items of each array, from 1
            entities = [(i, _entity(obj, i)) for i, obj in enumerate(whole.get("entities") or [], start=1)]
            relations = [(i, _relation(obj, i)) for i, obj in enumerate(whole.get("relations") or [], start=1)]
            return OfficialFile(entities, relations, [])
    ignored: list[int] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ValidationError(f"line {number}: not valid JSON ({exc.msg} at column {exc.colno})") from exc
        if _object(obj, number).get("type") == "entity":
            entities.append((number, _entity(obj, number)))
        elif obj.get("type") == "relation":
            relations.append((number, _relation(obj, number)))
        else:
            ignored.append(number)
    return OfficialFile(entities, relations, ignored)


def render_official(entities: Iterable[Entity], relations: Iterable[Relation]) -> str:
    """JSONL the official server loads: entities first, then relations, one object per line."""
    lines = [json.dumps({"type": "entity", "name": e.name, "entityType": e.entity_type,
                         "observations": [o.content for o in e.observations]}, ensure_ascii=False)
             for e in entities]
    lines += [json.dumps({"type": "relation", "from": r.from_entity, "to": r.to_entity,
                          "relationType": r.relation_type}, ensure_ascii=False)
              for r in relations]
    return "".join(line + "\n" for line in lines)
