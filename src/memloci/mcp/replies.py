"""Shaping tool replies: structured content plus its JSON text, and errors as `{error: {...}}`."""

from __future__ import annotations

import json
from typing import Any

from mcp_types import CallToolResult, TextContent

from memloci.core.errors import MemlociError


def as_json(value: Any) -> str:
    # allow_nan=False: Infinity and NaN are not JSON; a reply must never carry them
    return json.dumps(value, indent=2, ensure_ascii=False, allow_nan=False)


def reply(structured: dict[str, Any], text: Any = None) -> CallToolResult:
    """A successful result. `text` is what the text content shows (default: the structured JSON);
    the nine official tools pass the official server's text shape here, since clients parse it."""
    if text is None:
        text = structured
    body = text if isinstance(text, str) else as_json(text)
    return CallToolResult(content=[TextContent(type="text", text=body)], structured_content=structured)


def error_reply(error: MemlociError, body: dict[str, Any] | None = None, *, structured: bool = False) -> CallToolResult:
    """Every tool error, shaped here: `isError`, and memloci's `{error: {code, message, hint,
    details?}}` as text. A tool set standing in for another server passes `body`, that server's
    form of the same error (n2n.error_body, strict.error_body). No structured content unless
    `structured`: it would be checked against the tool's output schema, and clients on the
    TypeScript SDK reject the whole reply when it does not match (-32602); only the strict set,
    whose output schema is an open object and whose clients read either, sets it."""
    body = body if body is not None else error.to_dict()
    return CallToolResult(content=[TextContent(type="text", text=as_json(body))],
                          structured_content=body if structured else None, is_error=True)
