"""How a dashboard API request is served, the same way for every endpoint of the route table:
who calls (auth.py; 401 when not signed in), the query string and body checked against the
endpoint's models (400 VALIDATION_ERROR naming the field and the rule), the CSRF header on a
cookie write, then the endpoint's function off the event loop, and every MemlociError as
`{"error": {"code", "message", "hint"}}` with its HTTP status. Never a traceback."""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio.to_thread
import pydantic
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from memloci.core.errors import InternalError, MemlociError, NotFoundError, ValidationError
from memloci.http.dashboard.auth import SAFE_METHODS, Access, UnsupportedMediaTypeError, Who, check_site, refused
from memloci.http.limits import RateLimiter
from memloci.service.facade import MemoryService

log = logging.getLogger("memloci.http")
access_log = logging.getLogger("memloci.access")
STATUS = {"VALIDATION_ERROR": 400, "INVALID_RELATION": 400, "UNAUTHORIZED": 401, "PERMISSION_DENIED": 403,
          "CSRF": 403, "NOT_FOUND": 404, "LIBRARY_MISSING": 404, "ALREADY_EXISTS": 409, "CONFLICT": 409,
          "AWAITING_CONFIRMATION": 409, "TOO_LARGE": 413, "UNSUPPORTED_MEDIA_TYPE": 415, "RATE_LIMITED": 429, "STORAGE_FULL": 507,
          "STORAGE_UNAVAILABLE": 503, "SHUTTING_DOWN": 503}
NO_STORE = {"cache-control": "no-store"}
RETRY_AFTER_SECONDS = 5  # what a 503 during shutdown tells the client (as /mcp's)


@dataclass(frozen=True)
class Endpoint:
    """One row of the route table: what openapi.py documents and endpoint.serve runs."""

    method: str
    path: str  # Starlette's form: /api/memories/{hash}
    run: Callable[[Context, Any, Any], Any]  # (context, query, body) -> the answer's JSON data
    summary: str
    query: type[pydantic.BaseModel] | None = None
    body: type[pydantic.BaseModel] | None = None
    answer: str = ""  # the answer's shape, in words (OpenAPI)
    status: int = 200
    signed_in: bool = True  # False: answered without a sign-in (the session endpoints)
    writes: bool = False  # True: a change (a scope's write level, the CSRF header, a live-event nudge)
    tags: tuple[str, ...] = field(default=())


@dataclass
class Context:
    """What an endpoint's function gets: the service, the caller, the request's path parameters."""

    service: MemoryService
    who: Who | None
    request: Request
    access: Access
    params: dict[str, Any]
    limiter: RateLimiter = field(default_factory=lambda: RateLimiter(0))
    set_cookies: list[dict[str, Any]] = field(default_factory=list)
    delete_cookies: list[str] = field(default_factory=list)

    @property
    def caller(self) -> Who:
        assert self.who is not None  # endpoints needing a caller are reached only with one
        return self.who

    def libraries(self, level: str = "read") -> list[str]:
        """The mounted libraries the caller may `level`."""
        return [n for n in self.service.libraries.names() if self.caller.may(n, level)]

    def library(self, named: str | None, level: str, what: str) -> str:
        """The mounted library a request names (or the one mounted), checked for `level`."""
        mounted = self.service.libraries.names()
        who = self.caller
        if named is None or not named.strip():
            if len(mounted) == 1:
                who.need(mounted[0], level, what)
                return mounted[0]
            raise ValidationError(f"library: several libraries are mounted; name one of: "
                                  f"{', '.join(self.libraries()) or '(none for this sign-in)'}")
        found = next((m for m in mounted if m.casefold() == named.strip().casefold()), None)
        if found is None:
            who.need(named, "read", what)  # never say whether a library outside its scopes exists
            raise NotFoundError(f"library: '{named}' is not mounted; yours: {', '.join(self.libraries()) or '(none)'}")
        who.need(found, level, what)
        return found


