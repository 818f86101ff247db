"""Validation rules and limits for everything a caller sends.

Every rule raises `ValidationError` naming the field (`entities[2].name`) and the rule,
before anything is written, so a rejected batch changes nothing.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from typing import Any, cast

from memloci.core.errors import InvalidRelationError, ValidationError
from memloci.core.model import (
    IMPORTANCE,
    EntityInput,
    MemoryFilter,
    MemoryInput,
    ObservationBatch,
    RelationInput,
    name_key,
)

# Limits, documented in the README ("Limits"). Generous for real use, small enough that one
# call cannot exhaust memory or flood a model's context.
NAME_MAX = 256
TYPE_MAX = 128
OBSERVATION_MAX = 10_000
QUERY_MAX = 1_000
BATCH_MAX = 1_000
ITEMS_PER_ENTRY_MAX = 1_000
PAGE_MAX = 10_000
MEMORY_MAX = 20_000
TAG_MAX = 64
TAGS_MAX = 50
METADATA_MAX = 16_384  # bytes of JSON
OFFSET_MAX = 1_000_000_000
SEARCH_LIMIT_MAX = 1_000

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_CONTROL_IN_TEXT = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def _require_str(value: object, field: str) -> str:
    if not isinstance(value, str):
        raise ValidationError(f"{field}: must be a string, got {type(value).__name__}")
    return value


def _clean(value: object, field: str, max_len: int, control: re.Pattern[str], allowed: str) -> str:
    text = _require_str(value, field).strip()
    if not text:
        raise ValidationError(f"{field}: must not be empty")
    if len(text) > max_len:
        raise ValidationError(f"{field}: must be at most {max_len} characters, got {len(text)}")
    if control.search(text):
        raise ValidationError(f"{field}: must not contain control characters{allowed}")
    return unicodedata.normalize("NFC", text)


def clean_name(value: object, field: str) -> str:
    """A name: one line, trimmed, not empty, at most NAME_MAX characters."""
    return _clean(value, field, NAME_MAX, _CONTROL, " (newline, tab, NUL)")


def clean_type(value: object, field: str) -> str:
    return _clean(value, field, TYPE_MAX, _CONTROL, " (newline, tab, NUL)")


def clean_text(value: object, field: str, max_len: int = OBSERVATION_MAX) -> str:
    """Free text (an observation): trimmed, not empty, newlines and tabs allowed."""
    return _clean(value, field, max_len, _CONTROL_IN_TEXT, " other than newline and tab")


def check_batch(items: object, field: str, max_items: int = BATCH_MAX) -> Sequence:
    """An array of at most `max_items`; an empty one is a no-op, as with the official server."""
    if not isinstance(items, (list, tuple)):
        raise ValidationError(f"{field}: must be an array, got {type(items).__name__}")
    if len(items) > max_items:
        raise ValidationError(
            f"{field}: at most {max_items} items per call, got {len(items)}",
            hint="Split the batch into several calls (or use `memloci import` for bulk loads).",
        )
    return items


def check_int(value: object, field: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(f"{field}: must be an integer, got {type(value).__name__}")
    if not low <= value <= high:
        raise ValidationError(f"{field}: must be between {low} and {high}, got {value}")
    return value


PROBLEMS_MAX = 20  # a batch with many bad items names this many, then "and N more"


def each_item(items: Sequence, check: Callable[[int, Any], Any]) -> list:
    """`check(i, item)` for every item; the bad ones are reported together (up to PROBLEMS_MAX),
    so a caller fixes a batch in one round, and nothing is written."""
    out, problems = [], []
    for i, item in enumerate(items):
        try:
            out.append(check(i, item))
        except ValidationError as exc:
            problems.append(exc)
    if problems:
        messages = [p.message for p in problems[:PROBLEMS_MAX]]
        if len(problems) > PROBLEMS_MAX:
            messages.append(f"and {len(problems) - PROBLEMS_MAX} more")
        raise ValidationError("; ".join(messages), hint=problems[0].hint)
    return out


def validate_entities(entities: Sequence[EntityInput], field: str = "entities", max_items: int = BATCH_MAX) -> list[EntityInput]:
    check_batch(entities, field, max_items)
    return each_item(entities, lambda i, e: validate_entity(e, f"{field}[{i}]"))


def validate_entity(e: EntityInput, at: str) -> EntityInput:
    obs = check_batch(e.observations, f"{at}.observations", ITEMS_PER_ENTRY_MAX)
    return EntityInput(
        name=clean_name(e.name, f"{at}.name"),
        entity_type=clean_type(e.entity_type, f"{at}.entityType"),
        observations=tuple(clean_text(o, f"{at}.observations[{j}]") for j, o in enumerate(obs)),
    )


def validate_relations(relations: Sequence[RelationInput], field: str = "relations", max_items: int = BATCH_MAX) -> list[RelationInput]:
    check_batch(relations, field, max_items)
    return each_item(relations, lambda i, r: validate_relation(r, f"{field}[{i}]"))


def validate_relation(r: RelationInput, at: str) -> RelationInput:
    return RelationInput(
        from_entity=clean_name(r.from_entity, f"{at}.from"),
        relation_type=clean_type(r.relation_type, f"{at}.relationType"),
        to_entity=clean_name(r.to_entity, f"{at}.to"),
    )


def validate_observation_batches(batches: Sequence[ObservationBatch], field: str, item_key: str) -> list[ObservationBatch]:
    check_batch(batches, field)

    def one(i: int, b: ObservationBatch) -> ObservationBatch:
        at = f"{field}[{i}]"
        contents = check_batch(b.contents, f"{at}.{item_key}", ITEMS_PER_ENTRY_MAX)
        return ObservationBatch(
            entity_name=clean_name(b.entity_name, f"{at}.entityName"),
            contents=tuple(clean_text(c, f"{at}.{item_key}[{j}]") for j, c in enumerate(contents)),
        )
    return each_item(batches, one)


def validate_names(names: Sequence[str], field: str) -> list[str]:
    check_batch(names, field)
    return [clean_name(n, f"{field}[{i}]") for i, n in enumerate(names)]


def validate_query(query: object, field: str = "query") -> str:
    text = _require_str(query, field).strip()
    if "\x00" in text:  # no engine stores or searches it (SQLite's FTS and PostgreSQL both fail on it)
        raise ValidationError(f"{field}: must not contain NUL (\\u0000)")
    if len(text) > QUERY_MAX:
        raise ValidationError(f"{field}: must be at most {QUERY_MAX} characters, got {len(text)}")
    return text


def clean_label(value: object, field: str, max_len: int) -> str:
    return _clean(value, field, max_len, _CONTROL, " (newline, tab, NUL)")


def validate_tags(tags: object, field: str = "tags", allow_empty: bool = True) -> list[str]:
    """Tags: trimmed one-line labels, duplicates dropped (a comma-separated string is accepted too)."""
    if isinstance(tags, str):
        tags = [t for t in tags.split(",") if t.strip()]
    tags = check_batch(tags, field, TAGS_MAX)
    if not tags and not allow_empty:
        raise ValidationError(f"{field}: give at least one tag")
    # Tags compare case-insensitively ("Bug" is "bug"): the first spelling of a tag is kept
    kept: dict[str, str] = {}
    for i, t in enumerate(tags):
        label = clean_label(t, f"{field}[{i}]", TAG_MAX)
        kept.setdefault(name_key(label), label)
    return list(kept.values())


def validate_importance(value: object, field: str = "importance") -> str:
    """One of IMPORTANCE, in any case and with surrounding spaces ("HIGH ", "High" are "high");
    stored in its lower-case form."""
    if not isinstance(value, str) or value.strip().lower() not in IMPORTANCE:
        raise ValidationError(f"{field}: must be one of {', '.join(IMPORTANCE)} (any case), got {value!r}")
    return value.strip().lower()


def _non_finite(value: object, path: str) -> str | None:
    """The path of the first NaN or infinity within `value`, if any (JSON has no such number)."""
    if isinstance(value, float) and not math.isfinite(value):
        return path
    if isinstance(value, dict):
        items: Sequence[tuple[object, object]] = list(value.items())
    elif isinstance(value, (list, tuple)):
        items = list(enumerate(value))
    else:
        return None
    for key, item in items:
        found = _non_finite(item, f"{path}[{key}]" if isinstance(key, int) else f"{path}.{key}")
        if found is not None:
            return found
    return None


def validate_metadata(value: object, field: str = "metadata") -> dict:
    if not isinstance(value, dict):
        raise ValidationError(f"{field}: must be an object, got {type(value).__name__}")
    where = _non_finite(value, field)
    if where is not None:
        raise ValidationError(f"{where}: must be a finite number (JSON has no NaN or Infinity)")
    try:
        size = len(json.dumps(value, ensure_ascii=False).encode())
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"{field}: must be JSON ({exc})") from exc
    if size > METADATA_MAX:
        raise ValidationError(f"{field}: at most {METADATA_MAX} bytes of JSON, got {size}")
    return value


def validate_memory(m: MemoryInput) -> MemoryInput:
    return MemoryInput(
        content=clean_text(m.content, "content", MEMORY_MAX),
        tags=tuple(validate_tags(list(m.tags))),
        memory_type=clean_label(m.memory_type, "memory_type", TAG_MAX),
        metadata=validate_metadata(m.metadata),
        importance=validate_importance(m.importance),
        entity=clean_name(m.entity, "entity") if m.entity else None,
    )


def validate_time(value: object, field: str) -> str | None:
    """An ISO 8601 date or time, as the UTC text memloci stores (None passes)."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ValidationError(f"{field}: must be an ISO date such as 2026-03-04, got {type(value).__name__}")
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise ValidationError(f"{field}: '{value}' is not an ISO date such as 2026-03-04 or 2026-03-04T10:00:00Z",
                              hint="For phrases like 'yesterday' or 'last week', use the `time` argument "
                                   "(retrieve_memory and list_memories).") from exc
    if parsed.tzinfo is not None:
        parsed = parsed.astimezone(UTC).replace(tzinfo=None)
    return parsed.strftime("%Y-%m-%dT%H:%M:%SZ")


