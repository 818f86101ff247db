"""Validation rules and limits for everything a caller sends.

Every rule raises `ValidationError` naming the field (`entities[2].name`) and the rule,
before anything is written, so a rejected batch changes nothing.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

from .errors import ValidationError
from .model import EntityInput, ObservationBatch, RelationInput

# Limits, documented in the README ("Limits"). Generous for real use, small enough that one
# call cannot exhaust memory or flood a model's context.
NAME_MAX = 256
TYPE_MAX = 128
OBSERVATION_MAX = 10_000
QUERY_MAX = 1_000
BATCH_MAX = 1_000
ITEMS_PER_ENTRY_MAX = 1_000
PAGE_MAX = 10_000
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