def error_response(exc: MemlociError) -> JSONResponse:
    return JSONResponse(exc.to_dict(), status_code=STATUS.get(exc.code, 500), headers=NO_STORE)


def checked(model: type[pydantic.BaseModel], data: Any, where: str) -> Any:
    """`data` as `model`, or a ValidationError naming the field and the rule."""
    try:
        return model.model_validate(data)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        name = ".".join(str(p) for p in first["loc"]) or where
        if first["type"] == "extra_forbidden":
            allowed = ", ".join(model.model_fields) or "none"
            raise ValidationError(f"{name}: unknown {where} (allowed: {allowed})") from None
        if first["type"] == "missing":
            raise ValidationError(f"{name}: required {where}") from None
        raise ValidationError(f"{name}: {first['msg']}") from None


def query_data(request: Request, model: type[pydantic.BaseModel]) -> dict[str, Any]:
    """The query string as the model's fields want it: a list field takes every value, another
    field its one value (given twice: refused)."""
    data: dict[str, Any] = {}
    for key in dict.fromkeys(request.query_params.keys()):
        values = request.query_params.getlist(key)
        info = model.model_fields.get(key)
        if info is not None and getattr(info.annotation, "__origin__", None) is list:
            data[key] = values
        elif len(values) > 1:
            raise ValidationError(f"{key}: given {len(values)} times; give it once")
        else:
            data[key] = values[0]
    return data


async def body_data(request: Request, max_body: int) -> Any:
    """The request's JSON body ({} when empty). A body must say `Content-Type: application/json`:
    a form or text/plain body (which any site may post) is refused with 415 before it is read."""
    declared = request.headers.get("content-type", "").split(";")[0].strip().casefold()
    if declared != "application/json" and request.headers.get("content-length", "") not in ("", "0"):
        raise UnsupportedMediaTypeError(f"header Content-Type: {declared or 'missing'}; a body must be "
                                        "application/json (nothing was done)")
    chunks, size = [], 0
    async for chunk in request.stream():  # read no further than the limit
        size += len(chunk)
        if size > max_body:
            raise BodyTooLargeError(f"body: over the limit of {max_body} bytes (the server's --max-body)")
        chunks.append(chunk)
    raw = b"".join(chunks)
    if not raw.strip():
        return {}
    if declared != "application/json":
        raise UnsupportedMediaTypeError(f"header Content-Type: {declared or 'missing'}; a body must be "
                                        "application/json (nothing was done)")
    try:
        return json.loads(raw, parse_constant=_no_constant)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValidationError(f"body: not valid JSON ({exc})") from None


def _no_constant(name: str) -> Any:
    """Python's json reads NaN, Infinity and -Infinity, which JSON does not have: refused."""
    raise ValidationError(f"body: {name} is not JSON (numbers must be finite)",
                          hint="Send a finite number, or the value as a string.")


class RateLimitedError(MemlociError):
    code = "RATE_LIMITED"


class BodyTooLargeError(MemlociError):
    code = "TOO_LARGE"
    default_hint = "Send less in one request."


class ShuttingDownError(MemlociError):
    code = "SHUTTING_DOWN"
    default_hint = f"Retry in {RETRY_AFTER_SECONDS} s, once the server is back."


def sign_in_key(request: Request) -> str:
    """The rate a client address's failed sign-ins take from (a token cannot be guessed, but a
    flood of tries is refused all the same; one address cannot lock the others out)."""
    return f"(failed sign-ins from {request.client.host if request.client else 'unknown'})"