def validate_filter(f: MemoryFilter) -> MemoryFilter:
    return MemoryFilter(
        tags=tuple(validate_tags(list(f.tags))),
        match_all=bool(f.match_all),
        memory_type=clean_label(f.memory_type, "memory_type", TAG_MAX) if f.memory_type else None,
        entity=clean_name(f.entity, "entity") if f.entity else None,
        after=validate_time(f.after, "after"),
        before=validate_time(f.before, "before"),
        include_superseded=bool(f.include_superseded),
        include_archived=bool(f.include_archived),
    )


# -- library schemas: rules a library may add on top of the limits above ------------------

@dataclass(frozen=True)
class LibrarySchema:
    """The rules of one library. The default adds nothing to the limits above; `strict` is
    the rule set of the strict-validation memory server (see STRICT)."""

    name: str = "default"
    name_pattern: str | None = None  # a regular expression every entity name must match
    name_max: int = NAME_MAX
    entity_types: tuple[str, ...] | None = None  # None: any type
    relation_types: tuple[str, ...] | None = None
    observation_max: int = OBSERVATION_MAX
    unique_observations: bool = False  # a repeated observation is an error, not a silent no-op
    unique_names: bool = False  # creating a name that exists is an error, not a merge
    self_relations: bool = True
    acyclic: tuple[str, ...] = ()  # relation types that must never form a cycle; ("*",): all together

    def describe(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(self).items()}

    # -- checks that need nothing but the input --------------------------------------

    def check_name(self, name: str, field: str) -> None:
        if len(name) > self.name_max:
            raise ValidationError(f"{field}: '{name[:40]}' is {len(name)} characters; schema '{self.name}' allows "
                                  f"at most {self.name_max}")
        if self.name_pattern and not re.fullmatch(self.name_pattern, name):
            raise ValidationError(f"{field}: '{name}' does not match schema '{self.name}' rule {self.name_pattern}",
                                  hint=_NAME_HINTS.get(self.name_pattern, "Rename it to match the rule."))

    def check_type(self, entity_type: str, field: str) -> None:
        if self.entity_types is not None and entity_type not in self.entity_types:
            raise ValidationError(f"{field}: '{entity_type}' is not an entity type of schema '{self.name}'",
                                  hint=f"Use one of: {', '.join(self.entity_types)}.")

    def check_observation(self, text: str, field: str) -> None:
        if not text.strip():
            raise ValidationError(f"{field}: must not be empty")
        if len(text) > self.observation_max:
            raise ValidationError(f"{field}: is {len(text)} characters; schema '{self.name}' allows at most "
                                  f"{self.observation_max}", hint="Split it into shorter observations.")

    def check_relation(self, r: RelationInput, field: str) -> None:
        if self.relation_types is not None and r.relation_type not in self.relation_types:
            raise InvalidRelationError(f"{field}.relationType: '{r.relation_type}' is not a relation type of schema "
                                       f"'{self.name}'", hint=f"Use one of: {', '.join(self.relation_types)}.")
        if not self.self_relations and r.from_entity.casefold() == r.to_entity.casefold():
            raise InvalidRelationError(f"{field}: '{r.from_entity}' cannot relate to itself in schema '{self.name}'",
                                       hint="Relate it to another entity; this schema allows no self-relations.")

    def check_entity(self, e: EntityInput, field: str) -> None:
        self.check_name(e.name, f"{field}.name")
        self.check_type(e.entity_type, f"{field}.entityType")
        seen: set[str] = set()
        for j, o in enumerate(e.observations):
            self.check_observation(o, f"{field}.observations[{j}]")
            if self.unique_observations and o in seen:
                raise ValidationError(f"{field}.observations[{j}]: '{o[:40]}' is given twice; schema '{self.name}' "
                                      "keeps observations unique per entity")
            seen.add(o)

    def acyclic_types(self, relation_type: str) -> tuple[str, ...] | None:
        """The relation types a new relation of this type must not close a cycle over (None: no check)."""
        if "*" in self.acyclic:
            return ()  # every type together
        return (relation_type,) if relation_type in self.acyclic else None


