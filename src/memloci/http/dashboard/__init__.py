"""The dashboard: a page for people at `/` and its JSON API under `/api/`, served by the HTTP
server beside `/mcp` (http/app.py mounts `dashboard_app`).

- `auth.py`      sign-in, the cookie session, CSRF, who calls (the same tokens and scopes as /mcp)
- `endpoint.py`  how an API request is served: the caller, the checks of its query and body, errors
- `api.py`       the session, libraries, search, memories, history, health endpoints (+ the route table)
- `entities.py`  the entities, graph and lifecycle previews endpoints
- `models.py`    the pydantic models of query strings and bodies (extra="forbid")
- `found.py`     search across memories, entities and notes (also `memloci search`)
- `render.py`    a note's Markdown body as safe HTML
- `events.py`    `/api/events`: server-sent events on each new journal entry
- `openapi.py`   `/api/openapi.json` from the route table and the models
- `static/`      the page (index.html, CSS, JS): no CDN, nothing beyond the server's own origin
- `site.py`      the page's files and the security headers of every answer
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from mcp.server.auth.provider import TokenVerifier
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp

from memloci.core.errors import NotFoundError, ValidationError
from memloci.http.dashboard import api, entities
from memloci.http.dashboard.auth import Access
from memloci.http.dashboard.endpoint import Context, Endpoint, Serving, error_response, serve
from memloci.http.dashboard.events import Changes, events_endpoint
from memloci.http.dashboard.openapi import spec
from memloci.http.dashboard.site import SecurityHeaders, index, static_file
from memloci.service.facade import MemoryService


def openapi_document(ctx: Context, query: Any, body: Any) -> dict[str, Any]:
    return DOCUMENT


ROUTES: list[Endpoint] = [*api.ROUTES, *entities.ROUTES, Endpoint(
    "GET", "/api/openapi.json", openapi_document, "This description of the API (OpenAPI 3.1)",
    answer="OpenAPI 3.1", tags=("meta",))]
DOCUMENT = spec(ROUTES)


def dashboard_app(service: MemoryService, server: Any, *, verifiers: Sequence[TokenVerifier] = (),
                  open_while: Callable[[], bool] | None = None, serving: Serving | None = None) -> ASGIApp:
    """The page and the API as one ASGI app (the caller puts the Host/Origin check in front).
    `verifiers` and `open_while` as /mcp's (http/app.py build_http_app); `serving`: the tokens'
    rate (which a signed-in caller's changes and each address's failed sign-ins take from), the
    body limit, the shutdown's state (none: no limit, never stopping)."""
    serving = serving or Serving()
    access = Access(verifiers, open_while)
    changes = Changes()
    server.change_listeners.append(changes.nudge)  # a tool call's change: the streams read the journal now
    by_path: dict[str, dict[str, Endpoint]] = {}
    for endpoint in ROUTES:
        by_path.setdefault(endpoint.path, {})[endpoint.method] = endpoint
    routes = [Route(path, serve(methods, service, access, server, changes.nudge, serving),
                    methods=list(methods))
              for path, methods in by_path.items()]
    routes += [Route("/api/events", events_endpoint(service, access, changes), methods=["GET"]),
               Route("/", index, methods=["GET"]),
               Route("/static/{file:path}", static_file, methods=["GET"])]
    return SecurityHeaders(Starlette(routes=routes, exception_handlers={404: not_found, 405: not_allowed}))


async def not_found(request: Request, exc: Exception) -> Response:
    return error_response(NotFoundError(f"{request.url.path}: no such page or API endpoint",
                                        hint="The API's endpoints are listed at /api/openapi.json."))


async def not_allowed(request: Request, exc: Exception) -> Response:
    response = error_response(ValidationError(f"{request.method} {request.url.path}: not a method of this endpoint",
                                              hint="The API's endpoints are listed at /api/openapi.json."))
    response.status_code = 405
    return response