def check_rate(request: Request, who: Who | None, limiter: RateLimiter) -> None:
    """A token's changes take from its rate as its /mcp calls do; a sign-in is refused while its
    address's failed sign-ins are over the rate (the endpoint counts a failure)."""
    if request.method in SAFE_METHODS:
        return
    if request.method == "POST" and request.url.path == "/api/session":
        key = sign_in_key(request)
        wait = limiter.waiting(key)
    else:
        key = who.name if who is not None and who.name else ""
        wait = limiter.take(key) if key else 0.0
    if wait > 0:
        seconds = max(1, math.ceil(wait))
        what = f"{key} may make {limiter.per_minute} changes" if not key.startswith("(") else \
            f"{limiter.per_minute} {key[1:-1]} are allowed"
        raise RateLimitedError(f"rate limited: {what} a minute; retry after {seconds} s",
                               details={"retry_after": seconds})


@dataclass(frozen=True)
class Serving:
    """What every endpoint is served with: the tokens' rate, the body limit (--max-body), and
    whether a shutdown was asked for (then a write is refused with 503, as /mcp's calls are)."""

    limiter: RateLimiter = field(default_factory=lambda: RateLimiter(0))
    max_body: int = 4 * 1024 * 1024
    stopping: Callable[[], bool] = lambda: False


def serve(endpoints: dict[str, Endpoint], service: MemoryService, access: Access, server: Any,
          changed: Callable[[], None], serving: Serving) -> Callable[[Request], Any]:
    """The Starlette endpoint of one path: `endpoints` by method. `changed()` is called after a
    write (the live events' nudge)."""
    limiter = serving.limiter
    async def handle(request: Request) -> Response:
        endpoint = endpoints[request.method if request.method != "HEAD" else "GET"]
        started = time.monotonic()
        response = await answer(request, endpoint)
        if access_log.isEnabledFor(logging.INFO):  # the route, never its values or the query: they may be private
            caller = request.scope.get("memloci.who")
            access_log.info("api token=%s method=%s route=%s status=%d ms=%.1f",
                            (caller.name or "-") if caller is not None else "-", request.method, endpoint.path,
                            response.status_code, (time.monotonic() - started) * 1000)
        return response

    async def answer(request: Request, endpoint: Endpoint) -> Response:
        try:
            who = await access.who(request)
            request.scope["memloci.who"] = who
            check_site(request, who)
            check_rate(request, who, limiter)
            if endpoint.signed_in and (refusal := refused(who)) is not None:
                raise refusal
            query = checked(endpoint.query, query_data(request, endpoint.query), "parameter") if endpoint.query else None
            if who is not None and endpoint.signed_in:
                access.check_csrf(request, who)
            if endpoint.writes and serving.stopping():
                raise ShuttingDownError("the server is shutting down: it answers the calls already running and "
                                        "takes no new changes; nothing was done", details={
                                            "retry_after": RETRY_AFTER_SECONDS})
            body = checked(endpoint.body, await body_data(request, serving.max_body), "field") if endpoint.body else None
            context = Context(service, who, request, access, dict(request.path_params), limiter)
            server.calls_in_flight += 1  # a shutdown's drain waits for it, as for a tool call
            try:
                data = await anyio.to_thread.run_sync(lambda: endpoint.run(context, query, body))
            finally:
                server.calls_in_flight -= 1
            if endpoint.writes:
                changed()
            # built and serialised here, so a value JSON cannot hold is the JSON INTERNAL_ERROR, not a text 500
            response = data if isinstance(data, Response) else JSONResponse(data, status_code=endpoint.status,
                                                                            headers=NO_STORE)
        except MemlociError as exc:
            failed = error_response(exc)
            if "retry_after" in exc.details:
                failed.headers["retry-after"] = str(exc.details["retry_after"])
            return failed
        except Exception:
            log.exception("dashboard %s %s failed", request.method, endpoint.path)
            return error_response(InternalError("the server failed to answer; the log says why",
                                                hint="Nothing is known to be changed; check with GET /api/history."))
        for cookie in context.set_cookies:
            response.set_cookie(**cookie)
        for name in context.delete_cookies:
            response.delete_cookie(name, path="/")
        return response

    return handle
