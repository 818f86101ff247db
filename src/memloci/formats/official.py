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
import math
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from memloci.core import schema
from memloci.core.errors import ValidationError
from memloci.core.model import Entity, EntityInput, Memory, Relation, RelationInput, name_key

_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")  # NUL, and a surrogate alone (a `\ud800` escape, or bytes not UTF-8)


# -- the row checks every reader of another server's data shares ---------------------------
# A row of a foreign file can hold anything. These turn what no engine could store into a
# ValidationError naming the row, so the reader skips that row and lists it.


def shown(value: Any, limit: int = 60) -> str:
    """A value as a message quotes it: its repr, cut short (a row may hold megabytes)."""
    try:
        text = repr(value)
    except ValueError:  # an integer too long to print
        text = f"a {type(value).__name__} too long to show"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def check_storable(value: Any, where: str) -> None:
    """Refuse a row holding text no engine can store: a NUL character, or a lone surrogate (what
    a `\\ud800` escape or bytes that are not UTF-8 become). Strings inside lists and objects
    (their keys too) are looked at; `where` names the row."""
    if isinstance(value, str) and not _UNSTORABLE.search(value):
        return  # the common case, at once
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            bad = _UNSTORABLE.search(item)
            if bad:
                what = ("a NUL character (\\u0000)" if bad.group() == "\x00" else
                        "bytes that are not UTF-8 text (or a lone surrogate escape such as \\ud800)")
                raise ValidationError(f"{where}: holds {what}, which cannot be stored")
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)


def _finite(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(f"the number {shown(text)} is too large for a 64-bit float")
    return number


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _int_or_infinite(text: str) -> float | int:
    return int(text) if len(text) <= 4000 else math.inf  # Python reads no longer integer


_ROW_JSON = json.JSONDecoder(parse_float=_finite, parse_constant=_no_constant)
_WHOLE_JSON = json.JSONDecoder(parse_int=_int_or_infinite)


def parse_json(text: str, where: str, *, whole: bool = False) -> Any:
    """JSON as the importers read it, with every way it can fail a ValidationError naming `where`:
    strict JSON for a row (no NaN or Infinity, no number beyond a float). A `whole` file of many
    rows (memorix's observations.json) takes them, as non-finite floats, so that the rows holding
    them fail their own checks instead of the file failing."""
    try:
        return (_WHOLE_JSON if whole else _ROW_JSON).decode(text)
    except json.JSONDecodeError as exc:
        at = f"line {exc.lineno} column {exc.colno}" if exc.lineno > 1 else f"column {exc.colno}"
        raise ValidationError(f"{where}: not valid JSON ({exc.msg} at {at})") from exc
    except RecursionError as exc:
        raise ValidationError(f"{where}: not valid JSON (nested too deeply to read)") from exc
    except ValueError as exc:  # a float beyond a double, NaN, an integer of more than 4,300 digits
        raise ValidationError(f"{where}: not valid JSON ({exc})") from exc


def json_lines(data: bytes, name: str = "line") -> Iterator[tuple[int, Any]]:
    """The lines of a JSON Lines file: (line number, the JSON value, or the ValidationError that
    names why that line cannot be read). A byte order mark at the start is skipped; lines end at
    `\\n` only (a U+2028 inside a JSON string is text, not a line end); blank lines are left out.
    `name`: how a message names a line (`line 3`, or `entities.jsonl:3` when `name` is a file)."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    for number, raw in enumerate(data.split(b"\n"), start=1):
        where = f"line {number}" if name == "line" else f"{name}:{number}"
        if not raw.strip():
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            yield number, ValidationError(f"{where}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at column "
                                          f"{exc.start + 1} is no character)")
            continue
        try:
            yield number, parse_json(text, where)
        except ValidationError as exc:
            yield number, exc


def utc_time(value: Any, where: str) -> str:
    """A time in memloci's own UTC form (2026-11-21T04:50:00Z), a real one (no month 13, no year 0)."""
    if not isinstance(value, str) or not _TIME.match(value):
        raise ValidationError(f"{where}: must be a UTC time like 2026-11-21T04:50:00Z, got {shown(value)}")
    try:
        datetime.fromisoformat(value[:-1])
    except ValueError as exc:
        raise ValidationError(f"{where}: {shown(value)} is not a date that exists ({exc})") from exc
    return value


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
    """An entity line or item, checked by the rules every create_entities call meets."""
    obj = _object(obj, where)
    observations = obj.get("observations", [])
    if not isinstance(observations, list):
        raise ValidationError(f"{where}.observations: must be an array, got {type(observations).__name__}")
    entity = EntityInput(_field(obj, "name", where, str), _field(obj, "entityType", where, str), tuple(observations))
    check_storable(entity.name, f"{where}.name")
    check_storable(entity.entity_type, f"{where}.entityType")
    check_storable(list(entity.observations), f"{where}.observations")
    return schema.validate_entity(entity, where)


def _relation(obj: Any, where: str) -> RelationInput:
    obj = _object(obj, where)
    relation = RelationInput(_field(obj, "from", where, str), _field(obj, "relationType", where, str),
                             _field(obj, "to", where, str))
    for key, value in (("from", relation.from_entity), ("relationType", relation.relation_type),
                       ("to", relation.to_entity)):
        check_storable(value, f"{where}.{key}")
    return schema.validate_relation(relation, where)


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
    # `links_wait`, the edit's second argument: whether the library keeps a link to a name no
    # entity has as a typed link that waits for it (its schema lists no relation types).
    entity_edits: dict[str, Callable[[str, bool], tuple[str, bool]]] = field(default_factory=dict)
    # set when the source is one JSON object (n2n-memory's memory.json): the name errors give
    # it, and then an item's number is its index in the `entities` or `relations` array
    object_name: str | None = None
    # an entity's note in the source, by name_key (basic-memory's `people/anna.md`): a Markdown
    # library creates the entity's file there, so the source's folders stay folders
    entity_paths: dict[str, str] = field(default_factory=dict)
    # what could not be read and was left out: (where, e.g. "line 3", the reason)
    skipped: list[tuple[str, str]] = field(default_factory=list)

    def where(self, kind: str, number: int) -> str:
        """How a message names an item of the source: `line 3` of a JSONL file, or
        `.mcp/memory.json relations[0]` of a JSON object. `kind`: "entity" or "relation"."""
        if self.object_name is None:
            return f"line {number}"
        return f"{self.object_name} {'entities' if kind == 'entity' else 'relations'}[{number}]"


def _time(obj: dict[str, Any], key: str, line: int) -> str:
    return utc_time(obj.get(key), f"line {line}.{key}")


MEMORY_KEYS = {"type", "content", "tags", "memory_type", "importance", "metadata", "created_at", "updated_at"}


def _memory(obj: dict[str, Any], line: int) -> MemoryLine:
    where = f"line {line}"
    unknown = sorted(set(obj) - MEMORY_KEYS)
    if unknown:
        raise ValidationError(f"{where}: unknown key {shown(unknown[0])} in a memory line "
                              f"(known: {', '.join(sorted(MEMORY_KEYS))})")
    for key, value in obj.items():
        check_storable(value, f"{where}.{key}")
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
            [utc_time(d, f"line {line}.observationDates[{i}]") for i, d in enumerate(dates)])


