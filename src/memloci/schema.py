"""Validation rules and limits for everything a caller sends.

Every rule raises `ValidationError` naming the field (`entities[2].name`) and the rule,
before anything is written, so a rejected batch changes nothing.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

from .errors import ValidationError
import json
from datetime import datetime, timezone

from .model import IMPORTANCE, EntityInput, MemoryFilter, MemoryInput, ObservationBatch, RelationInput

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


def validate_entities(entities: Sequence[EntityInput], field: str = "entities", max_items: int = BATCH_MAX) -> list[EntityInput]:
    check_batch(entities, field, max_items)
    return [validate_entity(e, f"{field}[{i}]") for i, e in enumerate(entities)]


def validate_entity(e: EntityInput, at: str) -> EntityInput:
    obs = check_batch(e.observations, f"{at}.observations", ITEMS_PER_ENTRY_MAX)
    return EntityInput(
        name=clean_name(e.name, f"{at}.name"),
        entity_type=clean_type(e.entity_type, f"{at}.entityType"),
        observations=tuple(clean_text(o, f"{at}.observations[{j}]") for j, o in enumerate(obs)),
    )


def validate_relations(relations: Sequence[RelationInput], field: str = "relations", max_items: int = BATCH_MAX) -> list[RelationInput]:
    check_batch(relations, field, max_items)
    return [validate_relation(r, f"{field}[{i}]") for i, r in enumerate(relations)]


def validate_relation(r: RelationInput, at: str) -> RelationInput:
    return RelationInput(
        from_entity=clean_name(r.from_entity, f"{at}.from"),
        relation_type=clean_type(r.relation_type, f"{at}.relationType"),
        to_entity=clean_name(r.to_entity, f"{at}.to"),
    )


def validate_observation_batches(batches: Sequence[ObservationBatch], field: str, item_key: str) -> list[ObservationBatch]:
    check_batch(batches, field)
    out = []
    for i, b in enumerate(batches):
        at = f"{field}[{i}]"
        contents = check_batch(b.contents, f"{at}.{item_key}", ITEMS_PER_ENTRY_MAX)
        out.append(
            ObservationBatch(
                entity_name=clean_name(b.entity_name, f"{at}.entityName"),
                contents=tuple(clean_text(c, f"{at}.{item_key}[{j}]") for j, c in enumerate(contents)),
            )
        )
    return out


def validate_names(names: Sequence[str], field: str) -> list[str]:
    check_batch(names, field)
    return [clean_name(n, f"{field}[{i}]") for i, n in enumerate(names)]


def validate_query(query: object, field: str = "query") -> str:
    text = _require_str(query, field).strip()
    if len(text) > QUERY_MAX:
        raise ValidationError(f"{field}: must be at most {QUERY_MAX} characters, got {len(text)}")
    return text


def clean_label(value: object, field: str, max_len: int) -> str:
    return _clean(value, field, max_len, _CONTROL, " (newline, tab, NUL)")


def validate_tags(tags: object, field: str = "tags", allow_empty: bool = True) -> list[str]:
    """Tags: trimmed one-line labels, duplicates dropped (a comma-separated string is accepted too)."""
    if isinstance(tags, str):
        tags = [t for t in tags.split(",") if t.strip()]
    check_batch(tags, field, TAGS_MAX)
    if not tags and not allow_empty:
        raise ValidationError(f"{field}: give at least one tag")
    return list(dict.fromkeys(clean_label(t, f"{field}[{i}]", TAG_MAX) for i, t in enumerate(tags)))


def validate_importance(value: object, field: str = "importance") -> str:
    if value not in IMPORTANCE:
        raise ValidationError(f"{field}: must be one of {', '.join(IMPORTANCE)}, got {value!r}")
    return value  # type: ignore[return-value]


def validate_metadata(value: object, field: str = "metadata") -> dict:
    if not isinstance(value, dict):
        raise ValidationError(f"{field}: must be an object, got {type(value).__name__}")
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
                              hint="For phrases like 'yesterday' or 'last week', use the `time` argument.") from exc
    if parsed.tzinfo is not None:
        parsed = parsed.astimezone(timezone.utc).replace(tzinfo=None)
    return parsed.strftime("%Y-%m-%dT%H:%M:%SZ")


def validate_filter(f: MemoryFilter) -> MemoryFilter:
    return MemoryFilter(
        tags=tuple(validate_tags(list(f.tags))),
        match_all=bool(f.match_all),
        memory_type=clean_label(f.memory_type, "memory_type", TAG_MAX) if f.memory_type else None,
        entity=clean_name(f.entity, "entity") if f.entity else None,
        after=validate_time(f.after, "after"),
        before=validate_time(f.before, "before"),
    )
