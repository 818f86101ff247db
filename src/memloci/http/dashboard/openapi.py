"""`GET /api/openapi.json`: the API described as OpenAPI 3.1, made from the route table (each
Endpoint's method, path, summary, answer) and the pydantic models of its query and body, so an
endpoint cannot be added without its description."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from memloci import __version__
from memloci.http.dashboard.auth import CSRF_HEADER, SESSION_COOKIE
from memloci.http.dashboard.endpoint import Endpoint

ERROR = {"type": "object", "properties": {"error": {"type": "object", "required": ["code", "message"], "properties": {
    "code": {"type": "string"}, "message": {"type": "string"}, "hint": {"type": "string"}}}}, "required": ["error"]}
ERRORS = {"400": "VALIDATION_ERROR: a parameter or field is unknown or breaks its rule (named)",
          "401": "UNAUTHORIZED: not signed in", "403": "PERMISSION_DENIED (the scope needed is named) or CSRF",
          "404": "NOT_FOUND", "409": "CONFLICT", "500": "INTERNAL_ERROR"}
EXTRA = [  # endpoints outside the route table of JSON endpoints
    ("get", "/api/events", "Server-sent events: `change` per new journal entry of a readable library; "
                           "`: ping` every 15 s", "text/event-stream", ("events",)),
]


def openapi_path(path: str) -> str:
    """Starlette's `/api/history/{id:int}/undo` as OpenAPI's `/api/history/{id}/undo`."""
    return re.sub(r"\{(\w+):\w+\}", r"{\1}", path)


def _parameters(endpoint: Endpoint, defs: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for name in re.findall(r"\{(\w+)(?::(\w+))?\}", endpoint.path):
        out.append({"name": name[0], "in": "path", "required": True,
                    "schema": {"type": "integer" if name[1] == "int" else "string"}})
    if endpoint.query is not None:
        schema = endpoint.query.model_json_schema(ref_template="#/components/schemas/{model}")
        defs.update(schema.pop("$defs", {}))
        required = set(schema.get("required", []))
        for name, prop in schema.get("properties", {}).items():
            param = {"name": name, "in": "query", "required": name in required, "schema": prop}
            if prop.get("type") == "array":
                param.update(style="form", explode=True)
            if "description" in prop:
                param["description"] = prop["description"]
            out.append(param)
    return out


def spec(endpoints: Sequence[Endpoint]) -> dict[str, Any]:
    paths: dict[str, dict[str, Any]] = {}
    schemas: dict[str, Any] = {"Error": ERROR}
    for e in endpoints:
        op: dict[str, Any] = {"summary": e.summary, "operationId": f"{e.method.lower()}_{e.run.__name__}",
                              "tags": list(e.tags), "parameters": _parameters(e, schemas)}
        if e.body is not None:
            schema = e.body.model_json_schema(ref_template="#/components/schemas/{model}")
            schemas.update(schema.pop("$defs", {}))
            schemas[e.body.__name__] = schema
            op["requestBody"] = {"required": True, "content": {"application/json": {
                "schema": {"$ref": f"#/components/schemas/{e.body.__name__}"}}}}
        op["responses"] = {str(e.status): {"description": e.answer or "OK",
                                           "content": {"application/json": {"schema": {"type": "object"}}}},
                           **{code: {"description": text, "content": {"application/json": {
                               "schema": {"$ref": "#/components/schemas/Error"}}}} for code, text in ERRORS.items()}}
        if e.signed_in:
            op["security"] = [{"cookie": []}, {"bearer": []}, {}]  # {}: open mode (loopback, no token)
        else:
            op["security"] = []
        if e.writes:
            op["parameters"].append({"name": CSRF_HEADER, "in": "header", "required": False, "schema": {
                "type": "string"}, "description": "Required with the cookie (and in open mode): GET /api/session's csrf"})
        paths.setdefault(openapi_path(e.path), {})[e.method.lower()] = op
    for method, path, summary, media, tags in EXTRA:
        paths.setdefault(path, {})[method] = {"summary": summary, "tags": list(tags), "operationId": path.rsplit("/", 1)[1],
                                              "responses": {"200": {"description": summary, "content": {media: {}}}},
                                              "security": [{"cookie": []}, {"bearer": []}, {}]}
    return {"openapi": "3.1.0",
            "info": {"title": "memloci dashboard API", "version": __version__,
                     "description": "The JSON API the dashboard page uses, for scripts too: the same tokens and "
                                    "scopes as /mcp (LIBRARY:read to read, LIBRARY:write to change)."},
            "paths": paths,
            "components": {"schemas": schemas, "securitySchemes": {
                "cookie": {"type": "apiKey", "in": "cookie", "name": f"{SESSION_COOKIE}_PORT",
                           "description": "memloci_session_<the server's port>: POST /api/session with a token "
                                          "sets it; writes need X-CSRF-Token"},
                "bearer": {"type": "http", "scheme": "bearer", "description": "A token of memloci token create"}}}}