def read_graph_object(whole: Any, name: str, *, skip_bad: bool = False) -> OfficialFile:
    """`{"entities": [...], "relations": [...]}`: n2n-memory's memory.json (and the official
    server's oldest files). The one reader of that form, for `import jsonl` and a project's
    carry-over alike; `name` is how messages call the file.

    With `skip_bad` (`memloci import jsonl`), an item that cannot be read is skipped and listed
    in `skipped`, and the rest is read. Without (a project's carry-over, tried again on each use
    until it succeeds, so nothing is dropped unseen), the first such item refuses the file."""
    if not isinstance(whole, dict):
        raise ValidationError(f"{name}: expected a JSON object, got {type(whole).__name__}")
    arrays = {}
    for key in ("entities", "relations"):
        items = whole.get(key) or []
        if not isinstance(items, list):
            raise ValidationError(f"{name} {key}: must be an array, got {type(items).__name__}")
        arrays[key] = items
    found = OfficialFile([], [], [], object_name=name)

    def each(key: str) -> Iterator[tuple[int, Any, str]]:
        for i, obj in enumerate(arrays[key]):
            yield i, obj, f"{name} {key}[{i}]"

    for i, obj, where in each("entities"):
        try:
            found.entities.append((i, _entity(obj, where)))
        except ValidationError as exc:
            if not skip_bad:
                raise
            found.skipped.append((where, exc.message))
    for i, obj, where in each("relations"):
        try:
            found.relations.append((i, _relation(obj, where)))
        except ValidationError as exc:
            if not skip_bad:
                raise
            found.skipped.append((where, exc.message))
    return found


def read_official(path: Path) -> OfficialFile:
    """Entities, relations and memories of a memory.jsonl / memory.json, each with its line
    number. A line that cannot be read (not JSON, not UTF-8, a wrong type, a date that does not
    exist, a memory line with a key memloci does not know) is skipped and listed in `skipped`
    by its line number, with the reason; the rest is read."""
    data = path.read_bytes()
    stripped = data.lstrip().removeprefix(b"\xef\xbb\xbf").lstrip()
    if stripped.startswith(b"{") and b'"entities"' in data and b"\n{" not in stripped:
        try:
            whole = parse_json(data.decode("utf-8-sig", "surrogateescape"), path.name, whole=True)
        except ValidationError:
            whole = None
        if isinstance(whole, dict) and "entities" in whole:
            return read_graph_object(whole, path.name, skip_bad=True)
    found = OfficialFile([], [], [])
    for number, obj in json_lines(data):
        where = f"line {number}"
        try:
            if isinstance(obj, ValidationError):
                raise obj
            kind = _object(obj, where).get("type")
            if kind == "entity":
                entity = _entity(obj, where)
                dates = _dates(obj, number, len(entity.observations))
                found.entities.append((number, entity))
                if dates is not None:
                    found.entity_dates[name_key(entity.name)] = dates
            elif kind == "relation":
                relation = _relation(obj, where)
                at = _time(obj, "createdAt", number) if "createdAt" in obj else None
                found.relations.append((number, relation))
                if at is not None:
                    found.relation_dates[(name_key(relation.from_entity), relation.relation_type,
                                          name_key(relation.to_entity))] = at
            elif kind == "memory":
                found.memories.append((number, _memory(obj, number)))
            else:
                found.ignored_lines.append(number)
        except ValidationError as exc:
            found.skipped.append((where, exc.message))
    return found


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