STRICT = LibrarySchema(
    name="strict",
    name_pattern=r"[a-z][a-z0-9-]*",
    name_max=100,
    entity_types=("person", "concept", "project", "document", "tool", "organization", "location", "event"),
    relation_types=("knows", "contains", "uses", "created", "belongs-to", "depends-on", "related-to"),
    observation_max=500,
    unique_observations=True,
    unique_names=True,
    self_relations=False,
    acyclic=("*",),
)
DEFAULT_SCHEMA = LibrarySchema()
PRESETS = {"default": DEFAULT_SCHEMA, "strict": STRICT}
_NAME_HINTS = {STRICT.name_pattern: "Lowercase letters, digits and hyphens, starting with a letter: "
                                    "python-project, meeting-notes-2024, user-john."}


def schema_from_config(value: object, field: str) -> LibrarySchema:
    """A preset name ("strict") or a table of LibrarySchema fields (a custom schema)."""
    if isinstance(value, str):
        if value not in PRESETS:
            raise ValidationError(f"{field}: unknown schema '{value}'; presets: {', '.join(PRESETS)}")
        return PRESETS[value]
    if not isinstance(value, dict):
        raise ValidationError(f"{field}: a preset name or a table of rules")
    base = PRESETS.get(str(value.get("preset", "default")))
    if base is None:
        raise ValidationError(f"{field}.preset: unknown schema '{value.get('preset')}'")
    known = set(LibrarySchema.__dataclass_fields__)
    unknown = sorted(set(value) - known - {"preset"})
    if unknown:
        raise ValidationError(f"{field}: unknown rule(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    kinds: dict[str, type] = {"name_pattern": str, "name_max": int, "entity_types": list, "relation_types": list,
             "observation_max": int, "unique_observations": bool, "unique_names": bool, "self_relations": bool,
             "acyclic": list}
    for k, v in value.items():
        want = kinds.get(k)
        if want is not None and (not isinstance(v, want) or (want is int and isinstance(v, bool))
                                 or (want is list and not all(isinstance(x, str) for x in cast("list[object]", v)))):
            shape = {str: "a string", int: "a number", bool: "true or false", list: "a list of strings"}[want]
            raise ValidationError(f"{field}.{k}: must be {shape}, got {v!r}")
    rules: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in value.items() if k != "preset"}
    if rules.get("name_pattern"):
        try:
            re.compile(rules["name_pattern"])
        except re.error as exc:
            raise ValidationError(f"{field}.name_pattern: not a regular expression: {exc}") from exc
    return replace(base, **{"name": "custom", **rules})
