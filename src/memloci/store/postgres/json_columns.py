"""Python values as psycopg parameters for the engine's JSON columns: `jsonb` (tags, aliases)
and `json` (metadata, whose keys keep the order they were written in)."""

from __future__ import annotations

from typing import Any


def as_jsonb(value: Any) -> Any:
    """For `jsonb` columns."""
    from psycopg.types.json import Jsonb

    return Jsonb(value)


def as_json(value: Any) -> Any:
    """For `json` columns (metadata): the keys stay in the order they were written."""
    from psycopg.types.json import Json

    return Json(value)
