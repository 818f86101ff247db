"""Shaping tool replies: structured content plus its JSON text, and errors as `{error: {...}}`."""

from __future__ import annotations

import json
from typing import Any

import pydantic
from mcp_types import CallToolResult, TextContent

from ..errors import MemlociError, ValidationError


def as_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


def reply(structured: dict[str, Any], text: Any = None) -> CallToolResult:
    """A successful result. `text` is what the text content shows (default: the structured JSON);
    the nine official tools pass the official server's text shape here, since clients parse it."""
    if text is None:
        text = structured
    body = text if isinstance(text, str) else as_json(text)
    return CallToolResult(content=[TextContent(type="text", text=body)], structured_content=structured)


def error_reply(error: MemlociError) -> CallToolResult:
    body = error.to_dict()
    return CallToolResult(content=[TextContent(type="text", text=as_json(body))], structured_content=body, is_error=True)


def describe_validation_error(exc: pydantic.ValidationError) -> ValidationError:
    """Turn the SDK's argument validation failure into our VALIDATION_ERROR, one line per field."""
    problems = []
    for err in exc.errors():
        path = ""
        for part in err["loc"]:
            path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
        problems.append(f"{path or 'arguments'}: {err['msg']}")
    return ValidationError("; ".join(problems), hint="Fix the named arguments to match the tool's input schema; nothing was changed.")
