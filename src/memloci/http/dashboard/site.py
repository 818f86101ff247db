"""The page's files (`static/`, shipped in the wheel) at `/` and `/static/NAME`, and the
security headers every dashboard answer carries: the page may load only its own server's
scripts, styles and data, may not be framed, and sends no referrer."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from memloci.core.errors import NotFoundError

STATIC = Path(__file__).parent / "static"
NAME = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,99}$")  # one file of static/, no folder, no dot first
TYPES = {".html": "text/html; charset=utf-8", ".css": "text/css; charset=utf-8",
         ".js": "text/javascript; charset=utf-8", ".svg": "image/svg+xml", ".png": "image/png",
         ".ico": "image/x-icon", ".json": "application/json", ".md": "text/plain; charset=utf-8"}
CSP = ("default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; "
       "frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
HEADERS = [(b"content-security-policy", CSP.encode()), (b"x-content-type-options", b"nosniff"),
           (b"referrer-policy", b"no-referrer"), (b"x-frame-options", b"DENY")]


class SecurityHeaders:
    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def with_headers(message: Any) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *HEADERS]}
            await send(message)

        await self.app(scope, receive, with_headers)


def _file(name: str) -> Response:
    path = STATIC / name
    if not NAME.match(name) or path.is_symlink() or not path.is_file():
        error = NotFoundError(f"/static/{name}: no such file of the page")
        return JSONResponse(error.to_dict(), status_code=404)
    return FileResponse(path, media_type=TYPES.get(path.suffix, "application/octet-stream"),
                        headers={"cache-control": "no-cache"})


async def index(request: Request) -> Response:
    return _file("index.html")


async def static_file(request: Request) -> Response:
    return _file(request.path_params["file"])
